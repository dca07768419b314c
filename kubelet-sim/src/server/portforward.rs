//! `/portForward/{ns}/{pod}[/{uid}]`: connections to the pod's ports ([`super::ports`]).
//!
//! Mirrors `pkg/kubelet/server/server.go` `getPortForward` (`pod does not exist`, `pod not
//! found` for another UID, `portforward.NewV4Options` and its 400s) and the CRI streaming
//! server's `portforward` package, over three transports:
//!
//! - SPDY/3.1 with `X-Stream-Protocol-Version: portforward.k8s.io` (`httpstream.go`): each
//!   connection is an error stream and a data stream paired by `requestid`; both are closed
//!   when the connection is done;
//! - SPDY tunnelled in a WebSocket with subprotocol `SPDY/3.1+portforward.k8s.io` (kubectl
//!   1.31+; the API server's tunnelling handler on the kubelet): the same session inside the
//!   WebSocket's binary messages;
//! - WebSocket with `v4.channel.k8s.io` (or `v4.base64.channel.k8s.io`, or none) and
//!   `?port=N` (`websocket.go`): channels 2i (data) and 2i+1 (error) for the i-th port, each
//!   opened by the port as 2 little-endian bytes; the socket closes once every port's
//!   connection is done.

use std::sync::Arc;

use apimachinery::httpstream::spdy::Session;
use apimachinery::httpstream::spdy::streams::{
    PORT_FORWARD_PROTOCOL_V1, PortForwardPair, PortForwardPairer, TUNNELED_PORT_FORWARD_PROTOCOL,
};
use apimachinery::httpstream::wsstream::{self, Framing};
use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use super::exec::pod_error;
use super::ports::{pod_port, refused_message, serve_connection};
use super::remotecommand::send;
use super::upgrade::{
    accept_spdy, accept_websocket, header_values, is_upgrade, is_websocket, run_spdy,
    spdy_protocol, tunnel, upgrade_required, websocket_protocol,
};
use super::{KubeletServer, query_values, restful_error};

/// The pod a port-forward session reaches.
#[derive(Debug)]
pub struct Target {
    /// The pod (as it was when the session began).
    pub pod: Arc<Pod>,
    /// Its node.
    pub node: String,
}

/// `GET|POST /portForward/{ns}/{pod}`.
pub async fn port_forward2(
    State(server): State<KubeletServer>,
    Path((namespace, pod)): Path<(String, String)>,
    request: Request,
) -> Response {
    port_forward(server, namespace, pod, None, request).await
}

