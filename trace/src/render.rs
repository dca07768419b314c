//! Terminal views of one trace: the causal tree (one line of "what and why" per span) and the
//! waterfall (each span as a bar on a shared time axis).
//!
//! ```text
//! trace 4bf9…4736 · 41 spans · 182.4ms · create deployments default/web
//!     start  duration  component                what and why
//!    +0.0ms     2.1ms  kube-apiserver           create deployments: default/web → 201, revision 412
//!    +3.4ms    0.05ms  kube-controller-manager  └─ watch event: ADDED Deployment default/web (+1.2ms)
//! ```
//!
//! ```text
//! create deployments · kube-apiserver       |██                                      |
//!   watch event · kube-controller-manager   |  ▏                                     |
//! ```
//!
//! Both are plain functions from spans to text, so tests can compare them. Both fold runs of
//! retries into one line by default ([`crate::fold`]; the header says how many spans the
//! folds hide), and show every span on request.

use std::fmt::Write as _;

use crate::span::{Span, SpanKind};
use crate::tree::{Row, Tree};

/// `850µs`, `12.3ms`, `1.25s`.
pub fn format_duration(nanos: u64) -> String {
    if nanos < 1_000_000 {
        format!("{}µs", nanos / 1_000)
    } else if nanos < 1_000_000_000 {
        format!("{:.1}ms", nanos as f64 / 1e6)
    } else {
        format!("{:.2}s", nanos as f64 / 1e9)
    }
}

/// How the tree view is drawn.
#[derive(Debug, Clone, Copy, Default)]
pub struct TreeOptions {
    /// Leave out the start and duration columns (golden files, docs).
    pub hide_timings: bool,
    /// Show every span: no retries folded ([`crate::fold`]).
    pub all: bool,
}

/// The one-line description of a span: `name: summary` (for a fold, `name × 3 retries (409
/// Conflict): summary`, the first attempt's summary).
pub fn describe(row: &Row<'_>) -> String {
    let span = row.span;
    let mut line = span.name.clone();
    if let Some(fold) = &row.fold {
        let _ = write!(line, " {}", fold.label());
    }
    if !span.summary.is_empty() {
        let _ = write!(line, ": {}", span.summary);
    }
    if row.orphan {
        line.push_str(" [parent not recorded]");
    }
    line
}

/// For a delivered event (a consumer span): how long after its parent's write it arrived
/// (`+28.5ms after the write`), or that it beat the writer's response.
pub fn delay_after_parent(row: &Row<'_>, rows: &[Row<'_>]) -> Option<String> {
    let parent = rows.get(row.parent_row?)?.span;
    (row.span.kind == SpanKind::Consumer).then(|| {
        // The watch can deliver the event before the writer has its answer.
        match row.span.end_unix_nanos.checked_sub(parent.end_unix_nanos) {
            Some(gap) => format!("+{} after the write", format_duration(gap)),
            None => "before the write was answered".to_owned(),
        }
    })
}

/// The header line: id, span count, total duration and the root's description.
pub fn header(spans: &[Span]) -> String {
    header_folded(spans, 0)
}

/// [`header`], saying how many of the spans `folded` retries hide (when any do).
pub fn header_folded(spans: &[Span], folded: usize) -> String {
    let tree = Tree::build(spans);
    let (start, end) = tree.bounds();
    let root = tree
        .roots()
        .first()
        .map(|r| {
            if r.summary.is_empty() {
                r.name.clone()
            } else {
                r.summary.clone()
            }
        })
        .unwrap_or_default();
    let id = spans
        .first()
        .map(|s| s.trace_id.to_string())
        .unwrap_or_default();
    let folded = match folded {
        0 => String::new(),
        n => format!(" ({n} in folded retries)"),
    };
    format!(
        "trace {id} · {} spans{folded} · {} · {root}",
        tree.len(),
        format_duration(end.saturating_sub(start))
    )
}

