//! The history of one object (`GET /miniplane/v1/history/<the object's API path>`, what
//! `miniplane history` prints): every version the store still keeps, each with who wrote it,
//! the trace of the write and the fields it changed.
//!
//! Kubernetes keeps old versions too (etcd's MVCC revisions, until kube-apiserver compacts
//! them every 5 minutes) but offers no way to read them: a `GET` with an old
//! `resourceVersion` is served from the watch cache at best, and a deleted object is gone.
//! Here the API server reads every kept revision of the object's key (`store::KeyHistory`).
//!
//! ```text
//!   revision 812  Created  kubectl-client-side-apply  trace 4bf92f…   spec.replicas: 3 …
//!   revision 830  Updated  kube-controller-manager    trace 4bf92f…   status.replicas: 0 → 3
//!   revision 901  Deleted                              trace 77a0c1…
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotation that carries a write's trace context (`trace::TRACEPARENT_ANNOTATION`);
/// left out of diffs, as every traced write changes it.
pub const TRACEPARENT_ANNOTATION: &str = "miniplane.dev/traceparent";

/// Every kept version of one object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectHistory {
    /// The resource and group, as kubectl names it (`deployments.apps`, `pods`).
    pub resource: String,
    /// The object's namespace (`None` for a cluster-scoped object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The store's compaction point: versions replaced before it are gone.
    pub compacted_revision: u64,
    /// The store's revision when the history was read.
    pub current_revision: u64,
    /// The versions, oldest first.
    pub revisions: Vec<HistoryEntry>,
}

impl ObjectHistory {
    /// The object as it was at `revision` (the last version written at or before it), or why
    /// there is none.
    pub fn at(&self, revision: u64) -> Result<&Value, AtError> {
        if revision > self.current_revision {
            return Err(AtError::Future {
                current: self.current_revision,
            });
        }
        let entry = self.revisions.iter().rev().find(|e| e.revision <= revision);
        match entry {
            Some(e) => e.object.as_ref().ok_or(AtError::Absent),
            None if revision < self.compacted_revision => Err(AtError::Compacted {
                oldest: self.compacted_revision,
            }),
            None => Err(AtError::Absent),
        }
    }

    /// Whether older changes of the object were compacted away: its oldest kept version was
    /// written before the compaction point (its diff and writer are then unknown).
    pub fn cut(&self) -> bool {
        self.revisions.first().is_some_and(|e| e.before_compaction)
    }
}

/// Why [`ObjectHistory::at`] has no object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AtError {
    /// The revision is newer than the store's.
    #[error("is newer than the current revision {current}")]
    Future {
        /// The store's revision.
        current: u64,
    },
    /// The revision was compacted and the object is not known there.
    #[error("is compacted: the oldest revision kept is {oldest}")]
    Compacted {
        /// The compaction point.
        oldest: u64,
    },
    /// The object did not exist at that revision.
    #[error("is not a revision the object existed at")]
    Absent,
}

/// What a change did to the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChangeType {
    /// The first version of the object (or of a new object of the same name).
    Created,
    /// A new version of an existing object.
    Updated,
    /// The object was deleted.
    Deleted,
}

impl ChangeType {
    /// The word `miniplane history` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Created => "created",
            ChangeType::Updated => "updated",
            ChangeType::Deleted => "deleted",
        }
    }
}

/// One kept version of an object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The store revision of the change (the version's `resourceVersion`).
    pub revision: u64,
    /// What the change did.
    #[serde(rename = "type")]
    pub change: ChangeType,
    /// The object after the change (`None` after a delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// Who made the change.
    #[serde(flatten)]
    pub writer: Writer,
    /// That entry's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The fields the change set, changed or removed (empty for the oldest kept version when
    /// `before_compaction`).
    #[serde(default)]
    pub diff: Vec<FieldChange>,
    /// The version was written before the compaction point: the change before it is gone.
    #[serde(default)]
    pub before_compaction: bool,
}

impl HistoryEntry {
    /// The entry of a delete at `revision`: no object and no writer (a delete stores nothing).
    pub fn deleted(revision: u64) -> Self {
        HistoryEntry {
            revision,
            change: ChangeType::Deleted,
            object: None,
            writer: Writer::default(),
            time: None,
            diff: Vec::new(),
            before_compaction: false,
        }
    }
}

