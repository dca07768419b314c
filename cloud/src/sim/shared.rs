//! The state the handlers share: the cloud's [`CloudState`] behind a lock, and the two ways
//! to reach it. A read runs under the lock on the state as of now; a write is queued and
//! run on the state, on one of tokio's blocking threads, and answered once the state is
//! saved.
//!
//! ```text
//!   read:  lock ─ f(&state, now) ─ unlock
//!   write: queue f ─▶ the committer (one blocking thread, started by the first write of a
//!          burst): take every queued f ─ lock ─ run each on the state (a refused one changes
//!          nothing) ─ save the state to state.json once ─ unlock ─ answer each ─ again, until
//!          nothing is queued (not saved: the state goes back to the one last saved, every f of
//!          the batch fails)
//! ```
//!
//! So a change that could not be saved is not made (500), a refused one leaves nothing half
//! done (each operation checks before it changes anything), and the changes are saved in the
//! order they are made. The file is synced, and a runtime thread must not wait on a disk:
//! hence the blocking thread. Writes that arrive while a save is under way are saved together
//! by the next one (group commit, as the store's WAL does: one committer, so no write waits
//! for another's turn), so a burst of launches costs a few file rewrites, not one each; a batch that changed nothing (a launch of an existing
//! instance) is not written. Each save moves the state's generation on: the `ETag` of a list,
//! so a poller asks "changed since?" and gets `304 Not Modified` for free. The queue's lock is
//! a plain mutex, never held across an `.await`; the state's is asynchronous, so a call that
//! waits for a save does not hold a runtime thread. No Kubernetes counterpart: this is the
//! cloud's own bookkeeping (etcd's "answer once the WAL is synced" on a much smaller scale).

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use rand::rngs::StdRng;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::api::Rejection;
use super::faults::{FaultApi, Verdict};
use super::server::SimOptions;
use super::state::CloudState;
use super::state_file::StateFile;

/// A queued write: runs on the state (changing nothing if refused) and leaves what to answer
/// once the batch is saved or not.
type Job = Box<dyn FnOnce(&mut CloudState, Timestamp, &mut StdRng) -> Answer + Send>;

/// Sends a write's answer, given whether its batch was saved.
type Answer = Box<dyn FnOnce(Result<(), Rejection>) + Send>;

/// What the handlers share.
pub(crate) struct Shared {
    pub options: SimOptions,
    /// Cancelled when the server stops, to cut short the calls a delay fault holds.
    pub stopping: CancellationToken,
    /// When the cloud started (nanoseconds), the first part of its `ETag`s.
    started: u64,
    /// The state, behind an asynchronous lock: a save holds it while it writes and syncs the
    /// file, and the calls that wait for it then must not hold a runtime thread meanwhile (on
    /// a 2-core machine two blocked calls would stop every other request, launches too, for
    /// the whole save).
    inner: tokio::sync::Mutex<Inner>,
    /// Writes waiting for the next save, and whether a committer is at work.
    queued: Mutex<Queue>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("options", &self.options)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// The writes waiting for the committer.
#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// A committer is at work (and will take what is pushed before it stops).
    committing: bool,
}

#[derive(Debug)]
struct Inner {
    state: CloudState,
    file: StateFile,
    /// One generator for the cloud's life: seeded, a run is repeatable.
    rng: StdRng,
    /// `state` as last saved (or read): what a batch's state is compared with, and what it
    /// goes back to when it cannot be saved.
    saved: Vec<u8>,
    /// How many saves changed the state since the cloud started.
    generation: u64,
}

/// A state's generation as an `ETag`: the cloud's start (so a restarted cloud's tags differ)
/// and the number of saves since.
fn etag(started: u64, generation: u64) -> String {
    format!("\"{started:x}-{generation}\"")
}

impl Shared {
    pub(crate) fn new(
        options: SimOptions,
        state: CloudState,
        file: StateFile,
        rng: StdRng,
    ) -> Shared {
        // Encoding the state cannot fail (string keys only); if it did, the first change
        // would simply be saved.
        let saved = state.to_json().unwrap_or_default();
        let started = Timestamp::now().as_nanosecond().unsigned_abs() as u64;
        Shared {
            options,
            stopping: CancellationToken::new(),
            started,
            inner: tokio::sync::Mutex::new(Inner {
                state,
                file,
                rng,
                saved,
                generation: 0,
            }),
            queued: Mutex::new(Queue::default()),
        }
    }

