//! Field paths and sets of them, and their `FieldsV1` encoding in `managedFields`
//! (structured-merge-diff's `fieldpath/element.go`, `fieldpath/set.go`, `fieldpath/serialize.go`).
//!
//! A path walks into an object one element at a time:
//!
//! ```text
//! .spec.template.spec.containers[name="nginx"].image
//!  f:spec  f:template  f:spec  f:containers  k:{"name":"nginx"}  f:image
//! ```
//!
//! A [`Set`] is a tree of such elements whose nodes may be *members* (the path itself is in the
//! set) and may have children. `FieldsV1` writes the tree as nested JSON objects, with `"."`
//! marking a node that is a member and also has children:
//!
//! ```text
//! {"f:spec":{"f:template":{"f:spec":{"f:containers":{
//!     "k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}}}}}}
//! ```

use super::PatchError;
use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathElement {
    /// A member of an object: `f:name`.
    Field(String),
    /// An element of a `map` list, by its key fields (sorted by name): `k:{"name":"nginx"}`.
    Key(Map<String, Value>),
    /// An element of a `set` list, by its value: `v:"finalizer"`.
    Value(Value),
    /// An element of a list by position (lists without keys): `i:0`.
    Index(usize),
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` key of this element: `f:`, `k:`, `v:` or `i:` and its text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        self.encode_into(&mut out);
        out
    }

    /// Appends [`PathElement::encode`]'s text to `out`.
    fn encode_into(&self, out: &mut String) {
        use std::fmt::Write as _;
        // Writing to a String cannot fail.
        let _ = match self {
            PathElement::Field(name) => {
                out.push_str("f:");
                out.push_str(name);
                Ok(())
            }
            PathElement::Key(key) => {
                out.push_str("k:{");
                let mut write_field = |i: usize, (k, v): (&String, &Value)| {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_str(out, k);
                    out.push(':');
                    write_json(out, v);
                };
                if key.len() == 1 {
                    key.iter().enumerate().for_each(|(i, f)| write_field(i, f));
                } else {
                    sorted(key).enumerate().for_each(|(i, f)| write_field(i, f));
                }
                out.push('}');
                Ok(())
            }
            PathElement::Value(value) => {
                out.push_str("v:");
                write_json(out, value);
                Ok(())
            }
            PathElement::Index(index) => write!(out, "i:{index}"),
        };
    }

    /// Parses a `FieldsV1` key.
    pub fn decode(text: &str) -> Result<PathElement, PatchError> {
        let bad = || PatchError::BadRequest(format!("invalid managedFields path element {text:?}"));
        let (kind, rest) = text.split_once(':').ok_or_else(bad)?;
        match kind {
            "f" => Ok(PathElement::Field(rest.to_owned())),
            "k" => match serde_json::from_str(rest) {
                Ok(Value::Object(key)) => Ok(PathElement::Key(key)),
                _ => Err(bad()),
            },
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|_| bad()),
            "i" => rest.parse().map(PathElement::Index).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

impl Ord for PathElement {
    /// structured-merge-diff's order: fields, then keys, then values, then indexes.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            (a, b) if a.rank() == b.rank() => compare_encoded(a, b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for PathElement {
    /// As structured-merge-diff prints paths in conflicts: `.name`, `[name="nginx"]`,
    /// `[="value"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(key) => {
                let parts: Vec<String> = sorted(key).map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(value) => write!(f, "[={value}]"),
            PathElement::Index(index) => write!(f, "[{index}]"),
        }
    }
}

/// Writes `value` as compact JSON (what `Display` of a `Value` writes).
fn write_json(out: &mut String, value: &Value) {
    use std::fmt::Write as _;
    match value {
        Value::String(text) => write_json_str(out, text),
        // Writing to a String cannot fail.
        _ => drop(write!(out, "{value}")),
    }
}

/// Writes `text` as a JSON string.
fn write_json_str(out: &mut String, text: &str) {
    use std::fmt::Write as _;
    if text.chars().any(|c| c == '"' || c == '\\' || c < ' ') {
        // Needs escapes: as serde_json writes them. Writing to a String cannot fail.
        let _ = write!(out, "{}", Value::String(text.to_owned()));
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

thread_local! {
    /// Scratch buffers for [`compare_encoded`], kept so that comparing keys in a set's tree
    /// allocates nothing.
    static SCRATCH: std::cell::RefCell<(String, String)> =
        const { std::cell::RefCell::new((String::new(), String::new())) };
}

/// Orders two elements of one kind by their `FieldsV1` text, encoding both into reused buffers.
fn compare_encoded(a: &PathElement, b: &PathElement) -> Ordering {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut buffers) => {
            let (left, right) = &mut *buffers;
            left.clear();
            right.clear();
            a.encode_into(left);
            b.encode_into(right);
            left.as_str().cmp(right.as_str())
        }
        // Only reachable if encoding compared elements itself; never expected.
        Err(_) => a.encode().cmp(&b.encode()),
    })
}

