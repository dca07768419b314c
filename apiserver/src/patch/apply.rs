//! The typed-value operations server-side apply is built from, over JSON objects and their
//! schema: the field set of an object, the merge of an applied configuration into a live
//! object, removal of paths, and the comparison of two objects. Mirrors structured-merge-diff's
//! `typed/helpers.go` + `typed/tofieldset.go` ([`field_set`]), `typed/merge.go` ([`merge`]),
//! `typed/remove.go` ([`remove_items`]) and `typed/compare.go` ([`compare`]).
//!
//! How lists and maps are treated comes from the schema ([`Schema::list_type`],
//! [`Schema::is_atomic`]); without a schema (custom resources for now) maps are granular and
//! lists atomic.
//!
//! ```text
//! live   {spec: {replicas: 3, template: {spec: {containers: [{name: nginx, image: a, ports: [..]}]}}}}
//! config {spec: {template: {spec: {containers: [{name: nginx, image: b}]}}}}
//! merge  {spec: {replicas: 3, template: {spec: {containers: [{name: nginx, image: b, ports: [..]}]}}}}
//! ```

use super::fieldpath::{Path, PathElement, Set};
use super::schema::{ListType, Schema};
use serde_json::{Map, Value};

type OptSchema<'a> = Option<Schema<'a>>;

fn field<'a>(schema: OptSchema<'a>, name: &str) -> OptSchema<'a> {
    schema.and_then(|s| s.field(name))
}

fn items(schema: OptSchema<'_>) -> OptSchema<'_> {
    schema.and_then(|s| s.items())
}

fn list_type(schema: OptSchema<'_>) -> ListType {
    schema.map_or(ListType::Atomic, |s| s.list_type())
}

/// Whether a list is atomic; without a schema, lists are.
fn list_is_atomic(schema: OptSchema<'_>) -> bool {
    schema.is_none_or(|s| s.list_is_atomic())
}

fn is_atomic_map(schema: OptSchema<'_>) -> bool {
    schema.is_some_and(|s| s.is_atomic())
}

/// The path element naming `item`, element `index` of a list of type `kind`: its key fields
/// for a `map` list (a missing key takes the field's schema default), its value for a `set`.
fn element_of(
    item: &Value,
    index: usize,
    kind: &ListType,
    list: OptSchema<'_>,
) -> Result<PathElement, String> {
    match kind {
        ListType::Atomic => Ok(PathElement::Index(index)),
        ListType::Set => Ok(PathElement::Value(item.clone())),
        ListType::Map(keys) => {
            let element = items(list);
            let mut key = Map::new();
            for name in keys {
                let value = item
                    .get(name)
                    .or_else(|| element.and_then(|e| e.default_of(name)))
                    .ok_or_else(|| {
                        format!(
                            "element {index}: associative list with keys has an element that omits key field {name:?} (and doesn't have default value)"
                        )
                    })?;
                key.insert(name.clone(), value.clone());
            }
            Ok(PathElement::Key(key))
        }
    }
}

/// Like [`item_element`], falling back to the index for elements without their keys (for
/// bookkeeping of writes that validation will reject anyway).
fn item_element_lenient(
    item: &Value,
    index: usize,
    kind: &ListType,
    list: OptSchema<'_>,
) -> PathElement {
    element_of(item, index, kind, list).unwrap_or(PathElement::Index(index))
}

/// How [`walk`] builds a field set.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `ToFieldSet` of an applied configuration: elements must carry their keys.
    Apply,
    /// The node set `Compare` works on: elements without keys are named by index, and empty
    /// objects and nulls are fields of their own (so `resources: {}` can be owned).
    Compare,
}

/// The set of fields an applied configuration sets (`ToFieldSet`): every scalar, every atomic
/// list, map or struct, every element of a granular list, and every entry of a map (as opposed
/// to a struct field, which is only a path to its own fields).
pub fn field_set(value: &Value, schema: OptSchema<'_>) -> Result<Set, String> {
    walk(value, schema, Mode::Apply)
        .map(|(_, set)| set)
        .map_err(WalkError::describe)
}

/// The fields of a stored object, for comparing two versions: like [`field_set`], plus empty
/// objects and nulls as leaves; never fails (elements without their keys are named by index).
pub fn field_set_lenient(value: &Value, schema: OptSchema<'_>) -> Set {
    compare_walk(value, schema).1
}

