//! What the scheduler said about a pod, as a user reads it: its `FailedScheduling` Events
//! (`kubectl get events`) and the attributes of its "schedule pod" spans (`miniplane trace`).

use std::collections::BTreeMap;
use std::process::Command;

use super::Server;

/// The messages of the scheduler's FailedScheduling events about pod `name`.
pub fn failed_scheduling(s: &Server, name: &str) -> Vec<String> {
    let list = s.kubectl_json(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind=Pod,involvedObject.name={name},reason=FailedScheduling"),
    ]);
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|e| e["source"]["component"] == "default-scheduler")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The attributes of the scheduler's "schedule pod" spans in the trace of `object`
/// (`pod/web-x`, `deployment/web`), read with `miniplane trace <object> --output json`.
/// Empty while the trace is not there yet (spans are exported in batches).
pub fn scheduler_spans(s: &Server, object: &str) -> Vec<BTreeMap<String, String>> {
    let out = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(["trace", object, "--output", "json", "--master", &s.url()])
        .output()
        .expect("run miniplane trace");
    if !out.status.success() {
        return Vec::new();
    }
    let spans: Vec<trace::Span> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    spans
        .iter()
        .filter(|sp| sp.component == "kube-scheduler" && sp.name == "schedule pod")
        .map(|sp| {
            sp.attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}
