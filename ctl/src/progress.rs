//! The components of a cluster and the progress a starting cluster reports.
//!
//! `miniplane up` prints each [`Progress`] as one line on stderr (its `Display`):
//!
//! ```text
//! ✓ apiserver http://127.0.0.1:6443 (12 ms)
//! ✓ controller-manager (14 ms)
//! ✓ scheduler (14 ms)
//! ✓ kubelet: 3 nodes registered, control API http://127.0.0.1:41437 (31 ms)
//! ✓ 3/3 nodes Ready (33 ms)
//! ```

use std::fmt;
use std::time::Duration;

/// One component of the control plane, named as its `miniplane` subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Component {
    /// kube-apiserver with the embedded store.
    ApiServer,
    /// kube-controller-manager.
    ControllerManager,
    /// kube-scheduler.
    Scheduler,
    /// The simulated kubelets of every node.
    Kubelet,
    /// The simulated cloud the nodes run on (not a Kubernetes component: the cloud's API).
    Cloud,
    /// The cloud-controller-manager.
    CloudControllerManager,
    /// The metrics-server, behind the API server's aggregation layer.
    MetricsServer,
}

impl Component {
    /// The subcommand that runs it on its own (`miniplane <name>`).
    pub fn name(self) -> &'static str {
        match self {
            Component::ApiServer => "apiserver",
            Component::ControllerManager => "controller-manager",
            Component::Scheduler => "scheduler",
            Component::Kubelet => "kubelet",
            Component::Cloud => "cloud",
            Component::CloudControllerManager => "cloud-controller-manager",
            Component::MetricsServer => "metrics-server",
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A step of a cluster's start, or a component stopping on its own while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A component is up: the API server serves; the others run (the kubelet once every node
    /// has registered).
    Started {
        /// Which one.
        component: Component,
        /// Its address: the API server's URL, the kubelet's control API.
        url: Option<String>,
        /// Its process, when components run as child processes.
        pid: Option<u32>,
        /// Nodes it simulates (the kubelet), instances it holds (the cloud).
        nodes: Option<usize>,
        /// Since the start began.
        elapsed: Duration,
    },
    /// Every node reports `Ready=True` through the API: the cluster is ready.
    NodesReady {
        /// How many nodes.
        nodes: usize,
        /// Since the start began.
        elapsed: Duration,
    },
    /// A component stopped although nobody asked (with `--separate`: its process was killed
    /// or exited).
    Exited {
        /// Which one.
        component: Component,
        /// Its process, when it was one.
        pid: Option<u32>,
        /// How it ended (exit status or error).
        status: String,
    },
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Started {
                component,
                url,
                pid,
                nodes,
                elapsed,
            } => {
                write!(f, "✓ {component}")?;
                match (component, nodes) {
                    (Component::Cloud, Some(1)) => write!(f, ": 1 instance")?,
                    (Component::Cloud, Some(n)) => write!(f, ": {n} instances")?,
                    (_, Some(1)) => write!(f, ": 1 node registered")?,
                    (_, Some(nodes)) => write!(f, ": {nodes} nodes registered")?,
                    (_, None) => {}
                }
                let mut details = Vec::new();
                if let Some(url) = url {
                    details.push(match component {
                        Component::Kubelet => format!("control API {url}"),
                        _ => url.clone(),
                    });
                }
                if let Some(pid) = pid {
                    details.push(format!("pid {pid}"));
                }
                if !details.is_empty() {
                    let sep = if nodes.is_some() { ", " } else { " " };
                    write!(f, "{sep}{}", details.join(", "))?;
                }
                write!(f, " ({})", millis(*elapsed))
            }
            Progress::NodesReady { nodes, elapsed } => {
                write!(f, "✓ {nodes}/{nodes} nodes Ready ({})", millis(*elapsed))
            }
            Progress::Exited {
                component,
                pid: Some(pid),
                status,
            } => write!(f, "✗ {component} (pid {pid}) exited: {status}"),
            Progress::Exited {
                component,
                pid: None,
                status,
            } => write!(f, "✗ {component} stopped: {status}"),
        }
    }
}

/// `12 ms`.
fn millis(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines() {
        let ms = Duration::from_millis;
        let api = Progress::Started {
            component: Component::ApiServer,
            url: Some("http://127.0.0.1:6443".into()),
            pid: None,
            nodes: None,
            elapsed: ms(12),
        };
        assert_eq!(api.to_string(), "✓ apiserver http://127.0.0.1:6443 (12 ms)");
        let cm = Progress::Started {
            component: Component::ControllerManager,
            url: None,
            pid: Some(42),
            nodes: None,
            elapsed: ms(14),
        };
        assert_eq!(cm.to_string(), "✓ controller-manager pid 42 (14 ms)");
        let kubelet = Progress::Started {
            component: Component::Kubelet,
            url: Some("http://127.0.0.1:9".into()),
            pid: None,
            nodes: Some(3),
            elapsed: ms(31),
        };
        assert_eq!(
            kubelet.to_string(),
            "✓ kubelet: 3 nodes registered, control API http://127.0.0.1:9 (31 ms)"
        );
        let ready = Progress::NodesReady {
            nodes: 3,
            elapsed: ms(33),
        };
        assert_eq!(ready.to_string(), "✓ 3/3 nodes Ready (33 ms)");
        let exited = Progress::Exited {
            component: Component::Scheduler,
            pid: Some(7),
            status: "signal 9 (SIGKILL)".into(),
        };
        assert_eq!(
            exited.to_string(),
            "✗ scheduler (pid 7) exited: signal 9 (SIGKILL)"
        );
    }
}
