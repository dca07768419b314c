//! What a restarted simulated kubelet remembers of a pod: rebuilt from the status it posted
//! before ([`PodMemory::recover`]), as the real kubelet asks the container runtime what runs
//! (`kuberuntime_manager.go` `GetPodStatus` after a restart).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};

use crate::containers::{self, ContainerMemory};
use crate::stages::{PodMemory, Stage, Termination, container_id};

impl PodMemory {
    /// The memory a restarted kubelet rebuilds from the status it posted before (as the real
    /// kubelet asks the container runtime what is running): running containers keep running
    /// with their start time and restart count, exited ones keep how they ended, one in
    /// back-off is restarted; a finished pod stays finished; a pod none of whose containers ran
    /// starts over. `now` is when the kubelet restarted: a container that was in back-off is
    /// restarted then (the back-off itself was only in the old kubelet's memory). Ephemeral
    /// containers come last, as in [`crate::plan::plans`]; one that was still pulling is
    /// pulled again.
    pub fn recover(pod: &Pod, now: Timestamp) -> Self {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut memory = PodMemory::new(uid.clone());
        let Some(status) = pod.status.as_ref() else {
            return memory;
        };
        let statuses: Vec<&ContainerStatus> = status
            .init_container_statuses
            .iter()
            .chain(status.container_statuses.iter())
            .chain(status.ephemeral_container_statuses.iter())
            .flatten()
            .collect();
        let names = pod.spec.as_ref().map_or(Vec::new(), |s| {
            s.init_containers
                .iter()
                .flatten()
                .chain(s.containers.iter())
                .map(|c| c.name.as_str())
                .chain(
                    s.ephemeral_containers
                        .iter()
                        .flatten()
                        .map(|c| c.name.as_str()),
                )
                .collect()
        });
        let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        let containers: Vec<ContainerMemory> = names
            .iter()
            .map(|name| {
                statuses
                    .iter()
                    .find(|s| s.name == *name)
                    .map_or_else(ContainerMemory::waiting, |s| {
                        recover_container(&uid, s, terminal, now)
                    })
            })
            .collect();
        if containers
            .iter()
            .all(|c| c.state == containers::State::Waiting)
        {
            return memory;
        }
        memory.start_time = status.start_time.as_ref().map(|t| t.0);
        memory.containers = containers;
        memory.stage = if terminal {
            Stage::Completed
        } else {
            Stage::Running
        };
        memory
    }
}

fn termination_of(uid: &str, name: &str, run: i32, t: &ContainerStateTerminated) -> Termination {
    let at = t
        .finished_at
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |f| f.0);
    Termination {
        exit_code: t.exit_code,
        reason: if t.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        },
        started_at: t.started_at.as_ref().map_or(at, |s| s.0),
        finished_at: at,
        container_id: t
            .container_id
            .clone()
            .unwrap_or_else(|| container_id(uid, name, run)),
    }
}

fn recover_container(
    uid: &str,
    s: &ContainerStatus,
    terminal: bool,
    now: Timestamp,
) -> ContainerMemory {
    let mut m = ContainerMemory::waiting();
    m.restarts = s.restart_count;
    let state = s.state.clone().unwrap_or_default();
    let last = s
        .last_state
        .as_ref()
        .and_then(|l| l.terminated.as_ref())
        .map(|t| Box::new(termination_of(uid, &s.name, s.restart_count - 1, t)));
    if let Some(running) = state.running.filter(|_| !terminal) {
        let since = running.started_at.map_or(Timestamp::UNIX_EPOCH, |t| t.0);
        m.state = containers::State::Running {
            since,
            started: s.started.unwrap_or(true),
        };
        m.last = last;
    } else if let Some(t) = state.terminated {
        m.state = containers::State::Exited;
        m.previous = last;
        m.last = Some(Box::new(termination_of(uid, &s.name, s.restart_count, &t)));
    } else if let Some(last) = last {
        // In back-off when the kubelet stopped: restarted now.
        m.state = if terminal {
            containers::State::Exited
        } else {
            containers::State::BackOff { until: now }
        };
        m.last = Some(last);
    }
    m
}