/// Why [`walk`] failed: the message, and the path of the list it failed in, innermost
/// element first (each enclosing level adds its own element as the error goes up).
struct WalkError {
    message: String,
    reversed_path: Vec<PathElement>,
}

impl WalkError {
    /// The same error seen from one level up, below `element`.
    fn within(mut self, element: PathElement) -> WalkError {
        self.reversed_path.push(element);
        self
    }

    /// `<path of the list>: <message>`.
    fn describe(self) -> String {
        let mut path = self.reversed_path;
        path.reverse();
        format!("{}: {}", super::fieldpath::path_string(&path), self.message)
    }
}

/// The field set of `value` relative to its own place, and whether `value` is a leaf (which
/// its place then holds as a member; at the root that is the empty path, which a set ignores).
/// The set is built bottom-up, each node once, instead of inserting every path from the root.
fn walk(value: &Value, schema: OptSchema<'_>, mode: Mode) -> Result<(bool, Set), WalkError> {
    match value {
        Value::Object(_) if is_atomic_map(schema) => Ok((true, Set::new())),
        Value::Object(map) => {
            let mut set = Set::new();
            for (name, child) in map {
                let element = PathElement::Field(name.clone());
                let (leaf, below) = match walk(child, field(schema, name), mode) {
                    Ok(walked) => walked,
                    Err(e) => return Err(e.within(element)),
                };
                let map_entry = schema.is_some_and(|s| !s.declares(name));
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                let member = leaf || map_entry || (mode == Mode::Compare && empty);
                set.add_child(element, member, below);
            }
            Ok((false, set))
        }
        Value::Array(list) if !list_is_atomic(schema) => {
            let kind = list_type(schema);
            let element_schema = items(schema);
            let mut set = Set::new();
            for (index, item) in list.iter().enumerate() {
                let element = match mode {
                    Mode::Apply => {
                        element_of(item, index, &kind, schema).map_err(|message| WalkError {
                            message,
                            reversed_path: Vec::new(),
                        })?
                    }
                    Mode::Compare => item_element_lenient(item, index, &kind, schema),
                };
                let (_, below) = match walk(item, element_schema, mode) {
                    Ok(walked) => walked,
                    Err(e) => return Err(e.within(element)),
                };
                // Every element of a granular list is a member; two elements of one name
                // share (and merge into) one node.
                set.add_child(element, true, below);
            }
            Ok((false, set))
        }
        _ => Ok((true, Set::new())),
    }
}

/// [`walk`] in compare mode, which cannot fail.
fn compare_walk(value: &Value, schema: OptSchema<'_>) -> (bool, Set) {
    walk(value, schema, Mode::Compare).unwrap_or_default()
}

