//! The causal rows of one trace as data, for the web UI's waterfall: the same rows, the same
//! one line of "what and why" and the same delivery delays as `miniplane trace` prints
//! ([`crate::render::tree`]), plus what a drawing needs (depth, offsets) and the store
//! revisions the trace's writes produced, which the UI's replay slider steps through.
//!
//! `folded` lists the rows the UI shows by default, with runs of retries folded as the CLI
//! folds them (each fold lists the rows it hides, for a click to expand).
//!
//! Jaeger's UI gets raw spans and builds the tree in the browser; here the tree is built once,
//! in Rust, by the code the terminal views use, so the two can never disagree.
//!
//! ```json
//! {"traceId":"7c2e…","header":"trace 7c2e… · 135 spans · 722.7ms · …",
//!  "startUnixNanos":…,"endUnixNanos":…,
//!  "rows":[{"depth":0,"parentRow":null,"orphan":false,"line":"create deployments: …",
//!           "delay":null,"offsetNanos":0,"durationNanos":15500000,"span":{…}}, …],
//!  "revisions":[{"revision":13,"atNanos":15500000,"row":0}, …]}
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::attr;
use crate::context::{SpanId, TraceId};
use crate::render::{delay_after_parent, describe, header_folded};
use crate::span::Span;
use crate::tree::Tree;

/// One trace, ready to draw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceView {
    /// The trace.
    pub trace_id: TraceId,
    /// The header line of the terminal view (id, spans, duration, root).
    pub header: String,
    /// The earliest span start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: u64,
    /// The latest span end.
    pub end_unix_nanos: u64,
    /// Every span once, in causal (pre-)order: parents before children, siblings by start.
    pub rows: Vec<ViewRow>,
    /// The store revisions the trace's writes produced, in the order they were answered.
    pub revisions: Vec<RevisionMark>,
    /// The trace reached the collector's span budget: its later steps were not recorded.
    #[serde(default)]
    pub cut: bool,
    /// The rows as shown by default: runs of retries folded ([`crate::fold`]), in causal
    /// order. Each names its row in `rows`; a fold names the first attempt's.
    #[serde(default)]
    pub folded: Vec<ShownRow>,
}

/// One row of the folded waterfall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownRow {
    /// The row of `rows` it shows (for a fold: the first failed attempt).
    pub row: usize,
    /// Depth in the folded tree (a retry shown in place of its failed attempts sits at their
    /// depth).
    pub depth: usize,
    /// For a fold: what it stands for, and the rows of `rows` it hides (shown on a click).
    pub fold: Option<ShownFold>,
}

/// A run of retries as one row of the waterfall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShownFold {
    /// `× 37 retries (409 Conflict)`.
    pub label: String,
    /// The rows of `rows` it hides, in causal order.
    pub rows: Vec<usize>,
}

/// One row of the waterfall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewRow {
    /// Depth in the causal tree (roots are 0).
    pub depth: usize,
    /// The row of its parent, if it is not a root.
    pub parent_row: Option<usize>,
    /// Its parent was never recorded.
    pub orphan: bool,
    /// `name: summary`, as the tree view prints it.
    pub line: String,
    /// For a delivered event: how long after its cause's write it arrived.
    pub delay: Option<String>,
    /// Start, from the trace's start.
    pub offset_nanos: u64,
    /// The span's own duration.
    pub duration_nanos: u64,
    /// The span as the collector keeps it (attributes, links, ids).
    pub span: Span,
}

/// A write of the trace that produced a store revision: a point the replay can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionMark {
    /// The revision (the written object's new resourceVersion).
    pub revision: u64,
    /// When the write was answered, from the trace's start.
    pub at_nanos: u64,
    /// The row of the API server span that made it.
    pub row: usize,
}

