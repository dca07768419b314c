//! certificates.k8s.io/v1 CertificateSigningRequests end to end, as kubeadm's users know them:
//! a key and a CSR made by the user, `kubectl apply`, `kubectl certificate approve|deny`, the
//! controller-manager's `csrsigning` controller issuing the certificate with the cluster CA, and
//! a kubeconfig with that certificate authenticating over TLS. Also the validation messages
//! and the `approve` permission on the signer.

use std::time::Duration;

use crate::support::controller_manager::ControllerManager;
use crate::support::{Server, eventually};

/// How long the controller-manager may take to issue or fail a CSR.
const DEADLINE: Duration = Duration::from_secs(30);

const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// A new ECDSA key and a CSR for `common_name` in `organizations`, both PEM.
fn key_and_csr(common_name: &str, organizations: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("a key");
    let mut params = rcgen::CertificateParams::default();
    let mut name = rcgen::DistinguishedName::new();
    // rcgen keeps one value per attribute type: enough for one group.
    for org in organizations {
        name.push(rcgen::DnType::OrganizationName, *org);
    }
    name.push(rcgen::DnType::CommonName, common_name);
    params.distinguished_name = name;
    let csr = params.serialize_request(&key).expect("a CSR");
    (key.serialize_pem(), csr.pem().expect("PEM"))
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The manifest of a CSR named `name` (the `spec.request` base64 of `request_pem`).
fn csr_yaml(name: &str, request_pem: &str, usages: &[&str], expiration: Option<u32>) -> String {
    let usages: String = usages.iter().map(|u| format!("\n  - {u}")).collect();
    let expiration = expiration
        .map(|s| format!("\n  expirationSeconds: {s}"))
        .unwrap_or_default();
    format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {name}
spec:
  request: {}
  signerName: {CLIENT_SIGNER}{expiration}
  usages:{usages}
",
        b64(request_pem.as_bytes())
    )
}

/// A secure server and a controller-manager running only `csrsigning`, as its own
/// ServiceAccount (`certificate-controller`), with the server's CA.
fn cluster() -> (Server, ControllerManager) {
    let s = Server::start_secure(&[]);
    let pki = s.dir().join("pki");
    let path = |f: &str| pki.join(f).to_str().expect("UTF-8 path").to_owned();
    let (cert, key) = (path("ca.crt"), path("ca.key"));
    let cm = ControllerManager::start(
        &s,
        "controller-manager",
        &[
            "--controllers",
            "csrsigning",
            "--use-service-account-credentials",
            "--cluster-signing-cert-file",
            &cert,
            "--cluster-signing-key-file",
            &key,
        ],
    );
    (s, cm)
}

/// A kubeconfig for the server with a client certificate and key (PEM).
fn kubeconfig_with(s: &Server, name: &str, cert_pem: &[u8], key_pem: &str) -> std::path::PathBuf {
    let cert = std::str::from_utf8(cert_pem).expect("a PEM certificate");
    let path = s.dir().join(format!("kubeconfig-{name}"));
    std::fs::write(&path, s.kubeconfig_with_cert(name, cert, key_pem)).expect("kubeconfig written");
    path
}

/// The words of each line of `kubectl get` output.
fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn an_approved_csr_is_issued_and_its_certificate_authenticates_the_user() {
    let (s, _cm) = cluster();
    let (key, request) = key_and_csr("alice", &["dev"]);
    s.apply_ok(
        &csr_yaml("alice", &request, &["client auth"], Some(86400)),
        &[],
    );

    // The requester is the admin who created it, whatever the manifest said.
    let rows = table(&s.kubectl_ok(&["get", "csr", "alice"]));
    assert_eq!(
        rows[0],
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ]
    );
    assert_eq!(rows[1][0], "alice");
    assert_eq!(
        rows[1][2..],
        [CLIENT_SIGNER, "kubernetes-admin", "24h", "Pending"]
    );
    let csr = s.kubectl_json(&["get", "csr", "alice", "-o", "json"]);
    assert_eq!(
        csr["spec"]["groups"],
        serde_json::json!(["system:masters", "system:authenticated"])
    );

    assert_eq!(
        s.kubectl_ok(&["certificate", "approve", "alice"]).trim(),
        "certificatesigningrequest.certificates.k8s.io/alice approved"
    );
    let issued = eventually("the certificate is issued", DEADLINE, || {
        let csr = s.kubectl_json(&["get", "csr", "alice", "-o", "json"]);
        csr["status"]["certificate"].as_str().map(str::to_owned)
    });
    let csr = s.kubectl_json(&["get", "csr", "alice", "-o", "json"]);
    let approved = &csr["status"]["conditions"][0];
    assert_eq!(approved["type"], "Approved");
    assert_eq!(approved["reason"], "KubectlApprove");
    assert!(approved["lastUpdateTime"].is_string(), "{approved}");
    let rows = table(&s.kubectl_ok(&["get", "csr", "alice"]));
    assert_eq!(rows[1][5], "Approved,Issued");

    // The certificate and alice's key make a kubeconfig that authenticates as alice in dev.
    let cert = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(issued)
            .expect("base64")
    };
    assert!(String::from_utf8_lossy(&cert).starts_with("-----BEGIN CERTIFICATE-----"));
    let alice = kubeconfig_with(&s, "alice", &cert, &key);
    let run = s.kubectl_with(&alice, &["auth", "whoami"]);
    assert!(run.ok(), "{run}");
    let rows = table(&run.stdout);
    assert_eq!(rows[1], ["Username", "alice"], "{run}");
    assert_eq!(
        rows[2],
        ["Groups", "[dev", "system:authenticated]"],
        "{run}"
    );
    // And RBAC judges alice like any user.
    let run = s.kubectl_with(&alice, &["get", "pods"]);
    assert_eq!(
        run.stderr.trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default""#
    );
}

