//! Folded retries: the tree's rows with each run of failed attempts at one operation shown as
//! one line, `× 37 retries (409 Conflict)`, so that the story is not buried under them.
//!
//! Jaeger and Perfetto show every span; a controller retrying a status update after `409
//! Conflict` (its cache a step behind its own last write) then fills the screen with the same
//! line. Here a retry is recognised from the tree alone:
//!
//! ```text
//!   same operation = same span name, component, verb, resource, subresource, object,
//!                    request path and work-queue key
//!   a run          = consecutive siblings of the same operation; a GET of the written object
//!                    between a failed write and the next (client-go's RetryOnConflict) is
//!                    part of the failed attempt
//!   a retry chain  = a failed span with a child of its own operation (a failed sync requeued
//!                    its key: the next sync is caused by it) → flattened into siblings
//!
//!   ├─ sync replicaset: … failed: 409          ├─ sync replicaset: … failed: 409 × 2 retries (409 Conflict)
//!   │  ├─ PUT replicasets/status → 409    ──▶   └─ sync replicaset: desired 3, have 3 → …
//!   │  ├─ queue wait
//!   │  └─ sync replicaset: … failed: 409
//!   │     ├─ …
//!   │     └─ sync replicaset: desired 3 …
//! ```
//!
//! In a run with at least one failed attempt (an `error` attribute, or an HTTP code of 400 or
//! more), the failed attempts become one row at the first one's place, hiding under them
//! what failed, the reads and the queue waits; what a failed attempt did that stands (a
//! sync that scaled a ReplicaSet before its status update failed: the write and all it
//! caused; a `rollout complete` mark) hangs under the fold row. The attempts that did not
//! fail stay rows of their own, so every distinct step still has its line. A failed span
//! with no retry is not folded.

use std::collections::HashMap;

use crate::attr;
use crate::context::SpanId;
use crate::span::Span;
use crate::tree::{Fold, Row, Tree, child_prefixes};

/// The name of an HTTP status code, as Go's `http.StatusText` has it, for the codes the API
/// server answers.
fn status_text(code: u16) -> &'static str {
    match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        413 => "Request Entity Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    }
}

fn code(span: &Span) -> Option<u16> {
    span.attribute(attr::CODE)?.parse().ok()
}

/// Whether the span says its work failed.
pub fn failed(span: &Span) -> bool {
    span.attributes.contains_key(attr::ERROR) || code(span).is_some_and(|c| c >= 400)
}

/// The request path a client span records (`client::trace`).
const PATH: &str = "path";

/// What makes two spans the same operation: name, component, verb, resource, subresource,
/// object, request path and work-queue key.
type Operation = [Option<String>; 7];

fn operation(span: &Span) -> Operation {
    [
        Some(format!("{}\u{0}{}", span.name, span.component)),
        span.attribute(attr::VERB),
        span.attribute(attr::RESOURCE),
        span.attribute(attr::SUBRESOURCE),
        span.attribute(attr::NAMESPACE)
            .zip(span.attribute(attr::NAME))
            .map(|(ns, n)| format!("{ns}/{n}"))
            .or_else(|| span.attribute(attr::NAME)),
        span.attribute(PATH),
        span.attribute(attr::KEY),
    ]
}

/// Each span's operation, whether it failed and the path it requested, by span index.
struct Shown<'s> {
    ops: &'s [Operation],
    failed: &'s [bool],
    spans: &'s [&'s Span],
}

impl Shown<'_> {
    /// Whether span `i` is part of a failed attempt's failure rather than of what it did: a
    /// failure itself, a read, a queue wait.
    fn noise(&self, i: usize) -> bool {
        let span = self.spans[i];
        self.failed[i]
            || span.name == "queue wait"
            || span.attribute(attr::VERB).as_deref() == Some("get")
    }

    /// Whether span `get` is a GET of the object span `write` wrote (its path, less a
    /// subresource).
    fn rereads(&self, get: usize, write: usize) -> bool {
        let (get, write) = (self.spans[get], self.spans[write]);
        get.attribute(attr::VERB).as_deref() == Some("get")
            && get.component == write.component
            && match (get.attribute(PATH), write.attribute(PATH)) {
                (Some(g), Some(w)) => w.starts_with(&g),
                _ => false,
            }
    }
}

