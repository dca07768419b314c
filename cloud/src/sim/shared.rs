//! The state the handlers share: the cloud's [`CloudState`] behind a lock, and the two ways
//! to reach it. A read runs under the lock on the state as of now; a write runs on a copy, on
//! one of tokio's blocking threads, and the copy replaces the state only once it is saved.
//!
//! ```text
//!   read:  lock ─ f(&state, now) ─ unlock
//!   write: (blocking thread) lock ─ f(&mut copy, now, rng) ─ save copy to state.json ─ swap ─ unlock
//! ```
//!
//! So a change that could not be saved is not made (500), a refused one leaves nothing half
//! done, and the changes are saved in the order they are made. The file is synced, and a
//! runtime thread must not wait on a disk: hence the blocking thread. The lock is a plain
//! mutex, never held across an `.await`. No Kubernetes counterpart: this is the cloud's own
//! bookkeeping (etcd's "answer once the WAL is synced" on a much smaller scale).

use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;

use super::api::Rejection;
use super::faults::{FaultApi, Verdict};
use super::server::SimOptions;
use super::state::CloudState;
use super::state_file::StateFile;

/// What the handlers share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub options: SimOptions,
    /// Cancelled when the server stops, to cut short the calls a delay fault holds.
    pub stopping: CancellationToken,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: CloudState,
    file: StateFile,
    /// One generator for the cloud's life: seeded, a run is repeatable.
    rng: StdRng,
}

impl Shared {
    pub(crate) fn new(
        options: SimOptions,
        state: CloudState,
        file: StateFile,
        rng: StdRng,
    ) -> Shared {
        Shared {
            options,
            stopping: CancellationToken::new(),
            inner: Mutex::new(Inner { state, file, rng }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while the lock was held cannot have left the state half changed (writes
        // swap in a whole new state), so a poisoned lock is still good.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What the faults do to a call of `api` (a draw of the cloud's generator).
    pub(crate) fn fault_verdict(&self, api: FaultApi) -> Verdict {
        let mut inner = self.lock();
        let inner = &mut *inner;
        inner.state.fault_verdict(api, &mut inner.rng)
    }

    /// Runs `f` on the state as of now.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&CloudState, Timestamp) -> Result<T, Rejection>,
    ) -> Result<T, Rejection> {
        let inner = self.lock();
        f(&inner.state, Timestamp::now())
    }

    /// Runs `f` on a copy of the state; if it succeeds and changed something, saves the copy
    /// and makes it the state.
    pub(crate) async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut CloudState, Timestamp, &mut StdRng) -> Result<T, Rejection> + Send + 'static,
    ) -> Result<T, Rejection> {
        let shared = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut inner = shared.lock();
            let inner = &mut *inner;
            let mut next = inner.state.clone();
            let answer = f(&mut next, Timestamp::now(), &mut inner.rng)?;
            if next != inner.state {
                inner.file.save(&next).map_err(|e| {
                    tracing::error!(error = %e, "saving the state");
                    Rejection::Internal(format!("the change was not made: {e}"))
                })?;
                inner.state = next;
            }
            Ok(answer)
        })
        .await
        .map_err(|e| Rejection::Internal(format!("the change was not made: {e}")))?
    }
}
