//! End to end: the cloud-controller-manager over the simulated cloud. Through `miniplane up`
//! (which runs on the cloud by default) and the real kubectl: Nodes initialized from the cloud
//! (providerID, addresses, zone and instance-type labels, the uninitialized taint gone, a route
//! per pod CIDR); a LoadBalancer Service from `<pending>` to an address of 203.0.113.0/24 with
//! Kubernetes' events, its endpoints still written by kube-controller-manager; a failing cloud
//! API reported as `SyncLoadBalancerFailed` and retried; the load balancer released on delete.
//! Through the library with fast node timing: a stopped instance taints its Node
//! `node.cloudprovider.kubernetes.io/shutdown`, a started one clears it, a deleted one takes its
//! Node along; a cloud whose API fails loses no Node and initializes a new one once it answers;
//! a stopped cloud-controller-manager (`StopComponent`) initializes nothing until restarted.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use serde_json::Value;

use crate::support;
use support::up::UpEnv;
use support::{DEADLINE, deployment_yaml, eventually};

/// `kubectl get svc NAME`'s EXTERNAL-IP column.
fn external_ip(env: &UpEnv, name: &str) -> String {
    let out = env.kubectl_ok(&["get", "svc", name, "--no-headers"]);
    out.split_whitespace().nth(3).unwrap_or_default().to_owned()
}

/// The reasons of the Events about Service `name`, oldest first.
fn service_events(env: &UpEnv, name: &str) -> Vec<(String, String, String)> {
    let list = env.get_json(&[
        "events",
        "--field-selector",
        &format!("involvedObject.kind=Service,involvedObject.name={name}"),
    ]);
    let mut items = list["items"].as_array().cloned().unwrap_or_default();
    items.sort_by_key(|e| e["lastTimestamp"].as_str().unwrap_or_default().to_owned());
    items
        .iter()
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&e["reason"]),
                s(&e["message"]),
                s(&e["source"]["component"]),
            )
        })
        .collect()
}

fn has_event(events: &[(String, String, String)], reason: &str) -> bool {
    events.iter().any(|(r, _, _)| r == reason)
}

