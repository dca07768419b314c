//! Teaching labs: `labs/<nn-name>/` holds a narrative (`README.md`, `README.ko.md`) and a
//! `lab.yaml` of steps, checks, hints and solutions (see [`spec`] and `docs/labs.md`).
//!
//! Killercoda-style step checks, with what no course can show: checks read how the state was
//! reached (the writes in the trace, the scheduler's verdicts, the events), and setups can
//! break the control plane on purpose through the fault API (`docs/faults.md`).
//!
//! ```text
//!   lab.yaml ─▶ spec::Lab ──setup/solution──▶ runner (actions: miniplane/kubectl commands,
//!                    │                                  faults, steps, waits)
//!                    └──checks──▶ snapshot::fetch (objects, events, controllers, faults,
//!                                   spans) ─▶ check::evaluate (plain functions) ─▶ results
//! ```
//!
//! [`runner::LabRunner`] is the thin shell around a running cluster; the `miniplane lab`
//! verbs and the CI test of every lab drive it.

pub mod check;
pub mod cluster;
pub mod path;
pub mod runner;
pub mod snapshot;
pub mod spec;

pub use runner::LabRunner;
pub use spec::{Lab, load, load_all};
