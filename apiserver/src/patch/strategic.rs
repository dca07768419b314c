//! Strategic merge patch (`application/strategic-merge-patch+json`), the patch format of
//! `kubectl apply` (client-side), `kubectl edit` and `kubectl set image`. Mirrors the applying
//! half of `staging/src/k8s.io/apimachinery/pkg/util/strategicpatch/patch.go`
//! (`StrategicMergeMapPatch` → `mergeMap`, `mergeSlice`, `normalizeElementOrder`).
//!
//! Like a JSON merge patch, except where the schema says otherwise:
//!
//! ```text
//! live  containers: [{name: nginx, image: nginx:1.14, ports: [...]}, {name: sidecar, ...}]
//! patch {"$setElementOrder/containers": [{"name":"nginx"},{"name":"sidecar"}],
//!        "containers": [{"name":"nginx","image":"nginx:1.16"}]}
//!   ──► containers: [{name: nginx, image: nginx:1.16, ports: [...]}, {name: sidecar, ...}]
//! ```
//!
//! - lists with `x-kubernetes-patch-strategy: merge` merge element by element, matched by
//!   `x-kubernetes-patch-merge-key` (lists of scalars merge as sets); other lists are replaced;
//! - `null` deletes a member; `{"$patch": "replace"}` replaces a map or list instead of merging,
//!   `{"$patch": "delete"}` empties a map or deletes the list element with that key;
//! - `$retainKeys: [..]` drops the members of the live map not listed (`retainKeys` strategy);
//! - `$deleteFromPrimitiveList/<list>: [..]` removes values from a merged list of scalars;
//! - `$setElementOrder/<list>: [..]` gives the order of the merged list: patch elements in that
//!   order, live-only elements kept at their relative places.

use super::PatchError;
use super::schema::Schema;
use serde_json::{Map, Value};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// Applies `patch` to `original`, both JSON objects, with the strategies of `schema` (None: no
/// field has a strategy, so this degrades to a merge patch with directives).
pub fn apply(
    original: &Value,
    patch: &Value,
    schema: Option<Schema<'_>>,
) -> Result<Value, PatchError> {
    let (Value::Object(original), Value::Object(patch)) = (original, patch) else {
        return Err(PatchError::BadRequest("invalid JSON document".into()));
    };
    merge_map(original.clone(), patch.clone(), schema).map(Value::Object)
}

fn bad_request(message: &str) -> PatchError {
    PatchError::BadRequest(message.to_owned())
}

fn child<'a>(schema: Option<Schema<'a>>, name: &str) -> Option<Schema<'a>> {
    schema.and_then(|s| s.field(name))
}

/// `mergeMap`: merges `patch` into `original`.
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Option<Schema<'_>>,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        return match directive.as_str() {
            // Replace: the patch is the new map (merged into nothing, to resolve its directives).
            Some("replace") => merge_map(Map::new(), patch, schema),
            Some("delete") => Ok(Map::new()),
            other => Err(bad_request(&format!(
                "unknown patch type: {} in map: {}",
                other.map_or_else(|| directive.to_string(), str::to_owned),
                Value::Object(patch)
            ))),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        if let Some(list) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            // `preprocessDeletionListForMerging`, then `mergeMap` on the list's own key: only a
            // merging list of scalars has values deleted; anything else is merged or replaced
            // as a plain member would be, so a directive aimed at a map (or a scalar) yields
            // an object that fails to decode, as in Kubernetes.
            let field = child(schema, list);
            let merged = match (original.remove(list), patch_value) {
                (_, Value::Null) => continue,
                (Some(Value::Array(mut items)), Value::Array(to_delete))
                    if field.is_some_and(|f| f.merges()) =>
                {
                    items.retain(|v| !to_delete.contains(v));
                    Value::Array(items)
                }
                (Some(Value::Object(o)), Value::Object(p)) => {
                    Value::Object(merge_map(o, p, field)?)
                }
                (_, p) => p,
            };
            original.insert(list.to_string(), merged);
            continue;
        }
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let field = child(schema, &key);
        let merged = match (original.remove(&key), patch_value) {
            (Some(Value::Object(o)), Value::Object(p)) if !field.is_some_and(|f| f.replaces()) => {
                Value::Object(merge_map(o, p, field)?)
            }
            (Some(Value::Array(o)), Value::Array(p)) => Value::Array(merge_list(o, p, field)?),
            // New member, or a type change: the patch value, its own directives resolved.
            (_, p) => insert_value(p, field)?,
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// A patch value that has nothing to merge with: resolve its directives against emptiness.
fn insert_value(value: Value, schema: Option<Schema<'_>>) -> Result<Value, PatchError> {
    match value {
        Value::Object(p) => merge_map(Map::new(), p, schema).map(Value::Object),
        Value::Array(p) => merge_list(Vec::new(), p, schema).map(Value::Array),
        other => Ok(other),
    }
}

/// `applyRetainKeysDirective`: keep only the listed members of `original`.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(bad_request("invalid patch format of retainKeys"));
    };
    let retained = |k: &str| retain.iter().any(|r| r.as_str() == Some(k));
    let patch_ok = patch.iter().all(|(k, v)| {
        v.is_null()
            || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || k.starts_with(SET_ELEMENT_ORDER)
            || retained(k)
    });
    if !patch_ok {
        return Err(bad_request("invalid patch format of retainKeys"));
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// `mergePatchIntoOriginal`: merges each list that has a `$setElementOrder/<list>` directive
/// and orders the result by it.
fn apply_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Option<Schema<'_>>,
) -> Result<(), PatchError> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let Some(Value::Array(order)) = patch.remove(&directive) else {
            return Err(bad_request("invalid patch format of setElementOrder list"));
        };
        let key = &directive[SET_ELEMENT_ORDER.len()..];
        let field = child(schema, key);
        let merge_key = field.and_then(|f| f.merge_key());
        let live = match original.remove(key) {
            Some(Value::Array(live)) => Some(live),
            Some(_) => return Err(bad_request("invalid patch format of setElementOrder list")),
            None => None,
        };
        let merged = match (live.clone(), patch.remove(key)) {
            (live, Some(Value::Array(p))) => merge_list(live.unwrap_or_default(), p, field)?,
            (Some(live), None) => live,
            (None, None) => continue,
            (_, Some(_)) => {
                return Err(bad_request("invalid patch format of setElementOrder list"));
            }
        };
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|item| position(&order, item, merge_key).is_some());
        let ordered = normalize_element_order(
            in_order,
            server_only,
            &order,
            &live.unwrap_or_default(),
            merge_key,
        );
        original.insert(key.to_owned(), Value::Array(ordered));
    }
    Ok(())
}