/// Merges the applied configuration `rhs` into `lhs` (`typed.Merge`): `rhs` wins on leaves,
/// granular maps merge member by member, granular lists element by element (elements in both
/// follow `rhs`'s order, `lhs`-only elements keep their places), atomic values are replaced.
pub fn merge(lhs: &Value, rhs: &Value, schema: OptSchema<'_>) -> Value {
    let both_empty = is_empty(lhs) && is_empty(rhs);
    match (lhs, rhs) {
        (Value::Object(l), Value::Object(r)) if !is_atomic_map(schema) && !both_empty => {
            let mut out = l.clone();
            for (name, r_value) in r {
                let merged = match l.get(name) {
                    Some(l_value) => merge(l_value, r_value, field(schema, name)),
                    None => r_value.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(r)) if !list_is_atomic(schema) && !both_empty => {
            Value::Array(merge_lists(l, r, schema))
        }
        _ => rhs.clone(),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `visitListItems` of the merging walker: walk both lists; an element in both is merged and
/// emitted in `rhs` order, an element only in `lhs` stays where it was, new elements come where
/// `rhs` has them.
fn merge_lists(lhs: &[Value], rhs: &[Value], schema: OptSchema<'_>) -> Vec<Value> {
    let element_schema = items(schema);
    let kind = list_type(schema);
    let name = |list: &[Value]| -> Vec<PathElement> {
        list.iter()
            .enumerate()
            .map(|(i, v)| item_element_lenient(v, i, &kind, schema))
            .collect()
    };
    let (l_names, r_names) = (name(lhs), name(rhs));
    let in_lhs = |pe: &PathElement| l_names.iter().position(|n| n == pe);
    let in_rhs = |pe: &PathElement| r_names.iter().position(|n| n == pe);
    let mut shared = r_names.iter().filter(|pe| in_lhs(pe).is_some()).peekable();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);
    while li < lhs.len() || ri < rhs.len() {
        if li < lhs.len() && ri < rhs.len() {
            if l_names[li] == r_names[ri] {
                out.push(merge(&lhs[li], &rhs[ri], element_schema));
                li += 1;
                ri += 1;
                shared.next();
                continue;
            }
            if in_rhs(&l_names[li]).is_some() && shared.peek().is_some_and(|s| **s != l_names[li]) {
                // A shared element whose turn has not come: it is emitted from the rhs side.
                li += 1;
                continue;
            }
        }
        if li < lhs.len() {
            if in_rhs(&l_names[li]).is_none() {
                out.push(lhs[li].clone());
                li += 1;
                continue;
            }
            if ri >= rhs.len() {
                // Already emitted from the rhs side.
                li += 1;
                continue;
            }
        }
        if ri < rhs.len() {
            let merged = match in_lhs(&r_names[ri]) {
                Some(l) => merge(&lhs[l], &rhs[ri], element_schema),
                None => rhs[ri].clone(),
            };
            out.push(merged);
            if shared.peek().is_some_and(|s| **s == r_names[ri]) {
                shared.next();
            }
            ri += 1;
        }
    }
    out
}

/// Removes every member of `set` from `value` (`RemoveItems`): a member field or list element
/// goes with everything below it; otherwise removal descends into the member's children.
pub fn remove_items(value: &mut Value, set: &Set, schema: OptSchema<'_>) {
    match value {
        Value::Object(map) => {
            let names: Vec<String> = map.keys().cloned().collect();
            for name in names {
                let element = [PathElement::Field(name.clone())];
                if set.has(&element) {
                    map.remove(&name);
                } else if let (Some(child), Some(v)) = (set.child(&element), map.get_mut(&name)) {
                    remove_items(v, child, field(schema, &name));
                }
            }
        }
        Value::Array(list) if !list_is_atomic(schema) => {
            let kind = list_type(schema);
            let names: Vec<PathElement> = list
                .iter()
                .enumerate()
                .map(|(i, v)| item_element_lenient(v, i, &kind, schema))
                .collect();
            let mut kept = Vec::with_capacity(list.len());
            for (item, element) in list.drain(..).zip(names) {
                let element = [element];
                if set.has(&element) {
                    continue;
                }
                let mut item = item;
                if let Some(child) = set.child(&element) {
                    remove_items(&mut item, child, items(schema));
                }
                kept.push(item);
            }
            *list = kept;
        }
        _ => {}
    }
}

/// Drops `null` members left by an applied configuration (a null means "unset").
pub fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(list) => list.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// What changed between two versions of an object (`typed.Comparison`).
#[derive(Debug, Default)]
pub struct Comparison {
    /// Fields set in the new object but not the old one.
    pub added: Set,
    /// Leaf fields set in both with different values.
    pub modified: Set,
    /// Fields set in the old object but not the new one.
    pub removed: Set,
}

impl Comparison {
    /// `added ∪ modified`: the fields a write took over.
    pub fn changed(&self) -> Set {
        self.added.union(&self.modified)
    }

    /// Whether no field was added, modified or removed (`Comparison.IsSame`).
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Compares two versions of an object (`typed.Compare`).
///
/// The result is what comparing the two objects' whole field sets gives ([`compare_by_sets`]:
/// `added = new − old`, `removed = old − new`, `modified` = leaves of both whose values differ),
/// but it is found by walking both objects side by side: a subtree that is equal on both sides
/// is skipped, and field sets are built only where the two differ. An ordinary write changes a
/// few fields of a large object, so this is most of the cost of its managedFields bookkeeping.
pub fn compare(old: &Value, new: &Value, schema: OptSchema<'_>) -> Comparison {
    let mut comparison = Comparison::default();
    if old != new {
        compare_children(old, new, schema, &mut Vec::new(), &mut comparison);
    }
    comparison
}

/// [`compare`] of `old` with its top-level member `name` replaced by `replacement` (absent
/// when `None`), without copying `old`: the managedFields bookkeeping compares objects
/// without their `metadata.managedFields`.
pub fn compare_replacing(
    old: &Value,
    (name, replacement): (&str, Option<&Value>),
    new: &Value,
    schema: OptSchema<'_>,
) -> Comparison {
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        let mut replaced = old.clone();
        if let Some(map) = replaced.as_object_mut() {
            match replacement {
                Some(v) => map.insert(name.to_owned(), v.clone()),
                None => map.remove(name),
            };
        }
        return compare(&replaced, new, schema);
    };
    let mut comparison = Comparison::default();
    if !is_atomic_map(schema) {
        compare_members(
            o,
            Some((name, replacement)),
            n,
            schema,
            &mut Vec::new(),
            &mut comparison,
        );
    }
    comparison
}

/// Whether walking `value` inserts its own path ([`walk`] in compare mode): scalars, nulls,
/// atomic lists and atomic maps are leaves; granular maps and lists are only paths to their
/// members.
fn is_leaf_node(value: &Value, schema: OptSchema<'_>) -> bool {
    match value {
        Value::Object(_) => is_atomic_map(schema),
        Value::Array(_) => list_is_atomic(schema),
        _ => true,
    }
}

/// Whether member `name` of an object (whose schema is `parent`) is in the field set whatever
/// its value holds: an entry of a map (not a declared struct field), a null, or an empty object.
fn member_of_object(name: &str, child: &Value, parent: OptSchema<'_>) -> bool {
    parent.is_some_and(|s| !s.declares(name))
        || child.is_null()
        || child.as_object().is_some_and(Map::is_empty)
}

/// Whether the field set of `value` has paths below it.
fn has_members_below(value: &Value, schema: OptSchema<'_>) -> bool {
    match value {
        Value::Object(map) if !is_atomic_map(schema) => map.iter().any(|(name, child)| {
            let child_schema = field(schema, name);
            member_of_object(name, child, schema)
                || is_leaf_node(child, child_schema)
                || has_members_below(child, child_schema)
        }),
        Value::Array(list) if !list_is_atomic(schema) => !list.is_empty(),
        _ => false,
    }
}

/// Compares the members of `old` and `new` (both at `path`), not `path` itself.
fn compare_children(
    old: &Value,
    new: &Value,
    schema: OptSchema<'_>,
    path: &mut Path,
    out: &mut Comparison,
) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) if !is_atomic_map(schema) => {
            compare_members(o, None, n, schema, path, out);
        }
        (Value::Array(o), Value::Array(n)) if !list_is_atomic(schema) => {
            let kind = list_type(schema);
            let names = |list: &[Value]| -> Vec<PathElement> {
                list.iter()
                    .enumerate()
                    .map(|(i, v)| item_element_lenient(v, i, &kind, schema))
                    .collect()
            };
            let (old_names, new_names) = (names(o), names(n));
            if has_duplicates(&old_names) || has_duplicates(&new_names) {
                // Two elements with one name share one path: compare this list by its whole
                // field sets, as `value_at` picks the first of them.
                let local = compare_by_sets(old, new, schema);
                out.added.insert_moved_under(path, false, local.added);
                out.removed.insert_moved_under(path, false, local.removed);
                out.modified.insert_moved_under(path, false, local.modified);
                return;
            }
            let element_schema = items(schema);
            for (old_item, name) in o.iter().zip(&old_names) {
                let new_item = new_names
                    .iter()
                    .position(|new_name| new_name == name)
                    .map(|i| &n[i]);
                if new_item == Some(old_item) {
                    // Equal elements have equal field sets and equal values at every path.
                    continue;
                }
                path.push(name.clone());
                match new_item {
                    Some(new_item) => compare_unequal_node(
                        (old_item, true),
                        (new_item, true),
                        element_schema,
                        path,
                        out,
                    ),
                    None => insert_subtree(old_item, element_schema, true, path, &mut out.removed),
                }
                path.pop();
            }
            for (new_item, name) in n.iter().zip(&new_names) {
                if !old_names.contains(name) {
                    path.push(name.clone());
                    insert_subtree(new_item, element_schema, true, path, &mut out.added);
                    path.pop();
                }
            }
        }
        _ => {
            // Different shapes (or leaves): members are paths of different kinds (fields vs
            // list elements), so whatever one side has below `path` the other lacks.
            let below = |value: &Value, into: &mut Set| {
                // Only the members below `path`: whether `value` is a leaf is `path`'s own
                // membership, which the caller decides.
                into.insert_moved_under(path, false, compare_walk(value, schema).1);
            };
            below(old, &mut out.removed);
            below(new, &mut out.added);
        }
    }
}

