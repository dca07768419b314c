//! What `miniplane replay` reports: the objects a replay ended with against the ones the
//! recording ended with, object by object. No Kubernetes counterpart.
//!
//! ```text
//!   recorded objects ─┐  leave out what every run makes anew (uid, resourceVersion, times,
//!                     ├─ managedFields, container IDs); pair generated names (web-7d9c-x2k4q)
//!   replay objects ───┘  by their generateName, closest first ─▶ same | differs | missing | extra
//! ```
//!
//! Events and Leases are left out: they are the cluster talking about itself, and every run
//! names and times them anew.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::{self, FieldChange, TRACEPARENT_ANNOTATION};
use crate::recording::ObjectId;

/// Resources a replay does not compare (by plural; Events in both their groups).
pub const NOT_COMPARED: [&str; 2] = ["events", "leases"];

/// Whether the report compares the object: not of [`NOT_COMPARED`], and not one a new
/// cluster makes of its own: the clock's ConfigMap (the replay's clock writes it), the CA
/// bundle every namespace gets (`kube-root-ca.crt`: a new cluster has a new CA), and the
/// addresses of the API server (`default/kubernetes`) and the metrics-server
/// (`kube-system/metrics-server`): a replay's servers listen on other ports while the recorded
/// ones still run.
pub fn compared(id: &ObjectId) -> bool {
    let address = matches!(
        (id.namespace.as_str(), id.name.as_str()),
        ("default", "kubernetes") | ("kube-system", "metrics-server")
    ) && matches!(
        id.resource.as_str(),
        "services" | "endpoints" | "endpointslices"
    );
    let own_configmap = id.resource == "configmaps"
        && (id.name == "kube-root-ca.crt"
            || (id.namespace == crate::CLOCK_NAMESPACE && id.name == crate::CLOCK_CONFIGMAP));
    !NOT_COMPARED.contains(&id.resource.as_str()) && !address && !own_configmap
}

/// How one object of the recording came out in the replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Outcome {
    /// In both, with fields that differ.
    Differs {
        /// The object in the recording.
        id: ObjectId,
        /// Its name in the replay when the API server generated another one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_name: Option<String>,
        /// Each field that differs: `old` the recording's value, `new` the replay's.
        changes: Vec<FieldChange>,
    },
    /// In the recording only.
    Missing {
        /// The object in the recording.
        id: ObjectId,
    },
    /// In the replay only.
    Extra {
        /// The object in the replay.
        id: ObjectId,
    },
}

/// The comparison of a replay's objects with a recording's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Objects of the recording compared.
    pub compared: usize,
    /// Of those, how many came out the same.
    pub same: usize,
    /// Every object that did not.
    pub differences: Vec<Outcome>,
    /// The objects the replay gave other names (generated ones), each as the recording names
    /// it (`pods default/web-5d8f-x2k4q`) with the replay's name; empty when a seeded replay
    /// made the recording's names.
    #[serde(default)]
    pub renamed: BTreeMap<String, String>,
}

impl Report {
    /// Whether the replay ended as the recording did.
    pub fn same(&self) -> bool {
        self.differences.is_empty()
    }
}

