//! `/metrics`: the API server's metrics in the Prometheus text format, as kube-apiserver
//! serves them (`staging/src/k8s.io/component-base/metrics/legacyregistry`). Only the store's
//! own health is exported so far: its checkpoints and the bytes of history it keeps
//! (kube-apiserver's nearest are `etcd_db_total_size_in_bytes` and its `etcd` health check).

use std::time::UNIX_EPOCH;
use store::Backend;

/// The metrics text for `backend` (empty for a backend without checkpoints or history count).
pub fn render(backend: &dyn Backend) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        out += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
    };
    if let Some(h) = backend.checkpoint_health() {
        metric(
            "miniplane_store_checkpoint_successes_total",
            "counter",
            "Store checkpoints that succeeded since the store was opened.",
            h.successes_total.to_string(),
        );
        metric(
            "miniplane_store_checkpoint_failures_total",
            "counter",
            "Store checkpoints that failed since the store was opened.",
            h.failures_total.to_string(),
        );
        metric(
            "miniplane_store_checkpoint_consecutive_failures",
            "gauge",
            "Store checkpoints that failed since the last one that succeeded.",
            h.consecutive_failures.to_string(),
        );
        let last = h
            .last_success
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        metric(
            "miniplane_store_checkpoint_last_success_timestamp_seconds",
            "gauge",
            "Unix time of the last store checkpoint that succeeded (0: none since the store was opened).",
            format!("{last:.3}"),
        );
    }
    if let Some(bytes) = backend.history_bytes() {
        metric(
            "miniplane_store_history_bytes",
            "gauge",
            "Bytes of history the store keeps: replaced and deleted versions above the compaction point.",
            bytes.to_string(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_durable_store_exports_its_checkpoints_and_history() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = store::StoreConfig::new(dir.path());
        config.fsync = false;
        let store = store::Store::open(config).await.expect("open");
        for _ in 0..2 {
            store
                .put(
                    bytes::Bytes::from_static(b"/k"),
                    bytes::Bytes::from_static(b"0123456789"),
                )
                .await
                .expect("put");
        }
        let text = render(&store);
        assert!(
            text.contains("\nminiplane_store_checkpoint_failures_total 0\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE miniplane_store_checkpoint_consecutive_failures gauge\n"));
        // The first version (key + value) was replaced.
        assert!(
            text.contains("\nminiplane_store_history_bytes 12\n"),
            "{text}"
        );
        store.close().await.expect("close");
        assert_eq!(render(&store::MemoryBackend::new()), "");
    }
}
