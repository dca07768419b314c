//! End to end: authentication and RBAC through `miniplane apiserver --authorization-mode RBAC
//! --token-auth-file ...`, with raw HTTP requests carrying bearer tokens.
//!
//! One table of cases, each a request and the exact code and message kube-apiserver gives:
//! anonymous requests (only the public health and version paths), bad and empty tokens, a
//! user with no binding, a Role and a RoleBinding that grant a verb, impersonation allowed
//! and refused, privilege-escalation attempts, and the reviews `kubectl auth can-i` and
//! `kubectl auth whoami` post.

use crate::support;

use serde_json::{Value, json};
use support::http::{HttpResponse, request_raw};
use support::{DEADLINE, Server, eventually};

const TOKENS: &str =
    "admin-token,admin,0,system:masters\nalice-token,alice,1001,dev\nbob-token,bob,1002\n";

/// A server with RBAC and the token file above, which lives as long as the server (a
/// restart reads it again).
struct RbacServer {
    server: Server,
    _tokens: tempfile::TempDir,
}

impl std::ops::Deref for RbacServer {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}

impl std::ops::DerefMut for RbacServer {
    fn deref_mut(&mut self) -> &mut Server {
        &mut self.server
    }
}

/// Starts a server with RBAC and the token file above (plus `extra` flags).
fn rbac_server(extra: &[&str]) -> RbacServer {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).unwrap();
    let tokens = tokens.to_str().unwrap().to_owned();
    let mut args = vec!["--authorization-mode", "RBAC", "--token-auth-file", &tokens];
    args.extend_from_slice(extra);
    RbacServer {
        server: Server::start_with(&args),
        _tokens: dir,
    }
}

/// Sends `method path` with `headers` (each `Name: value`) and a JSON body if given.
fn send(
    s: &Server,
    method: &str,
    path: &str,
    headers: &[&str],
    body: Option<&Value>,
) -> HttpResponse {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\nConnection: close\r\nContent-Length: {}\r\n",
        s.addr,
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    request_raw(s.addr, &head, body.as_bytes()).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

const ADMIN: &str = "Authorization: Bearer admin-token";
const ALICE: &str = "Authorization: Bearer alice-token";
const BOB: &str = "Authorization: Bearer bob-token";

fn pods_in(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods")
}

/// (method, path, headers, code, reason or "" for success, message)
type Case = (
    &'static str,
    &'static str,
    &'static [&'static str],
    u16,
    &'static str,
    &'static str,
);

