//! The crate's one error type.
//!
//! Decisions are pure, so errors are few: values that Kubernetes' validation would normally
//! reject (a malformed `maxSurge`, a selector operator it does not know) reach the controller
//! anyway when validation is skipped, and the controller has to refuse them instead of
//! panicking.
//!
//! The async shell adds the failures of talking to the API server ([`Error::Api`],
//! [`Error::Transport`]) and of starting the process ([`Error::Config`], [`Error::Bind`],
//! [`Error::LeaderElectionLost`]).

/// What went wrong while deciding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The garbage collector found an owner it has not observed yet still present: the
    /// dependent is requeued with back-off until the owner's informer catches up
    /// (`attemptToDeleteWorker`'s `requeueItem` for a virtual node that exists).
    #[error("owner {0} exists but is not observed yet")]
    OwnerNotObserved(String),
    /// The informer cache lags behind this controller's own writes (the EndpointSlice and
    /// Endpoints controllers): the key is retried with back-off until it catches up.
    #[error("{0}")]
    StaleInformerCache(String),
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
    /// The API server answered a request of the shell with a `Status` failure.
    #[error("{verb} {target}: {code} {reason}: {message}")]
    Api {
        /// `create`, `update`, `patch`, `delete`, `get`, ...
        verb: &'static str,
        /// What was written, e.g. `Pod default/web-1`.
        target: String,
        /// HTTP status code.
        code: u16,
        /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, ...).
        reason: String,
        /// Human-readable message.
        message: String,
    },
    /// A request of the shell failed below the API level (connection refused, decoding).
    #[error("{verb} {target}: {message}")]
    Transport {
        /// The verb, as in [`Error::Api`].
        verb: &'static str,
        /// The target, as in [`Error::Api`].
        target: String,
        /// What went wrong.
        message: String,
    },
    /// The CSR signer could not issue a certificate (`error auto signing csr`).
    #[error("error auto signing csr: {0}")]
    Signing(String),
    /// The controller-manager's configuration is unusable (flags, kubeconfig).
    #[error("configuration: {0}")]
    Config(String),
    /// The health/metrics address could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The OS error.
        message: String,
        /// Whether the address was in use (another process serves it).
        in_use: bool,
    },
    /// The sync panicked (a bug): the worker caught it and requeues the key with back-off.
    #[error("observed a panic: {0}")]
    Panicked(String),
    /// Leader election was lost; like kube-controller-manager, the process must exit.
    #[error("leaderelection lost")]
    LeaderElectionLost,
}

impl Error {
    /// An [`Error::Api`] or [`Error::Transport`] from a kube client error.
    pub fn from_kube(verb: &'static str, target: impl ToString, err: kube::Error) -> Error {
        let target = target.to_string();
        match err {
            kube::Error::Api(status) => Error::Api {
                verb,
                target,
                code: status.code,
                reason: status.reason,
                message: status.message,
            },
            other => Error::Transport {
                verb,
                target,
                message: other.to_string(),
            },
        }
    }

    fn api_reason(&self) -> Option<(u16, &str)> {
        match self {
            Error::Api { code, reason, .. } => Some((*code, reason.as_str())),
            _ => None,
        }
    }

    /// `apierrors.IsNotFound`.
    pub fn is_not_found(&self) -> bool {
        self.api_reason()
            .is_some_and(|(code, reason)| code == 404 || reason == "NotFound")
    }

    /// `apierrors.IsAlreadyExists`.
    pub fn is_already_exists(&self) -> bool {
        self.api_reason()
            .is_some_and(|(_, reason)| reason == "AlreadyExists")
    }

    /// A create refused because its namespace is being deleted (`apierrors.HasStatusCause(err,
    /// NamespaceTerminatingCause)`): the controllers drop such a key rather than retry it.
    pub fn is_namespace_terminating(&self) -> bool {
        match self {
            Error::Api { code, message, .. } => {
                *code == 403 && message.contains("because it is being terminated")
            }
            _ => false,
        }
    }

    /// `apierrors.IsConflict` (a stale resourceVersion or a failed precondition).
    pub fn is_conflict(&self) -> bool {
        self.api_reason()
            .is_some_and(|(code, reason)| code == 409 && reason != "AlreadyExists")
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
