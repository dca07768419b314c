//! Objects nested up to 10,000 levels: the depth limit of a JSON body, and the large stack the
//! requests that may hold such an object run on.
//!
//! kube-apiserver decodes JSON with Go's `encoding/json` (`SimpleMetaFactory.Interpret` in
//! `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/json/meta.go`) and its fork in
//! `sigs.k8s.io/json`, whose scanner refuses a document nested deeper than `maxNestingDepth`
//! (10,000, `encoding/json/scanner.go`) with `invalid character '{' exceeded max depth`. A
//! custom resource with `x-kubernetes-preserve-unknown-fields` keeps whatever it is given, so
//! such an object is created, stored, listed, watched, patched and deleted like any other.
//!
//! The server holds objects as `serde_json::Value` trees, and decoding, pruning, managed
//! fields, encoding, cloning, comparing and dropping one are recursive: 10,000 levels take
//! ~20 MiB of stack in a debug build (~6 MiB optimized), where a tokio worker has 2 MiB.
//! Rather than making each of them iterative, the work that may meet a deep object runs on a
//! stack of its own ([`LargeStack`], [`on_large_stack`]: `stacker`, the crate rustc grows its
//! stack with), allocated for each poll and given back after it:
//!
//! ```text
//!   a request whose body nests deeper than LARGE_STACK_ABOVE     ─┐
//!   a request on a resource that may hold deep objects            ├─▶ polled on a 256 MiB stack
//!   (a custom resource preserving unknown fields), its watch      │   (mapped, touched as used)
//!   and the watch cache of its events                            ─┘
//!   anything else (built-in kinds, shallow bodies)                ──▶ the worker's own stack
//! ```
//!
//! Bodies at most [`LARGE_STACK_ABOVE`] deep (`serde_json`'s default recursion limit) on
//! other resources cost a count of their `[` and `{` bytes ([`openings`]), which nearly always
//! settles it without following strings ([`nesting`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The deepest nesting of a JSON document Kubernetes decodes (`maxNestingDepth` of Go's
/// `encoding/json` scanner and of `sigs.k8s.io/json`).
pub const MAX_DEPTH: usize = 10_000;

/// Bodies nested deeper than this run on a large stack ([`LargeStack`]); up to it, every path
/// runs on a worker's own stack (`serde_json`'s default recursion limit).
pub const LARGE_STACK_ABOVE: usize = 128;

/// The size of the stack deep work runs on. An object 10,000 levels deep takes ~20 MiB of it
/// for one decode, clone or drop in a debug build, and the server's own recursive walks
/// (pruning, managed fields, comparisons) have larger frames than those. Only the pages
/// touched are backed by memory.
pub const LARGE_STACK: usize = 256 << 20;

/// How deep a JSON document nests, as Go's scanner counts it: the number of `[` and `{`
/// open at once, outside strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    /// At most [`MAX_DEPTH`]: the deepest nesting.
    Within(usize),
    /// Deeper: the byte (`[` or `{`) that opened level `MAX_DEPTH + 1`.
    Exceeded(u8),
}

/// Scans `body` for its [`Nesting`], stopping at the first level past [`MAX_DEPTH`]. Invalid
/// JSON is scanned all the same (its decoder reports it).
pub fn nesting(body: &[u8]) -> Nesting {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Nesting::Exceeded(b);
                }
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Nesting::Within(max)
}

/// The number of `[` and `{` bytes in `body`, strings included: a bound on its nesting that
/// costs a fraction of a scan for it (the loop vectorizes).
pub fn openings(body: &[u8]) -> usize {
    body.iter().filter(|&&b| b == b'[' || b == b'{').count()
}

/// Whether `body` nests deeper than `depth`; [`openings`] answers for most bodies.
pub fn deeper_than(body: &[u8], depth: usize) -> bool {
    body.len() > depth
        && openings(body) > depth
        && match nesting(body) {
            Nesting::Within(d) => d > depth,
            Nesting::Exceeded(_) => true,
        }
}

/// The error of a JSON body nested deeper than [`MAX_DEPTH`] (Go's words), if it is.
pub fn check_depth(body: &[u8]) -> Result<(), String> {
    if body.len() <= MAX_DEPTH || openings(body) <= MAX_DEPTH {
        return Ok(());
    }
    match nesting(body) {
        Nesting::Within(_) => Ok(()),
        Nesting::Exceeded(opening) => Err(exceeded_max_depth(opening)),
    }
}

