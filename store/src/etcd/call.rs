//! One etcd request: a deadline (`--etcd-request-timeout`'s part of the request context in
//! kube-apiserver), retries where clientv3's retry interceptor would retry, and etcd's errors
//! mapped to the store's (`rpctypes/error.go` messages; kube-apiserver's `interpretListError`
//! and `storage.NewTooLargeResourceVersionError` do the same mapping one level up).
//!
//! Retries (clientv3 `retry_interceptor.go`): reads are retried on any transient error
//! (`Unavailable` and the like); writes only when etcd cannot have seen them: the connection
//! to the member could not be made, the connection closed while the request was still queued
//! for it (grpc-go retries such a request transparently), or etcd refused them before
//! proposing (no leader, too many requests, proposal dropped). A write that may have been
//! applied (sent on a connection that then broke, timed out, `leader changed`) is never
//! retried: the API server answers the client with an error and the client retries.

use super::Inner;
use crate::Error;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// Which retries are safe for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// A read: retried on every transient error.
    Read,
    /// A write: retried only when etcd cannot have applied it.
    Write,
}

/// What an etcd request failed with.
#[derive(Debug)]
pub(crate) enum Failure {
    /// `etcdserver: mvcc: required revision has been compacted`.
    Compacted,
    /// `etcdserver: mvcc: required revision is a future revision`.
    FutureRevision,
    /// `etcdserver: request is too large` (or gRPC's message-size limit).
    TooLarge,
    /// Anything else, already mapped.
    Other(Error),
}

const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
const FUTURE_REV: &str = "etcdserver: mvcc: required revision is a future revision";
const TOO_LARGE: &str = "etcdserver: request is too large";
const EMPTY_KEY: &str = "etcdserver: key is not provided";
const TOO_MANY_OPS: &str = "etcdserver: too many operations in txn request";
const DUPLICATE_KEY: &str = "etcdserver: duplicate key given in txn request";

/// Messages of writes etcd refused before proposing them: safe to send again.
const NOT_PROPOSED: [&str; 3] = [
    "etcdserver: no leader",
    "etcdserver: too many requests",
    "raft proposal dropped",
];

/// hyper's message for a request dropped before it was dispatched to its connection (the
/// connection closed with the request still queued, as when a member is killed); tonic makes
/// it a `Cancelled` status with the hyper error as its source.
const QUEUED_ON_CLOSED_CONNECTION: &str = "operation was canceled";

/// Whether the gRPC status shows the request never left this process: no connection, or the
/// connection closed before the request was written to it. Only a status made here has a
/// source; one etcd sent (its own `Cancelled`: the request reached it) has none.
fn never_sent(status: &tonic::Status) -> bool {
    if status.code() == tonic::Code::Cancelled
        && status.message() == QUEUED_ON_CLOSED_CONNECTION
        && std::error::Error::source(status).is_some()
    {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        if e.is::<tonic::ConnectError>() {
            return true;
        }
        source = e.source();
    }
    false
}

fn retryable(e: &etcd_client::Error, retry: Retry) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::GRpcStatus(s) => {
            let not_proposed = NOT_PROPOSED.iter().any(|m| s.message().contains(m));
            match retry {
                Retry::Read => {
                    matches!(
                        s.code(),
                        Code::Unavailable | Code::Unknown | Code::Cancelled | Code::Aborted
                    ) && !is_semantic(s.message())
                }
                Retry::Write => never_sent(s) || not_proposed,
            }
        }
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            retry == Retry::Read
        }
        _ => false,
    }
}

/// Errors that are answers, not failures: retrying cannot change them.
fn is_semantic(message: &str) -> bool {
    [
        COMPACTED,
        FUTURE_REV,
        TOO_LARGE,
        EMPTY_KEY,
        TOO_MANY_OPS,
        DUPLICATE_KEY,
    ]
    .iter()
    .any(|m| message.contains(m))
}