/// Compares the objects a replay ended with (`replay`) against the recording's (`recorded`),
/// each keyed by its [`ObjectId`]; both only of the resources the recording covers.
pub fn compare(recorded: &BTreeMap<ObjectId, Value>, replay: &BTreeMap<ObjectId, Value>) -> Report {
    let recorded: BTreeMap<&ObjectId, &Value> =
        recorded.iter().filter(|(id, _)| compared(id)).collect();
    let replay: BTreeMap<&ObjectId, &Value> =
        replay.iter().filter(|(id, _)| compared(id)).collect();
    // Objects with names of their own pair by name; generated ones within their group.
    let mut pairs: Vec<(&ObjectId, &ObjectId)> = Vec::new();
    let mut groups: BTreeMap<GroupKey, (Vec<&ObjectId>, Vec<&ObjectId>)> = BTreeMap::new();
    for (id, obj) in &recorded {
        match generated(id, obj) {
            Some(g) => groups.entry(g).or_default().0.push(id),
            None if replay.contains_key(id) => pairs.push((id, id)),
            None => {}
        }
    }
    for (id, obj) in &replay {
        if let Some(g) = generated(id, obj) {
            groups.entry(g).or_default().1.push(id);
        }
    }
    // The names the replay generated, mapped to the recording's, so that references to them
    // (an EndpointSlice's pods) compare too; the pairing is redone once with the full map.
    let mut names: HashMap<String, String> = HashMap::new();
    let mut generated_pairs = Vec::new();
    for _round in 0..2 {
        generated_pairs.clear();
        for (left, right) in groups.values() {
            generated_pairs.extend(pair_group(left, right, &recorded, &replay, &names));
        }
        names = made_anew(pairs.iter().chain(&generated_pairs), &recorded, &replay);
    }
    pairs.extend(generated_pairs);
    let paired_recorded: HashSet<&ObjectId> = pairs.iter().map(|(a, _)| *a).collect();
    let paired_replay: HashSet<&ObjectId> = pairs.iter().map(|(_, b)| *b).collect();
    let mut differences = Vec::new();
    let mut same = 0;
    pairs.sort();
    for (a, b) in &pairs {
        let changes = differences_of(recorded[a], replay[b], &names);
        if changes.is_empty() {
            same += 1;
        } else {
            differences.push(Outcome::Differs {
                id: (*a).clone(),
                replay_name: (a.name != b.name).then(|| b.name.clone()),
                changes,
            });
        }
    }
    for id in recorded.keys().filter(|id| !paired_recorded.contains(*id)) {
        differences.push(Outcome::Missing { id: (*id).clone() });
    }
    for id in replay.keys().filter(|id| !paired_replay.contains(*id)) {
        differences.push(Outcome::Extra { id: (*id).clone() });
    }
    let renamed = pairs
        .iter()
        .filter(|(a, b)| a.name != b.name)
        .map(|(a, b)| (a.display(), b.name.clone()))
        .collect();
    Report {
        compared: recorded.len(),
        same,
        differences,
        renamed,
    }
}

/// What the replay made anew under another value, read as the recording's: the generated
/// names of paired objects, and paired pods' IPs (allocated in the order pods start).
fn made_anew<'a>(
    pairs: impl Iterator<Item = &'a (&'a ObjectId, &'a ObjectId)>,
    recorded: &BTreeMap<&ObjectId, &Value>,
    replay: &BTreeMap<&ObjectId, &Value>,
) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for (a, b) in pairs {
        if a.name != b.name {
            names.insert(b.name.clone(), a.name.clone());
        }
        let ip = |v: &Value| {
            v.pointer("/status/podIP")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        if let (Some(x), Some(y)) = (ip(recorded[a]), ip(replay[b]))
            && x != y
        {
            names.insert(y, x);
        }
    }
    names
}

/// The group of an object whose name the API server generated: its resource, namespace and
/// `generateName`.
type GroupKey = (String, String, String, String);

fn generated(id: &ObjectId, obj: &Value) -> Option<GroupKey> {
    let base = obj.pointer("/metadata/generateName")?.as_str()?;
    (!base.is_empty() && id.name.starts_with(base)).then(|| {
        (
            id.api_version.clone(),
            id.resource.clone(),
            id.namespace.clone(),
            base.to_owned(),
        )
    })
}

/// Groups past this size pair by name order instead of closest first (which compares every
/// pair).
const CLOSEST_FIRST_LIMIT: usize = 64;

