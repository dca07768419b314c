//! Four `miniplane` processes for the benches that measure one part of a cluster: an API
//! server (fresh data dir, no fsync), a kubelet simulating `nodes` nodes, a scheduler and a
//! controller-manager running only the controllers named. Every process stops on drop.
//!
//! Included with `#[path = "support/cluster.rs"] mod cluster;` beside `support/process.rs`
//! (`mod process;`), whose `spawn` it uses.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, Client, Config};

use crate::process::{self, Proc, spawn};

/// The four processes, stopped in the order of the fields: the API server last, so that the
/// others do not log failed requests as they stop; the data dir after it.
pub struct Processes {
    pub kubelet: Proc,
    pub scheduler: Proc,
    pub cm: Proc,
    pub api: Proc,
    pub dir: tempfile::TempDir,
    /// The API server's URL.
    pub url: String,
    /// A client of it.
    pub client: Client,
}

/// Starts the four and returns once every node has registered. `controllers` is the
/// controller-manager's `--controllers` list; it should name `serviceaccount`, without whose
/// `default` ServiceAccount ServiceAccount admission refuses every pod.
pub async fn start(nodes: usize, controllers: &str) -> Processes {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (api, url) = process::start_apiserver(&data);
    let client = Client::try_from(Config::new(url.parse().unwrap())).unwrap();
    let nodes_arg = nodes.to_string();
    let (kubelet, _) = spawn(
        &["kubelet", "--nodes", &nodes_arg, "--master", &url],
        "nodes registered",
    );
    let (scheduler, _) = spawn(
        &["scheduler", "--master", &url, "--listen", "127.0.0.1:0"],
        "miniplane scheduler started",
    );
    let (cm, _) = spawn(
        &[
            "controller-manager",
            "--master",
            &url,
            "--listen",
            "127.0.0.1:0",
            "--controllers",
            controllers,
        ],
        "miniplane controller-manager started",
    );
    let node_api: Api<Node> = Api::all(client.clone());
    while node_api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .len()
        < nodes
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Processes {
        kubelet,
        scheduler,
        cm,
        api,
        dir,
        url,
        client,
    }
}