#[test]
fn anonymous_bad_tokens_and_unbound_users_get_kubernetes_answers() {
    let s = rbac_server(&[]);
    let cases: &[Case] = &[
        ("GET", "/healthz", &[], 200, "", ""),
        ("GET", "/livez", &[], 200, "", ""),
        ("GET", "/readyz", &[], 200, "", ""),
        ("GET", "/version", &[], 200, "", ""),
        (
            "GET",
            "/api",
            &[],
            403,
            "Forbidden",
            r#"forbidden: User "system:anonymous" cannot get path "/api""#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[],
            403,
            "Forbidden",
            r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" in the namespace "default""#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &["Authorization: Bearer wrong"],
            401,
            "Unauthorized",
            "Unauthorized",
        ),
        (
            "GET",
            "/healthz",
            &["Authorization: Bearer wrong"],
            401,
            "Unauthorized",
            "Unauthorized",
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &["Authorization: Bearer a b"],
            401,
            "Unauthorized",
            "Unauthorized",
        ),
        // An empty bearer token is no credential at all.
        ("GET", "/version", &["Authorization: Bearer "], 200, "", ""),
        // Authenticated users may discover the API (system:discovery) but not read objects.
        ("GET", "/api", &[ALICE], 200, "", ""),
        ("GET", "/apis/apps/v1", &[ALICE], 200, "", ""),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[ALICE],
            403,
            "Forbidden",
            r#"pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#,
        ),
        (
            "GET",
            "/api/v1/nodes/node-0",
            &[ALICE],
            403,
            "Forbidden",
            r#"nodes "node-0" is forbidden: User "alice" cannot get resource "nodes" in API group "" at the cluster scope"#,
        ),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/default/deployments",
            &[BOB],
            403,
            "Forbidden",
            r#"deployments.apps is forbidden: User "bob" cannot deletecollection resource "deployments" in API group "apps" in the namespace "default""#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods?watch=1",
            &[BOB],
            403,
            "Forbidden",
            r#"pods is forbidden: User "bob" cannot watch resource "pods" in API group "" in the namespace "default""#,
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/d/deployments/web/scale",
            &[BOB],
            403,
            "Forbidden",
            r#"deployments.apps "web" is forbidden: User "bob" cannot patch resource "deployments/scale" in API group "apps" in the namespace "d""#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[ADMIN],
            200,
            "",
            "",
        ),
        // Impersonation needs the impersonate verb; system:masters has it.
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[ALICE, "Impersonate-User: admin"],
            403,
            "Forbidden",
            r#"users "admin" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[
                ALICE,
                "Impersonate-User: system:serviceaccount:kube-system:default",
            ],
            403,
            "Forbidden",
            r#"serviceaccounts "default" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "kube-system""#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[ADMIN, "Impersonate-User: bob"],
            403,
            "Forbidden",
            r#"pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default""#,
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            &[
                ADMIN,
                "Impersonate-User: bob",
                "Impersonate-Group: system:masters",
            ],
            200,
            "",
            "",
        ),
    ];
    let mut failures = Vec::new();
    for (method, path, headers, code, reason, message) in cases {
        let r = send(&s, method, path, headers, None);
        let got = if reason.is_empty() {
            (r.status, String::new(), String::new())
        } else {
            let status = r.json();
            (
                r.status,
                status["reason"].as_str().unwrap_or("").to_owned(),
                status["message"].as_str().unwrap_or("").to_owned(),
            )
        };
        let want = (*code, reason.to_string(), message.to_string());
        if got != want {
            failures.push(format!(
                "{method} {path} {headers:?}: got {got:?}, want {want:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        s.log_tail()
    );
    // Groups without a user are refused as kube-apiserver refuses them: 500, plain text.
    let r = send(
        &s,
        "GET",
        &pods_in("default"),
        &[ADMIN, "Impersonate-Group: dev"],
        None,
    );
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(
        r.text().contains("without impersonating a user"),
        "{}",
        r.text()
    );
    // The reason of a 401 stays in the server's log.
    assert!(
        s.log_tail().contains("invalid bearer token"),
        "{}",
        s.log_tail()
    );
}

#[test]
fn a_role_binding_grants_its_verbs_and_escalation_is_refused() {
    let s = rbac_server(&[]);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                  {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-reads-pods", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default";
    assert_eq!(
        send(&s, "POST", &format!("{rbac}/roles"), &[ADMIN], Some(&role)).status,
        201
    );
    assert_eq!(
        send(
            &s,
            "POST",
            &format!("{rbac}/rolebindings"),
            &[ADMIN],
            Some(&binding)
        )
        .status,
        201
    );
    // The authorizer follows the store: the binding takes effect within moments.
    eventually("alice may list pods in default", DEADLINE, || {
        (send(&s, "GET", &pods_in("default"), &[ALICE], None).status == 200).then_some(())
    });
    assert_eq!(
        send(
            &s,
            "GET",
            "/api/v1/namespaces/default/pods/missing",
            &[ALICE],
            None
        )
        .status,
        404
    );
    assert_eq!(
        send(&s, "GET", &pods_in("kube-system"), &[ALICE], None).status,
        403
    );
    assert_eq!(
        send(
            &s,
            "DELETE",
            "/api/v1/namespaces/default/pods/x",
            &[ALICE],
            None
        )
        .status,
        403
    );
    // The reviews, as kubectl auth can-i / whoami post them.
    let ssar = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": "default", "verb": verb, "resource": resource}}})
    };
    let r = send(
        &s,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        &[ALICE],
        Some(&ssar("list", "pods")),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"alice-reads-pods/default\" of Role \"pod-reader\" to User \"alice\""})
    );
    let r = send(
        &s,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        &[ALICE],
        Some(&ssar("delete", "pods")),
    );
    assert_eq!(r.json()["status"], json!({"allowed": false}));
    let r = send(
        &s,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[ALICE],
        Some(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["status"]["userInfo"],
        json!({"username": "alice", "uid": "1001", "groups": ["dev", "system:authenticated"]})
    );
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}});
    let r = send(
        &s,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &[ALICE],
        Some(&sar),
    );
    assert_eq!(
        r.expect_status(403, "Forbidden"),
        r#"subjectaccessreviews.authorization.k8s.io is forbidden: User "alice" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#
    );
    let r = send(
        &s,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &[ADMIN],
        Some(&sar),
    );
    assert_eq!(r.json()["status"]["allowed"], true, "{}", r.text());
    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}});
    let r = send(
        &s,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &[ALICE],
        Some(&rules),
    );
    let listed = r.json()["status"]["resourceRules"].clone();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"] == json!(["pods"])
                && r["verbs"] == json!(["get", "list", "watch"])),
        "{listed}"
    );
    // Escalation: alice may create Roles, but only with rules she holds herself.
    let secrets_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "secret-reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]});
    let r = send(
        &s,
        "POST",
        &format!("{rbac}/roles"),
        &[ALICE],
        Some(&secrets_role),
    );
    assert_eq!(
        r.expect_status(403, "Forbidden"),
        "roles.rbac.authorization.k8s.io \"secret-reader\" is forbidden: user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
    );
    let own_role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-lister"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]});
    assert_eq!(
        send(
            &s,
            "POST",
            &format!("{rbac}/roles"),
            &[ALICE],
            Some(&own_role)
        )
        .status,
        201
    );
    // Binding cluster-admin to herself is binding rules she does not hold.
    let grab = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "grab"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]});
    let r = send(
        &s,
        "POST",
        &format!("{rbac}/rolebindings"),
        &[ALICE],
        Some(&grab),
    );
    let msg = r.expect_status(403, "Forbidden");
    assert!(msg.starts_with("rolebindings.rbac.authorization.k8s.io \"grab\" is forbidden: user \"alice\" (groups=[\"dev\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"), "{msg}");
}

