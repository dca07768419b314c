//! `miniplane load`: sets the simulated CPU and memory the pods of a workload use, for
//! `kubectl top` and the HorizontalPodAutoscaler to see (no Kubernetes counterpart: on a
//! cluster, load comes from traffic).
//!
//! ```text
//!   miniplane load deployment/web --cpu 400m [--memory 256Mi] [-n NS]
//!     ─▶ the workload's spec.selector ─▶ ConfigMap kube-system/miniplane-load,
//!        key NS.deployments.web: {"selector":"app=web","cpu":"400m",...}
//!     ─▶ every kubelet: each running container of a matching pod uses 400m, now and in
//!        pods created later (an HPA's scale-out), until `--reset`
//!   miniplane load deployment/web --total-cpu 500m
//!     ─▶ 500m shared evenly by the workload's Ready pods: 1 pod uses 500m, 5 use 100m each
//!        (what an HPA's target utilization converges on)
//!   miniplane load pod/web-1 --cpu 1     ─▶ the pod's own miniplane.dev/cpu-usage annotation
//!   miniplane load deployment/web --reset
//! ```
//!
//! Why not the pod template: changing it rolls the Deployment out; the load follows the
//! workload's selector instead, so setting it restarts nothing ([`kubelet_sim::load`]). A pod's
//! own `miniplane.dev/cpu-usage` and `memory-usage` annotations win over a load. Workloads:
//! Deployments, ReplicaSets, StatefulSets, DaemonSets, ReplicationControllers and Jobs.

use std::collections::BTreeMap;

use anyhow::Context;
use apimachinery::labels::Selector;
use apimachinery::resource::quantity::Quantity;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kubelet_sim::load::{CONFIGMAP, LoadSpec, NAMESPACE, key};
use serde_json::{Value, json};

use super::fault::ClusterArgs;

/// `miniplane load`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["cpu", "memory", "total_cpu", "reset"])))]
pub struct LoadArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The workload (`deployment/web`, `sts/db`, `rs/web-5d8f`) or a pod (`pod/web-1`).
    target: String,
    /// The namespace.
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
    /// The CPU each running container uses (a quantity: `400m`, `1.5`).
    #[arg(long, value_name = "QUANTITY", value_parser = parse_quantity)]
    cpu: Option<String>,
    /// The working set each running container has (a quantity: `256Mi`).
    #[arg(long, value_name = "QUANTITY", value_parser = parse_quantity)]
    memory: Option<String>,
    /// The CPU the workload's serving pods use together (a quantity: `500m`), shared evenly
    /// among its Ready pods as a load balancer shares requests: more replicas, less each.
    #[arg(long, value_name = "QUANTITY", value_parser = parse_quantity, conflicts_with = "cpu")]
    total_cpu: Option<String>,
    /// Removes the load (the usage model's defaults apply again).
    #[arg(long, conflicts_with_all = ["cpu", "memory", "total_cpu"])]
    reset: bool,
}

fn parse_quantity(s: &str) -> Result<String, String> {
    let q = Quantity::parse(s).map_err(|e| format!("{s:?} is not a quantity: {e}"))?;
    if q.nanos() < 0 {
        return Err(format!("{s:?} is negative"));
    }
    Ok(s.to_owned())
}

/// A workload kind the command knows: its resource, group, version and kind.
struct Workload {
    resource: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
}

/// The workload (or `None` for a pod) a `kind/name` target's kind names, as kubectl's short
/// names and singular and plural names do.
fn workload(kind: &str) -> Result<Option<Workload>, String> {
    let w = |resource, group, kind| {
        Ok(Some(Workload {
            resource,
            group,
            version: "v1",
            kind,
        }))
    };
    match kind.to_ascii_lowercase().as_str() {
        "pod" | "pods" | "po" => Ok(None),
        "deployment" | "deployments" | "deploy" | "deployment.apps" | "deployments.apps" => {
            w("deployments", "apps", "Deployment")
        }
        "replicaset" | "replicasets" | "rs" | "replicaset.apps" | "replicasets.apps" => {
            w("replicasets", "apps", "ReplicaSet")
        }
        "statefulset" | "statefulsets" | "sts" | "statefulset.apps" | "statefulsets.apps" => {
            w("statefulsets", "apps", "StatefulSet")
        }
        "daemonset" | "daemonsets" | "ds" | "daemonset.apps" | "daemonsets.apps" => {
            w("daemonsets", "apps", "DaemonSet")
        }
        "replicationcontroller" | "replicationcontrollers" | "rc" => {
            w("replicationcontrollers", "", "ReplicationController")
        }
        "job" | "jobs" | "job.batch" | "jobs.batch" => w("jobs", "batch", "Job"),
        other => Err(format!(
            "miniplane load takes a pod or a workload (deployment, replicaset, statefulset, daemonset, replicationcontroller, job), not {other:?}"
        )),
    }
}

