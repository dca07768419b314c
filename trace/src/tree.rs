//! The causal tree of one trace: each span under the span that caused it, siblings in the
//! order they started.
//!
//! ```text
//!   spans (any order, from several components)        tree (pre-order = causal order)
//!   ┌───────────────────────────────┐                 create deployments            (root)
//!   │ B parent=A  start=5           │   Tree::build   └─ watch event
//!   │ A           start=0           │  ────────────▶     ├─ queue wait
//!   │ D parent=B  start=9           │                    └─ sync deployment
//!   │ C parent=B  start=7           │                       └─ ...
//!   └───────────────────────────────┘
//! ```
//!
//! A span whose parent was never recorded (dropped by a full exporter buffer, or the parent
//! component was not tracing) is an **orphan**: it is shown as a root and flagged, never
//! lost. Parent cycles (only possible with forged input) are broken the same way, and a span
//! id seen twice keeps its first record. The walk is iterative, so no input can overflow the
//! stack.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::context::SpanId;
use crate::span::Span;

/// One trace's spans arranged by cause.
#[derive(Debug)]
pub struct Tree<'a> {
    pub(crate) spans: Vec<&'a Span>,
    pub(crate) children: Vec<Vec<usize>>,
    pub(crate) roots: Vec<usize>,
    pub(crate) orphan: Vec<bool>,
}

/// One line of the tree in causal (pre-)order.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    /// The span.
    pub span: &'a Span,
    /// How deep it is (roots are 0).
    pub depth: usize,
    /// Box-drawing prefix (`│  ├─ `) that draws the tree in a terminal.
    pub prefix: String,
    /// Its parent id is set but the parent is not in the trace.
    pub orphan: bool,
    /// The row index of its parent, if it is not a root.
    pub parent_row: Option<usize>,
    /// Set on a row that stands for a run of failed attempts ([`Tree::folded_rows`]); `span`
    /// is the first of them.
    pub fold: Option<Fold>,
}

fn order(spans: &[&Span], a: usize, b: usize) -> std::cmp::Ordering {
    let (x, y) = (spans[a], spans[b]);
    (x.start_unix_nanos, x.end_unix_nanos, x.span_id).cmp(&(
        y.start_unix_nanos,
        y.end_unix_nanos,
        y.span_id,
    ))
}

impl<'a> Tree<'a> {
    /// Arranges `spans` (of one trace) by parent.
    pub fn build(spans: &'a [Span]) -> Tree<'a> {
        let mut index: HashMap<SpanId, usize> = HashMap::new();
        let mut unique: Vec<&Span> = Vec::new();
        for span in spans {
            if let std::collections::hash_map::Entry::Vacant(e) = index.entry(span.span_id) {
                e.insert(unique.len());
                unique.push(span);
            }
        }
        let n = unique.len();
        let mut children = vec![Vec::new(); n];
        let mut roots = Vec::new();
        let mut orphan = vec![false; n];
        for (i, span) in unique.iter().enumerate() {
            match span.parent_span_id.map(|p| index.get(&p)) {
                None => roots.push(i),
                Some(None) => {
                    orphan[i] = true;
                    roots.push(i);
                }
                Some(Some(&p)) if p == i => {
                    orphan[i] = true;
                    roots.push(i);
                }
                Some(Some(&p)) => children[p].push(i),
            }
        }
        for list in &mut children {
            list.sort_by(|&a, &b| order(&unique, a, b));
        }
        // Spans on a parent cycle are unreachable from any root: make each cycle's earliest
        // span a flagged root.
        let mut reached = vec![false; n];
        let mut stack: Vec<usize> = roots.clone();
        while let Some(i) = stack.pop() {
            if !std::mem::replace(&mut reached[i], true) {
                stack.extend(&children[i]);
            }
        }
        let mut unreached: Vec<usize> = (0..n).filter(|&i| !reached[i]).collect();
        unreached.sort_by(|&a, &b| order(&unique, a, b));
        for i in unreached {
            if reached[i] {
                continue;
            }
            orphan[i] = true;
            roots.push(i);
            for list in &mut children {
                list.retain(|&c| c != i);
            }
            let mut stack = vec![i];
            while let Some(j) = stack.pop() {
                if !std::mem::replace(&mut reached[j], true) {
                    stack.extend(&children[j]);
                }
            }
        }
        roots.sort_by(|&a, &b| order(&unique, a, b));
        Tree {
            spans: unique,
            children,
            roots,
            orphan,
        }
    }

    /// Number of (distinct) spans.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True for an empty trace.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The spans shown as roots because their parent is missing.
    pub fn orphans(&self) -> Vec<&'a Span> {
        (0..self.spans.len())
            .filter(|&i| self.orphan[i])
            .map(|i| self.spans[i])
            .collect()
    }

