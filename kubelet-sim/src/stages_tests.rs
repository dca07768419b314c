//! The stage machine driven step by step with time as an input.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::*;

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(1_700_000_000_000 + ms).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn node() -> NodeContext {
    NodeContext {
        name: "node-0".into(),
        host_ip: "172.16.0.2".into(),
    }
}

fn pod(image: &str, annotations: &[(&str, &str)], restart: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-0".into()),
            restart_policy: Some(restart.into()),
            containers: vec![Container {
                name: "nginx".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// Drives `pod` like the shell does: apply each step's status to the pod, keep memory.
struct Driver {
    pod: Pod,
    memory: PodMemory,
    config: StageConfig,
    events: Vec<String>,
}

impl Driver {
    fn new(pod: Pod, config: StageConfig) -> Self {
        Driver {
            pod,
            memory: PodMemory::new("uid-1"),
            config,
            events: Vec::new(),
        }
    }

    fn at(&mut self, ms: i64) -> Step {
        let s = step(
            &self.pod,
            &self.memory,
            &node(),
            "10.244.0.2",
            t(ms),
            &self.config,
        );
        self.memory = s.memory.clone();
        if let Some(status) = &s.status {
            // As the API server stores and returns it: JSON, times in whole seconds.
            let wire = serde_json::to_value(status).expect("a status serializes");
            self.pod.status = Some(serde_json::from_value(wire).expect("and reads back"));
        }
        self.events.extend(
            s.events
                .iter()
                .map(|e| format!("{} {}", e.reason, e.message)),
        );
        s
    }

    fn status(&self) -> &PodStatus {
        self.pod.status.as_ref().expect("a status was posted")
    }

    fn waiting_reason(&self) -> Option<String> {
        self.status().container_statuses.as_ref()?[0]
            .state
            .as_ref()?
            .waiting
            .as_ref()?
            .reason
            .clone()
    }

    fn condition(&self, type_: &str) -> String {
        self.status()
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.clone())
            .unwrap_or_default()
    }
}

fn slow() -> StageConfig {
    StageConfig {
        pull_delay: Duration::from_millis(1000),
        start_delay: Duration::from_millis(500),
        ..StageConfig::realistic()
    }
}

#[test]
fn fast_profile_goes_straight_to_running_and_ready() {
    let mut d = Driver::new(pod("nginx", &[], "Always"), StageConfig::fast());
    let s = d.at(0);
    assert_eq!(s.wake_at, None);
    let status = d.status();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.2"));
    assert_eq!(status.host_ip.as_deref(), Some("172.16.0.2"));
    assert_eq!(status.start_time, Some(Time(t(0))));
    let cs = &status
        .container_statuses
        .as_ref()
        .expect("container statuses")[0];
    assert!(cs.ready);
    assert_eq!(cs.started, Some(true));
    assert_eq!(cs.restart_count, 0);
    assert!(
        cs.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("miniplane://") && id.len() == 12 + 64)
    );
    assert!(cs.image_id.starts_with("nginx@sha256:"));
    for c in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ] {
        assert_eq!(d.condition(c), "True", "{c}");
    }
    assert_eq!(
        d.events,
        [
            "Pulling Pulling image \"nginx\"",
            "Pulled Successfully pulled image \"nginx\" in 0.000s (0.000s including waiting). Image size: 0 bytes.",
            "Created Created container: nginx",
            "Started Started container nginx",
        ]
    );
    // Nothing changes on a second sync: no write, no events.
    let again = d.at(5000);
    assert_eq!(again.status, None);
    assert!(again.events.is_empty());
}

#[test]
fn a_status_read_back_from_the_api_is_not_posted_again() {
    // Rendered at a fraction of a second: the API keeps whole seconds, so the next sync must
    // compare equal to what was read back (one write per change, as the status manager).
    let mut d = Driver::new(pod("nginx", &[], "Always"), StageConfig::fast());
    assert!(d.at(250).status.is_some());
    let again = d.at(700);
    assert_eq!(again.status, None, "the same status posted twice");
}

