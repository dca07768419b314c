//! Containers one by one: commands that finish, restart policies, init containers, sidecars,
//! probes and graceful termination, driven through [`crate::stages::step`].

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, ExecAction, Lifecycle, LifecycleHandler, Pod, PodSpec, PodStatus,
    Probe,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::config::StageConfig;
use crate::pod_status::NodeContext;
use crate::stages::{PodMemory, Step, step};

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn container(name: &str, command: &[&str]) -> Container {
    Container {
        name: name.into(),
        image: Some("busybox".into()),
        command: (!command.is_empty()).then(|| command.iter().map(|s| (*s).to_owned()).collect()),
        ..Default::default()
    }
}

fn sidecar(name: &str) -> Container {
    Container {
        restart_policy: Some("Always".into()),
        ..container(name, &[])
    }
}

fn pod(policy: &str, init: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("job".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.into()),
            init_containers: (!init.is_empty()).then_some(init),
            containers,
            ..Default::default()
        }),
        status: None,
    }
}

fn annotate(mut pod: Pod, annotations: &[(&str, &str)]) -> Pod {
    pod.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    pod
}

/// Applies each step's status to the pod, as the API server would; records events.
struct Driver {
    pod: Pod,
    memory: PodMemory,
    config: StageConfig,
    events: Vec<String>,
}

impl Driver {
    fn new(pod: Pod) -> Self {
        Driver {
            pod,
            memory: PodMemory::new("uid-1"),
            config: StageConfig::realistic_zero_delays(),
            events: Vec::new(),
        }
    }

    fn at(&mut self, s: i64) -> Step {
        let node = NodeContext {
            name: "node-0".into(),
            host_ip: "172.16.0.2".into(),
        };
        let r = step(
            &self.pod,
            &self.memory,
            &node,
            "10.244.0.7",
            t(s),
            &self.config,
        );
        self.memory = r.memory.clone();
        if let Some(status) = &r.status {
            self.pod.status = Some(status.clone());
        }
        self.events.extend(
            r.events
                .iter()
                .map(|e| format!("{} {}", e.reason, e.message)),
        );
        r
    }

    fn status(&self) -> &PodStatus {
        self.pod.status.as_ref().expect("a status was posted")
    }

    fn phase(&self) -> &str {
        self.status().phase.as_deref().unwrap_or_default()
    }

    fn container(&self, name: &str) -> &ContainerStatus {
        self.status()
            .init_container_statuses
            .iter()
            .chain(self.status().container_statuses.iter())
            .flatten()
            .find(|c| c.name == name)
            .expect("a status for the container")
    }

    /// `running`, `waiting:<reason>` or `terminated:<code>:<reason>`.
    fn state(&self, name: &str) -> String {
        let state = self.container(name).state.clone().unwrap_or_default();
        if state.running.is_some() {
            "running".into()
        } else if let Some(w) = state.waiting {
            format!("waiting:{}", w.reason.unwrap_or_default())
        } else if let Some(t) = state.terminated {
            format!(
                "terminated:{}:{}",
                t.exit_code,
                t.reason.unwrap_or_default()
            )
        } else {
            "none".into()
        }
    }

    /// `status reason message` of a condition.
    fn condition(&self, type_: &str) -> String {
        let c = self
            .status()
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == type_)
            .expect("the condition");
        format!(
            "{} {} {}",
            c.status,
            c.reason.as_deref().unwrap_or("-"),
            c.message.as_deref().unwrap_or("-")
        )
    }
}

impl StageConfig {
    /// Kubernetes' back-off (10 s doubling to 5 min) without pull or start delays.
    fn realistic_zero_delays() -> Self {
        StageConfig {
            pull_delay: Duration::ZERO,
            start_delay: Duration::ZERO,
            ..StageConfig::realistic()
        }
    }
}

#[test]
fn the_docs_pi_job_succeeds_after_computing() {
    let perl = ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"];
    let mut d = Driver::new(pod("Never", vec![], vec![container("pi", &perl)]));
    assert_eq!(d.at(0).wake_at, Some(t(5)));
    assert_eq!(d.phase(), "Running");
    let s = d.at(5);
    assert_eq!(s.wake_at, None);
    assert_eq!(d.phase(), "Succeeded");
    assert_eq!(d.state("pi"), "terminated:0:Completed");
    let term = d
        .container("pi")
        .state
        .clone()
        .unwrap_or_default()
        .terminated;
    assert_eq!(
        term.map(|t| (t.started_at, t.finished_at)),
        Some((Some(Time(t(0))), Some(Time(t(5)))))
    );
    assert_eq!(d.condition("Ready"), "False PodCompleted -");
    assert_eq!(d.condition("ContainersReady"), "False PodCompleted -");
    assert_eq!(d.condition("Initialized"), "True PodCompleted -");
}

