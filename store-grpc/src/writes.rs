//! Keeping concurrent writes group-committed: the endpoint's writes reach the store's group
//! commit together instead of one `fdatasync` after another.
//!
//! miniplane's store commits a write on the caller's thread when it finds the store idle (no
//! write queued or being synced: `store/src/committer.rs`), which saves a lone writer two
//! thread wake-ups. The endpoint's caller is a runtime worker that also reads every other
//! client's requests: while it sits in that write's `fdatasync`, the requests behind it wait
//! unread, and each of them then finds the store idle again and commits on its own, so on one
//! worker (one core) every write had an `fdatasync` of its own. etcd does not have this: Go
//! hands a goroutine's processor to another thread while it waits in a system call, and the
//! writes proposed meanwhile share the next WAL sync (`server/etcdserver/raft.go`).
//!
//! So a write that is not alone (another write came in with it) runs in
//! `tokio::task::block_in_place`: its thread may then commit on its own while the worker's
//! other requests go on on another thread, find the store busy and are queued for its group
//! commit. One such write at a time is enough; the others are queued behind it. A lone writer
//! (only ever one write in flight) keeps the store's fast path as it is.
//!
//! Simplified: "came in with it" is what one yield to the runtime shows (the requests read
//! from the connection with it have started); `block_in_place` needs a multi-threaded
//! runtime, so a single-threaded one writes as before.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::runtime::{Handle, RuntimeFlavor};

/// The endpoint's writes in flight.
#[derive(Debug, Default)]
pub(crate) struct Writes {
    /// Writes between their start and their answer.
    in_flight: AtomicUsize,
    /// A write runs in `block_in_place` now.
    offloaded: AtomicBool,
}

/// Counts a write in flight until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Clears the `offloaded` mark when dropped.
struct Offloaded<'a>(&'a AtomicBool);

impl Drop for Offloaded<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Writes {
    /// Runs one store write (a put, a transaction that writes, a delete), offloading it from
    /// the worker when other writes are in flight (see the module docs).
    pub(crate) async fn run<F: Future>(&self, write: F) -> F::Output {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _counted = InFlight(&self.in_flight);
        // Let the requests read with this one start (and count themselves) first.
        tokio::task::yield_now().await;
        let concurrent = self.in_flight.load(Ordering::Acquire) > 1;
        if concurrent
            && Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread
            && !self.offloaded.swap(true, Ordering::AcqRel)
        {
            let _offloaded = Offloaded(&self.offloaded);
            return tokio::task::block_in_place(|| Handle::current().block_on(write));
        }
        write.await
    }

    /// How many writes are in flight (for tests).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn concurrent_writes_run_and_are_counted_until_answered() {
        let writes = Arc::new(Writes::default());
        // Each write waits for a permit: all of them are in flight at once.
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let (writes, gate) = (writes.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                writes
                    .run(async move {
                        let _permit = gate.acquire().await.unwrap();
                        i
                    })
                    .await
            }));
        }
        while writes.in_flight() < 8 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(8);
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap());
        }
        assert_eq!(done, (0..8).collect::<Vec<_>>());
        assert_eq!(writes.in_flight(), 0);
        assert!(!writes.offloaded.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn a_single_threaded_runtime_writes_in_place() {
        let writes = Writes::default();
        let (a, b) = tokio::join!(writes.run(async { 1 }), writes.run(async { 2 }));
        assert_eq!((a, b), (1, 2));
        assert_eq!(writes.in_flight(), 0);
    }
}
