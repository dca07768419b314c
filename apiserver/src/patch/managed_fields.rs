//! Field ownership: `metadata.managedFields`, server-side apply and the bookkeeping of ordinary
//! writes. Mirrors `staging/src/k8s.io/apimachinery/pkg/util/managedfields/internal/`
//! (`fieldmanager.go`, `structuredmerge.go`, `managedfields.go`, `stripmeta.go`, `conflict.go`)
//! and structured-merge-diff's `merge/update.go` (`Updater.Apply`, `Updater.Update`).
//!
//! Every writer is a *manager* (`kubectl`, `kube-controller-manager`, ...) with an operation
//! (`Apply` or `Update`) and maybe a subresource; each owns a set of fields:
//!
//! ```text
//! apply by M of config C onto live L:
//!   merged  = L ⊕ C                          (apply::merge)
//!   M owns    fields(C)                      (its previous set is replaced)
//!   pruned  = merged − (old(M) − new(M) − owned by anyone)
//!   others  : owned ∩ (added ∪ modified) ≠ ∅ → 409 conflict, unless force (then they lose them)
//!             owned ∩ removed are dropped from their sets
//!
//! update by M from old O to new N:
//!   M owns    its set − removed + added + modified   (operation Update)
//!   others  lose added, modified and removed fields
//! ```
//!
//! Fields the server sets (`metadata.name`, `uid`, `resourceVersion`, ...) are never owned, and
//! writes to the main resource own nothing under `status` while `/status` writes own only that.

use super::apply::{self, Comparison};
use super::fieldpath::{PathElement, Set, path_string};
use super::last_applied;
use super::schema::Schema;
use super::{ApplyConflict, PatchError};
use crate::gvk::{GroupVersion, GroupVersionKind};
use serde_json::{Map, Value, json};

/// `metadata.managedFields[].operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write (create, update, patch).
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedFieldsEntry {
    /// The manager, from the `fieldManager` query parameter or the user agent.
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// The API version the fields were written in.
    pub api_version: String,
    /// When the entry last changed (RFC 3339, seconds).
    pub time: Option<String>,
    /// The subresource written through (`status`, `scale`), if any.
    pub subresource: Option<String>,
    /// The fields owned.
    pub fields: Set,
}

impl ManagedFieldsEntry {
    /// Whether `self` and `other` are the same manager (name, operation and subresource).
    fn same_manager(&self, manager: &str, operation: Operation, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// The manager as Kubernetes prints it in conflicts (`printManager`):
    /// `"kubectl"` for appliers, `"kubectl-edit" using apps/v1` for updaters, with
    /// ` with subresource "status"` after the name when written through one.
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            out.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    /// `sortEncodedManagedFields`: operation, time, manager, API version, subresource.
    fn sort_key(&self) -> (Operation, Option<&str>, &str, &str, Option<&str>) {
        (
            self.operation,
            self.time.as_deref(),
            &self.manager,
            &self.api_version,
            self.subresource.as_deref(),
        )
    }

    fn decode(entry: &Value) -> Option<ManagedFieldsEntry> {
        let text = |name: &str| entry.get(name).and_then(Value::as_str).map(str::to_owned);
        let operation = match entry.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        let fields = match entry.get("fieldsV1") {
            Some(v) => Set::from_fields_v1(v).ok()?,
            None => Set::new(),
        };
        Some(ManagedFieldsEntry {
            manager: text("manager").unwrap_or_default(),
            operation,
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            fields,
        })
    }

    fn encode(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(self.manager));
        entry.insert("operation".into(), json!(self.operation.as_str()));
        entry.insert("apiVersion".into(), json!(self.api_version));
        if let Some(time) = &self.time {
            entry.insert("time".into(), json!(time));
        }
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(sub) = &self.subresource {
            entry.insert("subresource".into(), json!(sub));
        }
        Value::Object(entry)
    }
}

const METADATA: &str = "metadata";
const MANAGED_FIELDS: &str = "managedFields";
const STATUS: &str = "status";

/// `metadata.managedFields` of `obj`, if it is a list.
fn managed_fields_of(obj: &Value) -> Option<&Vec<Value>> {
    obj.get(METADATA)?.get(MANAGED_FIELDS)?.as_array()
}

fn metadata_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut(METADATA).and_then(Value::as_object_mut)
}

