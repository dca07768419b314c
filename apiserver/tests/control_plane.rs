//! What the API server serves about the control plane itself: the `default/kubernetes`
//! Service its controller keeps in place, and `componentstatuses` (probed on each read, with
//! the deprecation warning and kubectl's table).

use std::net::SocketAddr;
use std::time::Duration;

use apiserver::{ComponentProbes, ServerOptions};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::{Harness, TABLE};

const SERVICE: &str = "/api/v1/namespaces/default/services/kubernetes";

async fn kubernetes_service(h: &Harness) -> Resp {
    h.get(SERVICE).await
}

type Resp = crate::common::Resp;

#[tokio::test]
async fn the_kubernetes_service_is_created_with_kubernetes_fields() {
    let h = Harness::new().await;
    assert_eq!(kubernetes_service(&h).await.status, StatusCode::NOT_FOUND);
    assert!(
        apiserver::kubernetes_service::ensure(&h.state, 6443)
            .await
            .unwrap()
    );
    let svc = kubernetes_service(&h).await;
    assert_eq!(svc.status, StatusCode::OK, "{:?}", svc.body);
    let svc = svc.body;
    assert_eq!(
        svc["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    assert_eq!(svc["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(svc["spec"]["clusterIPs"], json!(["10.96.0.1"]));
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["sessionAffinity"], "None");
    assert_eq!(svc["spec"].get("selector"), None);
    assert_eq!(
        svc["spec"]["ports"],
        json!([{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}])
    );
    // In place already: nothing to write.
    assert!(
        !apiserver::kubernetes_service::ensure(&h.state, 6443)
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn the_kubernetes_service_comes_back_after_a_delete_and_keeps_its_ports() {
    let h = Harness::new().await;
    let task = tokio::spawn(apiserver::kubernetes_service::run(
        h.state.clone(),
        7443,
        Duration::from_millis(50),
        "apiserver-test".to_string(),
    ));
    let eventually = |what: &'static str, check: fn(&Value) -> bool| {
        let h = &h;
        async move {
            for _ in 0..200 {
                let svc = kubernetes_service(h).await;
                if svc.status == StatusCode::OK && check(&svc.body) {
                    return svc.body;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("{what}");
        }
    };
    let first = eventually("created", |_| true).await;
    let deleted = h.delete(SERVICE, None).await;
    assert_eq!(deleted.status, StatusCode::OK, "{:?}", deleted.body);
    let again = eventually("re-created", |_| true).await;
    assert_ne!(again["metadata"]["uid"], first["metadata"]["uid"]);

    let mut changed = again.clone();
    changed["spec"]["ports"][0]["port"] = json!(8443);
    let put = h.put(SERVICE, &changed).await;
    assert_eq!(put.status, StatusCode::OK, "{:?}", put.body);
    let restored = eventually("ports put back", |s| s["spec"]["ports"][0]["port"] == 443).await;
    assert_eq!(restored["spec"]["ports"][0]["targetPort"], 7443);
    assert_eq!(
        restored["metadata"]["uid"], again["metadata"]["uid"],
        "updated, not re-created"
    );
    h.shutdown.cancel();
    task.await.unwrap();
}

/// kube-apiserver's endpoint reconciler: the Endpoints and the EndpointSlice
/// `default/kubernetes` name the advertise address and the API server's port, are written
/// only when missing or different, and come back when changed.
#[tokio::test]
async fn the_kubernetes_service_gets_endpoints_at_the_advertise_address() {
    use apiserver::kubernetes_service::ensure_endpoints;
    const ENDPOINTS: &str = "/api/v1/namespaces/default/endpoints/kubernetes";
    const SLICE: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes";
    let h = Harness::new().await;
    let ip = "192.0.2.10".parse().unwrap();
    assert!(ensure_endpoints(&h.state, &[ip], 6443).await.unwrap());
    let ep = h.get(ENDPOINTS).await;
    assert_eq!(ep.status, StatusCode::OK, "{:?}", ep.body);
    assert_eq!(
        ep.body["subsets"],
        json!([{"addresses": [{"ip": "192.0.2.10"}],
                "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}])
    );
    assert_eq!(
        ep.body["metadata"]["labels"],
        json!({"endpointslice.kubernetes.io/skip-mirror": "true"})
    );
    let slice = h.get(SLICE).await;
    assert_eq!(slice.status, StatusCode::OK, "{:?}", slice.body);
    assert_eq!(
        slice.body["metadata"]["labels"],
        json!({"kubernetes.io/service-name": "kubernetes"})
    );
    assert_eq!(slice.body["addressType"], "IPv4");
    assert_eq!(
        slice.body["endpoints"],
        json!([{"addresses": ["192.0.2.10"], "conditions": {"ready": true}}])
    );
    assert_eq!(
        slice.body["ports"],
        json!([{"name": "https", "port": 6443, "protocol": "TCP"}])
    );
    // In place: nothing to write. Another address or port: both are put back.
    assert!(!ensure_endpoints(&h.state, &[ip], 6443).await.unwrap());
    let moved = "192.0.2.11".parse().unwrap();
    assert!(ensure_endpoints(&h.state, &[moved], 7443).await.unwrap());
    let ep = h.get(ENDPOINTS).await.body;
    assert_eq!(ep["subsets"][0]["addresses"][0]["ip"], "192.0.2.11");
    assert_eq!(ep["subsets"][0]["ports"][0]["port"], 7443);
    let slice = h.get(SLICE).await.body;
    assert_eq!(slice["endpoints"][0]["addresses"][0], "192.0.2.11");
    assert_eq!(slice["ports"][0]["port"], 7443);
    // Several API servers on one port: one subset with every address, one endpoint each.
    let both = ["192.0.2.11".parse().unwrap(), "192.0.2.12".parse().unwrap()];
    assert!(ensure_endpoints(&h.state, &both, 7443).await.unwrap());
    let ep = h.get(ENDPOINTS).await.body;
    assert_eq!(
        ep["subsets"],
        json!([{"addresses": [{"ip": "192.0.2.11"}, {"ip": "192.0.2.12"}],
                "ports": [{"name": "https", "port": 7443, "protocol": "TCP"}]}])
    );
    let slice = h.get(SLICE).await.body;
    assert_eq!(
        slice["endpoints"],
        json!([{"addresses": ["192.0.2.11"], "conditions": {"ready": true}},
               {"addresses": ["192.0.2.12"], "conditions": {"ready": true}}])
    );
}

/// kube-apiserver's identity Lease: written and renewed in `kube-system` with its labels and
/// peer address; read back as a live API server; an expired one is collected, a fresh one
/// kept; and of two API servers only the one up longest owns the kubernetes Service.
#[tokio::test]
async fn identity_leases_name_the_live_api_servers_and_expired_ones_are_collected() {
    use apiserver::identity_lease::{self, Identity};
    use apiserver::kubernetes_service::{LEASE_TTL, Role, decide};
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let h = Harness::new().await;
    let first = Identity::for_host("cp-0", 6443, Some("192.0.2.1:6443".parse().unwrap()));
    let second = Identity::for_host("cp-0", 6444, Some("192.0.2.1:6444".parse().unwrap()));
    identity_lease::renew(&h.state, &first).await.unwrap();
    let lease = h.get(&format!("{LEASES}/{}", first.name)).await;
    assert_eq!(lease.status, StatusCode::OK, "{:?}", lease.body);
    assert_eq!(
        lease.body["metadata"]["labels"],
        json!({"apiserver.kubernetes.io/identity": "kube-apiserver",
               "kubernetes.io/hostname": "cp-0"})
    );
    assert_eq!(
        lease.body["metadata"]["annotations"]["kubernetes.io/peer-advertise-address"],
        "192.0.2.1:6443"
    );
    assert_eq!(lease.body["spec"]["holderIdentity"], first.holder.as_str());
    assert_eq!(lease.body["spec"]["leaseDurationSeconds"], 3600);
    let renewed = lease.body["spec"]["renewTime"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(5)).await;
    identity_lease::renew(&h.state, &first).await.unwrap();
    let again = h.get(&format!("{LEASES}/{}", first.name)).await.body;
    assert_ne!(again["spec"]["renewTime"].as_str().unwrap(), renewed);
    // The same run keeps its acquireTime; a new run of the same API server takes it anew.
    let acquired = lease.body["spec"]["acquireTime"].as_str().unwrap();
    assert_eq!(again["spec"]["acquireTime"], acquired);
    let restarted = Identity {
        holder: format!("{}_restarted", first.name),
        ..first.clone()
    };
    identity_lease::renew(&h.state, &restarted).await.unwrap();
    let taken = h.get(&format!("{LEASES}/{}", first.name)).await.body;
    assert_ne!(taken["spec"]["acquireTime"], acquired);
    identity_lease::renew(&h.state, &first).await.unwrap();
    assert_eq!(again["metadata"]["uid"], lease.body["metadata"]["uid"]);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    identity_lease::renew(&h.state, &second).await.unwrap();
    let live = identity_lease::live(&h.state, LEASE_TTL).await.unwrap();
    let mut names: Vec<&str> = live.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    let mut want = vec![first.name.as_str(), second.name.as_str()];
    want.sort();
    assert_eq!(names, want);
    // The first is up longer: it owns the Service; the second stands by.
    assert_eq!(
        decide(&first.name, first.peer_address, &live),
        Role::Owner {
            addresses: vec!["192.0.2.1".parse().unwrap()]
        }
    );
    assert_eq!(
        decide(&second.name, second.peer_address, &live),
        Role::Standby {
            owner: first.name.clone()
        }
    );

    // A Lease last renewed two hours ago is collected; the fresh ones and a Lease without the
    // identity label are kept.
    for (name, labels) in [
        (
            "apiserver-gone",
            json!({"apiserver.kubernetes.io/identity": "kube-apiserver"}),
        ),
        ("someone-else", json!({})),
    ] {
        let old = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "labels": labels},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 3600,
                     "renewTime": "2000-01-01T00:00:00.000000Z"},
        });
        let created = h.post(LEASES, &old).await;
        assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    }
    // Stale: not live, though labelled.
    assert_eq!(
        identity_lease::live(&h.state, LEASE_TTL)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(identity_lease::collect_garbage(&h.state).await.unwrap(), 1);
    assert_eq!(
        h.get(&format!("{LEASES}/apiserver-gone")).await.status,
        StatusCode::NOT_FOUND
    );
    for kept in [first.name.as_str(), second.name.as_str(), "someone-else"] {
        assert_eq!(
            h.get(&format!("{LEASES}/{kept}")).await.status,
            StatusCode::OK,
            "{kept}"
        );
    }
}

/// A `/healthz` that answers `ok`, as the components' do.
async fn healthz_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A loopback address nothing listens on.
fn closed_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("its address")
}

async fn with_probes() -> (Harness, SocketAddr) {
    let probes = ComponentProbes::default();
    probes.set("controller-manager", healthz_server().await);
    let down = closed_port();
    probes.set("scheduler", down);
    let h = Harness::with_options(ServerOptions {
        component_probes: probes,
        ..ServerOptions::default()
    })
    .await;
    (h, down)
}

fn warning(resp: &Resp) -> Vec<String> {
    resp.headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().expect("an ASCII header").to_owned())
        .collect()
}

const DEPRECATED: &str = "299 - \"v1 ComponentStatus is deprecated in v1.19+\"";

#[tokio::test]
async fn componentstatuses_are_probed_on_each_list() {
    let (h, down) = with_probes().await;
    let list = h.get("/api/v1/componentstatuses").await;
    assert_eq!(list.status, StatusCode::OK, "{:?}", list.body);
    assert_eq!(warning(&list), vec![DEPRECATED]);
    assert_eq!(list.body["kind"], "ComponentStatusList");
    let items = list.body["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["controller-manager", "etcd-0", "scheduler"]);
    assert_eq!(
        items[0]["conditions"],
        json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
    assert_eq!(
        items[1]["conditions"],
        json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
    assert_eq!(
        items[2]["conditions"],
        json!([{
            "type": "Healthy",
            "status": "False",
            "message": format!("Get \"http://{down}/healthz\": dial tcp {down}: connect: connection refused"),
        }])
    );
}

#[tokio::test]
async fn componentstatuses_as_kubectl_shows_them() {
    let (h, _) = with_probes().await;
    let table = h.get_as("/api/v1/componentstatuses", TABLE).await;
    assert_eq!(table.status, StatusCode::OK);
    assert_eq!(warning(&table), vec![DEPRECATED]);
    let columns: Vec<&str> = table.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Status", "Message", "Error"]);
    let rows: Vec<&Value> = table.body["rows"].as_array().unwrap().iter().collect();
    assert_eq!(
        rows[0]["cells"],
        json!(["controller-manager", "Healthy", "ok", ""])
    );
    assert_eq!(rows[1]["cells"], json!(["etcd-0", "Healthy", "ok", ""]));
    assert_eq!(rows[2]["cells"][1], "Unhealthy");

    let one = h.get("/api/v1/componentstatuses/etcd-0").await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(warning(&one), vec![DEPRECATED]);
    assert_eq!(one.body["kind"], "ComponentStatus");
    assert_eq!(one.body["conditions"][0]["message"], "ok");
    let cm = h.get("/api/v1/componentstatuses/controller-manager").await;
    assert_eq!(cm.body["conditions"][0]["status"], "True");
}

#[tokio::test]
async fn componentstatuses_are_read_only_and_listed_by_discovery() {
    let (h, _) = with_probes().await;
    let missing = h.get("/api/v1/componentstatuses/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["reason"], "NotFound");
    let create = h
        .post(
            "/api/v1/componentstatuses",
            &json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": "x"}}),
        )
        .await;
    assert_eq!(create.status, StatusCode::METHOD_NOT_ALLOWED);
    let delete = h
        .raw(
            Method::DELETE,
            "/api/v1/componentstatuses/etcd-0",
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(delete.status, StatusCode::METHOD_NOT_ALLOWED);
    let watch = h.get("/api/v1/componentstatuses?watch=1").await;
    assert_eq!(watch.status, StatusCode::METHOD_NOT_ALLOWED);
    // Namespaced paths are not routes of a cluster-scoped resource.
    let namespaced = h.get("/api/v1/namespaces/default/componentstatuses").await;
    assert_eq!(namespaced.status, StatusCode::NOT_FOUND);

    let discovery = h.get("/api/v1").await;
    let row = discovery.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "componentstatuses")
        .expect("componentstatuses in discovery")
        .clone();
    assert_eq!(row["kind"], "ComponentStatus");
    assert_eq!(row["namespaced"], false);
    assert_eq!(row["shortNames"], json!(["cs"]));
    assert_eq!(row["verbs"], json!(["get", "list"]));
}
