//! Field paths of lab checks: `spec.replicas`, `metadata.labels.app`,
//! `metadata.annotations["deployment.kubernetes.io/revision"]`, `spec.containers[0].image`,
//! `status.conditions[type=Ready].status` — jsonpath's useful core, as a teacher writes it.
//!
//! Like `kubectl get -o jsonpath='{.spec.replicas}'` without the braces and leading dot.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// A map key.
    Key(String),
    /// A list index.
    Index(usize),
    /// The first list element whose `key` field equals `value` (as text).
    Where(String, String),
}

fn parse(path: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = if let Some(quoted) = after.strip_prefix('"') {
                quoted
                    .find('"')
                    .map(|i| i + 2)
                    .filter(|i| after[*i..].starts_with(']'))
            } else {
                after.find(']')
            }
            .ok_or_else(|| format!("{path:?}: unclosed ["))?;
            let inner = &after[..end];
            out.push(if let Some(q) = inner.strip_prefix('"') {
                Segment::Key(q.trim_end_matches('"').to_string())
            } else if let Some((k, v)) = inner.split_once('=') {
                Segment::Where(k.to_string(), v.to_string())
            } else {
                Segment::Index(
                    inner
                        .parse()
                        .map_err(|_| format!("{path:?}: [{inner}] is not an index"))?,
                )
            });
            rest = after[end + 1..]
                .strip_prefix('.')
                .unwrap_or(&after[end + 1..]);
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            if end == 0 {
                return Err(format!("{path:?}: empty field name"));
            }
            out.push(Segment::Key(rest[..end].to_string()));
            rest = rest[end..].strip_prefix('.').unwrap_or(&rest[end..]);
        }
    }
    Ok(out)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The value at `path` in `obj`, if there is one. A malformed path is an error.
pub fn lookup<'a>(obj: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let mut current = obj;
    for seg in parse(path)? {
        let next = match &seg {
            Segment::Key(k) => current.get(k),
            Segment::Index(i) => current.get(i),
            Segment::Where(k, v) => current.as_array().and_then(|items| {
                items
                    .iter()
                    .find(|item| item.get(k).map(text).as_deref() == Some(v))
            }),
        };
        match next {
            Some(n) => current = n,
            None => return Ok(None),
        }
    }
    Ok(Some(current))
}

/// Whether `actual` is what a lab wrote as `expected`: equal JSON, numbers compared as
/// numbers, and a YAML `true`/`3` matching the string `"True"`/`"3"` of a status field.
pub fn matches(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::String(a), Value::Bool(b)) => a.eq_ignore_ascii_case(&b.to_string()),
        (Value::String(a), Value::Number(b)) => *a == b.to_string(),
        (a, b) => a == b,
    }
}

/// A short rendering of a value for messages.
pub fn show(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(v) => {
            let s = text(v);
            if s.chars().count() > 80 {
                format!("{}…", s.chars().take(77).collect::<String>())
            } else {
                s
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_reach_keys_indexes_and_selected_items() {
        let pod = json!({
            "metadata": {"annotations": {"deployment.kubernetes.io/revision": "2"}},
            "spec": {"containers": [{"image": "nginx:1.25"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let get = |p: &str| lookup(&pod, p).expect("valid path").cloned();
        assert_eq!(get("spec.containers[0].image"), Some(json!("nginx:1.25")));
        assert_eq!(
            get("status.conditions[type=Ready].status"),
            Some(json!("True"))
        );
        assert_eq!(
            get("metadata.annotations[\"deployment.kubernetes.io/revision\"]"),
            Some(json!("2"))
        );
        assert_eq!(get("spec.nodeName"), None);
        assert!(lookup(&pod, "spec.containers[x]").is_err());
        assert!(matches(&json!("True"), &json!(true)));
        assert!(matches(&json!(3), &json!(3.0)));
        assert!(!matches(&json!(2), &json!(3)));
    }
}