    /// The root spans (true roots and orphans), earliest first.
    pub fn roots(&self) -> Vec<&'a Span> {
        self.roots.iter().map(|&i| self.spans[i]).collect()
    }

    /// The children of the span with `id`, in causal order.
    pub fn children_of(&self, id: SpanId) -> Vec<&'a Span> {
        self.spans
            .iter()
            .position(|s| s.span_id == id)
            .map(|i| self.children[i].iter().map(|&c| self.spans[c]).collect())
            .unwrap_or_default()
    }

    /// Earliest start and latest end over all spans (0, 0 when empty).
    pub fn bounds(&self) -> (u64, u64) {
        let start = self.spans.iter().map(|s| s.start_unix_nanos).min();
        let end = self.spans.iter().map(|s| s.end_unix_nanos).max();
        (start.unwrap_or(0), end.unwrap_or(0))
    }

    /// The (unfolded) row of span `i`.
    pub(crate) fn row(
        &self,
        i: usize,
        depth: usize,
        prefix: String,
        parent_row: Option<usize>,
    ) -> Row<'a> {
        Row {
            span: self.spans[i],
            depth,
            prefix,
            orphan: self.orphan[i],
            parent_row,
            fold: None,
        }
    }

    /// Every span once, parents before children, siblings by start time.
    pub fn rows(&self) -> Vec<Row<'a>> {
        // (span index, depth, prefix for its children, own prefix, parent row)
        let mut rows = Vec::with_capacity(self.spans.len());
        let mut stack: Vec<(usize, usize, String, String, Option<usize>)> = self
            .roots
            .iter()
            .rev()
            .map(|&r| (r, 0, String::new(), String::new(), None))
            .collect();
        while let Some((i, depth, inherited, own, parent_row)) = stack.pop() {
            let row = rows.len();
            rows.push(self.row(i, depth, own, parent_row));
            let kids = &self.children[i];
            for (k, &c) in kids.iter().enumerate().rev() {
                let (own, next) = child_prefixes(&inherited, k + 1 == kids.len());
                stack.push((c, depth + 1, next, own, Some(row)));
            }
        }
        rows
    }
}

/// The box-drawing prefixes of a child under a parent whose children's prefix is
/// `inherited`: its own (`├─ `, `└─ ` for the last) and its children's (`│  `, `   `).
pub(crate) fn child_prefixes(inherited: &str, last: bool) -> (String, String) {
    let own = format!("{inherited}{}", if last { "└─ " } else { "├─ " });
    let next = format!("{inherited}{}", if last { "   " } else { "│  " });
    (own, next)
}

/// A run of failed attempts shown as one row (made by `fold`, which decides what is a
/// retry; a [`Row`] carries it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fold {
    /// How many failed attempts the row stands for.
    pub attempts: usize,
    /// How many spans it hides: the attempts and what they caused, but the retries shown.
    pub spans: usize,
    /// Why they failed (`409 Conflict`), each once, in the order they first failed so.
    pub reasons: Vec<String>,
    /// The spans it hides, in causal order (for a view that expands it).
    pub hidden: Vec<SpanId>,
}

impl Fold {
    /// `× 37 retries (409 Conflict)`.
    pub fn label(&self) -> String {
        let noun = if self.attempts == 1 {
            "retry"
        } else {
            "retries"
        };
        format!("× {} {noun} ({})", self.attempts, self.reasons.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::SpanContext;
    use crate::span::SpanKind;

    fn span(name: &str, ctx: SpanContext, parent: Option<SpanId>, start: u64) -> Span {
        let mut s = Span::start(ctx, parent, name, SpanKind::Internal, "test");
        s.start_unix_nanos = start;
        s.end_unix_nanos = start + 10;
        s
    }

    #[test]
    fn children_follow_parents_in_start_order_with_tree_prefixes() {
        let a = SpanContext::new_root();
        let b = a.child();
        let c = a.child();
        let d = a.child();
        let spans = vec![
            span("d", d, Some(b.span_id), 9),
            span("c", c, Some(a.span_id), 7),
            span("a", a, None, 0),
            span("b", b, Some(a.span_id), 5),
        ];
        let tree = Tree::build(&spans);
        let rows: Vec<String> = tree
            .rows()
            .iter()
            .map(|r| format!("{}{}", r.prefix, r.span.name))
            .collect();
        assert_eq!(rows, ["a", "├─ b", "│  └─ d", "└─ c"]);
        assert!(tree.orphans().is_empty());
        assert_eq!(tree.bounds(), (0, 19));
        assert_eq!(tree.children_of(a.span_id).len(), 2);
    }

    #[test]
    fn missing_parents_and_cycles_become_flagged_roots() {
        let a = SpanContext::new_root();
        let lost = a.child();
        let x = a.child();
        let y = a.child();
        let spans = vec![
            span("a", a, None, 0),
            span("orphan", a.child(), Some(lost.span_id), 3),
            span("x", x, Some(y.span_id), 4),
            span("y", y, Some(x.span_id), 5),
            span("a again", a, None, 6),
        ];
        let tree = Tree::build(&spans);
        assert_eq!(tree.len(), 4, "a duplicate span id keeps the first record");
        let rows = tree.rows();
        assert_eq!(rows.len(), 4, "every span is shown once");
        let orphans: Vec<&str> = tree.orphans().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(orphans, ["orphan", "x"]);
        let y_row = rows.iter().find(|r| r.span.name == "y").unwrap();
        assert_eq!(y_row.depth, 1, "the cycle is cut at its earliest span");
    }
}
