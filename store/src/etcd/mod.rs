//! [`Backend`] on a real etcd v3 cluster: kube-apiserver's etcd3 storage.
//!
//! Mirrors `staging/src/k8s.io/apiserver/pkg/storage/etcd3/` (`store.go`, `watcher.go`,
//! `compact.go`) one level down: the API server keeps programming against [`Backend`], and
//! every call becomes the etcd request kube-apiserver would send, through the `etcd-client`
//! crate (tonic, one balanced gRPC channel over all `--etcd-servers`).
//!
//! | store | etcd |
//! |---|---|
//! | [`Revision`], `resourceVersion` | the etcd revision / `mod_revision`, 1:1 |
//! | `get`, `range` (limit, `start`, at a revision) | `Range` with `limit`, `[max(prefix, start), prefix_end)`, `revision`; `count`/`more` as etcd answers them |
//! | `put`, `delete`, `txn` | `Put`/`DeleteRange` with `prev_kv`, `Txn` with the store's [`crate::Compare`]s as etcd compares |
//! | `watch` | `Watch` with `prev_kv` and `progress_notify` (`watch.rs`) |
//! | [`Compactor`] | compact.go's loop (`compactor.rs`) |
//! | `current_revision` | the newest header revision of any answer or watch notification |
//! | `compact`, `compacted_revision` | etcd is compacted one revision below the store's point, so that a watch from the point still sees that revision's deletes and previous values (`Inner::compact`); the point is learned from own compactions, watch cancellations (`compact_revision`) and `ErrCompacted` answers (then found exactly by reading at revisions: etcd serves every revision from its point on) |
//! | `size_on_disk` | Maintenance `Status.dbSize` of the member answering, refreshed every 30 s |
//!
//! Where things are: `backend.rs` (the [`Backend`] calls), `keys.rs` (`--etcd-prefix`),
//! `convert.rs` (messages), `call.rs` (deadlines, retries, errors), `watch.rs`,
//! `compactor.rs`, `tls.rs` (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`).
//!
//! From the flags (the launcher's job):
//!
//! ```text
//!   --etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379  EtcdConfig::from_servers(..)
//!   --etcd-prefix=/registry                                     config.prefix
//!   --etcd-cafile, --etcd-certfile, --etcd-keyfile              config.tls = Some(EtcdTls::from_files(..))
//!   --etcd-compaction-interval=5m                               Compactor::start(&backend, interval, shutdown)
//! ```
//!
//! TLS (`tls.rs`) is kube-apiserver's: `https://` endpoints are verified with `--etcd-cafile`
//! (the system's trust store without it) and get the client certificate of
//! `--etcd-certfile`/`--etcd-keyfile` if given; `http://` endpoints connect in plain text
//! whatever the files (which are still read and checked). A file that is missing, unreadable
//! or not the PEM it should be is refused at connect, naming the flag and the file.
//!
//! Errors: compacted revisions are [`Error::Compacted`] (the API server's 410 Expired), future
//! ones [`Error::FutureRevision`], a request etcd finds too large (`--max-request-bytes`)
//! [`Error::ValueTooLarge`]; bad input is refused before anything is sent, exactly as the
//! store refuses it (`mvcc.rs`). An unreachable or failing cluster is an [`Error::Io`] that
//! names the endpoints.
//!
//! Simplified against kube-apiserver: no leases (TTLs), no etcd auth (user and password); TLS
//! as `tls.rs` says (no mix of `http://` and `https://` members, the client certificate read
//! once); a slow watcher is held back rather than cut off (`watch.rs`); `current_revision`
//! only moves when this backend hears from etcd, so writes of other clients show up with its
//! next request or watch event; a compaction to revision 2 (etcd's to 1) cannot be observed by
//! a backend connected later (etcd serves revision 1, the empty start, either way). etcd's own
//! default `--max-request-bytes` (1.5 MiB for the whole request) refuses a value of
//! [`crate::MAX_VALUE_SIZE`]; run etcd with a larger one (2 MiB) to accept every value the
//! store accepts.

mod backend;
mod call;
mod compactor;
mod convert;
mod keys;
mod tls;
mod watch;

