//! What can go wrong starting, running or stopping a cluster.

use std::path::PathBuf;

use crate::progress::Component;

/// Errors of [`crate::Cluster`] and `miniplane up`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another miniplane holds the data directory's lock.
    #[error("data dir {} is in use by another miniplane (lock held on {})", dir.display(), lock.display())]
    DataDirInUse {
        /// The data directory.
        dir: PathBuf,
        /// Its lock file.
        lock: PathBuf,
    },
    /// The API server's port is taken.
    #[error("port {port} is already in use on 127.0.0.1 (another miniplane or API server?)")]
    PortInUse {
        /// The port asked for.
        port: u16,
    },
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A component failed to start or stopped with an error.
    #[error("{component}: {message}")]
    Component {
        /// Which one.
        component: Component,
        /// What it reported.
        message: String,
    },
    /// The cluster did not become ready in time.
    #[error("timed out after {seconds} s waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        seconds: u64,
    },
    /// A kube client could not be built or a request to the API server failed.
    #[error("API client: {0}")]
    Client(#[from] kube::Error),
    /// A kubeconfig could not be parsed or has an unexpected shape.
    #[error("kubeconfig {}: {message}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A snapshot could not be restored (`ClusterBuilder::restore`): nothing was written.
    #[error("restore: {0}")]
    Restore(String),
    /// The cluster's runtime thread could not be started or ended abnormally.
    #[error("cluster runtime: {0}")]
    Runtime(String),
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    /// An [`Error::Component`] for `component`.
    pub(crate) fn component(component: Component, message: impl ToString) -> Error {
        Error::Component {
            component,
            message: message.to_string(),
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
