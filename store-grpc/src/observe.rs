//! Observing the endpoint's requests: one [`EtcdRequest`] per gRPC request, handed to the
//! [`RequestObserver`] of [`crate::EtcdOptions::observer`] once it is answered.
//!
//! etcd traces its gRPC requests with OpenTelemetry's gRPC interceptors
//! (`--experimental-enable-distributed-tracing`, `server/embed/config_tracing.go`): a span
//! per unary call and per stream. miniplane's endpoint reports the same calls to whoever
//! started it (the API server's launcher records them as spans of the component `etcd`), without
//! knowing spans itself: this crate depends on nothing but the store.
//!
//! What is reported: Range, Put, DeleteRange, Txn and Compact; a watch when it is created and
//! when it is canceled (not each event it delivers); LeaseGrant and LeaseRevoke; Status.
//! Lease keep-alives, TimeToLive, Leases, Alarm and MemberList are not (they are a client's
//! housekeeping, every few seconds).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::errors::READ_ONLY_HINT;

/// Receives one [`EtcdRequest`] per request the endpoint answered (see the module docs). Called
/// on the request's task, after the answer is ready and before it is sent: keep it quick.
pub trait RequestObserver: Send + Sync {
    /// One request was answered.
    fn observed(&self, request: &EtcdRequest);
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Answered: what it found or did (`1 kv`, `3 deleted`, `succeeded`); empty when there
    /// is nothing to add.
    Served(String),
    /// Refused with a gRPC status.
    Refused {
        /// The status code (`PermissionDenied`, `OutOfRange`, ...).
        code: tonic::Code,
        /// The status message (etcd's: `etcdserver: mvcc: required revision has been
        /// compacted`).
        message: String,
    },
}

/// One request the endpoint answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdRequest {
    /// The gRPC method: `Range`, `Put`, `DeleteRange`, `Txn`, `Compact`, `Watch` (a watch
    /// created), `WatchCancel`, `LeaseGrant`, `LeaseRevoke`, `Status`.
    pub method: &'static str,
    /// The keys asked for, as [`key_label`] shows them (`/registry/pods/default/web`, or
    /// `key..range_end` for a range); for a transaction every key it compares or touches,
    /// separated by `, `; empty when the method has no key.
    pub key: String,
    /// The prefix, when the range is every key starting with it (`etcdctl get --prefix`).
    pub prefix: Option<String>,
    /// The revision: of the answer (a read's, a write's), the one asked for (a read at a
    /// past revision, a compaction), or the first one a watch reports.
    pub revision: i64,
    /// How it ended.
    pub outcome: Outcome,
    /// When it arrived (wall clock).
    pub started: SystemTime,
    /// How long answering it took.
    pub duration: Duration,
}

impl EtcdRequest {
    /// One line saying what was asked and what came of it:
    /// `Range /registry/deployments/default/nginx → 1 kv at revision 42`,
    /// `Watch /registry/deployments/default/nginx from revision 43`,
    /// `Compact to revision 40`, `Put /registry/x refused: the endpoint is read-only`.
    pub fn summary(&self) -> String {
        let asked = self.asked();
        match &self.outcome {
            Outcome::Refused { code, message } => {
                format!("{asked} refused: {}", refusal(*code, message))
            }
            Outcome::Served(result) => match self.method {
                "Watch" | "Compact" | "WatchCancel" if result.is_empty() => asked,
                "Watch" | "Compact" | "WatchCancel" => format!("{asked} ({result})"),
                _ if result.is_empty() => format!("{asked} → revision {}", self.revision),
                _ => format!("{asked} → {result} at revision {}", self.revision),
            },
        }
    }

    /// What was asked: the method, its keys, and the revision when it is part of the ask.
    fn asked(&self) -> String {
        let mut asked = self.method.to_owned();
        if !self.key.is_empty() {
            asked.push(' ');
            asked.push_str(&self.key);
        }
        match (self.method, &self.outcome) {
            ("Watch", _) => asked.push_str(&format!(" from revision {}", self.revision)),
            ("Compact", _) => asked.push_str(&format!(" to revision {}", self.revision)),
            // A refused read names the revision it asked for.
            ("Range", Outcome::Refused { .. }) if self.revision > 0 => {
                asked.push_str(&format!(" at revision {}", self.revision));
            }
            _ => {}
        }
        asked
    }

    /// The error of a refused request (its status message), if it was refused.
    pub fn error(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Refused { message, .. } => Some(message),
            Outcome::Served(_) => None,
        }
    }
}

/// Why a request was refused, in a few words: a read-only endpoint's refusal says so; other
/// refusals are etcd's message without its `etcdserver: ` prefix.
fn refusal(code: tonic::Code, message: &str) -> String {
    if code == tonic::Code::PermissionDenied && message.contains(READ_ONLY_HINT) {
        return "the endpoint is read-only".to_owned();
    }
    message
        .strip_prefix("etcdserver: ")
        .unwrap_or(message)
        .to_owned()
}

