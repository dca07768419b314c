//! The check engine: each [`Check`] is a plain function of a [`Snapshot`] that passes or says
//! what is missing ("deployment default/web: spec.replicas is 3, want 5"). Killercoda's
//! verify scripts are the model; unlike them, checks also read how the state was reached:
//! the writes the API server served or refused and the scheduler's verdicts (the trace
//! collector), and the Events; and what RBAC allows (the authorizer's answers).

use serde_json::Value;

use super::path::{lookup, matches, show};
use super::snapshot::{AccessQuestion, Snapshot, resource_of};
use super::spec::{
    AccessCheck, Check, ConditionCheck, ControllerCheck, CountCheck, EventCheck, FaultCheck,
    MaxAliveCheck, ObjectCheck, SpanCheck, WritesCheck,
};
use trace::{SpanKind, attr};

/// The attribute of the API server's request spans naming the user it authenticated (or the
/// one impersonated), set on served and refused requests alike.
const USER: &str = "user";

/// Passes, or says what is missing.
pub type Outcome = Result<(), String>;

/// Evaluates `check` on `snapshot`.
pub fn evaluate(check: &Check, snapshot: &Snapshot) -> Outcome {
    match check {
        Check::Object(c) => object(c, snapshot),
        Check::Count(c) => count(c, snapshot),
        Check::Condition(c) => condition(c, snapshot),
        Check::Event(c) => event(c, snapshot),
        Check::Controller(c) => controller(c, snapshot),
        Check::Fault(c) => fault(c, snapshot),
        Check::Writes(c) => writes(c, snapshot),
        Check::MaxAlive(c) => max_alive(c, snapshot),
        Check::Span(c) => span(c, snapshot),
        Check::Access(c) => access(c, snapshot),
    }
}

/// The namespace a check of `kind` looks in: `None` for cluster-scoped kinds.
fn namespace_of(s: &Snapshot, kind: &str, namespace: Option<&String>) -> Option<String> {
    let namespaced = s
        .namespaced
        .get(kind)
        .copied()
        .or_else(|| resource_of(kind).map(|r| r.3))
        .unwrap_or(true);
    namespaced.then(|| namespace.cloned().unwrap_or_else(|| "default".into()))
}

fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut v = obj;
    for p in path {
        v = v.get(p)?;
    }
    v.as_str()
}

fn in_namespace(obj: &Value, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|ns| str_at(obj, &["metadata", "namespace"]) == Some(ns))
}

fn find<'a>(
    snapshot: &'a Snapshot,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<&'a Value> {
    snapshot
        .objects
        .get(kind)?
        .iter()
        .find(|o| str_at(o, &["metadata", "name"]) == Some(name) && in_namespace(o, namespace))
}

fn label(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{} {ns}/{name}", kind.to_lowercase()),
        None => format!("{} {name}", kind.to_lowercase()),
    }
}

/// Whether every `path: value` holds; a `null` value asks for the field to be absent (or
/// null, or an empty list or map).
fn fields_hold(obj: &Value, fields: &std::collections::BTreeMap<String, Value>) -> Outcome {
    for (path, want) in fields {
        let got = lookup(obj, path)?;
        if want.is_null() {
            let empty = match got {
                None | Some(Value::Null) => true,
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(m)) => m.is_empty(),
                Some(_) => false,
            };
            if !empty {
                return Err(format!("{path} is {}, want none", show(got)));
            }
            continue;
        }
        if !got.is_some_and(|g| matches(g, want)) {
            return Err(format!(
                "{path} is {}, want {}",
                show(got),
                show(Some(want))
            ));
        }
    }
    Ok(())
}

fn object(c: &ObjectCheck, s: &Snapshot) -> Outcome {
    let ns = namespace_of(s, &c.kind, c.namespace.as_ref());
    let what = label(&c.kind, ns.as_deref(), &c.name);
    match (find(s, &c.kind, ns.as_deref(), &c.name), c.exists) {
        (None, true) => Err(format!("{what} does not exist")),
        (None, false) => Ok(()),
        (Some(_), false) => Err(format!("{what} still exists")),
        (Some(obj), true) => fields_hold(obj, &c.fields).map_err(|e| format!("{what}: {e}")),
    }
}

