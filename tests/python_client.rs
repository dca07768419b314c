//! End to end: the Python `kubernetes` client (the official one, pinned to 33.1.0, the
//! release for Kubernetes 1.33) against a server with HTTPS, client certificates, tokens and
//! RBAC. The client verifies the server with the CA of its kubeconfig, authenticates with the
//! admin's certificate, with a ServiceAccount token from `kubectl create token`, and with a
//! token the server does not know; each answer is the code, reason and message
//! kube-apiserver gives. A ReplicationController (the kind the client's own tests still use)
//! is created, defaulted and scaled through `/scale`.
//!
//! The client lives in a virtual environment `./test.sh` makes (`target/python-client`, from
//! PyPI); `MINIPLANE_PYTHON` names another interpreter that has the package.

use crate::support;

use serde_json::{Value, json};
use support::Server;

/// The script: each step prints one JSON line `{"step": ..., ...}`; a failure that is not
/// an expected `ApiException` ends it with a traceback and a non-zero exit.
const SCRIPT: &str = r#"
import json, sys
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

kubeconfig, ca_file, sa_token = sys.argv[1], sys.argv[2], sys.argv[3]

def out(step, **fields):
    print(json.dumps(dict(step=step, **fields)), flush=True)

def refused(step, call):
    try:
        call()
        out(step, status=200)
    except ApiException as e:
        body = json.loads(e.body)
        out(step, status=e.status, reason=body.get("reason"), message=body.get("message"),
            kind=body.get("kind"))

# The admin, from the kubeconfig: the CA and the client certificate.
admin = config.new_client_from_config(config_file=kubeconfig)
version = client.VersionApi(admin).get_code()
out("version", major=version.major, minor=version.minor)
core = client.CoreV1Api(admin)
core.create_namespaced_config_map("py", client.V1ConfigMap(
    metadata=client.V1ObjectMeta(name="settings"), data={"mode": "tls"}))
names = [c.metadata.name for c in core.list_namespaced_config_map("py").items]
out("configmaps", names=names)
events = []
for event in watch.Watch().stream(core.list_namespaced_config_map, "py", timeout_seconds=5):
    events.append([event["type"], event["object"].metadata.name])
    if event["object"].metadata.name == "settings":
        break
out("watch", events=events)
# A ReplicationController, as the client's own e2e tests use one, scaled through `/scale`.
core.create_namespaced_replication_controller("py", client.V1ReplicationController(
    metadata=client.V1ObjectMeta(name="frontend"),
    spec=client.V1ReplicationControllerSpec(replicas=2, template=client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "frontend"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="web", image="nginx")])))))
scale = core.patch_namespaced_replication_controller_scale(
    "frontend", "py", {"spec": {"replicas": 3}})
rc = core.read_namespaced_replication_controller("frontend", "py")
out("rc", selector=rc.spec.selector, labels=rc.metadata.labels, replicas=rc.spec.replicas,
    scale_replicas=scale.spec.replicas, scale_selector=scale.status.selector)
me = client.AuthenticationV1Api(admin).create_self_subject_review(client.V1SelfSubjectReview())
out("admin-whoami", username=me.status.user_info.username, groups=me.status.user_info.groups)

def token_client(token):
    c = client.Configuration()
    c.host = admin.configuration.host
    c.ssl_ca_cert = ca_file
    c.api_key = {"authorization": "Bearer " + token}
    return client.ApiClient(c)

# A ServiceAccount's token: authenticated, and allowed only what its bindings grant.
sa = token_client(sa_token)
me = client.AuthenticationV1Api(sa).create_self_subject_review(client.V1SelfSubjectReview())
out("sa-whoami", username=me.status.user_info.username, groups=me.status.user_info.groups)
out("sa-configmaps", names=[c.metadata.name
                            for c in client.CoreV1Api(sa).list_namespaced_config_map("py").items])
refused("sa-pods", lambda: client.CoreV1Api(sa).list_namespaced_pod("py"))
refused("sa-delete", lambda: client.CoreV1Api(sa).delete_namespaced_config_map("settings", "py"))

# A token the server does not know.
refused("bad-token", lambda: client.CoreV1Api(token_client("not-a-token")).list_namespaced_pod("py"))
"#;

