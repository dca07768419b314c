//! InterPodAffinity: places a pod near, or away from, pods with given labels, in the same
//! topology domain (`pkg/scheduler/framework/plugins/interpodaffinity/`: `plugin.go` here,
//! `filtering.go` in [`filtering`], `scoring.go` in [`scoring`]; terms parsed in
//! [`crate::affinity_term`]).
//!
//! ```text
//! pod web-2: podAntiAffinity.required [{topologyKey: kubernetes.io/hostname,
//!                                       labelSelector: {app: web}}]
//!   node-1 runs web-1 (app=web) → pair (hostname, node-1) has 1 matching pod
//!   node-1: "node(s) didn't match pod anti-affinity rules"     node-2: fits
//! pod cache: podAffinity.required [{topologyKey: zone, labelSelector: {app: web}}]
//!   only nodes in a zone where some app=web pod runs fit
//!   ("node(s) didn't match pod affinity rules"), unless no pod matches at all and the
//!   pod matches its own terms: then the first pod of such a group goes anywhere
//! ```
//!
//! The check is symmetric: a node in a domain where an existing pod's required anti-affinity
//! matches the incoming pod is ruled out too ("node(s) didn't satisfy existing pods
//! anti-affinity rules"). Preferred terms, of the pod and of the existing pods (the existing
//! pods' required affinity counts with `hardPodAffinityWeight` 1), score.

pub mod filtering;
pub mod scoring;

pub use filtering::{PreFilterState, filter, pre_filter};
pub use scoring::{PreScoreState, normalize, pre_score, score};

/// The plugin name.
pub const NAME: &str = "InterPodAffinity";

#[cfg(test)]
mod tests;
