//! Leader election through a coordination.k8s.io/v1 Lease: client-go's
//! `tools/leaderelection/leaderelection.go` and `resourcelock/leaselock.go`.
//!
//! Several replicas of a controller-manager race for one Lease; the holder runs the
//! controllers, the others wait. All coordination goes through optimistic concurrency on
//! the Lease's resourceVersion:
//!
//! ```text
//!   acquire: every retry_period (2 s, jittered):
//!     get lease ── missing ──────────────────────────────▶ create {holder: me}      → leader
//!              ── held by other, observed < 15 s ago ──▶ wait
//!              ── held by me, or not renewed for 15 s ─▶ update(rv) {holder: me,
//!                                                          transitions+1 if it was not me}
//!   renew:   every retry_period: update(rv) {renewTime: now}; if no renew succeeds for
//!            renew_deadline (10 s) → leadership lost
//!   release: on shutdown: update {holder: "", leaseDurationSeconds: 1}
//! ```
//!
//! Expiry is judged as client-go does: by **our** monotonic clock since we last saw the
//! record change (`observed_time`), not by the lease's `renewTime` (clocks of different
//! machines disagree). The Lease I/O is behind the [`LeaseLock`] trait, so the state machine
//! is tested with a [`crate::FakeClock`] and an in-memory lock.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::SharedClock;
use crate::error::{Error, Result};

/// client-go's `JitterFactor` for the acquire loop.
const JITTER_FACTOR: f64 = 1.2;

/// The leader-election fields of a Lease (client-go's `LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderElectionRecord {
    /// Who holds the lease; empty when released.
    pub holder_identity: String,
    /// How long others must wait after the last renewal before taking over.
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the lease.
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// How many times the lease changed hands.
    pub leader_transitions: i32,
}

/// A record as read, with the resourceVersion to update it against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRecord {
    /// The record.
    pub record: LeaderElectionRecord,
    /// The Lease's resourceVersion.
    pub resource_version: String,
}

/// Reads and writes the lock object (client-go's `resourcelock.Interface`).
pub trait LeaseLock: Send + Sync {
    /// The current record, `None` if the lock object does not exist.
    fn get(&self) -> BoxFuture<'_, Result<Option<ObservedRecord>>>;
    /// Creates the lock object (fails if it exists); returns its resourceVersion.
    fn create(&self, record: LeaderElectionRecord) -> BoxFuture<'_, Result<String>>;
    /// Replaces the record if the object is still at `resource_version` (409 otherwise);
    /// returns the new resourceVersion.
    fn update(
        &self,
        record: LeaderElectionRecord,
        resource_version: String,
    ) -> BoxFuture<'_, Result<String>>;
}

/// A [`LeaseLock`] on a coordination.k8s.io/v1 Lease.
pub struct LeaseResourceLock {
    api: Api<Lease>,
    name: String,
}

impl LeaseResourceLock {
    /// The Lease `name` in the namespace of `api` (e.g. `kube-system/kube-controller-manager`).
    pub fn new(api: Api<Lease>, name: impl Into<String>) -> Self {
        LeaseResourceLock {
            api,
            name: name.into(),
        }
    }

    fn lease(&self, record: LeaderElectionRecord, resource_version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                resource_version,
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(record.holder_identity),
                lease_duration_seconds: Some(record.lease_duration_seconds),
                acquire_time: record.acquire_time.map(MicroTime),
                renew_time: record.renew_time.map(MicroTime),
                lease_transitions: Some(record.leader_transitions),
                ..Default::default()
            }),
        }
    }
}

impl LeaseLock for LeaseResourceLock {
    fn get(&self) -> BoxFuture<'_, Result<Option<ObservedRecord>>> {
        Box::pin(async move {
            let Some(lease) = self.api.get_opt(&self.name).await? else {
                return Ok(None);
            };
            let spec = lease.spec.clone().unwrap_or_default();
            Ok(Some(ObservedRecord {
                record: LeaderElectionRecord {
                    holder_identity: spec.holder_identity.unwrap_or_default(),
                    lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
                    acquire_time: spec.acquire_time.map(|t| t.0),
                    renew_time: spec.renew_time.map(|t| t.0),
                    leader_transitions: spec.lease_transitions.unwrap_or_default(),
                },
                resource_version: lease.resource_version().unwrap_or_default(),
            }))
        })
    }

    fn create(&self, record: LeaderElectionRecord) -> BoxFuture<'_, Result<String>> {
        Box::pin(async move {
            let created = self
                .api
                .create(&PostParams::default(), &self.lease(record, None))
                .await?;
            Ok(created.resource_version().unwrap_or_default())
        })
    }

    fn update(
        &self,
        record: LeaderElectionRecord,
        resource_version: String,
    ) -> BoxFuture<'_, Result<String>> {
        Box::pin(async move {
            let lease = self.lease(record, Some(resource_version));
            let updated = self
                .api
                .replace(&self.name, &PostParams::default(), &lease)
                .await?;
            Ok(updated.resource_version().unwrap_or_default())
        })
    }
}

