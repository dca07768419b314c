//! etcd's v3 gRPC API over miniplane's store: `etcdctl` (and any etcd v3 client) can read what
//! the API server wrote, as one reads a real cluster's etcd with
//! `etcdctl get --prefix /registry/`.
//!
//! This mirrors etcd's gRPC layer (`server/etcdserver/api/v3rpc/`: `key.go`, `watch.go`,
//! `lease.go`, `maintenance.go`, `member.go`) over [`store::Backend`]: the same services,
//! methods, field numbers, response headers and error statuses
//! (`v3rpc/rpctypes/error.go`), described by miniplane's own `.proto` files in `proto/`.
//!
//! ```text
//!   etcdctl ──gRPC (HTTP/2, plaintext, 127.0.0.1)──▶ EtcdServer ─┬─ kv.rs        Range/Put/DeleteRange/Txn/Compact
//!                                                               ├─ watch.rs     Watch streams (watch_events.rs,
//!                                                               │               batch.rs, wire.rs)
//!                                                               ├─ lease.rs     Lease* (in memory)
//!                                                               └─ status.rs    Status, Alarm, MemberList
//!                                                                       │
//!                                                     store::Backend ◀──┘ (the API server's own store)
//! ```
//!
//! Every request answered can be reported to an observer ([`EtcdOptions::observer`],
//! [`observe`]): `miniplane` records each as a span of the component `etcd`.
//!
//! Writes are refused (`PermissionDenied`) unless the server was started writable
//! ([`EtcdOptions::writable`], `--etcd-listen-writable`): a store edited behind the API
//! server's back is something to do on purpose. Writes that are let through go into the same
//! store, so the API server's watches see them.
//!
//! Simplified, compared with etcd:
//! * values are the API server's JSON, not kube-apiserver's protobuf (the keys are
//!   kube-apiserver's: `/registry/deployments/default/web`);
//! * a single member that is always leader: `raft_term` is 1, `raft_index` the revision;
//!   `serializable` reads are the same as linearizable ones;
//! * leases live in the endpoint's memory only (lost on restart; the store does not know
//!   them); an expired lease is revoked, and its keys deleted, within half a second; keys stay
//!   attached when the API server overwrites them;
//! * inside a transaction only single-key operations are served (no `range_end`, no read at a
//!   revision, no nested transaction), and compares on a lease or a range are refused
//!   (`Unimplemented`); a `DeleteRange` over more than 128 keys deletes them in several
//!   transactions;
//! * a watch's progress notifications carry the revision of the last event that watch
//!   delivered (a safe lower bound), not the store's current revision;
//! * every event waiting for a watch goes out in one response (whole revisions, at most 1,000
//!   of them and about 1.5 MiB: `batch.rs`), where etcd sends a watch that keeps up one
//!   response per revision and batches only a watch catching up;
//! * no authentication, no TLS: the endpoint binds to 127.0.0.1 only.

mod batch;
mod errors;
mod keys;
mod kv;
mod lease;
pub mod observe;
mod status;
mod txn;
mod watch;
mod watch_events;
mod wire;
mod writes;

pub mod proto {
    //! The protobuf messages and service traits generated from `proto/` (etcd's packages).
    #![allow(missing_docs, clippy::all)]

    /// etcd's `mvccpb` package: key-value records and events.
    pub mod mvccpb {
        tonic::include_proto!("mvccpb");
    }

    /// etcd's `etcdserverpb` package: the KV, Watch, Lease, Cluster and Maintenance services.
    pub mod etcdserverpb {
        tonic::include_proto!("etcdserverpb");
    }
}

use proto::etcdserverpb::ResponseHeader;
use proto::etcdserverpb::cluster_server::ClusterServer;
use proto::etcdserverpb::kv_server::KvServer;
use proto::etcdserverpb::lease_server::LeaseServer;
use proto::etcdserverpb::maintenance_server::MaintenanceServer;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use errors::{READ_ONLY_HINT, WRITABLE_FLAG};
pub use observe::{EtcdRequest, Outcome, RequestObserver};
/// The store interface the endpoint serves (re-exported for callers that hand one over).
pub use store::Backend;
/// A gRPC status code, as [`Outcome::Refused`] carries it (tonic's).
pub use tonic::Code;
/// Why serving failed (tonic's transport error).
pub use tonic::transport::Error as TransportError;

/// The cluster id every response header carries (`"miniplan"` in ASCII).
pub const CLUSTER_ID: u64 = u64::from_be_bytes(*b"miniplan");
/// The id of the single member (`"store-01"` in ASCII); it is always the leader.
pub const MEMBER_ID: u64 = u64::from_be_bytes(*b"store-01");
/// The raft term reported: one member, elected once.
pub const RAFT_TERM: u64 = 1;
/// The server version reported by `Status` (`etcdctl endpoint status` shows it).
pub const VERSION: &str = "3.5.21";
/// The member name `etcdctl member list` shows.
pub const MEMBER_NAME: &str = "miniplane";
/// etcd's default interval of a watch's progress notifications (`--experimental-watch-progress-notify-interval`).
pub const DEFAULT_PROGRESS_NOTIFY_INTERVAL: Duration = Duration::from_secs(10 * 60);

/// How the endpoint behaves.
#[derive(Clone)]
pub struct EtcdOptions {
    /// Serve writes (Put, DeleteRange, Txn with writes, Compact, LeaseGrant); refused with
    /// `PermissionDenied` otherwise.
    pub writable: bool,
    /// How often a watch created with `progress_notify` is told its progress when it has no
    /// events to send.
    pub progress_notify_interval: Duration,
    /// Told of every request answered ([`observe`]): the API server's launcher records each as
    /// a span of the component `etcd`. `None`: nobody is told.
    pub observer: Option<Arc<dyn RequestObserver>>,
}

