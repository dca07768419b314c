//! End to end: the example Website operators (`examples/website/`) against a whole in-process
//! cluster — the one on miniplane's `client` and the one on kube-rs' `kube-runtime`. Each
//! runs on a runtime of its own, as its own process would, talking to the API server only
//! through its kubeconfig; "killing" it drops that runtime mid-work, and a new instance must
//! finish the job from what the API shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Each example includes `website.rs` as its own module, as its own binary does.
#![allow(clippy::duplicate_mod)]

#[path = "../examples/website/operator.rs"]
#[allow(dead_code, unreachable_pub)]
mod client_operator;
#[path = "../examples/website/kube_runtime.rs"]
#[allow(dead_code, unreachable_pub)]
mod kube_operator;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::support::DEADLINE;

/// Which operator to run.
#[derive(Clone, Copy, Debug)]
enum Flavor {
    /// `examples/website/operator.rs`.
    Client,
    /// `examples/website/kube_runtime.rs`.
    KubeRuntime,
}

/// A running operator: its own runtime, dropped (every task cut off) to kill it.
struct Operator {
    runtime: Option<tokio::runtime::Runtime>,
}

impl Operator {
    fn start(flavor: Flavor, kubeconfig: PathBuf) -> Operator {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.spawn(async move {
            let config = client::ClientConfig::new(client::ClusterSource::Kubeconfig(kubeconfig))
                .tracing(false);
            let client = client::build_client(&config).await.unwrap();
            // Never cancelled: the operator ends only when its runtime is dropped.
            let shutdown = CancellationToken::new();
            match flavor {
                Flavor::Client => client_operator::run(client, shutdown).await,
                Flavor::KubeRuntime => kube_operator::run(client, shutdown).await,
            }
        });
        Operator {
            runtime: Some(runtime),
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

fn websites(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("demo.miniplane.dev", "v1", "Website");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "websites"),
    )
}

/// Polls `check` until it returns `Some`, failing after [`DEADLINE`] with the last state.
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
    let start = Instant::now();
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if start.elapsed() > DEADLINE => {
                panic!("timed out waiting for {what}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn install_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_norway::from_str(crate::crd::WEBSITE_CRD).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    eventually("the CRD established", async || {
        let crd = crds
            .get("websites.demo.miniplane.dev")
            .await
            .map_err(|e| e.to_string())?;
        let established = crd
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .any(|c| c.type_ == "Established" && c.status == "True");
        established
            .then_some(())
            .ok_or_else(|| format!("{:?}", crd.status))
    })
    .await;
}

/// Waits until the Website reports Ready for its current generation with `replicas`
/// available, and its Deployment and Service match `image` and `port`.
async fn wait_ready(client: &kube::Client, name: &str, replicas: i64, image: &str, port: i32) {
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let services: Api<Service> = Api::default_namespaced(client.clone());
    eventually(
        &format!("{name} ready with {replicas} × {image}"),
        async || {
            let w = websites(client)
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            let status = &w.data["status"];
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let current = status["observedGeneration"] == json!(w.metadata.generation);
            if !(ready && current && status["availableReplicas"] == json!(replicas)) {
                return Err(format!("status {status}"));
            }
            let d = deployments.get(name).await.map_err(|e| e.to_string())?;
            let spec = d.spec.clone().unwrap_or_default();
            let pod = spec.template.spec.clone().unwrap_or_default();
            if spec.replicas != Some(replicas as i32)
                || pod.containers[0].image.as_deref() != Some(image)
            {
                return Err(format!("deployment {spec:?}"));
            }
            let owner = d.metadata.owner_references.clone().unwrap_or_default();
            if !(owner.len() == 1
                && owner[0].kind == "Website"
                && owner[0].controller == Some(true))
            {
                return Err(format!("owners {owner:?}"));
            }
            let svc = services.get(name).await.map_err(|e| e.to_string())?;
            let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
            if ports.first().map(|p| p.port) != Some(port) {
                return Err(format!("service ports {ports:?}"));
            }
            Ok(())
        },
    )
    .await;
}