/// A key as text: UTF-8 (invalid bytes replaced), control characters escaped (`\u{0}`).
fn text(key: &[u8]) -> String {
    String::from_utf8_lossy(key)
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// etcd's `key` and `range_end` as one label: the key alone, or `key..range_end` (`"\0"`
/// as the end: every key from `key` on).
pub fn key_label(key: &[u8], range_end: &[u8]) -> String {
    if range_end.is_empty() {
        text(key)
    } else {
        format!("{}..{}", text(key), text(range_end))
    }
}

/// The prefix of `key`..`range_end` when the range is every key starting with `key`.
pub(crate) fn prefix_of(key: &[u8], range_end: &[u8]) -> Option<String> {
    (!range_end.is_empty() && range_end != [0] && range_end == crate::keys::prefix_end(key))
        .then(|| text(key))
}

/// A request being answered: when it arrived, to report it once answered (nothing when
/// nobody observes: the clocks are not read).
pub(crate) struct Began(Option<(SystemTime, Instant)>);

/// The observer of an endpoint, if any: what the services call.
#[derive(Clone, Default)]
pub(crate) struct Observe(pub(crate) Option<Arc<dyn RequestObserver>>);

impl Observe {
    /// A request begins now.
    pub(crate) fn began(&self) -> Began {
        Began(self.0.as_ref().map(|_| (SystemTime::now(), Instant::now())))
    }

    /// Whether someone observes (what a report needs is worth keeping).
    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Reports a request on `key`..`range_end` that began at `began`, if someone observes;
    /// `what` gives its revision and outcome (only called then).
    pub(crate) fn report(
        &self,
        began: &Began,
        method: &'static str,
        key: &[u8],
        range_end: &[u8],
        what: impl FnOnce() -> (i64, Outcome),
    ) {
        self.report_labelled(
            began,
            method,
            || (key_label(key, range_end), prefix_of(key, range_end)),
            what,
        );
    }

    /// [`Observe::report`] with the key label made by `label` (a transaction's keys).
    pub(crate) fn report_labelled(
        &self,
        began: &Began,
        method: &'static str,
        label: impl FnOnce() -> (String, Option<String>),
        what: impl FnOnce() -> (i64, Outcome),
    ) {
        let (Some(observer), Some((wall, at))) = (&self.0, began.0) else {
            return;
        };
        let (key, prefix) = label();
        let (revision, outcome) = what();
        observer.observed(&EtcdRequest {
            method,
            key,
            prefix,
            revision,
            outcome,
            started: wall,
            duration: at.elapsed(),
        });
    }
}

/// The outcome of a handler's result: `served` of its answer, or its status.
pub(crate) fn outcome<T>(
    result: &Result<T, tonic::Status>,
    served: impl FnOnce(&T) -> String,
) -> Outcome {
    match result {
        Ok(answer) => Outcome::Served(served(answer)),
        Err(status) => Outcome::Refused {
            code: status.code(),
            message: status.message().to_owned(),
        },
    }
}

/// `n kv` / `n kvs`.
pub(crate) fn kvs(n: usize) -> String {
    if n == 1 {
        "1 kv".to_owned()
    } else {
        format!("{n} kvs")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &'static str, key: &str, revision: i64, outcome: Outcome) -> EtcdRequest {
        EtcdRequest {
            method,
            key: key.to_owned(),
            prefix: None,
            revision,
            outcome,
            started: SystemTime::now(),
            duration: Duration::ZERO,
        }
    }

    #[test]
    fn summaries_say_what_was_asked_and_what_came_of_it() {
        let key = "/registry/deployments/default/nginx";
        let served = |s: &str| Outcome::Served(s.to_owned());
        assert_eq!(
            request("Range", key, 42, served("1 kv")).summary(),
            "Range /registry/deployments/default/nginx → 1 kv at revision 42"
        );
        assert_eq!(
            request("Watch", key, 43, served("")).summary(),
            "Watch /registry/deployments/default/nginx from revision 43"
        );
        assert_eq!(
            request("Compact", "", 40, served("")).summary(),
            "Compact to revision 40"
        );
        let read_only = crate::errors::read_only("put");
        let put = request(
            "Put",
            "/registry/x",
            7,
            Outcome::Refused {
                code: read_only.code(),
                message: read_only.message().to_owned(),
            },
        );
        assert_eq!(
            put.summary(),
            "Put /registry/x refused: the endpoint is read-only"
        );
        assert!(
            put.error()
                .is_some_and(|e| e.contains("--etcd-listen-writable"))
        );
        let old = request(
            "Range",
            key,
            12,
            Outcome::Refused {
                code: tonic::Code::OutOfRange,
                message: crate::errors::COMPACTED.to_owned(),
            },
        );
        assert_eq!(
            old.summary(),
            "Range /registry/deployments/default/nginx at revision 12 refused: mvcc: required revision has been compacted"
        );
    }

    #[test]
    fn key_labels_show_ranges_and_escape_control_bytes() {
        assert_eq!(key_label(b"/a", b""), "/a");
        assert_eq!(
            key_label(b"/registry/", b"/registry0"),
            "/registry/../registry0"
        );
        assert_eq!(key_label(b"\0", b"\0"), "\\u{0}..\\u{0}");
        assert_eq!(
            prefix_of(b"/registry/", b"/registry0").as_deref(),
            Some("/registry/")
        );
        assert_eq!(prefix_of(b"/a", b""), None);
        assert_eq!(prefix_of(b"/a", b"/c"), None);
    }
}