/// Whether `selector` (`a=b,c!=d,e`) selects `labels`.
fn selects(selector: &str, obj: &Value) -> bool {
    let labels = obj.pointer("/metadata/labels");
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            if let Some((k, v)) = term.split_once("!=") {
                get(k.trim()) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once('=') {
                get(k.trim().trim_end_matches('=')) == Some(v.trim())
            } else {
                get(term).is_some()
            }
        })
}

/// The kind of `obj`'s controller owner, if any.
fn controller_owner(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("kind")?.as_str())
}

fn bounds(n: usize, equals: Option<usize>, min: Option<usize>, max: Option<usize>) -> Outcome {
    if let Some(e) = equals
        && n != e
    {
        return Err(format!("{n}, want {e}"));
    }
    if let Some(m) = min
        && n < m
    {
        return Err(format!("{n}, want at least {m}"));
    }
    if let Some(m) = max
        && n > m
    {
        return Err(format!("{n}, want at most {m}"));
    }
    Ok(())
}

fn count(c: &CountCheck, s: &Snapshot) -> Outcome {
    let ns = namespace_of(s, &c.kind, c.namespace.as_ref());
    let empty = Vec::new();
    let n = s
        .objects
        .get(&c.kind)
        .unwrap_or(&empty)
        .iter()
        .filter(|o| in_namespace(o, ns.as_deref()))
        .filter(|o| c.selector.as_deref().is_none_or(|sel| selects(sel, o)))
        .filter(|o| {
            c.name_prefix
                .as_deref()
                .is_none_or(|p| str_at(o, &["metadata", "name"]).is_some_and(|n| n.starts_with(p)))
        })
        .filter(|o| c.terminating || o.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|o| match c.owner.as_deref() {
            None => true,
            Some("none") => controller_owner(o).is_none(),
            Some(kind) => controller_owner(o) == Some(kind),
        })
        .filter(|o| fields_hold(o, &c.fields).is_ok())
        .count();
    let mut what = format!("{}s", c.kind.to_lowercase());
    if let Some(sel) = &c.selector {
        what.push_str(&format!(" with {sel}"));
    }
    if let Some(p) = &c.name_prefix {
        what.push_str(&format!(" named {p}*"));
    }
    if let Some(o) = &c.owner {
        what.push_str(&format!(" owned by {o}"));
    }
    for (k, v) in &c.fields {
        what.push_str(&format!(" with {k}={}", show(Some(v))));
    }
    bounds(n, c.equals, c.min, c.max).map_err(|e| format!("{what}: {e}"))
}

fn condition(c: &ConditionCheck, s: &Snapshot) -> Outcome {
    let ns = namespace_of(s, &c.kind, c.namespace.as_ref());
    let what = label(&c.kind, ns.as_deref(), &c.name);
    let obj =
        find(s, &c.kind, ns.as_deref(), &c.name).ok_or_else(|| format!("{what} does not exist"))?;
    let cond = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|x| x.get("type").and_then(Value::as_str) == Some(&c.type_))
        })
        .ok_or_else(|| format!("{what} has no {} condition", c.type_))?;
    let status = cond.get("status").and_then(Value::as_str).unwrap_or("");
    if status != c.status {
        return Err(format!(
            "{what}: {} is {status}, want {}",
            c.type_, c.status
        ));
    }
    if let Some(reason) = &c.reason {
        let got = cond.get("reason").and_then(Value::as_str).unwrap_or("");
        if got != reason {
            return Err(format!(
                "{what}: {} reason is {got:?}, want {reason:?}",
                c.type_
            ));
        }
    }
    Ok(())
}

