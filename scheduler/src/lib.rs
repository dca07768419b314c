//! miniplane's kube-scheduler: assigns each pending pod to a node.
//!
//! ```text
//!  informers                          ┌──────────────────────────────┐
//!   unassigned pods ──add/update/del─▶│ SchedulingQueue  queue.rs    │ activeQ · backoffQ ·
//!   assigned pods ─┐                  └──────────────┬───────────────┘ unschedulable pods
//!   nodes ─────────┤  node add/update, pod delete:   │ pop (one pod at a time)
//!   namespaces ────┤  move unschedulable pods back   │
//!   claims, PVs, ──┤  (claim/PV/class add, update:   │
//!   classes        │  those VolumeBinding rejected)  │
//!                  │  (a pod bound: those waiting    ▼
//!                  │  for pods)
//!                  │  ┌──────────────┐   ┌───────────────────────────┐
//!                  └─▶│ Cache        │──▶│ Algorithm  schedule_one.rs │ pre-filter → filters →
//!                     │ cache.rs     │   │ plugins/*, cycle_state.rs  │ scores → select (seeded RNG)
//!                     └──────▲───────┘   └──────────────┬────────────┘
//!                            │ assume pod on node       │ ok            │ FitError
//!                            └──────────────────────────┤               ▼
//!                                                       ▼        PodScheduled=False,
//!                         PreBind (VolumeBinding: selected-node, FailedScheduling event,
//!                         wait for bound claims), then           back to the queue
//!                         POST pods/{name}/binding (concurrent,
//!                         bounded); failure → forget + retry
//! ```
//!
//! The sans-IO core ([`node_info`], [`affinity_term`], [`cycle_state`], [`plugins`],
//! [`fit_error`], [`schedule_one`], [`queue`], [`cache`], [`decision_trace`]) is plain synchronous code over k8s-openapi types
//! with time and randomness injected; [`scheduler`] is the async shell that moves data
//! between the API server and that core (`pkg/scheduler/scheduler.go`, `schedule_one.go`).

pub mod affinity_term;
pub mod cache;
pub mod cycle_state;
pub mod decision_trace;
pub mod eventhandlers;
pub mod fit_error;
pub mod metrics;
pub mod node_info;
pub mod plugins;
pub mod pod_groups;
mod prebind;
pub mod preemption;
pub mod queue;
pub mod schedule_one;
pub mod scheduler;

pub use scheduler::{Config, run};

/// What can go wrong running the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API client could not be built or the caches could not be filled.
    #[error("client: {0}")]
    Client(#[from] client::Error),
    /// The metrics/health listener failed.
    #[error("listener: {0}")]
    Listener(#[from] std::io::Error),
    /// Another candidate took the Lease while this one led: the process should exit (as
    /// kube-scheduler does) and campaign again when restarted.
    #[error("leaderelection lost")]
    LeaderElectionLost,
    /// The cluster's clock could not be read.
    #[error("clock: {0}")]
    Clock(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
