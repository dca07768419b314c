//! A kube `Client` whose requests continue a trace: each one gets a `traceparent` header and a
//! client span (`PUT deployments/status`, with the code the server answered).
//!
//! Like OpenTelemetry's `otelhttp.Transport`, which client-go can be given through
//! `rest.Config.Wrap`. A component builds one such client around its own, once; each request
//! looks up the trace it belongs to when it is sent. kube-rs sends every request through a
//! `tower::Buffer` whose worker task calls the inner service, but the worker hands the
//! service's future back to the caller, which polls it in its own task: so the future can read
//! the caller's task-local scope (the traced sync, or an [`super::under`] block).
//!
//! ```text
//!   sync_client(&tracer, &client)  (once)  ─▶ kube::Client(TracedSend)
//!   request polled in a traced sync ─▶ span "PUT deployments/status", traceparent: 00-T-C-01
//!                                   ─▶ client.send(request)  (shared connections, rate limiter)
//!   request polled outside one      ─▶ client.send(request) as it is
//! ```
//!
//! (It used to build a client per sync: `kube::Client::new` starts a `tower::Buffer` worker
//! task each time, which cost the kubelet and the scheduler one task and one channel per pod.)

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use kube::client::Body;
use trace::{Span, SpanKind, TRACEPARENT_HEADER, attr};

use super::Tracer;
use super::propagation::with_scope;

/// A client whose requests continue the trace of the sync (or [`super::under`] block) whose
/// task sends them, and go out untraced outside one. Build it once, around the component's
/// client; with a disabled tracer it is `base` itself.
pub fn sync_client(tracer: &Tracer, base: &kube::Client) -> kube::Client {
    if !tracer.is_enabled() {
        return base.clone();
    }
    let service = TracedSend { base: base.clone() };
    kube::Client::new(service, base.default_namespace().to_owned())
}

/// What a request path names: `(verb, resource[/subresource], namespace, name)`.
pub fn describe(
    method: &http::Method,
    path: &str,
) -> (String, String, Option<String>, Option<String>) {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let rest: &[&str] = match segs.as_slice() {
        ["api", _, rest @ ..] => rest,
        ["apis", _, _, rest @ ..] => rest,
        _ => &[],
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, more @ ..]
            if !more.is_empty() && !matches!(more[0], "status" | "finalize") =>
        {
            (Some((*ns).to_owned()), more)
        }
        other => (None, other),
    };
    let resource = rest.first().copied().unwrap_or("");
    let name = rest.get(1).map(|s| (*s).to_owned());
    let resource = match rest.get(2) {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_owned(),
    };
    let verb = trace::request_verb(method.as_str(), name.is_some(), false);
    (verb.to_owned(), resource, namespace, name)
}

/// The service inside a traced client: adds the header, sends through the shared client,
/// records the span.
#[derive(Clone)]
struct TracedSend {
    base: kube::Client,
}

type SendFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

impl tower::Service<Request<Body>> for TracedSend {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = SendFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> SendFuture {
        let base = self.base.clone();
        // `call` runs on the Buffer's worker task; the future runs in the caller's, where its
        // scope is: look the trace up there.
        Box::pin(async move {
            let Some((tracer, parent)) = with_scope(|s| (s.tracer.clone(), s.context)) else {
                return base.send(request).await;
            };
            if !parent.sampled {
                // Not recorded, but the API server must know the write continues this trace.
                if let Ok(value) = parent.traceparent().parse() {
                    request.headers_mut().insert(TRACEPARENT_HEADER, value);
                }
                return base.send(request).await;
            }
            let method = request.method().clone();
            let path = request.uri().path().to_owned();
            let (verb, resource, namespace, name) = describe(&method, &path);
            let span = tracer.child(&parent, &format!("{method} {resource}"), SpanKind::Client);
            if let Some(span) = &span
                && let Ok(value) = span.context().traceparent().parse()
            {
                request.headers_mut().insert(TRACEPARENT_HEADER, value);
            }
            let response = base.send(request).await;
            if let Some(mut span) = span {
                finish(
                    &mut span, &verb, &resource, namespace, name, &path, &response,
                );
                tracer.record(span);
            }
            response
        })
    }
}