/// Timing and identity (client-go's `LeaderElectionConfig`).
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    /// This candidate's identity (usually `hostname_uuid`).
    pub identity: String,
    /// How long a lease is valid after its last observed renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failing renewal before giving up (10 s).
    pub renew_deadline: Duration,
    /// Time between attempts (2 s).
    pub retry_period: Duration,
    /// Release the lease on shutdown so the next leader need not wait for expiry.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// kube-controller-manager's defaults: 15 s / 10 s / 2 s, release on cancel.
    pub fn new(identity: impl Into<String>) -> Self {
        LeaderElectionConfig {
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
        }
    }
}

/// One candidate in a leader election.
pub struct LeaderElector<L> {
    config: LeaderElectionConfig,
    lock: L,
    clock: SharedClock,
    /// The record last read or written.
    observed: Option<ObservedRecord>,
    /// When `observed` last changed, on our clock: the lease expires `lease_duration` later.
    observed_time: Option<Instant>,
    is_leader: watch::Sender<bool>,
    leader: watch::Sender<Option<String>>,
}

impl<L: LeaseLock> LeaderElector<L> {
    /// A candidate using `lock`, timed by `clock`.
    pub fn new(config: LeaderElectionConfig, lock: L, clock: SharedClock) -> Self {
        LeaderElector {
            config,
            lock,
            clock,
            observed: None,
            observed_time: None,
            is_leader: watch::channel(false).0,
            leader: watch::channel(None).0,
        }
    }

    /// Turns `true` while this candidate leads (start controllers then; stop them when it
    /// turns `false`). client-go's `OnStartedLeading`/`OnStoppedLeading` callbacks.
    pub fn is_leader(&self) -> watch::Receiver<bool> {
        self.is_leader.subscribe()
    }

    /// The identity of the current leader as last observed (client-go's `OnNewLeader`).
    pub fn leader(&self) -> watch::Receiver<Option<String>> {
        self.leader.subscribe()
    }

    /// The record last read or written.
    pub fn observed_record(&self) -> Option<&LeaderElectionRecord> {
        self.observed.as_ref().map(|o| &o.record)
    }

    fn holds_lease(&self) -> bool {
        self.observed_record()
            .is_some_and(|r| r.holder_identity == self.config.identity)
    }

    fn set_observed(&mut self, observed: ObservedRecord) {
        let holder = Some(observed.record.holder_identity.clone()).filter(|h| !h.is_empty());
        self.leader.send_if_modified(|leader| {
            let changed = *leader != holder;
            *leader = holder;
            changed
        });
        self.observed = Some(observed);
        self.observed_time = Some(self.clock.now());
    }

    /// One attempt to acquire or renew (client-go's `tryAcquireOrRenew`); true if we hold
    /// the lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> bool {
        let now = self.clock.wall();
        let mut record = LeaderElectionRecord {
            holder_identity: self.config.identity.clone(),
            lease_duration_seconds: i32::try_from(self.config.lease_duration.as_secs())
                .unwrap_or(i32::MAX),
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: 0,
        };
        // 1. Get, or create if missing.
        let current = match self.lock.get().await {
            Ok(Some(current)) => current,
            Ok(None) => {
                let created = self.lock.create(record.clone()).await;
                return self.written(record, created);
            }
            Err(err) => {
                tracing::debug!(%err, "reading the lease failed");
                return false;
            }
        };
        // 2. Has it changed since we last looked? Then its lease clock restarts now.
        if self.observed.as_ref().map(|o| &o.record) != Some(&current.record) {
            self.set_observed(current.clone());
        } else if let Some(observed) = self.observed.as_mut() {
            observed.resource_version = current.resource_version.clone();
        }
        let held_by_other = !current.record.holder_identity.is_empty() && !self.holds_lease();
        if held_by_other && self.lease_valid() {
            return false;
        }
        // 3. Take it over or renew it.
        if self.holds_lease() {
            record.acquire_time = current.record.acquire_time;
            record.leader_transitions = current.record.leader_transitions;
        } else {
            record.leader_transitions = current.record.leader_transitions + 1;
        }
        let updated = self
            .lock
            .update(record.clone(), current.resource_version.clone())
            .await;
        self.written(record, updated)
    }

    /// Observes `record` if writing it succeeded; true on success.
    fn written(&mut self, record: LeaderElectionRecord, result: Result<String>) -> bool {
        match result {
            Ok(resource_version) => {
                self.set_observed(ObservedRecord {
                    record,
                    resource_version,
                });
                true
            }
            Err(err) => {
                tracing::debug!(%err, "writing the lease failed");
                false
            }
        }
    }

    fn lease_valid(&self) -> bool {
        self.observed_time
            .is_some_and(|at| at + self.config.lease_duration > self.clock.now())
    }

    /// Retries every `retry_period` (jittered) until the lease is ours; false on shutdown.
    pub async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        loop {
            if shutdown.is_cancelled() {
                return false;
            }
            if self.try_acquire_or_renew().await {
                tracing::info!(identity = %self.config.identity, "acquired lease");
                return true;
            }
            let jitter = self
                .config
                .retry_period
                .mul_f64(rand::rng().random::<f64>() * JITTER_FACTOR);
            tokio::select! {
                () = shutdown.cancelled() => return false,
                () = self.clock.sleep(self.config.retry_period + jitter) => {}
            }
        }
    }

    /// Renews every `retry_period` until a renewal keeps failing for `renew_deadline`
    /// (leadership lost) or shutdown. Unlike client-go, which keeps retrying until the
    /// deadline even after seeing another holder, seeing another holder ends leadership at
    /// once: two leaders for up to 10 s buys nothing.
    pub async fn renew(&mut self, shutdown: &CancellationToken) {
        let mut last_renew = self.clock.now();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.clock.sleep(self.config.retry_period) => {}
            }
            if self.try_acquire_or_renew().await {
                last_renew = self.clock.now();
            } else if self.clock.now().saturating_duration_since(last_renew)
                >= self.config.renew_deadline
                || !self.holds_lease()
            {
                tracing::warn!(identity = %self.config.identity, "failed to renew lease: leadership lost");
                return;
            }
        }
    }

    /// Gives the lease up so another candidate can take it at once.
    pub async fn release(&mut self) -> Result<()> {
        if !self.holds_lease() {
            return Ok(());
        }
        let Some(observed) = self.observed.clone() else {
            return Ok(());
        };
        let now = self.clock.wall();
        let record = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            leader_transitions: observed.record.leader_transitions,
        };
        let resource_version = self
            .lock
            .update(record.clone(), observed.resource_version)
            .await?;
        self.set_observed(ObservedRecord {
            record,
            resource_version,
        });
        Ok(())
    }

    /// Campaigns, leads (publishing `is_leader`), and returns when leadership is lost or
    /// `shutdown` fires; releases the lease on shutdown if configured. Like client-go, it
    /// does not campaign again: a process that lost the lease should stop its controllers.
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<()> {
        if !self.acquire(&shutdown).await {
            return Err(Error::ShuttingDown);
        }
        self.is_leader.send_replace(true);
        self.renew(&shutdown).await;
        self.is_leader.send_replace(false);
        if shutdown.is_cancelled() && self.config.release_on_cancel {
            self.release().await?;
        }
        Ok(())
    }
}

