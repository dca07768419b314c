//! [`SpanSink`]: a handle that records spans into the API server's own trace collector
//! (`crate::collector`) from outside a request, for a second front end over the same store
//! that reports its own requests: the etcd v3 endpoint of `miniplane apiserver --etcd-listen`
//! records one span of the component `etcd` per gRPC request.
//!
//! Kubernetes has no counterpart: kube-apiserver and etcd each export their spans over OTLP
//! to an OpenTelemetry Collector (`--tracing-config-file`, etcd's
//! `--experimental-enable-distributed-tracing`), which puts them side by side. miniplane's
//! collector lives in the API server, so the endpoint hands its spans over in process.
//!
//! The handle exists as soon as the server is bound ([`crate::Server::spans`]), before the
//! collector does; spans recorded before the server starts serving are dropped. With tracing
//! off (`--tracing=false`) the collector keeps nothing, and neither does the handle.

use std::sync::{Arc, OnceLock};

use trace::Span;

use crate::state::AppState;

/// Records spans into a running API server's collector; cheap to clone.
#[derive(Clone, Default)]
pub struct SpanSink(Arc<OnceLock<AppState>>);

impl std::fmt::Debug for SpanSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanSink")
            .field("serving", &self.0.get().is_some())
            .finish()
    }
}

impl SpanSink {
    /// Keeps `span` in the collector (as a component's `POST /miniplane/v1/traces` would);
    /// dropped while the server is not yet serving.
    pub fn record(&self, span: Span) {
        if let Some(state) = self.0.get() {
            state.collector().record(span);
        }
    }

    /// Connects the handle to the serving state (once; later calls change nothing).
    pub(crate) fn attach(&self, state: &AppState) {
        let _ = self.0.set(state.clone());
    }
}