/// Who made a write: the field manager whose managedFields entry it made or moved
/// ([`writer`]), and the request that carried it as the API server's trace collector tells.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Writer {
    /// The field manager (`kubectl-client-side-apply`, `kube-controller-manager`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// That entry's operation (`Apply`, `Update`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// That entry's subresource (`status`, `scale`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// The component whose request made the write, when the trace collector still has the
    /// request's span and its parent (`kube-controller-manager`; none for a client that sent
    /// no trace context, as kubectl).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// The authenticated user of the request, when the trace collector still has its span
    /// (`kubernetes-admin`, `system:kube-controller-manager`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The write's trace context (W3C `traceparent`: `00-<trace>-<span>-01`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl Writer {
    /// What version `obj` tells of its writer after `before` (`None`: it was created): the
    /// managedFields entry the write made or moved ([`writer`]) and the trace annotation; with
    /// that entry's time. The component and user are the trace collector's to tell.
    pub fn of(before: Option<&Value>, obj: &Value) -> (Writer, Option<String>) {
        let entry = writer(before, obj);
        let field = |name: &str| {
            entry
                .and_then(|w| w.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let traceparent = obj
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(TRACEPARENT_ANNOTATION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let found = Writer {
            manager: field("manager"),
            operation: field("operation"),
            subresource: field("subresource"),
            component: None,
            user: None,
            traceparent,
        };
        (found, field("time"))
    }

    /// Who, for people: the user, with the component that sent the request or else the field
    /// manager (`kubernetes-admin (kubectl-scale)`).
    pub fn who(&self) -> String {
        let by = self.component.as_ref().or(self.manager.as_ref());
        match (&self.user, by) {
            (Some(user), Some(by)) => format!("{user} ({by})"),
            (Some(user), None) => user.clone(),
            (None, Some(by)) => by.clone(),
            (None, None) => "unknown".to_owned(),
        }
    }
}

/// One field a change touched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldChange {
    /// The field's path (`spec.replicas`, `spec.template.spec.containers[0].image`,
    /// `metadata.labels[app.kubernetes.io/name]`).
    pub path: String,
    /// The value before (`None`: the field was added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<Value>,
    /// The value after (`None`: the field was removed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<Value>,
}

/// The managedFields entry of the manager that made a change: one that is new in `obj` (a
/// manager, operation and subresource `before` has no entry for) or whose `time` moved;
/// Kubernetes moves an entry's time only for the manager whose operation changed its set of
/// fields (`managedfields/internal/managedfieldsupdater.go`), while a manager that only lost
/// fields to another keeps its time. Of several, the latest. `None` when no entry is new or
/// moved (a manager changed only fields it owned already), or when several share the latest
/// time (with no version before, as for the oldest kept one, they all look new).
pub fn writer<'v>(before: Option<&'v Value>, obj: &'v Value) -> Option<&'v Value> {
    let entries = |v: Option<&'v Value>| {
        v.and_then(|v| v.pointer("/metadata/managedFields"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let text = |e: &Value, field: &str| {
        e.get(field)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let id = |e: &Value| {
        (
            text(e, "manager"),
            text(e, "operation"),
            text(e, "subresource"),
        )
    };
    let old: HashMap<_, String> = entries(before)
        .iter()
        .map(|e| (id(e), text(e, "time")))
        .collect();
    let acted: Vec<&Value> = entries(Some(obj))
        .iter()
        .filter(|e| old.get(&id(e)) != Some(&text(e, "time")))
        .collect();
    let latest = acted.iter().map(|e| text(e, "time")).max()?;
    let mut at_latest = acted.into_iter().filter(|e| text(e, "time") == latest);
    match (at_latest.next(), at_latest.next()) {
        (Some(only), None) => Some(only),
        _ => None,
    }
}

/// The fields that differ between two versions of an object, leaf by leaf, in document order.
/// `metadata.resourceVersion`, `metadata.managedFields` and the trace annotation are left out:
/// every write changes them.
pub fn diff(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), Some(old), Some(new), &mut out);
    out
}

/// A path segment: an object member, an array index, or the element of a list keyed by a
/// field (Kubernetes' list maps: conditions by `type`, containers by `name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A member of an object.
    Key(String),
    /// An element of an array.
    Index(usize),
    /// The element of an array whose field (first) has this text value (second):
    /// `[type=Ready]`, as lab checks and kubectl's JSONPath filters name them.
    Where(String, String),
}

/// The fields that key the elements of Kubernetes' list maps (`x-kubernetes-list-map-keys`
/// of conditions, containers, ports, env, volumes...), tried in this order.
const LIST_KEYS: [&str; 2] = ["type", "name"];

/// The field that keys every element of both arrays uniquely, if one does.
fn list_key(a: &[Value], b: &[Value]) -> Option<&'static str> {
    LIST_KEYS.into_iter().find(|k| {
        [a, b].iter().all(|items| {
            let mut seen = std::collections::HashSet::new();
            items.iter().all(|v| {
                v.get(*k)
                    .and_then(Value::as_str)
                    .is_some_and(|text| seen.insert(text))
            })
        })
    })
}

