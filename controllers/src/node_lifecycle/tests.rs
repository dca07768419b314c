//! Node lifecycle decisions with time as an input.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn ready(status: &str, heartbeat: i64) -> NodeCondition {
    NodeCondition {
        type_: "Ready".into(),
        status: status.into(),
        reason: Some("KubeletReady".into()),
        message: Some("kubelet is posting ready status".into()),
        last_heartbeat_time: Some(Time(t(heartbeat))),
        last_transition_time: Some(Time(t(0))),
    }
}

fn node(conditions: Vec<NodeCondition>, taints: Vec<Taint>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node-0".into()),
            creation_timestamp: Some(Time(t(0))),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        }),
        status: Some(NodeStatus {
            conditions: Some(conditions),
            ..Default::default()
        }),
    }
}

fn config() -> Config {
    Config::default()
}

#[test]
fn heard_from_node_stays_ready_and_untainted() {
    let n = node(vec![ready("True", 0)], vec![]);
    let (h, d) = monitor_node(&n, Some(t(0)), None, &config(), t(0));
    assert_eq!(d, NodeDecision::default());
    // Lease renewals keep it alive even if the status heartbeat is old (5 min report period).
    let (h, _) = monitor_node(&n, Some(t(30)), Some(h), &config(), t(30));
    let (h, _) = monitor_node(&n, Some(t(60)), Some(h), &config(), t(60));
    let (_, d) = monitor_node(&n, Some(t(90)), Some(h), &config(), t(95));
    assert_eq!(d.conditions, None);
}

#[test]
fn silence_past_grace_period_marks_unknown_and_taints_unreachable() {
    let n = node(vec![ready("True", 0)], vec![]);
    let (h, _) = monitor_node(&n, Some(t(0)), None, &config(), t(0));
    let (h, d) = monitor_node(&n, Some(t(0)), Some(h), &config(), t(40));
    assert_eq!(d.conditions, None, "exactly the grace period is still fine");
    assert!(!became_not_ready(&n, &d));
    let (_, d) = monitor_node(&n, Some(t(0)), Some(h), &config(), t(41));
    assert!(
        became_not_ready(&n, &d),
        "True → Unknown is the NodeNotReady moment"
    );
    let conditions = d.conditions.expect("conditions set Unknown");
    let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(
        types,
        ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]
    );
    for c in &conditions {
        assert_eq!(c.status, "Unknown");
        assert_eq!(c.reason.as_deref(), Some(REASON_UNKNOWN));
        assert_eq!(
            c.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(c.last_transition_time, Some(Time(t(41))));
    }
    assert_eq!(
        conditions[0].last_heartbeat_time,
        Some(Time(t(0))),
        "heartbeat kept"
    );
    let taints = d.taints.expect("taints");
    let keys: Vec<(&str, &str)> = taints
        .iter()
        .map(|t| (t.key.as_str(), t.effect.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            (TAINT_UNREACHABLE, "NoSchedule"),
            (TAINT_UNREACHABLE, "NoExecute")
        ]
    );
    assert_eq!(taints[1].time_added, Some(Time(t(41))));
    assert!(d.summary.is_some_and(|s| s.contains("node-0")));
}

#[test]
fn unknown_node_is_not_rewritten_and_recovers_when_heard_from() {
    let silent = node(vec![ready("True", 0)], vec![]);
    let (h, _) = monitor_node(&silent, Some(t(0)), None, &config(), t(0));
    let (h, d) = monitor_node(&silent, Some(t(0)), Some(h), &config(), t(50));
    // The controller's own writes land.
    let mut unknown = silent.clone();
    unknown.status = Some(NodeStatus {
        conditions: d.conditions,
        ..Default::default()
    });
    unknown.spec = Some(NodeSpec {
        taints: d.taints,
        ..Default::default()
    });
    let (h, d) = monitor_node(&unknown, Some(t(0)), Some(h), &config(), t(55));
    assert_eq!(
        d,
        NodeDecision::default(),
        "nothing more to do while silent"
    );
    // The kubelet is back: lease renewed, status posted.
    let mut back = unknown.clone();
    back.status = Some(NodeStatus {
        conditions: Some(vec![ready("True", 60)]),
        ..Default::default()
    });
    let (_, d) = monitor_node(&back, Some(t(60)), Some(h), &config(), t(60));
    assert_eq!(d.conditions, None);
    assert_eq!(d.taints, Some(vec![]), "taints removed");
}