/// An in-memory [`LeaseLock`] with resourceVersion checks, shared by several candidates in
/// tests (and usable by labs to show an election without a server).
#[derive(Clone, Default)]
pub struct MemoryLeaseLock {
    state: Arc<std::sync::Mutex<MemoryLease>>,
}

#[derive(Default)]
struct MemoryLease {
    record: Option<LeaderElectionRecord>,
    /// Bumped by every write; the resourceVersion.
    version: u64,
    /// Every call fails while set.
    unreachable: bool,
}

impl MemoryLeaseLock {
    /// An empty lock (no Lease yet).
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryLease> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes every call fail (a partitioned API server) until called with `false`.
    pub fn set_unreachable(&self, unreachable: bool) {
        self.lock().unreachable = unreachable;
    }

    /// The stored record.
    pub fn record(&self) -> Option<LeaderElectionRecord> {
        self.lock().record.clone()
    }

    /// Stores `record` unless unreachable or `conflict` finds a reason (409) not to.
    fn write(
        &self,
        record: LeaderElectionRecord,
        conflict: impl FnOnce(&MemoryLease) -> Option<&'static str>,
    ) -> BoxFuture<'_, Result<String>> {
        let mut lease = self.lock();
        let result = if lease.unreachable {
            Err(unreachable())
        } else if let Some(reason) = conflict(&lease) {
            Err(Error::Api {
                code: 409,
                reason: reason.into(),
                message: "lease write refused".into(),
            })
        } else {
            lease.record = Some(record);
            lease.version += 1;
            Ok(lease.version.to_string())
        };
        Box::pin(std::future::ready(result))
    }
}

fn unreachable() -> Error {
    Error::Api {
        code: 503,
        reason: "ServiceUnavailable".into(),
        message: "unreachable".into(),
    }
}

impl LeaseLock for MemoryLeaseLock {
    fn get(&self) -> BoxFuture<'_, Result<Option<ObservedRecord>>> {
        let lease = self.lock();
        let result = if lease.unreachable {
            Err(unreachable())
        } else {
            Ok(lease.record.clone().map(|record| ObservedRecord {
                record,
                resource_version: lease.version.to_string(),
            }))
        };
        Box::pin(std::future::ready(result))
    }
    fn create(&self, record: LeaderElectionRecord) -> BoxFuture<'_, Result<String>> {
        self.write(record, |lease| {
            lease.record.is_some().then_some("AlreadyExists")
        })
    }
    fn update(
        &self,
        record: LeaderElectionRecord,
        resource_version: String,
    ) -> BoxFuture<'_, Result<String>> {
        self.write(record, move |lease| {
            (lease.version.to_string() != resource_version).then_some("Conflict")
        })
    }
}

#[cfg(test)]
#[path = "leader_election_tests.rs"]
mod tests;