fn ignored(path: &[Segment]) -> bool {
    let key = |i: usize| match path.get(i) {
        Some(Segment::Key(k)) => Some(k.as_str()),
        _ => None,
    };
    if key(0) != Some("metadata") {
        return false;
    }
    matches!(
        (path.len(), key(1), key(2)),
        (2, Some("resourceVersion" | "managedFields"), _)
            | (3, Some("annotations"), Some(TRACEPARENT_ANNOTATION))
    )
}

fn walk(
    path: &mut Vec<Segment>,
    old: Option<&Value>,
    new: Option<&Value>,
    out: &mut Vec<FieldChange>,
) {
    if ignored(path) || old == new {
        return;
    }
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for (k, v) in a {
                path.push(Segment::Key(k.clone()));
                walk(path, Some(v), b.get(k), out);
                path.pop();
            }
            for (k, v) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                path.push(Segment::Key(k.clone()));
                walk(path, None, Some(v), out);
                path.pop();
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if list_key(a, b).is_some() => {
            let key = list_key(a, b).unwrap_or_default();
            let id = |v: &Value| {
                v.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let find =
                |items: &'_ [Value], wanted: &str| items.iter().position(|v| id(v) == wanted);
            for item in a {
                path.push(Segment::Where(key.to_owned(), id(item)));
                walk(path, Some(item), find(b, &id(item)).map(|i| &b[i]), out);
                path.pop();
            }
            for item in b.iter().filter(|v| find(a, &id(v)).is_none()) {
                path.push(Segment::Where(key.to_owned(), id(item)));
                walk(path, None, Some(item), out);
                path.pop();
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                path.push(Segment::Index(i));
                walk(path, a.get(i), b.get(i), out);
                path.pop();
            }
        }
        // An object that appears or goes: one change per top-level member below it is
        // noisier than the whole value, so it is one change.
        _ => out.push(FieldChange {
            path: render(path),
            old: old.cloned(),
            new: new.cloned(),
        }),
    }
}

/// A path as `miniplane history` prints it and `--field` reads it: members joined with `.`,
/// indices as `[N]`, list-map elements as `[type=Ready]`, and a member with a `.`, `[`, `]` or
/// `=` in its name as `[name]` (one with `=` cannot be followed: it reads as a list-map key).
pub fn render(path: &[Segment]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Segment::Index(i) => s.push_str(&format!("[{i}]")),
            Segment::Where(k, v) => s.push_str(&format!("[{k}={v}]")),
            Segment::Key(k) if k.contains(['.', '[', ']', '=']) || k.is_empty() => {
                s.push_str(&format!("[{k}]"));
            }
            Segment::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
        }
    }
    s
}