async fn gone<K>(api: &Api<K>, name: &str) -> Result<(), String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Ok(None) => Ok(()),
        Ok(Some(_)) => Err(format!("{name} still there")),
        Err(e) => Err(e.to_string()),
    }
}

/// The whole life of a Website under one operator flavor, with a kill in the middle.
async fn website_lifecycle(flavor: Flavor) {
    let cluster = crate::support::cluster().nodes(2).start().unwrap();
    let client = cluster.client();
    install_crd(&client).await;
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let operator = Operator::start(flavor, kubeconfig.clone());

    let site: Value =
        serde_norway::from_str(include_str!("../examples/website/website.yaml")).unwrap();
    let site: DynamicObject = serde_json::from_value(site).unwrap();
    websites(&client)
        .create(&PostParams::default(), &site)
        .await
        .unwrap();
    wait_ready(&client, "blog", 2, "nginx:1.27", 80).await;
    let w = websites(&client).get("blog").await.unwrap();
    assert!(
        w.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "demo.miniplane.dev/cleanup"),
        "{:?}",
        w.metadata
    );

    // Change the spec and kill the operator while it works on it; meanwhile someone deletes
    // the Service. A new instance must converge from what the API shows.
    let patch = json!({"spec": {"replicas": 3, "image": "nginx:1.28", "port": 8080}});
    websites(&client)
        .patch("blog", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    drop(operator);
    let services: Api<Service> = Api::default_namespaced(client.clone());
    services
        .delete("blog", &DeleteParams::default())
        .await
        .unwrap();
    let operator = Operator::start(flavor, kubeconfig);
    wait_ready(&client, "blog", 3, "nginx:1.28", 8080).await;

    // Deleting the Website: the finalizer keeps it until its Deployment and Service are gone.
    websites(&client)
        .delete("blog", &DeleteParams::default())
        .await
        .unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    eventually("Website, Deployment and Service gone", async || {
        gone(&websites(&client), "blog").await?;
        gone(&deployments, "blog").await?;
        gone(&services, "blog").await
    })
    .await;
    drop(operator);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_operator_runs_a_website_and_survives_a_restart() {
    website_lifecycle(Flavor::Client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_runtime_operator_runs_a_website_and_survives_a_restart() {
    website_lifecycle(Flavor::KubeRuntime).await;
}

/// The controller-manager's garbage collector monitors custom resources once their CRD is
/// established: a Deployment and a Website owned by a Website go when their owner goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_collector_collects_dependents_of_custom_resources() {
    let cluster = crate::support::cluster().nodes(1).start().unwrap();
    let client = cluster.client();
    install_crd(&client).await;
    // kube-rs' discovery finds the custom resource as it would on a cluster.
    let gvk = GroupVersionKind::gvk("demo.miniplane.dev", "v1", "Website");
    let (resource, caps) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
    assert_eq!(resource.plural, "websites");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let subresources: Vec<&str> = caps
        .subresources
        .iter()
        .map(|(r, _)| r.plural.as_str())
        .collect();
    assert_eq!(subresources, vec!["status", "scale"]);
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.miniplane.dev/v1", "kind": "Website",
        "metadata": {"name": "parent"}, "spec": {"image": "nginx"}
    }))
    .unwrap();
    let owner = websites(&client)
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    let owner_ref = json!([{"apiVersion": "demo.miniplane.dev/v1", "kind": "Website",
        "name": "parent", "uid": owner.metadata.uid, "controller": true}]);
    let child: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.miniplane.dev/v1", "kind": "Website",
        "metadata": {"name": "child", "ownerReferences": owner_ref}, "spec": {"image": "nginx"}
    }))
    .unwrap();
    websites(&client)
        .create(&PostParams::default(), &child)
        .await
        .unwrap();
    let mut deployment: Value =
        serde_norway::from_str(&crate::support::deployment_yaml("owned", 1, "nginx")).unwrap();
    deployment["metadata"]["ownerReferences"] = owner_ref;
    let deployment: Deployment = serde_json::from_value(deployment).unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    websites(&client)
        .delete("parent", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the parent's dependents collected", async || {
        gone(&websites(&client), "child").await?;
        gone(&deployments, "owned").await
    })
    .await;
}