#[test]
fn without_anonymous_auth_a_request_without_credentials_is_401() {
    let s = rbac_server(&["--anonymous-auth=false"]);
    let r = send(&s, "GET", "/healthz", &[], None);
    assert_eq!(r.expect_status(401, "Unauthorized"), "Unauthorized");
    assert_eq!(send(&s, "GET", "/healthz", &[BOB], None).status, 200);
}

#[test]
fn the_bootstrap_policy_is_written_once_and_kept_across_restarts() {
    let mut s = rbac_server(&[]);
    let list = |s: &Server, what: &str| -> Vec<String> {
        let r = send(
            s,
            "GET",
            &format!("/apis/rbac.authorization.k8s.io/v1/{what}"),
            &[ADMIN],
            None,
        );
        r.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let roles = list(&s, "clusterroles");
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
        "system:kube-controller-manager",
        "system:kube-scheduler",
        "system:node",
        "system:controller:deployment-controller",
        "system:cloud-controller-manager",
    ] {
        assert!(roles.iter().any(|r| r == name), "{name} in {roles:?}");
    }
    let bindings = list(&s, "clusterrolebindings");
    assert!(
        bindings.iter().any(|b| b == "cluster-admin"),
        "{bindings:?}"
    );
    // A default role an administrator changed is not put back by a restart.
    let path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:basic-user";
    let mut role = send(&s, "GET", path, &[ADMIN], None).json();
    role["metadata"]["labels"]["changed"] = json!("yes");
    assert_eq!(send(&s, "PUT", path, &[ADMIN], Some(&role)).status, 200);
    s.restart();
    assert_eq!(list(&s, "clusterroles").len(), roles.len());
    assert_eq!(
        send(&s, "GET", path, &[ADMIN], None).json()["metadata"]["labels"]["changed"],
        "yes"
    );
}

/// Writes a kubeconfig with a client certificate for `user` in `groups`.
fn user_kubeconfig(s: &Server, user: &str, groups: &[&str]) -> std::path::PathBuf {
    let path = s.dir().join(format!("kubeconfig-{user}"));
    std::fs::write(&path, s.kubeconfig_for(user, groups)).unwrap();
    path
}

