//! What a cluster starts, whichever way it runs its components: the [`Plan`] (which
//! components, how many nodes, the port, tracing) and the simulated kubelets' settings
//! ([`KubeletProfile`], [`KubeletOptions`]). Both launchers (`in_process`, `separate`) and
//! the component restarts (`component_faults`) read it; it imports none of them.

use std::collections::BTreeMap;

use apiserver::TracingOptions;

/// The components and settings of a cluster being started.
pub(crate) struct Plan {
    /// Simulated nodes (no kubelet process or task if 0).
    pub(crate) nodes: usize,
    /// Whether the controller-manager runs.
    pub(crate) controller_manager: bool,
    /// Whether the scheduler runs.
    pub(crate) scheduler: bool,
    /// Whether the controller-manager and the scheduler campaign for their Leases
    /// (`--leader-elect`).
    pub(crate) leader_elect: bool,
    /// Where the API server's `componentstatuses` probes the components' `/healthz`.
    pub(crate) component_probes: apiserver::ComponentProbes,
    /// The API server's port on 127.0.0.1 (0: a free one).
    pub(crate) port: u16,
    /// Whether a write is acknowledged only once it is on disk.
    pub(crate) fsync: bool,
    /// Heartbeats every 200 ms and a 2 s node-monitor grace period (labs and tests of node
    /// failure), instead of Kubernetes' 10 s and 40 s.
    pub(crate) fast_node_lifecycle: bool,
    /// The API server's tracing settings; with `enabled` off the other components report no
    /// spans either.
    pub(crate) tracing: TracingOptions,
    /// How the simulated kubelets run pods and what their nodes look like.
    pub(crate) kubelet: KubeletOptions,
}

/// How fast the simulated kubelets move a pod through its stages: `miniplane kubelet
/// --profile` ([`kubelet_sim::StageConfig::fast`] and [`kubelet_sim::StageConfig::realistic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KubeletProfile {
    /// No delays: a pod is Running as soon as it is bound (tests; the library's default).
    #[default]
    Fast,
    /// About what a laptop's kubelet shows: a 1.2 s image pull, 0.3 s to start the container,
    /// Kubernetes' back-off (`miniplane up`'s default).
    Realistic,
}

impl KubeletProfile {
    /// Its name, as `miniplane kubelet --profile` and `miniplane up --kubelet-profile` take it.
    pub fn name(self) -> &'static str {
        match self {
            KubeletProfile::Fast => "fast",
            KubeletProfile::Realistic => "realistic",
        }
    }

    /// The stage timing it stands for.
    pub fn stages(self) -> kubelet_sim::StageConfig {
        match self {
            KubeletProfile::Fast => kubelet_sim::StageConfig::fast(),
            KubeletProfile::Realistic => kubelet_sim::StageConfig::realistic(),
        }
    }
}

impl std::str::FromStr for KubeletProfile {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "fast" => Ok(KubeletProfile::Fast),
            "realistic" => Ok(KubeletProfile::Realistic),
            other => Err(format!(
                "unknown kubelet profile {other:?} (fast, realistic)"
            )),
        }
    }
}

/// The simulated kubelets' settings a cluster passes on (in this process, or as the flags of
/// `miniplane kubelet`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct KubeletOptions {
    /// Pod stage timing (`--profile`).
    pub(crate) profile: KubeletProfile,
    /// Each node's `cpu` capacity and allocatable, a quantity (`--cpu`; the kubelet's default
    /// if unset).
    pub(crate) cpu: Option<String>,
    /// Each node's `memory` capacity and allocatable, a quantity (`--memory`).
    pub(crate) memory: Option<String>,
    /// Extra labels on every node (`--node-labels`).
    pub(crate) labels: BTreeMap<String, String>,
}

impl KubeletOptions {
    /// Applies these settings to a simulator's configuration.
    pub(crate) fn apply_to(&self, config: &mut kubelet_sim::Config) {
        config.stages = self.profile.stages();
        if let Some(cpu) = &self.cpu {
            config.capacity.cpu = cpu.clone();
        }
        if let Some(memory) = &self.memory {
            config.capacity.memory = memory.clone();
        }
        config.labels.extend(self.labels.clone());
    }

    /// The same settings as flags of `miniplane kubelet`.
    pub(crate) fn args(&self) -> Vec<String> {
        let mut args = vec!["--profile".to_owned(), self.profile.name().to_owned()];
        if let Some(cpu) = &self.cpu {
            args.extend(["--cpu".to_owned(), cpu.clone()]);
        }
        if let Some(memory) = &self.memory {
            args.extend(["--memory".to_owned(), memory.clone()]);
        }
        if !self.labels.is_empty() {
            let labels: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            args.extend(["--node-labels".to_owned(), labels.join(",")]);
        }
        args
    }
}
