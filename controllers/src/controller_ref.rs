//! Claiming: which objects a controller manages — adopt orphans, release strays.
//!
//! Mirrors `pkg/controller/controller_ref_manager.go` (`BaseControllerRefManager.ClaimObject`,
//! `ClaimPods`, `ClaimReplicaSets`, `ownerRefControllerPatch`,
//! `GenerateDeleteOwnerRefStrategicMergeBytes`).
//!
//! A controller selects objects by labels but *owns* them through an ownerReference with
//! `controller: true`. Claiming reconciles the two:
//!
//! ```text
//!                          selector matches          selector doesn't match
//!   controlled by us       claimed                   release ($patch: delete our ref)
//!   controlled by other    ignored                   ignored
//!   orphan (no controller) adopt (add our ref)*      ignored
//!
//!   * not when we are being deleted, the object is being deleted, or namespaces differ
//! ```
//!
//! Kubernetes re-reads the controller with a live GET before the first adoption
//! (`RecheckDeletionTimestamp`) so a controller deleted a moment ago does not adopt; the shell
//! should do the same before executing [`Claims::adoptions`].

use apimachinery::{ObjectRef, Selector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde_json::json;

use crate::action::{Action, PatchType};
use crate::owner_ref::{get_controller_of, new_controller_ref, uid};

/// What claiming decided for one object.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimDecision {
    /// Already ours and matching.
    Owned,
    /// An orphan that matches: adopt it with this patch.
    Adopt(Action),
    /// Ours but no longer matching: release it with this patch.
    Release(Action),
    /// Not ours to take (another controller's, or a non-matching orphan, or we are being
    /// deleted).
    Ignore,
}

/// The result of [`claim_objects`].
#[derive(Debug)]
pub struct Claims<'a, K> {
    /// Objects the controller manages after the patches succeed (owned + adopted).
    pub claimed: Vec<&'a K>,
    /// Strategic-merge patches adding our controller ownerReference.
    pub adoptions: Vec<Action>,
    /// Strategic-merge patches deleting our ownerReference.
    pub releases: Vec<Action>,
}

/// `ClaimObject`: decide for `obj` (with `matches`: does the controller's selector select it).
pub fn claim_object<C, K>(controller: &C, obj: &K, matches: bool) -> ClaimDecision
where
    C: Resource + Metadata<Ty = ObjectMeta>,
    K: Resource + Metadata<Ty = ObjectMeta>,
{
    let controller_meta = controller.metadata();
    let meta = obj.metadata();
    let controller_being_deleted = controller_meta.deletion_timestamp.is_some();
    if let Some(controller_ref) = get_controller_of(meta) {
        if controller_ref.uid != uid(controller_meta) {
            return ClaimDecision::Ignore;
        }
        if matches {
            return ClaimDecision::Owned;
        }
        if controller_being_deleted {
            return ClaimDecision::Ignore;
        }
        return ClaimDecision::Release(release_patch(controller_meta, obj));
    }
    if controller_being_deleted || !matches || meta.deletion_timestamp.is_some() {
        return ClaimDecision::Ignore;
    }
    let controller_ns = controller_meta.namespace.as_deref().unwrap_or("");
    if !controller_ns.is_empty() && Some(controller_ns) != meta.namespace.as_deref() {
        return ClaimDecision::Ignore;
    }
    ClaimDecision::Adopt(adopt_patch(controller, obj))
}

/// `ClaimPods` / `ClaimReplicaSets`: claim every object of `objects` for `controller` with
/// `selector`.
pub fn claim_objects<'a, C, K>(
    controller: &C,
    selector: &Selector,
    objects: &'a [K],
) -> Claims<'a, K>
where
    C: Resource + Metadata<Ty = ObjectMeta>,
    K: Resource + Metadata<Ty = ObjectMeta>,
{
    let mut claims = Claims {
        claimed: Vec::new(),
        adoptions: Vec::new(),
        releases: Vec::new(),
    };
    let empty = Default::default();
    for obj in objects {
        let matches = selector.matches(obj.metadata().labels.as_ref().unwrap_or(&empty));
        match claim_object(controller, obj, matches) {
            ClaimDecision::Owned => claims.claimed.push(obj),
            ClaimDecision::Adopt(patch) => {
                claims.claimed.push(obj);
                claims.adoptions.push(patch);
            }
            ClaimDecision::Release(patch) => claims.releases.push(patch),
            ClaimDecision::Ignore => {}
        }
    }
    claims
}

