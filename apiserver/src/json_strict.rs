//! Decoding a JSON body into a `serde_json::Value` while noting duplicate keys, in the same
//! single pass.
//!
//! Mirrors the duplicate-field half of `sigs.k8s.io/json`'s `UnmarshalStrict` (used by
//! kube-apiserver's strict serializer under `?fieldValidation=Strict|Warn`): a key given twice
//! in one object is reported as `duplicate field "<path>"` (path like `metadata.name`,
//! `spec.containers[0].name`), the last value winning as in a lenient decode.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::fmt;

/// Decodes `bytes` as JSON, returning the value and the paths of the duplicated keys. There is
/// no recursion limit: callers bound the depth (`crate::deep::check_depth`) and decode a deep
/// body on a large stack (`crate::deep`).
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<(Value, Vec<String>)> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let mut dups = Vec::new();
    let value = Seed {
        path: &Seg::Root,
        dups: &mut dups,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok((value, dups))
}

/// The strict decoding errors for duplicated keys (`duplicate field "metadata"`).
pub fn duplicate_errors(dups: &[String]) -> Vec<String> {
    dups.iter()
        .map(|p| format!("duplicate field \"{p}\""))
        .collect()
}

/// Where a value is, rendered only when a duplicate is found (no allocation per member).
enum Seg<'p> {
    Root,
    Key(&'p Seg<'p>, &'p str),
    Index(&'p Seg<'p>, usize),
}

impl fmt::Display for Seg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seg::Root => Ok(()),
            Seg::Key(Seg::Root, k) => f.write_str(k),
            Seg::Key(parent, k) => write!(f, "{parent}.{k}"),
            Seg::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

struct Seed<'a, 'p> {
    path: &'p Seg<'p>,
    dups: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Seed<'_, '_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let seg = Seg::Index(self.path, out.len());
            match seq.next_element_seed(Seed {
                path: &seg,
                dups: &mut *self.dups,
            })? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = {
                let seg = Seg::Key(self.path, &key);
                map.next_value_seed(Seed {
                    path: &seg,
                    dups: &mut *self.dups,
                })?
            };
            match out.entry(key) {
                Entry::Vacant(e) => {
                    e.insert(value);
                }
                Entry::Occupied(mut e) => {
                    self.dups.push(Seg::Key(self.path, e.key()).to_string());
                    e.insert(value);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicates_are_found_at_any_depth_and_the_last_value_wins() {
        let (v, dups) =
            from_slice(br#"{"a":1,"a":2,"m":{"x":[{"k":1,"k":2}],"y":null,"y":true}}"#).unwrap();
        assert_eq!(v, json!({"a": 2, "m": {"x": [{"k": 2}], "y": true}}));
        assert_eq!(dups, vec!["a", "m.x[0].k", "m.y"]);
        let (v, dups) = from_slice(br#"[1.5, "s", -3, 18446744073709551615]"#).unwrap();
        assert_eq!(v, json!([1.5, "s", -3, 18446744073709551615u64]));
        assert!(dups.is_empty());
        assert!(from_slice(b"{} x").is_err());
        assert!(from_slice(b"{").is_err());
    }
}
