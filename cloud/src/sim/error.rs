//! The simulated cloud's own errors: starting it (its directory, its state file, its port)
//! and pointing a client at it. A call to a running cloud fails with the provider
//! interface's [`CloudError`](crate::CloudError) instead, as any provider's call does. No
//! Kubernetes counterpart: the cloud is not a Kubernetes component.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What can go wrong starting the simulated cloud or making a client for it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file of the cloud's directory failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `writing`.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// `state.json` is not a state this cloud wrote.
    #[error(
        "the simulated cloud's state file {} is corrupt: {reason} (move it away to start an empty cloud)",
        path.display()
    )]
    CorruptState {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Another simulated cloud runs on the same directory.
    #[error("another simulated cloud is running on {} (its LOCK is held)", dir.display())]
    Locked {
        /// The directory.
        dir: PathBuf,
    },
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The cloud config file (`--cloud-config`) is missing or not `{"endpoint": "http://..."}`.
    #[error("cloud config {}: {reason}", path.display())]
    CloudConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The endpoint is not a plain `http://host:port` URL.
    #[error("invalid cloud endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The endpoint given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Serving stopped with an error.
    #[error("serving the simulated cloud: {0}")]
    Serve(std::io::Error),
}

/// The simulated cloud's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
