//! Processes that end outside their plan ([`ProcessExit`]: `kill 1`, a shell's `exit`) and
//! ephemeral containers ([`crate::ephemeral`]), driven through [`crate::stages::step_with`].

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, EphemeralContainer, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::config::StageConfig;
use crate::containers::ProcessExit;
use crate::pod_status::NodeContext;
use crate::stages::{PodEvent, PodMemory, Runtime, Step, step_with};

fn t(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn pod(policy: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some(policy.into()),
            containers: vec![Container {
                name: "nginx".into(),
                image: Some("nginx:1.27".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

fn debug_container(name: &str, image: &str, command: &[&str]) -> EphemeralContainer {
    EphemeralContainer {
        name: name.into(),
        image: Some(image.into()),
        image_pull_policy: Some("Always".into()),
        command: (!command.is_empty()).then(|| command.iter().map(|s| (*s).to_owned()).collect()),
        target_container_name: Some("nginx".into()),
        stdin: Some(true),
        tty: Some(true),
        ..Default::default()
    }
}

/// Applies each step's status to the pod, as the API server would; keeps the events and the
/// exits reported until a step took them.
struct Driver {
    pod: Pod,
    memory: PodMemory,
    config: StageConfig,
    events: Vec<PodEvent>,
    exits: Vec<ProcessExit>,
}

impl Driver {
    fn new(pod: Pod, config: StageConfig) -> Self {
        Driver {
            pod,
            memory: PodMemory::new("uid-1"),
            config,
            events: Vec::new(),
            exits: Vec::new(),
        }
    }

    fn at(&mut self, s: i64) -> Step {
        let node = NodeContext {
            name: "node-0".into(),
            host_ip: "172.16.0.2".into(),
        };
        let runtime = Runtime {
            present: &|_| false,
            exits: &self.exits,
        };
        let r = step_with(
            &self.pod,
            &self.memory,
            &node,
            &runtime,
            "10.244.0.7",
            t(s),
            &self.config,
        );
        self.exits.clear();
        self.memory = r.memory.clone();
        if let Some(status) = &r.status {
            self.pod.status = Some(status.clone());
        }
        self.events.extend(r.events.iter().cloned());
        r
    }

    /// The process of run `restarts` of `container` ended at `s` with `code`.
    fn exited(&mut self, container: &str, restarts: i32, code: i32, s: i64) {
        self.exits.push(ProcessExit {
            container: container.into(),
            restarts,
            exit_code: code,
            at: t(s),
        });
    }

    fn status(&self) -> &PodStatus {
        self.pod.status.as_ref().expect("a status was posted")
    }

    fn container(&self, name: &str) -> &ContainerStatus {
        let s = self.status();
        s.container_statuses
            .iter()
            .chain(s.ephemeral_container_statuses.iter())
            .flatten()
            .find(|c| c.name == name)
            .expect("a status for the container")
    }

    /// `running@<s>`, `waiting:<reason>` or `terminated:<code>:<reason>`.
    fn state(&self, name: &str) -> String {
        let state = self.container(name).state.clone().unwrap_or_default();
        if let Some(r) = state.running {
            let at = r.started_at.map_or(0, |t| t.0.as_second() - 1_700_000_000);
            format!("running@{at}")
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

    /// `lastState.terminated` as (exit code, reason, started, finished) in seconds.
    fn last(&self, name: &str) -> Option<(i32, String, i64, i64)> {
        let last = self.container(name).last_state.clone()?.terminated?;
        let sec = |t: Option<Time>| t.map_or(0, |t| t.0.as_second() - 1_700_000_000);
        Some((
            last.exit_code,
            last.reason.unwrap_or_default(),
            sec(last.started_at),
            sec(last.finished_at),
        ))
    }

    fn phase(&self) -> String {
        self.status().phase.clone().unwrap_or_default()
    }

    fn ready(&self) -> String {
        self.status()
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.clone())
            .unwrap_or_default()
    }

    fn reasons(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| format!("{} {}", e.reason, e.container.as_deref().unwrap_or("")))
            .collect()
    }
}

fn zero_delays() -> StageConfig {
    StageConfig {
        pull_delay: Duration::ZERO,
        start_delay: Duration::ZERO,
        ..StageConfig::realistic()
    }
}

#[test]
fn a_killed_main_process_restarts_its_container_with_the_signals_code() {
    let mut d = Driver::new(pod("Always"), zero_delays());
    d.at(0);
    assert_eq!(d.state("nginx"), "running@0");
    d.events.clear();

    // `kill 1` (SIGTERM) at 5 s: run 0 ends with 143, and the first restart is at once.
    d.exited("nginx", 0, 143, 5);
    d.at(6);
    assert_eq!(d.state("nginx"), "running@5");
    assert_eq!(d.container("nginx").restart_count, 1);
    assert_eq!(d.last("nginx"), Some((143, "Error".into(), 0, 5)));
    assert_eq!(
        d.reasons(),
        ["Pulled nginx", "Created nginx", "Started nginx"]
    );
    assert_eq!(d.phase(), "Running");

    // A late report about run 0 changes nothing.
    d.exited("nginx", 0, 137, 7);
    assert!(d.at(7).status.is_none(), "nothing to post");
    assert_eq!(d.container("nginx").restart_count, 1);

    // `kill -9 1` at 8 s: a second exit inside the back-off window waits it out.
    d.exited("nginx", 1, 137, 8);
    d.at(9);
    assert_eq!(d.state("nginx"), "waiting:CrashLoopBackOff");
    assert_eq!(d.last("nginx"), Some((137, "Error".into(), 5, 8)));
    d.at(18);
    assert_eq!(d.state("nginx"), "running@18");
    assert_eq!(d.container("nginx").restart_count, 2);
}

#[test]
fn a_killed_container_of_a_never_restarted_pod_fails_it() {
    let mut d = Driver::new(pod("Never"), zero_delays());
    d.at(0);
    d.exited("nginx", 0, 143, 3);
    d.at(4);
    assert_eq!(d.state("nginx"), "terminated:143:Error");
    assert_eq!(d.container("nginx").restart_count, 0);
    assert_eq!(d.phase(), "Failed");
}

#[test]
fn an_ephemeral_container_is_pulled_started_and_never_restarted() {
    let config = StageConfig {
        pull_delay: Duration::from_secs(2),
        ..zero_delays()
    };
    let mut d = Driver::new(pod("Always"), config);
    d.at(0);
    d.at(2);
    assert_eq!(d.state("nginx"), "running@2");
    assert!(d.status().ephemeral_container_statuses.is_none());
    d.events.clear();

    // `kubectl debug web --image=busybox -c dbg -- sh -c 'echo hi; sleep 3'` at 10 s.
    let dbg = debug_container("dbg", "busybox", &["sh", "-c", "echo hi; sleep 3"]);
    if let Some(spec) = d.pod.spec.as_mut() {
        spec.ephemeral_containers = Some(vec![dbg]);
    }
    d.at(10);
    assert_eq!(d.state("dbg"), "waiting:ContainerCreating");
    assert_eq!(d.reasons(), ["Pulling dbg"]);
    assert!(d.events.iter().all(|e| e.ephemeral && !e.init));
    let next = d.at(11).wake_at;
    assert_eq!(next, Some(t(12)), "woken when the pull is done");
    d.at(12);
    assert_eq!(d.state("dbg"), "running@12");
    assert_eq!(
        d.reasons(),
        ["Pulling dbg", "Pulled dbg", "Created dbg", "Started dbg"]
    );
    let status = d.container("dbg");
    assert!(!status.ready && status.started.is_none());
    assert!(status.container_id.is_some() && !status.image_id.is_empty());
    assert_eq!(
        (d.phase().as_str(), d.ready().as_str()),
        ("Running", "True")
    );

    d.at(15);
    assert_eq!(d.state("dbg"), "terminated:0:Completed");
    d.at(100);
    assert_eq!(d.state("dbg"), "terminated:0:Completed", "never restarted");
    assert_eq!(d.container("dbg").restart_count, 0);
    assert_eq!(
        (d.phase().as_str(), d.ready().as_str()),
        ("Running", "True")
    );
    assert_eq!(
        d.state("nginx"),
        "running@2",
        "the pod's own containers go on"
    );
}

#[test]
fn an_ephemeral_shell_ends_with_its_exit_code_and_stops_with_the_pod() {
    let mut d = Driver::new(pod("Always"), zero_delays());
    d.at(0);
    let shells = vec![
        debug_container("a", "busybox", &[]),
        debug_container("b", "busybox", &[]),
    ];
    if let Some(spec) = d.pod.spec.as_mut() {
        spec.ephemeral_containers = Some(shells);
    }
    d.at(5);
    assert_eq!(d.state("a"), "running@5", "a shell runs until it ends");
    // `exit 3` typed into shell `a` through attach.
    d.exited("a", 0, 3, 8);
    d.at(9);
    assert_eq!(d.state("a"), "terminated:3:Error");
    assert_eq!(d.state("b"), "running@5");
    // The pod's deletion stops the one still running.
    d.pod.metadata.deletion_timestamp = Some(Time(t(20)));
    d.pod.metadata.deletion_grace_period_seconds = Some(1);
    d.events.clear();
    d.at(20);
    assert!(
        d.reasons().contains(&"Killing b".to_owned()),
        "{:?}",
        d.reasons()
    );
    assert!(!d.reasons().contains(&"Killing a".to_owned()));
}

#[test]
fn an_ephemeral_image_that_cannot_be_pulled_backs_off() {
    let mut d = Driver::new(pod("Always"), zero_delays());
    d.at(0);
    if let Some(spec) = d.pod.spec.as_mut() {
        spec.ephemeral_containers = Some(vec![debug_container("dbg", "doesnotexist:1", &[])]);
    }
    d.events.clear();
    d.at(5);
    assert_eq!(d.state("dbg"), "waiting:ErrImagePull");
    assert_eq!(d.reasons(), ["Pulling dbg", "Failed dbg", "Failed dbg"]);
    d.at(6);
    assert_eq!(d.state("dbg"), "waiting:ImagePullBackOff");
    // Kubernetes' image back-off: the pull is tried again after 10 s.
    d.events.clear();
    d.at(15);
    assert_eq!(d.reasons(), ["Pulling dbg", "Failed dbg", "Failed dbg"]);
    assert_eq!(
        (d.phase().as_str(), d.ready().as_str()),
        ("Running", "True")
    );
}

#[test]
fn a_restarted_kubelet_keeps_ephemeral_containers_as_they_were() {
    let mut d = Driver::new(pod("Always"), zero_delays());
    d.at(0);
    if let Some(spec) = d.pod.spec.as_mut() {
        spec.ephemeral_containers = Some(vec![debug_container("dbg", "busybox", &["true"])]);
    }
    d.at(3);
    assert_eq!(d.state("dbg"), "terminated:0:Completed");
    d.memory = PodMemory::recover(&d.pod, t(50));
    assert!(
        d.at(50).status.is_none(),
        "nothing changed: {:?}",
        d.reasons()
    );
    assert_eq!(d.state("dbg"), "terminated:0:Completed");
}
