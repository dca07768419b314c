//! The crate's one error type.
//!
//! Decisions are pure, so errors are few: values that Kubernetes' validation would normally
//! reject (a malformed `maxSurge`, a selector operator it does not know) reach the controller
//! anyway when validation is skipped, and the controller has to refuse them instead of
//! panicking.

/// What went wrong while deciding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// An `IntOrString` such as `maxSurge: "abc"`; the message is Kubernetes'
    /// (`intstr.GetScaledValueFromIntOrPercent`).
    #[error("invalid value for IntOrString: {0}")]
    InvalidIntOrPercent(String),
    /// `spec.strategy.type` is neither `RollingUpdate` nor `Recreate`.
    #[error("deployment type {0:?} isn't supported")]
    UnsupportedStrategy(String),
    /// A label selector that cannot be turned into a matcher (`metav1.LabelSelectorAsSelector`).
    #[error("invalid label selector: {0}")]
    InvalidSelector(String),
    /// `kubectl rollout undo` of a paused Deployment.
    #[error(
        "you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume' and try again"
    )]
    RollbackPaused,
    /// `kubectl rollout undo --to-revision=N` where no ReplicaSet has revision N.
    #[error("unable to find specified revision {0} in history")]
    RevisionNotFound(i64),
    /// `kubectl rollout undo` with no previous revision.
    #[error("no rollout history found for deployment {0:?}")]
    NoRolloutHistory(String),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