#[test]
fn a_shell_script_that_exits_non_zero_fails_the_pod_under_never() {
    let script = ["sh", "-c", "echo hi; sleep 5; exit 3"];
    let mut d = Driver::new(pod("Never", vec![], vec![container("job", &script)]));
    d.at(0);
    d.at(5);
    assert_eq!(d.phase(), "Failed");
    assert_eq!(d.state("job"), "terminated:3:Error");
    assert_eq!(d.condition("Ready"), "False PodFailed -");
    assert_eq!(d.container("job").restart_count, 0);
}

#[test]
fn per_container_annotations_and_get_phase_with_one_still_running() {
    let p = annotate(
        pod(
            "Never",
            vec![],
            vec![container("web", &[]), container("task", &[])],
        ),
        &[
            ("miniplane.dev/run-for.task", "2s"),
            ("miniplane.dev/exit-code.task", "2"),
        ],
    );
    let mut d = Driver::new(p);
    d.at(0);
    d.at(2);
    // One failed for good, one still running: getPhase says Running.
    assert_eq!(d.state("task"), "terminated:2:Error");
    assert_eq!(d.state("web"), "running");
    assert_eq!(d.phase(), "Running");
    assert_eq!(
        d.condition("ContainersReady"),
        "False ContainersNotReady containers with unready status: [task]"
    );

    // OnFailure: exit 0 is done, exit ≠ 0 restarts.
    let p = annotate(
        pod(
            "OnFailure",
            vec![],
            vec![container("ok", &["true"]), container("bad", &["false"])],
        ),
        &[],
    );
    let mut d = Driver::new(p);
    d.at(0);
    assert_eq!(d.state("ok"), "terminated:0:Completed");
    assert_eq!(d.state("bad"), "waiting:CrashLoopBackOff");
    assert_eq!(
        d.container("bad").restart_count,
        1,
        "the first restart is at once"
    );
    assert_eq!(d.phase(), "Running");
    let waiting = d.container("bad").state.clone().unwrap_or_default().waiting;
    assert_eq!(
        waiting.and_then(|w| w.message).as_deref(),
        Some("back-off 10s restarting failed container=bad pod=job_default(uid-1)")
    );
    assert!(d.events.contains(
        &"BackOff Back-off restarting failed container bad in pod job_default(uid-1)".to_owned()
    ));
}

#[test]
fn init_containers_run_in_order_before_the_regular_ones() {
    let p = pod(
        "Always",
        vec![
            container("migrate", &["sleep", "2"]),
            container("seed", &["sleep", "3"]),
        ],
        vec![container("app", &[])],
    );
    let mut d = Driver::new(p);
    assert_eq!(d.at(0).wake_at, Some(t(2)));
    assert_eq!(d.state("migrate"), "running");
    assert_eq!(d.state("seed"), "waiting:PodInitializing");
    assert_eq!(d.state("app"), "waiting:PodInitializing");
    assert_eq!(d.phase(), "Pending");
    assert_eq!(
        d.condition("Initialized"),
        "False ContainersNotInitialized containers with incomplete status: [migrate seed]"
    );
    d.at(2);
    assert_eq!(d.state("migrate"), "terminated:0:Completed");
    assert!(
        d.container("migrate").ready,
        "a finished init container is ready"
    );
    assert_eq!(d.state("seed"), "running");
    d.at(5);
    assert_eq!(d.state("seed"), "terminated:0:Completed");
    assert_eq!(d.state("app"), "running");
    assert_eq!(d.phase(), "Running");
    assert_eq!(d.condition("Initialized"), "True - -");
    assert_eq!(d.condition("Ready"), "True - -");
}

#[test]
fn a_failing_init_container_fails_the_pod_under_never_and_retries_otherwise() {
    let init = || vec![container("check", &["sh", "-c", "sleep 1; exit 1"])];
    let mut d = Driver::new(pod("Never", init(), vec![container("app", &[])]));
    d.at(0);
    d.at(1);
    assert_eq!(d.phase(), "Failed");
    assert_eq!(d.state("check"), "terminated:1:Error");
    assert_eq!(d.state("app"), "waiting:PodInitializing");
    assert!(d.at(100).wake_at.is_none());

    let mut d = Driver::new(pod("Always", init(), vec![container("app", &[])]));
    d.at(0);
    d.at(1); // exits, restarted at once
    assert_eq!(d.container("check").restart_count, 1);
    d.at(2); // exits again: back-off 10 s
    assert_eq!(d.state("check"), "waiting:CrashLoopBackOff");
    assert_eq!(d.phase(), "Pending");
    assert_eq!(d.state("app"), "waiting:PodInitializing");
    assert_eq!(d.at(3).wake_at, Some(t(12)));
}

