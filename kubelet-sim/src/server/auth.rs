//! Who may call the kubelet API: each request authenticated, then authorized against the
//! API server, as a kubeadm cluster's kubelet does it.
//!
//! Mirrors `pkg/kubelet/server/auth.go` (`GetRequestAttributes`: the verb from the HTTP
//! method, resource `nodes`, the node's name, a subresource from the path) and
//! `server.go` `InstallAuthFilter` (401 `Unauthorized`; 403 `Forbidden (user=..., verb=...,
//! resource=nodes, subresource(s)=[...])`; 500 `Authorization error (...)`), with what
//! `pkg/kubelet/apis/config` + `cmd/kubelet/app/auth.go` `BuildAuth` build from the
//! `KubeletConfiguration`: the delegating authenticator of
//! `staging/src/k8s.io/apiserver/pkg/authentication/authenticatorfactory/delegating.go` (an
//! x509 client certificate from `--client-ca-file`, else a bearer token checked with a
//! `TokenReview`, `--anonymous-auth` last; `system:authenticated` added to whoever is
//! authenticated) and the webhook authorizer of
//! `staging/src/k8s.io/apiserver/plugin/pkg/authorizer/webhook/webhook.go` (a
//! `SubjectAccessReview` per request, decisions cached).
//!
//! ```text
//!   request ─▶ client certificate verified with the client CA ─▶ CN user, O groups
//!           └▶ else Authorization: Bearer T ─▶ TokenReview (cached 2 min) ─▶ its user
//!           └▶ else system:anonymous if --anonymous-auth, else 401 "Unauthorized"
//!           ─▶ attributes: verb (GET/HEAD get, POST create, PUT update, PATCH patch,
//!              DELETE delete), nodes/<node>/<subresource> per path (subresources below)
//!           ─▶ SubjectAccessReview per subresource until one is allowed (allowed cached
//!              5 min, denied 30 s) ─▶ handler, or 403 with the kubelet's text
//! ```
//!
//! | path | subresources asked, in order (`KubeletFineGrainedAuthz`, beta and on in 1.33) |
//! | --- | --- |
//! | `/stats/*` | `stats` |
//! | `/metrics/*` | `metrics` |
//! | `/logs/*` | `log` |
//! | `/checkpoint/*` | `checkpoint` |
//! | `/pods`, `/healthz`, `/configz` (and below) | `pods`, `healthz`, `configz`, then `proxy` |
//! | anything else (`/containerLogs`, `/exec`, `/attach`, `/portForward`, `/run`, ...) | `proxy` |
//!
//! Simplifications: the node named in a review is the one the request's `Host` names (one
//! listener serves every simulated node; with a `Host` that names none, the only node of a
//! one-node simulator, else the `Host`'s name as given); a WebSocket upgrade (a `GET`) of
//! `/exec`, `/attach` or `/portForward` is authorized as `create`, as the `POST` of SPDY is,
//! and `HEAD` as `get` (Go's kubelet leaves both verbs to the method alone); the reviews are
//! sent as the simulator's own user ([`crate::USER`], whose bootstrap ClusterRole may create
//! them as `system:node` may), not as each node; the caches are unbounded maps swept of
//! expired entries, not Go's 1,024-entry LRUs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use rustls::pki_types::CertificateDer;

use super::{KubeletServer, restful_error};
use crate::config::{ServingAuth, ServingAuthorization};

/// The certificate chain a TLS client presented (its certificate first), in the extensions
/// of every request of its connection ([`super::tls`]); absent on plain HTTP and for a
/// client that sent none.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// Who a request comes from (`user.Info`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// Its UID, if the authenticator knows one.
    pub uid: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// Further attributes (a ServiceAccount token's pod, for example).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The attributes one authorization check is made with (`authorizer.AttributesRecord`;
/// resource `nodes`, API version `v1`, a resource request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// The API verb.
    pub verb: &'static str,
    /// The node's name.
    pub name: String,
    /// The subresource of `nodes`.
    pub subresource: &'static str,
}

