//! Service cluster IPs and node ports as kube-apiserver allocates them: a value asked for
//! that another Service holds or that is outside the range gets Kubernetes' 422, a value
//! picked for the client never collides, and a deleted Service's values are free again.

use crate::common;

use axum::http::StatusCode;
use common::Harness;
use serde_json::{Value, json};
use std::time::Duration;

const SERVICES: &str = "/api/v1/namespaces/default/services";

fn service(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

fn node_port(name: &str, ip: Option<&str>, node_port: Option<i64>) -> Value {
    let mut port = json!({"port": 80, "protocol": "TCP"});
    if let Some(n) = node_port {
        port["nodePort"] = json!(n);
    }
    let mut spec = json!({"type": "NodePort", "selector": {"app": name}, "ports": [port]});
    if let Some(ip) = ip {
        spec["clusterIP"] = json!(ip);
    }
    service(name, spec)
}

/// Retries `create` until the allocations have seen an earlier delete (they follow the store).
async fn create_eventually(h: &Harness, body: &Value) -> common::Resp {
    for _ in 0..50 {
        let r = h.post(SERVICES, body).await;
        if r.status != StatusCode::UNPROCESSABLE_ENTITY {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    h.post(SERVICES, body).await
}

#[tokio::test]
async fn a_cluster_ip_or_node_port_taken_by_another_service_is_refused() {
    let h = Harness::new().await;
    let a = h
        .post(SERVICES, &node_port("a", Some("10.96.0.50"), Some(30080)))
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.body);

    let b = h
        .post(SERVICES, &node_port("b", Some("10.96.0.50"), None))
        .await;
    assert_eq!(b.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", b.body);
    assert_eq!(
        b.body["message"],
        "Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.96.0.50\"}: failed to allocate IP 10.96.0.50: provided IP is already allocated"
    );
    assert_eq!(b.body["details"]["causes"][0]["field"], "spec.clusterIPs");

    let c = h.post(SERVICES, &node_port("c", None, Some(30080))).await;
    assert_eq!(c.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", c.body);
    assert_eq!(
        c.body["message"],
        "Service \"c\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    // Nothing was written for the refused ones.
    assert_eq!(
        h.get(&format!("{SERVICES}/b")).await.status,
        StatusCode::NOT_FOUND
    );

    // An update of another Service to a taken node port is refused as well.
    let d = h.post(SERVICES, &node_port("d", None, None)).await;
    assert_eq!(d.status, StatusCode::CREATED, "{:?}", d.body);
    let mut moved = d.body.clone();
    moved["spec"]["ports"][0]["nodePort"] = json!(30080);
    let put = h.put(&format!("{SERVICES}/d"), &moved).await;
    assert_eq!(
        put.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{:?}",
        put.body
    );
    assert_eq!(
        put.body["message"],
        "Service \"d\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );

    // Once a is deleted, its address and port are free for b and c.
    let del = h.delete(&format!("{SERVICES}/a"), None).await;
    assert_eq!(del.status, StatusCode::OK, "{:?}", del.body);
    let b = create_eventually(&h, &node_port("b", Some("10.96.0.50"), Some(30080))).await;
    assert_eq!(b.status, StatusCode::CREATED, "{:?}", b.body);
}

#[tokio::test]
async fn values_outside_the_ranges_are_refused_as_kubernetes_words_it() {
    let h = Harness::new().await;
    let r = h
        .post(SERVICES, &node_port("x", Some("192.168.0.10"), None))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert_eq!(
        r.body["message"],
        "Service \"x\" is invalid: spec.clusterIPs: Invalid value: []string{\"192.168.0.10\"}: failed to allocate IP 192.168.0.10: the provided network does not match the current range"
    );
    let r = h.post(SERVICES, &node_port("y", None, Some(8080))).await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
    assert_eq!(
        r.body["message"],
        "Service \"y\" is invalid: spec.ports[0].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
    );
}

#[tokio::test]
async fn picked_addresses_never_collide() {
    let h = Harness::new().await;
    let mut ips = std::collections::BTreeSet::new();
    let mut ports = std::collections::BTreeSet::new();
    for i in 0..200 {
        let r = h
            .post(SERVICES, &node_port(&format!("s{i}"), None, None))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
        let ip = r.body["spec"]["clusterIP"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert_eq!(r.body["spec"]["clusterIPs"][0], ip.as_str());
        assert!(ips.insert(ip), "cluster IP handed out twice");
        let port = r.body["spec"]["ports"][0]["nodePort"].as_i64().unwrap_or(0);
        assert!((30000..=32767).contains(&port), "{port}");
        assert!(ports.insert(port), "node port {port} handed out twice");
    }
    // The `kubernetes` Service's 10.96.0.1 is held too.
    let ensured = apiserver::kubernetes_service::ensure(&h.state, 6443).await;
    assert!(ensured.is_ok_and(|wrote| wrote));
    let r = h
        .post(SERVICES, &node_port("k", Some("10.96.0.1"), None))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{:?}", r.body);
}