#[test]
fn sidecars_start_in_order_and_stop_after_the_job_succeeds() {
    let mut proxy = sidecar("proxy");
    proxy.startup_probe = Some(Probe {
        initial_delay_seconds: Some(4),
        ..Default::default()
    });
    let p = pod(
        "Never",
        vec![proxy, container("init", &["true"])],
        vec![container("main", &["sleep", "3"])],
    );
    let mut d = Driver::new(p);
    d.at(0);
    // The next init container waits for the sidecar's startup probe.
    assert_eq!(d.state("proxy"), "running");
    assert_eq!(d.container("proxy").started, Some(false));
    assert_eq!(d.state("init"), "waiting:PodInitializing");
    d.at(4);
    assert_eq!(d.container("proxy").started, Some(true));
    assert_eq!(d.state("init"), "terminated:0:Completed");
    assert_eq!(d.state("main"), "running");
    assert_eq!(d.phase(), "Running");
    d.events.clear();
    d.at(7);
    // The regular container finished: the pod is done though the sidecar ran forever.
    assert_eq!(d.state("main"), "terminated:0:Completed");
    assert_eq!(d.state("proxy"), "terminated:0:Completed");
    assert_eq!(d.phase(), "Succeeded");
    assert_eq!(d.events, ["Killing Stopping container proxy"]);
}

#[test]
fn a_failing_liveness_probe_kills_and_restarts_the_container() {
    let mut web = container("web", &[]);
    web.liveness_probe = Some(Probe {
        period_seconds: Some(10),
        failure_threshold: Some(3),
        http_get: Some(Default::default()),
        ..Default::default()
    });
    let p = annotate(
        pod("Always", vec![], vec![web]),
        &[("miniplane.dev/liveness-fails-after", "30s")],
    );
    let mut d = Driver::new(p);
    assert_eq!(d.at(0).wake_at, Some(t(50)), "fails at 30, 40, 50");
    d.at(50);
    assert_eq!(d.container("web").restart_count, 1);
    assert_eq!(d.state("web"), "running");
    let last = d
        .container("web")
        .last_state
        .clone()
        .unwrap_or_default()
        .terminated;
    assert_eq!(
        last.map(|t| (t.exit_code, t.reason)),
        Some((137, Some("Error".into())))
    );
    let unhealthy = "Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 500";
    assert_eq!(d.events.iter().filter(|e| *e == unhealthy).count(), 3);
    assert!(
        d.events
            .contains(&"Killing Container web failed liveness probe, will be restarted".to_owned())
    );
}

#[test]
fn readiness_and_startup_probes_gate_ready() {
    let mut web = container("web", &[]);
    web.startup_probe = Some(Probe {
        initial_delay_seconds: Some(5),
        ..Default::default()
    });
    web.readiness_probe = Some(Probe {
        period_seconds: Some(5),
        success_threshold: Some(2),
        failure_threshold: Some(1),
        ..Default::default()
    });
    let p = annotate(
        pod("Always", vec![], vec![web]),
        &[("miniplane.dev/readiness-fails-after", "21s")],
    );
    let mut d = Driver::new(p);
    d.at(0);
    assert_eq!(d.container("web").started, Some(false));
    d.at(5);
    assert_eq!(d.container("web").started, Some(true));
    assert!(
        !d.container("web").ready,
        "two successes needed: at 5 and 10"
    );
    d.at(10);
    assert_eq!(d.condition("Ready"), "True - -");
    d.events.clear();
    d.at(25);
    assert_eq!(
        d.condition("Ready"),
        "False ContainersNotReady containers with unready status: [web]"
    );
    assert_eq!(
        d.events,
        ["Unhealthy Readiness probe failed: "],
        "reported once"
    );
    d.at(60);
    assert_eq!(d.events.len(), 1);
}

