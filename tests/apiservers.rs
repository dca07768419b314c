//! End to end: `miniplane up --apiservers N` on an etcd cluster, as a user types it. Every API
//! server serves the same cluster to kubectl; each keeps its identity Lease in `kube-system`;
//! and the `default/kubernetes` Service and its endpoints belong to one of them (the one up
//! longest) and stay put instead of being rewritten by each in turn.

use std::time::Duration;

use serde_json::Value;

use crate::support::etcd_cluster;
use crate::support::up::UpEnv;

/// The port of `url` (`https://127.0.0.1:PORT`).
fn port_of(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_three_apiservers_on_etcd_and_one_owns_the_kubernetes_service() {
    let etcd = etcd_cluster::EtcdCluster::start(1).await;
    let servers = etcd.endpoints().join(",");
    let env = UpEnv::new();
    let mut up = env.up(&[
        "--separate",
        "--port",
        "0",
        "--nodes",
        "2",
        "--cloud=false",
        "--metrics-server=false",
        "--apiservers",
        "3",
        "--etcd-servers",
        &servers,
    ]);
    let out = up.stdout();
    assert!(
        out.contains("3 API servers share the etcd cluster"),
        "{out}"
    );
    // Every API server's URL: the first from the ready line, the others listed with their
    // kubeconfigs.
    let mut urls = vec![up.url.clone()];
    for n in 1..3 {
        let kubeconfig = format!("/apiserver-{n}/kubeconfig kubectl get nodes");
        let line = out
            .lines()
            .find(|l| l.contains(&kubeconfig))
            .unwrap_or_else(|| panic!("no line for API server {n}: {out}"));
        urls.push(line.split_whitespace().next().unwrap().to_string());
    }
    let ports: Vec<u16> = urls.iter().map(|u| port_of(u)).collect();
    assert_eq!(
        ports
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "{urls:?}"
    );
    let kubectl_at = |n: usize, args: &[&str]| {
        let kubeconfig = match n {
            0 => env.kubeconfig(),
            n => env.data_dir().join(format!("apiserver-{n}/kubeconfig")),
        };
        let run = crate::support::kubectl::run_kubectl(
            crate::support::kubectl::isolated_kubectl(env.dir(), &kubeconfig, args),
            args,
            None,
        );
        assert!(run.ok(), "API server {n}: {run}");
        run.stdout
    };

    // Written through the third, rolled out by the components on the first, read through the
    // second.
    kubectl_at(
        2,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=2",
        ],
    );
    kubectl_at(1, &["rollout", "status", "deploy/web", "--timeout=60s"]);
    let pods: Value = serde_json::from_str(&kubectl_at(
        1,
        &["get", "pods", "-l", "app=web", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(pods["items"].as_array().unwrap().len(), 2);

    // One identity Lease per API server, each with its peer address.
    let leases: Value = serde_json::from_str(&kubectl_at(
        0,
        &[
            "get",
            "leases",
            "-n",
            "kube-system",
            "-l",
            "apiserver.kubernetes.io/identity=kube-apiserver",
            "-o",
            "json",
        ],
    ))
    .unwrap();
    let leases = leases["items"].as_array().unwrap().clone();
    let mut lease_ports: Vec<u16> = leases
        .iter()
        .map(|l| {
            let address = l["metadata"]["annotations"]["kubernetes.io/peer-advertise-address"]
                .as_str()
                .unwrap_or_else(|| panic!("no peer address: {l}"));
            address.rsplit(':').next().unwrap().parse().unwrap()
        })
        .collect();
    lease_ports.sort();
    let mut want = ports.clone();
    want.sort();
    assert_eq!(lease_ports, want, "{leases:?}");
    // The owner: the API server up longest.
    let owner = leases
        .iter()
        .min_by_key(|l| l["spec"]["acquireTime"].as_str().unwrap().to_string())
        .unwrap();
    let owner_port: u16 = owner["metadata"]["annotations"]["kubernetes.io/peer-advertise-address"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();

    let service_and_endpoints = || {
        let svc: Value =
            serde_json::from_str(&kubectl_at(0, &["get", "svc", "kubernetes", "-o", "json"]))
                .unwrap();
        let ep: Value = serde_json::from_str(&kubectl_at(
            0,
            &["get", "endpoints", "kubernetes", "-o", "json"],
        ))
        .unwrap();
        (svc, ep)
    };
    let (svc, ep) = service_and_endpoints();
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], owner_port, "{svc}");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], owner_port, "{ep}");
    // A reconcile round (10 s) of every API server later, nothing was rewritten: the others
    // leave them be.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (svc_after, ep_after) = service_and_endpoints();
    assert_eq!(
        svc_after["metadata"]["resourceVersion"],
        svc["metadata"]["resourceVersion"]
    );
    assert_eq!(
        ep_after["metadata"]["resourceVersion"],
        ep["metadata"]["resourceVersion"]
    );
    let status = up.terminate();
    assert!(status.success(), "up stops cleanly: {}", up.stderr());
}

#[test]
fn no_apiserver_is_refused() {
    let env = UpEnv::new();
    let out = env.up_to_end(&["--port", "0", "--apiservers", "0"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--apiservers must be at least 1"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
}