fn event(c: &EventCheck, s: &Snapshot) -> Outcome {
    let empty = Vec::new();
    let n = s
        .objects
        .get("Event")
        .unwrap_or(&empty)
        .iter()
        .filter(|e| e.get("reason").and_then(Value::as_str) == Some(&c.reason))
        .filter(|e| {
            c.kind
                .as_deref()
                .is_none_or(|k| str_at(e, &["involvedObject", "kind"]) == Some(k))
        })
        .filter(|e| {
            c.name_prefix.as_deref().is_none_or(|p| {
                str_at(e, &["involvedObject", "name"]).is_some_and(|n| n.starts_with(p))
            })
        })
        .filter(|e| {
            c.message_contains.as_deref().is_none_or(|m| {
                e.get("message")
                    .and_then(Value::as_str)
                    .is_some_and(|msg| msg.contains(m))
            })
        })
        .count();
    let min = c.min.unwrap_or(1);
    if n >= min {
        return Ok(());
    }
    let mut what = format!("{} event", c.reason);
    if let Some(k) = &c.kind {
        what.push_str(&format!(" on a {k}"));
    }
    if let Some(p) = &c.name_prefix {
        what.push_str(&format!(" named {p}*"));
    }
    if let Some(m) = &c.message_contains {
        what.push_str(&format!(" saying {m:?}"));
    }
    Err(format!("{n} {what}, want at least {min}"))
}

/// Reads the controller's queue as its component last reported it (`paused` is the queue's
/// own state, so a check passes only once the pause has taken effect).
fn controller(c: &ControllerCheck, s: &Snapshot) -> Outcome {
    let status = s
        .controllers
        .iter()
        .find(|x| x.name == c.name)
        .ok_or_else(|| format!("controller {} has not reported its queue", c.name))?;
    if let Some(want) = c.paused
        && status.paused != want
    {
        return Err(if want {
            format!("controller {} is not paused", c.name)
        } else {
            format!("controller {} is still paused", c.name)
        });
    }
    if let Some(min) = c.min_depth
        && status.depth < min
    {
        return Err(format!(
            "controller {}: {} keys queued, want at least {min}",
            c.name, status.depth
        ));
    }
    if let Some(max) = c.max_depth
        && status.depth > max
    {
        return Err(format!(
            "controller {}: {} keys queued, want at most {max}",
            c.name, status.depth
        ));
    }
    if let Some(key) = &c.queued
        && !status.queued.contains(key)
    {
        return Err(format!(
            "controller {}: {key} is not in its queue ({:?})",
            c.name, status.queued
        ));
    }
    Ok(())
}

fn fault(c: &FaultCheck, s: &Snapshot) -> Outcome {
    let present = s.faults.iter().any(|f| f.name == c.name);
    match (present, c.present) {
        (true, false) => Err(format!("fault {} is still in force", c.name)),
        (false, true) => Err(format!("fault {} is not in force", c.name)),
        _ => Ok(()),
    }
}

fn attribute(span: &trace::Span, key: &str) -> Option<String> {
    span.attributes.get(key).map(ToString::to_string)
}

/// The API server's spans of served writes (code < 400), oldest first.
fn served_writes(s: &Snapshot) -> Vec<&trace::Span> {
    answered(s, |c| c < 400)
}

/// The API server's spans of requests answered with a status `code` passes, oldest first.
fn answered(s: &Snapshot, code: impl Fn(u16) -> bool) -> Vec<&trace::Span> {
    let mut spans: Vec<&trace::Span> = s
        .spans
        .iter()
        .filter(|sp| sp.kind == SpanKind::Server)
        .filter(|sp| {
            attribute(sp, attr::CODE)
                .and_then(|c| c.parse::<u16>().ok())
                .is_some_and(&code)
        })
        .collect();
    spans.sort_by_key(|sp| sp.start_unix_nanos);
    spans
}

fn program(span: &trace::Span) -> String {
    attribute(span, "userAgent")
        .and_then(|ua| ua.split('/').next().map(str::to_string))
        .unwrap_or_default()
}