impl Inner {
    /// Runs `request` until it succeeds, fails for good, or the request timeout passes.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        what: &str,
        retry: Retry,
        mut request: F,
    ) -> Result<T, Failure>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.request_timeout;
        let mut backoff = Duration::from_millis(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, request()).await {
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    if retryable(&e, retry)
                        && Instant::now() + backoff < deadline
                        && !self.shutdown.is_cancelled()
                    {
                        tracing::debug!(endpoints = %self.endpoints, "etcd {what}: {e}; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_millis(200));
                        continue;
                    }
                    return Err(self.failure(what, e));
                }
                Err(_) => {
                    return Err(Failure::Other(self.io_error(
                        std::io::ErrorKind::TimedOut,
                        format!("{what}: no answer within {:?}", self.request_timeout),
                    )));
                }
            }
        }
    }

    /// Maps an etcd error to the store's.
    fn failure(&self, what: &str, e: etcd_client::Error) -> Failure {
        use std::io::ErrorKind;
        let message = match &e {
            etcd_client::Error::GRpcStatus(s) => s.message().to_string(),
            other => other.to_string(),
        };
        if message.contains(COMPACTED) {
            return Failure::Compacted;
        }
        if message.contains(FUTURE_REV) {
            return Failure::FutureRevision;
        }
        if message.contains(TOO_LARGE) {
            return Failure::TooLarge;
        }
        if let etcd_client::Error::GRpcStatus(s) = &e
            && s.code() == tonic::Code::ResourceExhausted
            && message.contains("message larger than max")
        {
            return Failure::TooLarge;
        }
        if message.contains(EMPTY_KEY) {
            return Failure::Other(Error::EmptyKey);
        }
        if message.contains(DUPLICATE_KEY) {
            return Failure::Other(Error::DuplicateKey);
        }
        if message.contains(TOO_MANY_OPS) {
            return Failure::Other(Error::TooManyOps {
                ops: crate::MAX_TXN_OPS + 1,
                limit: crate::MAX_TXN_OPS,
            });
        }
        let kind = match &e {
            etcd_client::Error::GRpcStatus(s) => match s.code() {
                tonic::Code::Unavailable => ErrorKind::ConnectionRefused,
                tonic::Code::DeadlineExceeded => ErrorKind::TimedOut,
                tonic::Code::InvalidArgument => ErrorKind::InvalidInput,
                tonic::Code::PermissionDenied | tonic::Code::Unauthenticated => {
                    ErrorKind::PermissionDenied
                }
                _ => ErrorKind::Other,
            },
            etcd_client::Error::TransportError(_) => ErrorKind::ConnectionRefused,
            _ => ErrorKind::Other,
        };
        Failure::Other(self.io_error(kind, format!("{what}: {message}")))
    }

    /// An I/O error naming the cluster (`etcd cluster [endpoints]: ...`).
    pub(crate) fn io_error(&self, kind: std::io::ErrorKind, message: String) -> Error {
        Error::Io(std::io::Error::new(
            kind,
            format!("etcd cluster [{}]: {message}", self.endpoints),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::{Retry, retryable};
    use std::sync::Arc;

    fn grpc(status: tonic::Status) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(status)
    }

    /// A write still queued when its connection closed (hyper's `Canceled`, as tonic reports
    /// it) was never sent: retried. etcd's own `Cancelled` answer, or a broken connection
    /// after sending, may have been applied: not retried. Reads are retried either way.
    #[test]
    fn a_write_queued_on_a_closed_connection_is_retried() {
        let mut queued = tonic::Status::cancelled("operation was canceled");
        queued.set_source(Arc::new(std::io::Error::other("connection closed")));
        assert!(retryable(&grpc(queued.clone()), Retry::Write));
        assert!(retryable(&grpc(queued), Retry::Read));

        for answered in [
            tonic::Status::cancelled("operation was canceled"),
            tonic::Status::cancelled("context canceled"),
        ] {
            assert!(!retryable(&grpc(answered.clone()), Retry::Write));
            assert!(retryable(&grpc(answered), Retry::Read));
        }
        let mut broken = tonic::Status::unknown("transport error");
        broken.set_source(Arc::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        assert!(!retryable(&grpc(broken.clone()), Retry::Write));
        assert!(retryable(&grpc(broken), Retry::Read));
    }
}