/// `isSubpath`: `path` is `root` or below it.
fn is_subpath(path: &str, root: &str) -> bool {
    let root = root.trim_end_matches('/');
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The subresources of `nodes` a request for `path` is authorized as, in the order they are
/// asked (`GetRequestAttributes` with `KubeletFineGrainedAuthz` on).
pub fn subresources(path: &str) -> Vec<&'static str> {
    let mut out = Vec::with_capacity(2);
    for (root, fine) in [
        ("/pods", "pods"),
        ("/healthz", "healthz"),
        ("/configz", "configz"),
    ] {
        if is_subpath(path, root) {
            out.push(fine);
            break;
        }
    }
    let coarse = [
        ("/stats", "stats"),
        ("/metrics", "metrics"),
        ("/logs", "log"),
        ("/checkpoint", "checkpoint"),
    ]
    .into_iter()
    .find(|(root, _)| is_subpath(path, root))
    .map_or("proxy", |(_, sub)| sub);
    out.push(coarse);
    out
}

/// The API verb of a request: `GET`/`HEAD` get, `POST` create, `PUT` update, `PATCH` patch,
/// `DELETE` delete, anything else none (`""`, which no rule allows). A WebSocket upgrade of
/// an exec, attach or port-forward (`upgrade`: its `Upgrade: websocket` header) is `create`,
/// as its SPDY `POST` is.
pub fn verb(method: &Method, path: &str, upgrade: bool) -> &'static str {
    let streaming = ["/exec", "/attach", "/portForward"]
        .iter()
        .any(|root| is_subpath(path, root));
    match *method {
        Method::GET if upgrade && streaming => "create",
        Method::GET | Method::HEAD => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// Whether a request asks for a WebSocket upgrade.
fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The text of a denied request (`InstallAuthFilter`; Go prints the slice `[a b]`).
pub fn forbidden_text(user: &str, verb: &str, subresources: &[&str]) -> String {
    format!(
        "Forbidden (user={user}, verb={verb}, resource=nodes, subresource(s)=[{}])\n",
        subresources.join(" ")
    )
}

/// A cache of decisions with an expiry each. Expired entries are swept when the cache has
/// grown to twice what it held after the last sweep (at least [`SWEEP_AT`]): with the
/// decisions of 10,000 simulated kubelets in one cache, a sweep on every insertion past a
/// fixed size would scan them all each time.
struct Cache<V> {
    entries: Mutex<Entries<V>>,
}

/// The entries, and the size at which the next sweep runs.
struct Entries<V> {
    map: HashMap<String, (Instant, V)>,
    sweep_at: usize,
}

/// The smallest size at which expired entries are swept.
const SWEEP_AT: usize = 1024;

impl<V: Clone> Cache<V> {
    fn new() -> Self {
        Cache {
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                sweep_at: SWEEP_AT,
            }),
        }
    }

    fn get(&self, key: &str) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .map
            .get(key)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: String, value: V, ttl: Duration) {
        let now = Instant::now();
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.map.len() >= entries.sweep_at {
            entries.map.retain(|_, (until, _)| *until > now);
            entries.sweep_at = (entries.map.len() * 2).max(SWEEP_AT);
        }
        entries.map.insert(key, (now + ttl, value));
    }
}

/// Why a request could not be checked.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// No client to reach the API server with.
    #[error("no API server client")]
    NoClient,
    /// The review could not be made.
    #[error("{0}")]
    Api(#[from] kube::Error),
}

/// The kubelet API's authenticator and authorizer (`KubeletAuth`).
pub struct RequestAuth {
    config: ServingAuth,
    /// The client CA's verifier, when client certificates authenticate (it remembers the
    /// chains it verified, as the API server's does).
    client_ca: Option<apimachinery::pki::ClientVerifier>,
    /// What sends the reviews (the simulator's own user).
    client: Option<kube::Client>,
    tokens: Cache<Option<UserInfo>>,
    decisions: Cache<bool>,
}

impl RequestAuth {
    /// An authenticator and authorizer as `config` says, trusting client certificates of
    /// `client_ca` (DER), sending reviews with `client`.
    pub fn new(
        config: ServingAuth,
        client_ca: Option<Vec<u8>>,
        client: Option<kube::Client>,
    ) -> Self {
        RequestAuth {
            config,
            client_ca: client_ca.map(apimachinery::pki::ClientVerifier::new),
            client,
            tokens: Cache::new(),
            decisions: Cache::new(),
        }
    }