pub use compactor::{
    COMPACT_REV_KEY, CompactOutcome, CompactState, Compactor, DEFAULT_COMPACTION_INTERVAL,
};
pub use keys::{DEFAULT_PREFIX, prefix_end};
pub use tls::{EtcdTls, Pem};

#[cfg(doc)]
use crate::Backend;
use crate::{Error, KeyRange, Result, Revision};
use call::{Failure, Retry};
use etcd_client as etcd;
use keys::KeyMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// kube-apiserver's etcd dial timeout (`dialTimeout` in `storagebackend/factory/etcd3.go`).
pub const DEFAULT_DIAL_TIMEOUT: Duration = Duration::from_secs(20);

/// How long one request may take, retries included (kube-apiserver bounds etcd requests by
/// the API request's context: `--request-timeout`, 1m by default).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// gRPC keepalive, as `storagebackend/factory/etcd3.go` (`keepaliveTime`, `keepaliveTimeout`).
const KEEPALIVE_TIME: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest answer accepted (kube-apiserver: `MaxCallRecvMsgSize: math.MaxInt32`).
const MAX_MESSAGE: usize = i32::MAX as usize;

/// How often `size_on_disk` is refreshed from the Maintenance Status.
const STATUS_INTERVAL: Duration = Duration::from_secs(30);

/// `size_on_disk` not known yet.
const UNKNOWN_SIZE: u64 = u64::MAX;

/// How to reach the etcd cluster (kube-apiserver's `--etcd-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs of the members (`--etcd-servers`), e.g. `http://127.0.0.1:2379` or
    /// `https://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// `--etcd-prefix` (default `/registry`): replaces the `/registry/` the API server's keys
    /// start with; with the default the etcd keys are exactly the API server's keys.
    pub prefix: String,
    /// How long [`EtcdBackend::connect`] waits for the cluster's first answer.
    pub dial_timeout: Duration,
    /// How long one request may take, retries included.
    pub request_timeout: Duration,
    /// TLS to the members (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`); `None` (or
    /// no file): plain `http://`, and the system's trust store for `https://` endpoints.
    pub tls: Option<EtcdTls>,
}

impl EtcdConfig {
    /// A configuration for these endpoints with kube-apiserver's defaults.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> Self {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_PREFIX.to_string(),
            dial_timeout: DEFAULT_DIAL_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            tls: None,
        }
    }

    /// A configuration from `--etcd-servers`' value: comma-separated URLs.
    pub fn from_servers(servers: &str) -> Self {
        Self::new(
            servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        )
    }
}

/// State shared by the backend, its watch tasks and its compactors.
pub(crate) struct Inner {
    kv: etcd::KvClient,
    watch: etcd::WatchClient,
    maintenance: etcd::MaintenanceClient,
    keys: KeyMap,
    /// The endpoints, comma-separated, for messages.
    endpoints: String,
    /// The configured `--etcd-prefix`, for messages.
    prefix: String,
    request_timeout: Duration,
    /// The newest revision heard of; never goes back.
    current: AtomicU64,
    /// The newest compaction point heard of; never goes back.
    compacted: AtomicU64,
    /// etcd's `dbSize`, or [`UNKNOWN_SIZE`].
    db_size: AtomicU64,
    /// Cancelled when the backend is closed or dropped: ends every task.
    shutdown: CancellationToken,
    /// The watch and status tasks.
    tasks: TaskTracker,
}

/// The store's [`Backend`] on an etcd v3 cluster (see the module docs).
pub struct EtcdBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("endpoints", &self.inner.endpoints)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