/// The causal tree: one line per span with its start offset, duration, component and what
/// and why.
pub fn tree(spans: &[Span], options: TreeOptions) -> String {
    let tree = Tree::build(spans);
    let (rows, folded) = shown_rows(&tree, options.all);
    let (t0, _) = tree.bounds();
    let width = rows
        .iter()
        .map(|r| r.span.component.chars().count())
        .max()
        .unwrap_or(9)
        .max("component".len());
    let mut out = String::new();
    if !options.hide_timings {
        let _ = writeln!(out, "{}", header_folded(spans, folded));
        let _ = writeln!(
            out,
            "{:>9} {:>9}  {:<width$}  what and why",
            "start", "duration", "component"
        );
    }
    for row in &rows {
        let span = row.span;
        let mut text = describe(row);
        if !options.hide_timings {
            if let Some(delay) = delay_after_parent(row, &rows) {
                let _ = write!(text, " ({delay})");
            }
            let offset = span.start_unix_nanos.saturating_sub(t0);
            let _ = write!(
                out,
                "{:>9} {:>9}  ",
                format!("+{}", format_duration(offset)),
                format_duration(span.end_unix_nanos.saturating_sub(span.start_unix_nanos)),
            );
        }
        let _ = writeln!(out, "{:<width$}  {}{}", span.component, row.prefix, text);
    }
    out
}

/// The rows to show: every span's (`all`), or with retries folded; and how many spans the
/// folds hide.
fn shown_rows<'a>(tree: &Tree<'a>, all: bool) -> (Vec<Row<'a>>, usize) {
    if all {
        (tree.rows(), 0)
    } else {
        tree.folded_rows()
    }
}