/// The fields of a key in name order, whatever order the map keeps.
fn sorted(key: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    let mut fields: Vec<(&String, &Value)> = key.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    fields.into_iter()
}

/// A path from the object's root.
pub type Path = Vec<PathElement>;

/// Prints a path as Kubernetes does in conflict messages: `.spec.replicas`.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of paths, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    children: BTreeMap<PathElement, Node>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    member: bool,
    set: Set,
}

impl Node {
    /// Adds `rest`, a path relative to this node (empty: the node itself).
    fn insert(&mut self, rest: &[PathElement]) {
        if rest.is_empty() {
            self.member = true;
        } else {
            self.set.insert(rest);
        }
    }

    /// [`Set::insert_moved_under`] relative to this node.
    fn insert_moved(&mut self, rest: &[PathElement], member: bool, below: Set) {
        if rest.is_empty() {
            self.member |= member;
            self.set.union_with_owned(below);
        } else {
            self.set.insert_moved_under(rest, member, below);
        }
    }
}

impl Set {
    /// The empty set.
    pub fn new() -> Self {
        Set::default()
    }

    /// Whether the set has no paths.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Adds `path` (the empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        // Most inserts walk through elements already present: one lookup finds them, and an
        // element is cloned only when it is new.
        if let Some(node) = self.children.get_mut(first) {
            node.insert(rest);
            return;
        }
        self.children.entry(first.clone()).or_default().insert(rest);
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => false,
            Some((first, rest)) => self.children.get(first).is_some_and(|n| {
                if rest.is_empty() {
                    n.member
                } else {
                    n.set.has(rest)
                }
            }),
        }
    }

    /// Whether some member starts with `prefix` (is it or lies below it).
    pub fn has_prefix(&self, prefix: &[PathElement]) -> bool {
        match prefix.split_first() {
            None => !self.is_empty(),
            Some((first, rest)) => self
                .children
                .get(first)
                .is_some_and(|n| (rest.is_empty() && n.member) || n.set.has_prefix(rest)),
        }
    }

    /// The subtree below `prefix`, as a set relative to it.
    pub fn child(&self, prefix: &[PathElement]) -> Option<&Set> {
        match prefix.split_first() {
            None => Some(self),
            Some((first, rest)) => self.children.get(first)?.set.child(rest),
        }
    }

    /// All members, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for (element, node) in &self.children {
            prefix.push(element.clone());
            if node.member {
                out.push(prefix.clone());
            }
            node.set.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Members of either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.union_with(other);
        out
    }

    /// Adds every member of `other` (a tree merge: no path is materialized).
    pub fn union_with(&mut self, other: &Set) {
        for (element, theirs) in &other.children {
            match self.children.get_mut(element) {
                Some(mine) => {
                    mine.member |= theirs.member;
                    mine.set.union_with(&theirs.set);
                }
                None => {
                    self.children.insert(element.clone(), theirs.clone());
                }
            }
        }
    }

    /// Members of `self` not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let mut children = BTreeMap::new();
        for (element, mine) in &self.children {
            let node = match other.children.get(element) {
                None => mine.clone(),
                Some(theirs) => Node {
                    member: mine.member && !theirs.member,
                    set: mine.set.difference(&theirs.set),
                },
            };
            if node.member || !node.set.is_empty() {
                children.insert(element.clone(), node);
            }
        }
        Set { children }
    }

    /// Members of both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let mut children = BTreeMap::new();
        for (element, mine) in &self.children {
            let Some(theirs) = other.children.get(element) else {
                continue;
            };
            let node = Node {
                member: mine.member && theirs.member,
                set: mine.set.intersection(&theirs.set),
            };
            if node.member || !node.set.is_empty() {
                children.insert(element.clone(), node);
            }
        }
        Set { children }
    }

    /// Members for which `keep` holds (`keep` sees each member's whole path).
    pub fn filter(&self, mut keep: impl FnMut(&[PathElement]) -> bool) -> Set {
        self.filter_at(&mut Vec::new(), &mut keep)
    }

    fn filter_at(&self, prefix: &mut Path, keep: &mut impl FnMut(&[PathElement]) -> bool) -> Set {
        let mut children = BTreeMap::new();
        for (element, node) in &self.children {
            prefix.push(element.clone());
            let kept = Node {
                member: node.member && keep(prefix),
                set: node.set.filter_at(prefix, keep),
            };
            prefix.pop();
            if kept.member || !kept.set.is_empty() {
                children.insert(element.clone(), kept);
            }
        }
        Set { children }
    }

    /// Adds every member of `other`, taking its nodes instead of copying them.
    pub fn union_with_owned(&mut self, other: Set) {
        if self.children.is_empty() {
            *self = other;
            return;
        }
        for (element, theirs) in other.children {
            self.add_child(element, theirs.member, theirs.set);
        }
    }

    /// Adds the top-level `element`, a member when `member`, with `below` under it (merged
    /// into what the element already has). Nothing is added when the element would be neither
    /// a member nor have anything below it.
    pub fn add_child(&mut self, element: PathElement, member: bool, below: Set) {
        if !member && below.is_empty() {
            return;
        }
        match self.children.entry(element) {
            Entry::Vacant(slot) => {
                slot.insert(Node { member, set: below });
            }
            Entry::Occupied(slot) => {
                let node = slot.into_mut();
                node.member |= member;
                node.set.union_with_owned(below);
            }
        }
    }

    /// Adds `prefix` itself when `member`, and every member of `below` under it, taking
    /// `below`'s nodes (one walk down, without copying). With an empty `prefix`, `below` is
    /// merged at the root and `member` ignored, as the empty path is.
    pub fn insert_moved_under(&mut self, prefix: &[PathElement], member: bool, below: Set) {
        if !member && below.is_empty() {
            return;
        }
        let Some((first, rest)) = prefix.split_first() else {
            self.union_with_owned(below);
            return;
        };
        // An element is cloned only when it is new, as in `insert`.
        if let Some(node) = self.children.get_mut(first) {
            node.insert_moved(rest, member, below);
            return;
        }
        self.children
            .entry(first.clone())
            .or_default()
            .insert_moved(rest, member, below);
    }

    /// Keeps only the top-level elements for which `keep` holds (with everything below them).
    pub fn retain_children(&mut self, mut keep: impl FnMut(&PathElement) -> bool) {
        self.children.retain(|element, _| keep(element));
    }

    /// Unmarks `element` (a top-level element) as a member, keeping what lies below it; the
    /// element goes when nothing does.
    pub fn unmark(&mut self, element: &PathElement) {
        if let Some(node) = self.children.get_mut(element) {
            node.member = false;
            if node.set.is_empty() {
                self.children.remove(element);
            }
        }
    }

    /// Applies `edit` to the subtree below the top-level `element` (if present); drops the
    /// element when it is left neither a member nor with anything below it.
    pub fn edit_child(&mut self, element: &PathElement, edit: impl FnOnce(&mut Set)) {
        if let Some(node) = self.children.get_mut(element) {
            edit(&mut node.set);
            if !node.member && node.set.is_empty() {
                self.children.remove(element);
            }
        }
    }

    /// Whether the set `fields_v1` encodes (`FieldsV1` JSON as [`Set::to_fields_v1`] writes
    /// it) has a member in common with `self`, without decoding it: each of `self`'s paths is
    /// looked up in the JSON tree.
    pub fn intersects_fields_v1(&self, fields_v1: &Value) -> bool {
        let Value::Object(map) = fields_v1 else {
            return false;
        };
        let mut key = String::new();
        self.children.iter().any(|(element, node)| {
            key.clear();
            element.encode_into(&mut key);
            let Some(inner @ Value::Object(inner_map)) = map.get(&key) else {
                return false;
            };
            let member = inner_map.is_empty() || inner_map.contains_key(".");
            (node.member && member) || node.set.intersects_fields_v1(inner)
        })
    }

    /// Encodes the set as `FieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        for (element, node) in &self.children {
            let mut inner = match node.set.to_fields_v1() {
                Value::Object(inner) => inner,
                _ => Map::new(),
            };
            if node.member && !inner.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            map.insert(element.encode(), Value::Object(inner));
        }
        Value::Object(map)
    }

    /// Decodes `FieldsV1` JSON.
    pub fn from_fields_v1(value: &Value) -> Result<Set, PatchError> {
        let Value::Object(map) = value else {
            return Err(PatchError::BadRequest(
                "invalid managedFields: fieldsV1 is not an object".into(),
            ));
        };
        let mut set = Set::new();
        for (key, inner) in map {
            if key == "." {
                continue;
            }
            let element = PathElement::decode(key)?;
            let Value::Object(inner_map) = inner else {
                return Err(PatchError::BadRequest(format!(
                    "invalid managedFields at {key}"
                )));
            };
            let node = Node {
                member: inner_map.is_empty() || inner_map.contains_key("."),
                set: Set::from_fields_v1(inner)?,
            };
            set.children.insert(element, node);
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    fn key(name: &str, value: Value) -> PathElement {
        PathElement::Key(Map::from_iter([(name.to_owned(), value)]))
    }

    #[test]
    fn fields_v1_round_trip() {
        let encoded = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}
            }}}},
            "f:metadata2": {"f:finalizers": {"v:\"a/b\"": {}}}
        });
        let set = Set::from_fields_v1(&encoded).expect("decodes");
        assert_eq!(set.to_fields_v1(), encoded);
        let image = [
            field("spec"),
            field("template"),
            field("spec"),
            field("containers"),
            key("name", json!("nginx")),
            field("image"),
        ];
        assert!(set.has(&image));
        assert!(set.has(&image[..5]), "the element itself is a member");
        assert!(!set.has(&image[..4]), "containers is not");
        assert_eq!(
            path_string(&image),
            ".spec.template.spec.containers[name=\"nginx\"].image"
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = Set::new();
        a.insert(&[field("spec"), field("replicas")]);
        a.insert(&[field("spec"), field("paused")]);
        let mut b = Set::new();
        b.insert(&[field("spec"), field("replicas")]);
        b.insert(&[field("metadata"), field("labels"), field("app")]);
        assert_eq!(
            a.intersection(&b).paths(),
            vec![vec![field("spec"), field("replicas")]]
        );
        assert_eq!(
            a.difference(&b).paths(),
            vec![vec![field("spec"), field("paused")]]
        );
        assert_eq!(a.union(&b).paths().len(), 3);
        assert!(a.difference(&a).is_empty());
        assert!(b.has_prefix(&[field("metadata"), field("labels")]));
    }

    #[test]
    fn elements_encode_as_json_and_order_by_their_encoding() {
        // The encoding as `Display` of the JSON values writes it (what the buffers replace).
        let reference = |e: &PathElement| match e {
            PathElement::Key(key) => {
                let fields: Vec<String> = sorted(key)
                    .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                    .collect();
                format!("k:{{{}}}", fields.join(","))
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Index(i) => format!("i:{i}"),
        };
        let keyed = |pairs: &[(&str, Value)]| {
            PathElement::Key(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
            )
        };
        let elements = vec![
            keyed(&[("type", json!("Ready"))]),
            keyed(&[("type", json!("ReadyX"))]),
            keyed(&[("type", json!("Ready "))]),
            keyed(&[("type", json!("a\"b"))]),
            keyed(&[("type", json!("back\\slash"))]),
            keyed(&[("type", json!("tab\there"))]),
            keyed(&[("type", json!("ünï"))]),
            keyed(&[("containerPort", json!(80)), ("protocol", json!("TCP"))]),
            keyed(&[("protocol", json!("UDP")), ("containerPort", json!(8080))]),
            keyed(&[("x\"y", json!(true))]),
            PathElement::Value(json!("finalizer")),
            PathElement::Value(json!("a\u{1}b")),
            PathElement::Value(json!(1.5)),
            PathElement::Value(json!({"b": 1, "a": [null]})),
            PathElement::Field("name".into()),
            PathElement::Index(12),
        ];
        for a in &elements {
            assert_eq!(a.encode(), reference(a));
            for b in &elements {
                let expected = if a.rank() == b.rank() && a.rank() != 0 && a.rank() != 3 {
                    reference(a).cmp(&reference(b))
                } else {
                    a.cmp(b)
                };
                assert_eq!(a.cmp(b), expected, "{} vs {}", reference(a), reference(b));
            }
        }
    }

    #[test]
    fn bad_fields_v1_is_rejected() {
        assert!(Set::from_fields_v1(&json!({"x:y": {}})).is_err());
        assert!(Set::from_fields_v1(&json!([])).is_err());
    }

    #[test]
    fn intersecting_encoded_fields_agrees_with_decoding_them() {
        let encoded = Set::from_fields_v1(&json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}},
            "f:status": {"f:conditions": {}}
        }))
        .expect("decodes");
        let paths: Vec<Vec<PathElement>> = vec![
            vec![field("metadata")],
            vec![field("metadata"), field("labels")],
            vec![field("metadata"), field("labels"), field("app")],
            vec![field("metadata"), field("labels"), field("tier")],
            vec![field("spec")],
            vec![field("spec"), field("containers")],
            vec![field("spec"), field("containers"), key("name", json!("c"))],
            vec![
                field("spec"),
                field("containers"),
                key("name", json!("c")),
                field("image"),
            ],
            vec![field("spec"), field("containers"), key("name", json!("d"))],
            vec![field("status"), field("conditions")],
            vec![field("status"), field("phase")],
        ];
        let fields_v1 = encoded.to_fields_v1();
        // Every subset of up to two of the paths.
        for (i, a) in paths.iter().enumerate() {
            for b in &paths[i..] {
                let mut lost = Set::new();
                lost.insert(a);
                lost.insert(b);
                assert_eq!(
                    lost.intersects_fields_v1(&fields_v1),
                    !lost.intersection(&encoded).is_empty(),
                    "{a:?} and {b:?}"
                );
            }
        }
        assert!(!Set::new().intersects_fields_v1(&fields_v1));
    }
}
