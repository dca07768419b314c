//! Test harness: the API server's router over an in-memory store, driven without sockets.

#![allow(dead_code)]

pub mod widgets;

use apiserver::{AppState, ResourceInfo, ServerOptions, router};
use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::MemoryBackend;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// A table `Accept` header as kubectl sends it.
pub const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// A response, decoded.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

/// The router over a fresh store.
pub struct Harness {
    pub app: Router,
    pub state: AppState,
    pub backend: Arc<MemoryBackend>,
    pub shutdown: CancellationToken,
}

impl Harness {
    /// A server without the ServiceAccount admission plugin: no controller-manager makes the
    /// `default` ServiceAccounts the plugin would look for.
    pub async fn new() -> Harness {
        Self::with_options(ServerOptions {
            bookmark_interval: Duration::from_millis(200),
            admission: apiserver::AdmissionOptions::without_service_account(),
            ..ServerOptions::default()
        })
        .await
    }

    pub async fn with_options(options: ServerOptions) -> Harness {
        let backend = Arc::new(MemoryBackend::new());
        let shutdown = CancellationToken::new();
        let state = AppState::new(backend.clone(), options, shutdown.clone());
        state.bootstrap().await.expect("bootstrap");
        Harness {
            app: router(state.clone()),
            state,
            backend,
            shutdown,
        }
    }

