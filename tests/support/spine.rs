//! The spine of an apply's trace: the one path from the write through each component to a
//! pod's status, masked for what differs between runs and folded where siblings repeat. The
//! golden trace (`trace::`) and the determinism check (`determinism::`) compare it; the
//! determinism check and the replay's (`record_replay::`) also compare the kinds of work.

use std::collections::BTreeSet;

use trace::{Span, Tree};

/// Masks what differs from run to run: generated names (`web-<hash>-<pod>`), nodes and
/// store revisions (the number after `revision` or `rv`).
pub fn mask(text: &str) -> String {
    let mut out = String::new();
    let mut last_word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        let is_word = |c: char| c.is_ascii_alphanumeric() || c == '-';
        if !is_word(c) {
            out.push(c);
            chars.next();
            continue;
        }
        let mut word = String::new();
        while let Some(&c) = chars.peek().filter(|c| is_word(**c)) {
            word.push(c);
            chars.next();
        }
        let masked = if let Some(rest) = word.strip_prefix("web-") {
            if rest.contains('-') {
                "web-<hash>-<pod>".to_owned()
            } else {
                "web-<hash>".to_owned()
            }
        } else if word.starts_with("node-") {
            "node-N".to_owned()
        } else if word.chars().all(|c| c.is_ascii_digit())
            && matches!(last_word.as_str(), "revision" | "rv")
        {
            "N".to_owned()
        } else {
            word.clone()
        };
        out.push_str(&masked);
        last_word = word;
    }
    out
}

/// Which children of a span belong to the apply's spine: the one path from the apply through
/// each component to a pod's status (later reactions, such as the ReplicaSet counting ready
/// pods, depend on timing: which events the queues merge).
fn on_spine(parent: &Span, child: &Span) -> bool {
    let queue = |q: &str| child.summary.ends_with(&format!("→ {q} queue"));
    match (parent.name.as_str(), child.name.as_str()) {
        ("create deployments", "watch event") => queue("deployment"),
        ("create replicasets", "watch event") => queue("replicaset"),
        ("create pods", "watch event") => queue("scheduling"),
        ("create pods/binding", "watch event") => queue("kubelet_pods"),
        ("watch event", "queue wait" | "sync deployment" | "sync replicaset")
        | ("watch event", "schedule pod" | "kubelet sync pod")
        | ("sync deployment", "POST replicasets")
        | ("POST replicasets", "create replicasets")
        | ("sync replicaset", "POST pods")
        | ("POST pods", "create pods")
        | ("schedule pod", "POST pods/binding")
        | ("POST pods/binding", "create pods/binding")
        | ("kubelet sync pod", "PATCH pods/status")
        | ("PATCH pods/status", "patch pods/status") => true,
        _ => false,
    }
}

/// One masked line per span of the spine, identical sibling subtrees folded into `×N`.
pub fn spine(spans: &[Span]) -> String {
    let tree = Tree::build(spans);
    fn label(span: &Span) -> String {
        let summary = match span.name.as_str() {
            // Waits and scores depend on timing and on where earlier pods went.
            "queue wait" => String::new(),
            "schedule pod" => span.summary.split(';').next().unwrap_or("").to_owned(),
            _ => span.summary.clone(),
        };
        let text = if summary.is_empty() {
            span.name.clone()
        } else {
            format!("{}: {}", span.name, mask(&summary))
        };
        format!("[{}] {text}", span.component)
    }
    fn render(tree: &Tree<'_>, span: &Span) -> Vec<String> {
        let mut lines = vec![label(span)];
        let children: Vec<&Span> = tree
            .children_of(span.span_id)
            .into_iter()
            .filter(|c| on_spine(span, c))
            .collect();
        // Fold identical subtrees, keeping the order of their first appearance.
        let mut folded: Vec<(Vec<String>, usize)> = Vec::new();
        for child in children {
            let sub = render(tree, child);
            match folded.iter_mut().find(|(s, _)| *s == sub) {
                Some((_, n)) => *n += 1,
                None => folded.push((sub, 1)),
            }
        }
        let count = folded.len();
        for (i, (mut sub, n)) in folded.into_iter().enumerate() {
            if n > 1 {
                sub[0] = format!("{} ×{n}", sub[0]);
            }
            let last = i + 1 == count;
            for (j, line) in sub.into_iter().enumerate() {
                let prefix = match (j, last) {
                    (0, false) => "├─ ",
                    (0, true) => "└─ ",
                    (_, false) => "│  ",
                    (_, true) => "   ",
                };
                lines.push(format!("{prefix}{line}"));
            }
        }
        lines
    }
    let roots = tree.roots();
    render(&tree, roots[0]).join("\n") + "\n"
}

/// What kinds of work a step caused: the distinct `[component] span name` pairs of its
/// trace, reads left out. (The paths between them depend on timing: whether a queue merged
/// two events into one sync, which write a sync's status update followed; and a controller
/// reads an object live only when its cache has not yet seen its own last write.)
pub fn work_kinds(spans: &[Span]) -> String {
    let kinds: BTreeSet<String> = spans
        .iter()
        .filter(|s| !(s.name.starts_with("GET ") || s.name.starts_with("get ")))
        .map(|s| format!("[{}] {}", s.component, s.name))
        .collect();
    kinds.into_iter().collect::<Vec<_>>().join("\n")
}
