//! Acting as another user: a kube `Client` whose requests carry `Impersonate-User` and
//! `Impersonate-Group` headers when they are sent inside an [`acting_as`] block.
//!
//! client-go's `rest.ImpersonationConfig` (`transport/round_trippers.go`,
//! `NewImpersonatingRoundTripper`) sets one identity per client. One process that simulates
//! thousands of kubelets needs one identity per node over shared connections, so the identity
//! is looked up when a request is sent, from the caller's task (the same way
//! [`crate::trace::sync_client`] finds the trace a request belongs to: kube-rs' `Buffer`
//! worker hands the service's future back to the caller, which polls it in its own task).
//!
//! ```text
//!   impersonating_client(&client)  (once)  ─▶ kube::Client(ImpersonatingSend)
//!   request polled in acting_as(node-3)    ─▶ Impersonate-User: system:node:node-3
//!                                              Impersonate-Group: system:nodes
//!   request polled outside one             ─▶ sent as the client's own user
//! ```
//!
//! The API server authorizes each impersonated name with the `impersonate` verb
//! (`filters.WithImpersonation`), then the request as the impersonated user.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response};
use kube::client::Body;

/// The header naming the user a request acts as.
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// The header naming one group of that user (repeated for several).
pub const IMPERSONATE_GROUP: &str = "impersonate-group";

/// Who requests act as: a user name and its groups, ready to be sent as headers.
#[derive(Debug, Clone)]
pub struct Identity {
    user: HeaderValue,
    groups: Vec<HeaderValue>,
}

impl Identity {
    /// `user` in `groups`; `Err` names a value that cannot be an HTTP header.
    pub fn new(user: &str, groups: &[&str]) -> Result<Identity, String> {
        let value = |v: &str| HeaderValue::from_str(v).map_err(|e| format!("identity {v:?}: {e}"));
        Ok(Identity {
            user: value(user)?,
            groups: groups.iter().map(|g| value(g)).collect::<Result<_, _>>()?,
        })
    }
}

tokio::task_local! {
    static ACTING_AS: Arc<Identity>;
}

/// Runs `fut` with every request of an [`impersonating_client`] it sends acting as `who`.
pub async fn acting_as<F: Future>(who: Arc<Identity>, fut: F) -> F::Output {
    ACTING_AS.scope(who, fut).await
}

/// The identity requests of the current task act as, if any.
pub fn current() -> Option<Arc<Identity>> {
    ACTING_AS.try_with(Arc::clone).ok()
}

/// A client that sends each request as the identity of the [`acting_as`] block it is polled
/// in (and as `base`'s own user outside one), over `base`'s connections and rate limiter.
pub fn impersonating_client(base: &kube::Client) -> kube::Client {
    let service = ImpersonatingSend { base: base.clone() };
    kube::Client::new(service, base.default_namespace().to_owned())
}

/// The service inside an impersonating client: adds the headers, sends through `base`.
#[derive(Clone)]
struct ImpersonatingSend {
    base: kube::Client,
}

type SendFuture = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

impl tower::Service<Request<Body>> for ImpersonatingSend {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = SendFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), kube::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> SendFuture {
        let base = self.base.clone();
        // `call` runs on the Buffer's worker task; the future in the caller's, where the
        // identity is.
        Box::pin(async move {
            if let Some(who) = current() {
                let headers = request.headers_mut();
                headers.insert(IMPERSONATE_USER, who.user.clone());
                headers.remove(IMPERSONATE_GROUP);
                for group in &who.groups {
                    headers.append(IMPERSONATE_GROUP, group.clone());
                }
            }
            base.send(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose requests land in a channel instead of a server.
    fn recording_client() -> (
        kube::Client,
        tokio::sync::mpsc::UnboundedReceiver<http::HeaderMap>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let service = tower::service_fn(move |req: Request<Body>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(req.headers().clone());
                let body = Body::from(br#"{"kind":"Status","status":"Success"}"#.to_vec());
                Ok::<_, std::convert::Infallible>(Response::new(body))
            }
        });
        (kube::Client::new(service, "default"), rx)
    }

    async fn get(client: &kube::Client) {
        let req = Request::get("/api/v1/nodes/node-3")
            .body(Vec::new())
            .unwrap();
        client.request_text(req).await.unwrap();
    }

    #[tokio::test]
    async fn requests_act_as_the_identity_of_the_block_they_are_sent_in() {
        let (base, mut sent) = recording_client();
        let client = impersonating_client(&base);
        let node = Arc::new(Identity::new("system:node:node-3", &["system:nodes"]).unwrap());
        acting_as(node, get(&client)).await;
        let headers = sent.recv().await.unwrap();
        assert_eq!(headers[IMPERSONATE_USER], "system:node:node-3");
        let groups: Vec<_> = headers.get_all(IMPERSONATE_GROUP).iter().collect();
        assert_eq!(groups, ["system:nodes"]);

        // Outside a block: the client's own user.
        get(&client).await;
        let headers = sent.recv().await.unwrap();
        assert!(!headers.contains_key(IMPERSONATE_USER), "{headers:?}");
        assert!(current().is_none());
    }

    #[test]
    fn a_name_that_cannot_be_a_header_is_refused() {
        let err = Identity::new("node\n1", &[]).unwrap_err();
        assert!(err.contains("node\\n1"), "{err}");
    }
}