#[test]
fn denied_csrs_are_not_issued_and_bad_usages_fail() {
    let (s, _cm) = cluster();
    let (_, request) = key_and_csr("bob", &["dev"]);
    s.apply_ok(&csr_yaml("bob", &request, &["client auth"], None), &[]);
    assert_eq!(
        s.kubectl_ok(&["certificate", "deny", "bob"]).trim(),
        "certificatesigningrequest.certificates.k8s.io/bob denied"
    );
    let csr = s.kubectl_json(&["get", "csr", "bob", "-o", "json"]);
    assert_eq!(csr["status"]["conditions"][0]["type"], "Denied");
    assert_eq!(csr["status"]["conditions"][0]["reason"], "KubectlDeny");
    let rows = table(&s.kubectl_ok(&["get", "csr", "bob"]));
    assert_eq!(rows[1][4..], ["<none>", "Denied"]);
    // A denied CSR cannot be approved as well: kubectl says so, and the server refuses an
    // approval sent beside the denial.
    let err = s.kubectl_err(&["certificate", "approve", "bob"]);
    assert_eq!(
        err.trim(),
        r#"error: certificate signing request "bob" is already Denied"#
    );
    let mut both = s.kubectl_json(&["get", "csr", "bob", "-o", "json"]);
    both["status"]["conditions"]
        .as_array_mut()
        .expect("the Denied condition")
        .push(serde_json::json!({"type": "Approved", "status": "True"}));
    let body = s.dir().join("bob-approved.json");
    std::fs::write(&body, both.to_string()).expect("written");
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/bob/approval";
    let err = s.kubectl_err(&[
        "replace",
        "--raw",
        path,
        "-f",
        body.to_str().expect("UTF-8"),
    ]);
    assert_eq!(
        err.trim(),
        r#"The CertificateSigningRequest "bob" is invalid: status.conditions[1].type: Invalid value: "Approved": Approved and Denied conditions are mutually exclusive"#
    );

    // The client signer refuses a serving usage: the CSR fails, with Kubernetes' reason.
    let (_, request) = key_and_csr("web", &["dev"]);
    s.apply_ok(
        &csr_yaml("web", &request, &["client auth", "server auth"], None),
        &[],
    );
    s.kubectl_ok(&["certificate", "approve", "web"]);
    let failed = eventually("the CSR fails", DEADLINE, || {
        let csr = s.kubectl_json(&["get", "csr", "web", "-o", "json"]);
        csr["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Failed").cloned())
    });
    assert_eq!(failed["reason"], "SignerValidationFailure");
    assert_eq!(
        failed["message"],
        "invalid usage for client certificate: server auth"
    );
    let csr = s.kubectl_json(&["get", "csr", "web", "-o", "json"]);
    assert!(csr["status"].get("certificate").is_none(), "{csr}");
    let rows = table(&s.kubectl_ok(&["get", "csr", "web"]));
    assert_eq!(rows[1][5], "Approved,Failed");
    // Bob's CSR was never issued.
    let csr = s.kubectl_json(&["get", "csr", "bob", "-o", "json"]);
    assert!(csr["status"].get("certificate").is_none(), "{csr}");
}