impl std::fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("writable", &self.writable)
            .field("progress_notify_interval", &self.progress_notify_interval)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            writable: false,
            progress_notify_interval: DEFAULT_PROGRESS_NOTIFY_INTERVAL,
            observer: None,
        }
    }
}

/// Why the endpoint could not start.
#[derive(Debug)]
pub enum BindError {
    /// An address other than 127.0.0.1 (the endpoint has no authentication).
    NotLoopback(SocketAddr),
    /// The address could not be bound.
    Io(SocketAddr, std::io::Error),
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::NotLoopback(addr) => write!(
                f,
                "--etcd-listen {addr}: the etcd endpoint has no authentication and listens on 127.0.0.1 only"
            ),
            BindError::Io(addr, e) => write!(f, "--etcd-listen {addr}: {e}"),
        }
    }
}

impl std::error::Error for BindError {}

/// Checks an address for the endpoint: 127.0.0.1 only (any port, 0 picks a free one).
pub fn check_listen_address(addr: SocketAddr) -> Result<(), BindError> {
    if addr.ip() == std::net::IpAddr::V4(Ipv4Addr::LOCALHOST) {
        Ok(())
    } else {
        Err(BindError::NotLoopback(addr))
    }
}

/// What every service shares: the store, the options, the leases, the shutdown signal.
pub(crate) struct Shared {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) options: EtcdOptions,
    pub(crate) leases: lease::Leases,
    /// The writes in flight (`writes.rs`).
    pub(crate) writes: writes::Writes,
    /// Who is told of each request.
    pub(crate) observe: observe::Observe,
    pub(crate) addr: SocketAddr,
    pub(crate) shutdown: CancellationToken,
}

impl Shared {
    /// The response header at the store's current revision.
    pub(crate) fn header(&self) -> Option<ResponseHeader> {
        self.header_at(self.backend.current_revision().0 as i64)
    }

    /// The response header at `revision`.
    pub(crate) fn header_at(&self, revision: i64) -> Option<ResponseHeader> {
        Some(ResponseHeader {
            cluster_id: CLUSTER_ID,
            member_id: MEMBER_ID,
            revision,
            raft_term: RAFT_TERM,
        })
    }

    /// `Ok` if writes are served, else the `PermissionDenied` status naming the flag.
    pub(crate) fn check_writable(&self, what: &str) -> Result<(), tonic::Status> {
        if self.options.writable {
            Ok(())
        } else {
            Err(errors::read_only(what))
        }
    }
}

/// A bound etcd v3 endpoint over a store, ready to serve.
pub struct EtcdServer {
    listener: tokio::net::TcpListener,
    backend: Arc<dyn Backend>,
    options: EtcdOptions,
}

impl EtcdServer {
    /// Binds `addr` (127.0.0.1 only; port 0 picks a free port) for an endpoint over `backend`.
    pub async fn bind(
        addr: SocketAddr,
        backend: Arc<dyn Backend>,
        options: EtcdOptions,
    ) -> Result<EtcdServer, BindError> {
        check_listen_address(addr)?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| BindError::Io(addr, e))?;
        Ok(EtcdServer {
            listener,
            backend,
            options,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled; open watch and keep-alive streams end then too.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), tonic::transport::Error> {
        let addr = self
            .listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
        let shared = Arc::new(Shared {
            backend: self.backend,
            observe: observe::Observe(self.options.observer.clone()),
            options: self.options,
            leases: lease::Leases::default(),
            writes: writes::Writes::default(),
            addr,
            shutdown: shutdown.clone(),
        });
        let expiry = tokio::spawn(lease::expire_loop(shared.clone()));
        // No Nagle: a small answer must not wait for the client's delayed ACK (etcd's Go
        // server has TCP_NODELAY too, Go's default).
        let incoming = tokio_stream::StreamExt::map(
            tokio_stream::wrappers::TcpListenerStream::new(self.listener),
            |conn| {
                if let Ok(tcp) = &conn {
                    let _ = tcp.set_nodelay(true);
                }
                conn
            },
        );
        let served = tonic::transport::Server::builder()
            .add_service(KvServer::from_arc(Arc::new(kv::KvService(shared.clone()))))
            .add_service(watch::WatchServer(shared.clone()))
            .add_service(LeaseServer::from_arc(Arc::new(lease::LeaseService(
                shared.clone(),
            ))))
            .add_service(ClusterServer::from_arc(Arc::new(status::ClusterService(
                shared.clone(),
            ))))
            .add_service(MaintenanceServer::from_arc(Arc::new(
                status::MaintenanceService(shared.clone()),
            )))
            .serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned())
            .await;
        shutdown.cancel();
        let _ = expiry.await;
        served
    }
}

/// Binds and serves in a task until `shutdown` is cancelled: what a launcher calls next to the
/// API server, with the API server's store (`apiserver::Server::backend`) and
/// shutdown token. Returns the bound address and the task.
pub async fn spawn(
    addr: SocketAddr,
    backend: Arc<dyn Backend>,
    options: EtcdOptions,
    shutdown: CancellationToken,
) -> Result<
    (
        SocketAddr,
        tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    ),
    BindError,
> {
    let server = EtcdServer::bind(addr, backend, options).await?;
    let bound = server.local_addr().map_err(|e| BindError::Io(addr, e))?;
    Ok((bound, tokio::spawn(server.run(shutdown))))
}
