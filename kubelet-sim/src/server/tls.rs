//! The kubelet API over HTTPS: the accept loop that runs the TLS handshake and serves each
//! connection's requests, with the client's certificate chain in their extensions
//! ([`super::auth::PeerCertificates`]) for the x509 authenticator.
//!
//! Mirrors what the kubelet gets from Go's `net/http` server with the `tls.Config` of
//! `cmd/kubelet/app/server.go` `InitializeTLS` (`ClientAuth: tls.RequestClientCert` when a
//! client CA is set: a certificate is asked for, not required, and judged per request) and
//! Go's answer to plain HTTP on a TLS port: `400 Bad Request` with `Client sent an HTTP
//! request to an HTTPS server.`.
//!
//! Simplifications: HTTP/1.1 only (ALPN `http/1.1`); no handshake or idle timeouts beyond
//! [`HANDSHAKE_TIMEOUT`].

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::auth::PeerCertificates;

/// How long a client may take to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Go's answer to a plain HTTP request on a TLS port (`net/http` `server.go`).
pub const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// The first byte of a TLS record carrying a handshake.
const TLS_HANDSHAKE: u8 = 0x16;

/// Serves `router` over TLS on `listener` until `shutdown` fires; each connection is a task
/// of `tracker`, asked to finish its request and close when `shutdown` fires.
pub async fn serve(
    router: Router,
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let tcp = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet API: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        tracker.spawn(connection(
            tcp,
            acceptor.clone(),
            router.clone(),
            shutdown.clone(),
        ));
    }
}

/// One connection: the handshake, then HTTP/1.1 with upgrades until either side closes.
async fn connection(
    mut tcp: TcpStream,
    acceptor: TlsAcceptor,
    router: Router,
    shutdown: CancellationToken,
) {
    let mut first = [0u8; 1];
    let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, tcp.peek(&mut first)).await;
    match peeked {
        Ok(Ok(1)) if first[0] != TLS_HANDSHAKE => {
            // Plain HTTP (or anything else that is not TLS): Go's 400, then close. The
            // request's head is read first, so that closing does not reset the connection
            // under the client before it reads the answer.
            let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, read_head(&mut tcp)).await;
            let _ = tcp.write_all(PLAIN_HTTP_ANSWER).await;
            let _ = tcp.shutdown().await;
            return;
        }
        Ok(Ok(1)) => {}
        _ => return,
    }
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "kubelet API: TLS handshake error");
            return;
        }
        Err(_) => {
            tracing::debug!("kubelet API: TLS handshake timed out");
            return;
        }
    };
    let peer = stream.get_ref().1.peer_certificates().map(|chain| {
        PeerCertificates(Arc::new(
            chain.iter().map(|c| c.clone().into_owned()).collect(),
        ))
    });
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        if let Some(peer) = &peer {
            req.extensions_mut().insert(peer.clone());
        }
        router.clone().oneshot(req)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "kubelet API: connection ended");
            }
        }
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Reads what a plain-HTTP client sent, up to the end of its request's head (or 8 KiB).
async fn read_head(tcp: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while seen.len() < 8192 {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
            return;
        }
    }
}
