//! ServiceAccounts in pods, as kube-apiserver's `ServiceAccount` admission plugin and
//! kube-controller-manager's `root-ca-cert-publisher` give them: a pod created with kubectl in
//! a started cluster runs as `default` with the `kube-api-access-xxxxx` projected volume
//! mounted read-only in every container; `automountServiceAccountToken: false` on the
//! ServiceAccount or on the pod leaves it out; a pod naming a missing ServiceAccount is refused
//! with Kubernetes' message; the `kube-root-ca.crt` ConfigMap the volume reads is in every
//! namespace, comes back when deleted and is put back when edited. On a bare API server the
//! plugin follows `--enable-admission-plugins` / `--disable-admission-plugins`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::up::UpEnv;
use support::{DEADLINE, Server, eventually};

const TOKEN_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The projected volume Kubernetes 1.33 adds, without its generated name.
fn token_volume_source() -> Value {
    json!({
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
            {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}}
        ]
    })
}

/// The name of the pod's `kube-api-access-xxxxx` volume, after checking the volume is
/// exactly Kubernetes' and every container and init container mounts it read-only.
fn token_volume(pod: &Value) -> String {
    let volumes = pod["spec"]["volumes"].as_array().expect("volumes");
    let volume = volumes
        .iter()
        .find(|v| {
            v["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("kube-api-access-"))
        })
        .unwrap_or_else(|| panic!("no kube-api-access volume: {pod:#}"));
    let name = volume["name"].as_str().unwrap().to_owned();
    let suffix = &name["kube-api-access-".len()..];
    assert!(
        suffix.len() == 5
            && suffix
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
        "{name}"
    );
    assert_eq!(volume["projected"], token_volume_source(), "{pod:#}");
    let containers = pod["spec"]["containers"].as_array().unwrap().iter();
    let init = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten();
    for c in containers.chain(init) {
        let mounts = c["volumeMounts"].as_array().expect("mounts");
        assert!(
            mounts.contains(&json!({"mountPath": TOKEN_PATH, "name": name, "readOnly": true})),
            "{c:#}"
        );
    }
    name
}

/// A pod manifest running as `account` (none: the default), with `automount` set on it.
fn pod_yaml(name: &str, account: Option<&str>, automount: Option<bool>) -> String {
    let account = account.map_or(String::new(), |a| format!("  serviceAccountName: {a}\n"));
    let automount = automount.map_or(String::new(), |a| {
        format!("  automountServiceAccountToken: {a}\n")
    });
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
{account}{automount}  initContainers:
  - name: init
    image: busybox:1.36
  containers:
  - name: main
    image: nginx:1.27
"
    )
}

#[test]
fn pods_get_the_token_volume_unless_opted_out_and_a_missing_account_is_refused() {
    let env = UpEnv::new();
    let up = env.up(&["--port", "0", "--nodes", "1"]);

    // `kubectl run`: the `default` ServiceAccount, made by the controller-manager.
    env.kubectl_ok(&["run", "web", "--image=nginx:1.27"]);
    let pod = env.get_json(&["pod", "web"]);
    assert_eq!(pod["spec"]["serviceAccountName"], "default");
    assert_eq!(pod["spec"]["serviceAccount"], "default");
    let volume = token_volume(&pod);
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"],
        json!([{"mountPath": TOKEN_PATH, "name": volume, "readOnly": true}])
    );
    eventually("web Running", DEADLINE, || {
        (env.get_json(&["pod", "web"])["status"]["phase"] == "Running").then_some(())
    });

    // The decision is in the create's span.
    let kubeconfig = env.kubeconfig();
    let trace = env
        .miniplane(&["trace", "pod/web", "--output", "json", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .unwrap();
    let spans = String::from_utf8_lossy(&trace.stdout);
    assert!(
        spans.contains("admission.serviceAccount")
            && spans.contains(&format!("default: mounted volume {volume} (added)")),
        "{spans}\n{}",
        String::from_utf8_lossy(&trace.stderr)
    );

    // Init containers mount it too; the pod's `true` wins over the account's `false`.
    env.kubectl_ok(&["create", "serviceaccount", "quiet"]);
    env.kubectl_ok(&[
        "patch",
        "serviceaccount",
        "quiet",
        "-p",
        r#"{"automountServiceAccountToken":false}"#,
    ]);
    env.apply(&pod_yaml("insists", Some("quiet"), Some(true)));
    token_volume(&env.get_json(&["pod", "insists"]));

    // `false` on the ServiceAccount, or on the pod: no volume, no mount.
    env.apply(&pod_yaml("by-account", Some("quiet"), None));
    env.apply(&pod_yaml("by-pod", None, Some(false)));
    for name in ["by-account", "by-pod"] {
        let pod = env.get_json(&["pod", name]);
        assert_eq!(pod["spec"].get("volumes"), None, "{pod:#}");
        for c in ["containers", "initContainers"] {
            assert_eq!(pod["spec"][c][0].get("volumeMounts"), None, "{pod:#}");
        }
    }
    assert_eq!(
        env.get_json(&["pod", "by-account"])["spec"]["serviceAccountName"],
        "quiet"
    );

    // A ServiceAccount that does not exist: refused, with kube-apiserver's message.
    let args = ["apply", "-f", "-"];
    let run = support::kubectl::run_kubectl(
        support::kubectl::isolated_kubectl(env.dir(), &kubeconfig, &args),
        &args,
        Some(&pod_yaml("lonely", Some("ghost"), None)),
    );
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains(
            "Error from server (Forbidden): error when creating \"STDIN\": pods \"lonely\" is forbidden: \
             error looking up service account default/ghost: serviceaccount \"ghost\" not found"
        ),
        "{run}"
    );
    assert!(!env.kubectl(&["get", "pod", "lonely"]).ok());
    drop(up);
}