/// Parses a path written as [`render`] writes it (a leading `.` is allowed, as in kubectl's
/// JSONPath `{.spec.replicas}`).
pub fn parse_path(text: &str) -> Result<Vec<Segment>, String> {
    let bad = |why: &str| format!("invalid field path {text:?}: {why}");
    let mut out = Vec::new();
    let mut rest = text.strip_prefix('.').unwrap_or(text);
    if rest.is_empty() {
        return Err(bad("it is empty"));
    }
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']').ok_or_else(|| bad("a '[' is not closed"))?;
            let name = &inner[..end];
            out.push(match (name.parse::<usize>(), name.split_once('=')) {
                (Ok(i), _) => Segment::Index(i),
                (_, Some((k, v))) if !k.is_empty() => Segment::Where(k.to_owned(), v.to_owned()),
                _ if !name.is_empty() => Segment::Key(name.to_owned()),
                _ => return Err(bad("'[]' names nothing")),
            });
            rest = &inner[end + 1..];
            rest = rest.strip_prefix('.').unwrap_or(rest);
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        if end == 0 {
            return Err(bad("a member name is empty"));
        }
        out.push(Segment::Key(rest[..end].to_owned()));
        rest = &rest[end..];
        if let Some(after) = rest.strip_prefix('.') {
            if after.is_empty() {
                return Err(bad("it ends with '.'"));
            }
            rest = after;
        }
    }
    Ok(out)
}