/// One entry of a parent's shown children.
enum Item {
    Span(usize),
    /// The spans hidden, in sibling order: the failed attempts and the re-reads between them.
    Fold(Vec<usize>),
}

impl<'a> Tree<'a> {
    /// [`Tree::rows`] with retries folded (see the module docs); returns the rows and how many
    /// spans the folds hide.
    pub fn folded_rows(&self) -> (Vec<Row<'a>>, usize) {
        let ops: Vec<_> = self.spans.iter().map(|s| operation(s)).collect();
        let failed: Vec<bool> = self.spans.iter().map(|s| failed(s)).collect();
        // The retry shown in place of each failed attempt's subtree.
        let mut retry_of: HashMap<usize, usize> = HashMap::new();
        let shown = Shown {
            ops: &ops,
            failed: &failed,
            spans: &self.spans,
        };
        let mut rows: Vec<Row<'a>> = Vec::with_capacity(self.spans.len());
        let mut hidden = 0;
        // (item, depth, prefix for its children, own prefix, parent row)
        let mut stack: Vec<(Item, usize, String, String, Option<usize>)> = self
            .shown_children(&self.roots, &shown, &mut retry_of)
            .into_iter()
            .rev()
            .map(|item| (item, 0, String::new(), String::new(), None))
            .collect();
        while let Some((item, depth, inherited, own, parent_row)) = stack.pop() {
            let row = rows.len();
            let kids: Vec<usize> = match item {
                Item::Fold(members) => {
                    let mut ids = Vec::new();
                    let mut kept = Vec::new();
                    for a in &members {
                        self.split_attempt(
                            *a,
                            retry_of.get(a).copied(),
                            &shown,
                            &mut ids,
                            &mut kept,
                        );
                    }
                    let spans = ids.len();
                    hidden += spans;
                    let attempts: Vec<usize> = members
                        .iter()
                        .copied()
                        .filter(|&a| shown.failed[a])
                        .collect();
                    let mut reasons: Vec<String> = Vec::new();
                    for &a in &attempts {
                        let why = self.failure_reason(a);
                        if !reasons.contains(&why) {
                            reasons.push(why);
                        }
                    }
                    rows.push(Row {
                        span: self.spans[attempts[0]],
                        depth,
                        prefix: own,
                        orphan: self.orphan[attempts[0]],
                        parent_row,
                        fold: Some(Fold {
                            attempts: attempts.len(),
                            spans,
                            reasons,
                            hidden: ids,
                        }),
                    });
                    // What the failed attempts did that stands (a write that succeeded, a
                    // mark) hangs under the fold.
                    kept
                }
                Item::Span(i) => {
                    rows.push(self.row(i, depth, own, parent_row));
                    self.children[i]
                        .iter()
                        .copied()
                        .filter(|c| retry_of.get(&i) != Some(c))
                        .collect()
                }
            };
            let items = self.shown_children(&kids, &shown, &mut retry_of);
            let count = items.len();
            for (k, item) in items.into_iter().enumerate().rev() {
                let last = k + 1 == count;
                let (own, next) = child_prefixes(&inherited, last);
                stack.push((item, depth + 1, next, own, Some(row)));
            }
        }
        (rows, hidden)
    }

    /// The items shown for `kids` (siblings in order): retry chains flattened, runs of failed
    /// attempts folded. Records in `retry_of` the retry flattened out of each failed attempt.
    fn shown_children(
        &self,
        kids: &[usize],
        shown: &Shown<'_>,
        retry_of: &mut HashMap<usize, usize>,
    ) -> Vec<Item> {
        let mut flat = Vec::with_capacity(kids.len());
        for &c in kids {
            flat.push(c);
            let mut cur = c;
            while shown.failed[cur]
                && let Some(&r) = self.children[cur]
                    .iter()
                    .find(|&&r| shown.ops[r] == shown.ops[cur])
            {
                retry_of.insert(cur, r);
                flat.push(r);
                cur = r;
            }
        }
        let mut items = Vec::with_capacity(flat.len());
        let mut i = 0;
        while i < flat.len() {
            let op = &shown.ops[flat[i]];
            let mut run = vec![flat[i]];
            let mut j = i + 1;
            loop {
                if j < flat.len() && shown.ops[flat[j]] == *op {
                    run.push(flat[j]);
                    j += 1;
                } else if j + 1 < flat.len()
                    && run.last().is_some_and(|&l| shown.failed[l])
                    && shown.rereads(flat[j], flat[i])
                    && shown.ops[flat[j + 1]] == *op
                {
                    // A failed write, a GET of its object, the write again: client-go's
                    // RetryOnConflict. The GET is part of the failed attempt.
                    run.extend([flat[j], flat[j + 1]]);
                    j += 2;
                } else {
                    break;
                }
            }
            let failures = run.iter().filter(|&&s| shown.failed[s]).count();
            if run.len() < 2 || failures == 0 {
                items.extend(run.iter().map(|&s| Item::Span(s)));
            } else {
                // The failed attempts and re-reads as one row, where the first of them was;
                // the attempts that did not fail as rows of their own.
                let hidden: Vec<usize> = run
                    .iter()
                    .copied()
                    .filter(|&s| shown.failed[s] || shown.ops[s] != *op)
                    .collect();
                let first = hidden[0];
                for &s in &run {
                    if s == first {
                        items.push(Item::Fold(hidden.clone()));
                    } else if !hidden.contains(&s) {
                        items.push(Item::Span(s));
                    }
                }
            }
            i = j;
        }
        items
    }