/// Pairs a group's recorded and replay objects: equal names first (a seeded replay makes the
/// recording's names), then the closest (fewest differing fields) first.
fn pair_group<'a>(
    left: &[&'a ObjectId],
    right: &[&'a ObjectId],
    recorded: &BTreeMap<&ObjectId, &Value>,
    replay: &BTreeMap<&ObjectId, &Value>,
    names: &HashMap<String, String>,
) -> Vec<(&'a ObjectId, &'a ObjectId)> {
    let mut out = Vec::new();
    let mut left: Vec<&'a ObjectId> = left.to_vec();
    let mut right: Vec<&'a ObjectId> = right.to_vec();
    left.retain(|l| match right.iter().position(|r| r.name == l.name) {
        Some(j) => {
            out.push((*l, right.remove(j)));
            false
        }
        None => true,
    });
    if left.len().max(right.len()) > CLOSEST_FIRST_LIMIT {
        left.sort();
        right.sort();
        out.extend(left.into_iter().zip(right));
        return out;
    }
    let mut costs: Vec<(usize, usize, usize)> = Vec::new();
    for (i, l) in left.iter().enumerate() {
        for (j, r) in right.iter().enumerate() {
            costs.push((differences_of(recorded[l], replay[r], names).len(), i, j));
        }
    }
    costs.sort();
    let mut used_left = HashSet::new();
    let mut used_right = HashSet::new();
    for (_, i, j) in costs {
        if used_left.contains(&i) || used_right.contains(&j) {
            continue;
        }
        used_left.insert(i);
        used_right.insert(j);
        out.push((left[i], right[j]));
    }
    out
}

/// The fields in which `replay` differs from `recorded`, after both are normalized and the
/// replay's generated names are read as the recording's.
pub fn differences_of(
    recorded: &Value,
    replay: &Value,
    names: &HashMap<String, String>,
) -> Vec<FieldChange> {
    let mut a = recorded.clone();
    let mut b = replay.clone();
    normalize(&mut a);
    normalize(&mut b);
    rename(&mut b, names);
    history::diff(&a, &b)
}

/// Metadata every run makes anew (beside what [`drop_made_anew`] removes at any depth): it
/// never counts as a difference.
const METADATA_MADE_ANEW: [&str; 4] = ["resourceVersion", "managedFields", "selfLink", "name"];

/// Leaves out what differs between any two runs of the same steps: identities, resource
/// versions, times (every field named `…Time`, `…Timestamp`, `startedAt`, `finishedAt`), the
/// trace annotation, owners' UIDs, container IDs, a node's cloud instance (`providerID`) and
/// kubelet port, and the random suffix of a pod's `kube-api-access-` volume. The name is left
/// out too: pairing decided which objects to compare.
pub fn normalize(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("providerID");
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("daemonEndpoints");
    }
    token_volumes(obj);
    without_metadata(obj, &METADATA_MADE_ANEW);
    drop_made_anew(obj);
}

/// Removes, at any depth, every member that a run makes anew whatever its place: times
/// (`…Time`, `…Timestamp`, `startedAt`, `finishedAt`, so `creationTimestamp` too), container
/// IDs and UIDs (the object's own and its owners').
fn drop_made_anew(v: &mut Value) {
    match v {
        Value::Object(members) => {
            members.retain(|k, _| {
                !(k.ends_with("Time")
                    || k.ends_with("Timestamp")
                    || matches!(
                        k.as_str(),
                        "startedAt" | "finishedAt" | "containerID" | "uid"
                    ))
            });
            members.values_mut().for_each(drop_made_anew);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_made_anew),
        _ => {}
    }
}

/// Removes the metadata fields `keys` and the trace annotation (the annotations too, when
/// nothing else is left in them): what the API server sets on a write, not what its writer
/// sent.
pub fn without_metadata(obj: &mut Value, keys: &[&str]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for k in keys {
        meta.remove(*k);
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.remove(TRACEPARENT_ANNOTATION);
        if annotations.is_empty() {
            meta.remove("annotations");
        }
    }
}

/// The service account admission names a pod's token volume `kube-api-access-` and five
/// random characters; every run draws others.
fn token_volumes(v: &mut Value) {
    match v {
        Value::String(s) if s.starts_with(TOKEN_VOLUME) && s.len() == TOKEN_VOLUME.len() + 5 => {
            s.truncate(TOKEN_VOLUME.len());
        }
        Value::Object(members) => members.values_mut().for_each(token_volumes),
        Value::Array(items) => items.iter_mut().for_each(token_volumes),
        _ => {}
    }
}

const TOKEN_VOLUME: &str = "kube-api-access-";