    /// Who sent the request: its verified client certificate, its bearer token, or anonymous;
    /// `None`: unauthenticated (401).
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
        peer: Option<&PeerCertificates>,
    ) -> Option<UserInfo> {
        if let (Some(x509), Some(chain)) = (&self.client_ca, peer) {
            match x509.verify(&chain.0, SystemTime::now()) {
                Ok(id) => {
                    return Some(authenticated(UserInfo {
                        name: id.common_name,
                        groups: id.organizations,
                        ..UserInfo::default()
                    }));
                }
                Err(e) => tracing::debug!(error = %e, "kubelet API: client certificate refused"),
            }
        }
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        if let (Some(token), true) = (token, self.config.token_webhook) {
            match self.review_token(token).await {
                Ok(Some(user)) => return Some(authenticated(user)),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "kubelet API: TokenReview failed"),
            }
        }
        self.config.anonymous.then(|| UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..UserInfo::default()
        })
    }

    /// A bearer token's user from a `TokenReview` (cached for the token cache TTL).
    async fn review_token(&self, token: &str) -> Result<Option<UserInfo>, ReviewError> {
        if let Some(cached) = self.tokens.get(token) {
            return Ok(cached);
        }
        let client = self.client.clone().ok_or(ReviewError::NoClient)?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = kube::Api::<TokenReview>::all(client)
            .create(&PostParams::default(), &review)
            .await?;
        let status = answer.status.unwrap_or_default();
        let user = status
            .authenticated
            .unwrap_or(false)
            .then(|| status.user.unwrap_or_default())
            .map(|u| UserInfo {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default(),
            });
        self.tokens
            .put(token.to_owned(), user.clone(), self.config.token_cache_ttl);
        Ok(user)
    }

    /// Whether `user` may do what `attrs` says (always, in `AlwaysAllow` mode).
    pub async fn authorize(
        &self,
        user: &UserInfo,
        attrs: &Attributes,
    ) -> Result<bool, ReviewError> {
        if self.config.authorization == ServingAuthorization::AlwaysAllow {
            return Ok(true);
        }
        let key = format!(
            "{}\0{}\0{:?}\0{:?}\0{}\0{}\0{}",
            user.name, user.uid, user.groups, user.extra, attrs.verb, attrs.name, attrs.subresource
        );
        if let Some(allowed) = self.decisions.get(&key) {
            return Ok(allowed);
        }
        let client = self.client.clone().ok_or(ReviewError::NoClient)?;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(attrs.verb.to_owned()),
                    group: Some(String::new()),
                    version: Some("v1".into()),
                    resource: Some("nodes".into()),
                    subresource: Some(attrs.subresource.to_owned()),
                    name: Some(attrs.name.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = kube::Api::<SubjectAccessReview>::all(client)
            .create(&PostParams::default(), &review)
            .await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        let ttl = if allowed {
            self.config.authorized_ttl
        } else {
            self.config.unauthorized_ttl
        };
        self.decisions.put(key, allowed, ttl);
        Ok(allowed)
    }
}

/// `AuthenticatedGroupAdder`: `system:authenticated` for whoever is authenticated.
fn authenticated(mut user: UserInfo) -> UserInfo {
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".into());
    }
    user
}