#[test]
fn every_namespace_has_kube_root_ca_crt_put_back_when_deleted_or_edited() {
    let env = UpEnv::new();
    let up = env.up(&["--port", "0", "--nodes", "1"]);
    let ca = std::fs::read_to_string(env.data_dir().join("pki").join("ca.crt")).unwrap();
    let description = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
    // The published ConfigMap once it is as the publisher wants it (its uid).
    let published = |ns: &str| -> String {
        eventually(&format!("kube-root-ca.crt in {ns}"), DEADLINE, || {
            let run = env.kubectl(&[
                "get",
                "configmap",
                "kube-root-ca.crt",
                "-n",
                ns,
                "-o",
                "json",
            ]);
            let cm: Value = serde_json::from_str(&run.stdout).ok()?;
            let ok = cm["data"] == json!({"ca.crt": ca})
                && cm["metadata"]["annotations"]["kubernetes.io/description"] == description;
            ok.then(|| cm["metadata"]["uid"].as_str().unwrap().to_owned())
        })
    };
    for ns in ["default", "kube-system", "kube-public"] {
        published(ns);
    }
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");

    env.kubectl_ok(&["create", "namespace", "team-a"]);
    let first = published("team-a");

    env.kubectl_ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "team-a"]);
    let second = published("team-a");
    assert_ne!(first, second, "deleted, then made again");

    env.kubectl_ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "team-a",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"tampered","extra":"x"},"metadata":{"labels":{"mine":"yes"}}}"#,
    ]);
    assert_eq!(published("team-a"), second, "edited back, not made again");
    let cm = env.get_json(&["configmap", "kube-root-ca.crt", "-n", "team-a"]);
    assert_eq!(cm["metadata"]["labels"], json!({"mine": "yes"}));

    env.kubectl_ok(&[
        "annotate",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "team-a",
        "kubernetes.io/description-",
    ]);
    published("team-a");
    drop(up);
}

#[test]
fn a_bare_server_follows_the_admission_flags() {
    // The harness disables the plugin: nothing to look up, nothing mounted, no account.
    let s = Server::start();
    s.kubectl_ok(&["run", "plain", "--image=nginx:1.27"]);
    let pod = s.kubectl_json(&["get", "pod", "plain"]);
    assert_eq!(pod["spec"].get("volumes"), None, "{pod:#}");
    assert_eq!(pod["spec"].get("serviceAccountName"), None, "{pod:#}");

    // Kubernetes' default: without a controller-manager, `default` never appears.
    let s = Server::start_with(&["--enable-admission-plugins=ServiceAccount"]);
    let err = s.kubectl_err(&["run", "early", "--image=nginx:1.27"]);
    assert!(
        err.contains(
            "pods \"early\" is forbidden: error looking up service account default/default: serviceaccount \"default\" not found"
        ),
        "{err}"
    );
    s.kubectl_ok(&["create", "serviceaccount", "default"]);
    s.kubectl_ok(&["run", "late", "--image=nginx:1.27"]);
    token_volume(&s.kubectl_json(&["get", "pod", "late"]));

    // A server-side apply that creates a pod is admitted as a create is.
    let run = s.apply_yaml(&pod_yaml("applied", None, None), &["--server-side"]);
    assert!(run.ok(), "{run}");
    token_volume(&s.kubectl_json(&["get", "pod", "applied"]));

    // kube-apiserver's refusals of the flags.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_miniplane"))
        .args(["apiserver", "--data-dir", "/nonexistent-dir-unused"])
        .args(["--listen", "127.0.0.1:0"])
        .args(["--enable-admission-plugins", "ServiceAccount,Bogus"])
        .args(["--disable-admission-plugins", "ServiceAccount"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("enable-admission-plugins plugin \"Bogus\" is unknown; [ServiceAccount] in enable-admission-plugins and disable-admission-plugins overlapped"),
        "{stderr}"
    );
}
