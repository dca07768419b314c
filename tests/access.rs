//! Who may drive the server: without authentication, requests for another `Host` (a
//! DNS-rebinding page) and requests carrying another web page's `Origin` are refused, a body in
//! a format no Kubernetes client sends is 415 on the Kubernetes API and on miniplane's own, and
//! the web UI tells browsers not to sniff, frame or run anything but its own files. On a
//! secure server, miniplane's own API (faults, traces) is authorized like any other path.
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{self, Server};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn configmap(name: &str) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
        .to_string()
}

/// A request with the head written out: `headers` are whole header lines.
fn raw(
    s: &Server,
    method: &str,
    path: &str,
    headers: &[String],
    body: &[u8],
) -> support::HttpResponse {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    support::http::request_raw(s.addr, &head, body).unwrap()
}

#[test]
fn a_foreign_host_is_refused_and_the_servers_names_are_served() {
    let s = Server::start();
    let port = s.addr.port();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("[::1]:{port}"),
    ] {
        let resp = raw(&s, "GET", SECRETS, &[format!("Host: {host}")], b"");
        assert_eq!(resp.status, 200, "Host {host}: {}", resp.text());
    }
    // A DNS-rebinding page: its own domain name resolved to 127.0.0.1.
    let resp = raw(
        &s,
        "GET",
        SECRETS,
        &[format!("Host: rebind.attacker.example:{port}")],
        b"",
    );
    let msg = resp.expect_status(403, "Forbidden");
    assert!(msg.contains("rebind.attacker.example"), "{msg}");
    assert_eq!(resp.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn a_name_given_with_allowed_host_is_served() {
    let s = Server::start_with(&["--allowed-host", "cp.example,other.example"]);
    let port = s.addr.port();
    for host in [format!("cp.example:{port}"), "other.example".to_string()] {
        let resp = raw(&s, "GET", SECRETS, &[format!("Host: {host}")], b"");
        assert_eq!(resp.status, 200, "Host {host}: {}", resp.text());
    }
    let resp = raw(
        &s,
        "GET",
        SECRETS,
        &[format!("Host: third.example:{port}")],
        b"",
    );
    resp.expect_status(403, "Forbidden");
}

#[test]
fn a_page_on_another_origin_cannot_write_and_the_uis_own_origin_can() {
    let s = Server::start();
    let host = format!("Host: {}", s.addr);
    // fetch(url, {method: "POST", mode: "no-cors", body: new Blob([json])}): no Content-Type.
    let resp = raw(
        &s,
        "POST",
        CONFIGMAPS,
        &[host.clone(), "Origin: https://attacker.example".into()],
        configmap("from-a-page").as_bytes(),
    );
    let msg = resp.expect_status(403, "Forbidden");
    assert!(msg.contains("https://attacker.example"), "{msg}");
    assert_eq!(s.get(&format!("{CONFIGMAPS}/from-a-page")).status, 404);
    // An opaque origin (sandboxed frame, file://) is another origin too.
    let resp = raw(
        &s,
        "DELETE",
        &format!("{CONFIGMAPS}/x"),
        &[host.clone(), "Origin: null".into()],
        b"",
    );
    resp.expect_status(403, "Forbidden");
    // The UI's own pages: Origin = the server's own scheme://host:port.
    let resp = raw(
        &s,
        "POST",
        CONFIGMAPS,
        &[
            host,
            format!("Origin: http://{}", s.addr),
            "Content-Type: application/json".into(),
        ],
        configmap("from-the-ui").as_bytes(),
    );
    resp.expect_created();
    // kubectl, client-go and kube-rs send no Origin and no Content-Type problem.
    assert_eq!(s.get(&format!("{CONFIGMAPS}/from-the-ui")).status, 200);
}

#[test]
fn an_allowed_cors_origin_gets_kube_apiservers_cors_headers() {
    let s = Server::start_with(&["--cors-allowed-origins", r"^https://dash\.example$"]);
    let host = format!("Host: {}", s.addr);
    let origin = "Origin: https://dash.example".to_string();
    let pre = raw(
        &s,
        "OPTIONS",
        CONFIGMAPS,
        &[
            host.clone(),
            origin.clone(),
            "Access-Control-Request-Method: POST".into(),
        ],
        b"",
    );
    assert_eq!(pre.status, 204, "{}", pre.text());
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://dash.example")
    );
    assert_eq!(
        pre.header("access-control-allow-methods"),
        Some("POST, GET, OPTIONS, PUT, DELETE, PATCH")
    );
    assert_eq!(pre.header("access-control-allow-credentials"), Some("true"));
    let resp = raw(&s, "GET", CONFIGMAPS, &[host.clone(), origin], b"");
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.header("access-control-allow-origin"),
        Some("https://dash.example")
    );
    let other = raw(
        &s,
        "GET",
        CONFIGMAPS,
        &[host, "Origin: https://dash.example.evil".into()],
        b"",
    );
    other.expect_status(403, "Forbidden");
}

