//! The simulator's error type.

/// What can go wrong running the simulated kubelets.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is unusable (no API server, bad kubeconfig, ...).
    #[error("configuration: {0}")]
    Config(String),
    /// The control API could not bind its address.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The OS error.
        message: String,
    },
    /// A call to the API server failed.
    #[error("API server: {0}")]
    Api(#[from] kube::Error),
    /// No simulated node has this name.
    #[error("no simulated node named {0:?}")]
    NoSuchNode(String),
}

/// `Result` with the simulator's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
