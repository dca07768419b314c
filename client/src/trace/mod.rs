//! Trace propagation: how a component continues the trace of the write it reacts to, and
//! reports its spans to the API server's collector.
//!
//! client-go has no counterpart: Kubernetes traces a request inside kube-apiserver (and the
//! kubelet's CRI calls) but nothing carries a trace from a watched object to the work it
//! causes. miniplane does, in four hand-offs, each in its own file:
//!
//! ```text
//!  object annotation            informer handler          work queue           worker / sync
//!  miniplane.dev/traceparent ─▶ propagation::caused_by ─▶ Queue::add takes ─▶ Tracer::begin_work
//!  (written by the API server)  (span "watch event",      the Cause (merged    (spans "queue wait"
//!                               only if someone reacted)  keys keep them all)  and "sync …")
//!                                                                                   │ writes
//!                                                                                   ▼
//!  the API server continues the trace ◀── traceparent header ◀── http::sync_client (span per request)
//! ```
//!
//! | file | what |
//! | --- | --- |
//! | [`propagation`] | [`Cause`], the hand-off from a handler to a queue, the scope of one sync |
//! | [`http`] | a kube `Client` that sends `traceparent` and records a span per request |
//! | [`exporter`] | batches spans and `POST`s them to `/miniplane/v1/traces`; drops (and counts) rather than blocks |
//!
//! **Sampling.** A trace context carries the W3C `sampled` flag. The API server clears it on
//! the writes of a trace that has used up its span budget (`--trace-max-spans-per-trace`) and
//! on every write that continues a context without it. A component that continues an
//! unsampled context records no span, as OpenTelemetry's parent-based sampler does, but still
//! carries the context through its informers, queues and syncs and sends it as
//! `traceparent`, so that what follows stays in the same (unrecorded) trace instead of each
//! write starting a trace of its own.
//!
//! Tracing is switchable per component ([`crate::ClientConfig::tracing`], `--tracing=false`):
//! a disabled [`Tracer`] records nothing, and with it no informer sets a cause, no queue keeps
//! one and no scope is entered, so the hot paths only test an `Option`.

pub mod exporter;
pub mod http;
pub mod propagation;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;

pub use self::exporter::{DEFAULT_BUFFER, Exporter};
pub use self::http::sync_client;
pub use self::propagation::{
    Cause, Work, caused_by, current_context, mark, recording, set_attribute, set_summary,
    take_cause, under,
};
pub use trace::{AttributeValue, Span, SpanContext, SpanKind, TRACEPARENT_ANNOTATION, attr};

/// A component's handle for recording spans (cheap to clone). [`Tracer::disabled`] records
/// nothing.
#[derive(Clone, Default)]
pub struct Tracer {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    /// `kube-controller-manager`, `kube-scheduler`, `kubelet`.
    component: String,
    spans: mpsc::Sender<Span>,
    /// Spans lost because the exporter's buffer was full or a post failed.
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for Tracer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            Some(inner) => write!(f, "Tracer({})", inner.component),
            None => f.write_str("Tracer(disabled)"),
        }
    }
}

impl Tracer {
    /// A tracer that records nothing.
    pub fn disabled() -> Self {
        Tracer { inner: None }
    }

    /// A tracer for `component` and the exporter that sends its spans through `client`
    /// (run it with [`Exporter::run`]); `buffer` spans wait at most, further ones are dropped.
    pub fn new(component: &str, client: kube::Client, buffer: usize) -> (Tracer, Exporter) {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let tracer = Tracer {
            inner: Some(Arc::new(Inner {
                component: component.to_owned(),
                spans: tx,
                dropped: dropped.clone(),
            })),
        };
        (tracer, Exporter::new(client, rx, dropped))
    }

    /// Whether spans are recorded.
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The component its spans name (empty when disabled).
    pub fn component(&self) -> &str {
        self.inner.as_ref().map_or("", |i| i.component.as_str())
    }

    /// Hands a finished span to the exporter; never waits: when the buffer is full the span
    /// is dropped and counted.
    pub fn record(&self, span: Span) {
        if let Some(inner) = &self.inner
            && inner.spans.try_send(span).is_err()
        {
            let before = inner.dropped.fetch_add(1, Ordering::Relaxed);
            if before.is_power_of_two() {
                tracing::warn!(
                    dropped = before + 1,
                    "trace exporter buffer full: dropping spans"
                );
            }
        }
    }