/// Reads `metadata.managedFields` (entries that do not decode are dropped, as Kubernetes resets
/// managed fields it cannot read).
pub fn decode(obj: &Value) -> Vec<ManagedFieldsEntry> {
    managed_fields_of(obj)
        .map(|entries| {
            entries
                .iter()
                .filter_map(ManagedFieldsEntry::decode)
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `entries` into `obj`'s `metadata.managedFields` in Kubernetes' order (Apply before
/// Update, then by time, manager and subresource); no entries removes the field.
pub fn encode(obj: &mut Value, entries: Vec<ManagedFieldsEntry>) {
    encode_entries(obj, entries.into_iter().map(Entry::Decoded).collect());
}

/// A copy of `obj` without `metadata.managedFields`.
fn without_managed_fields(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(metadata) = metadata_mut(&mut obj) {
        metadata.remove(MANAGED_FIELDS);
    }
    obj
}

/// Fields no manager owns because the server sets them (`stripmeta.go`).
const SERVER_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    MANAGED_FIELDS,
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The part of `set` a write through `subresource` can own: [`ownable`] done in place, by
/// cutting whole subtrees instead of copying every kept path (the field set of a created pod
/// is hundreds of paths).
fn into_ownable(mut set: Set, subresource: Option<&str>, builtin: bool) -> Set {
    let is =
        |element: &PathElement, name: &str| matches!(element, PathElement::Field(f) if f == name);
    set.retain_children(|top| {
        let in_scope = match subresource {
            Some(STATUS) => is(top, STATUS),
            Some(_) => true,
            None => !(builtin && is(top, STATUS)),
        };
        // `apiVersion` and `kind` are set by the server.
        in_scope && !matches!(top, PathElement::Field(f) if f == "apiVersion" || f == "kind")
    });
    let metadata = PathElement::Field(METADATA.into());
    // `metadata` itself is not owned (only fields below it), nor are the fields the server
    // sets, nor anything but fields below it.
    set.edit_child(&metadata, |below| {
        below.retain_children(
            |f| matches!(f, PathElement::Field(name) if !SERVER_FIELDS.contains(&name.as_str())),
        );
    });
    set.unmark(&metadata);
    set
}

/// The part of `set` a write through `subresource` can own (the definition [`into_ownable`]
/// must agree with; server-side apply uses it).
fn ownable(set: &Set, subresource: Option<&str>, builtin: bool) -> Set {
    set.filter(|path| {
        let field = |i: usize| match path.get(i) {
            Some(PathElement::Field(f)) => Some(f.as_str()),
            _ => None,
        };
        let server_set = match (field(0), field(1)) {
            (Some("apiVersion" | "kind"), _) => true,
            (Some(METADATA), None) => true,
            (Some(METADATA), Some(f)) => SERVER_FIELDS.contains(&f),
            _ => false,
        };
        let is_status = field(0) == Some(STATUS);
        // Built-in kinds keep status behind the /status subresource (their strategies reset
        // it on main-resource writes); custom resources are not known here.
        let in_scope = match subresource {
            Some(STATUS) => is_status,
            Some(_) => true,
            None => !(builtin && is_status),
        };
        !server_set && in_scope
    })
}

/// The applied configuration without the fields the write cannot change (the strategies'
/// `GetResetFields`): a built-in kind's `status` through the main resource, its `spec` through
/// `/status`. Applying them would only produce conflicts over values that are thrown away.
fn reset_fields(applied: &Value, subresource: Option<&str>, builtin: bool) -> Value {
    let mut applied = applied.clone();
    let reset = match subresource {
        None if builtin => Some(STATUS),
        Some(STATUS) => Some("spec"),
        _ => None,
    };
    if let (Some(field), Some(map)) = (reset, applied.as_object_mut()) {
        map.remove(field);
    }
    applied
}

/// Formats `now` as Kubernetes writes `metav1.Time`: RFC 3339 in UTC, whole seconds.
fn timestamp(now: jiff::Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn api_version(obj: &Value) -> String {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The start of the message for an applied configuration that does not fit its schema.
const TYPED_PATCH_ERROR: &str = "failed to create typed patch object";

/// `objectGVKNN`: `default/nginx; apps/v1, Kind=Deployment`.
fn describe_object(obj: &Value) -> String {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    let meta = |field: &str| {
        obj.get(METADATA)
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .unwrap_or("<unknown>")
            .to_owned()
    };
    let gv = GroupVersion::parse_api_version(&text(obj.get("apiVersion")));
    let gvk = GroupVersionKind::new(gv.group, gv.version, text(obj.get("kind")));
    format!("{}/{}; {gvk}", meta("namespace"), meta("name"))
}

/// What [`fn@apply`] needs besides the objects.
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// The schema of the kind, or None (custom resources).
    pub schema: Option<Schema<'a>>,
    /// The field manager.
    pub manager: &'a str,
    /// The subresource applied to, if any.
    pub subresource: Option<&'a str>,
    /// Take over conflicting fields instead of failing.
    pub force: bool,
    /// The time recorded in the manager's entry.
    pub now: jiff::Timestamp,
}

/// Server-side apply (`Updater.Apply` plus the field manager around it).
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    req: ApplyRequest<'_>,
) -> Result<Value, PatchError> {
    if !applied.is_object() {
        return Err(PatchError::BadRequest(
            "apply patch must be a JSON or YAML object".into(),
        ));
    }
    let has_managed = applied
        .get(METADATA)
        .and_then(|m| m.get(MANAGED_FIELDS))
        .is_some_and(|m| !m.is_null());
    if has_managed {
        return Err(PatchError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    let schema = req.schema;
    let builtin = schema.is_some();
    let live_obj = live
        .map(without_managed_fields)
        .unwrap_or_else(|| json!({}));
    let mut entries = live.map(decode).unwrap_or_default();
    let before = entries.clone();

    let reset = reset_fields(applied, req.subresource, builtin);
    let applied = &reset;
    let applied_set = apply::field_set(applied, schema).map_err(|e| {
        PatchError::BadRequest(format!(
            "{TYPED_PATCH_ERROR} ({}): {e}",
            describe_object(applied)
        ))
    })?;
    let new_set = ownable(&applied_set, req.subresource, builtin);
    let mine =
        |e: &ManagedFieldsEntry| e.same_manager(req.manager, Operation::Apply, req.subresource);
    let last_set = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    entries.retain(|e| !mine(e));

    let mut merged = apply::merge(&live_obj, applied, schema);
    apply::drop_nulls(&mut merged);

    // Prune what this manager stopped applying, unless someone else still owns it.
    let owned_by_anyone = entries
        .iter()
        .fold(new_set.clone(), |acc, e| acc.union(&e.fields));
    let stale = last_set
        .difference(&new_set)
        .filter(|path| !owned_by_anyone.has_prefix(path));
    apply::remove_items(&mut merged, &stale, schema);

    let comparison = apply::compare(&live_obj, &merged, schema);
    let changed = comparison.changed();
    // kubectl moving from client-side apply may take over its own earlier values.
    let allowed = last_applied::allowed_conflicts(req.manager, &live_obj, schema);
    let conflicts: Vec<ApplyConflict> = entries
        .iter()
        .flat_map(|e| {
            e.fields
                .intersection(&changed)
                .difference(&allowed)
                .paths()
                .into_iter()
                .map(|p| ApplyConflict {
                    manager: e.manager.clone(),
                    field: path_string(&p),
                    printed_manager: e.describe(),
                })
        })
        .collect();
    if !conflicts.is_empty() && !req.force {
        return Err(PatchError::Conflicts(conflicts));
    }
    disown(&mut entries, &comparison);

    let object_changed = merged != live_obj;
    let previous = before.iter().find(|e| mine(e));
    let time = match previous {
        Some(p) if !object_changed && p.fields == new_set => p.time.clone(),
        _ => Some(timestamp(req.now)),
    };
    if !new_set.is_empty() {
        entries.push(ManagedFieldsEntry {
            manager: req.manager.to_owned(),
            operation: Operation::Apply,
            api_version: api_version(applied),
            time,
            subresource: req.subresource.map(str::to_owned),
            fields: new_set,
        });
    }
    if let Some(live) = live
        && !object_changed
        && same_entries(&entries, &before)
    {
        return Ok(live.clone());
    }
    encode(&mut merged, entries);
    last_applied::update_annotation(req.manager, live, applied, &mut merged);
    Ok(merged)
}

fn same_entries(a: &[ManagedFieldsEntry], b: &[ManagedFieldsEntry]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// Others lose what this write changed or removed; managers left with nothing are dropped.
fn disown(entries: &mut Vec<ManagedFieldsEntry>, comparison: &Comparison) {
    if entries.is_empty() {
        return;
    }
    let lost = comparison.changed().union(&comparison.removed);
    for entry in entries.iter_mut() {
        entry.fields = entry.fields.difference(&lost);
    }
    entries.retain(|e| !e.fields.is_empty());
}

/// One entry as an update handles it.
#[derive(Debug)]
enum Entry<'a> {
    /// Decoded: sent by the writer, or one the update takes fields from.
    Decoded(ManagedFieldsEntry),
    /// A stored entry this update has not changed (so far), kept as its JSON: most updates
    /// change only their writer's own entry, and the others are written back as they were
    /// instead of being decoded into field sets and encoded again.
    Stored(&'a Value),
}

impl<'a> Entry<'a> {
    /// A stored entry kept as it is, if it is exactly what [`ManagedFieldsEntry::encode`]
    /// writes (its members, their types, no empty subresource), so that writing it back equals
    /// decoding and encoding it. The `fieldsV1` keys are not checked: the server wrote them.
    fn stored(entry: &'a Value) -> Option<Entry<'a>> {
        let map = entry.as_object()?;
        let text = |name: &str| map.get(name).and_then(Value::as_str);
        let canonical = matches!(text("operation"), Some("Apply" | "Update"))
            && text("manager").is_some()
            && text("apiVersion").is_some()
            && map.get("time").is_none_or(Value::is_string)
            && map
                .get("subresource")
                .is_none_or(|s| s.as_str().is_some_and(|s| !s.is_empty()))
            && text("fieldsType") == Some("FieldsV1")
            && map.get("fieldsV1").is_some_and(Value::is_object)
            && map.keys().all(|k| {
                matches!(
                    k.as_str(),
                    "manager"
                        | "operation"
                        | "apiVersion"
                        | "time"
                        | "fieldsType"
                        | "fieldsV1"
                        | "subresource"
                )
            });
        canonical.then_some(Entry::Stored(entry))
    }

    /// [`ManagedFieldsEntry::sort_key`], read from either form.
    fn sort_key(&self) -> (Operation, Option<&str>, &str, &str, Option<&str>) {
        match self {
            Entry::Decoded(e) => e.sort_key(),
            Entry::Stored(v) => {
                let text = |name: &str| v.get(name).and_then(Value::as_str);
                let operation = match text("operation") {
                    Some("Apply") => Operation::Apply,
                    _ => Operation::Update,
                };
                (
                    operation,
                    text("time"),
                    text("manager").unwrap_or_default(),
                    text("apiVersion").unwrap_or_default(),
                    text("subresource").filter(|s| !s.is_empty()),
                )
            }
        }
    }

    /// Whether this is `manager`'s `Update` entry through `subresource`.
    fn is_update_by(&self, manager: &str, subresource: Option<&str>) -> bool {
        let (operation, _, name, _, sub) = self.sort_key();
        operation == Operation::Update && name == manager && sub == subresource
    }

    /// The decoded entry (a stored one that does not decode is dropped, as [`decode`] drops
    /// it).
    fn decoded(self) -> Option<ManagedFieldsEntry> {
        match self {
            Entry::Decoded(e) => Some(e),
            Entry::Stored(v) => ManagedFieldsEntry::decode(v),
        }
    }

    /// Loses the members of `lost` (others lose what an update changed): a stored entry is
    /// decoded only if it owns one of them. `None` when nothing is left.
    fn disowned(self, lost: &Set) -> Option<Entry<'a>> {
        let fields_v1 = match &self {
            Entry::Stored(v) => v.get("fieldsV1"),
            Entry::Decoded(_) => None,
        };
        let entry = match self {
            Entry::Stored(v) if !fields_v1.is_some_and(|f| lost.intersects_fields_v1(f)) => {
                // `Set::from_fields_v1` of `{}` (or of only `"."`) is empty.
                let owns_something = fields_v1
                    .and_then(Value::as_object)
                    .is_some_and(|m| m.keys().any(|k| k != "."));
                return owns_something.then_some(Entry::Stored(v));
            }
            other => other.decoded()?,
        };
        let fields = entry.fields.difference(lost);
        (!fields.is_empty()).then_some(Entry::Decoded(ManagedFieldsEntry { fields, ..entry }))
    }

    fn encode(&self) -> Value {
        match self {
            Entry::Decoded(e) => e.encode(),
            Entry::Stored(v) => (*v).clone(),
        }
    }
}

/// [`encode`] of entries in either form: stored ones are written back as they were.
fn encode_entries(obj: &mut Value, mut entries: Vec<Entry<'_>>) {
    entries.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let Some(metadata) = metadata_mut(obj) else {
        return;
    };
    if entries.is_empty() {
        metadata.remove(MANAGED_FIELDS);
    } else {
        let encoded = entries.iter().map(Entry::encode).collect();
        metadata.insert(MANAGED_FIELDS.into(), Value::Array(encoded));
    }
}

/// Records a non-apply write (`Updater.Update`): see [`super::update_managed_fields`].
pub fn update(
    old: Option<&Value>,
    new: &mut Value,
    schema: Option<Schema<'_>>,
    manager: &str,
    subresource: Option<&str>,
    now: jiff::Timestamp,
) {
    // A writer that sends managedFields replaces them (decoded, so that entries that do not
    // decode are dropped); one that leaves them out keeps the stored ones (Kubernetes' rule
    // for updates), which are decoded only as far as this update changes them. Sending the
    // stored ones unchanged (a patch that does not touch them, an update of a read object)
    // is leaving them as they are.
    let sent = managed_fields_of(new)
        .is_some_and(|m| !m.is_empty() && Some(m) != old.and_then(managed_fields_of));
    let entries: Vec<Entry<'_>> = if sent {
        decode(new).into_iter().map(Entry::Decoded).collect()
    } else {
        old.and_then(managed_fields_of)
            .map(|entries| {
                entries
                    .iter()
                    .filter_map(|e| {
                        Entry::stored(e)
                            .or_else(|| ManagedFieldsEntry::decode(e).map(Entry::Decoded))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    // Compare the objects without their managedFields: `new`'s are decoded above and are
    // rewritten below; `old`'s metadata is copied without them (not the whole object).
    if let Some(metadata) = metadata_mut(new) {
        metadata.remove(MANAGED_FIELDS);
    }
    let old_metadata = old
        .and_then(|o| o.get(METADATA))
        .and_then(Value::as_object)
        .filter(|m| m.contains_key(MANAGED_FIELDS))
        .map(|m| {
            Value::Object(
                m.iter()
                    .filter(|(k, _)| *k != MANAGED_FIELDS)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        });
    let empty = json!({});
    let (old_obj, replace) = match (old, &old_metadata) {
        (Some(o), Some(m)) => (o, (METADATA, Some(m))),
        (Some(o), None) => (o, (METADATA, o.get(METADATA))),
        (None, _) => (&empty, (METADATA, None)),
    };
    let full = apply::compare_replacing(old_obj, replace, new, schema);
    if old.is_some() && full.is_same() {
        // A write that changes no field (`Comparison.IsSame`: equal objects, or only the
        // order of a keyed list's elements) does not touch ownership or timestamps.
        encode_entries(new, entries);
        return;
    }
    let changes = UpdateChanges {
        manager,
        subresource,
        builtin: schema.is_some(),
        now,
    };
    record_update(new, entries, full, changes);
}

/// Who wrote an update, for [`record_update`].
#[derive(Debug, Clone, Copy)]
struct UpdateChanges<'a> {
    manager: &'a str,
    subresource: Option<&'a str>,
    builtin: bool,
    now: jiff::Timestamp,
}

/// The ownership changes of an update whose comparison is `full`: others lose what changed,
/// the writer's `Update` entry gains it, and the entries are written into `new`.
fn record_update(
    new: &mut Value,
    mut entries: Vec<Entry<'_>>,
    full: Comparison,
    who: UpdateChanges<'_>,
) {
    let UpdateChanges {
        manager,
        subresource,
        builtin,
        now,
    } = who;
    let comparison = Comparison {
        added: into_ownable(full.added, subresource, builtin),
        modified: into_ownable(full.modified, subresource, builtin),
        removed: full.removed,
    };
    let previous = entries
        .iter()
        .position(|e| e.is_update_by(manager, subresource))
        .and_then(|i| entries.remove(i).decoded());
    // Others lose what this write changed or removed; managers left with nothing are dropped.
    let mut entries: Vec<Entry<'_>> = if entries.is_empty() {
        entries
    } else {
        let lost = comparison.changed().union(&comparison.removed);
        entries
            .into_iter()
            .filter_map(|e| e.disowned(&lost))
            .collect()
    };
    // (its set − removed) ∪ added ∪ modified
    let Comparison {
        added,
        modified,
        removed,
    } = comparison;
    let mut fields = match previous {
        Some(p) => p.fields.difference(&removed),
        None => Set::new(),
    };
    if fields.is_empty() {
        // A create, or a first write by this manager: what it added is its set (no copy).
        fields = added;
    } else {
        fields.union_with(&added);
    }
    fields.union_with(&modified);
    if !fields.is_empty() {
        entries.push(Entry::Decoded(ManagedFieldsEntry {
            manager: manager.to_owned(),
            operation: Operation::Update,
            api_version: api_version(new),
            time: Some(timestamp(now)),
            subresource: subresource.map(str::to_owned),
            fields,
        }));
    }
    encode_entries(new, entries);
}

#[cfg(test)]
#[path = "managed_fields_tests.rs"]
mod tests;