/// `mergeSliceHandler` + `mergeSlice`: merges two lists per the field's strategy.
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    schema: Option<Schema<'_>>,
) -> Result<Vec<Value>, PatchError> {
    if !schema.is_some_and(|s| s.merges()) {
        return Ok(patch);
    }
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let of_maps = original.iter().chain(&patch).any(Value::is_object);
    if !of_maps {
        let mut merged = original.clone();
        for v in &patch {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        return Ok(order_by_patch(merged, &patch, &original, None));
    }
    let Some(merge_key) = schema.and_then(|s| s.merge_key()) else {
        return Err(PatchError::Invalid(
            "cannot merge lists without merge key for type map".into(),
        ));
    };
    let items = schema.and_then(|s| s.items());

    // `mergeSliceWithSpecialElements`: deletions and whole-list replacement.
    let mut merged = original.clone();
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for element in patch {
        let Value::Object(map) = &element else {
            return Err(bad_request(
                "invalid patch: merging list element is not a map",
            ));
        };
        match map.get(DIRECTIVE).map(|d| d.as_str()) {
            None => plain.push(element),
            Some(Some("delete")) => {
                let value = merge_key_value(map, merge_key)?;
                merged.retain(|m| m.get(merge_key) != Some(value));
            }
            Some(Some("replace")) => replace = true,
            Some(Some("merge")) => {
                return Err(PatchError::Invalid(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            Some(other) => {
                let directive = other.map_or_else(|| map[DIRECTIVE].to_string(), str::to_owned);
                return Err(bad_request(&format!(
                    "unknown patch type: {directive} in map: {element}"
                )));
            }
        }
    }
    if replace {
        return plain.into_iter().map(|p| insert_value(p, items)).collect();
    }

    // `mergeSliceWithoutSpecialElements`: merge matching elements, append new ones.
    for element in &plain {
        let Value::Object(p) = element else { continue };
        let value = merge_key_value(p, merge_key)?;
        match merged.iter().position(|m| m.get(merge_key) == Some(value)) {
            Some(i) => {
                let live = match merged[i].take() {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(live, p.clone(), items)?);
            }
            None => merged.push(insert_value(element.clone(), items)?),
        }
    }
    Ok(order_by_patch(merged, &plain, &original, Some(merge_key)))
}

fn merge_key_value<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a Value, PatchError> {
    map.get(key).ok_or_else(|| {
        PatchError::Invalid(format!(
            "map: {} does not contain declared merge key: {key}",
            Value::Object(map.clone())
        ))
    })
}

/// Orders a merged list: elements named in the patch follow the patch's order, the others keep
/// their live order, and the two are interleaved by their live positions.
fn order_by_patch(
    merged: Vec<Value>,
    patch: &[Value],
    live: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let (from_patch, server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(patch, item, merge_key).is_some());
    normalize_element_order(from_patch, server_only, patch, live, merge_key)
}

/// Where `item` is in `list`, comparing merge-key values (maps) or values (scalars).
fn position(list: &[Value], item: &Value, merge_key: Option<&str>) -> Option<usize> {
    let id = |v: &'_ Value| -> Option<Value> {
        match merge_key {
            Some(k) => v.get(k).cloned(),
            None => Some(v.clone()),
        }
    };
    let wanted = id(item)?;
    list.iter().position(|v| id(v).as_ref() == Some(&wanted))
}

/// `normalizeElementOrder`: sort `patch` by `patch_order` and `server_only` by `server_order`,
/// then merge the two sorted lists, taking a server-only element first only when both are in
/// the live list and it comes first there.
fn normalize_element_order(
    mut patch: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: Option<&str>,
) -> Vec<Value> {
    let rank = |order: &[Value], v: &Value| position(order, v, merge_key).unwrap_or(usize::MAX);
    patch.sort_by_key(|v| rank(patch_order, v));
    server_only.sort_by_key(|v| rank(server_order, v));
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        patch.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => {
                let (li, ri) = (
                    position(server_order, l, merge_key),
                    position(server_order, r, merge_key),
                );
                matches!((li, ri), (Some(li), Some(ri)) if li < ri)
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

#[cfg(test)]
#[path = "strategic_tests.rs"]
mod tests;