fn writes(c: &WritesCheck, s: &Snapshot) -> Outcome {
    let spans = match c.code {
        None => served_writes(s),
        Some(want) => answered(s, |code| code == want),
    };
    let n = spans
        .into_iter()
        .filter(|sp| attribute(sp, attr::VERB).as_deref() == Some(&c.verb))
        .filter(|sp| attribute(sp, attr::RESOURCE).as_deref() == Some(&c.resource))
        .filter(|sp| attribute(sp, attr::SUBRESOURCE) == c.subresource)
        .filter(|sp| c.by.as_deref().is_none_or(|b| program(sp) == b))
        .filter(|sp| {
            c.user
                .as_deref()
                .is_none_or(|u| attribute(sp, USER).as_deref() == Some(u))
        })
        .filter(|sp| {
            c.name_prefix
                .as_deref()
                .is_none_or(|p| attribute(sp, attr::NAME).is_some_and(|n| n.starts_with(p)))
        })
        .count();
    let mut what = format!("{} {}", c.verb, c.resource);
    if let Some(sub) = &c.subresource {
        what.push_str(&format!("/{sub}"));
    }
    if let Some(p) = &c.name_prefix {
        what.push_str(&format!(" {p}*"));
    }
    if let Some(b) = &c.by {
        what.push_str(&format!(" by {b}"));
    }
    if let Some(u) = &c.user {
        what.push_str(&format!(" by user {u}"));
    }
    if let Some(code) = c.code {
        what.push_str(&format!(" answered {code}"));
    }
    bounds(n, None, c.min, c.max).map_err(|e| format!("{what} (from the trace): {e}"))
}

fn max_alive(c: &MaxAliveCheck, s: &Snapshot) -> Outcome {
    let since = match &c.since_write {
        None => Some(0),
        Some(target) => {
            let (resource, name) = target
                .split_once('/')
                .ok_or_else(|| format!("sinceWrite {target:?}: want resource/name"))?;
            served_writes(s)
                .into_iter()
                .find(|sp| {
                    matches!(
                        attribute(sp, attr::VERB).as_deref(),
                        Some("update" | "patch")
                    ) && attribute(sp, attr::RESOURCE).as_deref() == Some(resource)
                        && attribute(sp, attr::SUBRESOURCE).is_none()
                        && attribute(sp, attr::NAME).as_deref() == Some(name)
                })
                .map(|sp| sp.start_unix_nanos)
        }
    };
    let Some(since) = since else {
        return Err(format!(
            "no change to {} yet (from the trace)",
            c.since_write.as_deref().unwrap_or_default()
        ));
    };
    let mut alive = std::collections::BTreeSet::new();
    let mut peak = 0;
    for sp in served_writes(s) {
        if attribute(sp, attr::RESOURCE).as_deref() != Some(&c.resource)
            || attribute(sp, attr::SUBRESOURCE).is_some()
        {
            continue;
        }
        let Some(name) = attribute(sp, attr::NAME).filter(|n| n.starts_with(&c.name_prefix)) else {
            continue;
        };
        match attribute(sp, attr::VERB).as_deref() {
            Some("create") => {
                alive.insert(name);
            }
            Some("delete") => {
                alive.remove(&name);
            }
            _ => continue,
        }
        if sp.start_unix_nanos >= since {
            peak = peak.max(alive.len());
        }
    }
    bounds(peak, None, c.min, c.max).map_err(|e| {
        format!(
            "at most {} {}* existed at once (from the trace): {e}",
            peak, c.name_prefix
        )
    })
}

fn span(c: &SpanCheck, s: &Snapshot) -> Outcome {
    let found = s.spans.iter().any(|sp| {
        sp.component == c.component
            && attribute(sp, &c.attribute).is_some_and(|v| v.contains(&c.contains))
    });
    if found {
        Ok(())
    } else {
        Err(format!(
            "no {} span with {} containing {:?} (from the trace)",
            c.component, c.attribute, c.contains
        ))
    }
}

/// Every `allowed` request allowed and every `denied` one denied, in that order; the first
/// that is not says so with the authorizer's reason.
fn access(c: &AccessCheck, s: &Snapshot) -> Outcome {
    let allowed = c.allowed.iter().map(|r| (r, true));
    let denied = c.denied.iter().map(|r| (r, false));
    for ((request, want), question) in allowed.chain(denied).zip(AccessQuestion::of(c)) {
        let review = s
            .reviews
            .get(&question)
            .ok_or_else(|| format!("no answer about {} {request}", c.user))?;
        if review.allowed == want {
            continue;
        }
        let why = if review.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", review.reason)
        };
        return Err(if want {
            format!("{} cannot {request}{why}", c.user)
        } else {
            format!("{} can {request}{why}, want it denied", c.user)
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
