//! One line per trace for `miniplane trace list`: its root, how long it ran, how many spans
//! and which components took part. The collector computes these; the CLI prints them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::context::TraceId;
use crate::span::Span;
use crate::tree::Tree;

/// A trace at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceSummary {
    /// The trace.
    pub trace_id: TraceId,
    /// The first root span's name (`create deployments`).
    pub root: String,
    /// The first root span's summary.
    pub root_summary: String,
    /// Who recorded the root.
    pub root_component: String,
    /// The earliest start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: u64,
    /// From the earliest start to the latest end.
    pub duration_nanos: u64,
    /// How many spans it has.
    pub spans: usize,
    /// The components that recorded spans, sorted.
    pub components: Vec<String>,
    /// It reached the collector's span budget per trace: its later steps were not recorded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

/// Summarises the spans of one trace (`None` when there are none).
pub fn summarize(spans: &[Span]) -> Option<TraceSummary> {
    let first = spans.first()?;
    let tree = Tree::build(spans);
    let (start, end) = tree.bounds();
    let roots = tree.roots();
    let root = roots.first()?;
    Some(TraceSummary {
        trace_id: first.trace_id,
        root: root.name.clone(),
        root_summary: root.summary.clone(),
        root_component: root.component.clone(),
        start_unix_nanos: start,
        duration_nanos: end.saturating_sub(start),
        spans: tree.len(),
        components: spans
            .iter()
            .map(|s| s.component.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        cut: false,
    })
}