/// Replaces every string value that is a key of `names` by its value.
fn rename(v: &mut Value, names: &HashMap<String, String>) {
    if names.is_empty() {
        return;
    }
    match v {
        Value::String(s) => {
            if let Some(n) = names.get(s.as_str()) {
                *s = n.clone();
            }
        }
        Value::Object(members) => members.values_mut().for_each(|v| rename(v, names)),
        Value::Array(items) => items.iter_mut().for_each(|v| rename(v, names)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(resource: &str, name: &str) -> ObjectId {
        ObjectId {
            api_version: "v1".into(),
            resource: resource.into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn pod(name: &str, node: &str, uid: &str) -> Value {
        json!({"metadata": {"name": name, "generateName": "web-5d8f-", "uid": uid,
            "resourceVersion": "9", "creationTimestamp": "2030-01-01T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-5d8f", "uid": uid}],
            "annotations": {TRACEPARENT_ANNOTATION: uid}},
            "spec": {"nodeName": node},
            "status": {"podIP": format!("10.0.0.{uid}"),
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": uid}],
                "containerStatuses": [{"name": "web", "containerID": uid, "state": {"running": {"startedAt": uid}}}]}})
    }

    #[test]
    fn generated_names_pair_closest_first_and_only_real_differences_count() {
        let recorded: BTreeMap<ObjectId, Value> = [
            (id("pods", "web-5d8f-aaaaa"), pod("web-5d8f-aaaaa", "node-1", "u1")),
            (id("pods", "web-5d8f-bbbbb"), pod("web-5d8f-bbbbb", "node-2", "u2")),
            (id("configmaps", "settings"), json!({"metadata": {"name": "settings"}, "data": {"a": "1"}})),
            (id("events", "web.1"), json!({"metadata": {"name": "web.1"}})),
            (
                id("endpoints", "web"),
                json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.u1", "targetRef": {"name": "web-5d8f-aaaaa"}}]}]}),
            ),
        ]
        .into_iter()
        .collect();
        let replay: BTreeMap<ObjectId, Value> = [
            // Same node as bbbbb: pairs with it; the other pairs with aaaaa and differs.
            (id("pods", "web-5d8f-xxxxx"), pod("web-5d8f-xxxxx", "node-2", "r1")),
            (id("pods", "web-5d8f-yyyyy"), pod("web-5d8f-yyyyy", "node-3", "r2")),
            (id("configmaps", "extra"), json!({"metadata": {"name": "extra"}})),
            (
                id("endpoints", "web"),
                json!({"metadata": {"name": "web"}, "subsets": [{"addresses": [{"ip": "10.0.0.r2", "targetRef": {"name": "web-5d8f-yyyyy"}}]}]}),
            ),
        ]
        .into_iter()
        .collect();
        let report = compare(&recorded, &replay);
        assert_eq!(report.compared, 4, "the Event is not compared");
        assert_eq!(
            report.same, 2,
            "bbbbb↔xxxxx and the Endpoints (through the name map)"
        );
        assert_eq!(
            report.differences,
            vec![
                Outcome::Differs {
                    id: id("pods", "web-5d8f-aaaaa"),
                    replay_name: Some("web-5d8f-yyyyy".into()),
                    changes: vec![FieldChange {
                        path: "spec.nodeName".into(),
                        old: Some(json!("node-1")),
                        new: Some(json!("node-3")),
                    }],
                },
                Outcome::Missing {
                    id: id("configmaps", "settings")
                },
                Outcome::Extra {
                    id: id("configmaps", "extra")
                },
            ]
        );
        assert!(!report.same());
        assert_eq!(
            report.renamed,
            [
                (
                    "pods default/web-5d8f-aaaaa".to_owned(),
                    "web-5d8f-yyyyy".to_owned()
                ),
                (
                    "pods default/web-5d8f-bbbbb".to_owned(),
                    "web-5d8f-xxxxx".to_owned()
                ),
            ]
            .into_iter()
            .collect()
        );
        let itself = compare(&recorded, &recorded);
        assert!(itself.same());
        assert!(itself.renamed.is_empty());
    }
}
