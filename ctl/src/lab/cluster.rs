//! The cluster a lab starts: `lab.yaml`'s `cluster:` section, and the [`ClusterBuilder`] it
//! makes (the same for `miniplane lab start` and for the CI test of every lab).
//!
//! ```yaml
//! cluster: {nodes: 2, metricsServer: true, metricResolution: 2s,
//!           horizontalPodAutoscalerSyncPeriod: 3s}
//! ```
//!
//! `etcdListen` serves the store over etcd's v3 API too (`store-grpc`, as `miniplane apiserver
//! --etcd-listen`): `true` read-only, `writable` with writes (`--etcd-listen-writable`), on a free
//! port of 127.0.0.1; the lab's commands get `ETCDCTL_API=3` and `ETCDCTL_ENDPOINTS` (see
//! [`super::runner::LabRunner::with_etcd_endpoint`]).
//!
//! `clock: virtual` starts the cluster on a virtual clock running at real speed, which the
//! lab's steps move with `miniplane clock advance` instead of waiting (grace periods,
//! tolerations, back-offs).
//!
//! `apiservers: N` runs N API servers (as `miniplane up --apiservers`): the first keeps the
//! store and serves it over etcd's v3 API, writable, to the others, which are its etcd clients,
//! as kube-apiservers share one etcd; the lab's commands get `APISERVER_1` to `APISERVER_N`,
//! their URLs (see [`super::runner::LabRunner::with_apiservers`]).
//!
//! The durations are Go's (`time.ParseDuration`), as the components' flags take them
//! (metrics-server's `--metric-resolution`, kube-controller-manager's
//! `--horizontal-pod-autoscaler-sync-period`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::cluster::ClusterBuilder;

/// The cluster a lab starts.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSpec {
    /// Simulated nodes.
    #[serde(default = "three")]
    pub nodes: usize,
    /// Heartbeats every 200 ms, nodes Unknown after 2 s of silence.
    #[serde(default)]
    pub fast_node_lifecycle: bool,
    /// The nodes run on the simulated cloud, with its cloud-controller-manager (as
    /// `miniplane up` runs them); off by default, as for the library's clusters.
    #[serde(default)]
    pub cloud: bool,
    /// HTTPS, client certificates, tokens and RBAC (as `miniplane up` runs the cluster); off
    /// by default, as for the library's clusters. The lab's kubeconfig is the admin's
    /// (`kubernetes-admin` in `system:masters`), who may impersonate (`kubectl --as alice`).
    #[serde(default)]
    pub secure: bool,
    /// A metrics-server registered through API aggregation (`kubectl top`, the
    /// HorizontalPodAutoscaler's resource metrics), as `miniplane up` runs one; off by
    /// default, as for the library's clusters.
    #[serde(default)]
    pub metrics_server: bool,
    /// How often the metrics-server scrapes the kubelets (default 15 s, as metrics-server's).
    #[serde(default, deserialize_with = "go_duration")]
    pub metric_resolution: Option<Duration>,
    /// How often the horizontal pod autoscaler syncs each HorizontalPodAutoscaler (default
    /// 15 s, as kube-controller-manager's).
    #[serde(default, deserialize_with = "go_duration")]
    pub horizontal_pod_autoscaler_sync_period: Option<Duration>,
    /// The store's etcd v3 endpoint for `etcdctl` (`false`, `true`: read-only, `writable`).
    #[serde(default)]
    pub etcd_listen: EtcdListen,
    /// How many API servers serve the cluster (default 1); the components use the first.
    #[serde(default = "one")]
    pub apiservers: usize,
    /// `virtual`: the cluster runs on a virtual clock (at real speed until moved), so the
    /// learner skips waits with `miniplane clock advance` (as `miniplane up --clock
    /// virtual`); `real` (the default): the machine's clock.
    #[serde(default)]
    pub clock: LabClock,
}

/// `clock`: whose time the lab's cluster runs on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LabClock {
    /// The machine's clock.
    #[default]
    Real,
    /// A virtual clock, running at 1x until the learner moves it.
    Virtual,
}

/// `etcdListen`: whether the lab's cluster serves its store over etcd's v3 API, and how.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EtcdListen {
    /// No endpoint (`false`, the default).
    #[default]
    Off,
    /// Reads only (`true`): writes are refused with `PermissionDenied`.
    ReadOnly,
    /// Reads and writes (`writable`): `etcdctl put`, `del`, `compaction` go into the store.
    Writable,
}