    /// Splits failed attempt `i`'s subtree (but the retry `except`, shown after it): the ids
    /// of what the fold hides (the attempt, and under it what failed, re-reads and queue
    /// waits, in causal order) into `hidden`, the roots of what stands (writes that succeeded
    /// and what they caused, marks) into `kept`.
    fn split_attempt(
        &self,
        i: usize,
        except: Option<usize>,
        shown: &Shown<'_>,
        hidden: &mut Vec<SpanId>,
        kept: &mut Vec<usize>,
    ) {
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if Some(j) == except {
                continue;
            }
            if j == i || shown.noise(j) {
                hidden.push(self.spans[j].span_id);
                stack.extend(self.children[j].iter().rev());
            } else {
                kept.push(j);
            }
        }
    }

    /// Why attempt `i` failed: its HTTP code (`409 Conflict`), else the first failed code
    /// under it, else `error`.
    fn failure_reason(&self, i: usize) -> String {
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if let Some(c) = code(self.spans[j]).filter(|c| *c >= 400) {
                return format!("{c} {}", status_text(c)).trim_end().to_owned();
            }
            stack.extend(self.children[j].iter().rev());
        }
        "error".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use crate::context::SpanContext;
    use crate::span::{Span, SpanKind};
    use crate::{Tree, attr};

    /// A span of `component` under `parent`, starting at `start`.
    fn span(name: &str, ctx: SpanContext, parent: Option<&SpanContext>, start: u64) -> Span {
        let mut s = Span::start(
            ctx,
            parent.map(|p| p.span_id),
            name,
            SpanKind::Internal,
            "cm",
        );
        s.start_unix_nanos = start;
        s.end_unix_nanos = start + 1;
        s
    }

    fn lines(rows: &[crate::tree::Row<'_>]) -> Vec<String> {
        rows.iter()
            .map(|r| match &r.fold {
                Some(f) => format!("{}{} {}", r.prefix, r.span.name, f.label()),
                None => format!("{}{}", r.prefix, r.span.name),
            })
            .collect()
    }

    #[test]
    fn sibling_retries_and_retry_chains_fold_into_one_line_each() {
        let root = SpanContext::new_root();
        let mut spans = vec![span("create deployments", root, None, 0)];
        // Three PUTs of the same status under one sync: two 409s, then a 200.
        let sync = root.child();
        spans.push(span("sync deployment", sync, Some(&root), 1).with(attr::KEY, "default/web"));
        for (i, code) in [409_u16, 409, 200].into_iter().enumerate() {
            spans.push(
                span(
                    "PUT deployments/status",
                    sync.child(),
                    Some(&sync),
                    2 + i as u64,
                )
                .with(attr::VERB, "update")
                .with(attr::RESOURCE, "deployments")
                .with(attr::NAMESPACE, "default")
                .with(attr::NAME, "web")
                .with(attr::CODE, code),
            );
        }
        // RetryOnConflict: PUT → 409, GET the object, PUT again → 200.
        let path = "/apis/apps/v1/namespaces/default/replicasets/web-1";
        let client = |name: &str, verb: &str, path: String, code: u16, start: u64| {
            span(name, sync.child(), Some(&sync), start)
                .with(attr::VERB, verb)
                .with("path", path)
                .with(attr::CODE, code)
        };
        spans.push(client(
            "PUT replicasets/status",
            "update",
            format!("{path}/status"),
            409,
            5,
        ));
        spans.push(client("GET replicasets", "get", path.to_owned(), 200, 6));
        spans.push(client(
            "PUT replicasets/status",
            "update",
            format!("{path}/status"),
            200,
            7,
        ));
        // Two POSTs of different pods: distinct steps, never folded, even if one failed.
        for (i, name) in ["a", "b"].into_iter().enumerate() {
            spans.push(
                span("POST pods", sync.child(), Some(&sync), 10 + i as u64)
                    .with(attr::NAME, name)
                    .with(attr::CODE, if name == "a" { 500_u16 } else { 201 }),
            );
        }
        // A retry chain: a failed sync requeued its key; the next sync (and its queue wait)
        // hang under it; the third succeeds and does the work.
        let rs1 = root.child();
        let rs2 = rs1.child();
        let rs3 = rs2.child();
        let key = |s: Span| s.with(attr::KEY, "default/web-1");
        spans.push(key(span("sync replicaset", rs1, Some(&root), 20)).with(attr::ERROR, "409"));
        spans.push(
            span("PUT replicasets/status", rs1.child(), Some(&rs1), 21).with(attr::CODE, 409_u16),
        );
        spans.push(span("queue wait", rs1.child(), Some(&rs1), 22));
        // What the failed attempt did before it failed stands: a pod it created.
        spans.push(
            span("POST pods", rs1.child(), Some(&rs1), 21)
                .with(attr::CODE, 201_u16)
                .with(attr::NAME, "c"),
        );
        spans.push(key(span("sync replicaset", rs2, Some(&rs1), 23)).with(attr::ERROR, "409"));
        spans.push(
            span("PUT replicasets/status", rs2.child(), Some(&rs2), 24).with(attr::CODE, 409_u16),
        );
        spans.push(span("queue wait", rs2.child(), Some(&rs2), 25));
        spans.push(key(span("sync replicaset", rs3, Some(&rs2), 26)));
        spans.push(span("POST pods", rs3.child(), Some(&rs3), 27).with(attr::CODE, 201_u16));

        let tree = Tree::build(&spans);
        let (rows, hidden) = tree.folded_rows();
        assert_eq!(
            lines(&rows),
            [
                "create deployments",
                "├─ sync deployment",
                "│  ├─ PUT deployments/status × 2 retries (409 Conflict)",
                "│  ├─ PUT deployments/status",
                "│  ├─ PUT replicasets/status × 1 retry (409 Conflict)",
                "│  ├─ PUT replicasets/status",
                "│  ├─ POST pods",
                "│  └─ POST pods",
                "├─ sync replicaset × 2 retries (409 Conflict)",
                "│  └─ POST pods",
                "└─ sync replicaset",
                "   └─ POST pods",
            ]
        );
        assert_eq!(
            hidden,
            2 + 2 + 6,
            "two PUTs; a PUT and its GET; two syncs with their PUT and queue wait"
        );
        assert_eq!(
            rows.len() + hidden - 3,
            spans.len(),
            "each fold row hides its own span too"
        );
        assert_eq!(rows[8].fold.as_ref().map(|f| f.spans), Some(6));
        assert_eq!(rows[9].parent_row, Some(8), "kept under the fold");
        assert_eq!(
            rows[11].parent_row,
            Some(10),
            "the work hangs under the retry that did it"
        );
        // Unfolded, every span is a row.
        let plain: Vec<String> = tree
            .rows()
            .iter()
            .map(|r| format!("{}{}", r.prefix, r.span.name))
            .collect();
        assert_eq!(plain.len(), spans.len());
    }

    #[test]
    fn a_lone_failure_and_repeats_that_never_failed_are_not_folded() {
        let root = SpanContext::new_root();
        let mut spans = vec![span("sync", root, None, 0)];
        spans.push(
            span("PATCH pods/status", root.child(), Some(&root), 1).with(attr::CODE, 409_u16),
        );
        for i in 0..3 {
            spans.push(span("watch event", root.child(), Some(&root), 2 + i));
        }
        let tree = Tree::build(&spans);
        let (rows, hidden) = tree.folded_rows();
        assert_eq!(hidden, 0);
        assert_eq!(rows.len(), spans.len());
        assert!(rows.iter().all(|r| r.fold.is_none()));
    }
}
