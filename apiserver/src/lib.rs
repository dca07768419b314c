//! miniplane's kube-apiserver: the Kubernetes REST API over the [`store`].
//!
//! Mirrors `staging/src/k8s.io/apiserver` (the generic registry in
//! `pkg/registry/generic/registry/store.go`, handlers in `pkg/endpoints/handlers/`) and the
//! per-kind strategies of `pkg/registry/<group>/<resource>/strategy.go`.
//!
//! ```text
//!   HTTP ─▶ server (router, negotiation) ─▶ handlers::{get,list,watch,create,update,patch,delete}
//!                                            │           subresource::{status,scale,binding,eviction}
//!                                            ▼
//!             registry (rows: resource → strategy)  rest (before_create/before_update)
//!                                            ▼
//!                       storage (keys, JSON, CAS txns) ── watch_cache (fan-out) ── store::Backend
//! ```
//!
//! Tracing: [`request_trace`] records a span per write (continuing the caller's
//! `traceparent` or starting a trace) and stamps the trace context on the written object;
//! [`collector`] keeps the recent spans of every component for `miniplane trace`.
//!
//! The web UI ([`ui`]) is served at `/ui` from files compiled into the binary.
//!
//! About the control plane itself: [`kubernetes_service`] keeps the `default/kubernetes`
//! Service while serving, and [`component_status`] answers `componentstatuses` by probing the
//! scheduler, the controller-manager and the store.
//!
//! Entry points: [`run`] (bind + serve, for `miniplane apiserver`), [`serve`] (on a bound
//! listener with any [`store::Backend`]), and [`router`] (no socket, for tests).

pub mod access;
pub mod admin;
pub mod apiextensions;
pub mod collector;
pub mod component_status;
pub mod connections;
pub mod deep;
pub mod discovery;
pub mod error;
pub mod gvk;
pub mod handlers;
pub mod handoff;
pub mod healthz;
pub mod json_strict;
pub mod kubernetes_service;
pub mod meta;
pub mod metrics;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod request;
pub mod request_heads;
pub mod request_trace;
pub mod rest;
pub mod selector;
pub mod server;
pub mod storage;
pub mod stored_json;
pub mod strategy;
pub mod subresource;
pub mod table;
pub mod ui;
pub mod watch_cache;
pub mod wire;

pub use component_status::ComponentProbes;
pub use error::{ApiError, Result};
pub use registry::{Registry, ResourceInfo};
pub use server::{
    AppState, Config, DEFAULT_STORE_HISTORY_BUDGET, ServeError, Server, ServerOptions, router, run,
    serve, serve_with,
};
