//! # controllers — the decisions of kube-controller-manager
//!
//! This crate is the **sans-IO core** of miniplane's controller-manager: plain synchronous
//! functions from a snapshot of cached objects (and an injected `now`) to a list of
//! [`Action`]s. Nothing here performs I/O or reads a clock, so every decision can be unit
//! tested and replayed step by step. The async shell (informers → workqueue → sync → API
//! writes, in the `client` crate's machinery) only moves data between the API server and
//! these functions.
//!
//! | module | Kubernetes |
//! | --- | --- |
//! | [`deployment`] | `pkg/controller/deployment/` (rolling update, recreate, rollback, progress) |
//! | [`replicaset`] | `pkg/controller/replicaset/replica_set.go` + `controller_utils.go` |
//! | [`expectations`] | `ControllerExpectations` / `UIDTrackingControllerExpectations` |
//! | [`controller_ref`] | `pkg/controller/controller_ref_manager.go` (adopt / release) |
//! | [`garbage_collector`] | `pkg/controller/garbagecollector/` (owner graph, propagation) |
//! | [`namespace`] | `pkg/controller/namespace/deletion/namespaced_resources_deleter.go` |
//! | [`selector`] | `metav1.LabelSelectorAsSelector`, `labels.Selector` |
//! | [`action`] | what the shell executes: writes, events, requeues |

pub mod action;
pub mod controller_ref;
pub mod deployment;
pub mod error;
pub mod expectations;
pub mod garbage_collector;
pub mod namespace;
pub mod owner_ref;
pub mod pod_readiness;
pub mod replicaset;
pub mod selector;

#[cfg(test)]
mod testing;

pub use action::{Action, Event, EventType, ObjectKey, ObjectRef, PatchType, PropagationPolicy};
pub use error::{Error, Result};
