//! The API server's etcd compactor (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/compact.go`).
//!
//! Every `interval` (`--etcd-compaction-interval`, 5m by default; 0 turns it off) each API
//! server runs one round:
//!
//! ```text
//!   txn { if version(compact_rev_key) == my compact_time
//!         then put(compact_rev_key, rev seen last round)        ← won: compact etcd to that rev
//!         else get(compact_rev_key) }                           ← lost: adopt its version
//!   remember the revision of this answer for the next round
//! ```
//!
//! The key's version is the cluster-wide "compact time": only the API server whose compare
//! holds compacts, so several API servers compact once per interval, to the revision the
//! cluster had one interval earlier (the first round only takes the lease: nothing is
//! compacted on bootstrap). If the winner dies, another one's compare holds one round later.
//!
//! A won round compacts through the backend's own compaction (`Backend::compact`), which
//! leaves etcd one revision below the point (see `Inner::compact` in `mod.rs`); the lease
//! key holds the point itself, as kube-apiserver writes it.
//!
//! Simplified: kube-apiserver keeps one compactor per set of endpoints in a process
//! (`endpointsMap`); here each [`Compactor::start`] runs its own loop.

use super::call::Retry;
use super::convert;
use super::{EtcdBackend, Inner};
use crate::{Error, Result, Revision};
use etcd_client as etcd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The key the compactors of a cluster coordinate on (`compactRevKey`), at the root of etcd's
/// key space (not under `--etcd-prefix`), so every API server of the cluster shares it.
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// kube-apiserver's default `--etcd-compaction-interval`.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// What a compactor carries from one round to the next (`compactTime` and `rev` in
/// compact.go's loop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactState {
    /// The version of [`COMPACT_REV_KEY`] this compactor expects (0: the key does not exist).
    pub compact_time: u64,
    /// The etcd revision seen in the previous round: what the next won round compacts to
    /// (0 on the first round).
    pub revision: Revision,
}

/// What one round did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactOutcome {
    /// This compactor won the round and compacted etcd to this revision.
    Compacted(Revision),
    /// This compactor won its first round: it took the lease and compacted nothing.
    Bootstrapped,
    /// Another compactor won: the revision it last compacted to, if [`COMPACT_REV_KEY`] holds
    /// one.
    Lost(Option<Revision>),
}

impl EtcdBackend {
    /// One round of compact.go's `compact`: updates `state` for the next round (also when the
    /// compaction itself fails after the compare-and-swap was won).
    pub async fn compact_round(&self, state: &mut CompactState) -> Result<CompactOutcome> {
        compact_round(&self.inner, state).await
    }
}

async fn compact_round(inner: &Inner, state: &mut CompactState) -> Result<CompactOutcome> {
    let expect = i64::try_from(state.compact_time).unwrap_or(i64::MAX);
    let txn = etcd::Txn::new()
        .when([etcd::Compare::version(
            COMPACT_REV_KEY,
            etcd::CompareOp::Equal,
            expect,
        )])
        .and_then([etcd::TxnOp::put(
            COMPACT_REV_KEY,
            state.revision.0.to_string(),
            None,
        )])
        .or_else([etcd::TxnOp::get(COMPACT_REV_KEY, None)]);
    let resp = inner
        .call("compaction lease", Retry::Write, || {
            let mut kv = inner.kv.clone();
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })
        .await
        .map_err(|f| inner.plain_failure(f))?;
    let current = resp.header().map_or(Revision::ZERO, |h| {
        inner.observe_revision(h.revision());
        convert::revision(h.revision())
    });
    if !resp.succeeded() {
        let kv = resp.op_responses().into_iter().find_map(|r| match r {
            etcd::TxnOpResponse::Get(g) => g.kvs().first().cloned(),
            _ => None,
        });
        let (version, value) = kv.map_or((0, None), |kv| {
            (
                u64::try_from(kv.version()).unwrap_or(0),
                std::str::from_utf8(kv.value())
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok()),
            )
        });
        *state = CompactState {
            compact_time: version,
            revision: current,
        };
        return Ok(CompactOutcome::Lost(
            value.filter(|v| *v != 0).map(Revision),
        ));
    }
    let target = state.revision;
    *state = CompactState {
        compact_time: state.compact_time + 1,
        revision: current,
    };
    if target == Revision::ZERO {
        // "We don't compact on bootstrap."
        return Ok(CompactOutcome::Bootstrapped);
    }
    inner.compact(target).await?;
    tracing::debug!(endpoints = %inner.endpoints, "etcd: compacted rev ({target})");
    Ok(CompactOutcome::Compacted(target))
}

/// A running compactor (compact.go's `compactor`): started by the API server's launcher,
/// stopped by its shutdown token, by [`Compactor::stop`], or when the backend is closed.
#[derive(Debug)]
pub struct Compactor {
    stop: CancellationToken,
    compact_revision: Arc<AtomicU64>,
    task: Option<JoinHandle<()>>,
}

impl Compactor {
    /// Starts compacting `backend`'s cluster every `interval` (an `interval` of zero starts
    /// nothing, as `--etcd-compaction-interval=0`). The first round runs one interval after
    /// the start. Needs a Tokio runtime.
    pub fn start(backend: &EtcdBackend, interval: Duration, shutdown: CancellationToken) -> Self {
        let stop = shutdown.child_token();
        let compact_revision = Arc::new(AtomicU64::new(0));
        let task = (!interval.is_zero()).then(|| {
            tokio::spawn(run(
                backend.inner.clone(),
                interval,
                stop.clone(),
                compact_revision.clone(),
            ))
        });
        Compactor {
            stop,
            compact_revision,
            task,
        }
    }

    /// The revision etcd was last compacted to, as far as this compactor knows (its own
    /// compactions and those it learned of from [`COMPACT_REV_KEY`]); `Revision::ZERO` before
    /// any (`CompactRevision`).
    pub fn compact_revision(&self) -> Revision {
        Revision(self.compact_revision.load(Ordering::Acquire))
    }

    /// Stops the loop and waits for a round under way to finish (`Stop`).
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn run(
    inner: Arc<Inner>,
    interval: Duration,
    stop: CancellationToken,
    compact_revision: Arc<AtomicU64>,
) {
    let mut state = CompactState::default();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = inner.shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let round = tokio::select! {
            _ = stop.cancelled() => return,
            _ = inner.shutdown.cancelled() => return,
            round = compact_round(&inner, &mut state) => round,
        };
        match round {
            Ok(CompactOutcome::Compacted(r) | CompactOutcome::Lost(Some(r))) => {
                compact_revision.fetch_max(r.0, Ordering::AcqRel);
            }
            Ok(_) => {}
            Err(Error::Compacted { compacted, .. }) => {
                // Compacted past this revision already (by `Backend::compact`, or another
                // cluster user): nothing left to do this round.
                compact_revision.fetch_max(compacted.0, Ordering::AcqRel);
            }
            Err(e) => {
                tracing::error!("etcd: endpoint ({}) compact failed: {e}", inner.endpoints);
            }
        }
    }
}