impl EtcdBackend {
    /// Connects to the cluster and waits (up to the dial timeout) for its first answer, which
    /// also gives the current revision; then finds the compaction point. Needs a Tokio
    /// runtime. Errors name the endpoints; TLS files are read and checked first (errors name
    /// the flag and the file).
    pub async fn connect(config: EtcdConfig) -> Result<EtcdBackend> {
        let endpoints = config.endpoints.join(",");
        let fail = |kind, message: String| {
            Error::Io(std::io::Error::new(
                kind,
                format!("etcd cluster [{endpoints}]: {message}"),
            ))
        };
        if config.endpoints.is_empty() {
            return Err(fail(
                std::io::ErrorKind::InvalidInput,
                "no endpoints given (--etcd-servers)".into(),
            ));
        }
        let tls = tls::client_options(&config.endpoints, config.tls.as_ref())
            .map_err(|r| fail(r.kind, r.message))?;
        let mut options = etcd::ConnectOptions::new()
            .with_connect_timeout(config.dial_timeout)
            .with_keep_alive(KEEPALIVE_TIME, KEEPALIVE_TIMEOUT)
            .with_require_leader(true);
        if let Some(tls) = tls {
            options = options.with_tls(tls);
        }
        let client = match tokio::time::timeout(
            config.dial_timeout,
            etcd::Client::connect(&config.endpoints, Some(options)),
        )
        .await
        {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                return Err(fail(
                    std::io::ErrorKind::ConnectionRefused,
                    format!("cannot connect: {}", connect_error(&e)),
                ));
            }
            Err(_) => {
                return Err(fail(
                    std::io::ErrorKind::TimedOut,
                    format!("cannot connect within {:?}", config.dial_timeout),
                ));
            }
        };
        let inner = Arc::new(Inner {
            kv: client.kv_client().max_decoding_message_size(MAX_MESSAGE),
            watch: client.watch_client().max_decoding_message_size(MAX_MESSAGE),
            maintenance: client.maintenance_client(),
            keys: KeyMap::new(&config.prefix),
            endpoints: endpoints.clone(),
            prefix: config.prefix.clone(),
            request_timeout: config.request_timeout,
            current: AtomicU64::new(0),
            compacted: AtomicU64::new(0),
            db_size: AtomicU64::new(UNKNOWN_SIZE),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        inner.first_answer(config.dial_timeout).await?;
        inner.probe_compaction(Revision(1)).await?;
        inner.refresh_status().await;
        let status = inner.clone();
        inner.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = status.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(STATUS_INTERVAL) => status.refresh_status().await,
                }
            }
        });
        Ok(EtcdBackend { inner })
    }

    /// Ends every watch and background task and waits for them. Requests after this fail
    /// with [`Error::Closed`].
    pub async fn close(&self) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
    }

    /// The etcd key the API server's `key` is stored at (the prefix applied).
    pub fn etcd_key(&self, key: &[u8]) -> Result<Vec<u8>> {
        self.inner
            .keys
            .etcd_key(key)
            .map_err(|_| self.inner.outside_key(key))
    }
}

