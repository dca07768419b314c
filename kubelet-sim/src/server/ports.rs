//! What a simulated pod answers on its ports, for port-forward: there is no process, so each
//! port the pod's containers declare (`ports[].containerPort`, TCP) answers by a simple rule.
//! No Kubernetes counterpart: a node's runtime dials `localhost:PORT` inside the pod's
//! network namespace (containerd's `portForward`).
//!
//! - An HTTP port ([`is_http_port`]: a port name containing `http` or `web`, or a usual web
//!   port: 80, 443, 3000, 5000, 8000, 8008, 8080, 8081, 8443, 8888, 9090) serves HTTP/1.1:
//!   every request gets `200 OK` and a small HTML page naming the pod, its node, the
//!   container, the port and the request (`HEAD`: headers only), keep-alive unless the
//!   request says `Connection: close` or is HTTP/1.0 without keep-alive. No TLS, even on 443.
//! - Any other declared port echoes the bytes it receives.
//! - An undeclared port refuses, with the message a kubelet on containerd writes on the
//!   error stream ([`refused_message`]).

use apimachinery::httpstream::spdy::streams::port_forward_error_message;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use crate::stages::hex64;

/// The most bytes of request headers an HTTP port reads before it answers 431.
pub const MAX_HEAD: usize = 64 * 1024;

/// How a declared port behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortBehavior {
    /// Serves a page over HTTP/1.1.
    Http,
    /// Echoes what it receives.
    Echo,
}

/// The port `port` of a pod, as one forwarded connection reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPort {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The node it runs on.
    pub node: String,
    /// The container that declares the port.
    pub container: String,
    /// The port.
    pub port: u16,
    /// How it behaves.
    pub behavior: PortBehavior,
}

/// Whether a port with this name and number serves HTTP (rule in the module docs).
pub fn is_http_port(name: Option<&str>, port: u16) -> bool {
    let named = name.is_some_and(|n| {
        let n = n.to_ascii_lowercase();
        n.contains("http") || n.contains("web")
    });
    named
        || matches!(
            port,
            80 | 443 | 3000 | 5000 | 8000 | 8008 | 8080 | 8081 | 8443 | 8888 | 9090
        )
}

/// The declared TCP port `port` of `pod` (regular and init containers), if any.
pub fn pod_port(pod: &Pod, node: &str, port: u16) -> Option<PodPort> {
    let spec = pod.spec.as_ref()?;
    let (container, declared) = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find_map(|c| {
            c.ports
                .iter()
                .flatten()
                .find(|p| {
                    p.container_port == i32::from(port)
                        && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
                })
                .map(|p| (c.name.clone(), p.clone()))
        })?;
    let behavior = if is_http_port(declared.name.as_deref(), port) {
        PortBehavior::Http
    } else {
        PortBehavior::Echo
    };
    Some(PodPort {
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod: pod.metadata.name.clone().unwrap_or_default(),
        node: node.to_owned(),
        container,
        port,
        behavior,
    })
}

/// The pod's sandbox ID as the runtime names it (64 hex digits derived from its UID).
pub fn sandbox_id(pod: &Pod) -> String {
    hex64(&format!(
        "{}/sandbox",
        pod.metadata.uid.as_deref().unwrap_or_default()
    ))
}

/// What the kubelet writes on the error stream for a port nothing listens on: the
/// streaming server's `error forwarding port N to pod <sandbox>, uid : ...` around
/// containerd's dial failure inside the pod's network namespace.
pub fn refused_message(pod: &Pod, port: u16) -> String {
    let sandbox = sandbox_id(pod);
    let netns = &hex64(&format!("{sandbox}/netns"))[..32];
    let netns = format!(
        "/var/run/netns/cni-{}-{}-{}-{}-{}",
        &netns[..8],
        &netns[8..12],
        &netns[12..16],
        &netns[16..20],
        &netns[20..32]
    );
    let cause = format!(
        "failed to execute portforward in network namespace {netns:?}: failed to connect to localhost:{port} inside namespace {sandbox:?}, IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6 [::1]:{port}: connect: connection refused "
    );
    port_forward_error_message(port, &sandbox, "", &cause)
}

/// Serves one forwarded connection to `target`: reads `inbound` (ending at the client's end
/// of the connection) and writes to `outbound`; returns when the connection is done.
pub async fn serve_connection(
    target: PodPort,
    mut inbound: mpsc::UnboundedReceiver<Vec<u8>>,
    outbound: mpsc::Sender<Vec<u8>>,
) {
    match target.behavior {
        PortBehavior::Echo => {
            while let Some(bytes) = inbound.recv().await {
                if outbound.send(bytes).await.is_err() {
                    return;
                }
            }
        }
        PortBehavior::Http => serve_http(&target, &mut inbound, &outbound).await,
    }
}