    /// What the faults do to a call of `api` (a draw of the cloud's generator).
    pub(crate) async fn fault_verdict(&self, api: FaultApi) -> Verdict {
        let mut inner = self.inner.lock().await;
        let inner = &mut *inner;
        inner.state.fault_verdict(api, &mut inner.rng)
    }

    /// Runs `f` on the state as of now.
    pub(crate) async fn read<T>(
        &self,
        f: impl FnOnce(&CloudState, Timestamp) -> Result<T, Rejection>,
    ) -> Result<T, Rejection> {
        let inner = self.inner.lock().await;
        f(&inner.state, Timestamp::now())
    }

    /// Runs `f` on the state as of now, unless `if_none_match` is that state's `ETag`
    /// (`Ok(None)`: not modified); the answer comes with the `ETag`.
    pub(crate) async fn read_tagged<T>(
        &self,
        if_none_match: Option<&str>,
        f: impl FnOnce(&CloudState, Timestamp) -> Result<T, Rejection>,
    ) -> Result<(Option<T>, String), Rejection> {
        let inner = self.inner.lock().await;
        let tag = etag(self.started, inner.generation);
        if if_none_match == Some(tag.as_str()) {
            return Ok((None, tag));
        }
        Ok((Some(f(&inner.state, Timestamp::now())?), tag))
    }

    /// Queues `f` for the committer, which runs it on the state and saves it (with the other
    /// writes queued meanwhile); answers once saved, or with why not.
    pub(crate) async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut CloudState, Timestamp, &mut StdRng) -> Result<T, Rejection> + Send + 'static,
    ) -> Result<T, Rejection> {
        let (tx, rx) = oneshot::channel::<Result<T, Rejection>>();
        let job: Job = Box::new(move |state, now, rng| match f(state, now, rng) {
            Ok(answer) => Box::new(move |saved: Result<(), Rejection>| {
                let _ = tx.send(saved.map(|()| answer));
            }),
            Err(rejection) => Box::new(move |_| {
                let _ = tx.send(Err(rejection));
            }),
        });
        let start_committer = {
            let mut queue = self.queue();
            queue.jobs.push(job);
            !std::mem::replace(&mut queue.committing, true)
        };
        if start_committer {
            let shared = self.clone();
            tokio::task::spawn_blocking(move || shared.commit_until_idle());
        }
        rx.await
            .map_err(|_| Rejection::Internal("the change was not made: the cloud stopped".into()))?
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        // The queue is only pushed to and taken whole: a panic cannot leave it half changed.
        self.queued
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The committer: one at a time, on a blocking thread, it takes every queued write, runs
    /// them and saves once, and again, until the queue is empty. Writes that arrive during a
    /// save wait for the next turn: the slower the disk, the bigger the batches.
    fn commit_until_idle(&self) {
        // If a save panics, the next write starts a committer again.
        struct OnPanic<'a>(&'a Shared);
        impl Drop for OnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.queue().committing = false;
                }
            }
        }
        let _on_panic = OnPanic(self);
        loop {
            let jobs = {
                let mut queue = self.queue();
                if queue.jobs.is_empty() {
                    // Cleared under the queue's lock: a write pushed after this sees no
                    // committer and starts one.
                    queue.committing = false;
                    return;
                }
                std::mem::take(&mut queue.jobs)
            };
            self.commit(jobs);
        }
    }

    /// Runs `jobs` on the state and saves it once, then answers each.
    fn commit(&self, jobs: Vec<Job>) {
        let mut inner = self.inner.blocking_lock();
        let inner = &mut *inner;
        let now = Timestamp::now();
        let answers: Vec<Answer> = jobs
            .into_iter()
            .map(|job| job(&mut inner.state, now, &mut inner.rng))
            .collect();
        let saved = match inner.state.to_json() {
            Ok(bytes) if bytes == inner.saved => Ok(()),
            Ok(bytes) => inner.file.write(&bytes).map(|()| {
                inner.saved = bytes;
                inner.generation += 1;
            }),
            Err(e) => Err(e.to_string()),
        };
        let saved = saved.map_err(|e| {
            tracing::error!(error = %e, "saving the state");
            match CloudState::from_json(&inner.saved) {
                Ok(last) => inner.state = last,
                Err(why) => {
                    tracing::error!(error = %why, "the state last saved does not read back")
                }
            }
            Rejection::Internal(format!("the change was not made: {e}"))
        });
        for answer in answers {
            answer(saved.clone());
        }
    }
}
