//! `/metrics`: the API server's metrics in the Prometheus text format, as kube-apiserver
//! serves them (`staging/src/k8s.io/component-base/metrics/legacyregistry`). Only the store's
//! own health is exported so far: its checkpoints and the bytes of history it keeps
//! (kube-apiserver's nearest are `etcd_db_total_size_in_bytes` and its `etcd` health check),
//! and the connect tunnels open now ([`LongRunning`], kube-apiserver's
//! `apiserver_longrunning_requests` for the verb `CONNECT`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;
use store::Backend;

/// The long-running connect requests in progress (`exec`, `attach`, `portforward` tunnels),
/// by resource and subresource.
#[derive(Debug, Default)]
pub struct LongRunning {
    open: Mutex<BTreeMap<(String, String), usize>>,
}

/// Counts one request as open until dropped.
#[derive(Debug)]
pub struct Open {
    gauge: Arc<LongRunning>,
    key: (String, String),
}

impl LongRunning {
    /// Counts a request on `resource/subresource` until the returned guard is dropped.
    pub fn enter(gauge: &Arc<LongRunning>, resource: String, subresource: String) -> Open {
        let key = (resource, subresource);
        *gauge
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.clone())
            .or_default() += 1;
        Open {
            gauge: gauge.clone(),
            key,
        }
    }

    /// Requests open now, by (resource, subresource).
    pub fn snapshot(&self) -> BTreeMap<(String, String), usize> {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Requests open now, all together.
    pub fn total(&self) -> usize {
        self.snapshot().values().sum()
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut open = self.gauge.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The metrics text for `backend` and the open connect requests.
pub fn render(backend: &dyn Backend, long_running: &LongRunning) -> String {
    let mut out = String::new();
    let open = long_running.snapshot();
    if !open.is_empty() {
        out += "# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.\n# TYPE apiserver_longrunning_requests gauge\n";
        for ((resource, subresource), n) in &open {
            out += &format!(
                "apiserver_longrunning_requests{{component=\"apiserver\",group=\"\",resource=\"{resource}\",scope=\"resource\",subresource=\"{subresource}\",verb=\"CONNECT\",version=\"v1\"}} {n}\n"
            );
        }
    }
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

    #[test]
    fn open_connect_requests_are_counted_until_dropped() {
        let gauge = Arc::new(LongRunning::default());
        let a = LongRunning::enter(&gauge, "pods".into(), "exec".into());
        let b = LongRunning::enter(&gauge, "pods".into(), "exec".into());
        let text = render(&store::MemoryBackend::new(), &gauge);
        assert!(
            text.contains("resource=\"pods\",scope=\"resource\",subresource=\"exec\",verb=\"CONNECT\",version=\"v1\"} 2\n"),
            "{text}"
        );
        drop(a);
        assert_eq!(gauge.total(), 1);
        drop(b);
        assert_eq!(gauge.total(), 0);
    }

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
        let text = render(&store, &LongRunning::default());
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
        assert_eq!(
            render(&store::MemoryBackend::new(), &LongRunning::default()),
            ""
        );
    }
}
