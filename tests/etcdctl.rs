//! The store's etcd v3 endpoint (`miniplane apiserver --etcd-listen`) read with the real
//! `etcdctl` (Debian's etcd-client, etcd 3.4): the keys the API server wrote under
//! `/registry/`, an object's revision equal to its resourceVersion, `endpoint status` and
//! `endpoint health`, and writes refused unless `--etcd-listen-writable`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::server::Server;
use base64::Engine;
use std::process::Command;

/// Debian's etcdctl (package etcd-client).
const ETCDCTL: &str = "/usr/bin/etcdctl";

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// What etcdctl printed and whether it succeeded.
struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `etcdctl --endpoints 127.0.0.1:PORT ARGS` with the v3 API.
fn etcdctl(port: u16, args: &[&str]) -> Out {
    let endpoint = format!("127.0.0.1:{port}");
    let output = Command::new(ETCDCTL)
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            &endpoint,
            "--dial-timeout",
            "5s",
            "--command-timeout",
            "10s",
        ])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{ETCDCTL}: {e} (install Debian's etcd-client)"));
    Out {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn etcdctl_ok(port: u16, args: &[&str]) -> String {
    let out = etcdctl(port, args);
    assert!(
        out.ok,
        "etcdctl {args:?} failed: {}{}",
        out.stdout, out.stderr
    );
    out.stdout
}

#[test]
fn etcdctl_reads_what_the_apiserver_wrote_and_may_not_write() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let s = Server::start_with(&["--etcd-listen", &listen]);
    s.kubectl_ok(&["create", "deployment", "nginx", "--image=nginx"]);
    let rv = s.kubectl_ok(&[
        "get",
        "deployment",
        "nginx",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let key = "/registry/deployments/default/nginx";

    let keys = etcdctl_ok(port, &["get", "--prefix", "/registry/", "--keys-only"]);
    assert!(keys.lines().any(|l| l == key), "{key} not in:\n{keys}");
    assert!(
        keys.lines().any(|l| l == "/registry/namespaces/default"),
        "{keys}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&etcdctl_ok(port, &["get", key, "-w", "json"])).unwrap();
    let kv = &json["kvs"][0];
    let b64 = base64::engine::general_purpose::STANDARD;
    let got_key = b64.decode(kv["key"].as_str().unwrap()).unwrap();
    assert_eq!(got_key, key.as_bytes());
    assert_eq!(
        kv["mod_revision"].as_i64().unwrap().to_string(),
        rv,
        "{json}"
    );
    assert!(json["header"]["revision"].as_i64().unwrap() >= kv["mod_revision"].as_i64().unwrap());
    let value: serde_json::Value =
        serde_json::from_slice(&b64.decode(kv["value"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(value["metadata"]["name"], "nginx");
    assert_eq!(value["kind"], "Deployment");

    // The endpoint recorded the read in the API server's collector: a span of `etcd` naming
    // the key, its revision, and a summary.
    let reads = etcd_spans(&s, "Range");
    let read = reads
        .iter()
        .find(|sp| sp["attributes"]["key"] == key)
        .unwrap_or_else(|| panic!("no etcd span naming {key}: {reads:#?}"));
    assert_eq!(
        read["attributes"]["revision"].as_i64(),
        json["header"]["revision"].as_i64(),
        "{read}"
    );
    assert!(
        read["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{key} → 1 kv at revision ")),
        "{read}"
    );
    assert!(
        reads
            .iter()
            .any(|sp| sp["attributes"]["prefix"] == "/registry/"),
        "the --prefix listing: {reads:#?}"
    );

    let status = etcdctl_ok(port, &["endpoint", "status"]);
    let row = status.lines().next().unwrap_or_default();
    assert!(row.starts_with(&format!("{listen}, ")), "{status}");
    assert!(
        row.contains(&format!("{:x}", store_grpc::MEMBER_ID)),
        "{status}"
    );
    assert!(row.contains(store_grpc::VERSION), "{status}");
    let health = etcdctl(port, &["endpoint", "health"]);
    assert!(
        health.ok && format!("{}{}", health.stdout, health.stderr).contains("is healthy"),
        "{}{}",
        health.stdout,
        health.stderr
    );
    let members = etcdctl_ok(port, &["member", "list"]);
    assert!(members.contains(store_grpc::MEMBER_NAME), "{members}");

    let put = etcdctl(port, &["put", key, "{}"]);
    assert!(
        !put.ok,
        "put went through a read-only endpoint: {}",
        put.stdout
    );
    assert!(
        put.stderr.contains("--etcd-listen-writable"),
        "{}",
        put.stderr
    );
    let del = etcdctl(port, &["del", key]);
    assert!(!del.ok);
    let refused = etcd_spans(&s, "Put");
    assert!(
        refused.iter().any(|sp| sp["summary"]
            == format!("{key} refused: the endpoint is read-only")
            && sp["attributes"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("--etcd-listen-writable"))),
        "{refused:#?}"
    );
    // The object is untouched.
    let again = s.kubectl_ok(&[
        "get",
        "deployment",
        "nginx",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert_eq!(again, rv);
}

/// The spans of component `etcd` and method `method` the API server's collector holds.
fn etcd_spans(s: &Server, method: &str) -> Vec<serde_json::Value> {
    let all = s.get("/miniplane/v1/traces?spans=all").json();
    all["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|sp| sp["component"] == "etcd" && sp["name"] == method)
        .cloned()
        .collect()
}

/// A compaction through the endpoint is the store's: etcd then refuses a read below it, the
/// API server answers a list at a compacted resourceVersion `410 Expired`, as kube-apiserver
/// does after etcd compacted, and `miniplane history` starts at the cut.
#[test]
fn a_compaction_through_the_endpoint_expires_old_revisions_for_the_apiserver_too() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let s = Server::start_with(&["--etcd-listen", &listen, "--etcd-listen-writable"]);
    s.kubectl_ok(&["create", "deployment", "nginx", "--image=nginx"]);
    let old = s.kubectl_ok(&[
        "get",
        "deployment",
        "nginx",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    s.kubectl_ok(&["scale", "deployment", "nginx", "--replicas=3"]);
    let now = s.kubectl_ok(&[
        "get",
        "deployment",
        "nginx",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert!(now.parse::<i64>().unwrap() > old.parse::<i64>().unwrap());
    let key = "/registry/deployments/default/nginx";
    // Before the compaction the old revision can be read.
    etcdctl_ok(port, &["get", key, "--rev", &old]);
    let compacted = etcdctl_ok(port, &["compaction", &now]);
    assert!(
        compacted.contains(&format!("compacted revision {now}")),
        "{compacted}"
    );
    let read = etcdctl(port, &["get", key, "--rev", &old]);
    assert!(!read.ok, "{}", read.stdout);
    assert!(
        read.stderr.contains("required revision has been compacted"),
        "{}",
        read.stderr
    );
    let list = s.kubectl(&[
        "get",
        "--raw",
        &format!(
            "/apis/apps/v1/namespaces/default/deployments?resourceVersion={old}&resourceVersionMatch=Exact"
        ),
    ]);
    assert!(!list.ok(), "{list}");
    assert!(list.stderr.contains("(Expired)"), "{list}");
    // `miniplane history` starts at the cut: the version live there, the older one gone.
    let history = s.cli_ok(&["history", "deploy/nginx"]);
    let lines: Vec<&str> = history.lines().collect();
    assert!(
        lines[0].ends_with(&format!(
            "older changes were compacted (the store keeps revisions from {now} on)"
        )),
        "{history}"
    );
    assert!(
        lines[2].starts_with(&format!("{now} ")) && lines[2].contains("updated (before the cut)"),
        "{history}"
    );
    assert_eq!(
        s.cli_err(&["history", "deploy/nginx", "--at", &old]),
        format!("error: revision {old} is compacted: the oldest revision kept is {now}")
    );
    let compactions = etcd_spans(&s, "Compact");
    assert!(
        compactions
            .iter()
            .any(|sp| sp["summary"] == format!("to revision {now}")),
        "{compactions:#?}"
    );
    let refused = etcd_spans(&s, "Range");
    assert!(
        refused.iter().any(
            |sp| sp["attributes"]["revision"].as_i64() == old.parse().ok()
                && sp["attributes"]["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("required revision has been compacted"))
        ),
        "{refused:#?}"
    );
}

#[test]
fn a_writable_endpoint_edits_the_store_behind_the_apiservers_back() {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let s = Server::start_with(&["--etcd-listen", &listen, "--etcd-listen-writable"]);
    s.kubectl_ok(&["create", "configmap", "cm", "--from-literal=a=1"]);
    let key = "/registry/configmaps/default/cm";
    let out = etcdctl_ok(port, &["get", key, "--print-value-only"]);
    let mut object: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    object["data"]["a"] = serde_json::json!("edited");
    etcdctl_ok(port, &["put", key, &object.to_string()]);
    let data = s.kubectl_ok(&["get", "configmap", "cm", "-o", "jsonpath={.data.a}"]);
    assert_eq!(data, "edited");
    let deleted = etcdctl_ok(port, &["del", key]);
    assert_eq!(deleted.trim(), "1");
    assert!(!s.kubectl(&["get", "configmap", "cm"]).ok());
}

#[test]
fn the_etcd_endpoint_listens_on_127_0_0_1_only() {
    let out = Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(["apiserver", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .args(["--listen", "127.0.0.1:0", "--etcd-listen", "0.0.0.0:2379"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("127.0.0.1 only"), "{stderr}");
}

#[tokio::test]
async fn a_library_cluster_serves_its_store_to_etcdctl() {
    let cluster = miniplane::Cluster::builder()
        .nodes(0)
        .etcd_listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), false)
        .start()
        .unwrap();
    let port = cluster
        .etcd_endpoint()
        .expect("an endpoint was asked for")
        .port();
    assert_ne!(port, 0, "the free port chosen is reported");
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(cluster.client(), "default");
    let cm: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "seen-by-etcdctl"}}))
            .unwrap();
    let created = cms.create(&Default::default(), &cm).await.unwrap();
    let rv = created.metadata.resource_version.unwrap();
    let keys = tokio::task::spawn_blocking(move || {
        etcdctl_ok(port, &["get", "--prefix", "/registry/", "--keys-only"])
    })
    .await
    .unwrap();
    let key = keys
        .lines()
        .find(|k| k.ends_with("/configmaps/default/seen-by-etcdctl"))
        .unwrap_or_else(|| panic!("no key of the ConfigMap in {keys}"))
        .to_owned();
    let json = tokio::task::spawn_blocking(move || etcdctl_ok(port, &["get", &key, "-w", "json"]))
        .await
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        parsed["kvs"][0]["mod_revision"].to_string(),
        rv,
        "the resourceVersion is the key's revision: {json}"
    );
    cluster.stop().unwrap();
}