#[test]
fn kubectl_over_tls_with_client_certificates_is_authorized_by_rbac() {
    let s = Server::start_secure(&[]);
    // The admin's certificate (group system:masters) may do anything.
    s.kubectl_ok(&["create", "namespace", "team"]);
    let whoami = s.kubectl_ok(&["auth", "whoami"]);
    let lines: Vec<Vec<&str>> = whoami
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["ATTRIBUTE", "VALUE"], "{whoami}");
    assert_eq!(lines[1], ["Username", "kubernetes-admin"], "{whoami}");
    assert_eq!(
        lines[2],
        ["Groups", "[system:masters", "system:authenticated]"],
        "{whoami}"
    );

    // alice has a valid certificate and no binding.
    let alice = user_kubeconfig(&s, "alice", &["dev"]);
    let run = s.kubectl_with(&alice, &["get", "pods", "-n", "team"]);
    assert!(!run.ok(), "{run}");
    assert_eq!(
        run.stderr.trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team""#
    );
    let run = s.kubectl_with(&alice, &["auth", "can-i", "list", "pods", "-n", "team"]);
    assert_eq!((run.ok(), run.stdout.trim()), (false, "no"), "{run}");
    assert_eq!(
        s.kubectl_ok(&["auth", "can-i", "create", "deployments", "-n", "team"])
            .trim(),
        "yes"
    );
    let run = s.kubectl(&[
        "auth", "can-i", "list", "pods", "-n", "team", "--as", "alice",
    ]);
    assert_eq!(run.stdout.trim(), "no", "{run}");

    // The admin grants her a Role; kubectl's own verbs make it.
    s.kubectl_ok(&[
        "create",
        "role",
        "pod-reader",
        "-n",
        "team",
        "--verb=get,list,watch",
        "--resource=pods",
    ]);
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "alice-reads",
        "-n",
        "team",
        "--role=pod-reader",
        "--user=alice",
    ]);
    eventually("alice may list pods in team", DEADLINE, || {
        s.kubectl_with(&alice, &["get", "pods", "-n", "team"])
            .ok()
            .then_some(())
    });
    let run = s.kubectl_with(&alice, &["auth", "can-i", "list", "pods", "-n", "team"]);
    assert_eq!((run.ok(), run.stdout.trim()), (true, "yes"), "{run}");
    let listed = s.kubectl_with(&alice, &["auth", "can-i", "--list", "-n", "team"]);
    assert!(listed.ok(), "{listed}");
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with("pods ") && l.ends_with("[get list watch]")),
        "{listed}"
    );
    let whoami = s.kubectl_with(&alice, &["auth", "whoami", "-o", "json"]);
    let review: Value = serde_json::from_str(&whoami.stdout).unwrap();
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "alice", "groups": ["dev", "system:authenticated"]})
    );
    // Creating a Role with more than she holds is an escalation.
    let run = s.kubectl_with(
        &alice,
        &[
            "create",
            "role",
            "grab",
            "-n",
            "team",
            "--verb=*",
            "--resource=secrets",
        ],
    );
    assert!(!run.ok(), "{run}");
    assert!(run.stderr.contains(r#"roles.rbac.authorization.k8s.io is forbidden: User "alice" cannot create resource "roles""#), "{run}");

    // A certificate from another CA is not a login.
    let foreign_dir = tempfile::tempdir().unwrap();
    let foreign = apimachinery::pki::Ca::load_or_create(foreign_dir.path()).unwrap();
    let issued = foreign
        .issue_client(
            "mallory",
            &["system:masters"],
            apimachinery::pki::Validity::default_cert(),
        )
        .unwrap();
    use base64::Engine as _;
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
    let user = format!(
        "client-certificate-data: {}\nclient-key-data: {}",
        b64(&issued.cert_pem),
        b64(&issued.key_pem)
    );
    let path = kubeconfig_with_user(&s, "mallory", &user);
    let run = s.kubectl_with(&path, &["get", "pods", "-n", "team"]);
    assert_unauthorized(&s, &run, "x509: certificate signed by unknown authority");
}

#[tokio::test]
async fn kube_rs_verifies_the_server_and_authenticates_with_its_certificate() {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{Api, ListParams, PostParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let s = tokio::task::spawn_blocking(|| Server::start_secure(&[]))
        .await
        .unwrap();
    let client = |yaml: String| async move {
        let kubeconfig = Kubeconfig::from_yaml(&yaml).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(config).unwrap()
    };
    let admin = client(std::fs::read_to_string(s.kubeconfig()).unwrap()).await;
    let namespaces = Api::<Namespace>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        namespaces
            .items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("kube-system"))
    );
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}))
            .unwrap();
    Api::<ConfigMap>::namespaced(admin, "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let bob = client(s.kubeconfig_for("bob", &[])).await;
    match Api::<ConfigMap>::namespaced(bob, "default")
        .get("settings")
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
            assert_eq!(
                status.message,
                r#"configmaps "settings" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "default""#
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
}

/// A kubeconfig that presents `token` (and trusts the server's CA).
fn token_kubeconfig(s: &Server, name: &str, token: &str) -> std::path::PathBuf {
    kubeconfig_with_user(s, name, &format!("token: {token}"))
}

/// Writes `kubeconfig-<name>`: the server's cluster and CA, and `user` (YAML) as the user's
/// credentials.
fn kubeconfig_with_user(s: &Server, name: &str, user: &str) -> std::path::PathBuf {
    let own = s.kubeconfig_for("unused", &[]);
    let mut doc: serde_norway::Value = serde_norway::from_str(&own).unwrap();
    doc["users"][0]["user"] = serde_norway::from_str(user).unwrap();
    let path = s.dir().join(format!("kubeconfig-{name}"));
    std::fs::write(&path, serde_norway::to_string(&doc).unwrap()).unwrap();
    path
}

/// Checks that `run` was refused as kubectl words a 401, and that the server logged `reason`.
fn assert_unauthorized(s: &Server, run: &support::kubectl::Run, reason: &str) {
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr
            .contains("error: You must be logged in to the server (Unauthorized)"),
        "{run}"
    );
    assert!(s.log_tail().contains(reason), "{}", s.log_tail());
}