    pub async fn raw(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Resp {
        let mut req = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = self
            .app
            .clone()
            .oneshot(req.body(Body::from(body)).expect("request"))
            .await
            .expect("infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn send(&self, method: Method, uri: &str, ct: &str, body: &Value) -> Resp {
        self.raw(
            method,
            uri,
            &[("content-type", ct)],
            serde_json::to_vec(body).expect("json"),
        )
        .await
    }

    pub async fn get(&self, uri: &str) -> Resp {
        self.raw(Method::GET, uri, &[], Vec::new()).await
    }

    pub async fn get_as(&self, uri: &str, accept: &str) -> Resp {
        self.raw(Method::GET, uri, &[("accept", accept)], Vec::new())
            .await
    }

    pub async fn post(&self, uri: &str, body: &Value) -> Resp {
        self.send(Method::POST, uri, "application/json", body).await
    }

    pub async fn put(&self, uri: &str, body: &Value) -> Resp {
        self.send(Method::PUT, uri, "application/json", body).await
    }

    pub async fn patch(&self, uri: &str, ct: &str, body: &Value) -> Resp {
        self.send(Method::PATCH, uri, ct, body).await
    }

    pub async fn delete(&self, uri: &str, body: Option<&Value>) -> Resp {
        let bytes = body
            .map(|b| serde_json::to_vec(b).expect("json"))
            .unwrap_or_default();
        self.raw(
            Method::DELETE,
            uri,
            &[("content-type", "application/json")],
            bytes,
        )
        .await
    }

    /// Opens a watch and returns a reader of its lines.
    pub async fn watch(&self, uri: &str, accept: Option<&str>) -> WatchReader {
        let mut req = Request::builder().method(Method::GET).uri(uri);
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let resp = self
            .app
            .clone()
            .oneshot(req.body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        assert_eq!(resp.status(), StatusCode::OK, "watch {uri}");
        WatchReader {
            stream: Box::pin(resp.into_body().into_data_stream()),
            buf: Vec::new(),
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Reads newline-delimited watch events.
pub struct WatchReader {
    stream:
        std::pin::Pin<Box<dyn futures::Stream<Item = Result<bytes::Bytes, axum::Error>> + Send>>,
    buf: Vec<u8>,
}

impl WatchReader {
    /// The next event, or None when the stream ends or nothing arrives within 5 s.
    pub async fn next(&mut self) -> Option<Value> {
        self.next_within(Duration::from_secs(5)).await
    }

    pub async fn next_within(&mut self, limit: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Some(serde_json::from_slice(&line).expect("one JSON event per line"));
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// The next line that is not a BOOKMARK, as the bytes sent (without the newline).
    pub async fn next_raw(&mut self) -> Option<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
                if text.starts_with("{\"type\":\"BOOKMARK\"") {
                    continue;
                }
                return Some(text);
            }
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(chunk))) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_change(&mut self) -> Option<Value> {
        loop {
            let ev = self.next().await?;
            if ev["type"] != "BOOKMARK" {
                return Some(ev);
            }
        }
    }
}

/// The collection URL of a resource (in `default` when namespaced).
pub fn collection(info: &ResourceInfo) -> String {
    let gv = info.gvr.group_version().url_prefix();
    if info.namespaced {
        format!("{gv}/namespaces/default/{}", info.gvr.resource)
    } else {
        format!("{gv}/{}", info.gvr.resource)
    }
}

/// A valid object of each built-in kind (valid for Kubernetes' own validation too).
pub fn sample(info: &ResourceInfo, name: &str) -> Value {
    let labels = json!({"app": "demo"});
    let pod_spec = json!({"containers": [{"name": "c", "image": "nginx:1.25"}]});
    let template = json!({"metadata": {"labels": labels}, "spec": pod_spec});
    let selector = json!({"matchLabels": labels});
    let body = match (info.gvr.group.as_str(), info.kind.as_str()) {
        ("", "Pod") => json!({"spec": pod_spec}),
        ("", "Event") => json!({
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Test", "message": "hello", "type": "Normal",
        }),
        ("", "ConfigMap") => json!({"data": {"a": "b"}}),
        ("", "Secret") => json!({"type": "Opaque", "data": {"a": "Yg=="}}),
        ("", "Service") => json!({"spec": {"selector": labels, "ports": [{"port": 80}]}}),
        ("", "Endpoints") => json!({"subsets": []}),
        ("", "ReplicationController") => {
            json!({"spec": {"replicas": 1, "selector": labels, "template": template}})
        }
        ("", "PersistentVolumeClaim") => json!({"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        }}),
        ("", "PersistentVolume") => json!({"spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/data"},
        }}),
        ("storage.k8s.io", "StorageClass") => json!({"provisioner": "example.com/none"}),
        // The same spec is a valid autoscaling/v1 and autoscaling/v2 HorizontalPodAutoscaler.
        ("autoscaling", "HorizontalPodAutoscaler") => json!({"spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 3,
        }}),
        ("policy", "PodDisruptionBudget") => {
            json!({"spec": {"minAvailable": 1, "selector": selector}})
        }
        ("apps", "Deployment" | "ReplicaSet") => {
            json!({"spec": {"replicas": 1, "selector": selector, "template": template}})
        }
        ("apps", "DaemonSet") => json!({"spec": {"selector": selector, "template": template}}),
        ("apps", "StatefulSet") => {
            json!({"spec": {"serviceName": "s", "selector": selector, "template": template}})
        }
        ("apps", "ControllerRevision") => json!({
            "data": {"spec": {"template": {"$patch": "replace", "spec": pod_spec}}},
            "revision": 1
        }),
        ("coordination.k8s.io", "Lease") => json!({"spec": {"holderIdentity": "me"}}),
        ("discovery.k8s.io", "EndpointSlice") => json!({
            "addressType": "IPv4", "endpoints": [{"addresses": ["10.244.0.5"]}],
            "ports": [{"name": "http", "port": 80}],
        }),
        ("events.k8s.io", "Event") => json!({
            "eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "test/ctl",
            "reportingInstance": "i1", "action": "Test", "reason": "Test", "type": "Normal", "note": "hi",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        }),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => {
            json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
        }),
        ("scheduling.k8s.io", "PriorityClass") => json!({"value": 1000}),
        ("batch", "Job") => {
            json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
        }
        ("batch", "CronJob") => {
            json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}})
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => json!({"spec": {
            // A CSR for `alice` in `dev` (ECDSA P-256), as `openssl req` makes one.
            "request": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIWU1JR0FBZ0VBTUI0eEREQUtCZ05WQkFvTUEyUmxkakVPTUF3R0ExVUVBd3dGWVd4cFkyVXdXVEFUQmdjcQpoa2pPUFFJQkJnZ3Foa2pPUFFNQkJ3TkNBQVFrTk5Xdk1yRlJHRGdaNS9peU81WWxNREI4WDRTQS9iTm00QjBKCjhpTXlveUlLQ1J6UFZWT0IwRnhwSHNYUWpORk5XcHg4SHJ1N3RmUE9PdkVNWkNzSG9BQXdDZ1lJS29aSXpqMEUKQXdJRFJ3QXdSQUlnVGVCMjJ0WXZ6V1ZWRnZ5cXVtdHJWOHh5STFzRWRQTkFmd05VQWVuVVlXY0NJSEhrNVJwVQpWV0VFZzZhSDdqUzBOaVFuTlJ1ZjFNTWlETUE5SEFOd0ZVY0sKLS0tLS1FTkQgQ0VSVElGSUNBVEUgUkVRVUVTVC0tLS0tCg==",
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
        }}),
        _ => json!({}),
    };
    let mut obj = body;
    obj["apiVersion"] = json!(info.api_version());
    obj["kind"] = json!(info.kind);
    obj["metadata"] = json!({"name": name, "labels": {"test": "yes"}});
    obj
}

/// The built-in resources, but for CustomResourceDefinitions: their names must be
/// `<plural>.<group>` and their deletion waits for the CRD controller, so a generic sample does
/// not fit them (the e2e `crd` module and `apiserver::apiextensions` tests cover them); and but
/// for the read-only ComponentStatuses, computed on each read (the `control_plane` module).
/// A version served by conversion (autoscaling/v1 HorizontalPodAutoscalers) shares its
/// objects with the storage version's row, so the same names would collide: only the storage
/// version is in the table (the conversion has its own tests, and the e2e `autoscaling` module).
pub fn resources() -> Vec<Arc<ResourceInfo>> {
    let mut rows = apiserver::Registry::builtin().snapshot().as_ref().clone();
    // Stored resources only: the reviews are answered, never stored.
    rows.retain(|r| r.kind != "CustomResourceDefinition" && r.allows("create") && r.allows("get"));
    // APIServices' names must be `<version>.<group>` (the `aggregator` unit tests and the e2e
    // `metrics` module cover them).
    rows.retain(|r| r.kind != "APIService");
    rows.retain(|r| r.strategy.conversion().is_none());
    rows
}