#[test]
fn nodes_are_initialized_and_load_balancers_come_and_go() {
    let env = UpEnv::new();
    let _up = env.up(&["--port", "0", "--nodes", "2"]);

    // Nodes: initialized by the cloud node controller before `up` said it was ready.
    let nodes = env.get_json(&["nodes"]);
    let nodes = nodes["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(nodes.len(), 2);
    for node in &nodes {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let provider_id = node["spec"]["providerID"].as_str().unwrap_or_default();
        assert!(
            provider_id.starts_with("miniplane:///local-1"),
            "{name}: {provider_id}"
        );
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["topology.kubernetes.io/region"], "local-1");
        assert!(
            labels["topology.kubernetes.io/zone"]
                .as_str()
                .is_some_and(|z| provider_id.contains(z)),
            "{labels}"
        );
        assert_eq!(labels["node.kubernetes.io/instance-type"], "sim.standard-2");
        assert_eq!(
            labels["failure-domain.beta.kubernetes.io/zone"],
            labels["topology.kubernetes.io/zone"]
        );
        let taints = node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            !taints
                .iter()
                .any(|t| t["key"] == "node.cloudprovider.kubernetes.io/uninitialized"),
            "{name}: {taints:?}"
        );
        let types: Vec<&str> = node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["type"].as_str())
            .collect();
        assert_eq!(types, ["InternalIP", "ExternalIP", "Hostname"], "{name}");
    }
    let wide = env.kubectl_ok(&["get", "nodes", "-o", "wide", "--no-headers"]);
    assert!(wide.contains("198.51.100."), "EXTERNAL-IP column: {wide}");
    eventually(
        "a route per node: NetworkUnavailable False",
        DEADLINE,
        || {
            let out = env.kubectl_ok(&[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"NetworkUnavailable\")].reason}{\" \"}{end}",
        ]);
            (out.trim() == "RouteCreated RouteCreated").then_some(())
        },
    );
    let synced = env.kubectl_ok(&["get", "events", "--field-selector", "reason=Synced"]);
    assert!(synced.contains("Node synced successfully"), "{synced}");

    // A LoadBalancer Service: <pending>, then an address of the cloud.
    env.apply(&deployment_yaml("web", 2, "nginx"));
    env.running_pods("web", 2);
    env.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--type",
        "LoadBalancer",
        "--port",
        "80",
    ]);
    let ip = eventually("web gets an external IP", DEADLINE, || {
        Some(external_ip(&env, "web")).filter(|ip| ip.starts_with("203.0.113."))
    });
    let svc = env.get_json(&["svc", "web"]);
    assert_eq!(
        svc["status"]["loadBalancer"]["ingress"][0]["ip"],
        ip.as_str()
    );
    assert_eq!(
        svc["metadata"]["finalizers"],
        serde_json::json!(["service.kubernetes.io/load-balancer-cleanup"])
    );
    let events = eventually("the service controller's events", DEADLINE, || {
        let events = service_events(&env, "web");
        has_event(&events, "EnsuredLoadBalancer").then_some(events)
    });
    assert_eq!(events[0].0, "EnsuringLoadBalancer", "{events:?}");
    assert_eq!(events[0].1, "Ensuring load balancer");
    assert!(
        events.iter().all(|e| e.2 == "service-controller"),
        "{events:?}"
    );
    // Its endpoints are kube-controller-manager's, never the CCM's.
    let slices = env.get_json(&["endpointslices", "-l", "kubernetes.io/service-name=web"]);
    let slice = &slices["items"][0];
    assert_eq!(
        slice["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    let managers: Vec<&str> = slice["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(
        !managers
            .iter()
            .any(|m| m.contains("cloud-controller-manager")),
        "{managers:?}"
    );

    // The cloud's API fails: the service controller reports it and retries.
    let cloud = |args: &[&str]| {
        let mut all = vec!["cloud", "--cloud-config"];
        let config = env.data_dir().join("cloud/cloud-config.json");
        let config = config.to_string_lossy().into_owned();
        all.push(&config);
        all.extend(args);
        let out = env.miniplane(&all).output().unwrap();
        assert!(
            out.status.success(),
            "miniplane {all:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let lbs = cloud(&["load-balancers"]);
    assert!(lbs.contains(&ip) && lbs.contains("default/web"), "{lbs}");
    cloud(&[
        "fault",
        "set",
        "--api",
        "loadbalancers",
        "--fail-fraction",
        "1",
    ]);
    env.kubectl_ok(&[
        "expose",
        "deployment",
        "web",
        "--name",
        "web2",
        "--type",
        "LoadBalancer",
        "--port",
        "80",
    ]);
    let failed = eventually("SyncLoadBalancerFailed on web2", DEADLINE, || {
        service_events(&env, "web2")
            .into_iter()
            .find(|e| e.0 == "SyncLoadBalancerFailed")
    });
    assert!(
        failed
            .1
            .starts_with("Error syncing load balancer: failed to ensure load balancer: "),
        "{failed:?}"
    );
    assert_eq!(external_ip(&env, "web2"), "<pending>");
    cloud(&["fault", "clear"]);
    eventually("web2 gets its IP once the cloud answers", DEADLINE, || {
        Some(external_ip(&env, "web2")).filter(|ip| ip.starts_with("203.0.113."))
    });

    // Deleted: the finalizer holds the Service until the cloud released its LB.
    env.kubectl_ok(&["delete", "svc", "web", "--timeout=30s"]);
    let events = service_events(&env, "web");
    for reason in ["DeletingLoadBalancer", "DeletedLoadBalancer"] {
        assert!(has_event(&events, reason), "{reason}: {events:?}");
    }
    let lbs = cloud(&["load-balancers"]);
    assert!(!lbs.contains("default/web "), "{lbs}");
    assert!(lbs.contains("default/web2"), "{lbs}");
}

#[tokio::test]
async fn stopped_and_deleted_instances_show_on_their_nodes() {
    let cluster = crate::support::cluster()
        .nodes(2)
        .cloud(true)
        .fast_node_lifecycle(true)
        .start()
        .unwrap();
    let cloud = cloud::sim::HttpCloud::from_cloud_config(
        &cluster.data_dir().join("cloud/cloud-config.json"),
    )
    .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let taints = |node: Node| -> Vec<String> {
        node.spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect()
    };
    let shutdown = "node.cloudprovider.kubernetes.io/shutdown".to_string();

    cloud.stop_instance("node-1").await.unwrap();
    eventually_async("node-1 tainted shutdown", DEADLINE, || {
        let nodes = nodes.clone();
        let shutdown = shutdown.clone();
        async move {
            let node = nodes.get("node-1").await.ok()?;
            taints(node).contains(&shutdown).then_some(())
        }
    })
    .await;
    cloud.start_instance("node-1").await.unwrap();
    eventually_async("node-1 Ready again, taint gone", DEADLINE, || {
        let nodes = nodes.clone();
        let shutdown = shutdown.clone();
        async move {
            let node = nodes.get("node-1").await.ok()?;
            (!taints(node).contains(&shutdown)).then_some(())
        }
    })
    .await;

    cloud.delete_instance("node-0").await.unwrap();
    eventually_async("node-0 deleted with its instance", DEADLINE, || {
        let nodes = nodes.clone();
        async move {
            let gone =
                matches!(nodes.get("node-0").await, Err(kube::Error::Api(s)) if s.code == 404);
            gone.then_some(())
        }
    })
    .await;
    assert!(nodes.get("node-1").await.is_ok(), "the other node stays");
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
}

/// A cloud whose instances API fails every call: a NotReady node is not deleted (its
/// instance cannot be looked up, which is not "gone"), and a node that registers meanwhile
/// keeps its uninitialized taint, retried with back-off, until the cloud answers again.
#[tokio::test]
async fn a_failing_cloud_loses_no_node_and_initializes_it_once_it_answers() {
    use admin::FaultSpec;
    use cloud::sim::{Fault, FaultApi};
    use miniplane::admin_client::AdminClient;

    let cluster = crate::support::cluster()
        .nodes(2)
        .cloud(true)
        .fast_node_lifecycle(true)
        .start()
        .unwrap();
    let cloud = cloud::sim::HttpCloud::from_cloud_config(
        &cluster.data_dir().join("cloud/cloud-config.json"),
    )
    .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let admin = AdminClient::new(cluster.client());
    let ready = |node: &Node| {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True")
    };

    cloud
        .set_fault(&Fault {
            api: FaultApi::Instances,
            fail_fraction: 1.0,
            delay_ms: 0,
        })
        .await
        .unwrap();
    // node-0 goes silent: NotReady within 2 s, then looked up in the cloud every 200 ms.
    admin
        .inject(FaultSpec::StopHeartbeats {
            node: "node-0".into(),
        })
        .await
        .unwrap();
    eventually_async("node-0 NotReady", DEADLINE, || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get("node-0").await.ok()?;
            (!ready(&node)).then_some(())
        }
    })
    .await;
    // node-1 joins anew: registered with the taint, which the CCM cannot lift yet.
    rejoin(&admin, &nodes, "node-1").await;
    // Several lifecycle periods and retries with the cloud down.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let node0 = nodes.get("node-0").await.expect("node-0 is not deleted");
    assert!(!ready(&node0), "node-0 is still silent");
    let node1 = nodes.get("node-1").await.expect("node-1 is kept");
    assert!(uninitialized(&node1), "node-1 waits for the cloud");
    assert!(
        node1
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_none(),
        "no providerID without the cloud"
    );

    cloud.clear_faults(None).await.unwrap();
    eventually_async(
        "node-1 initialized once the cloud answers",
        DEADLINE,
        || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get("node-1").await.ok()?;
                let provider = node.spec.as_ref()?.provider_id.clone()?;
                (!uninitialized(&node) && provider.starts_with("miniplane://")).then_some(())
            }
        },
    )
    .await;
    assert!(
        nodes.get("node-0").await.is_ok(),
        "node-0's instance exists: the answer keeps it"
    );
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
}