#[test]
fn service_account_tokens_from_kubectl_create_token_authenticate_until_the_account_goes() {
    let s = Server::start_secure(&[]);
    s.kubectl_ok(&["create", "serviceaccount", "builder"]);
    let token = s.kubectl_ok(&["create", "token", "builder", "--duration", "1h"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
    let kc = token_kubeconfig(&s, "builder", token);
    let whoami = s.kubectl_with(&kc, &["auth", "whoami", "-o", "json"]);
    assert!(whoami.ok(), "{whoami}");
    let review: Value = serde_json::from_str(&whoami.stdout).unwrap();
    let info = &review["status"]["userInfo"];
    assert_eq!(info["username"], "system:serviceaccount:default:builder");
    assert_eq!(
        info["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let sa = s.kubectl_json(&["get", "serviceaccount", "builder"]);
    assert_eq!(info["uid"], sa["metadata"]["uid"]);
    assert!(
        info["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .unwrap()
            .starts_with("JTI=")
    );
    let run = s.kubectl_with(&kc, &["get", "pods"]);
    assert_eq!(
        run.stderr.trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "system:serviceaccount:default:builder" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    // (`view` is aggregated: without the controller-manager here, its rules stay empty.)
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "pod-reader",
        "--verb=get,list,watch",
        "--resource=pods",
    ]);
    s.kubectl_ok(&[
        "create",
        "rolebinding",
        "builder-reads",
        "--clusterrole=pod-reader",
        "--serviceaccount=default:builder",
    ]);
    eventually("the ServiceAccount may list pods", DEADLINE, || {
        s.kubectl_with(&kc, &["get", "pods"]).ok().then_some(())
    });
    let run = s.kubectl(&[
        "auth",
        "can-i",
        "list",
        "pods",
        "--as",
        "system:serviceaccount:default:builder",
    ]);
    assert_eq!(run.stdout.trim(), "yes", "{run}");
    let run = s.kubectl(&[
        "auth",
        "can-i",
        "delete",
        "pods",
        "--as",
        "system:serviceaccount:default:builder",
    ]);
    assert_eq!(run.stdout.trim(), "no", "{run}");

    // TokenReview, as a webhook authenticator asks.
    let yaml = format!(
        "apiVersion: authentication.k8s.io/v1\nkind: TokenReview\nspec:\n  token: {token}\n"
    );
    let run = s.kubectl_run(&["create", "-f", "-", "-o", "json"], Some(&yaml), &[]);
    assert!(run.ok(), "{run}");
    let reviewed: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(reviewed["status"]["authenticated"], true, "{reviewed}");
    assert_eq!(
        reviewed["status"]["user"]["username"],
        "system:serviceaccount:default:builder"
    );
    assert_eq!(
        reviewed["status"]["audiences"],
        json!(["https://kubernetes.default.svc.cluster.local"])
    );
    // Too short a token is refused by the server's validation.
    let run = s.kubectl(&["create", "token", "builder", "--duration", "5m"]);
    assert!(!run.ok(), "{run}");
    assert!(
        run.stderr.contains("spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"),
        "{run}"
    );
    let run = s.kubectl(&["create", "token", "nobody"]);
    assert!(
        run.stderr.contains(r#"serviceaccounts "nobody" not found"#),
        "{run}"
    );

    // Deleting the ServiceAccount invalidates its tokens.
    s.kubectl_ok(&["delete", "serviceaccount", "builder"]);
    let run = s.kubectl_with(&kc, &["get", "pods"]);
    assert_unauthorized(&s, &run, "service account default/builder has been deleted");
}

#[test]
fn every_component_works_with_only_its_role() {
    use support::component::Component;
    let s = Server::start_secure(&[]);
    let (kubelet, scheduler) = support::process_cluster::secure_nodes_and_scheduler(&s, 2);
    let manager = Component::start_as(
        &s,
        &[
            "controller-manager",
            "--listen",
            "127.0.0.1:0",
            "--use-service-account-credentials",
        ],
        "miniplane controller-manager started",
        "system:kube-controller-manager",
        &[],
    );
    let applied = s.kubectl_run(
        &["apply", "-f", "-"],
        Some(&support::deployment_yaml("web", 2, "nginx")),
        &[],
    );
    assert!(applied.ok(), "{applied}");
    let status = s.kubectl(&["rollout", "status", "deploy/web", "--timeout=60s"]);
    assert!(
        status.ok(),
        "{status}\n--- controller-manager ---\n{}\n--- scheduler ---\n{}\n--- kubelet ---\n{}",
        manager.log(),
        scheduler.log(),
        kubelet.log()
    );
    // The controllers wrote as their own ServiceAccounts, which the manager made.
    let accounts = s.kubectl_ok(&["get", "serviceaccounts", "-n", "kube-system", "-o", "name"]);
    for account in [
        "deployment-controller",
        "replicaset-controller",
        "generic-garbage-collector",
    ] {
        assert!(
            accounts.contains(&format!("serviceaccount/{account}")),
            "{accounts}"
        );
    }
    // Each pod's status was written by its own node's kubelet: the simulator impersonates
    // `system:node:<name>`, and the API server traced the request as that user.
    let pods = s.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "json"]);
    let pods: serde_json::Value = serde_json::from_str(&pods).unwrap();
    let spans = s.kubectl_ok(&["get", "--raw", "/miniplane/v1/traces?spans=all"]);
    let spans: serde_json::Value = serde_json::from_str(&spans).unwrap();
    for pod in pods["items"].as_array().unwrap() {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let node = pod["spec"]["nodeName"].as_str().unwrap();
        let writers: std::collections::BTreeSet<&str> = spans["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|span| {
                let a = &span["attributes"];
                span["component"] == "kube-apiserver"
                    && a["resource"] == "pods"
                    && a["subresource"] == "status"
                    && a["name"] == name
                    && a["verb"] == "patch"
            })
            .filter_map(|span| span["attributes"]["user"].as_str())
            .collect();
        assert_eq!(
            writers,
            [format!("system:node:{node}").as_str()].into(),
            "{name} on {node}"
        );
    }
    // No component was refused anything on the way.
    for (name, log) in [
        ("controller-manager", manager.log()),
        ("scheduler", scheduler.log()),
        ("kubelet", kubelet.log()),
        ("apiserver", s.log_tail()),
    ] {
        assert!(
            !log.contains("Forbidden") && !log.contains(" 403"),
            "{name} was refused:\n{log}"
        );
    }
}
