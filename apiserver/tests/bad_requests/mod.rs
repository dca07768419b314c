//! The table of bad requests: every row is a request kube-apiserver refuses, with the code,
//! `Status.reason` and message (or a part of it) it answers with. After each row the store
//! must be untouched (its revision unchanged), and every answer must be a `Status` whose bytes
//! start as kube-apiserver's do (`kind`, `apiVersion`, `metadata`, `status`, `message` in that
//! order) and end with the newline Go's `json.Encoder` writes. The rows are in [`cases`].
//!
//! Run it with `cargo test -p apiserver --test router bad_requests:: -- --nocapture` to see the
//! count of rows it ran.

mod cases;

use crate::common;

use axum::body::Body;
use axum::http::{Method, Request};
use cases::{CMS, table};
use common::Harness;
use serde_json::{Value, json};
use store::Backend;
use tower::ServiceExt;

/// What the message of the answer must be.
pub enum Msg {
    Exact(String),
    Contains(String),
}

/// One row: the request and the answer Kubernetes gives.
pub struct Case {
    what: String,
    method: Method,
    uri: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    code: u16,
    reason: &'static str,
    msg: Msg,
}

pub fn case(what: impl Into<String>, method: Method, uri: impl Into<String>) -> Case {
    Case {
        what: what.into(),
        method,
        uri: uri.into(),
        headers: Vec::new(),
        body: Vec::new(),
        code: 0,
        reason: "",
        msg: Msg::Contains(String::new()),
    }
}

impl Case {
    pub fn json(mut self, v: &Value) -> Case {
        self.body = serde_json::to_vec(v).expect("json");
        self.header("content-type", "application/json")
    }
    pub fn raw(mut self, ct: &str, body: &str) -> Case {
        self.body = body.as_bytes().to_vec();
        self.header("content-type", ct)
    }
    pub fn patch(self, ct: &str, v: &Value) -> Case {
        self.raw(ct, &v.to_string())
    }
    pub fn header(mut self, k: &'static str, v: &str) -> Case {
        self.headers.retain(|(h, _)| *h != k);
        self.headers.push((k, v.to_string()));
        self
    }
    pub fn is(mut self, code: u16, reason: &'static str, msg: impl Into<String>) -> Case {
        self.code = code;
        self.reason = reason;
        self.msg = Msg::Exact(msg.into());
        self
    }
    pub fn has(mut self, code: u16, reason: &'static str, part: impl Into<String>) -> Case {
        self.code = code;
        self.reason = reason;
        self.msg = Msg::Contains(part.into());
        self
    }
}

/// Sends one request through the router: the status, the body's bytes, the content type. A
/// target longer than `http::Uri` holds goes as the connection layer hands it over: a short
/// URI with the real target in a `LongTarget` extension.
async fn send(h: &Harness, c: &Case) -> (u16, Vec<u8>, String) {
    let long = c.uri.len() > apiserver::MAX_URI_BYTES;
    let uri = if long { "/long-target" } else { c.uri.as_str() };
    let mut req = Request::builder().method(c.method.clone()).uri(uri);
    for (k, v) in &c.headers {
        req = req.header(*k, v);
    }
    let mut req = req.body(Body::from(c.body.clone())).expect("request");
    if long {
        req.extensions_mut()
            .insert(apiserver::LongTarget::new(c.uri.clone()));
    }
    let resp = h.app.clone().oneshot(req).await.expect("infallible");
    let code = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .expect("body");
    (code, bytes.to_vec(), ct)
}

/// What is wrong with the answer to `c`, if anything.
fn check(c: &Case, code: u16, bytes: &[u8], ct: &str) -> Option<String> {
    let full = String::from_utf8_lossy(bytes);
    let text: String = full.chars().take(400).collect();
    if code != c.code {
        return Some(format!("code {code}, want {}: {text}", c.code));
    }
    if ct != "application/json" {
        return Some(format!("content type {ct:?}"));
    }
    let prefix = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":";
    if !full.starts_with(prefix) || !full.ends_with("}\n") {
        return Some(format!("not kube-apiserver's Status bytes: {text}"));
    }
    let status: Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => return Some(format!("not JSON ({e}): {text}")),
    };
    if status["reason"] != c.reason || status["code"] != c.code {
        return Some(format!(
            "reason/code {} {}, want {} {}",
            status["reason"], status["code"], c.reason, c.code
        ));
    }
    let message = status["message"].as_str().unwrap_or_default();
    let ok = match &c.msg {
        Msg::Exact(m) => message == m,
        Msg::Contains(m) => message.contains(m.as_str()),
    };
    if !ok {
        let want = match &c.msg {
            Msg::Exact(m) => format!("exactly {m:?}"),
            Msg::Contains(m) => format!("containing {m:?}"),
        };
        return Some(format!("message {message:?}, want {want}"));
    }
    None
}

#[tokio::test]
async fn every_bad_request_is_refused_with_kubernetes_status_and_stores_nothing() {
    let h = Harness::new().await;
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"a": "b"}}, "data": {"k": "v"}});
    for name in ["cm1", "cm2"] {
        assert_eq!(h.post(CMS, &cm(name)).await.status.as_u16(), 201);
    }
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    assert_eq!(
        h.post("/apis/apps/v1/namespaces/default/deployments", &deploy)
            .await
            .status
            .as_u16(),
        201
    );

    // `continue` with a resourceVersion: a real token from a first page.
    let page = h.get(&format!("{CMS}?limit=1")).await;
    let token = page.body["metadata"]["continue"]
        .as_str()
        .expect("a continue token")
        .to_string();
    let mut cases = table();
    let q: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("continue", &token)
        .append_pair("resourceVersion", "1")
        .finish();
    cases.push(
        case(
            "continue with resourceVersion",
            Method::GET,
            format!("{CMS}?{q}"),
        )
        .is(
            400,
            "BadRequest",
            "specifying resource version is not allowed when using continue",
        ),
    );

    let mut failures = Vec::new();
    for c in &cases {
        let before = h.backend.current_revision();
        let (code, bytes, ct) = send(&h, c).await;
        if let Some(why) = check(c, code, &bytes, &ct) {
            failures.push(format!(
                "{} ({} {}): {why}",
                c.what,
                c.method,
                c.uri.chars().take(120).collect::<String>()
            ));
        }
        let after = h.backend.current_revision();
        if after != before {
            failures.push(format!(
                "{}: the store changed ({before:?} -> {after:?})",
                c.what
            ));
        }
    }
    println!(
        "bad requests: {} cases run, {} failed",
        cases.len(),
        failures.len()
    );
    assert!(cases.len() >= 300, "only {} cases", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