/// `miniplane fault stop-component cloud-controller-manager`: while it is stopped a Node that
/// registers keeps its uninitialized taint (nobody else lifts it); cleared, the restarted CCM
/// lists, watches and initializes it.
#[tokio::test]
async fn a_stopped_cloud_controller_manager_initializes_nodes_when_restarted() {
    use admin::FaultSpec;
    use miniplane::admin_client::AdminClient;

    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = stopped.clone();
    let cluster = crate::support::cluster()
        .nodes(2)
        .cloud(true)
        .on_progress(move |p| {
            if let miniplane::Progress::Exited {
                component: miniplane::Component::CloudControllerManager,
                ..
            } = p
            {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        })
        .start()
        .unwrap();
    let nodes: Api<Node> = Api::all(cluster.client());
    let admin = AdminClient::new(cluster.client());
    admin
        .inject(FaultSpec::StopComponent {
            component: "cloud-controller-manager".into(),
        })
        .await
        .unwrap();
    // The supervisor stops it once it sees the fault, and says so; then node-1 joins anew.
    eventually_async("the CCM stopped", DEADLINE, || {
        let done = stopped.load(std::sync::atomic::Ordering::SeqCst);
        async move { done.then_some(()) }
    })
    .await;
    rejoin(&admin, &nodes, "node-1").await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let node = nodes.get("node-1").await.unwrap();
    assert!(uninitialized(&node), "no CCM, no initialization");

    admin.clear("stop-cloud-controller-manager").await.unwrap();
    eventually_async("node-1 initialized by the restarted CCM", DEADLINE, || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get("node-1").await.ok()?;
            (!uninitialized(&node) && node.spec.as_ref()?.provider_id.is_some()).then_some(())
        }
    })
    .await;
    tokio::task::spawn_blocking(move || cluster.stop())
        .await
        .unwrap()
        .unwrap();
}