/// `ownerRefControllerPatch`: `{"metadata":{"ownerReferences":[<controller ref>],"uid":"<obj uid>"}}`
/// — the `uid` makes the patch fail if the object was replaced by a namesake.
fn adopt_patch<C, K>(controller: &C, obj: &K) -> Action
where
    C: Resource + Metadata<Ty = ObjectMeta>,
    K: Resource + Metadata<Ty = ObjectMeta>,
{
    let body = json!({"metadata": {"ownerReferences": [new_controller_ref(controller)], "uid": uid(obj.metadata())}});
    Action::Patch {
        target: ObjectRef::from_object(obj),
        patch_type: PatchType::StrategicMerge,
        body,
    }
}

fn release_patch<K: Resource + Metadata<Ty = ObjectMeta>>(
    controller_meta: &ObjectMeta,
    obj: &K,
) -> Action {
    let body = delete_owner_refs_patch(uid(obj.metadata()), &[uid(controller_meta)]);
    Action::Patch {
        target: ObjectRef::from_object(obj),
        patch_type: PatchType::StrategicMerge,
        body,
    }
}

/// `GenerateDeleteOwnerRefStrategicMergeBytes`: remove the ownerReferences to `owner_uids`
/// from the object with `dependent_uid`.
pub fn delete_owner_refs_patch(dependent_uid: &str, owner_uids: &[&str]) -> serde_json::Value {
    let refs: Vec<serde_json::Value> = owner_uids
        .iter()
        .map(|u| json!({"$patch": "delete", "uid": u}))
        .collect();
    json!({"metadata": {"uid": dependent_uid, "ownerReferences": refs}})
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

    use super::*;
    use crate::replicaset::tests::{at, pod, replica_set};

    fn selector() -> Selector {
        let labels = [("app".to_string(), "web".to_string())].into();
        Selector::from_label_selector(Some(&LabelSelector {
            match_labels: Some(labels),
            ..Default::default()
        }))
        .expect("valid")
    }

    fn owned_by(mut p: Pod, rs: &ReplicaSet) -> Pod {
        p.metadata.owner_references = Some(vec![new_controller_ref(rs)]);
        p
    }

    fn relabel(mut p: Pod) -> Pod {
        p.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
        p
    }

    #[test]
    fn claim_cases() {
        let rs = replica_set("web", 3);
        let other = replica_set("other", 1);
        let mut dying_pod = pod("dying-orphan", None);
        dying_pod.metadata.deletion_timestamp = Some(Time(at(1)));
        let mut elsewhere = pod("elsewhere", None);
        elsewhere.metadata.namespace = Some("prod".into());
        let pods = vec![
            owned_by(pod("mine", None), &rs),
            pod("orphan", None),
            owned_by(relabel(pod("stray", None)), &rs),
            owned_by(pod("theirs", None), &other),
            relabel(pod("unrelated-orphan", None)),
            dying_pod,
            elsewhere,
        ];
        let claims = claim_objects(&rs, &selector(), &pods);
        let claimed: Vec<&str> = claims
            .claimed
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(claimed, ["mine", "orphan"]);
        assert_eq!(claims.adoptions.len(), 1);
        let Action::Patch {
            target,
            body,
            patch_type,
        } = &claims.adoptions[0]
        else {
            panic!()
        };
        assert_eq!(
            (target.name.as_str(), *patch_type),
            ("orphan", PatchType::StrategicMerge)
        );
        assert_eq!(
            body,
            &json!({"metadata": {"uid": "orphan", "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "uid-web",
                "controller": true, "blockOwnerDeletion": true}]}})
        );
        let Action::Patch { target, body, .. } = &claims.releases[0] else {
            panic!()
        };
        assert_eq!(target.name, "stray");
        assert_eq!(
            body,
            &json!({"metadata": {"uid": "stray", "ownerReferences": [{"$patch": "delete", "uid": "uid-web"}]}})
        );
    }

    #[test]
    fn a_controller_being_deleted_neither_adopts_nor_releases() {
        let mut rs = replica_set("web", 3);
        rs.metadata.deletion_timestamp = Some(Time(at(1)));
        let pods = vec![
            owned_by(pod("mine", None), &rs),
            pod("orphan", None),
            owned_by(relabel(pod("stray", None)), &rs),
        ];
        let claims = claim_objects(&rs, &selector(), &pods);
        assert_eq!(claims.claimed.len(), 1, "still owns what it owns");
        assert!(claims.adoptions.is_empty() && claims.releases.is_empty());
    }
}
