//! The simulated cloud a cluster runs on (`docs/cloud.md`): its server, the instances of the
//! cluster's nodes, and the machines' power.
//!
//! ```text
//!   start_cloud: cloud::sim::Server on 127.0.0.1 (a task of the cluster's runtime, in both
//!                modes: the cloud is not a Kubernetes component), state in <data-dir>/cloud/
//!                ─▶ an instance per node (node-i, InternalIP = the node's 172.16.0.i+2),
//!                   launched unless it exists (a restarted cluster finds its instances)
//!   follow_power: every 500 ms the instances' states (if any changed: the list's ETag, else
//!                 304) ─▶ a node whose instance is stopped or terminated has its kubelet
//!                 switched off (no heartbeats, as a machine that is off), and on again when
//!                 its instance runs again
//! ```
//!
//! kind and kubeadm clusters have no cloud; a cloud's machines run their kubelets. Here the
//! kubelets are simulated in one process, so the launcher carries a stopped machine's effect
//! to its kubelet through the simulator's control API.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use cloud::sim::{HttpCloud, InstanceState, Server, SimOptions};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::supervisor::Members;
use crate::error::{Error, Result};
use crate::progress::Component;

/// How often the machines' power is looked at.
const POWER_POLL: Duration = Duration::from_millis(500);

/// Launches in flight when a cluster's instances are made. The cloud saves the launches that
/// arrive together in one rewrite of its state file, which grows with the instances: more in
/// flight, fewer rewrites (10,000 nodes: about 40).
const LAUNCH_CONCURRENCY: usize = 256;

/// The cloud of a cluster being started.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CloudPlan {
    /// Where the cloud keeps its state (`<data-dir>/cloud`).
    pub(crate) dir: PathBuf,
}

impl CloudPlan {
    /// The `--cloud-config` file the cloud writes and the cloud-controller-manager reads.
    pub(crate) fn cloud_config(&self) -> PathBuf {
        self.dir.join("cloud-config.json")
    }
}

/// Starts the cloud and makes sure each of the `nodes` nodes has a running instance; returns a
/// client of the cloud.
pub(crate) async fn start_cloud(
    cloud: &CloudPlan,
    nodes: &[(String, Ipv4Addr)],
    members: &mut Members,
) -> Result<HttpCloud> {
    let server = Server::bind(
        &cloud.dir,
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        SimOptions::default(),
    )
    .await
    .map_err(|e| Error::component(Component::Cloud, e))?;
    let endpoint = server.endpoint();
    members.spawn_task(Component::Cloud, |shutdown| server.run(shutdown));
    let http = HttpCloud::new(&endpoint).map_err(|e| Error::component(Component::Cloud, e))?;
    {
        let launches = futures::stream::iter(nodes.iter().cloned())
            .map(|(name, ip)| {
                let http = &http;
                async move { http.launch_instance(&name, Some(ip)).await.map(|_| ()) }
            })
            .buffer_unordered(LAUNCH_CONCURRENCY);
        futures::pin_mut!(launches);
        while let Some(launched) = launches.next().await {
            launched.map_err(|e| Error::component(Component::Cloud, e))?;
        }
    }
    members
        .reporter()
        .started(Component::Cloud, Some(endpoint), None, Some(nodes.len()));
    Ok(http)
}

/// Switches the kubelets of nodes whose instance is not running off (and on again when it
/// runs), through the simulator's control API at `kubelet_url`, until `stop` fires. Only the
/// kubelets it switched off are switched on again: a heartbeat fault stays the user's.
pub(crate) async fn follow_power(
    cloud: HttpCloud,
    kubelet_url: String,
    nodes: BTreeSet<String>,
    stop: CancellationToken,
) {
    let kubelet = match client::build_client(&client::ClientConfig::new(
        client::ClusterSource::Url(kubelet_url),
    ))
    .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "no client for the kubelets' control API: machines' power not followed");
            return;
        }
    };
    let mut off: BTreeSet<String> = BTreeSet::new();
    // The list's ETag: while no instance changes, each poll is answered 304 with no body.
    let mut seen: Option<String> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(POWER_POLL) => {}
        }
        let Ok(Some((instances, tag))) = cloud.list_instances_since(seen.as_deref()).await else {
            continue;
        };
        // The newest instance of each name (a terminated one may have a successor).
        let mut state: std::collections::BTreeMap<&str, InstanceState> = Default::default();
        for i in &instances {
            if nodes.contains(&i.name) && (i.is_live() || !state.contains_key(i.name.as_str())) {
                state.insert(&i.name, i.state);
            }
        }
        let mut failed = false;
        for (name, s) in state {
            let running = s == InstanceState::Running;
            let was_off = off.contains(name);
            if running != was_off {
                continue;
            }
            let path = format!("/nodes/{name}/heartbeat?stop={}", !running);
            let request = http::Request::post(path).body(Vec::new());
            let sent = match request {
                Ok(r) => kubelet.request_text(r).await.map(|_| ()),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot build the heartbeat request");
                    failed = true;
                    continue;
                }
            };
            match sent {
                Ok(()) if running => {
                    tracing::info!(node = name, "instance running again: kubelet back");
                    off.remove(name);
                }
                Ok(()) => {
                    tracing::info!(
                        node = name,
                        state = s.as_str(),
                        "instance not running: kubelet off"
                    );
                    off.insert(name.to_owned());
                }
                Err(e) => {
                    tracing::warn!(node = name, error = %e, "switching the kubelet failed");
                    failed = true;
                }
            }
        }
        // A switch that failed is tried again at the next poll, on the full list.
        seen = (!failed).then_some(tag);
    }
}