#[test]
fn container_creating_then_running_at_the_configured_times() {
    let mut d = Driver::new(pod("nginx", &[], "Always"), slow());
    let s = d.at(0);
    assert_eq!(s.wake_at, Some(t(1500)));
    assert_eq!(d.status().phase.as_deref(), Some("Pending"));
    assert_eq!(d.waiting_reason().as_deref(), Some("ContainerCreating"));
    assert_eq!(d.condition("PodScheduled"), "True");
    assert_eq!(d.condition("Initialized"), "True");
    assert_eq!(d.condition("Ready"), "False");
    assert_eq!(d.condition("PodReadyToStartContainers"), "False");
    assert_eq!(d.status().pod_ip, None);
    assert_eq!(d.at(1499).status, None, "nothing due yet");
    // Woken late (2.6 s): the container started when it was due (1.5 s), and the API keeps
    // whole seconds.
    d.at(2600);
    assert_eq!(d.status().phase.as_deref(), Some("Running"));
    let running = d.status().container_statuses.as_ref().expect("statuses")[0]
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.clone());
    assert_eq!(
        running,
        Some(Time(t(1000))),
        "stamped when due, not when woken"
    );
}

#[test]
fn readiness_waits_for_probe_delay_or_annotation() {
    let mut with_probe = pod("nginx", &[], "Always");
    if let Some(spec) = with_probe.spec.as_mut() {
        spec.containers[0].readiness_probe = Some(Probe {
            initial_delay_seconds: Some(3),
            ..Default::default()
        });
    }
    let mut d = Driver::new(with_probe, StageConfig::fast());
    let s = d.at(0);
    assert_eq!(d.status().phase.as_deref(), Some("Running"));
    assert_eq!(d.condition("Ready"), "False");
    assert_eq!(s.wake_at, Some(t(3000)));
    d.at(3000);
    assert_eq!(d.condition("Ready"), "True");

    let mut d = Driver::new(
        pod("nginx", &[("miniplane.dev/ready-after", "500ms")], "Always"),
        StageConfig::fast(),
    );
    assert_eq!(d.at(0).wake_at, Some(t(500)));
    d.at(500);
    assert_eq!(d.condition("ContainersReady"), "True");

    let mut d = Driver::new(
        pod("nginx", &[("miniplane.dev/fail", "never-ready")], "Always"),
        StageConfig::fast(),
    );
    assert_eq!(d.at(0).wake_at, None);
    d.at(1_000_000);
    assert_eq!(d.status().phase.as_deref(), Some("Running"));
    assert_eq!(d.condition("Ready"), "False");
}

#[test]
fn missing_image_err_image_pull_then_back_off_growing() {
    let mut d = Driver::new(
        pod("nginx:doesnotexist", &[], "Always"),
        StageConfig::realistic(),
    );
    let s = d.at(0);
    assert_eq!(s.wake_at, Some(t(1200)));
    d.at(1200);
    assert_eq!(d.waiting_reason().as_deref(), Some("ErrImagePull"));
    assert!(
        d.events
            .iter()
            .any(|e| e.starts_with("Failed Failed to pull image \"nginx:doesnotexist\": "))
    );
    assert!(d.events.iter().any(|e| e == "Failed Error: ErrImagePull"));
    d.at(2200);
    assert_eq!(d.waiting_reason().as_deref(), Some("ImagePullBackOff"));
    assert!(
        d.events
            .iter()
            .any(|e| e == "BackOff Back-off pulling image \"nginx:doesnotexist\"")
    );
    assert_eq!(d.status().phase.as_deref(), Some("Pending"));
    // First retry 10 s after the failure, pull takes 1.2 s, then the next back-off is 20 s.
    let mut failures = Vec::new();
    let mut now = 2200;
    while failures.len() < 4 {
        let s = d.at(now);
        if let Stage::PullFailed {
            since,
            backing_off: false,
        } = d.memory.stage
            && failures.last() != Some(&since)
        {
            failures.push(since);
        }
        now = s
            .wake_at
            .map_or(now + 1000, |w| w.as_millisecond() - t(0).as_millisecond());
    }
    let gaps: Vec<i64> = failures
        .windows(2)
        .map(|w| (w[1] - w[0]).get_milliseconds() + (w[1] - w[0]).get_seconds() * 1000)
        .collect();
    assert_eq!(gaps, [21_200, 41_200, 81_200]);
}