/// Builds the view of one trace's spans (any order); `cut` is for the collector to set.
pub fn view(trace_id: TraceId, spans: &[Span]) -> TraceView {
    let tree = Tree::build(spans);
    let rows = tree.rows();
    let (shown, folded_spans) = tree.folded_rows();
    let row_of: HashMap<SpanId, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.span.span_id, i))
        .collect();
    let folded: Vec<ShownRow> = shown
        .iter()
        .filter_map(|r| {
            Some(ShownRow {
                row: *row_of.get(&r.span.span_id)?,
                depth: r.depth,
                fold: r.fold.as_ref().map(|f| ShownFold {
                    label: f.label(),
                    rows: f
                        .hidden
                        .iter()
                        .filter_map(|id| row_of.get(id).copied())
                        .collect(),
                }),
            })
        })
        .collect();
    let (start, end) = tree.bounds();
    let out: Vec<ViewRow> = rows
        .iter()
        .map(|row| ViewRow {
            depth: row.depth,
            parent_row: row.parent_row,
            orphan: row.orphan,
            line: describe(row),
            delay: delay_after_parent(row, &rows),
            offset_nanos: row.span.start_unix_nanos.saturating_sub(start),
            duration_nanos: row
                .span
                .end_unix_nanos
                .saturating_sub(row.span.start_unix_nanos),
            span: row.span.clone(),
        })
        .collect();
    let mut revisions: Vec<RevisionMark> = out
        .iter()
        .enumerate()
        .filter_map(|(i, row)| {
            let revision = row.span.attribute(attr::REVISION)?.parse().ok()?;
            Some(RevisionMark {
                revision,
                at_nanos: row.span.end_unix_nanos.saturating_sub(start),
                row: i,
            })
        })
        .collect();
    revisions.sort_by_key(|m| (m.revision, m.at_nanos));
    revisions.dedup_by_key(|m| m.revision);
    TraceView {
        trace_id,
        header: header_folded(spans, folded_spans),
        start_unix_nanos: start,
        end_unix_nanos: end,
        rows: out,
        revisions,
        cut: false,
        folded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SpanContext;
    use crate::span::SpanKind;

    fn at(mut span: Span, start: u64, end: u64) -> Span {
        span.start_unix_nanos = start;
        span.end_unix_nanos = end;
        span
    }

    #[test]
    fn rows_follow_the_tree_and_revisions_the_writes() {
        let root_ctx = SpanContext::new_root();
        let root = at(
            Span::start(
                root_ctx,
                None,
                "create deployments",
                SpanKind::Server,
                "kube-apiserver",
            )
            .with(attr::REVISION, 13_u64),
            1_000,
            3_000,
        );
        let event_ctx = root_ctx.child();
        let event = at(
            Span::start(
                event_ctx,
                Some(root_ctx.span_id),
                "watch event",
                SpanKind::Consumer,
                "kube-controller-manager",
            ),
            4_000,
            5_000,
        );
        let write = at(
            Span::start(
                event_ctx.child(),
                Some(event_ctx.span_id),
                "create replicasets",
                SpanKind::Server,
                "kube-apiserver",
            )
            .with(attr::REVISION, 14_u64),
            6_000,
            9_000,
        );
        // Any order in, causal order out.
        let v = view(root_ctx.trace_id, &[write, event, root]);
        let names: Vec<&str> = v.rows.iter().map(|r| r.span.name.as_str()).collect();
        assert_eq!(
            names,
            ["create deployments", "watch event", "create replicasets"]
        );
        assert_eq!(
            v.rows.iter().map(|r| r.depth).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(v.rows[2].parent_row, Some(1));
        assert_eq!(v.rows[1].delay.as_deref(), Some("+2µs after the write"));
        assert_eq!(
            (v.rows[2].offset_nanos, v.rows[2].duration_nanos),
            (5_000, 3_000)
        );
        assert_eq!((v.start_unix_nanos, v.end_unix_nanos), (1_000, 9_000));
        assert_eq!(
            v.revisions,
            [
                RevisionMark {
                    revision: 13,
                    at_nanos: 2_000,
                    row: 0
                },
                RevisionMark {
                    revision: 14,
                    at_nanos: 8_000,
                    row: 2
                }
            ]
        );
        assert!(v.header.contains("3 spans"), "{}", v.header);
        // No retries: the folded rows are the rows.
        assert_eq!(
            v.folded
                .iter()
                .map(|r| (r.row, r.depth, r.fold.is_some()))
                .collect::<Vec<_>>(),
            [(0, 0, false), (1, 1, false), (2, 2, false)]
        );
    }

    #[test]
    fn folded_rows_name_the_rows_each_fold_hides() {
        let root_ctx = SpanContext::new_root();
        let mut spans = vec![at(
            Span::start(root_ctx, None, "sync", SpanKind::Internal, "cm"),
            0,
            100,
        )];
        for (i, code) in [409_u16, 409, 200].into_iter().enumerate() {
            let ctx = root_ctx.child();
            let start = 10 + 10 * i as u64;
            spans.push(at(
                Span::start(
                    ctx,
                    Some(root_ctx.span_id),
                    "PUT pods/status",
                    SpanKind::Client,
                    "cm",
                )
                .with(attr::CODE, code),
                start,
                start + 5,
            ));
            // The server's span of each request.
            spans.push(at(
                Span::start(
                    ctx.child(),
                    Some(ctx.span_id),
                    "update pods/status",
                    SpanKind::Server,
                    "kube-apiserver",
                )
                .with(attr::CODE, code),
                start + 1,
                start + 4,
            ));
        }
        let v = view(root_ctx.trace_id, &spans);
        assert_eq!(v.rows.len(), 7, "every span is a row");
        let shown: Vec<(usize, usize, Option<Vec<usize>>)> = v
            .folded
            .iter()
            .map(|r| (r.row, r.depth, r.fold.as_ref().map(|f| f.rows.clone())))
            .collect();
        assert_eq!(
            shown,
            [
                (0, 0, None),
                (1, 1, Some(vec![1, 2, 3, 4])),
                (5, 1, None),
                (6, 2, None)
            ]
        );
        assert_eq!(
            v.folded[1].fold.as_ref().map(|f| f.label.as_str()),
            Some("× 2 retries (409 Conflict)")
        );
        assert!(
            v.header.contains("7 spans (4 in folded retries)"),
            "{}",
            v.header
        );
    }
}
