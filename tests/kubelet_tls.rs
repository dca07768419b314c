//! End to end: the kubelet API of a secure cluster (`ClusterBuilder::secure`, what `miniplane
//! up` runs) is HTTPS and checks its callers as a kubeadm cluster's kubelets do. `kubectl
//! logs` and `kubectl exec` reach it through the API server (its kubelet client certificate);
//! `kubectl top pods` through the metrics-server (its own credentials); a direct request
//! without credentials is 401, one from a user without `nodes/proxy` 403 with the kubelet's
//! text, one from a user granted it 200; a ServiceAccount token is reviewed; plain HTTP on
//! the port is refused as Go refuses it.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apimachinery::pki::{Ca, Validity};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::support;

use support::eventually;
use support::kubectl::{Run, isolated_kubectl, run_kubectl};

const SETTLE: Duration = Duration::from_secs(60);

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    miniplane.dev/log-lines: \"GET /tls 200\"
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    resources:
      requests:
        cpu: 100m
        memory: 64Mi
    env:
    - name: GREETING
      value: over-tls
";

/// kubectl against the cluster, with its own HOME and discovery cache under `dir`.
struct Kubectl<'a> {
    dir: &'a Path,
    kubeconfig: &'a Path,
}

impl Kubectl<'_> {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Run {
        run_kubectl(
            isolated_kubectl(self.dir, self.kubeconfig, args),
            args,
            stdin,
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args, None);
        assert!(run.ok(), "{run}");
        run.stdout
    }
}

/// One answer of the kubelet: status code and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: String,
}

/// `GET path` on the kubelet at `port` over TLS (verifying it with `ca_pem` for 127.0.0.1),
/// naming `node-0` in `Host`, with `identity` (certificate and key PEM) and `bearer` if given.
fn kubelet_get(
    port: u16,
    ca_pem: &str,
    identity: Option<(&str, &str)>,
    bearer: Option<&str>,
    path: &str,
) -> Answer {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: node-0:{port}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        // The server closes without close_notify after `Connection: close`; what came is whole.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => panic!("reading the kubelet's answer to {path}: {e}"),
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Answer {
        status,
        body: if chunked {
            dechunk(body)
        } else {
            body.to_owned()
        },
    }
}

/// The payload of a chunked body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