/// Go's `encoding/json` error for a document nested deeper than [`MAX_DEPTH`], opened by
/// `opening` (`[` or `{`): `invalid character '{' exceeded max depth`.
pub fn exceeded_max_depth(opening: u8) -> String {
    format!("invalid character '{}' exceeded max depth", opening as char)
}

/// Decodes JSON of any depth into a `Value` (no recursion limit: callers bound the depth, and
/// run on a large stack when it is deep).
pub fn value_from_slice(bytes: &[u8]) -> serde_json::Result<serde_json::Value> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = serde_json::Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Whether a request with this body may meet an object too deep for a worker's stack: the
/// resource may hold deep objects, or the body nests deeper than [`LARGE_STACK_ABOVE`].
pub fn needs_large_stack(deep_objects: bool, body: &[u8]) -> bool {
    deep_objects || deeper_than(body, LARGE_STACK_ABOVE)
}

/// Runs `f` on a [`LARGE_STACK`] of its own.
pub fn on_large_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::grow(LARGE_STACK, f)
}

/// A future polled on a [`LARGE_STACK`] of its own when `large` (each poll maps the stack and
/// unmaps it after), else polled as it is. Dropped before it completes, it drops what it holds
/// on a large stack too.
pub struct LargeStack<F> {
    inner: Option<Pin<Box<F>>>,
    large: bool,
}

impl<F: Future> LargeStack<F> {
    /// Wraps `inner`; `large` chooses the stack.
    pub fn new(inner: F, large: bool) -> Self {
        LargeStack {
            inner: Some(Box::pin(inner)),
            large,
        }
    }
}

impl<F: Future> Future for LargeStack<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        if this.large {
            on_large_stack(|| poll_slot(&mut this.inner, cx))
        } else {
            poll_slot(&mut this.inner, cx)
        }
    }
}

/// Polls the future in `slot`; once it is ready, drops it (what it still holds goes with it,
/// on the stack it ran on).
fn poll_slot<F: Future>(slot: &mut Option<Pin<Box<F>>>, cx: &mut Context<'_>) -> Poll<F::Output> {
    let Some(inner) = slot.as_mut() else {
        return Poll::Pending;
    };
    let polled = inner.as_mut().poll(cx);
    if polled.is_ready() {
        *slot = None;
    }
    polled
}

impl<F> Drop for LargeStack<F> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take()
            && self.large
        {
            on_large_stack(move || drop(inner));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(levels: usize) -> String {
        format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
    }

    #[test]
    fn nesting_counts_open_brackets_outside_strings_as_go_does() {
        assert_eq!(nesting(b"1"), Nesting::Within(0));
        assert_eq!(nesting(br#"{"a":[1,{"b":[]}],"c":{}}"#), Nesting::Within(4));
        assert_eq!(nesting(br#"{"[{[{":"\"{[","b":"\\"}"#), Nesting::Within(1));
        assert_eq!(
            nesting(deep(MAX_DEPTH).as_bytes()),
            Nesting::Within(MAX_DEPTH)
        );
        assert_eq!(
            nesting(deep(MAX_DEPTH + 1).as_bytes()),
            Nesting::Exceeded(b'{')
        );
        let arrays = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(nesting(arrays.as_bytes()), Nesting::Exceeded(b'['));
    }

    #[test]
    fn bodies_past_the_limit_get_gos_error_and_deep_ones_a_large_stack() {
        assert_eq!(check_depth(deep(MAX_DEPTH).as_bytes()), Ok(()));
        assert_eq!(
            check_depth(deep(MAX_DEPTH + 1).as_bytes()),
            Err("invalid character '{' exceeded max depth".to_string())
        );
        // Brackets in strings count toward the quick bound, not the depth.
        let quoted = format!("{{\"a\":\"{}\"}}", "[".repeat(MAX_DEPTH + 1));
        assert_eq!(check_depth(quoted.as_bytes()), Ok(()));
        assert!(!needs_large_stack(
            false,
            deep(LARGE_STACK_ABOVE).as_bytes()
        ));
        assert!(needs_large_stack(
            false,
            deep(LARGE_STACK_ABOVE + 1).as_bytes()
        ));
        assert!(needs_large_stack(true, b"{}"));
    }

    #[test]
    fn a_deep_value_is_decoded_and_dropped_on_a_large_stack() {
        let text = deep(MAX_DEPTH);
        let kept = on_large_stack(|| {
            let v = value_from_slice(text.as_bytes()).expect("JSON");
            v.pointer("/a/a/a").is_some()
        });
        assert!(kept);
    }
}
