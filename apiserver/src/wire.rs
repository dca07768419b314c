//! JSON bytes as kube-apiserver writes them.
//!
//! kube-apiserver encodes its typed objects with Go's `encoding/json` `Encoder`
//! (`staging/src/k8s.io/apimachinery/pkg/runtime/serializer/json/json.go`): struct fields in
//! declaration order — `kind`, `apiVersion`, `metadata`, then the type's own fields, `spec`
//! before `status`, `items` of a list after its `metadata` — `<`, `>` and `&` escaped as
//! `\u003c`, `\u003e`, `\u0026` (and U+2028/U+2029 as `\u2028`/`\u2029`), and a newline after
//! the document. Clients' own test suites compare error `Status` bytes verbatim and locate
//! decode errors by byte offsets, so the order is observable.
//!
//! The server holds objects as `serde_json::Value` trees, whose maps are ordered by key
//! (`apiVersion` before `kind`). Rather than keeping insertion order everywhere (slower), the
//! top level is reordered when it is written: [`top_level`] gives the order, [`Ordered`] writes
//! a value in it. Nested maps (`metadata`, `spec`, ...) keep key order.
//!
//! ```text
//!   Value (key order)                      written
//!   {"apiVersion","items","kind",   ──▶    {"kind","apiVersion","metadata","items"}
//!    "metadata"}
//!   {"apiVersion","kind","metadata",──▶    {"kind","apiVersion","metadata","spec","status"}
//!    "spec","status"}
//! ```

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// The members kube-apiserver's types write first, in this order.
const LEADING: [&str; 3] = ["kind", "apiVersion", "metadata"];
/// The member its types write after all the others.
const TRAILING: &str = "status";

/// The members of a top-level object in the order kube-apiserver writes them: `kind`,
/// `apiVersion`, `metadata`, the others in key order, `status` last.
pub fn top_level(root: &Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    let leading = LEADING.into_iter().filter_map(|k| root.get_key_value(k));
    let middle = root
        .iter()
        .filter(|(k, _)| !LEADING.contains(&k.as_str()) && k.as_str() != TRAILING);
    let trailing = root.get_key_value(TRAILING);
    leading.chain(middle).chain(trailing)
}

/// A value whose top-level members are written in [`top_level`] order (and so are those of
/// each of its `items`, for a list).
pub struct Ordered<'a>(pub &'a Value);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(root) => {
                let mut map = serializer.serialize_map(Some(root.len()))?;
                for (k, v) in top_level(root) {
                    match v {
                        // A list's items are objects of their own.
                        Value::Array(items) if k == "items" => {
                            map.serialize_entry(k, &Items(items))?;
                        }
                        _ => map.serialize_entry(k, v)?,
                    }
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// Writes a list document — `kind`, `apiVersion`, `metadata`, then `items`, each written as
/// [`Ordered`] — followed by a newline, from objects that may be shared (with the watch
/// cache) instead of moved into one tree.
pub fn write_list<T: std::borrow::Borrow<Value>>(
    out: &mut Vec<u8>,
    kind: &str,
    api_version: &str,
    metadata: &Value,
    items: &[T],
) -> serde_json::Result<()> {
    struct List<'a, T> {
        kind: &'a str,
        api_version: &'a str,
        metadata: &'a Value,
        items: &'a [T],
    }
    impl<T: std::borrow::Borrow<Value>> Serialize for List<'_, T> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let mut map = serializer.serialize_map(Some(4))?;
            map.serialize_entry("kind", self.kind)?;
            map.serialize_entry("apiVersion", self.api_version)?;
            map.serialize_entry("metadata", self.metadata)?;
            map.serialize_entry("items", &Items(self.items))?;
            map.end()
        }
    }
    serde_json::to_writer(
        &mut *out,
        &List {
            kind,
            api_version,
            metadata,
            items,
        },
    )?;
    out.push(b'\n');
    Ok(())
}

/// The items of a list (owned or shared), each written as [`Ordered`].
struct Items<'a, T>(&'a [T]);

impl<T: std::borrow::Borrow<Value>> Serialize for Items<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|o| Ordered(o.borrow())))
    }
}

/// Writes `value` (top level in kube-apiserver's order) followed by a newline.
pub fn write_document(out: &mut Vec<u8>, value: &Value) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *out, &Ordered(value))?;
    out.push(b'\n');
    Ok(())
}

/// `value` encoded in [`top_level`] order, without a trailing newline.
pub fn to_vec(value: &Value) -> Vec<u8> {
    serde_json::to_vec(&Ordered(value)).unwrap_or_default()
}

/// Rewrites the characters Go's `encoding/json` escapes for HTML safety. They can only occur
/// inside JSON strings, so the rewrite is safe on any encoded document; a document without
/// them is returned as it is.
pub fn html_escaped(bytes: Vec<u8>) -> Vec<u8> {
    let needs = bytes
        .iter()
        .enumerate()
        .any(|(i, b)| matches!(b, b'<' | b'>' | b'&') || is_line_separator(&bytes[i..]));
    if !needs {
        return bytes;
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            _ if is_line_separator(&bytes[i..]) => {
                let code = if bytes[i + 2] == 0xA8 { "2028" } else { "2029" };
                out.extend_from_slice(b"\\u");
                out.extend_from_slice(code.as_bytes());
                i += 3;
                continue;
            }
            b => out.push(b),
        }
        i += 1;
    }
    out
}

/// U+2028 or U+2029 in UTF-8 at the start of `rest`.
fn is_line_separator(rest: &[u8]) -> bool {
    matches!(rest, [0xE2, 0x80, 0xA8 | 0xA9, ..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_and_lists_lead_with_kind_api_version_metadata() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"},
            "status": {"phase": "Running"}, "spec": {"nodeName": "n"}});
        assert_eq!(
            String::from_utf8(to_vec(&pod)).unwrap(),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":{"nodeName":"n"},"status":{"phase":"Running"}}"#
        );
        let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "3"},
            "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {}}]});
        assert_eq!(
            String::from_utf8(to_vec(&list)).unwrap(),
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"3"},"items":[{"kind":"Pod","apiVersion":"v1","metadata":{}}]}"#
        );
        let mut doc = Vec::new();
        write_document(&mut doc, &json!(["x"])).unwrap();
        assert_eq!(doc, b"[\"x\"]\n");
    }

    #[test]
    fn html_characters_are_escaped_as_go_does() {
        let v = json!({"m": "<nil> & >\u{2028}\u{2029}ü"});
        let escaped = html_escaped(serde_json::to_vec(&v).unwrap());
        assert_eq!(
            String::from_utf8(escaped.clone()).unwrap(),
            r#"{"m":"\u003cnil\u003e \u0026 \u003e\u2028\u2029ü"}"#
        );
        let back: Value = serde_json::from_slice(&escaped).unwrap();
        assert_eq!(back, v);
        assert_eq!(html_escaped(b"{}".to_vec()), b"{}");
    }
}