#[test]
fn the_kubelet_api_of_a_secure_cluster_is_https_and_checks_its_callers() {
    let cluster = crate::support::cluster()
        .secure(true)
        .nodes(1)
        .metrics_server(Some(Duration::from_secs(1)))
        .start()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for sub in ["home", "tmp", "cache"] {
        std::fs::create_dir_all(tmp.path().join(sub)).unwrap();
    }
    let k = Kubectl {
        dir: tmp.path(),
        kubeconfig: cluster.kubeconfig_path(),
    };
    let applied = k.run(&["apply", "-f", "-"], Some(POD));
    assert!(applied.ok(), "{applied}");
    eventually("web Running", SETTLE, || {
        let phase = k.ok(&["get", "pod", "web", "-o", "jsonpath={.status.phase}"]);
        (phase == "Running").then_some(())
    });

    // Through the API server, which dials the kubelet over TLS with its client certificate.
    let logs = k.ok(&["logs", "web"]);
    assert!(logs.contains("GET /tls 200"), "{logs}");
    let env = k.ok(&["exec", "web", "--", "env"]);
    assert!(env.contains("GREETING=over-tls"), "{env}");
    let echoed = k.run(&["exec", "-i", "web", "--", "cat"], Some("through TLS\n"));
    assert!(echoed.ok(), "{echoed}");
    assert_eq!(echoed.stdout, "through TLS\n");

    // Directly: the port every Node advertises serves HTTPS with a certificate of the CA.
    let port: u16 = k
        .ok(&[
            "get",
            "node",
            "node-0",
            "-o",
            "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}",
        ])
        .parse()
        .unwrap();
    let pki = cluster.data_dir().join("pki");
    let ca_pem = std::fs::read_to_string(pki.join("ca.crt")).unwrap();
    let logs_path = "/containerLogs/default/web/nginx";

    // No credentials: 401, as the kubelet with --anonymous-auth=false answers.
    let anonymous = kubelet_get(port, &ca_pem, None, None, logs_path);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert_eq!(anonymous.body, "Unauthorized");

    // A client certificate of the cluster CA for a user without nodes/proxy: 403.
    let ca = Ca::load_or_create(&pki).unwrap();
    let alice = ca
        .issue_client("alice", &["developers"], Validity::default_cert())
        .unwrap();
    let denied = kubelet_get(
        port,
        &ca_pem,
        Some((&alice.cert_pem, &alice.key_pem)),
        None,
        logs_path,
    );
    assert_eq!(denied.status, 403, "{denied:?}");
    assert_eq!(
        denied.body,
        "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[proxy])\n"
    );
    // /pods asks for nodes/pods first, then nodes/proxy.
    let pods = kubelet_get(
        port,
        &ca_pem,
        Some((&alice.cert_pem, &alice.key_pem)),
        None,
        "/pods",
    );
    assert_eq!(pods.status, 403, "{pods:?}");
    assert_eq!(
        pods.body,
        "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy])\n"
    );
    // A certificate of another CA authenticates no one.
    let other = Ca::generate_in_memory(Validity::default_cert()).unwrap();
    let mallory = other
        .issue_client(
            "system:admin",
            &["system:masters"],
            Validity::default_cert(),
        )
        .unwrap();
    let stranger = kubelet_get(
        port,
        &ca_pem,
        Some((&mallory.cert_pem, &mallory.key_pem)),
        None,
        logs_path,
    );
    assert_eq!(stranger.status, 401, "{stranger:?}");

    // A user granted nodes/proxy (before its first request: denials are cached 30 s).
    k.ok(&[
        "create",
        "clusterrole",
        "node-proxy",
        "--verb=get",
        "--resource=nodes/proxy",
    ]);
    k.ok(&[
        "create",
        "clusterrolebinding",
        "bob-node-proxy",
        "--clusterrole=node-proxy",
        "--user=bob",
    ]);
    let bob = ca
        .issue_client("bob", &[], Validity::default_cert())
        .unwrap();
    let allowed = kubelet_get(
        port,
        &ca_pem,
        Some((&bob.cert_pem, &bob.key_pem)),
        None,
        logs_path,
    );
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert!(allowed.body.contains("GET /tls 200"), "{allowed:?}");
    // /pods: nodes/pods is not granted, nodes/proxy is.
    let pods = kubelet_get(
        port,
        &ca_pem,
        Some((&bob.cert_pem, &bob.key_pem)),
        None,
        "/pods",
    );
    assert_eq!(pods.status, 200, "{pods:?}");
    assert!(pods.body.contains("\"name\":\"web\""), "{pods:?}");

    // A bearer token is checked with a TokenReview: the ServiceAccount has no nodes/proxy.
    let token = k.ok(&["create", "token", "default"]);
    let reviewed = kubelet_get(port, &ca_pem, None, Some(token.trim()), logs_path);
    assert_eq!(reviewed.status, 403, "{reviewed:?}");
    assert_eq!(
        reviewed.body,
        "Forbidden (user=system:serviceaccount:default:default, verb=get, resource=nodes, subresource(s)=[proxy])\n"
    );
    let forged = kubelet_get(port, &ca_pem, None, Some("not-a-token"), logs_path);
    assert_eq!(forged.status, 401, "{forged:?}");

    // Plain HTTP on the TLS port: Go's answer, then the connection closes.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let request = format!("GET {logs_path} HTTP/1.1\r\nHost: node-0:{port}\r\n\r\n");
    plain.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    plain.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 400 Bad Request\r\n"),
        "{answer:?}"
    );
    assert!(
        answer.ends_with("Client sent an HTTP request to an HTTPS server.\n"),
        "{answer:?}"
    );

    // The metrics-server scrapes the kubelet over HTTPS with its own credentials.
    let top = eventually("kubectl top pods to show web", SETTLE, || {
        // kubectl trusts its discovery cache: forget it until the metrics API is in it.
        let _ = std::fs::remove_dir_all(tmp.path().join("cache"));
        std::fs::create_dir_all(tmp.path().join("cache")).unwrap();
        let run = k.run(&["top", "pods", "--no-headers"], None);
        (run.ok() && run.stdout.starts_with("web ")).then_some(run.stdout)
    });
    assert!(
        top.split_whitespace()
            .nth(1)
            .is_some_and(|cpu| cpu.ends_with('m')),
        "{top}"
    );
    cluster.stop().unwrap();
}
