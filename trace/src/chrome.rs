//! Export to the Chrome Trace Event Format, which Perfetto (<https://ui.perfetto.dev>) and
//! `chrome://tracing` open.
//!
//! Follows "Trace Event Format" (Google, 2016): a JSON object with a `traceEvents` array.
//! Each span is one complete event (`"ph": "X"`, `ts` and `dur` in microseconds); each
//! component is a process (`pid`, named by a `process_name` metadata event); spans are put on
//! threads (`tid`, "lanes") so that the events of one thread nest properly, as the format
//! requires. Cause arrows across lanes and processes are flow events (`"ph": "s"` at the
//! parent, `"ph": "f"` at the child, with `"bp": "e"`).
//!
//! ```json
//! {"displayTimeUnit":"ms","traceEvents":[
//!   {"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"kube-apiserver"}},
//!   {"ph":"X","name":"create deployments","cat":"server","pid":1,"tid":1,
//!    "ts":1700000000000000.0,"dur":2100.0,"args":{"summary":"…","spanId":"…"}}]}
//! ```

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::span::{Span, SpanKind};

fn kind_name(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Internal => "internal",
        SpanKind::Server => "server",
        SpanKind::Client => "client",
        SpanKind::Consumer => "consumer",
    }
}

/// Assigns each span a lane (thread) of its process so that the spans on one lane are nested
/// or disjoint: the first lane whose open span encloses it or has ended.
fn lanes(spans: &[&Span]) -> Vec<usize> {
    // Per lane, the end times of the spans still open on it (a stack).
    let mut open: Vec<Vec<u64>> = Vec::new();
    spans
        .iter()
        .map(|s| {
            for (lane, stack) in open.iter_mut().enumerate() {
                while stack.last().is_some_and(|&end| end <= s.start_unix_nanos) {
                    stack.pop();
                }
                if stack.last().is_none_or(|&end| end >= s.end_unix_nanos) {
                    stack.push(s.end_unix_nanos);
                    return lane;
                }
            }
            open.push(vec![s.end_unix_nanos]);
            open.len() - 1
        })
        .collect()
}

fn micros(nanos: u64) -> f64 {
    nanos as f64 / 1_000.0
}

/// The spans as a Chrome trace-event document.
pub fn to_chrome(spans: &[Span]) -> Value {
    let mut by_component: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for span in spans {
        by_component.entry(&span.component).or_default().push(span);
    }
    let mut events = Vec::new();
    // Where each span went, for the flow arrows.
    let mut placed: BTreeMap<_, (usize, usize, u64)> = BTreeMap::new();
    for (pid0, (component, mut list)) in by_component.into_iter().enumerate() {
        let pid = pid0 + 1;
        list.sort_by_key(|s| (s.start_unix_nanos, std::cmp::Reverse(s.end_unix_nanos)));
        events.push(json!({
            "ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": component},
        }));
        for (span, lane) in list.iter().zip(lanes(&list)) {
            let tid = lane + 1;
            placed.insert(span.span_id, (pid, tid, span.start_unix_nanos));
            let mut args = serde_json::Map::new();
            args.insert("summary".into(), json!(span.summary));
            args.insert("traceId".into(), json!(span.trace_id.to_string()));
            args.insert("spanId".into(), json!(span.span_id.to_string()));
            if let Some(parent) = span.parent_span_id {
                args.insert("parentSpanId".into(), json!(parent.to_string()));
            }
            for (k, v) in &span.attributes {
                args.insert(k.clone(), json!(v));
            }
            events.push(json!({
                "ph": "X",
                "name": span.name,
                "cat": kind_name(span.kind),
                "pid": pid,
                "tid": tid,
                "ts": micros(span.start_unix_nanos),
                "dur": micros(span.end_unix_nanos.saturating_sub(span.start_unix_nanos)),
                "args": Value::Object(args),
            }));
        }
    }
    for (flow_id, span) in spans.iter().enumerate() {
        let Some(parent) = span.parent_span_id.and_then(|p| placed.get(&p)) else {
            continue;
        };
        let Some(child) = placed.get(&span.span_id) else {
            continue;
        };
        if (parent.0, parent.1) == (child.0, child.1) {
            continue; // nested on the same lane: the nesting shows the cause
        }
        events.push(json!({
            "ph": "s", "name": "cause", "cat": "cause", "id": flow_id,
            "pid": parent.0, "tid": parent.1, "ts": micros(parent.2),
        }));
        events.push(json!({
            "ph": "f", "bp": "e", "name": "cause", "cat": "cause", "id": flow_id,
            "pid": child.0, "tid": child.1, "ts": micros(child.2),
        }));
    }
    json!({"displayTimeUnit": "ms", "traceEvents": events})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SpanContext;

    fn span(name: &str, component: &str, start: u64, end: u64, parent: Option<&Span>) -> Span {
        let ctx = parent.map_or_else(SpanContext::new_root, |p| p.context().child());
        let mut s = Span::start(
            ctx,
            parent.map(|p| p.span_id),
            name,
            SpanKind::Internal,
            component,
        );
        s.start_unix_nanos = start;
        s.end_unix_nanos = end;
        s
    }

    #[test]
    fn complete_events_nest_on_their_lanes_and_flows_join_processes() {
        let a = span("a", "api", 0, 10_000, None);
        let b = span("b", "kcm", 2_000, 8_000, Some(&a));
        let c = span("c", "kcm", 3_000, 9_000, Some(&b));
        let d = span("d", "kcm", 4_000, 5_000, Some(&b));
        let doc = to_chrome(&[a, b, c, d]);
        let events = doc["traceEvents"].as_array().unwrap();
        let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(complete.len(), 4);
        let lane = |name: &str| {
            complete
                .iter()
                .find(|e| e["name"] == name)
                .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
                .unwrap()
        };
        // c overlaps b without being inside it: another lane; d nests in b.
        assert_ne!(lane("b"), lane("c"));
        assert_eq!(lane("b"), lane("d"));
        assert_eq!(complete[0]["ts"], 0.0);
        assert_eq!(complete[0]["dur"], 10.0);
        let flows = events.iter().filter(|e| e["ph"] == "s").count();
        assert_eq!(flows, 2, "a→b crosses processes, b→c crosses lanes");
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["api", "kcm"]);
    }
}
