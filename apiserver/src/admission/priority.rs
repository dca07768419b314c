//! The `Priority` admission plugin: every new pod gets the priority of its PriorityClass,
//! at most one PriorityClass is the global default, and the system classes exist and stay.
//!
//! Mirrors `plugin/pkg/admission/priority/admission.go` (`admitPod`, `establishPriority`,
//! `getDefaultPriorityClass`, `validatePriorityClass`), the post-start hook
//! `scheduling/bootstrap-system-priority-classes` of `pkg/registry/scheduling/rest`
//! (`AddSystemPriorityClasses`) and the refusal to delete a system class of
//! `pkg/registry/scheduling/priorityclass/storage/storage.go` (`REST.Delete`):
//!
//! ```text
//!   pod create:  spec.priorityClassName ""  ─▶ the globalDefault class (lowest value if
//!                                              several), else priority 0, PreemptLowerPriority
//!                named class missing        ─▶ 403 `no PriorityClass with name foo was found`
//!                spec.priority set, differs ─▶ 403 `the integer value of priority (5) must
//!                                              not be provided in pod spec; ...`
//!                spec.preemptionPolicy set, differs from the class's ─▶ 403 likewise
//!   PriorityClass create with globalDefault, another default exists ─▶ 403
//!   DELETE of system-node-critical / system-cluster-critical ─▶ 403
//! ```
//!
//! The classes are read from the store when a pod is created (Kubernetes reads an informer's
//! cache). The decision ([`admit_pod`]) is a plain function of the pod and the classes.
//! It runs on a POST create and on a server-side apply that creates a pod. Simplified: the
//! single-default check runs on a POST create of a class only, not when an update (or a
//! server-side apply) marks a second class as default.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{Value, json};

use crate::error::{ApiError, Result};
use crate::gvk::GroupVersion;
use crate::registry::ResourceInfo;
use crate::rest::{self, WriteContext, WritePart};
use crate::state::AppState;
use crate::storage::{ObjectRef, Storage, prefix, target};
use crate::strategy::priorityclass::{PREEMPT_LOWER_PRIORITY, SYSTEM_CLASSES, is_system_class};

/// The plugin's name.
pub const PRIORITY: &str = "Priority";
/// The API group of PriorityClasses.
pub const GROUP: &str = "scheduling.k8s.io";
/// Their resource.
pub const RESOURCE: &str = "priorityclasses";

/// Whether `info` is the pods resource.
pub fn applies_to_pods(info: &ResourceInfo) -> bool {
    info.gvr.group.is_empty() && info.gvr.resource == "pods"
}

/// Whether `info` is the PriorityClasses resource.
pub fn applies_to_classes(info: &ResourceInfo) -> bool {
    info.gvr.group == GROUP && info.gvr.resource == RESOURCE
}

/// `getDefaultPriorityClass`: the class marked `globalDefault`, the lowest value if several
/// are (a race can leave more than one).
pub fn default_class(classes: &[PriorityClass]) -> Option<&PriorityClass> {
    classes
        .iter()
        .filter(|c| c.global_default == Some(true))
        .min_by_key(|c| c.value)
}

/// `admitPod` for a create: fills in `priorityClassName` (the default class's, if any),
/// `priority` and `preemptionPolicy`, or says why the pod is refused (the text after
/// `pods "x" is forbidden: `).
pub fn admit_pod(pod: &mut Pod, classes: &[PriorityClass]) -> std::result::Result<(), String> {
    let spec = pod.spec.get_or_insert_with(Default::default);
    let requested = spec.priority_class_name.clone().unwrap_or_default();
    let (name, priority, policy) = if requested.is_empty() {
        match default_class(classes) {
            Some(c) => (
                c.metadata.name.clone().unwrap_or_default(),
                c.value,
                c.preemption_policy.clone(),
            ),
            None => (String::new(), 0, Some(PREEMPT_LOWER_PRIORITY.to_owned())),
        }
    } else {
        let class = classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(requested.as_str()))
            .ok_or_else(|| format!("no PriorityClass with name {requested} was found"))?;
        (requested, class.value, class.preemption_policy.clone())
    };
    if let Some(given) = spec.priority
        && given != priority
    {
        return Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    if let Some(policy) = policy {
        if let Some(given) = spec.preemption_policy.as_deref()
            && given != policy
        {
            return Err(format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            ));
        }
        spec.preemption_policy = Some(policy);
    }
    spec.priority_class_name = (!name.is_empty()).then_some(name);
    spec.priority = Some(priority);
    Ok(())
}