fn finish(
    span: &mut Span,
    verb: &str,
    resource: &str,
    namespace: Option<String>,
    name: Option<String>,
    path: &str,
    response: &Result<Response<Body>, kube::Error>,
) {
    span.set(attr::VERB, verb)
        .set(attr::RESOURCE, resource)
        .set("path", path);
    let object = trace::object_label(namespace.as_deref(), name.as_deref());
    span.summary = match response {
        Ok(r) => {
            span.set(attr::CODE, r.status().as_u16());
            format!("{verb} {object} → {}", r.status().as_u16())
        }
        Err(e) => {
            span.set(attr::ERROR, e.to_string());
            format!("{verb} {object} failed: {e}")
        }
    };
    span.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use trace::SpanContext;

    /// A kube client over a fake server that answers 200 `{}` and keeps each request's
    /// traceparent header (`None` when it had none).
    fn recording_client() -> (kube::Client, Arc<Mutex<Vec<Option<String>>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let header = request
                .headers()
                .get(TRACEPARENT_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            log.lock().expect("not poisoned").push(header);
            async move {
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(200)
                        .body(Body::from(b"{}".to_vec()))
                        .expect("a response"),
                )
            }
        });
        (kube::Client::new(service, "default"), seen)
    }

    fn get(path: &str) -> Request<Vec<u8>> {
        Request::get(path).body(Vec::new()).expect("a request")
    }

    #[tokio::test]
    async fn one_client_continues_the_trace_of_whichever_scope_sends_and_none_outside() {
        let (base, log) = recording_client();
        let (tracer, mut exporter) = Tracer::new("test", base.clone(), 16);
        let client = sync_client(&tracer, &base);
        let (a, b) = (SpanContext::new_root(), SpanContext::new_root());

        client
            .request_text(get("/api/v1/nodes"))
            .await
            .expect("sent");
        let (ra, rb) = tokio::join!(
            super::super::under(
                &tracer,
                a,
                client.request_text(get("/api/v1/namespaces/x/pods/p"))
            ),
            super::super::under(&tracer, b, client.request_text(get("/api/v1/nodes/n"))),
        );
        ra.expect("sent");
        rb.expect("sent");

        let seen = log.lock().expect("not poisoned").clone();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0], None, "outside a scope: sent as it is");
        let spans = exporter.try_drain();
        assert_eq!(spans.len(), 2, "one client span per traced request");
        // The two scoped requests may reach the server in either order.
        let sent: Vec<SpanContext> = seen[1..]
            .iter()
            .map(|h| {
                let header = h.as_deref().expect("a traceparent inside a scope");
                SpanContext::parse(header).expect("a valid traceparent")
            })
            .collect();
        for parent in [a, b] {
            let mut matching = sent.iter().filter(|c| c.trace_id == parent.trace_id);
            let sent = matching
                .next()
                .expect("a request continued this scope's trace");
            assert!(matching.next().is_none(), "and only one");
            let span = spans
                .iter()
                .find(|s| s.span_id == sent.span_id)
                .expect("the header names the request's span");
            assert_eq!(span.trace_id, parent.trace_id);
            assert_eq!(span.parent_span_id, Some(parent.span_id));
            assert_eq!(span.attribute(attr::CODE).as_deref(), Some("200"));
        }

        // With a disabled tracer the client is the base itself: nothing is added.
        let plain = sync_client(&Tracer::disabled(), &base);
        super::super::under(
            &Tracer::disabled(),
            a,
            plain.request_text(get("/api/v1/nodes")),
        )
        .await
        .expect("sent");
        let seen = log.lock().expect("not poisoned").clone();
        assert_eq!(seen.len(), 4);
        assert_eq!(seen[3], None, "a disabled tracer adds no traceparent");
        assert_eq!(exporter.try_drain().len(), 0);
    }

    #[tokio::test]
    async fn an_unsampled_scope_sends_its_context_and_records_no_span() {
        let (base, log) = recording_client();
        let (tracer, mut exporter) = Tracer::new("test", base.clone(), 16);
        let client = sync_client(&tracer, &base);
        let unsampled = SpanContext {
            sampled: false,
            ..SpanContext::new_root()
        };
        super::super::under(
            &tracer,
            unsampled,
            client.request_text(get("/api/v1/nodes")),
        )
        .await
        .expect("sent");
        let seen = log.lock().expect("not poisoned").clone();
        assert_eq!(
            seen,
            [Some(unsampled.traceparent())],
            "the trace goes on, flagged not sampled"
        );
        assert!(unsampled.traceparent().ends_with("-00"));
        assert_eq!(exporter.try_drain().len(), 0, "no client span");
    }

    #[test]
    fn paths_name_verb_resource_and_object() {
        let d = |m: &str, p: &str| describe(&m.parse().unwrap(), p);
        assert_eq!(
            d(
                "PUT",
                "/apis/apps/v1/namespaces/default/deployments/web/status"
            ),
            (
                "update".into(),
                "deployments/status".into(),
                Some("default".into()),
                Some("web".into())
            )
        );
        assert_eq!(
            d("POST", "/api/v1/namespaces/default/pods"),
            ("create".into(), "pods".into(), Some("default".into()), None)
        );
        assert_eq!(
            d("PUT", "/api/v1/namespaces/gone/finalize"),
            (
                "update".into(),
                "namespaces/finalize".into(),
                None,
                Some("gone".into())
            )
        );
        assert_eq!(
            d("GET", "/api/v1/nodes/node-1"),
            ("get".into(), "nodes".into(), None, Some("node-1".into()))
        );
    }
}