impl<'de> Deserialize<'de> for EtcdListen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// `true`/`false`, or the word `writable`.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Field {
            Flag(bool),
            Word(String),
        }
        match Field::deserialize(d)? {
            Field::Flag(false) => Ok(EtcdListen::Off),
            Field::Flag(true) => Ok(EtcdListen::ReadOnly),
            Field::Word(w) if w == "writable" => Ok(EtcdListen::Writable),
            Field::Word(w) => Err(serde::de::Error::custom(format!(
                "etcdListen: {w:?}: want true, false or writable"
            ))),
        }
    }
}

/// metrics-server's default `--metric-resolution`.
const DEFAULT_METRIC_RESOLUTION: Duration = Duration::from_secs(15);

fn three() -> usize {
    3
}

fn one() -> usize {
    1
}

/// A Go duration (`2s`, `500ms`, `1m30s`).
fn go_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    apimachinery::duration::parse_duration(&text)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            nodes: 3,
            fast_node_lifecycle: false,
            cloud: false,
            secure: false,
            metrics_server: false,
            metric_resolution: None,
            horizontal_pod_autoscaler_sync_period: None,
            etcd_listen: EtcdListen::Off,
            apiservers: 1,
            clock: LabClock::Real,
        }
    }
}

impl ClusterSpec {
    /// `builder` set up as this section asks.
    pub fn configure(&self, builder: ClusterBuilder) -> ClusterBuilder {
        let mut builder = builder
            .nodes(self.nodes)
            .fast_node_lifecycle(self.fast_node_lifecycle)
            .cloud(self.cloud)
            .secure(self.secure)
            .apiservers(self.apiservers)
            .metrics_server(
                self.metrics_server
                    .then(|| self.metric_resolution.unwrap_or(DEFAULT_METRIC_RESOLUTION)),
            );
        if let Some(period) = self.horizontal_pod_autoscaler_sync_period {
            builder = builder.horizontal_pod_autoscaler_sync_period(period);
        }
        if self.clock == LabClock::Virtual {
            builder = builder.virtual_clock(1.0);
        }
        if self.etcd_listen != EtcdListen::Off {
            let any_port = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
            builder = builder.etcd_listen(any_port, self.etcd_listen == EtcdListen::Writable);
        }
        builder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_go_durations_and_unknown_keys_are_refused() {
        let spec: ClusterSpec = serde_norway::from_str(
            "{nodes: 2, metricsServer: true, metricResolution: 2s, horizontalPodAutoscalerSyncPeriod: 1m30s}",
        )
        .expect("a valid section");
        assert_eq!(spec.nodes, 2);
        assert!(spec.metrics_server);
        assert_eq!(spec.metric_resolution, Some(Duration::from_secs(2)));
        assert_eq!(
            spec.horizontal_pod_autoscaler_sync_period,
            Some(Duration::from_secs(90))
        );
        let bad = serde_norway::from_str::<ClusterSpec>("{metricResolution: soon}");
        assert!(bad.is_err());
        let typo = serde_norway::from_str::<ClusterSpec>("{metricServer: true}");
        assert!(typo.is_err());
    }

    #[test]
    fn one_apiserver_unless_told_otherwise() {
        let parse = |text: &str| serde_norway::from_str::<ClusterSpec>(text).map(|s| s.apiservers);
        assert_eq!(parse("{nodes: 1}").expect("valid"), 1);
        assert_eq!(ClusterSpec::default().apiservers, 1);
        assert_eq!(
            parse("{nodes: 1, etcdListen: writable, apiservers: 2}").expect("valid"),
            2
        );
        assert!(parse("{apiservers: two}").is_err());
    }

    #[test]
    fn etcd_listen_is_false_true_or_writable() {
        let parse = |text: &str| serde_norway::from_str::<ClusterSpec>(text).map(|s| s.etcd_listen);
        assert_eq!(parse("{nodes: 1}").expect("valid"), EtcdListen::Off);
        assert_eq!(
            parse("{etcdListen: false}").expect("valid"),
            EtcdListen::Off
        );
        assert_eq!(
            parse("{etcdListen: true}").expect("valid"),
            EtcdListen::ReadOnly
        );
        assert_eq!(
            parse("{etcdListen: writable}").expect("valid"),
            EtcdListen::Writable
        );
        let bad = parse("{etcdListen: sometimes}").expect_err("not a mode");
        assert!(
            bad.to_string().contains("want true, false or writable"),
            "{bad}"
        );
    }
}