/// `validatePriorityClass` on a create: `Err` when `class` is a global default and another
/// class already is.
pub fn validate_class_create(
    class: &PriorityClass,
    classes: &[PriorityClass],
) -> std::result::Result<(), String> {
    if class.global_default != Some(true) {
        return Ok(());
    }
    match default_class(classes) {
        Some(existing) => Err(format!(
            "PriorityClass {} is already marked as default. Only one default can exist",
            existing.metadata.name.as_deref().unwrap_or_default()
        )),
        None => Ok(()),
    }
}

/// Every stored PriorityClass.
async fn list_classes(storage: &Storage, classes: &ResourceInfo) -> Result<Vec<PriorityClass>> {
    let page = storage
        .list(&prefix(classes, None), None, None, 0, &|_| true)
        .await?;
    Ok(page
        .items
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

fn classes_info(state: &AppState) -> Result<Arc<ResourceInfo>> {
    state
        .registry()
        .lookup(&GroupVersion::new(GROUP, "v1"), RESOURCE)
        .ok_or_else(|| ApiError::Internal("priorityclasses are not registered".into()))
}

/// The 403 of the plugin for the object `obj` of `info`.
fn forbidden(info: &ResourceInfo, obj: &Value, why: &str) -> ApiError {
    let name = crate::meta::name(obj)
        .or_else(|| crate::meta::generate_name(obj))
        .unwrap_or("Unknown")
        .to_owned();
    let resource = if info.gvr.group.is_empty() {
        info.gvr.resource.clone()
    } else {
        format!("{}.{}", info.gvr.resource, info.gvr.group)
    };
    ApiError::Forbidden {
        message: format!("{resource} {name:?} is forbidden: {why}"),
        target: target(info, &name),
    }
}

/// Runs the plugin on the body of a create of `info` (a pod, or a PriorityClass), before the
/// strategy defaults and validates it; nothing for other resources or with the plugin off.
pub async fn admit_create(state: &AppState, info: &ResourceInfo, body: &mut Value) -> Result<()> {
    let pods = applies_to_pods(info);
    if !(pods || applies_to_classes(info)) || !state.options().admission.is_enabled(PRIORITY) {
        return Ok(());
    }
    let classes = list_classes(state.storage(), &*classes_info(state)?).await?;
    if pods {
        let Ok(mut pod) = serde_json::from_value::<Pod>(body.clone()) else {
            // Not a pod: the strategy's decoding answers the 400.
            return Ok(());
        };
        admit_pod(&mut pod, &classes).map_err(|why| forbidden(info, body, &why))?;
        let spec = pod.spec.unwrap_or_default();
        if let Some(map) = body.as_object_mut() {
            let body_spec = map.entry("spec").or_insert_with(|| json!({}));
            if let Some(s) = body_spec.as_object_mut() {
                s.insert("priority".into(), json!(spec.priority));
                if let Some(name) = spec.priority_class_name {
                    s.insert("priorityClassName".into(), json!(name));
                }
                if let Some(policy) = spec.preemption_policy {
                    s.insert("preemptionPolicy".into(), json!(policy));
                }
            }
        }
        return Ok(());
    }
    let Ok(class) = serde_json::from_value::<PriorityClass>(body.clone()) else {
        return Ok(());
    };
    validate_class_create(&class, &classes).map_err(|why| forbidden(info, body, &why))
}

/// `REST.Delete` of PriorityClasses: the system classes may not be deleted (also by a dry
/// run).
pub fn admit_delete(r: &ObjectRef) -> Result<()> {
    if applies_to_classes(&r.info) && is_system_class(&r.name) {
        return Err(ApiError::Forbidden {
            target: r.target(),
            message: format!(
                "{RESOURCE}.{GROUP} {:?} is forbidden: this is a system priority class and cannot be deleted",
                r.name
            ),
        });
    }
    Ok(())
}

/// The post-start hook `scheduling/bootstrap-system-priority-classes`: creates the system
/// classes that are missing. Returns how many it created.
pub async fn bootstrap_system_priority_classes(state: &AppState) -> Result<usize> {
    let info = classes_info(state)?;
    let mut created = 0;
    for class in SYSTEM_CLASSES {
        let r = ObjectRef {
            info: info.clone(),
            namespace: None,
            name: class.name.to_owned(),
        };
        if state.storage().get(&r).await?.is_some() {
            continue;
        }
        let mut obj = json!({
            "apiVersion": format!("{GROUP}/v1"),
            "kind": "PriorityClass",
            "metadata": {"name": class.name},
            "value": class.value,
            "description": class.description,
        });
        let wctx = WriteContext {
            manager: Some("kube-apiserver".into()),
            now: state.now(),
            ids: state.ids().clone(),
            part: WritePart::Main,
            escalation: None,
            service_account: None,
            user: None,
            signer_check: None,
        };
        rest::default(&info, &mut obj)?;
        rest::before_create(&info, None, &mut obj, &wctx)?;
        match state.storage().create(&r, obj).await {
            Ok(_) => created += 1,
            Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i32, default: bool, policy: &str) -> PriorityClass {
        serde_json::from_value(json!({
            "metadata": {"name": name}, "value": value,
            "globalDefault": default, "preemptionPolicy": policy,
        }))
        .unwrap()
    }

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "x"}, "spec": spec})).unwrap()
    }

    #[test]
    fn a_named_class_gives_its_value_and_policy() {
        let classes = [class("high", 1000, false, "Never")];
        let mut p = pod(json!({"containers": [], "priorityClassName": "high"}));
        admit_pod(&mut p, &classes).unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(spec.priority, Some(1000));
        assert_eq!(spec.preemption_policy.as_deref(), Some("Never"));
        assert_eq!(spec.priority_class_name.as_deref(), Some("high"));
    }

    #[test]
    fn no_name_takes_the_lowest_global_default_else_zero() {
        let mut p = pod(json!({"containers": []}));
        admit_pod(&mut p, &[]).unwrap();
        let spec = p.spec.clone().unwrap();
        assert_eq!(spec.priority, Some(0));
        assert_eq!(spec.priority_class_name, None);
        assert_eq!(
            spec.preemption_policy.as_deref(),
            Some("PreemptLowerPriority")
        );
        let classes = [
            class("b", 50, true, "PreemptLowerPriority"),
            class("a", 10, true, "PreemptLowerPriority"),
            class("c", 5, false, "PreemptLowerPriority"),
        ];
        let mut p = pod(json!({"containers": []}));
        admit_pod(&mut p, &classes).unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(spec.priority, Some(10));
        assert_eq!(spec.priority_class_name.as_deref(), Some("a"));
    }

    #[test]
    fn refusals_are_worded_as_kubernetes() {
        let mut p = pod(json!({"containers": [], "priorityClassName": "foo"}));
        assert_eq!(
            admit_pod(&mut p, &[]),
            Err("no PriorityClass with name foo was found".into())
        );
        let classes = [class("high", 1000, false, "PreemptLowerPriority")];
        let mut p = pod(json!({"containers": [], "priorityClassName": "high", "priority": 5}));
        assert_eq!(
            admit_pod(&mut p, &classes),
            Err("the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name".into())
        );
        let mut p = pod(
            json!({"containers": [], "priorityClassName": "high", "priority": 1000, "preemptionPolicy": "Never"}),
        );
        assert_eq!(
            admit_pod(&mut p, &classes),
            Err("the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name".into())
        );
    }

    #[test]
    fn only_one_global_default() {
        let classes = [class("first", 10, true, "PreemptLowerPriority")];
        assert_eq!(
            validate_class_create(&class("second", 20, true, "Never"), &classes),
            Err(
                "PriorityClass first is already marked as default. Only one default can exist"
                    .into()
            )
        );
        assert!(validate_class_create(&class("second", 20, false, "Never"), &classes).is_ok());
        assert!(validate_class_create(&class("second", 20, true, "Never"), &[]).is_ok());
    }
}