/// Whether the Node still carries `node.cloudprovider.kubernetes.io/uninitialized`.
fn uninitialized(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| {
            ts.iter()
                .any(|t| t.key == "node.cloudprovider.kubernetes.io/uninitialized")
        })
}

/// Makes `name` join anew, as a new machine would (`RemoveNode`, then cleared), and waits
/// until its kubelet has registered it again with the uninitialized taint.
async fn rejoin(admin: &miniplane::admin_client::AdminClient, nodes: &Api<Node>, name: &str) {
    admin
        .inject(admin::FaultSpec::RemoveNode { node: name.into() })
        .await
        .unwrap();
    eventually_async(&format!("{name} removed"), DEADLINE, || {
        let nodes = nodes.clone();
        async move {
            matches!(nodes.get(name).await, Err(kube::Error::Api(s)) if s.code == 404).then_some(())
        }
    })
    .await;
    admin.clear(&format!("remove-node-{name}")).await.unwrap();
    eventually_async(
        &format!("{name} registered again, tainted"),
        DEADLINE,
        || {
            let nodes = nodes.clone();
            async move {
                let node = nodes.get(name).await.ok()?;
                uninitialized(&node).then_some(())
            }
        },
    )
    .await;
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `timeout`.
async fn eventually_async<T, F, Fut>(what: &str, timeout: std::time::Duration, check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = std::time::Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