/// Compares the members of two granular maps (or structs) at `path`; `replace` stands one
/// member of `old` in for what `old` holds.
fn compare_members(
    o: &Map<String, Value>,
    replace: Option<(&str, Option<&Value>)>,
    n: &Map<String, Value>,
    schema: OptSchema<'_>,
    path: &mut Path,
    out: &mut Comparison,
) {
    let old_member_value = |name: &str| match replace {
        Some((replaced, value)) if replaced == name => value,
        _ => o.get(name),
    };
    let replaced_name = replace.map(|(name, _)| name);
    let old_names = o
        .keys()
        .map(String::as_str)
        .filter(|name| Some(*name) != replaced_name)
        .chain(replace.and_then(|(name, value)| value.map(|_| name)));
    for name in old_names {
        let Some(old_child) = old_member_value(name) else {
            continue;
        };
        let new_child = n.get(name);
        if new_child == Some(old_child) {
            // Equal members have equal field sets and equal values at every path (and the
            // path of neither is built).
            continue;
        }
        let child_schema = field(schema, name);
        path.push(PathElement::Field(name.to_owned()));
        let old_member = member_of_object(name, old_child, schema);
        match new_child {
            Some(new_child) => {
                let new_member = member_of_object(name, new_child, schema);
                compare_unequal_node(
                    (old_child, old_member),
                    (new_child, new_member),
                    child_schema,
                    path,
                    out,
                );
            }
            None => insert_subtree(old_child, child_schema, old_member, path, &mut out.removed),
        }
        path.pop();
    }
    for (name, new_child) in n
        .iter()
        .filter(|(name, _)| old_member_value(name).is_none())
    {
        let child_schema = field(schema, name);
        path.push(PathElement::Field(name.clone()));
        let new_member = member_of_object(name, new_child, schema);
        insert_subtree(new_child, child_schema, new_member, path, &mut out.added);
        path.pop();
    }
}

