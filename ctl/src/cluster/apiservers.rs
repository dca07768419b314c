//! The cluster's API servers: the first one, which the kubeconfig and every other component
//! use, and with [`super::ClusterBuilder::apiservers`] the replicas after it, on the same etcd
//! cluster, as a highly available kubeadm control plane runs one kube-apiserver per
//! control-plane machine behind one etcd.
//!
//! ```text
//!   apiserver 0   127.0.0.1:PORT     --etcd-servers, or the embedded store
//!                                    (then served as etcd: --etcd-listen, writable)
//!                                    kubeconfig: <data dir>/kubeconfig
//!   apiserver 1   127.0.0.1:PORT+1   --etcd-servers, or apiserver 0's etcd endpoint
//!                                    kubeconfig: <data dir>/apiserver-1/kubeconfig
//!   ...           (free ports for port 0)
//! ```
//!
//! Without an etcd cluster the replicas depend on the first API server's process: when it
//! stops, they lose their store (an etcd cluster of one member, in effect).
//!
//! Each replica is started once the first one serves, so the first is the one up longest and
//! owns the `default/kubernetes` Service (`apiserver::kubernetes_service::decide`).
//!
//! Simplified: kubeadm's components each use their own machine's API server (or a load
//! balancer in front of all); here the controller-manager, the scheduler and the kubelets all
//! use the first, and the replicas serve the clients pointed at them.

use std::net::SocketAddr;
use std::path::PathBuf;

use client::ClientConfig;

use super::data_dir::DataDir;
use super::in_process;
use super::pki::ClusterPki;
use super::plan::Plan;
use super::readiness;
use super::separate::Launcher;
use super::supervisor::Members;
use crate::error::{Error, Result};
use crate::kubeconfig;
use crate::progress::Component;

/// Starts API server `replica` (0 for the first) in this process or as a child; returns its
/// URL, its pid (as a child) and the store's etcd endpoint (the first one's, if asked).
pub(super) async fn start_one(
    members: &mut Members,
    launcher: Option<&Launcher>,
    dir: &DataDir,
    plan: &Plan,
    pki: Option<&ClusterPki>,
    replica: usize,
) -> Result<(String, Option<u32>, Option<SocketAddr>)> {
    let store = match replica {
        0 => dir.store(),
        n => replica_dir(dir, n)?.join("store"),
    };
    match launcher {
        None => {
            let (url, etcd) =
                in_process::start_apiserver(members, store, plan, pki, replica).await?;
            Ok((url, None, etcd))
        }
        Some(launcher) => {
            launcher
                .start_apiserver(members, &store, plan, pki, replica)
                .await
        }
    }
}

/// Starts API servers 1 to N-1 of the plan, each with its admin kubeconfig in
/// `<data dir>/apiserver-<n>/kubeconfig`, and returns their URLs once each serves.
pub(super) async fn start_replicas(
    members: &mut Members,
    launcher: Option<&Launcher>,
    dir: &DataDir,
    plan: &Plan,
    pki: Option<&ClusterPki>,
) -> Result<Vec<String>> {
    let mut urls = Vec::new();
    for replica in 1..plan.apiservers {
        let (url, pid, _) = start_one(members, launcher, dir, plan, pki, replica).await?;
        let replica_dir = replica_dir(dir, replica)?;
        let path = match pki {
            Some(pki) => {
                pki.write_kubeconfig(Component::ApiServer, &url, &replica_dir)?
                    .0
            }
            None => {
                let path = replica_dir.join("kubeconfig");
                kubeconfig::write_private(&path, &kubeconfig::render(&url))
                    .map_err(Error::io(&path))?;
                path
            }
        };
        let source = client::ClusterSource::Kubeconfig(path);
        serving(members, source, &url, pid).await?;
        urls.push(url);
    }
    Ok(urls)
}

/// Waits until the API server at `url` (reached through `source`) serves, reports it started,
/// and returns the client that saw it serve.
pub(super) async fn serving(
    members: &mut Members,
    source: client::ClusterSource,
    url: &str,
    pid: Option<u32>,
) -> Result<kube::Client> {
    let client = client::build_client(&ClientConfig::new(source))
        .await
        .map_err(|e| Error::component(Component::ApiServer, e))?;
    readiness::wait_serving(&client).await;
    members
        .reporter()
        .started(Component::ApiServer, Some(url.to_string()), pid, None);
    Ok(client)
}

/// The directory of API server `replica` (1, 2, ...): its store (when embedded) and its admin
/// kubeconfig; created here.
fn replica_dir(dir: &DataDir, replica: usize) -> Result<PathBuf> {
    let path = dir.path().join(format!("apiserver-{replica}"));
    std::fs::create_dir_all(&path).map_err(Error::io(&path))?;
    Ok(path)
}