/// The waterfall: each span as a bar of `width` columns on the trace's time axis, indented by
/// its depth, in causal order; a run of retries is one bar, from the first attempt's start
/// (unless `all`).
pub fn waterfall(spans: &[Span], width: usize, all: bool) -> String {
    let width = width.max(10);
    let tree = Tree::build(spans);
    let (rows, folded) = shown_rows(&tree, all);
    let (t0, t1) = tree.bounds();
    let total = t1.saturating_sub(t0).max(1);
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}{} · {}{}",
                "  ".repeat(r.depth.min(20)),
                r.span.name,
                r.span.component,
                r.fold
                    .as_ref()
                    .map(|f| format!(" {}", f.label()))
                    .unwrap_or_default()
            )
        })
        .collect();
    let label_width = labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .min(70);
    let mut out = String::new();
    let _ = writeln!(out, "{}", header_folded(spans, folded));
    let _ = writeln!(
        out,
        "{:label_width$} |{:<half$}{:>rest$}|",
        "",
        "0",
        format_duration(total),
        half = width / 2,
        rest = width - width / 2,
    );
    for (row, label) in rows.iter().zip(&labels) {
        let span = row.span;
        let col = |t: u64| {
            let offset = u128::from(t.saturating_sub(t0));
            usize::try_from(offset * width as u128 / u128::from(total)).unwrap_or(width)
        };
        let from = col(span.start_unix_nanos).min(width - 1);
        let to = col(span.end_unix_nanos).clamp(from, width);
        let mut bar = String::with_capacity(width * 3);
        for c in 0..width {
            bar.push(if c >= from && c < to {
                '█'
            } else if c == from {
                '▏'
            } else {
                ' '
            });
        }
        let label: String = label.chars().take(label_width).collect();
        let _ = writeln!(
            out,
            "{label:label_width$} |{bar}| +{} {}",
            format_duration(span.start_unix_nanos.saturating_sub(t0)),
            format_duration(span.end_unix_nanos.saturating_sub(span.start_unix_nanos)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SpanContext;

    fn spans() -> Vec<Span> {
        let root = SpanContext::new_root();
        let child = root.child();
        let mut a = Span::start(
            root,
            None,
            "create deployments",
            SpanKind::Server,
            "kube-apiserver",
        );
        a.summary = "default/web → 201".into();
        a.start_unix_nanos = 1_000_000_000;
        a.end_unix_nanos = 1_002_000_000;
        let mut b = Span::start(
            child,
            Some(root.span_id),
            "watch event",
            SpanKind::Consumer,
            "kube-controller-manager",
        );
        b.summary = "ADDED Deployment default/web".into();
        b.start_unix_nanos = 1_003_000_000;
        b.end_unix_nanos = 1_003_500_000;
        vec![a, b]
    }

    #[test]
    fn the_tree_shows_offsets_durations_components_and_delivery_delay() {
        let text = tree(&spans(), TreeOptions::default());
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("2 spans · 3.5ms · default/web → 201"),
            "{text}"
        );
        assert!(
            lines[2].contains("+0µs") && lines[2].contains("2.0ms"),
            "{text}"
        );
        assert!(
            lines[3]
                .ends_with("└─ watch event: ADDED Deployment default/web (+1.5ms after the write)"),
            "{text}"
        );
        let bare = tree(
            &spans(),
            TreeOptions {
                hide_timings: true,
                ..TreeOptions::default()
            },
        );
        assert_eq!(
            bare.lines().collect::<Vec<_>>(),
            [
                "kube-apiserver           create deployments: default/web → 201",
                "kube-controller-manager  └─ watch event: ADDED Deployment default/web",
            ]
        );
    }

    #[test]
    fn the_waterfall_places_bars_on_one_time_axis() {
        let text = waterfall(&spans(), 35, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        let bar = |l: &str| l.split('|').nth(1).unwrap().to_owned();
        assert!(bar(lines[2]).starts_with("████████████████████"), "{text}");
        assert_eq!(
            bar(lines[3]).chars().position(|c| c != ' '),
            Some(30),
            "{text}"
        );
    }

    #[test]
    fn retries_print_as_one_line_unless_every_span_is_asked_for() {
        let mut spans = spans();
        let root = spans[0].context();
        for (i, code) in [409_u16, 409, 409, 200].into_iter().enumerate() {
            let mut put = Span::start(
                root.child(),
                Some(root.span_id),
                "PUT deployments/status",
                SpanKind::Client,
                "kube-controller-manager",
            )
            .with(crate::attr::CODE, code)
            .with(
                "path",
                "/apis/apps/v1/namespaces/default/deployments/web/status",
            );
            put.summary = format!("update default/web → {code}");
            put.start_unix_nanos = 1_004_000_000 + i as u64;
            put.end_unix_nanos = put.start_unix_nanos + 1;
            spans.push(put);
        }
        let folded = tree(&spans, TreeOptions::default());
        assert!(
            folded
                .lines()
                .next()
                .unwrap()
                .contains("6 spans (3 in folded retries)"),
            "{folded}"
        );
        assert!(
            folded.contains(
                "├─ PUT deployments/status × 3 retries (409 Conflict): update default/web → 409"
            ),
            "{folded}"
        );
        assert_eq!(folded.lines().count(), 2 + 4, "{folded}");
        let all = tree(
            &spans,
            TreeOptions {
                all: true,
                ..TreeOptions::default()
            },
        );
        assert_eq!(all.lines().count(), 2 + 6, "{all}");
        assert!(!all.contains('×') && all.lines().next().unwrap().contains("6 spans ·"));
        let bars = waterfall(&spans, 20, false);
        assert!(bars.contains("× 3 retries"), "{bars}");
        assert_eq!(waterfall(&spans, 20, true).lines().count(), 2 + 6);
    }

    #[test]
    fn durations_read_well() {
        assert_eq!(format_duration(850_000), "850µs");
        assert_eq!(format_duration(12_340_000), "12.3ms");
        assert_eq!(format_duration(1_250_000_000), "1.25s");
    }
}
