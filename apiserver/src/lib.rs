//! miniplane's kube-apiserver: the Kubernetes REST API over the [`store`].
//!
//! Mirrors `staging/src/k8s.io/apiserver` (the generic registry in
//! `pkg/registry/generic/registry/store.go`, handlers in `pkg/endpoints/handlers/`) and the
//! per-kind strategies of `pkg/registry/<group>/<resource>/strategy.go`.

pub mod gvk;
pub mod openapi;
pub mod patch;
pub mod strategy;
