//! [`Server`]: the simulated cloud as a process's component, as `mini-redis`' `server::run`
//! is: bind (open the directory, take the port, write `cloud-config.json`), then run until a
//! shutdown token is cancelled. The routes are in `handlers.rs`, the state they share in
//! `shared.rs`.
//!
//! ```text
//!   Server::bind(dir, 127.0.0.1:0, options)   dir/LOCK taken, dir/state.json read,
//!                                             dir/cloud-config.json = {"endpoint": "http://127.0.0.1:PORT"}
//!   server.run(shutdown)                      serves until shutdown.cancel(), then drains
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::error::{Error, Result};
use super::handlers::router;
use super::shared::Shared;
use super::state_file::{CLOUD_CONFIG_FILE, StateFile, write_atomically};

/// How long a new load balancer provisions by default.
pub const DEFAULT_LB_PROVISIONING_DELAY: Duration = Duration::from_secs(1);

/// How the simulated cloud behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimOptions {
    /// How long a new load balancer stays `provisioning` before it is `active`.
    pub lb_provisioning_delay: Duration,
    /// Seed of the random numbers (instance ids, which calls a fault fails); `None`: from the
    /// operating system.
    pub seed: Option<u64>,
}

impl Default for SimOptions {
    fn default() -> SimOptions {
        SimOptions {
            lb_provisioning_delay: DEFAULT_LB_PROVISIONING_DELAY,
            seed: None,
        }
    }
}

/// The simulated cloud, bound to its directory and its port.
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    local_addr: SocketAddr,
    dir: PathBuf,
    shared: Arc<Shared>,
}

impl Server {
    /// Opens (creating, locking and reading) the cloud's directory `dir`, binds `addr` (port 0
    /// picks a free one) and writes `<dir>/cloud-config.json` with the endpoint.
    ///
    /// Fails on a state file this cloud cannot read ([`Error::CorruptState`]), a directory
    /// another cloud runs on ([`Error::Locked`]) or an address in use ([`Error::Bind`]).
    pub async fn bind(dir: &Path, addr: SocketAddr, options: SimOptions) -> Result<Server> {
        let (file, state) = StateFile::open(dir)?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let rng = match options.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        let server = Server {
            listener,
            local_addr,
            dir: dir.to_owned(),
            shared: Arc::new(Shared::new(options, state, file, rng)),
        };
        let config = CloudConfig {
            endpoint: server.endpoint(),
        };
        let mut bytes = serde_json::to_vec_pretty(&config).map_err(|e| Error::Io {
            what: "encoding",
            path: server.cloud_config_path(),
            source: std::io::Error::other(e),
        })?;
        bytes.push(b'\n');
        write_atomically(&server.cloud_config_path(), &bytes)?;
        Ok(server)
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://127.0.0.1:PORT` (the loopback address when bound to all interfaces).
    pub fn endpoint(&self) -> String {
        let mut addr = self.local_addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    }

    /// `<dir>/cloud-config.json`, the file a client is made from
    /// ([`HttpCloud::from_cloud_config`](super::HttpCloud::from_cloud_config)).
    pub fn cloud_config_path(&self) -> PathBuf {
        self.dir.join(CLOUD_CONFIG_FILE)
    }

    /// Serves until `shutdown` is cancelled, then finishes the calls under way (a call held by
    /// a delay fault is answered 503 at once) and returns.
    pub async fn run(self, shutdown: CancellationToken) -> Result<()> {
        let stopping = self.shared.stopping.clone();
        let app = router(self.shared);
        tracing::info!(endpoint = %format!("http://{}", self.local_addr), "simulated cloud serving");
        axum::serve(self.listener, app)
            .with_graceful_shutdown(async move {
                shutdown.cancelled().await;
                stopping.cancel();
            })
            .await
            .map_err(Error::Serve)
    }
}

/// `cloud-config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CloudConfig {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
}
