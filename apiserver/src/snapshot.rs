//! Snapshots of the API server's store (`GET /miniplane/v1/snapshot`, `miniplane snapshot save`)
//! and their restore into a new data directory (`miniplane snapshot restore`, `up --restore`):
//! kube-apiserver's keys (`/registry/...`) at one revision, in `store::Snapshot`'s file format.
//!
//! Kubernetes backs a cluster up with `etcdctl snapshot save` against etcd and restores it with
//! `etcdutl snapshot restore --bump-revision --mark-compacted` before the API servers start
//! (the "Operating etcd clusters for Kubernetes" task). Here the API server reads its own store
//! (embedded or etcd) so the snapshot is taken through the API server's URL and credentials,
//! and the restore writes the embedded store's data directory (the restore of an etcd cluster
//! is etcd's own `etcdutl`).
//!
//! ```text
//!   GET /miniplane/v1/snapshot ─▶ every /registry/ key at revision R ─▶ octet-stream
//!   restore(file, dir, bump)   ─▶ checks, then a store at R + bump, compacted there
//!   objects(snapshot)          ─▶ the objects as kubectl shows them (resourceVersion set)
//! ```

use std::path::Path;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
pub use store::{DEFAULT_BUMP, Error, KeyValue, Revision, Snapshot};

use crate::error::Result;
use crate::state::AppState;

/// The keys a snapshot holds: every object the API server keeps.
const PREFIX: &[u8] = b"/registry/";

/// The Content-Type of a snapshot file.
pub const CONTENT_TYPE: &str = "application/octet-stream";

/// `GET /miniplane/v1/snapshot`: the store's keys at one revision, as a snapshot file. The
/// revision and the number of keys are in the headers `X-Miniplane-Revision` and
/// `X-Miniplane-Keys`, and the read is recorded as a span `snapshot` of the API server (its
/// attribute `snapshot`: `<keys> keys at revision <R>, <bytes> bytes`).
pub async fn serve(state: &AppState) -> Result<Response> {
    let started = std::time::SystemTime::now();
    let snapshot = Snapshot::read(state.storage().backend().as_ref(), PREFIX).await?;
    let data = snapshot.encode();
    if state.options().tracing.enabled {
        let mut span = trace::Span::start(
            trace::SpanContext::new_root(),
            None,
            "snapshot",
            trace::SpanKind::Server,
            crate::request_trace::COMPONENT,
        )
        .started_at(started);
        span.set(trace::attr::REVISION, snapshot.revision.0);
        span.set("keys", snapshot.kvs.len());
        span.set("bytes", data.len());
        span.summary = format!(
            "{} keys at revision {}, {} bytes",
            snapshot.kvs.len(),
            snapshot.revision,
            data.len()
        );
        span.set("snapshot", span.summary.clone());
        span.end();
        state.collector().record(span);
    }
    let mut resp = (StatusCode::OK, data).into_response();
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    headers.insert(
        "x-miniplane-revision",
        HeaderValue::from(snapshot.revision.0),
    );
    headers.insert("x-miniplane-keys", HeaderValue::from(snapshot.kvs.len()));
    Ok(resp)
}

/// Restores the snapshot file `data` as the store in `dir` (a data directory's store, which
/// must not exist or be empty), its revision `bump` past the snapshot's; returns that revision.
/// Nothing is written if the file is refused.
pub fn restore(data: &[u8], dir: &Path, bump: u64) -> store::Result<Revision> {
    Snapshot::decode(data)?.restore(dir, bump)
}

/// The objects of a snapshot as kubectl shows them: each stored object with its
/// `metadata.resourceVersion`, in key order. A value that is not a JSON object (a key written
/// behind the API server's back) is left out.
pub fn objects(snapshot: &Snapshot) -> Vec<Value> {
    snapshot
        .kvs
        .iter()
        .filter_map(|kv| crate::storage::decode(&kv.value, kv.mod_revision).ok())
        .filter(Value::is_object)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use store::{Backend, MemoryBackend};

    #[tokio::test]
    async fn objects_carry_their_revision_and_foreign_values_are_left_out() {
        let db = MemoryBackend::new();
        let put = |k: &str, v: &str| db.put(Bytes::from(k.to_owned()), Bytes::from(v.to_owned()));
        let cm = put(
            "/registry/configmaps/default/a",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}"#,
        )
        .await
        .unwrap();
        put("/registry/raw", "not json").await.unwrap();
        let snapshot = Snapshot::read(&db, PREFIX).await.unwrap();
        let objects = objects(&snapshot);
        assert_eq!(objects.len(), 1);
        assert_eq!(
            objects[0]["metadata"]["resourceVersion"],
            cm.revision.0.to_string()
        );
        let dir = tempfile::tempdir().unwrap();
        let restored = restore(&snapshot.encode(), &dir.path().join("store"), 7).unwrap();
        assert_eq!(restored, Revision(snapshot.revision.0 + 7));
        assert!(restore(b"junk", &dir.path().join("other"), 7).is_err());
        assert!(!dir.path().join("other").exists());
    }
}