/// The interpreter with the `kubernetes` package: `MINIPLANE_PYTHON`, else the virtual
/// environment `./test.sh` makes.
fn python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("MINIPLANE_PYTHON") {
        return p.into();
    }
    let venv =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/python-client/bin/python");
    assert!(
        venv.exists(),
        "{} is missing: ./test.sh makes it (python3 -m venv target/python-client && \
         target/python-client/bin/pip install kubernetes==33.1.0), or set MINIPLANE_PYTHON",
        venv.display()
    );
    venv
}

#[test]
fn the_python_client_works_over_tls_with_a_certificate_and_with_tokens() {
    let s = Server::start_secure(&[]);
    // A ServiceAccount allowed to read ConfigMaps in "py", and a token for it.
    s.kubectl_ok(&["create", "namespace", "py"]);
    s.kubectl_ok(&["create", "serviceaccount", "reader", "-n", "py"]);
    s.kubectl_ok(&[
        "create",
        "role",
        "cm-reader",
        "-n",
        "py",
        "--verb=get,list,watch",
        "--resource=configmaps",
    ]);
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "reader",
        "-n",
        "py",
        "--role=cm-reader",
        "--serviceaccount=py:reader",
    ]);
    support::eventually("the binding in force", support::DEADLINE, || {
        let run = s.kubectl(&[
            "auth",
            "can-i",
            "list",
            "configmaps",
            "-n",
            "py",
            "--as",
            "system:serviceaccount:py:reader",
        ]);
        (run.stdout.trim() == "yes").then_some(())
    });
    let token = s.kubectl_ok(&["create", "token", "reader", "-n", "py"]);
    let ca = s.dir().join("pki").join("ca.crt");
    assert!(ca.exists(), "{}", ca.display());
    let script = s.dir().join("client.py");
    std::fs::write(&script, SCRIPT).unwrap();

    let output = std::process::Command::new(python())
        .arg(&script)
        .arg(s.kubeconfig())
        .arg(&ca)
        .arg(token.trim())
        .env_remove("KUBECONFIG")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let steps: std::collections::BTreeMap<String, Value> = stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            (v["step"].as_str().unwrap_or_default().to_owned(), v)
        })
        .collect();
    let step = |name: &str| {
        steps
            .get(name)
            .unwrap_or_else(|| panic!("no step {name}: {stdout}\n{stderr}"))
            .clone()
    };

    // The admin: verified server, certificate login, writes, lists and a watch.
    assert_eq!(step("version")["minor"], "33");
    assert_eq!(step("configmaps")["names"], json!(["settings"]));
    assert_eq!(step("watch")["events"], json!([["ADDED", "settings"]]));
    assert_eq!(
        step("rc"),
        json!({"step": "rc", "selector": {"app": "frontend"}, "labels": {"app": "frontend"},
               "replicas": 3, "scale_replicas": 3, "scale_selector": "app=frontend"})
    );
    assert_eq!(
        step("admin-whoami"),
        json!({"step": "admin-whoami", "username": "kubernetes-admin",
               "groups": ["system:masters", "system:authenticated"]})
    );
    // The ServiceAccount's token: its identity, what its Role grants, nothing more.
    assert_eq!(
        step("sa-whoami"),
        json!({"step": "sa-whoami", "username": "system:serviceaccount:py:reader",
               "groups": ["system:serviceaccounts", "system:serviceaccounts:py",
                          "system:authenticated"]})
    );
    assert_eq!(step("sa-configmaps")["names"], json!(["settings"]));
    assert_eq!(
        step("sa-pods"),
        json!({"step": "sa-pods", "status": 403, "reason": "Forbidden", "kind": "Status",
               "message": "pods is forbidden: User \"system:serviceaccount:py:reader\" cannot list resource \"pods\" in API group \"\" in the namespace \"py\""})
    );
    assert_eq!(
        step("sa-delete"),
        json!({"step": "sa-delete", "status": 403, "reason": "Forbidden", "kind": "Status",
               "message": "configmaps \"settings\" is forbidden: User \"system:serviceaccount:py:reader\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"py\""})
    );
    // An unknown token: 401, and why only in the server's log.
    assert_eq!(
        step("bad-token"),
        json!({"step": "bad-token", "status": 401, "reason": "Unauthorized", "kind": "Status",
               "message": "Unauthorized"})
    );
}
