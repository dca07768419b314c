//! The crate's one error type.
//!
//! Mirrors how client-go classifies API errors (`k8s.io/apimachinery/pkg/api/errors`:
//! `IsResourceExpired`, `IsGone`, `IsConflict`, `IsNotFound`): the reflector, leader election
//! and the event recorder branch on those classes, so they are methods here.

use kube::core::Status;

/// Everything that can go wrong in the client crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with a `Status` failure (HTTP error or an in-stream watch
    /// `ERROR` event).
    #[error("API error {code} {reason}: {message}")]
    Api {
        /// HTTP status code (410 for an expired resourceVersion, 409 for a conflict, ...).
        code: u16,
        /// Machine-readable reason (`Expired`, `Gone`, `Conflict`, `NotFound`, ...).
        reason: String,
        /// Human-readable message.
        message: String,
    },
    /// kube's HTTP client failed below the API level (connection, TLS, decoding).
    #[error("kube client: {0}")]
    Kube(#[source] kube::Error),
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    KubeConfig(String),
    /// A list answer had no `metadata.resourceVersion`, so there is nothing to watch from.
    #[error("list returned no resourceVersion")]
    NoResourceVersion,
    /// A watch ended immediately without a single event: a sign of a broken server or proxy.
    #[error("watch closed with no events")]
    VeryShortWatch,
    /// An indexer was asked for an index it does not have.
    #[error("index {0:?} does not exist")]
    IndexNotFound(String),
    /// The operation was abandoned because the shutdown token was cancelled.
    #[error("shutting down")]
    ShuttingDown,
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An API error from a Kubernetes `Status`.
    pub fn from_status(status: &Status) -> Self {
        Error::Api {
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        }
    }

    /// The HTTP code of an API error, if this is one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Error::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn has(&self, want_code: u16, want_reasons: &[&str]) -> bool {
        match self {
            Error::Api { code, reason, .. } => {
                *code == want_code || want_reasons.contains(&reason.as_str())
            }
            _ => false,
        }
    }

    /// 410 Gone / reason `Expired`: the requested resourceVersion was compacted; relist.
    /// client-go: `isExpiredError` (`IsResourceExpired || IsGone`).
    pub fn is_expired(&self) -> bool {
        self.has(410, &["Expired", "Gone"])
    }

    /// 409 Conflict: the object changed since it was read (optimistic concurrency).
    pub fn is_conflict(&self) -> bool {
        self.has(409, &["Conflict"])
    }

    /// 404 Not Found.
    pub fn is_not_found(&self) -> bool {
        self.has(404, &["NotFound"])
    }

    /// 429 Too Many Requests: the server asks us to back off.
    pub fn is_too_many_requests(&self) -> bool {
        self.has(429, &["TooManyRequests"])
    }
}

impl From<kube::Error> for Error {
    fn from(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => Error::from_status(&status),
            other => Error::Kube(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_api_errors() {
        let gone = Error::from_status(&Status::failure("too old", "Expired").with_code(410));
        assert!(gone.is_expired());
        assert!(!gone.is_conflict());
        let conflict = Error::from_status(&Status::failure("stale", "Conflict").with_code(409));
        assert!(conflict.is_conflict());
        assert!(!conflict.is_expired());
        assert!(!Error::NoResourceVersion.is_not_found());
    }
}