#[test]
fn image_pull_failure_by_annotation() {
    let mut d = Driver::new(
        pod("nginx", &[("miniplane.dev/fail", "image-pull")], "Always"),
        StageConfig::fast(),
    );
    d.at(0);
    assert_eq!(d.waiting_reason().as_deref(), Some("ErrImagePull"));
}

#[test]
fn backoff_sequence_doubles_to_five_minutes() {
    let base = Duration::from_secs(10);
    let max = Duration::from_secs(300);
    let seq: Vec<u64> = (1..=8).map(|n| backoff(n, base, max).as_secs()).collect();
    assert_eq!(seq, [10, 20, 40, 80, 160, 300, 300, 300]);
}

#[test]
fn crash_loop_restarts_with_growing_back_off() {
    let mut d = Driver::new(
        pod("nginx", &[("miniplane.dev/fail", "crash")], "Always"),
        StageConfig::realistic(),
    );
    let mut restarts_at = Vec::new();
    let mut now = 0;
    let mut saw_crashloop = false;
    while restarts_at.len() < 4 && now < 1_000_000 {
        let before = d.memory.containers.first().map_or(0, |c| c.restarts);
        let s = d.at(now);
        if d.waiting_reason().as_deref() == Some("CrashLoopBackOff") {
            saw_crashloop = true;
            let cs = &d.status().container_statuses.as_ref().expect("statuses")[0];
            let last = cs
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .expect("lastState.terminated");
            assert_eq!(last.exit_code, 1);
            assert_eq!(last.reason.as_deref(), Some("Error"));
            assert_eq!(d.status().phase.as_deref(), Some("Running"));
        }
        if d.memory.containers.first().map_or(0, |c| c.restarts) > before {
            restarts_at.push(now);
        }
        now = s
            .wake_at
            .map_or(now + 1000, |w| w.as_millisecond() - t(0).as_millisecond());
    }
    assert!(saw_crashloop);
    // As the kubelet's `doBackOff`: start at 1.5 s, run 2 s, the first exit restarts at once
    // (3.5 s); the second waits 10 s (5.5 → 15.5), then 20 s, 40 s (+2 s runs).
    assert_eq!(restarts_at, [3_500, 15_500, 37_500, 79_500]);
    assert_eq!(
        d.status().container_statuses.as_ref().expect("statuses")[0].restart_count,
        4
    );
    assert!(d.events.iter().any(
        |e| e == "BackOff Back-off restarting failed container nginx in pod web_default(uid-1)"
    ));
    assert!(
        d.events
            .iter()
            .any(|e| e == "Pulled Container image \"nginx\" already present on machine")
    );
}

#[test]
fn completion_with_restart_policy_never_and_on_failure() {
    for (fail, policy, phase, reason, code) in [
        ("exit-0", "Never", "Succeeded", "Completed", 0),
        ("exit-1", "Never", "Failed", "Error", 1),
        ("exit-0", "OnFailure", "Succeeded", "Completed", 0),
    ] {
        let mut d = Driver::new(
            pod(
                "busybox",
                &[
                    ("miniplane.dev/fail", fail),
                    ("miniplane.dev/run-for", "3s"),
                ],
                policy,
            ),
            StageConfig::fast(),
        );
        assert_eq!(d.at(0).wake_at, Some(t(3000)));
        let s = d.at(3000);
        assert_eq!(s.wake_at, None);
        assert_eq!(d.status().phase.as_deref(), Some(phase), "{fail} {policy}");
        let cs = &d.status().container_statuses.as_ref().expect("statuses")[0];
        let term = cs
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated");
        assert_eq!(
            (term.exit_code, term.reason.as_deref()),
            (code, Some(reason))
        );
        assert_eq!(term.finished_at, Some(Time(t(3000))));
        assert!(!cs.ready);
        assert_eq!(d.condition("Ready"), "False");
    }
    // OnFailure restarts a failing container.
    let mut d = Driver::new(
        pod("busybox", &[("miniplane.dev/fail", "exit-1")], "OnFailure"),
        StageConfig::fast(),
    );
    d.at(0);
    d.at(500);
    assert_eq!(d.waiting_reason(), None, "the first restart is immediate");
    d.at(1000);
    assert_eq!(d.waiting_reason().as_deref(), Some("CrashLoopBackOff"));
    assert_eq!(d.status().phase.as_deref(), Some("Running"));
}

