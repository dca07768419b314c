//! "Playing kubelet": until the kubelet simulator exists nobody moves pods to Running, so the
//! tests do it — a thread that marks every pod of a namespace Running and Ready through the
//! `/status` subresource (phase, `Ready` condition, ready container statuses), as a kubelet
//! reports them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::http::request;

/// A background "kubelet" marking pods Ready; stopped on drop.
pub struct PlayKubelet {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PlayKubelet {
    /// Marks every pod of `namespace` Ready within ~50 ms of its creation.
    pub fn start(addr: SocketAddr, namespace: &str) -> PlayKubelet {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let namespace = namespace.to_owned();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                mark_all_ready(addr, &namespace);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        PlayKubelet {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for PlayKubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether a pod JSON has `Ready=True`.
pub fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// Marks every pod of `namespace` that is not Ready (and not being deleted) Running/Ready.
pub fn mark_all_ready(addr: SocketAddr, namespace: &str) {
    let Ok(list) = request(
        addr,
        "GET",
        &format!("/api/v1/namespaces/{namespace}/pods"),
        None,
        b"",
    ) else {
        return;
    };
    let Ok(list) = serde_json::from_slice::<Value>(&list.body) else {
        return;
    };
    for pod in list["items"].as_array().into_iter().flatten() {
        if is_ready(pod) || !pod["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let _ = mark_ready(addr, namespace, name, pod);
    }
}

/// Writes a Running/Ready status for `pod` (a merge patch of `/status`).
pub fn mark_ready(
    addr: SocketAddr,
    namespace: &str,
    name: &str,
    pod: &Value,
) -> std::io::Result<()> {
    let now = "2026-01-01T00:00:00Z";
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": true,
                   "started": true, "restartCount": 0, "state": {"running": {"startedAt": now}}})
        })
        .collect();
    let patch = json!({"status": {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
        ],
        "containerStatuses": containers,
        "podIP": "10.0.0.1",
        "startTime": now,
    }});
    request(
        addr,
        "PATCH",
        &format!("/api/v1/namespaces/{namespace}/pods/{name}/status"),
        Some("application/merge-patch+json"),
        patch.to_string().as_bytes(),
    )
    .map(|_| ())
}