#[test]
fn bodies_in_other_formats_are_415_on_the_admin_and_the_kubernetes_api() {
    let s = Server::start();
    // An HTML form (enctype=text/plain) or a no-cors fetch of a string: text/plain.
    let fault = serde_json::json!({"kind": "PauseController", "controller": "deployment"});
    let resp = s.http(
        "POST",
        "/miniplane/v1/faults",
        Some("text/plain;charset=UTF-8"),
        fault.to_string().as_bytes(),
    );
    let msg = resp.expect_status(415, "UnsupportedMediaType");
    assert_eq!(
        msg,
        "the body of the request was in an unknown format - accepted media types include: application/json"
    );
    let faults = s.get("/miniplane/v1/faults").json();
    assert_eq!(
        faults["items"],
        serde_json::json!([]),
        "no fault was created: {faults}"
    );
    // As JSON it is accepted.
    let resp = s.http(
        "POST",
        "/miniplane/v1/faults",
        Some("application/json"),
        fault.to_string().as_bytes(),
    );
    assert_eq!(resp.status, 201, "{}", resp.text());
    // The Kubernetes API, in kube-apiserver's words.
    let resp = s.http(
        "POST",
        CONFIGMAPS,
        Some("text/plain"),
        configmap("plain").as_bytes(),
    );
    let msg = resp.expect_status(415, "UnsupportedMediaType");
    assert_eq!(
        msg,
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
}

#[test]
fn the_ui_forbids_sniffing_framing_and_foreign_scripts() {
    let s = Server::start();
    for path in ["/ui/", "/ui/app.js"] {
        let resp = s.get(path);
        assert_eq!(resp.status, 200, "{path}");
        assert_eq!(
            resp.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(resp.header("x-frame-options"), Some("DENY"), "{path}");
        let csp = resp.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert!(csp.contains("connect-src 'self'"), "{path}: {csp}");
    }
}

#[test]
fn miniplanes_own_api_is_authorized_as_any_other_path_on_a_secure_server() {
    let s = Server::start_secure(&[]);
    // The admin (system:masters, bound to miniplane:admin too) reads and writes faults.
    assert!(
        s.kubectl_ok(&["get", "--raw", "/miniplane/v1/faults"])
            .contains("\"items\"")
    );
    let fault = s.dir().join("fault.json");
    std::fs::write(
        &fault,
        r#"{"kind": "PauseController", "controller": "deployment"}"#,
    )
    .unwrap();
    let fault = fault.to_str().unwrap();
    s.kubectl_ok(&["create", "--raw", "/miniplane/v1/faults", "-f", fault]);
    // alice, with no binding: 403 on every path of it, worded as kube-apiserver words a
    // non-resource refusal.
    let as_alice = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--as", "alice"]);
        s.kubectl(&all)
    };
    for path in ["/miniplane/v1/faults", "/miniplane/v1/traces?limit=1"] {
        let run = as_alice(&["get", "--raw", path]);
        assert!(!run.ok(), "{run}");
        let bare = path.split('?').next().unwrap();
        assert_eq!(
            run.stderr.trim(),
            format!(
                r#"Error from server (Forbidden): forbidden: User "alice" cannot get path "{bare}""#
            ),
            "{run}"
        );
    }
    // miniplane:viewer lets her read, not change.
    s.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "alice-sees",
        "--clusterrole=miniplane:viewer",
        "--user=alice",
    ]);
    support::eventually("alice reads the faults", support::DEADLINE, || {
        as_alice(&["get", "--raw", "/miniplane/v1/faults"])
            .ok()
            .then_some(())
    });
    assert!(as_alice(&["get", "--raw", "/miniplane/v1/traces?limit=1"]).ok());
    let run = as_alice(&["create", "--raw", "/miniplane/v1/faults", "-f", fault]);
    assert!(!run.ok(), "{run}");
    assert_eq!(
        run.stderr.trim(),
        r#"Error from server (Forbidden): forbidden: User "alice" cannot post path "/miniplane/v1/faults""#,
        "{run}"
    );
}