#[test]
fn graceful_deletion_kills_then_deletes_after_capped_grace() {
    let mut d = Driver::new(pod("nginx", &[], "Always"), StageConfig::realistic());
    d.at(0);
    d.at(1500);
    d.events.clear();
    d.pod.metadata.deletion_timestamp = Some(Time(t(2000)));
    d.pod.metadata.deletion_grace_period_seconds = Some(5);
    let s = d.at(2000);
    assert!(!s.delete);
    assert_eq!(s.wake_at, Some(t(7000)), "min(grace 5 s, cap 30 s)");
    assert_eq!(d.events, ["Killing Stopping container nginx"]);
    assert_eq!(d.condition("Ready"), "False");
    assert!(!d.at(6999).delete);
    assert!(d.at(7000).delete);

    // The cap wins over a long grace period.
    let mut d = Driver::new(pod("nginx", &[], "Always"), StageConfig::fast());
    d.at(0);
    d.pod.metadata.deletion_timestamp = Some(Time(t(10)));
    d.pod.metadata.deletion_grace_period_seconds = Some(30);
    assert_eq!(d.at(10).wake_at, Some(t(210)));
    assert!(d.at(210).delete);
}

#[test]
fn deleting_a_pod_that_never_ran_is_immediate() {
    let mut p = pod("nginx:doesnotexist", &[], "Always");
    p.metadata.deletion_timestamp = Some(Time(t(0)));
    let mut d = Driver::new(p, StageConfig::realistic());
    let s = d.at(0);
    assert!(s.delete);
    assert!(
        d.events.is_empty(),
        "no Killing for containers that never started"
    );
}

#[test]
fn condition_transition_times_are_kept() {
    let mut d = Driver::new(pod("nginx", &[], "Always"), slow());
    d.at(0);
    let scheduled = |d: &Driver| {
        d.status()
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "PodScheduled")
            .and_then(|c| c.last_transition_time.clone())
    };
    assert_eq!(scheduled(&d), Some(Time(t(0))));
    d.at(1500);
    assert_eq!(scheduled(&d), Some(Time(t(0))));
}

#[test]
fn a_restarted_kubelet_recovers_running_and_completed_pods() {
    let mut d = Driver::new(pod("nginx", &[], "Always"), StageConfig::fast());
    d.at(0);
    let recovered = PodMemory::recover(&d.pod, t(9000));
    assert_eq!(recovered, d.memory);
    let s = step(
        &d.pod,
        &recovered,
        &node(),
        "10.244.0.2",
        t(9000),
        &d.config,
    );
    assert_eq!(
        (s.status, s.events.len()),
        (None, 0),
        "nothing re-run, nothing re-posted"
    );

    let mut d = Driver::new(
        pod("b", &[("miniplane.dev/fail", "exit-0")], "Never"),
        StageConfig::fast(),
    );
    d.at(0);
    d.at(500);
    let recovered = PodMemory::recover(&d.pod, t(9000));
    assert_eq!(recovered.stage, Stage::Completed);
    let s = step(
        &d.pod,
        &recovered,
        &node(),
        "10.244.0.2",
        t(9000),
        &d.config,
    );
    assert_eq!(s.status, None);

    let fresh = pod("nginx", &[], "Always");
    assert_eq!(PodMemory::recover(&fresh, t(0)), PodMemory::new("uid-1"));
}

