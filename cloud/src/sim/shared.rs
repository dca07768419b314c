//! The state the handlers share: the cloud's [`CloudState`] behind a lock, and the two ways
//! to reach it. A read runs under the lock on the state as of now; a write is queued and
//! run on a copy, on one of tokio's blocking threads, and the copy replaces the state only
//! once it is saved.
//!
//! ```text
//!   read:  lock ─ f(&state, now) ─ unlock
//!   write: queue f ─▶ (blocking thread) lock ─ take every queued f ─ run each on the copy
//!          (a refused one undone) ─ save the copy to state.json once ─ swap ─ unlock ─ answer
//! ```
//!
//! So a change that could not be saved is not made (500), a refused one leaves nothing half
//! done, and the changes are saved in the order they are made. The file is synced, and a
//! runtime thread must not wait on a disk: hence the blocking thread. Writes that arrive
//! while a save is under way are saved together by the next one (group commit, as the
//! store's WAL does), so a burst of launches costs a few file rewrites, not one each. The
//! locks are plain mutexes, never held across an `.await`. No Kubernetes counterpart: this
//! is the cloud's own bookkeeping (etcd's "answer once the WAL is synced" on a much smaller
//! scale).

use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use rand::rngs::StdRng;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::api::Rejection;
use super::faults::{FaultApi, Verdict};
use super::server::SimOptions;
use super::state::CloudState;
use super::state_file::StateFile;

/// A queued write: runs on the batch's copy of the state (undoing itself if refused) and
/// leaves what to answer once the batch is saved or not.
type Job = Box<dyn FnOnce(&mut CloudState, Timestamp, &mut StdRng) -> Answer + Send>;

/// Sends a write's answer, given whether its batch was saved.
type Answer = Box<dyn FnOnce(Result<(), Rejection>) + Send>;

/// What the handlers share.
pub(crate) struct Shared {
    pub options: SimOptions,
    /// Cancelled when the server stops, to cut short the calls a delay fault holds.
    pub stopping: CancellationToken,
    inner: Mutex<Inner>,
    /// Writes waiting for the next save.
    queued: Mutex<Vec<Job>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("options", &self.options)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
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
            queued: Mutex::new(Vec::new()),
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
    /// (with the other writes queued meanwhile) and makes it the state.
    pub(crate) async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut CloudState, Timestamp, &mut StdRng) -> Result<T, Rejection> + Send + 'static,
    ) -> Result<T, Rejection> {
        let (tx, rx) = oneshot::channel::<Result<T, Rejection>>();
        let job: Job = Box::new(move |state, now, rng| {
            let before = state.clone();
            match f(state, now, rng) {
                Ok(answer) => Box::new(move |saved: Result<(), Rejection>| {
                    let _ = tx.send(saved.map(|()| answer));
                }),
                Err(rejection) => {
                    *state = before;
                    Box::new(move |_| {
                        let _ = tx.send(Err(rejection));
                    })
                }
            }
        });
        self.queued
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(job);
        let shared = self.clone();
        tokio::task::spawn_blocking(move || shared.commit())
            .await
            .map_err(|e| Rejection::Internal(format!("the change was not made: {e}")))?;
        rx.await
            .map_err(|_| Rejection::Internal("the change was not made: the cloud stopped".into()))?
    }

    /// Runs every queued write on one copy of the state and saves it once. A write whose
    /// batch an earlier commit took has been answered already: then there is nothing to do.
    fn commit(&self) {
        let mut inner = self.lock();
        let jobs = std::mem::take(
            &mut *self
                .queued
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        if jobs.is_empty() {
            return;
        }
        let inner = &mut *inner;
        let now = Timestamp::now();
        let mut next = inner.state.clone();
        let answers: Vec<Answer> = jobs
            .into_iter()
            .map(|job| job(&mut next, now, &mut inner.rng))
            .collect();
        let saved = if next == inner.state {
            Ok(())
        } else {
            match inner.file.save(&next) {
                Ok(()) => {
                    inner.state = next;
                    Ok(())
                }
                Err(e) => {
                    tracing::error!(error = %e, "saving the state");
                    Err(Rejection::Internal(format!("the change was not made: {e}")))
                }
            }
        };
        for answer in answers {
            answer(saved.clone());
        }
    }
}
