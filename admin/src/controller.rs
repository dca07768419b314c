//! [`ControllerStatus`]: what `/miniplane/v1/controllers` shows of one controller and its
//! work queue (client-go's `util/workqueue` metrics, plus the keys and the pause state).

use serde::{Deserialize, Serialize};

/// Keys listed per collection (`queued`, `processing`) at most.
pub const MAX_KEYS: usize = 50;

/// One controller's work queue, as last reported by its component.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerStatus {
    /// The controller (its queue's name): `deployment`, `replicaset`, ...
    pub name: String,
    /// The component running it (`kube-controller-manager`).
    pub component: String,
    /// A `PauseController` fault is in force.
    pub paused: bool,
    /// Steps granted but not yet taken.
    pub steps_pending: u64,
    /// Keys ready for a worker (`workqueue_depth`).
    pub depth: u64,
    /// Keys a worker holds between `get` and `done`.
    pub in_flight: u64,
    /// Keys parked by `AddAfter` / rate limiting, not yet ready.
    pub waiting: u64,
    /// Adds not merged into a pending one (`workqueue_adds_total`).
    pub adds: u64,
    /// Rate-limited re-adds (`workqueue_retries_total`).
    pub retries: u64,
    /// Syncs run.
    pub syncs: u64,
    /// Syncs that failed.
    pub sync_errors: u64,
    /// Keys ready for a worker, in queue order (at most [`MAX_KEYS`]).
    pub queued: Vec<String>,
    /// Keys being processed (at most [`MAX_KEYS`]).
    pub processing: Vec<String>,
    /// When the component reported (RFC 3339), set by the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_at: Option<String>,
}

/// `{"items": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerList {
    /// Sorted by name.
    pub items: Vec<ControllerStatus>,
}

/// Body of `POST /miniplane/v1/controllers/{name}/step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRequest {
    /// Keys to let through (1..=100).
    #[serde(default = "one")]
    pub count: u64,
}

fn one() -> u64 {
    1
}

impl Default for StepRequest {
    fn default() -> Self {
        StepRequest { count: 1 }
    }
}