/// `GET|POST /portForward/{ns}/{pod}/{uid}`.
pub async fn port_forward3(
    State(server): State<KubeletServer>,
    Path((namespace, pod, uid)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    port_forward(server, namespace, pod, Some(uid), request).await
}

/// `portforward.NewV4Options`: the `port` values of a WebSocket request.
pub fn v4_ports(query: &str) -> Result<Vec<u16>, String> {
    let values = query_values(query, "port");
    if values.is_empty() {
        return Err("query parameter \"port\" is required".to_owned());
    }
    let mut ports = Vec::new();
    for value in &values {
        if value.is_empty() {
            return Err("query parameter \"port\" cannot be empty".to_owned());
        }
        for p in value.split(',') {
            let port: u16 = p.parse().map_err(|_| {
                format!("unable to parse {value:?} as a port: strconv.ParseUint: parsing {p:?}: invalid syntax")
            })?;
            if port < 1 {
                return Err(format!("port {value:?} must be > 0"));
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

async fn port_forward(
    server: KubeletServer,
    namespace: String,
    pod_name: String,
    uid: Option<String>,
    request: Request,
) -> Response {
    let headers = request.headers();
    let websocket = is_websocket(headers);
    let tunnelled = websocket
        && header_values(headers, "sec-websocket-protocol")
            .iter()
            .any(|p| p == TUNNELED_PORT_FORWARD_PROTOCOL);
    let query = request.uri().query().unwrap_or_default().to_owned();
    let ports = if websocket && !tunnelled {
        match v4_ports(&query) {
            Ok(p) => p,
            Err(e) => return restful_error(StatusCode::BAD_REQUEST, &e),
        }
    } else {
        Vec::new()
    };
    let (pod, node) = match server.find_pod(headers, &namespace, &pod_name) {
        Ok(found) => found,
        Err(lookup) => return pod_error(lookup),
    };
    if let Some(uid) = uid.filter(|u| !u.is_empty())
        && pod.metadata.uid.as_deref() != Some(uid.as_str())
    {
        return restful_error(StatusCode::NOT_FOUND, "pod not found");
    }
    let target = Arc::new(Target {
        pod,
        node: node.name().to_owned(),
    });
    if tunnelled {
        let streams = server.streams().clone();
        return accept_websocket(
            &server,
            request,
            TUNNELED_PORT_FORWARD_PROTOCOL,
            move |socket, guard| async move {
                run_spdy(
                    tunnel(socket),
                    &streams,
                    guard,
                    |session, guard| async move {
                        let _open = guard;
                        serve_spdy(session, target).await;
                    },
                )
                .await;
            },
        )
        .await;
    }
    if websocket {
        let protocol = match websocket_protocol(headers, &wsstream::PORT_FORWARD_PROTOCOLS) {
            Ok(p) => p,
            Err(response) => return *response,
        };
        let chosen = protocol.clone();
        return accept_websocket(&server, request, &chosen, move |socket, guard| async move {
            let _open = guard;
            if let Some(framing) = wsstream::framing(&protocol) {
                serve_websocket(socket, framing, ports, target).await;
            }
        })
        .await;
    }
    if !is_upgrade(headers) {
        return upgrade_required();
    }
    if let Err(response) = spdy_protocol(headers, &[PORT_FORWARD_PROTOCOL_V1]) {
        return *response;
    }
    accept_spdy(
        &server,
        request,
        PORT_FORWARD_PROTOCOL_V1,
        move |session, guard| async move {
            let _open = guard;
            serve_spdy(session, target).await;
        },
    )
}

/// Serves the stream pairs a SPDY client creates until the connection ends.
pub async fn serve_spdy(mut session: Session, target: Arc<Target>) {
    let mut pairer = PortForwardPairer::default();
    let mut connections = FuturesUnordered::new();
    loop {
        tokio::select! {
            stream = session.accept() => match stream {
                Some(stream) => match pairer.add(stream) {
                    Ok(Some(pair)) => connections.push(serve_pair(pair, target.clone())),
                    Ok(None) => {}
                    Err(e) => tracing::debug!(error = %e, "kubelet API: port-forward stream refused"),
                },
                None => return,
            },
            Some(()) = connections.next() => {}
        }
    }
}

/// One forwarded connection over a SPDY stream pair.
async fn serve_pair(pair: PortForwardPair, target: Arc<Target>) {
    let PortForwardPair {
        port, error, data, ..
    } = pair;
    let Some(port_target) = pod_port(&target.pod, &target.node, port) else {
        let _ = error
            .writer
            .write(refused_message(&target.pod, port).as_bytes())
            .await;
        let _ = data.writer.close().await;
        let _ = error.writer.close().await;
        return;
    };
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(16);
    let serving = serve_connection(port_target, data.data, out_tx);
    let mut serving = std::pin::pin!(serving);
    let mut done = false;
    loop {
        tokio::select! {
            () = &mut serving, if !done => done = true,
            bytes = out_rx.recv() => match bytes {
                Some(bytes) => {
                    if data.writer.write(&bytes).await.is_err() {
                        return;
                    }
                }
                None => break,
            },
        }
    }
    let _ = data.writer.close().await;
    let _ = error.writer.close().await;
}

/// Serves `ports` over a WebSocket port-forward until every connection is done or the
/// client leaves.
pub async fn serve_websocket(
    mut socket: WebSocket,
    framing: Framing,
    ports: Vec<u16>,
    target: Arc<Target>,
) {
    let (out_tx, mut out_rx) = mpsc::channel::<(u8, Vec<u8>)>(16);
    let mut inbound: Vec<Option<mpsc::UnboundedSender<Vec<u8>>>> = Vec::new();
    let mut connections = FuturesUnordered::new();
    for (i, &port) in ports.iter().enumerate() {
        let (Some(data_ch), Some(error_ch)) = (
            wsstream::port_forward_data_channel(i),
            wsstream::port_forward_error_channel(i),
        ) else {
            break;
        };
        let prefix = wsstream::port_prefix(port);
        if send(&mut socket, framing, data_ch, &prefix).await.is_err()
            || send(&mut socket, framing, error_ch, &prefix).await.is_err()
        {
            return;
        }
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        inbound.push(Some(in_tx));
        let out = out_tx.clone();
        let target = target.clone();
        connections.push(async move {
            match pod_port(&target.pod, &target.node, port) {
                Some(port_target) => {
                    let (conn_tx, mut conn_rx) = mpsc::channel::<Vec<u8>>(16);
                    let forward = async {
                        while let Some(bytes) = conn_rx.recv().await {
                            if out.send((data_ch, bytes)).await.is_err() {
                                return;
                            }
                        }
                    };
                    tokio::join!(serve_connection(port_target, in_rx, conn_tx), forward);
                }
                None => {
                    let message = refused_message(&target.pod, port).into_bytes();
                    let _ = out.send((error_ch, message)).await;
                }
            }
        });
    }
    drop(out_tx);
    let mut open = connections.len();
    while open > 0 {
        tokio::select! {
            Some(()) = connections.next() => open -= 1,
            Some((channel, bytes)) = out_rx.recv() => {
                if send(&mut socket, framing, channel, &bytes).await.is_err() {
                    return;
                }
            }
            message = socket.recv() => {
                let bytes = match message {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                    Some(Ok(Message::Binary(b))) => b.to_vec(),
                    Some(Ok(Message::Text(t))) => t.as_str().as_bytes().to_vec(),
                    Some(Ok(_)) => continue,
                };
                if let Ok(wsstream::Message::Data { channel, data }) = wsstream::decode(framing, &bytes)
                    && channel % 2 == 0
                    && let Some(Some(tx)) = inbound.get(usize::from(channel / 2))
                {
                    let _ = tx.send(data);
                }
            }
        }
    }
    while let Ok((channel, bytes)) = out_rx.try_recv() {
        if send(&mut socket, framing, channel, &bytes).await.is_err() {
            return;
        }
    }
    let _ = socket
        .send(Message::Close(Some(CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v4_options() {
        assert_eq!(v4_ports("port=80,443&port=8080"), Ok(vec![80, 443, 8080]));
        assert_eq!(
            v4_ports(""),
            Err("query parameter \"port\" is required".to_owned())
        );
        assert_eq!(v4_ports("port=0"), Err("port \"0\" must be > 0".to_owned()));
        assert!(
            v4_ports("port=x").is_err_and(|e| e.starts_with("unable to parse \"x\" as a port"))
        );
    }
}
