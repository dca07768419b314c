//! miniplane's kube-apiserver: the Kubernetes REST API over the [`store`].
//!
//! Mirrors `staging/src/k8s.io/apiserver` (the generic registry in
//! `pkg/registry/generic/registry/store.go`, handlers in `pkg/endpoints/handlers/`, the watch
//! cache in `pkg/storage/cacher/`) and the per-kind strategies of
//! `pkg/registry/<group>/<resource>/strategy.go`.
//!
//! The modules, from the top down (a module imports only modules below it; the admin API's
//! `route` and `fault_table` parts sit below the state, which holds the fault table):
//!
//! ```text
//!   server (run, serve, bootstrap) ─▶ router (path → handler; the only importer of them all)
//!        ▼
//!   connect (pods/log|exec|attach|portforward, nodes/proxy ─▶ the node's kubelet)
//!   aggregator (APIServices: availability, discovery, the proxy to aggregated servers)
//!        ▼
//!   handlers::dispatch ─▶ subresource::{status,scale,binding,eviction,finalize}
//!        ▼                    ▼
//!   handlers::{get,list,watch,create,update,patch,delete}   admin, collector, discovery,
//!        ▼                                                   openapi, healthz, ui
//!   auth (authenticate, impersonate, authorize, reviews, the bootstrap policy's writes;
//!        ▼  its options and RBAC cache sit below the state, which holds them)
//!   state (AppState, ServerOptions)   response (json_response)   apiextensions (CRDs)
//!        ▼
//!   rest (before_create/before_update) ─▶ registry (rows: resource → strategy)
//!        ▼
//!   admission (which plugins run; the ServiceAccount plugin's lookup and pod mutation)
//!        ▼
//!   storage (keys, JSON, CAS txns) ── cacher (watch cache, fan-out) ── store::Backend
//!        ▼
//!   decoded_objects, stored_json, strategy, patch, request, error, meta, wire
//! ```
//!
//! Tracing: `request_trace` records a span per write (continuing the caller's `traceparent`
//! or starting a trace) and stamps the trace context on the written object; `collector`
//! keeps the recent spans of every component for `miniplane trace`; `span_sink`
//! ([`SpanSink`], from [`Server::spans`]) lets the store's etcd endpoint record its own spans
//! there. The web UI (`ui`) is
//! served at `/ui` from files compiled into the binary.
//!
//! About the control plane itself: [`kubernetes_service`] (public, for tests that drive its
//! reconciling step by step) keeps the `default/kubernetes` Service
//! while serving (with several API servers, the one up longest by their [`identity_lease`]s),
//! and `handlers::component_status` answers `componentstatuses` by probing the scheduler,
//! the controller-manager and the store.
//!
//! Every module is private; the public surface is what the rest of the workspace uses:
//!
//! - serving: [`run`] (bind + serve, for `miniplane apiserver`), [`Server`] and [`Config`],
//!   [`serve`] / [`serve_with`] (on a bound listener with any [`store::Backend`]), and
//!   [`router`] over an [`AppState`] (no socket, for tests); the tunables [`ServerOptions`],
//!   [`TracingOptions`], [`ConnectionLimits`] (HTTPS with its `tls`), [`AccessOptions`],
//!   [`AuthOptions`] ([`AuthorizationMode`], [`TokenFile`]), [`AdmissionOptions`] (the
//!   admission plugins in force), [`ComponentProbes`] (where
//!   `componentstatuses` finds the scheduler and the controller-manager) and their defaults;
//! - [`PeerCertificates`], a TLS client's chain as the authenticator reads it (the cluster's
//!   PKI, its CA and the TLS configuration, is the `apimachinery` crate's `pki`);
//! - resources: [`Registry`], [`ResourceInfo`], [`Subresource`], [`GroupVersionKind`] and the
//!   [`Strategy`] a row carries ([`FieldError`], [`TableColumn`]), for tests that serve a
//!   resource of their own;
//! - what the CLI shares with the server's tables: [`EventView`] (Kubernetes' small building
//!   blocks, such as ages, QoS, quantities and name syntax, are the `apimachinery` crate's);
//! - the request's edges, for the fuzz and limit tests: the body decoders
//!   ([`from_json_strict`], [`decode_json`], [`decode_yaml`]), the patch engines
//!   ([`json_patch()`], [`json_merge_patch`], [`strategic_merge_patch`], [`server_side_apply`]),
//!   the field selector ([`FieldSelector`]; label selectors are `apimachinery`'s) and the head limits
//!   ([`MAX_HEAD_BYTES`], [`MAX_URI_BYTES`], [`LongTarget`]).

mod access;
mod admin;
mod admission;
mod aggregator;
mod apiextensions;
mod auth;
mod cacher;
mod collector;
mod component_probes;
mod connect;
mod connections;
mod decoded_objects;
mod deep;
mod discovery;
mod error;
mod gvk;
mod handlers;
mod healthz;
pub mod identity_lease;
mod ids;
mod json_strict;
mod key_layout;
pub mod kubernetes_service;
mod meta;
mod metrics;
mod openapi;
mod patch;
mod prefix_follower;
mod protobuf;
mod registry;
mod request;
mod request_heads;
mod request_trace;
mod response;
mod rest;
mod router;
mod selector;
mod server;
mod service_alloc;
pub mod snapshot;
mod span_sink;
mod state;
mod storage;
mod stored_json;
mod strategy;
mod subresource;
mod table;
mod ui;
mod wire;

pub use access::AccessOptions;
pub use admission::AdmissionOptions;
pub use auth::serviceaccount::{DEFAULT_ISSUER as DEFAULT_SERVICE_ACCOUNT_ISSUER, TokenIssuer};
pub use auth::token_file::{TokenFile, TokenFileError};
pub use auth::{AuthOptions, AuthorizationMode};
pub use collector::{DEFAULT_MAX_SPANS, DEFAULT_MAX_SPANS_PER_TRACE};
pub use component_probes::ComponentProbes;
pub use connect::tls::KubeletClientTls;
pub use connections::{ConnectionLimits, PeerCertificates, raise_nofile_limit};
pub use error::{ApiError, Result};
pub use gvk::GroupVersionKind;
pub use json_strict::from_slice as from_json_strict;
pub use patch::{
    PatchError, json_merge_patch, json_patch, server_side_apply, strategic_merge_patch,
};
pub use registry::{Registry, ResourceInfo, Subresource};
pub use request::{LongTarget, decode_json, decode_yaml};
pub use request_heads::{MAX_HEAD_BYTES, MAX_URI_BYTES, TOO_LARGE_RESPONSE};
pub use request_trace::TracingOptions;
pub use router::router;
pub use selector::field::{FieldRequirement, FieldSelector};
pub use server::{
    Config, DEFAULT_ETCD_PREFIX, DEFAULT_STORE_HISTORY_BUDGET, DEFAULT_STORE_HISTORY_WINDOW,
    EtcdStorage, EtcdTlsFiles, HistoryRetention, ServeError, Server, run, serve, serve_with,
};
pub use span_sink::SpanSink;
pub use state::{AppState, ServerOptions};
pub use strategy::event::EventView;
pub use strategy::{FieldError, FieldErrorKind, Strategy, TableColumn};