#[test]
fn not_ready_node_gets_not_ready_taints_and_foreign_taints_are_kept() {
    let foreign = Taint {
        key: "dedicated".into(),
        value: Some("gpu".into()),
        effect: "NoSchedule".into(),
        time_added: None,
    };
    let n = node(vec![ready("False", 0)], vec![foreign.clone()]);
    let (h, d) = monitor_node(&n, Some(t(0)), None, &config(), t(1));
    let taints = d.taints.expect("taints");
    assert_eq!(taints[0], foreign);
    assert_eq!(taints[1].key, TAINT_NOT_READY);
    assert_eq!(taints[2].key, TAINT_NOT_READY);
    // Applied: nothing more; timeAdded is not bumped.
    let tainted = node(vec![ready("False", 0)], taints.clone());
    let (_, d) = monitor_node(&tainted, Some(t(2)), Some(h), &config(), t(2));
    assert_eq!(d.taints, None);
}

#[test]
fn node_that_never_posted_gets_startup_grace() {
    let n = node(vec![], vec![]);
    let (h, d) = monitor_node(&n, None, None, &config(), t(30));
    assert_eq!(d.conditions, None);
    let (_, d) = monitor_node(&n, None, Some(h), &config(), t(61));
    let cs = d.conditions.expect("Unknown after the startup grace");
    assert_eq!(cs[0].reason.as_deref(), Some(REASON_NEVER_UPDATED));
    assert_eq!(cs[0].message.as_deref(), Some(MESSAGE_NEVER_UPDATED));
}

#[test]
fn configurable_grace_period() {
    let c = Config {
        node_monitor_grace_period: Duration::from_millis(500),
        ..Config::default()
    };
    let n = node(vec![ready("True", 0)], vec![]);
    let (h, _) = monitor_node(&n, Some(t(0)), None, &c, t(0));
    let (_, d) = monitor_node(&n, Some(t(0)), Some(h), &c, t(1));
    assert!(d.conditions.is_some());
}

fn pod(tolerations: Vec<Toleration>) -> Pod {
    Pod {
        spec: Some(PodSpec {
            tolerations: Some(tolerations),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn unreachable(added: i64) -> Taint {
    Taint {
        key: TAINT_UNREACHABLE.into(),
        value: None,
        effect: "NoExecute".into(),
        time_added: Some(Time(t(added))),
    }
}

fn toleration(key: &str, seconds: Option<i64>) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        toleration_seconds: seconds,
        value: None,
    }
}

#[test]
fn eviction_timing_follows_toleration_seconds() {
    let taints = [unreachable(100)];
    assert_eq!(
        eviction(&pod(vec![]), &taints, t(100)),
        Eviction::Now,
        "no toleration"
    );
    let defaulted = pod(vec![
        toleration(TAINT_NOT_READY, Some(300)),
        toleration(TAINT_UNREACHABLE, Some(300)),
    ]);
    assert_eq!(eviction(&defaulted, &taints, t(101)), Eviction::At(t(400)));
    assert_eq!(eviction(&defaulted, &taints, t(400)), Eviction::Now);
    let short = pod(vec![
        toleration(TAINT_UNREACHABLE, Some(300)),
        toleration(TAINT_UNREACHABLE, Some(2)),
    ]);
    assert_eq!(
        eviction(&short, &taints, t(100)),
        Eviction::At(t(102)),
        "the shortest wins"
    );
    let forever = pod(vec![toleration(TAINT_UNREACHABLE, None)]);
    assert_eq!(eviction(&forever, &taints, t(10_000)), Eviction::Keep);
    let no_schedule_only = [Taint {
        effect: "NoSchedule".into(),
        ..unreachable(0)
    }];
    assert_eq!(
        eviction(&pod(vec![]), &no_schedule_only, t(0)),
        Eviction::Keep
    );
}

#[test]
fn toleration_matching() {
    let taint = unreachable(0);
    let exists_all = Toleration {
        operator: Some("Exists".into()),
        ..Default::default()
    };
    assert!(tolerates(&exists_all, &taint));
    let wrong_effect = Toleration {
        effect: Some("NoSchedule".into()),
        ..toleration(TAINT_UNREACHABLE, None)
    };
    assert!(!tolerates(&wrong_effect, &taint));
    assert!(!tolerates(&toleration("other", None), &taint));
    let equal = Toleration {
        key: Some("k".into()),
        operator: Some("Equal".into()),
        value: Some("v".into()),
        ..Default::default()
    };
    let kv = Taint {
        key: "k".into(),
        value: Some("v".into()),
        effect: "NoExecute".into(),
        time_added: None,
    };
    assert!(tolerates(&equal, &kv));
    assert!(!tolerates(
        &equal,
        &Taint {
            value: Some("w".into()),
            ..kv
        }
    ));
}

#[test]
fn a_ready_pod_is_marked_not_ready_once() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}
    }))
    .expect("pod");
    let now = Timestamp::from_second(100).expect("time");
    let marked = mark_pod_not_ready(&pod, now).expect("marked");
    let ready = marked
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .expect("ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.last_transition_time.as_ref().map(|t| t.0), Some(now));
    assert_eq!(mark_pod_not_ready(&marked, now), None);
}