    /// Spans dropped so far.
    pub fn dropped(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.dropped.load(Ordering::Relaxed))
    }

    /// A new span of this component continuing `parent` (`None` when disabled, or when
    /// `parent` is not sampled: see [the module docs](self)).
    pub fn child(&self, parent: &SpanContext, name: &str, kind: SpanKind) -> Option<Span> {
        self.span(parent.child(), parent, name, kind)
    }

    /// The span `context` (made earlier with [`SpanContext::child`] of `parent`, so that it
    /// could be handed on before it was known whether the span is worth recording); `None`
    /// when disabled or when `parent` is not sampled.
    pub fn span(
        &self,
        context: SpanContext,
        parent: &SpanContext,
        name: &str,
        kind: SpanKind,
    ) -> Option<Span> {
        let inner = self.inner.as_ref()?;
        if !parent.sampled {
            return None;
        }
        Some(Span::start(
            context,
            Some(parent.span_id),
            name,
            kind,
            inner.component.as_str(),
        ))
    }

    /// A span of this component starting a new trace (`None` when disabled).
    pub fn root(&self, name: &str, kind: SpanKind) -> Option<Span> {
        let inner = self.inner.as_ref()?;
        Some(Span::start(
            SpanContext::new_root(),
            None,
            name,
            kind,
            inner.component.as_str(),
        ))
    }
}

/// The tracer of `component` as `config` asks (disabled when `config.tracing` is off), and
/// its exporter, which posts through a client of its own without the component's rate limit.
/// Spawn [`Exporter::run`] on the component's task tracker.
pub async fn start(
    config: &crate::ClientConfig,
    component: &str,
) -> crate::Result<(Tracer, Option<Exporter>)> {
    if !config.tracing {
        return Ok((Tracer::disabled(), None));
    }
    let export_config = crate::ClientConfig {
        rate_limit: None,
        ..config.clone()
    };
    let client = crate::build_client(&export_config).await?;
    let (tracer, exporter) = Tracer::new(component, client, DEFAULT_BUFFER);
    Ok((tracer, Some(exporter)))
}

/// The trace context an object's annotation names (the write that last changed it).
pub fn object_context(meta: &kube::api::ObjectMeta) -> Option<SpanContext> {
    meta.annotations
        .as_ref()?
        .get(TRACEPARENT_ANNOTATION)
        .and_then(|v| SpanContext::parse(v).ok())
}

/// Whether two objects' annotations are the same but for the trace annotation, which every
/// traced write changes: a controller that acts on annotation changes (as Kubernetes' service
/// controller does) compares them with this, or each write would look like a change.
pub fn same_annotations_but_trace(
    old: &kube::api::ObjectMeta,
    new: &kube::api::ObjectMeta,
) -> bool {
    let rest = |m: &kube::api::ObjectMeta| {
        m.annotations
            .iter()
            .flatten()
            .filter(|(k, _)| *k != TRACEPARENT_ANNOTATION)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    rest(old) == rest(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_buffer_drops_and_counts_instead_of_waiting() {
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:1".parse().expect("a URL"),
        ))
        .expect("a client");
        let (tracer, mut exporter) = Tracer::new("test", client, 2);
        for _ in 0..5 {
            let span = tracer.root("x", SpanKind::Internal).expect("enabled");
            tracer.record(span);
        }
        assert_eq!(tracer.dropped(), 3);
        assert_eq!(exporter.try_drain().len(), 2);
        let disabled = Tracer::disabled();
        assert!(disabled.root("x", SpanKind::Internal).is_none());
        assert_eq!(disabled.dropped(), 0);
    }

    #[test]
    fn an_objects_annotation_names_its_trace() {
        let ctx = SpanContext::new_root();
        let meta = kube::api::ObjectMeta {
            annotations: Some([(TRACEPARENT_ANNOTATION.to_owned(), ctx.traceparent())].into()),
            ..Default::default()
        };
        assert_eq!(object_context(&meta), Some(ctx));
        assert_eq!(object_context(&kube::api::ObjectMeta::default()), None);
    }

    #[test]
    fn annotations_compare_without_the_trace() {
        let meta = |pairs: &[(&str, &str)]| kube::api::ObjectMeta {
            annotations: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        };
        let a = meta(&[("x", "1"), (TRACEPARENT_ANNOTATION, "00-a")]);
        let b = meta(&[("x", "1"), (TRACEPARENT_ANNOTATION, "00-b")]);
        assert!(same_annotations_but_trace(&a, &b));
        assert!(same_annotations_but_trace(
            &meta(&[]),
            &kube::api::ObjectMeta::default()
        ));
        assert!(!same_annotations_but_trace(&a, &meta(&[("x", "2")])));
    }
}