/// The value at `path` in `value`, if there is one.
pub fn lookup<'v>(value: &'v Value, path: &[Segment]) -> Option<&'v Value> {
    path.iter().try_fold(value, |v, seg| match seg {
        Segment::Key(k) => v.get(k.as_str()),
        Segment::Index(i) => v.get(*i),
        Segment::Where(k, want) => v
            .as_array()?
            .iter()
            .find(|item| item.get(k.as_str()).and_then(Value::as_str) == Some(want)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_names_each_changed_leaf_and_skips_what_every_write_changes() {
        let old = json!({
            "metadata": {"name": "web", "resourceVersion": "10",
                "annotations": {"miniplane.dev/traceparent": "00-a-b-01", "note": "x"},
                "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"image": "nginx:1.26"}]}}},
        });
        let new = json!({
            "metadata": {"name": "web", "resourceVersion": "11",
                "annotations": {"miniplane.dev/traceparent": "00-c-d-01"},
                "labels": {"app.kubernetes.io/name": "shop"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [{"image": "nginx:1.27"}, {"image": "sidecar"}]}}},
            "status": {"replicas": 0},
        });
        let paths: Vec<(String, Option<Value>, Option<Value>)> = diff(&old, &new)
            .into_iter()
            .map(|c| (c.path, c.old, c.new))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("metadata.annotations.note".into(), Some(json!("x")), None),
                (
                    "metadata.labels[app.kubernetes.io/name]".into(),
                    Some(json!("web")),
                    Some(json!("shop"))
                ),
                ("spec.replicas".into(), Some(json!(1)), Some(json!(3))),
                (
                    "spec.template.spec.containers[0].image".into(),
                    Some(json!("nginx:1.26")),
                    Some(json!("nginx:1.27"))
                ),
                (
                    "spec.template.spec.containers[1]".into(),
                    None,
                    Some(json!({"image": "sidecar"}))
                ),
                ("status".into(), None, Some(json!({"replicas": 0}))),
            ]
        );
        assert!(diff(&old, &old).is_empty());
    }

    #[test]
    fn list_maps_are_matched_by_their_key_not_their_position() {
        let old = json!({"status": {"conditions": [
            {"type": "Progressing", "status": "True"},
            {"type": "Available", "status": "False"},
        ]}, "spec": {"containers": [{"name": "web", "image": "a"}]}});
        let new = json!({"status": {"conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Progressing", "status": "True"},
            {"type": "ReplicaFailure", "status": "False"},
        ]}, "spec": {"containers": [{"name": "sidecar", "image": "s"}, {"name": "web", "image": "b"}]}});
        let paths: Vec<String> = diff(&old, &new).into_iter().map(|c| c.path).collect();
        assert_eq!(
            paths,
            vec![
                "spec.containers[name=web].image",
                "spec.containers[name=sidecar]",
                "status.conditions[type=Available].status",
                "status.conditions[type=ReplicaFailure]",
            ]
        );
        let path = parse_path("status.conditions[type=Available].status").unwrap();
        assert_eq!(render(&path), "status.conditions[type=Available].status");
        assert_eq!(lookup(&new, &path), Some(&json!("True")));
        // Elements without a unique key are compared by position.
        let dup = json!({"l": [{"name": "x"}, {"name": "x"}]});
        let dup2 = json!({"l": [{"name": "x"}, {"name": "y"}]});
        assert_eq!(diff(&dup, &dup2)[0].path, "l[1].name");
    }

    #[test]
    fn paths_round_trip_and_bad_ones_are_refused() {
        for text in [
            "spec.replicas",
            "spec.template.spec.containers[0].image",
            "metadata.labels[app.kubernetes.io/name]",
            "status.conditions[1].type",
        ] {
            let path = parse_path(text).unwrap();
            assert_eq!(render(&path), text);
        }
        assert_eq!(
            parse_path(".spec.replicas").unwrap(),
            parse_path("spec.replicas").unwrap()
        );
        for bad in ["", ".", "spec..replicas", "spec.", "spec[0", "spec[]"] {
            assert!(parse_path(bad).is_err(), "{bad:?} was accepted");
        }
        let obj = json!({"spec": {"containers": [{"image": "a"}]}, "metadata": {"labels": {"a.b/c": "d"}}});
        let at = |p: &str| lookup(&obj, &parse_path(p).unwrap()).cloned();
        assert_eq!(at("spec.containers[0].image"), Some(json!("a")));
        assert_eq!(at("metadata.labels[a.b/c]"), Some(json!("d")));
        assert_eq!(at("spec.containers[1]"), None);
    }

    fn entry(revision: u64, change: ChangeType, object: Option<Value>) -> HistoryEntry {
        HistoryEntry {
            change,
            object,
            ..HistoryEntry::deleted(revision)
        }
    }

    #[test]
    fn the_object_at_a_revision_is_the_last_version_at_or_before_it() {
        let history = ObjectHistory {
            resource: "configmaps".into(),
            namespace: Some("default".into()),
            name: "c".into(),
            compacted_revision: 5,
            current_revision: 40,
            revisions: vec![
                entry(10, ChangeType::Created, Some(json!({"v": 1}))),
                entry(20, ChangeType::Updated, Some(json!({"v": 2}))),
                entry(30, ChangeType::Deleted, None),
            ],
        };
        assert_eq!(history.at(10), Ok(&json!({"v": 1})));
        assert_eq!(history.at(29), Ok(&json!({"v": 2})));
        assert_eq!(history.at(30), Err(AtError::Absent));
        assert_eq!(history.at(7), Err(AtError::Absent));
        assert_eq!(history.at(4), Err(AtError::Compacted { oldest: 5 }));
        assert_eq!(history.at(41), Err(AtError::Future { current: 40 }));
        assert!(!history.cut());
    }

    fn managed(manager: &str, time: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": "Update", "time": time, "fieldsV1": fields})
    }

    fn managed_object(entries: Vec<Value>) -> Value {
        json!({"metadata": {"managedFields": entries}})
    }

    fn manager(v: Option<&Value>) -> Option<&str> {
        v.and_then(|e| e["manager"].as_str())
    }

    #[test]
    fn the_writer_is_the_entry_a_change_made_or_moved() {
        let create = managed(
            "kubectl-create",
            "2026-01-01T00:00:00Z",
            json!({"f:spec": {}}),
        );
        let before = managed_object(vec![create.clone()]);
        // A new manager.
        let scaled = managed_object(vec![
            create.clone(),
            managed(
                "kubectl-scale",
                "2026-01-01T00:00:05Z",
                json!({"f:spec": {"f:replicas": {}}}),
            ),
        ]);
        assert_eq!(
            manager(writer(Some(&before), &scaled)),
            Some("kubectl-scale")
        );
        // A manager whose entry moved, the other left as it was.
        let again = managed_object(vec![
            managed(
                "kubectl-create",
                "2026-01-01T00:00:09Z",
                json!({"f:spec": {"f:x": {}}}),
            ),
            managed(
                "kubectl-scale",
                "2026-01-01T00:00:05Z",
                json!({"f:spec": {"f:replicas": {}}}),
            ),
        ]);
        assert_eq!(
            manager(writer(Some(&scaled), &again)),
            Some("kubectl-create")
        );
        // Nothing moved: a manager changed only fields it owned.
        assert_eq!(manager(writer(Some(&again), &again)), None);
        // No version before and two entries of the same second: no way to tell.
        let tie = managed_object(vec![
            managed("a", "2026-01-01T00:00:01Z", json!({})),
            managed("b", "2026-01-01T00:00:01Z", json!({})),
        ]);
        assert_eq!(manager(writer(None, &tie)), None);
        assert_eq!(manager(writer(None, &before)), Some("kubectl-create"));
    }
}