/// One parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Head {
    method: String,
    path: String,
    version: String,
    content_length: usize,
    keep_alive: bool,
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path, version) = (first.next()?, first.next()?, first.next()?);
    if !version.starts_with("HTTP/1.") || method.is_empty() {
        return None;
    }
    let mut content_length = 0;
    let mut connection = String::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => content_length = value.trim().parse().ok()?,
            "connection" => connection = value.trim().to_ascii_lowercase(),
            _ => {}
        }
    }
    let keep_alive = if version == "HTTP/1.0" {
        connection.contains("keep-alive")
    } else {
        !connection.contains("close")
    };
    Some(Head {
        method: method.to_owned(),
        path: path.to_owned(),
        version: version.to_owned(),
        content_length,
        keep_alive,
    })
}

/// The page an HTTP port serves for `method path`.
pub fn page(target: &PodPort, method: &str, path: &str) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    format!(
        "<!DOCTYPE html>\n<html>\n<head><title>{pod}</title></head>\n<body>\n<h1>Hello from pod {ns}/{pod}</h1>\n<p>node: {node}<br>\ncontainer: {container}<br>\nport: {port}<br>\nrequest: {method} {path}</p>\n<p>Served by a simulated miniplane node.</p>\n</body>\n</html>\n",
        pod = esc(&target.pod),
        ns = esc(&target.namespace),
        node = esc(&target.node),
        container = esc(&target.container),
        port = target.port,
        method = esc(method),
        path = esc(path),
    )
}

fn response(status: &str, body: &str, head_only: bool, keep_alive: bool) -> Vec<u8> {
    let date = jiff::Timestamp::now().strftime("%a, %d %b %Y %H:%M:%S GMT");
    let mut out = format!(
        "HTTP/1.1 {status}\r\nServer: miniplane\r\nDate: {date}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: {}\r\n\r\n",
        body.len(),
        if keep_alive { "keep-alive" } else { "close" }
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

async fn serve_http(
    target: &PodPort,
    inbound: &mut mpsc::UnboundedReceiver<Vec<u8>>,
    outbound: &mpsc::Sender<Vec<u8>>,
) {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > MAX_HEAD {
                let body = "request header fields too large\n";
                let _ = outbound
                    .send(response(
                        "431 Request Header Fields Too Large",
                        body,
                        false,
                        false,
                    ))
                    .await;
                return;
            }
            match inbound.recv().await {
                Some(bytes) => buf.extend(bytes),
                None => return,
            }
        };
        let Some(head) = parse_head(&buf[..end]) else {
            let _ = outbound
                .send(response("400 Bad Request", "bad request\n", false, false))
                .await;
            return;
        };
        while buf.len() < end + head.content_length {
            match inbound.recv().await {
                Some(bytes) => buf.extend(bytes),
                None => return,
            }
        }
        buf.drain(..end + head.content_length);
        let body = page(target, &head.method, &head.path);
        let bytes = response("200 OK", &body, head.method == "HEAD", head.keep_alive);
        if outbound.send(bytes).await.is_err() || !head.keep_alive {
            return;
        }
        tracing::trace!(
            version = head.version,
            "served a request on a forwarded port"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    fn pod() -> Pod {
        let port = |n: i32, name: Option<&str>| ContainerPort {
            container_port: n,
            name: name.map(str::to_owned),
            ..Default::default()
        };
        let mut p = Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    ports: Some(vec![
                        port(8080, None),
                        port(9000, Some("admin-http")),
                        port(6379, None),
                    ]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        p.metadata.name = Some("web".into());
        p.metadata.uid = Some("u1".into());
        p
    }

    #[tokio::test]
    async fn http_ports_answer_pages_and_others_echo() {
        let p = pod();
        let http = pod_port(&p, "node-0", 9000).expect("declared");
        assert_eq!(http.behavior, PortBehavior::Http);
        assert_eq!(
            pod_port(&p, "node-0", 6379).map(|t| t.behavior),
            Some(PortBehavior::Echo)
        );
        assert_eq!(pod_port(&p, "node-0", 7), None);

        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let (out_tx, mut out_rx) = mpsc::channel(4);
        let serving = tokio::spawn(serve_connection(http, in_rx, out_tx));
        in_tx
            .send(b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi".to_vec())
            .unwrap_or_default();
        let first = String::from_utf8(out_rx.recv().await.unwrap_or_default()).unwrap_or_default();
        assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
        assert!(first.contains("Hello from pod default/web"), "{first}");
        assert!(first.contains("request: GET /x"), "{first}");
        in_tx
            .send(b"HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n".to_vec())
            .unwrap_or_default();
        let second = String::from_utf8(out_rx.recv().await.unwrap_or_default()).unwrap_or_default();
        assert!(second.ends_with("\r\n\r\n") && second.contains("Connection: close"));
        serving.await.unwrap_or_default();
        assert!(
            out_rx.recv().await.is_none(),
            "closed after Connection: close"
        );
    }

    #[test]
    fn refusal_names_port_and_sandbox() {
        let m = refused_message(&pod(), 7);
        let sandbox = sandbox_id(&pod());
        assert_eq!(sandbox.len(), 64);
        assert!(
            m.starts_with(&format!("error forwarding port 7 to pod {sandbox}, uid : failed to execute portforward in network namespace \"/var/run/netns/cni-")),
            "{m}"
        );
        assert!(m.contains("dial tcp4 127.0.0.1:7: connect: connection refused"));
    }
}