/// The filter in front of every route (`InstallAuthFilter`).
pub async fn filter(State(server): State<KubeletServer>, req: Request, next: Next) -> Response {
    let Some(auth) = server.auth() else {
        return next.run(req).await;
    };
    let peer = req.extensions().get::<PeerCertificates>().cloned();
    let headers = req.headers().clone();
    let Some(user) = auth.authenticate(&headers, peer.as_ref()).await else {
        return restful_error(StatusCode::UNAUTHORIZED, "Unauthorized");
    };
    let path = req.uri().path();
    let verb = verb(req.method(), path, is_websocket(&headers));
    let name = server.auth_node_name(&headers);
    let subresources = subresources(path);
    for subresource in &subresources {
        let attrs = Attributes {
            verb,
            name: name.clone(),
            subresource,
        };
        match auth.authorize(&user, &attrs).await {
            Ok(true) => return next.run(req).await,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(user = %user.name, verb, subresource, error = %e, "kubelet API: authorization error");
                return restful_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!(
                        "Authorization error (user={}, verb={verb}, resource=nodes, subresource={subresource})",
                        user.name
                    ),
                );
            }
        }
    }
    tracing::debug!(user = %user.name, verb, ?subresources, "kubelet API: forbidden");
    restful_error(
        StatusCode::FORBIDDEN,
        &forbidden_text(&user.name, verb, &subresources),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_the_kubelets_subresources() {
        for (path, want) in [
            ("/stats/summary", vec!["stats"]),
            ("/stats", vec!["stats"]),
            ("/metrics/resource", vec!["metrics"]),
            ("/metrics", vec!["metrics"]),
            ("/logs/kubelet.log", vec!["log"]),
            ("/checkpoint/default/web/c", vec!["checkpoint"]),
            ("/pods", vec!["pods", "proxy"]),
            ("/pods/", vec!["pods", "proxy"]),
            ("/healthz", vec!["healthz", "proxy"]),
            ("/healthz/ping", vec!["healthz", "proxy"]),
            ("/configz", vec!["configz", "proxy"]),
            ("/containerLogs/default/web/c", vec!["proxy"]),
            ("/exec/default/web/c", vec!["proxy"]),
            ("/portForward/default/web", vec!["proxy"]),
            ("/", vec!["proxy"]),
            // A prefix of a name is not the path below it.
            ("/statsx", vec!["proxy"]),
            ("/podsx", vec!["proxy"]),
            ("/metricsfoo/x", vec!["proxy"]),
        ] {
            assert_eq!(subresources(path), want, "{path}");
        }
    }

    #[test]
    fn methods_map_to_verbs() {
        for (method, want) in [
            (Method::GET, "get"),
            (Method::HEAD, "get"),
            (Method::POST, "create"),
            (Method::PUT, "update"),
            (Method::PATCH, "patch"),
            (Method::DELETE, "delete"),
            (Method::OPTIONS, ""),
        ] {
            assert_eq!(
                verb(&method, "/containerLogs/ns/p/c", false),
                want,
                "{method}"
            );
        }
        // A WebSocket exec, attach or port-forward creates, as its SPDY POST does.
        for path in ["/exec/ns/p/c", "/attach/ns/p/c", "/portForward/ns/p"] {
            assert_eq!(verb(&Method::GET, path, true), "create", "{path}");
            assert_eq!(verb(&Method::GET, path, false), "get", "{path}");
        }
        // An upgrade elsewhere is the method's verb.
        assert_eq!(verb(&Method::GET, "/containerLogs/ns/p/c", true), "get");
    }

    #[test]
    fn the_forbidden_text_is_the_kubelets() {
        assert_eq!(
            forbidden_text("alice", "get", &["proxy"]),
            "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[proxy])\n"
        );
        assert_eq!(
            forbidden_text("bob", "get", &["pods", "proxy"]),
            "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
        );
    }

    #[test]
    fn decisions_expire() {
        let cache = Cache::new();
        cache.put("a".into(), true, Duration::from_secs(60));
        cache.put("b".into(), false, Duration::ZERO);
        assert_eq!(cache.get("a"), Some(true));
        assert_eq!(cache.get("b"), None);
        assert_eq!(cache.get("c"), None);
    }

    /// Expired entries go at the next sweep; live ones stay however many there are, and the
    /// next sweep waits until the cache has doubled.
    #[test]
    fn expired_decisions_are_swept_and_live_ones_kept() {
        let cache = Cache::new();
        for i in 0..SWEEP_AT {
            cache.put(format!("gone-{i}"), i, Duration::ZERO);
        }
        for i in 0..3000 {
            cache.put(format!("live-{i}"), i, Duration::from_secs(60));
        }
        let entries = cache.entries.lock().unwrap_or_else(|p| p.into_inner());
        assert!(entries.map.keys().all(|k| k.starts_with("live-")));
        assert_eq!(entries.map.len(), 3000);
        assert!(entries.sweep_at > 3000 / 2, "{}", entries.sweep_at);
        drop(entries);
        assert_eq!(cache.get("live-2999"), Some(2999));
    }
}