/// Compares one node present on both sides with different values (equal ones add nothing,
/// and their callers skip them); `.1` says whether the node is a member of its side's field
/// set by virtue of its place (a map entry, a list element, an empty value).
fn compare_unequal_node(
    (old, old_place): (&Value, bool),
    (new, new_place): (&Value, bool),
    schema: OptSchema<'_>,
    path: &mut Path,
    out: &mut Comparison,
) {
    let old_member = old_place || is_leaf_node(old, schema);
    let new_member = new_place || is_leaf_node(new, schema);
    compare_children(old, new, schema, path, out);
    match (old_member, new_member) {
        (true, false) => out.removed.insert(path),
        (false, true) => out.added.insert(path),
        (true, true) if !has_members_below(new, schema) => out.modified.insert(path),
        _ => {}
    }
}

/// Inserts the paths of `value`'s field set (at `path`; `path` itself when `member` or a leaf).
fn insert_subtree(
    value: &Value,
    schema: OptSchema<'_>,
    member: bool,
    path: &[PathElement],
    into: &mut Set,
) {
    let (leaf, below) = compare_walk(value, schema);
    into.insert_moved_under(path, member || leaf, below);
}

fn has_duplicates(names: &[PathElement]) -> bool {
    names
        .iter()
        .enumerate()
        .any(|(i, a)| names[..i].contains(a))
}

/// [`compare`] by building both objects' whole field sets: the definition `compare` must
/// agree with (its tests check that), and what it falls back to for a list with two
/// elements of the same name.
pub fn compare_by_sets(old: &Value, new: &Value, schema: OptSchema<'_>) -> Comparison {
    let old_set = field_set_lenient(old, schema);
    let new_set = field_set_lenient(new, schema);
    let modified = old_set.intersection(&new_set).filter(|path| {
        let leaf = new_set.child(path).is_none_or(Set::is_empty);
        leaf && value_at(old, path, schema) != value_at(new, path, schema)
    });
    Comparison {
        added: new_set.difference(&old_set),
        removed: old_set.difference(&new_set),
        modified,
    }
}

/// The value at `path`, if present.
pub fn value_at<'v>(
    value: &'v Value,
    path: &[PathElement],
    schema: OptSchema<'_>,
) -> Option<&'v Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(value);
    };
    match (first, value) {
        (PathElement::Field(name), Value::Object(map)) => {
            value_at(map.get(name)?, rest, field(schema, name))
        }
        (element, Value::Array(list)) => {
            let kind = list_type(schema);
            let index = list
                .iter()
                .enumerate()
                .position(|(i, v)| item_element_lenient(v, i, &kind, schema) == *element)?;
            value_at(&list[index], rest, items(schema))
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod compare_tests;
