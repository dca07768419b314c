//! The connect subresources against a stand-in kubelet on a loopback socket: `pods/log`
//! streamed from the node, the kubelet's errors as `Status`es, an upgraded `exec` spliced
//! both ways (and counted until it closes), `nodes/NAME/proxy`, and the refusals the API
//! server gives before it reaches any node.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::common::Harness;

const PODS: &str = "/api/v1/namespaces/default/pods";

/// What the stand-in kubelet saw: each request's `Host` and path with query.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// A kubelet stand-in: logs, an error for container `waiting`, `/stats/summary`, and an
/// upgrade that echoes bytes upper-cased.
async fn kubelet(shutdown: CancellationToken) -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Seen = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let tcp = tokio::select! {
                r = listener.accept() => match r { Ok((tcp, _)) => tcp, Err(_) => return },
                () = shutdown.cancelled() => return,
            };
            let log = log.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let log = log.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(req, &log)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    (port, seen)
}

fn answer(mut req: Request<Incoming>, seen: &Seen) -> Response<Full<Bytes>> {
    let host = req
        .headers()
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    seen.lock().expect("seen").push((host, target.clone()));
    let reply = |code: u16, body: &str| {
        let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
        *r.status_mut() = StatusCode::from_u16(code).expect("code");
        r
    };
    if req.headers().contains_key("upgrade") {
        assert!(
            req.headers().get("cookie").is_none(),
            "credentials stay at the API server"
        );
        let upgrade = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let Ok(up) = upgrade.await else { return };
            let mut io = TokioIo::new(up);
            let mut buf = [0u8; 1024];
            while let Ok(n) = io.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                let upper = buf[..n].to_ascii_uppercase();
                if io.write_all(&upper).await.is_err() {
                    return;
                }
            }
        });
        let mut r = reply(101, "");
        r.headers_mut()
            .insert("upgrade", "test-echo".parse().expect("header"));
        r.headers_mut()
            .insert("connection", "Upgrade".parse().expect("header"));
        return r;
    }
    if target.starts_with("/containerLogs/default/web-1/waiting") {
        return reply(
            400,
            "container \"waiting\" in pod \"web-1\" is waiting to start: ContainerCreating",
        );
    }
    if target.starts_with("/containerLogs/") {
        return reply(200, "line 1\nline 2\n");
    }
    if target == "/stats/summary" {
        return reply(200, "{\"node\":{}}");
    }
    reply(404, "404 page not found")
}

/// A Node whose kubelet listens on `port`, and pods: `web-1` on it (containers `app` and
/// `waiting`), `lonely` not scheduled.
async fn cluster(h: &Harness, port: u16) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0"},
        "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}});
    let created = h.post("/api/v1/nodes", &node).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    for (name, node_name) in [("web-1", Some("node-0")), ("lonely", None)] {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "nginx"},
                                    {"name": "waiting", "image": "nginx"}]}});
        if let Some(n) = node_name {
            pod["spec"]["nodeName"] = json!(n);
        }
        let created = h.post(PODS, &pod).await;
        assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    }
}