#[test]
fn invalid_csrs_are_refused_with_kubernetes_messages() {
    let s = Server::start_secure(&[]);
    let not_pem = csr_yaml("bad", "hi", &["client auth"], None);
    assert_eq!(
        s.apply_yaml(&not_pem, &[]).stderr.trim(),
        r#"The CertificateSigningRequest "bad" is invalid: spec.request: Invalid value: []byte{0x68, 0x69}: PEM block type must be CERTIFICATE REQUEST"#
    );
    let (_, request) = key_and_csr("carol", &["dev"]);
    let short = csr_yaml("short", &request, &["client auth"], Some(60));
    assert_eq!(
        s.apply_yaml(&short, &[]).stderr.trim(),
        r#"The CertificateSigningRequest "short" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)"#
    );
    let unknown = csr_yaml("unknown", &request, &["flying"], None);
    let err = s.apply_yaml(&unknown, &[]).stderr;
    assert!(
        err.trim().starts_with(
            r#"The CertificateSigningRequest "unknown" is invalid: spec.usages[0]: Unsupported value: "flying": supported values: "any", "cert sign", "client auth","#
        ),
        "{err}"
    );
    let no_domain = csr_yaml("nodomain", &request, &["client auth"], None)
        .replace(CLIENT_SIGNER, "example/signer");
    assert_eq!(
        s.apply_yaml(&no_domain, &[]).stderr.trim(),
        r#"The CertificateSigningRequest "nodomain" is invalid: spec.signerName: Invalid value: "example": should be a domain with at least two segments separated by dots"#
    );
    let legacy = csr_yaml("legacy", &request, &["client auth"], None)
        .replace(CLIENT_SIGNER, "kubernetes.io/legacy-unknown");
    assert_eq!(
        s.apply_yaml(&legacy, &[]).stderr.trim(),
        r#"The CertificateSigningRequest "legacy" is invalid: spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is not allowed via this API version"#
    );
    let run = s.kubectl(&["get", "csr"]);
    assert_eq!(run.stderr.trim(), "No resources found", "{run}");
}

#[test]
fn approving_needs_the_approve_verb_on_the_signer() {
    let s = Server::start_secure(&[]);
    let (_, request) = key_and_csr("dave", &["dev"]);
    s.apply_ok(&csr_yaml("dave", &request, &["client auth"], None), &[]);
    // Eve may read CSRs and write their approval, but may not approve for the signer.
    s.kubectl_ok(&[
        "create",
        "clusterrole",
        "csr-approver",
        "--verb=get,list,watch",
        "--resource=certificatesigningrequests",
    ]);
    s.kubectl_ok(&[
        "patch",
        "clusterrole",
        "csr-approver",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":["certificates.k8s.io"],"resources":["certificatesigningrequests/approval"],"verbs":["update"]}}]"#,
    ]);
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "eve-approves",
        "--clusterrole=csr-approver",
        "--user=eve",
    ]);
    let eve = s.dir().join("kubeconfig-eve");
    std::fs::write(&eve, s.kubeconfig_for("eve", &["ops"])).expect("kubeconfig written");
    let approve = || s.kubectl_with(&eve, &["certificate", "approve", "dave"]);
    let run = eventually("eve reaches the approval", DEADLINE, || {
        let run = approve();
        run.stderr.contains("not permitted").then_some(run)
    });
    assert_eq!(
        run.stderr.trim(),
        r#"Error from server (Forbidden): certificatesigningrequests.certificates.k8s.io "dave" is forbidden: user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client""#
    );
    let csr = s.kubectl_json(&["get", "csr", "dave", "-o", "json"]);
    assert!(csr["status"].get("conditions").is_none(), "{csr}");

    // `approve` on every signer of the domain (`kubernetes.io/*`) is enough.
    // Signers are not a served resource: `kubectl create clusterrole` cannot name them.
    s.apply_ok(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubernetes-signers
rules:
- apiGroups: [certificates.k8s.io]
  resources: [signers]
  resourceNames: [kubernetes.io/*]
  verbs: [approve]
",
        &[],
    );
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "eve-signers",
        "--clusterrole=kubernetes-signers",
        "--user=eve",
    ]);
    let run = eventually("eve may approve", DEADLINE, || {
        let run = approve();
        run.ok().then_some(run)
    });
    assert_eq!(
        run.stdout.trim(),
        "certificatesigningrequest.certificates.k8s.io/dave approved"
    );
    let mut csr = s.kubectl_json(&["get", "csr", "dave", "-o", "json"]);
    assert_eq!(csr["status"]["conditions"][0]["type"], "Approved");

    // Writing a certificate through `/status` needs `sign` on the signer: eve may update the
    // subresource but is no signer.
    s.kubectl_ok(&[
        "patch",
        "clusterrole",
        "csr-approver",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":["certificates.k8s.io"],"resources":["certificatesigningrequests/status"],"verbs":["update"]}}]"#,
    ]);
    csr["status"]["certificate"] =
        serde_json::json!(b64(s.ca_pem().expect("a secure server").as_bytes()));
    let body = s.dir().join("dave-signed.json");
    std::fs::write(&body, csr.to_string()).expect("written");
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/dave/status";
    let sign = || {
        s.kubectl_with(
            &eve,
            &[
                "replace",
                "--raw",
                path,
                "-f",
                body.to_str().expect("UTF-8"),
            ],
        )
    };
    let run = eventually("eve reaches the status", DEADLINE, || {
        let run = sign();
        run.stderr.contains("not permitted").then_some(run)
    });
    assert_eq!(
        run.stderr.trim(),
        r#"Error from server (Forbidden): certificatesigningrequests.certificates.k8s.io "dave" is forbidden: user not permitted to sign requests with signerName "kubernetes.io/kube-apiserver-client""#
    );
    let csr = s.kubectl_json(&["get", "csr", "dave", "-o", "json"]);
    assert!(csr["status"].get("certificate").is_none(), "{csr}");
}