/// Why the etcd client could not be made, with the causes of a transport error (a TLS setup
/// error, such as no system trust store, is only in its sources).
fn connect_error(e: &etcd::Error) -> String {
    let etcd::Error::TransportError(transport) = e else {
        return e.to_string();
    };
    let mut message = transport.to_string();
    let mut source = std::error::Error::source(transport);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

impl Drop for EtcdBackend {
    fn drop(&mut self) {
        self.inner.shutdown.cancel();
    }
}

impl Inner {
    /// Waits for any answer from the cluster (a linearizable read: a leader is elected).
    async fn first_answer(&self, dial_timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + dial_timeout;
        let mut last = String::from("no answer");
        // A TLS failure (a certificate refused either way) is kept: the attempts after it
        // may only see the connection closed.
        let mut tls_failure: Option<String> = None;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let attempt = tokio::time::timeout(left, async {
                let mut kv = self.kv.clone();
                kv.get(
                    compactor::COMPACT_REV_KEY,
                    Some(etcd::GetOptions::new().with_count_only()),
                )
                .await
            })
            .await;
            match attempt {
                Ok(Ok(resp)) => {
                    if let Some(h) = resp.header() {
                        self.observe_revision(h.revision());
                    }
                    return Ok(());
                }
                Ok(Err(e)) => {
                    last = e.to_string();
                    if last.contains("certificate") || last.contains("alert") {
                        tls_failure = Some(last.clone());
                    }
                }
                Err(_) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                let cause = match tls_failure {
                    Some(tls) if tls != last => format!("{last} (before: {tls})"),
                    _ => last,
                };
                return Err(self.io_error(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {dial_timeout:?}: {cause}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Moves the current revision forward to an answer's header revision.
    pub(crate) fn observe_revision(&self, header_revision: i64) {
        self.current
            .fetch_max(convert::revision(header_revision).0, Ordering::AcqRel);
    }

    /// Moves the compaction point forward; returns the (possibly newer) point.
    pub(crate) fn observe_compacted(&self, r: Revision) -> Revision {
        Revision(self.compacted.fetch_max(r.0, Ordering::AcqRel).max(r.0))
    }

    fn current_revision(&self) -> Revision {
        Revision(self.current.load(Ordering::Acquire))
    }

    fn compacted_revision(&self) -> Revision {
        Revision(self.compacted.load(Ordering::Acquire))
    }

    /// Refuses a read or watch at a revision below the compaction point known here, without
    /// asking etcd.
    pub(crate) fn check_compacted(&self, requested: Revision) -> Result<()> {
        let compacted = self.compacted_revision();
        if requested < compacted {
            return Err(Error::Compacted {
                requested,
                compacted,
            });
        }
        Ok(())
    }

    /// Whether etcd still serves reads at `r`.
    async fn readable(&self, r: Revision) -> Result<bool> {
        let got = self
            .call("get", Retry::Read, || {
                let mut kv = self.kv.clone();
                let options = etcd::GetOptions::new()
                    .with_count_only()
                    .with_revision(convert::etcd_revision(r));
                async move { kv.get(compactor::COMPACT_REV_KEY, Some(options)).await }
            })
            .await;
        match got {
            Ok(resp) => {
                if let Some(h) = resp.header() {
                    self.observe_revision(h.revision());
                }
                Ok(true)
            }
            Err(Failure::Compacted) => Ok(false),
            Err(Failure::FutureRevision) => Ok(true),
            Err(f) => Err(self.plain_failure(f)),
        }
    }

    /// Finds etcd's compaction point, known to be at `lowest` or above: the smallest revision
    /// etcd still reads at (binary search up to the current revision); returns the store's
    /// compaction point, one above it (see [`Inner::compact`]).
    async fn probe_compaction(&self, lowest: Revision) -> Result<Revision> {
        let mut hi = self.refresh_current().await;
        let mut lo = lowest.max(Revision(1)).min(hi);
        while lo < hi {
            let mid = Revision(lo.0 + (hi.0 - lo.0) / 2);
            if self.readable(mid).await? {
                hi = mid;
            } else {
                lo = mid.next();
            }
        }
        // Revision 1 is readable whether or not etcd was compacted to it: "none" then.
        if lo.0 > 1 {
            return Ok(self.observe_etcd_compaction(lo));
        }
        Ok(self.compacted_revision())
    }

    /// Records that etcd was compacted to `etcd_revision`: the store's compaction point is
    /// one above it. Returns the (possibly newer) point.
    pub(crate) fn observe_etcd_compaction(&self, etcd_revision: Revision) -> Revision {
        self.observe_compacted(etcd_revision.next())
    }

    /// Reads the current revision from etcd.
    async fn refresh_current(&self) -> Revision {
        let _ = self
            .call("get", Retry::Read, || {
                let mut kv = self.kv.clone();
                let options = etcd::GetOptions::new().with_count_only();
                async move { kv.get(compactor::COMPACT_REV_KEY, Some(options)).await }
            })
            .await
            .map(|resp| {
                if let Some(h) = resp.header() {
                    self.observe_revision(h.revision());
                }
            });
        self.current_revision()
    }

    /// Refreshes `size_on_disk` from the Maintenance Status (best effort).
    async fn refresh_status(&self) {
        let mut maintenance = self.maintenance.clone();
        if let Ok(Ok(status)) =
            tokio::time::timeout(self.request_timeout, maintenance.status()).await
        {
            if let Some(h) = status.header() {
                self.observe_revision(h.revision());
            }
            if let Ok(size) = u64::try_from(status.db_size()) {
                self.db_size.store(size, Ordering::Release);
            }
        }
    }

    /// The error for a failed read at `requested`.
    async fn read_failure(&self, f: Failure, requested: Option<Revision>) -> Error {
        let requested = requested.unwrap_or(Revision::ZERO);
        match f {
            Failure::Compacted => {
                let known = self.compacted_revision();
                // etcd refused `requested`: its compaction point is above it.
                let compacted = if known > requested {
                    known
                } else {
                    self.probe_compaction(requested.next())
                        .await
                        .unwrap_or(known.max(requested.next()))
                };
                Error::Compacted {
                    requested,
                    compacted,
                }
            }
            Failure::FutureRevision => Error::FutureRevision {
                requested,
                current: self.refresh_current().await,
            },
            other => self.plain_failure(other),
        }
    }

    /// The error for a failed write carrying values of up to `size` bytes.
    fn write_failure(&self, f: Failure, size: usize) -> Error {
        match f {
            Failure::TooLarge => Error::ValueTooLarge {
                size,
                limit: crate::MAX_VALUE_SIZE,
            },
            other => self.plain_failure(other),
        }
    }

    /// The error for a failure without a revision or size to report.
    pub(crate) fn plain_failure(&self, f: Failure) -> Error {
        match f {
            Failure::Other(e) => e,
            Failure::Compacted => Error::Compacted {
                requested: Revision::ZERO,
                compacted: self.compacted_revision(),
            },
            Failure::FutureRevision => Error::FutureRevision {
                requested: Revision::ZERO,
                current: self.current_revision(),
            },
            Failure::TooLarge => self.io_error(
                std::io::ErrorKind::InvalidData,
                "etcdserver: request is too large".into(),
            ),
        }
    }

    /// A key with no place in etcd under the configured prefix.
    fn outside_key(&self, key: &[u8]) -> Error {
        self.io_error(
            std::io::ErrorKind::InvalidInput,
            format!(
                "key {:?} is outside /registry/, the only keys --etcd-prefix={} stores",
                String::from_utf8_lossy(key),
                self.prefix
            ),
        )
    }

    /// A range with no place in etcd under the configured prefix.
    pub(crate) fn outside(&self, range: &KeyRange) -> Error {
        match range {
            KeyRange::Key(k) | KeyRange::Prefix(k) => self.outside_key(k),
        }
    }

    /// Discards history below `revision`: etcd's `Compact` to `revision - 1`.
    ///
    /// etcd compacted to `r` still answers reads at `r`, but a watch from `r` misses the
    /// deletes made at `r` (their tombstones are compacted away) and the previous values of
    /// the changes made at `r` (read at `r - 1`). The store's watches from its compaction
    /// point deliver both, so etcd is compacted one revision less than asked, and the backend
    /// refuses reads below `revision` itself: to the API server the compaction point is
    /// exactly `revision`, and etcd's is always one below the backend's.
    pub(crate) async fn compact(&self, revision: Revision) -> Result<()> {
        if self.shutdown.is_cancelled() {
            return Err(Error::Closed);
        }
        let compacted = self.compacted_revision();
        if revision <= compacted {
            return Err(Error::Compacted {
                requested: revision,
                compacted,
            });
        }
        if revision > self.current_revision() && revision > self.refresh_current().await {
            return Err(Error::FutureRevision {
                requested: revision,
                current: self.current_revision(),
            });
        }
        let etcd_target = Revision(revision.0 - 1);
        if etcd_target == Revision::ZERO {
            // Nothing is below revision 1.
            self.observe_compacted(revision);
            return Ok(());
        }
        let done = self
            .call("compact", Retry::Write, || {
                let mut kv = self.kv.clone();
                async move { kv.compact(convert::etcd_revision(etcd_target), None).await }
            })
            .await;
        match done {
            Ok(resp) => {
                if let Some(h) = resp.header() {
                    self.observe_revision(h.revision());
                }
                self.observe_compacted(revision);
                Ok(())
            }
            Err(Failure::Compacted) => Err(Error::Compacted {
                requested: revision,
                compacted: self.probe_compaction(etcd_target).await.unwrap_or(revision),
            }),
            Err(Failure::FutureRevision) => Err(Error::FutureRevision {
                requested: revision,
                current: self.refresh_current().await,
            }),
            Err(f) => Err(self.plain_failure(f)),
        }
    }
}