#[test]
fn a_startup_probe_that_never_passes_restarts_the_container() {
    let mut web = container("web", &[]);
    web.startup_probe = Some(Probe {
        period_seconds: Some(5),
        failure_threshold: Some(2),
        tcp_socket: Some(k8s_openapi::api::core::v1::TCPSocketAction {
            port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80),
            ..Default::default()
        }),
        ..Default::default()
    });
    let p = annotate(
        pod("Always", vec![], vec![web]),
        &[("miniplane.dev/startup-fails-after.web", "0s")],
    );
    let mut d = Driver::new(p);
    assert_eq!(d.at(0).wake_at, Some(t(5)), "attempts at 0 and 5 fail");
    assert_eq!(d.phase(), "Running");
    assert!(!d.container("web").ready);
    d.at(5);
    assert_eq!(d.container("web").restart_count, 1);
    assert_eq!(
        d.events[d.events.len() - 6..],
        [
            "Unhealthy Startup probe failed: dial tcp 10.244.0.7:80: connect: connection refused",
            "Unhealthy Startup probe failed: dial tcp 10.244.0.7:80: connect: connection refused",
            "Killing Container web failed startup probe, will be restarted",
            "Pulled Container image \"busybox\" already present on machine",
            "Created Created container: web",
            "Started Started container web",
        ]
    );
}

#[test]
fn a_restarted_kubelet_recovers_init_containers_and_back_off() {
    let p = pod(
        "Always",
        vec![container("migrate", &["true"])],
        vec![container("app", &["false"])],
    );
    let mut d = Driver::new(p);
    d.at(0);
    assert_eq!(d.state("migrate"), "terminated:0:Completed");
    assert_eq!(d.state("app"), "waiting:CrashLoopBackOff");
    let recovered = PodMemory::recover(&d.pod, t(30));
    assert_eq!(recovered.stage, crate::stages::Stage::Running);
    assert_eq!(
        recovered.containers[0].state,
        crate::containers::State::Exited
    );
    assert_eq!(recovered.containers[1].restarts, 1);
    assert!(matches!(
        recovered.containers[1].state,
        crate::containers::State::BackOff { .. }
    ));
    // The init container is not run again; the crashing one is restarted.
    let node = NodeContext {
        name: "node-0".into(),
        host_ip: "172.16.0.2".into(),
    };
    let s = step(&d.pod, &recovered, &node, "10.244.0.7", t(30), &d.config);
    assert!(
        s.events
            .iter()
            .all(|e| e.container.as_deref() == Some("app"))
    );
    // Restarted at 30 s; the new kubelet has no back-off for it yet, so its next exit
    // restarts it at once too (3), and only the one after waits.
    assert_eq!(s.memory.containers[1].restarts, 3);
    assert_eq!(s.wake_at, Some(t(40)));
}

#[test]
fn graceful_termination_runs_pre_stop_then_sigterm_and_stops_sidecars_last() {
    let mut app = container("app", &[]);
    app.lifecycle = Some(Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction {
                command: Some(vec!["sleep".into(), "3".into()]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let p = annotate(
        pod("Always", vec![sidecar("proxy")], vec![app]),
        &[("miniplane.dev/stop-after", "1s")],
    );
    let mut d = Driver::new(p);
    d.at(0);
    d.events.clear();
    d.pod.metadata.deletion_timestamp = Some(Time(t(10)));
    d.pod.metadata.deletion_grace_period_seconds = Some(30);
    // app: preStop 3 s + 1 s after SIGTERM → 14; then proxy: 1 s → 15.
    assert_eq!(d.at(10).wake_at, Some(t(15)));
    assert_eq!(
        d.events,
        [
            "Killing Stopping container app",
            "Killing Stopping container proxy"
        ]
    );
    d.at(14);
    assert_eq!(d.state("app"), "terminated:0:Completed");
    assert_eq!(d.state("proxy"), "running");
    assert!(d.at(15).delete);

    // Without stop-after the container ignores SIGTERM: killed (137) when the grace ends.
    let mut d = Driver::new(pod("Always", vec![], vec![container("app", &[])]));
    d.at(0);
    d.pod.metadata.deletion_timestamp = Some(Time(t(1)));
    d.pod.metadata.deletion_grace_period_seconds = Some(5);
    assert_eq!(d.at(1).wake_at, Some(t(6)));
    assert!(d.at(6).delete);
}

#[test]
fn back_off_resets_after_ten_minutes_of_running() {
    let p = annotate(
        pod("Always", vec![], vec![container("app", &[])]),
        &[
            ("miniplane.dev/fail", "crash"),
            ("miniplane.dev/run-for", "11m"),
        ],
    );
    let mut d = Driver::new(p);
    d.at(0);
    for run in 1..=3 {
        d.at(run * 660);
        assert_eq!(d.state("app"), "running", "run {run} restarted at once");
        assert_eq!(
            d.container("app").restart_count,
            i32::try_from(run).unwrap_or(0)
        );
    }
}
