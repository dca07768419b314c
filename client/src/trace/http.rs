//! A kube `Client` whose requests continue a trace: each one gets a `traceparent` header and a
//! client span (`PUT deployments/status`, with the code the server answered).
//!
//! Like OpenTelemetry's `otelhttp.Transport`, which client-go can be given through
//! `rest.Config.Wrap`. kube-rs sends every request through a `tower::Buffer` whose worker task
//! calls the inner services, so a layer inside the client cannot see the caller's task;
//! instead a sync gets a client of its own, built on first use around the shared one:
//!
//! ```text
//!   scoped_client(&client) ── in a traced sync ──▶ kube::Client(TracedSend { parent: sync span })
//!                          └─ otherwise ─────────▶ client.clone()            │ traceparent: 00-T-C-01
//!                                                                            ▼
//!                                                        client.send(request)  (shared connections,
//!                                                                               rate limiter)
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use kube::client::Body;
use trace::{Span, SpanContext, SpanKind, TRACEPARENT_HEADER, attr};

use super::Tracer;
use super::propagation::with_scope;

/// A client whose requests continue `parent` (each request is a child span of it). With a
/// disabled tracer, `base` itself.
pub fn traced_client(tracer: &Tracer, base: &kube::Client, parent: SpanContext) -> kube::Client {
    if !tracer.is_enabled() {
        return base.clone();
    }
    let service = TracedSend {
        base: base.clone(),
        tracer: tracer.clone(),
        parent,
    };
    kube::Client::new(service, base.default_namespace().to_owned())
}

/// The client for requests made now: inside a traced sync, one that continues the sync's
/// trace (built once per sync); otherwise `base`.
pub fn scoped_client(base: &kube::Client) -> kube::Client {
    with_scope(|scope| {
        let mut state = scope.state();
        state
            .client
            .get_or_insert_with(|| traced_client(&scope.tracer, base, scope.context))
            .clone()
    })
    .unwrap_or_else(|| base.clone())
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
    tracer: Tracer,
    parent: SpanContext,
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
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let (verb, resource, namespace, name) = describe(&method, &path);
        let span = self.tracer.child(
            &self.parent,
            &format!("{method} {resource}"),
            SpanKind::Client,
        );
        if let Some(span) = &span
            && let Ok(value) = span.context().traceparent().parse()
        {
            request.headers_mut().insert(TRACEPARENT_HEADER, value);
        }
        let base = self.base.clone();
        let tracer = self.tracer.clone();
        Box::pin(async move {
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