fn with_policy(mut pod: Pod, policy: &str) -> Pod {
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers[0].image_pull_policy = Some(policy.into());
    }
    pod
}

#[test]
fn an_image_already_on_the_node_is_not_pulled_again_unless_the_policy_says_always() {
    let present = |image: &str| image == "nginx:1.27";
    // One sync on a node that has `nginx:1.27`.
    let sync = |p: &Pod, memory: &PodMemory, now: Timestamp, config: &StageConfig| {
        step_on(p, memory, &node(), &present, "10.244.0.2", now, config)
    };
    // IfNotPresent, image on the node: one "already present" event, no pull delay.
    let p = with_policy(pod("nginx:1.27", &[], "Always"), "IfNotPresent");
    let s = sync(&p, &PodMemory::new("uid-1"), t(0), &slow());
    let events: Vec<String> = s
        .events
        .iter()
        .map(|e| format!("{} {}", e.reason, e.message))
        .collect();
    assert_eq!(
        events,
        ["Pulled Container image \"nginx:1.27\" already present on machine"]
    );
    assert!(s.pulled.is_empty());
    assert_eq!(
        s.wake_at,
        Some(t(500)),
        "only the start delay, no pull delay"
    );
    let s = sync(&p, &s.memory, t(500), &slow());
    let reasons: Vec<&str> = s.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["Created", "Started"]);
    assert_eq!(s.memory.stage, Stage::Running);

    // Always: pulled even though it is on the node.
    let p = with_policy(pod("nginx:1.27", &[], "Always"), "Always");
    let s = sync(&p, &PodMemory::new("uid-1"), t(0), &StageConfig::fast());
    let reasons: Vec<&str> = s.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["Pulling", "Pulled", "Created", "Started"]);
    assert_eq!(s.pulled, ["nginx:1.27"]);

    // IfNotPresent, image absent: pulled (and reported as pulled, for the node to keep).
    let p = with_policy(pod("redis:7", &[], "Always"), "IfNotPresent");
    let s = sync(&p, &PodMemory::new("uid-1"), t(0), &slow());
    assert_eq!(s.events[0].message, "Pulling image \"redis:7\"");
    assert_eq!(s.wake_at, Some(t(1500)), "pull delay, then start delay");
    let s = sync(&p, &s.memory, t(1500), &slow());
    assert_eq!(s.pulled, ["redis:7"]);
    assert!(
        s.events[0]
            .message
            .starts_with("Successfully pulled image \"redis:7\" in 1.000s")
    );

    // A pull made to fail is tried even if the image is on the node.
    let p = with_policy(
        pod(
            "nginx:1.27",
            &[("miniplane.dev/fail", "image-pull")],
            "Always",
        ),
        "IfNotPresent",
    );
    let s = step_on(
        &p,
        &PodMemory::new("uid-1"),
        &node(),
        &|_| true,
        "10.244.0.2",
        t(0),
        &StageConfig::fast(),
    );
    assert_eq!(s.events[0].reason, "Pulling");
    assert!(
        s.pulled.is_empty(),
        "a failed pull leaves nothing on the node"
    );
}

#[test]
fn the_pull_follows_the_policy_the_api_server_set() {
    let overrides = PodOverrides::default();
    let container = |policy: Option<&str>| Container {
        name: "c".into(),
        image: Some("nginx:1.27".into()),
        image_pull_policy: policy.map(Into::into),
        ..Default::default()
    };
    for (policy, present, pulls) in [
        (Some("Always"), true, true),
        (Some("Always"), false, true),
        (Some("IfNotPresent"), true, false),
        (Some("IfNotPresent"), false, true),
        (None, true, false),
        (None, false, true),
    ] {
        let on_node = move |_: &str| present;
        assert_eq!(
            needs_pull(&container(policy), &overrides, &on_node),
            pulls,
            "{policy:?}, present {present}"
        );
    }
}
