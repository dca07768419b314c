//! miniplane's admin API: the types of `/miniplane/v1/` (see `docs/faults.md`).
//!
//! There is no Kubernetes counterpart: this is the part of miniplane that breaks a cluster on
//! purpose ([`Fault`]), shows the inside of its controllers ([`ControllerStatus`]: each
//! work queue's depth, keys in flight, retries, pause state) and the progress of a teaching
//! lab ([`LabStatus`]), the kept versions of any object ([`ObjectHistory`]),
//! the cluster's virtual clock ([`ClockState`]) and recordings of its writes
//! ([`recording::Recording`], compared after a replay by [`replay::compare`]). The API
//! server serves these, the components obey and report them,
//! the `miniplane fault`/`lab` verbs and the web UI read and write them.
//!
//! ```text
//!   POST /miniplane/v1/faults {kind: PauseController, controller: deployment}
//!     ─▶ ConfigMap kube-system/miniplane-faults  data["pause-deployment"] = <Fault JSON>
//!     ─▶ watched by every component, each applies the faults meant for it
//! ```

pub mod clock;
pub mod controller;
pub mod fault;
pub mod history;
pub mod lab;
pub mod recording;
pub mod replay;

pub use clock::{
    CLOCK_CONFIGMAP, CLOCK_NAMESPACE, ClockError, ClockMode, ClockRequest, ClockState, ClockStatus,
    DEFAULT_ADVANCE_SPEED,
};
pub use controller::{ControllerList, ControllerStatus, StepRequest};
pub use fault::{Fault, FaultList, FaultSpec, InvalidFault, faults_from_data};
pub use history::{ChangeType, FieldChange, HistoryEntry, ObjectHistory};
pub use lab::{CheckResult, LabStatus};

/// Namespace of the ConfigMap holding the faults in force.
pub const FAULTS_NAMESPACE: &str = "kube-system";

/// Name of the ConfigMap holding the faults in force (one data key per fault).
pub const FAULTS_CONFIGMAP: &str = "miniplane-faults";

/// Field manager (and User-Agent program) of the API server's writes of the faults ConfigMap.
pub const FIELD_MANAGER: &str = "miniplane-fault";

/// Path prefix of the admin API.
pub const PREFIX: &str = "/miniplane/v1";
