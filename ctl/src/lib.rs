//! # miniplane — the cluster as a library
//!
//! The `miniplane` binary's subcommands (`up`, `apiserver`, `controller-manager`, ...) and
//! this library share one crate. The library starts a whole cluster — API server with its
//! store, controller-manager, scheduler and simulated nodes — inside the calling process, in
//! milliseconds: in the spirit of controller-runtime's envtest, but Deployments get
//! ReplicaSets, pods get nodes and turn Running. Each test can have its own cluster.
//!
//! ```no_run
//! use k8s_openapi::api::apps::v1::Deployment;
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::api::{Api, ListParams, PostParams};
//!
//! #[tokio::test]
//! async fn nginx_runs() -> Result<(), Box<dyn std::error::Error>> {
//!     // 3 nodes, controller-manager and scheduler, a temporary store, a free port.
//!     let cluster = miniplane::Cluster::builder().nodes(3).start()?;
//!     let client = cluster.client();
//!     let deployment: Deployment = serde_json::from_value(serde_json::json!({
//!         "metadata": {"name": "nginx"},
//!         "spec": {
//!             "replicas": 3,
//!             "selector": {"matchLabels": {"app": "nginx"}},
//!             "template": {
//!                 "metadata": {"labels": {"app": "nginx"}},
//!                 "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}
//!             }
//!         }
//!     }))?;
//!     Api::<Deployment>::default_namespaced(client.clone())
//!         .create(&PostParams::default(), &deployment)
//!         .await?;
//!     let pods = Api::<Pod>::default_namespaced(client);
//!     loop {
//!         let list = pods.list(&ListParams::default().labels("app=nginx")).await?;
//!         let running = list.items.iter().filter(|p| {
//!             p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
//!         });
//!         if running.count() == 3 {
//!             break;
//!         }
//!         tokio::time::sleep(std::time::Duration::from_millis(20)).await;
//!     }
//!     Ok(()) // the cluster stops when dropped
//! }
//! ```
//!
//! The same example runs as a test: `tests/library.rs` (`cargo test -p ctl --test e2e
//! library::`). [`Cluster::kubeconfig`] and [`Cluster::kubeconfig_path`] give the real
//! `kubectl` (or any client) a way in; [`ClusterBuilder`] chooses the components, the node
//! count, a persistent data directory and a fixed port, or runs every component as a child
//! process of the `miniplane` binary ([`ClusterBuilder::separate`]).
//!
//! `miniplane up` is this library with a data directory, a fixed port and progress lines.
//!
//! | module | what |
//! | --- | --- |
//! The package plays three roles, each in a room of its own:
//!
//! | where | role | Kubernetes counterpart |
//! | --- | --- | --- |
//! | `src/cluster/`, `progress`, `kubeconfig` (this library) | the cluster launcher | kind, envtest |
//! | `src/lab/` (this library), `src/commands/lab.rs` | the teaching labs' engine and verb | (none) |
//! | `src/kubectl/` (the binary) | the kubectl-like verbs | kubectl |
//!
//! and the binary's other subcommands: `src/components/` runs one component per process
//! (`apiserver`, `controller-manager`, `scheduler`, `kubelet`), `src/commands/` holds
//! miniplane's own verbs (`up`, `kubeconfig`, `trace`, `fault`, `lab`).
//!
//! | module | what |
//! | --- | --- |
//! | [`cluster`] | [`Cluster`] and [`ClusterBuilder`]: the runtime thread, start and stop; inside it the plan of what to start, the two launchers (`in_process`: the API server on the cluster's runtime, each other component on a thread of its own; `separate`: child processes), `apiservers` (the first API server and the ones after it on the same etcd), the `supervisor` that watches and stops them in order, `readiness`, the data directory's layout and lock (`data_dir`) and the `StopComponent` fault (`component_faults`) |
//! | [`progress`] | [`Component`] names and the [`Progress`] a start reports |
//! | [`etcd_spans`] | the store's etcd endpoint (`store-grpc`) recording its requests as spans of the component `etcd` in the API server's collector |
//! | [`kubeconfig`] | the kubeconfig of a cluster and `miniplane kubeconfig --merge` |
//! | [`admin_client`] | the admin API (faults, controller queues, lab status; `docs/faults.md`) |
//! | [`lab`] | teaching labs: the YAML format, the check engine, the runner (`docs/labs.md`) |

pub mod admin_client;
pub mod cluster;
mod error;
pub mod etcd_spans;
pub mod kubeconfig;
pub mod lab;
pub mod progress;

pub use cluster::{Cluster, ClusterBuilder, KubeletProfile};
pub use error::{Error, Result};
pub use progress::{Component, Progress};