#[tokio::test]
async fn logs_come_from_the_pods_node_and_its_errors_become_statuses() {
    let h = Harness::new().await;
    let stop = CancellationToken::new();
    let (port, seen) = kubelet(stop.clone()).await;
    cluster(&h, port).await;

    let got = h
        .get(&format!(
            "{PODS}/web-1/log?container=app&tailLines=5&timestamps=true"
        ))
        .await;
    assert_eq!(got.status, StatusCode::OK, "{:?}", got.body);
    assert_eq!(got.body, json!("line 1\nline 2\n"));
    let (host, target) = seen
        .lock()
        .expect("seen")
        .last()
        .cloned()
        .expect("a request");
    assert_eq!(host, format!("node-0:{port}"));
    assert_eq!(
        target,
        "/containerLogs/default/web-1/app?tailLines=5&timestamps=true"
    );

    let waiting = h.get(&format!("{PODS}/web-1/log?container=waiting")).await;
    assert_eq!(waiting.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        waiting.body["message"],
        "container \"waiting\" in pod \"web-1\" is waiting to start: ContainerCreating"
    );

    // Refused before any node is asked.
    let before = seen.lock().expect("seen").len();
    let no_name = h.get(&format!("{PODS}/web-1/log")).await;
    assert_eq!(no_name.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        no_name.body["message"],
        "a container name must be specified for pod web-1, choose one of: [app waiting]"
    );
    let unknown = h.get(&format!("{PODS}/web-1/log?container=nope")).await;
    assert_eq!(
        unknown.body["message"],
        "container nope is not valid for pod web-1"
    );
    let invalid = h
        .get(&format!("{PODS}/web-1/log?container=app&tailLines=-1"))
        .await;
    assert_eq!(invalid.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(invalid.body["details"]["kind"], "PodLogOptions");
    assert_eq!(invalid.body["details"]["causes"][0]["field"], "tailLines");
    let missing = h.get(&format!("{PODS}/ghost/log")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.body["message"], "pods \"ghost\" not found");
    // A pod no node runs has an empty log.
    let lonely = h.get(&format!("{PODS}/lonely/log?container=app")).await;
    assert_eq!(lonely.status, StatusCode::OK);
    assert_eq!(lonely.body, json!(""));
    let exec = h
        .raw(
            Method::POST,
            &format!("{PODS}/lonely/exec?container=app&command=ls&stdout=true"),
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(exec.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        exec.body["message"],
        "pod lonely does not have a host assigned"
    );
    let no_command = h
        .raw(
            Method::POST,
            &format!("{PODS}/web-1/exec?container=app&stdout=true"),
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(
        no_command.body["message"],
        "you must specify at least one command for the container"
    );
    let put = h
        .raw(
            Method::PUT,
            &format!("{PODS}/web-1/log?container=app"),
            &[],
            Vec::new(),
        )
        .await;
    assert_eq!(put.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        seen.lock().expect("seen").len(),
        before,
        "no node was asked"
    );

    let summary = h.get("/api/v1/nodes/node-0/proxy/stats/summary").await;
    assert_eq!(summary.status, StatusCode::OK);
    assert_eq!(summary.body, json!({"node": {}}));
    let (host, target) = seen
        .lock()
        .expect("seen")
        .last()
        .cloned()
        .expect("a request");
    assert_eq!(
        (host.as_str(), target.as_str()),
        (format!("node-0:{port}").as_str(), "/stats/summary")
    );
    let unknown_path = h.get("/api/v1/nodes/node-0/proxy/nope").await;
    assert_eq!(unknown_path.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown_path.body, json!("404 page not found"));
    stop.cancel();
}

/// Reads from `tcp` until `want` has arrived (or fails after 5 s).
async fn read_until(tcp: &mut TcpStream, want: &str) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&got).contains(want) {
        let n = tokio::time::timeout_at(deadline, tcp.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no {want:?} in {:?}", String::from_utf8_lossy(&got)))
            .expect("read");
        assert!(
            n > 0,
            "closed before {want:?}: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

async fn open_tunnels(addr: SocketAddr) -> String {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut text = String::new();
    tcp.read_to_string(&mut text).await.expect("read");
    text.lines()
        .find(|l| l.starts_with("apiserver_longrunning_requests{"))
        .unwrap_or("")
        .to_string()
}

#[tokio::test]
async fn an_upgraded_exec_is_spliced_both_ways_and_counted_until_closed() {
    let h = Harness::new().await;
    let stop = CancellationToken::new();
    let (port, seen) = kubelet(stop.clone()).await;
    cluster(&h, port).await;
    // A server on a socket over the same store (upgrades need a real connection).
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let backend: Arc<dyn store::Backend> = h.backend.clone();
    tokio::spawn(apiserver::serve(listener, backend, stop.clone()));

    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "GET {PODS}/web-1/exec?container=app&command=sh&command=-c&command=echo%20hi&stdin=true&stdout=true&tty=true HTTP/1.1\r\n\
         Host: 127.0.0.1\r\nCookie: session=secret\r\nConnection: Upgrade\r\nUpgrade: test-echo\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.expect("write");
    let head = read_until(&mut tcp, "\r\n\r\n").await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("upgrade: test-echo"),
        "{head}"
    );
    tcp.write_all(b"hello").await.expect("write");
    read_until(&mut tcp, "HELLO").await;
    let (host, target) = seen
        .lock()
        .expect("seen")
        .last()
        .cloned()
        .expect("a request");
    assert_eq!(host, format!("node-0:{port}"));
    assert_eq!(
        target,
        "/exec/default/web-1/app?input=1&output=1&tty=1&command=sh&command=-c&command=echo+hi"
    );
    assert!(
        open_tunnels(addr)
            .await
            .ends_with("subresource=\"exec\",verb=\"CONNECT\",version=\"v1\"} 1"),
        "one tunnel open"
    );
    drop(tcp);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let line = open_tunnels(addr).await;
        if line.ends_with("} 0") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tunnel outlived its client: {line}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
}
