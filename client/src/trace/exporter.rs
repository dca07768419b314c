//! The span exporter: batches a component's finished spans and `POST`s them to the API
//! server's collector (`/miniplane/v1/traces`).
//!
//! OpenTelemetry's `BatchSpanProcessor` (`sdk/trace/batch_span_processor.go`) in miniature:
//!
//! ```text
//!   Tracer::record ──try_send──▶ [bounded buffer] ──▶ run(): take one, linger 50 ms or
//!        │ full: drop, count                                   until 512, POST the batch
//!        ▼                                                     (failed: drop, count)
//!   Tracer::dropped()                         shutdown ─▶ post what is left, once
//! ```
//!
//! Recording never waits and never fails: a component must not slow down or break because
//! its traces cannot be delivered. Lost spans show up as orphans in the tree (their children
//! lose their parent) and in the dropped count the component logs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use trace::{COLLECTOR_PATH, Span, SpanBatch};

/// Spans a component's buffer holds by default before it drops new ones.
pub const DEFAULT_BUFFER: usize = 10_000;
/// Spans per `POST`.
const MAX_BATCH: usize = 512;
/// How long the exporter waits for more spans before it posts a batch.
const LINGER: Duration = Duration::from_millis(50);
/// How long the last flush at shutdown may take.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends the spans of one component (see the module docs).
pub struct Exporter {
    client: kube::Client,
    rx: mpsc::Receiver<Span>,
    dropped: Arc<AtomicU64>,
}

impl Exporter {
    pub(crate) fn new(
        client: kube::Client,
        rx: mpsc::Receiver<Span>,
        dropped: Arc<AtomicU64>,
    ) -> Self {
        Exporter {
            client,
            rx,
            dropped,
        }
    }

    /// Posts batches until `shutdown` fires (or every tracer is gone), then posts what is left.
    pub async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let first = tokio::select! {
                () = shutdown.cancelled() => break,
                span = self.rx.recv() => match span {
                    Some(span) => span,
                    None => break,
                },
            };
            let mut batch = vec![first];
            let deadline = Instant::now() + LINGER;
            while batch.len() < MAX_BATCH {
                tokio::select! {
                    biased;
                    span = self.rx.recv() => match span {
                        Some(span) => batch.push(span),
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                    () = shutdown.cancelled() => break,
                }
            }
            self.post(batch).await;
        }
        let rest = self.try_drain();
        let flush = async {
            for chunk in rest.chunks(MAX_BATCH) {
                self.post(chunk.to_vec()).await;
            }
        };
        if tokio::time::timeout(FLUSH_TIMEOUT, flush).await.is_err() {
            tracing::warn!("trace exporter: the last spans could not be sent in time");
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "trace exporter stopped; spans were dropped");
        }
    }

    /// Takes every span waiting in the buffer (tests, and the last flush).
    pub fn try_drain(&mut self) -> Vec<Span> {
        let mut spans = Vec::new();
        while let Ok(span) = self.rx.try_recv() {
            spans.push(span);
        }
        spans
    }

    async fn post(&self, spans: Vec<Span>) {
        let n = spans.len() as u64;
        let body = match serde_json::to_vec(&SpanBatch { spans }) {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!(error = %e, "trace exporter: cannot encode spans");
                self.dropped.fetch_add(n, Ordering::Relaxed);
                return;
            }
        };
        let request = http::Request::post(COLLECTOR_PATH)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body);
        let result = match request {
            Ok(request) => self.client.request_text(request).await.map(|_| ()),
            Err(e) => Err(kube::Error::HttpError(e)),
        };
        if let Err(e) = result {
            let before = self.dropped.fetch_add(n, Ordering::Relaxed);
            if before == 0 || (before + n).ilog2() != before.ilog2() {
                tracing::warn!(error = %e, dropped = before + n, "trace exporter: posting spans failed");
            }
        }
    }
}