/// The label selector of a workload object: `spec.selector` (a map for a
/// ReplicationController).
fn selector_of(obj: &Value, resource: &str) -> Result<Selector, String> {
    let sel = &obj["spec"]["selector"];
    if resource == "replicationcontrollers" {
        let set: BTreeMap<String, String> = serde_json::from_value(sel.clone()).unwrap_or_default();
        return Ok(Selector::from_set(&set));
    }
    let parsed: Option<LabelSelector> = serde_json::from_value(sel.clone()).ok();
    let selector = Selector::from_label_selector(parsed.as_ref()).map_err(|e| e.to_string())?;
    if selector.is_everything() {
        return Err("its selector selects every pod".into());
    }
    Ok(selector)
}

/// Runs `miniplane load`.
pub fn main(args: LoadArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: LoadArgs) -> anyhow::Result<()> {
    let (kind, name) = args
        .target
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "expected KIND/NAME (deployment/web, pod/web-1), got {:?}",
                args.target
            )
        })?;
    let which = workload(kind).map_err(anyhow::Error::msg)?;
    let config = client::ClientConfig::new(args.cluster.source()).user_agent("miniplane");
    let client = client::build_client(&config)
        .await
        .context("reading the kubeconfig")?;
    let ns = args.namespace.as_str();
    let Some(w) = which else {
        if args.total_cpu.is_some() {
            anyhow::bail!("--total-cpu is shared by a workload's pods: name a workload, not a pod");
        }
        return load_pod(&client, ns, name, &args).await;
    };
    let gvk = GroupVersionKind::gvk(w.group, w.version, w.kind);
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, w.resource),
    );
    let qualified = if w.group.is_empty() {
        w.kind.to_ascii_lowercase()
    } else {
        format!("{}.{}", w.kind.to_ascii_lowercase(), w.group)
    };
    let obj = api.get(name).await.map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => {
            anyhow::anyhow!("{} {name:?} not found in namespace {ns:?}", w.resource)
        }
        e => e.into(),
    })?;
    let obj = serde_json::to_value(&obj)?;
    let selector =
        selector_of(&obj, w.resource).map_err(|e| anyhow::anyhow!("{qualified}/{name}: {e}"))?;
    let entry = key(ns, w.resource, name);
    let value = if args.reset {
        Value::Null
    } else {
        let spec = LoadSpec {
            namespace: ns.to_owned(),
            workload: format!("{}/{name}", w.resource),
            selector: selector.to_string(),
            cpu: args.cpu.clone(),
            memory: args.memory.clone(),
            total_cpu: args.total_cpu.clone(),
        };
        Value::String(serde_json::to_string(&spec)?)
    };
    write_entry(&client, &entry, value).await?;
    if args.reset {
        println!("{qualified}/{name}: load removed");
    } else {
        println!("{qualified}/{name}: {} ({selector})", describe(&args));
    }
    Ok(())
}

/// `cpu 400m, memory 256Mi per running container of its pods`, or `cpu 500m in total,
/// shared by its ready pods`.
fn describe(args: &LoadArgs) -> String {
    let mut parts = Vec::new();
    if let Some(cpu) = &args.cpu {
        parts.push(format!("cpu {cpu}"));
    }
    if let Some(memory) = &args.memory {
        parts.push(format!("memory {memory}"));
    }
    let mut text = parts.join(", ");
    if !parts.is_empty() {
        text.push_str(" per running container of its pods");
    }
    if let Some(total) = &args.total_cpu {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(&format!("cpu {total} in total, shared by its ready pods"));
    }
    text
}

