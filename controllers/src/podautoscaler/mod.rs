//! The horizontal pod autoscaler (`pkg/controller/podautoscaler/`): from a
//! HorizontalPodAutoscaler, its target's `/scale`, the target's pods and their metrics, the
//! replica count to write, the status and the Events.
//!
//! Files: [`controller`] (the informers, queue and API calls of `horizontal.go`),
//! [`reconcile`] (`reconcileAutoscaler`, `computeReplicasForMetrics`, conditions),
//! [`replica_calculator`] (`replica_calculator.go`), [`behavior`] (stabilization and scale
//! rates), [`metrics`] (the [`metrics::MetricsSource`] trait and the `metrics.k8s.io` client
//! [`metrics::KubeMetricsSource`]) and [`metric_errors`] (what metrics without an API say).
//!
//! ```text
//!   /scale spec.replicas = 0, minReplicas > 0 ─▶ ScalingActive False ScalingDisabled, no write
//!   current > max / current < min             ─▶ max / min ("Current number of replicas ...")
//!   else per metric: replica_calculator ─▶ the highest count; behavior::normalize* ─▶ desired
//!        desired = ceil(ready pods × usage / target), within a 10% tolerance: current
//!   desired ≠ current ─▶ write /scale, SuccessfulRescale "New size: N; reason: ..."
//! ```
//!
//! Only `Resource` and `ContainerResource` metrics are computed (from the resource metrics
//! API); `Pods`, `Object` and `External` metrics fail as they do on a cluster without a
//! custom or external metrics adapter.

pub mod behavior;
pub mod controller;
pub mod metric_errors;
pub mod metrics;
pub mod reconcile;
pub mod replica_calculator;

pub use reconcile::{Decision, HpaEvent, Observed, reconcile};