/// Sets (or, for `null`, removes) one key of the load ConfigMap, creating it when missing.
async fn write_entry(client: &kube::Client, entry: &str, value: Value) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    if api.get_opt(CONFIGMAP).await?.is_none() {
        if value.is_null() {
            return Ok(());
        }
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE},
            "data": {entry: value},
        }))?;
        match api.create(&PostParams::default(), &cm).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    api.patch(
        CONFIGMAP,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {entry: value}})),
    )
    .await?;
    Ok(())
}

/// A pod's own usage annotations.
async fn load_pod(
    client: &kube::Client,
    ns: &str,
    name: &str,
    args: &LoadArgs,
) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let value = |q: &Option<String>| match (args.reset, q) {
        (true, _) => Value::Null,
        (false, Some(q)) => json!(q),
        (false, None) => Value::Null,
    };
    let mut annotations = serde_json::Map::new();
    if args.reset || args.cpu.is_some() {
        annotations.insert(kubelet_sim::usage::CPU_USAGE.into(), value(&args.cpu));
    }
    if args.reset || args.memory.is_some() {
        annotations.insert(kubelet_sim::usage::MEMORY_USAGE.into(), value(&args.memory));
    }
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .map_err(|e| match e {
        kube::Error::Api(s) if s.code == 404 => {
            anyhow::anyhow!("pods {name:?} not found in namespace {ns:?}")
        }
        e => e.into(),
    })?;
    if args.reset {
        println!("pod/{name}: load removed");
    } else {
        println!("pod/{name}: {} per running container", describe(args));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn parse(args: &[&str]) -> Result<LoadArgs, clap::Error> {
        use clap::Parser as _;
        Cli::try_parse_from(std::iter::once("load").chain(args.iter().copied())).map(|c| c.load)
    }

    #[test]
    fn a_total_is_described_and_excludes_a_per_container_cpu() {
        let total = parse(&["deploy/web", "--total-cpu", "230m"]).expect("valid");
        assert_eq!(
            describe(&total),
            "cpu 230m in total, shared by its ready pods"
        );
        let both =
            parse(&["deploy/web", "--total-cpu", "230m", "--memory", "64Mi"]).expect("valid");
        assert_eq!(
            describe(&both),
            "memory 64Mi per running container of its pods; cpu 230m in total, shared by its ready pods"
        );
        let per = parse(&["deploy/web", "--cpu", "400m"]).expect("valid");
        assert_eq!(describe(&per), "cpu 400m per running container of its pods");
        assert!(parse(&["deploy/web", "--cpu", "1", "--total-cpu", "2"]).is_err());
        assert!(parse(&["deploy/web", "--reset", "--total-cpu", "2"]).is_err());
        assert!(
            parse(&["deploy/web"]).is_err(),
            "something to set is required"
        );
        assert!(parse(&["deploy/web", "--total-cpu", "-1"]).is_err());
    }

    #[test]
    fn workload_kinds_by_any_name() {
        let resource = |k: &str| workload(k).map(|w| w.map(|w| w.resource));
        assert_eq!(resource("deploy"), Ok(Some("deployments")));
        assert_eq!(resource("Deployment.apps"), Ok(Some("deployments")));
        assert_eq!(resource("sts"), Ok(Some("statefulsets")));
        assert_eq!(resource("rc"), Ok(Some("replicationcontrollers")));
        assert_eq!(resource("po"), Ok(None));
        assert!(resource("service").is_err());
    }

    #[test]
    fn selectors_come_from_the_workload() {
        let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}});
        assert_eq!(
            selector_of(&deploy, "deployments").map(|s| s.to_string()),
            Ok("app=web,tier in (a,b)".to_owned())
        );
        let rc = json!({"spec": {"selector": {"app": "old"}}});
        assert_eq!(
            selector_of(&rc, "replicationcontrollers").map(|s| s.to_string()),
            Ok("app=old".to_owned())
        );
        let empty = json!({"spec": {"selector": {}}});
        assert!(selector_of(&empty, "deployments").is_err());
        assert_eq!(parse_quantity("400m"), Ok("400m".to_owned()));
        assert!(parse_quantity("-1").is_err());
        assert!(parse_quantity("lots").is_err());
    }
}
