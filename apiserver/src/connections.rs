//! The HTTP/1.1 connection layer under the router: the accept loop, a cap on open connections,
//! the timeouts that keep slow or silent clients from holding the server, and HTTPS when a TLS
//! configuration is given ([`ConnectionLimits::tls`], from [`apimachinery::pki::tls_server_config`]).
//!
//! Mirrors what kube-apiserver gets from Go's `net/http.Server` as
//! `staging/src/k8s.io/apiserver/pkg/server/secure_serving.go` configures it
//! (`ReadHeaderTimeout` 32 s, which here also bounds an idle keep-alive connection), the
//! `--max-requests-inflight` answer of `pkg/server/filters/maxinflight.go` (429
//! `TooManyRequests` with `Retry-After: 1`), the request timeout of
//! `pkg/server/filters/timeout.go` (504 `Timeout`, here for a body that does not arrive) and
//! the shutdown of `genericapiserver.go` (stop accepting, drain for a bounded time, close the
//! rest). Go raises `RLIMIT_NOFILE`'s soft limit to the hard limit when a program starts; the
//! server does the same before it accepts.
//!
//! ```text
//!  accept ─┬─ EMFILE, ENFILE ─▶ close the oldest idle connection, back off 5 ms … 1 s
//!          ├─ at max_connections ─▶ close the oldest idle connection to make room, or (all
//!          │                        busy) answer 429 TooManyRequests and close
//!          └─ serve (hyper http1): a request's headers within header_read_timeout
//!                                  its body within body_read_timeout (the router: 504)
//!                                  a write the client does not take for write_stall_timeout
//!                                  (watch_end_grace once its watch has ended) closes it
//!  shutdown ─▶ stop accepting ─▶ idle connections close, requests finish, watches end
//!           ─▶ after shutdown_grace the connections still open are closed
//! ```
//!
//! "Idle" is a connection with no request in progress: a keep-alive connection between
//! requests (its client dials again), one still sending its request's headers, or one whose
//! request still waits for its body. Evicting those first keeps `/readyz` and open watches
//! served while thousands of half-sent requests hold the cap.
//!
//! With TLS, a connection's layers are, from the socket up:
//!
//! ```text
//!  TcpStream ─▶ StallGuard (write stalls, on the raw socket)
//!            ─▶ tokio_rustls server stream (handshake within header_read_timeout)
//!            ─▶ request_heads::Following (the heads, in plaintext) ─▶ TokioIo ─▶ hyper http1
//! ```
//!
//! The client's certificate chain, if it sent one, rides in every request's extensions as
//! [`PeerCertificates`] (Go's `req.TLS.PeerCertificates`), for the x509 authenticator; the
//! handshake itself accepts any certificate (`tls.RequestClientCert`). A failed or timed-out
//! handshake closes the connection (logged at debug, as Go's `http: TLS handshake error`).

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, header};
use bytes::Bytes;
use futures::task::AtomicWaker;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::request_heads;

/// Limits of the connection layer (defaults as kube-apiserver's where it has one).
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Connections open at once; `None`: the file-descriptor limit less a reserve for the
    /// store and the watches' own files.
    pub max_connections: Option<usize>,
    /// How long a client may take to send a request's headers, and how long a keep-alive
    /// connection may stay idle (kube-apiserver's `ReadHeaderTimeout`: 32 s).
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's body (kube-apiserver's request
    /// timeout: 60 s).
    pub body_read_timeout: Duration,
    /// How long a write may wait for a client that does not read before its connection is
    /// closed.
    pub write_stall_timeout: Duration,
    /// The same once the connection's watch has ended (timeout, shutdown, cut off as too
    /// slow): the stream's last bytes get this long to leave.
    pub watch_end_grace: Duration,
    /// After shutdown, how long open requests may take before their connections are closed.
    pub shutdown_grace: Duration,
    /// Serve HTTPS with this configuration (kube-apiserver's secure port; see
    /// [`apimachinery::pki::tls_server_config`]); `None`: plain HTTP. The handshake must end within
    /// `header_read_timeout`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: None,
            header_read_timeout: Duration::from_secs(32),
            body_read_timeout: Duration::from_secs(60),
            write_stall_timeout: Duration::from_secs(30),
            watch_end_grace: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(5),
            tls: None,
        }
    }
}

/// The certificate chain a TLS client presented (its certificate first), in every request's
/// extensions when it sent one: what the x509 authenticator verifies
/// ([`apimachinery::pki::verify_client_chain`]). Absent on plain HTTP and for a client without a
/// certificate.
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// File descriptors kept for the store's files and everything else that is not a connection.
const FD_RESERVE: u64 = 256;

/// Most connections the cap allows when it is derived from the file-descriptor limit.
const MAX_AUTO_CONNECTIONS: u64 = 100_000;

/// Raises `RLIMIT_NOFILE`'s soft limit to its hard limit (as Go's runtime does at start) and
/// returns the soft limit then in force.
pub fn raise_nofile_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    #[allow(unsafe_code)]
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            } else {
                tracing::debug!("cannot raise RLIMIT_NOFILE to its hard limit");
            }
        }
    }
    Some(lim.rlim_cur)
}

/// The connection cap for a soft file-descriptor limit.
fn auto_max_connections(nofile: Option<u64>) -> usize {
    let n = nofile
        .unwrap_or(1024)
        .saturating_sub(FD_RESERVE)
        .clamp(64, MAX_AUTO_CONNECTIONS);
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// One open connection, as the table and its requests see it.
pub(crate) struct Conn {
    id: u64,
    /// Requests in progress (from headers read to the response body's end).
    busy: AtomicUsize,
    /// Of those, requests still reading their body: the client owes the server, not the
    /// other way round, so the connection may be evicted.
    receiving: AtomicUsize,
    /// The connection's watch has ended: a stalled write gets only `watch_end_grace`.
    ending: AtomicBool,
    /// Wakes the connection's stalled write when `ending` is set.
    waker: AtomicWaker,
    /// Cancelled to close the connection at once.
    kill: CancellationToken,
}

impl Conn {
    /// No request in progress but ones waiting for their body.
    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) <= self.receiving.load(Ordering::Acquire)
    }
}

/// Counts a request as reading its body until dropped.
struct Receiving(Option<Arc<Conn>>);

impl Receiving {
    fn start() -> Receiving {
        let conn = CONNECTION.try_with(Arc::clone).ok();
        if let Some(c) = &conn {
            c.receiving.fetch_add(1, Ordering::AcqRel);
        }
        Receiving(conn)
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            c.receiving.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

tokio::task_local! {
    static CONNECTION: Arc<Conn>;
}

/// The connection a request arrived on, for a handler whose response outlives the handler (a
/// watch): [`ConnectionHandle::response_ended`] tells the connection the stream is over.
#[derive(Clone)]
pub struct ConnectionHandle(Arc<Conn>);

impl ConnectionHandle {
    /// The connection of the request being handled (`None` outside the connection layer, as
    /// in tests that call the router directly).
    pub fn current() -> Option<ConnectionHandle> {
        CONNECTION.try_with(|c| ConnectionHandle(c.clone())).ok()
    }

    /// The response's stream has ended: if the client is not reading it, close the
    /// connection after the watch-end grace rather than the full write-stall timeout.
    pub fn response_ended(&self) {
        self.0.ending.store(true, Ordering::Release);
        self.0.waker.wake();
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct Table {
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Conn>>>,
}

impl Table {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new connection, evicting the oldest idle one when at `cap`; `None` when
    /// at the cap with every connection busy.
    fn admit(&self, cap: usize) -> Option<Arc<Conn>> {
        let mut open = self.lock();
        if open.len() >= cap && !evict_oldest_idle(&mut open) {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            id,
            busy: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            ending: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            kill: CancellationToken::new(),
        });
        open.insert(id, conn.clone());
        Some(conn)
    }

    /// Closes the oldest idle connection (to free a file descriptor).
    fn evict_idle(&self) -> bool {
        evict_oldest_idle(&mut self.lock())
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn kill_all(&self) {
        for conn in self.lock().values() {
            conn.kill.cancel();
        }
    }
}

/// Closes the oldest connection without a request, else the oldest whose requests all wait
/// for their bodies.
fn evict_oldest_idle(open: &mut BTreeMap<u64, Arc<Conn>>) -> bool {
    let victim = open
        .values()
        .find(|c| c.busy.load(Ordering::Acquire) == 0)
        .or_else(|| open.values().find(|c| c.is_idle()))
        .map(|c| c.id);
    match victim.and_then(|id| open.remove(&id)) {
        Some(conn) => {
            conn.kill.cancel();
            true
        }
        None => false,
    }
}

/// Serves `app` on `listener` until `shutdown` is cancelled, then drains the connections for
/// at most `limits.shutdown_grace` and closes the rest.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let nofile = raise_nofile_limit();
    let cap = limits
        .max_connections
        .unwrap_or_else(|| auto_max_connections(nofile))
        .max(1);
    tracing::debug!(
        cap,
        ?nofile,
        tls = limits.tls.is_some(),
        "connection limits"
    );
    let acceptor = limits.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let table = Arc::new(Table::default());
    let tasks = TaskTracker::new();
    let mut backoff = Duration::ZERO;
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            r = listener.accept() => r,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => {
                backoff = Duration::ZERO;
                tcp
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors (or memory): free one and wait rather than spin.
                backoff = (backoff * 2).clamp(Duration::from_millis(5), Duration::from_secs(1));
                let evicted = table.evict_idle();
                tracing::warn!(error = %e, ?backoff, evicted, "cannot accept a connection");
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(backoff) => continue,
                }
            }
        };
        // Go's net/http (kube-apiserver) sets TCP_NODELAY on every connection; without it a
        // watch event written right after another waits for the client's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
        match table.admit(cap) {
            Some(conn) => {
                let (app, limits, shutdown, table) =
                    (app.clone(), limits.clone(), shutdown.clone(), table.clone());
                tasks.spawn(async move {
                    let id = conn.id;
                    serve_connection(tcp, app, conn, &limits, shutdown).await;
                    table.remove(id);
                });
            }
            None => {
                tracing::debug!(cap, "every connection busy: refusing one");
                tasks.spawn(refuse(tcp, acceptor.clone()));
            }
        }
    }
    drop(listener);
    tasks.close();
    if tokio::time::timeout(limits.shutdown_grace, tasks.wait())
        .await
        .is_err()
    {
        tracing::info!("closing the connections still open after the shutdown grace");
        table.kill_all();
        tasks.wait().await;
    }
}

/// Errors of one connection that leave the listener usable (as hyper-util's accept loop
/// treats them).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The `Status` of a connection refused at the cap (kube-apiserver's max-in-flight filter
/// answers 429 with this message and `Retry-After: 1`).
fn too_many_requests() -> Vec<u8> {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Too many requests, please try again later.",
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 1},
        "code": 429,
    })
    .to_string();
    let mut out = format!(
        "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// Answers 429 on a connection over the cap and closes it, without reading the request (after
/// the handshake with TLS: all within a second).
async fn refuse(mut tcp: TcpStream, tls: Option<tokio_rustls::TlsAcceptor>) {
    let answer = async {
        match tls {
            None => {
                tcp.write_all(&too_many_requests()).await?;
                tcp.shutdown().await
            }
            Some(acceptor) => {
                let mut tls = acceptor.accept(tcp).await?;
                tls.write_all(&too_many_requests()).await?;
                tls.shutdown().await
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}

/// Serves one connection until it ends, its client stalls, it is evicted, or shutdown (then
/// it finishes its request in progress and closes); with TLS, after the handshake.
async fn serve_connection(
    tcp: TcpStream,
    app: Router,
    conn: Arc<Conn>,
    limits: &ConnectionLimits,
    shutdown: CancellationToken,
) {
    let stall_guard = StallGuard {
        io: tcp,
        conn: conn.clone(),
        stall_timeout: limits.write_stall_timeout,
        end_grace: limits.watch_end_grace,
        stalled_since: None,
        timer: None,
    };
    let Some(config) = &limits.tls else {
        return serve_http(stall_guard, None, app, conn, limits, shutdown).await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config.clone());
    let handshake = tokio::time::timeout(limits.header_read_timeout, acceptor.accept(stall_guard));
    let tls = tokio::select! {
        r = handshake => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake error");
                return;
            }
            Err(_) => {
                tracing::debug!(timeout = ?limits.header_read_timeout, "TLS handshake timed out");
                return;
            }
        },
        () = conn.kill.cancelled() => return,
        () = shutdown.cancelled() => return,
    };
    let peer = tls
        .get_ref()
        .1
        .peer_certificates()
        .filter(|chain| !chain.is_empty())
        .map(|chain| PeerCertificates(Arc::new(chain.to_vec())));
    serve_http(tls, peer, app, conn, limits, shutdown).await;
}

/// Serves HTTP/1.1 on `io` (the socket, or the TLS stream over it), putting `peer` into every
/// request's extensions.
async fn serve_http<I>(
    io: I,
    peer: Option<PeerCertificates>,
    app: Router,
    conn: Arc<Conn>,
    limits: &ConnectionLimits,
    shutdown: CancellationToken,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let heads = Arc::new(request_heads::Shared::default());
    let io = TokioIo::new(request_heads::Following::new(io, heads.clone()));
    let for_requests = conn.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let conn = for_requests.clone();
        let app = app.clone();
        // Counted at once (not when the future first runs): the follower ends hyper's
        // stream after a refused head only when every request before it is answered.
        let long_target = heads.dispatch(req.uri().path());
        conn.busy.fetch_add(1, Ordering::AcqRel);
        conn.ending.store(false, Ordering::Release);
        let busy = Busy(conn.clone(), heads.clone());
        let peer = peer.clone();
        async move {
            let mut req = req.map(Body::new);
            if let Some(target) = long_target {
                req.extensions_mut().insert(target);
            }
            if let Some(peer) = peer {
                req.extensions_mut().insert(peer);
            }
            let resp = CONNECTION
                .scope(conn, tower::ServiceExt::oneshot(app, req))
                .await;
            resp.map(|resp| {
                resp.map(|body| Tracked {
                    inner: body,
                    _busy: busy,
                })
            })
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // The follower refuses heads past Go's limit; hyper's buffer only has to hold one.
        .max_buf_size(request_heads::MAX_HEAD_BYTES + 64 * 1024);
    // `with_upgrades`: a `101 Switching Protocols` hands the connection to `crate::connect`.
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    let served = async {
        tokio::select! {
            r = connection.as_mut() => r,
            () = shutdown.cancelled() => {
                connection.as_mut().graceful_shutdown();
                connection.as_mut().await
            }
        }
    };
    tokio::select! {
        r = served => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended");
            }
        }
        () = conn.kill.cancelled() => tracing::debug!("connection closed by the server"),
    }
}

/// Counts a request as in progress until its response body is dropped.
struct Busy(Arc<Conn>, Arc<request_heads::Shared>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
        self.1.answered();
    }
}

/// A response body that keeps its request counted as in progress.
struct Tracked {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The socket, failing a write the client has not taken for the stall timeout.
struct StallGuard {
    io: TcpStream,
    conn: Arc<Conn>,
    stall_timeout: Duration,
    end_grace: Duration,
    /// When the pending write started waiting.
    stalled_since: Option<Instant>,
    timer: Option<Pin<Box<Sleep>>>,
}

impl StallGuard {
    fn check<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled_since = None;
            return r;
        }
        self.conn.waker.register(cx.waker());
        let since = *self.stalled_since.get_or_insert_with(Instant::now);
        let limit = if self.conn.ending.load(Ordering::Acquire) {
            self.end_grace
        } else {
            self.stall_timeout
        };
        let deadline = since + limit;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.check(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.check(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.check(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The 504 of a request whose body did not arrive within the body-read timeout
/// (`apierrors.NewTimeoutError` as kube-apiserver's timeout filter sends it); the connection
/// is closed after it.
pub fn body_timeout_response() -> axum::response::Response {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Timeout: request did not complete within requested timeout - context deadline exceeded",
        "reason": "Timeout",
        "details": {},
        "code": 504,
    });
    let mut resp = crate::response::json_response(axum::http::StatusCode::GATEWAY_TIMEOUT, &status);
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Reads a request body within `limit` bytes and `timeout`: `Err` is the answer to send (413
/// too large, 504 too slow).
pub async fn read_body(
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, axum::response::Response> {
    use axum::response::IntoResponse as _;
    let _receiving = Receiving::start();
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(crate::error::ApiError::RequestEntityTooLarge { limit }.into_response()),
        Err(_) => Err(body_timeout_response()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_automatic_cap_keeps_a_reserve_of_descriptors() {
        assert_eq!(auto_max_connections(Some(20_000)), 19_744);
        assert_eq!(auto_max_connections(Some(100)), 64);
        assert_eq!(auto_max_connections(None), 768);
        assert_eq!(auto_max_connections(Some(u64::MAX)), 100_000);
    }

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room() {
        let table = Table::default();
        let busy = table.admit(2).expect("room");
        busy.busy.fetch_add(1, Ordering::AcqRel);
        let idle = table.admit(2).expect("room");
        let third = table.admit(2).expect("the idle one is evicted");
        assert!(idle.kill.is_cancelled());
        assert!(!busy.kill.is_cancelled());
        third.busy.fetch_add(1, Ordering::AcqRel);
        assert!(table.admit(2).is_none(), "every connection busy");
        // A request waiting for its body does not protect its connection, but one without a
        // request goes first.
        third.receiving.fetch_add(1, Ordering::AcqRel);
        let fourth = table.admit(2).expect("room");
        assert!(third.kill.is_cancelled());
        assert!(!busy.kill.is_cancelled());
        busy.busy.fetch_sub(1, Ordering::AcqRel);
        fourth.busy.fetch_add(1, Ordering::AcqRel);
        fourth.receiving.fetch_add(1, Ordering::AcqRel);
        assert!(table.admit(2).is_some());
        assert!(busy.kill.is_cancelled(), "the one without a request");
        assert!(!fourth.kill.is_cancelled());
    }

    mod tls {
        use std::time::SystemTime;

        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{PrivateKeyDer, ServerName};
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

        use super::*;
        use apimachinery::pki::{Ca, IssuedCert, Validity, tls_server_config, verify_client_chain};

        /// A bound on every wait of these tests: reached only when the server misbehaves.
        const BOUND: Duration = Duration::from_secs(20);

        /// The server under test: HTTPS on a loopback port, its one route answering who the
        /// client's certificate says it is (or why not, or `none`).
        struct Server {
            addr: std::net::SocketAddr,
            ca: Arc<Ca>,
            shutdown: CancellationToken,
            served: tokio::task::JoinHandle<()>,
        }

        impl Server {
            async fn start(header_read_timeout: Duration) -> Server {
                let ca = Arc::new(
                    Ca::generate_in_memory(Validity::from_now(apimachinery::pki::CA_VALIDITY))
                        .expect("a CA"),
                );
                let serving = ca
                    .issue_serving(&["127.0.0.1".to_string()], Validity::default_cert())
                    .expect("a serving certificate");
                let config =
                    tls_server_config(&serving.cert_pem, &serving.key_pem, Some(ca.cert_pem()))
                        .expect("a TLS config");
                let for_handler = ca.clone();
                let app = Router::new().route(
                    "/",
                    axum::routing::get(move |req: axum::extract::Request| async move {
                        match req.extensions().get::<PeerCertificates>() {
                            None => "none".to_string(),
                            Some(PeerCertificates(chain)) => {
                                match verify_client_chain(
                                    for_handler.cert_der(),
                                    chain,
                                    SystemTime::now(),
                                ) {
                                    Ok(id) => format!("user {}", id.common_name),
                                    Err(e) => format!("rejected: {e}"),
                                }
                            }
                        }
                    }),
                );
                let limits = ConnectionLimits {
                    header_read_timeout,
                    tls: Some(config),
                    ..ConnectionLimits::default()
                };
                let listener = TcpListener::bind("127.0.0.1:0").await.expect("bound");
                let addr = listener.local_addr().expect("an address");
                let shutdown = CancellationToken::new();
                let served = tokio::spawn(serve(listener, app, limits, shutdown.clone()));
                Server {
                    addr,
                    ca,
                    shutdown,
                    served,
                }
            }

            async fn stop(self) {
                self.shutdown.cancel();
                tokio::time::timeout(BOUND, self.served)
                    .await
                    .expect("the server stops")
                    .expect("the server task");
            }

            /// A TLS client trusting the CA, with `identity`'s certificate if given.
            fn connector(&self, identity: Option<&IssuedCert>) -> tokio_rustls::TlsConnector {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(self.ca.cert_der().clone()).expect("the CA");
                let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots);
                let mut config = match identity {
                    None => builder.with_no_client_auth(),
                    Some(issued) => {
                        let chain = rustls::pki_types::CertificateDer::pem_slice_iter(
                            issued.cert_pem.as_bytes(),
                        )
                        .collect::<Result<Vec<_>, _>>()
                        .expect("certificates");
                        let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes())
                            .expect("a key");
                        builder
                            .with_client_auth_cert(chain, key)
                            .expect("a client certificate")
                    }
                };
                config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
                tokio_rustls::TlsConnector::from(Arc::new(config))
            }

            /// `GET /` over TLS: the response's status line and body.
            async fn get(&self, identity: Option<&IssuedCert>) -> (String, String) {
                let exchange = async {
                    let tcp = TcpStream::connect(self.addr).await.expect("connected");
                    let name = ServerName::try_from("127.0.0.1").expect("a server name");
                    let mut tls = self
                        .connector(identity)
                        .connect(name, tcp)
                        .await
                        .expect("a TLS handshake");
                    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
                    tls.write_all(
                        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                    )
                    .await
                    .expect("the request sent");
                    let mut response = Vec::new();
                    tls.read_to_end(&mut response)
                        .await
                        .expect("the response, then close_notify");
                    String::from_utf8(response).expect("UTF-8")
                };
                let response = tokio::time::timeout(BOUND, exchange)
                    .await
                    .expect("answered in time");
                let (head, body) = response.split_once("\r\n\r\n").expect("a head");
                let status = head.lines().next().unwrap_or_default().to_string();
                (status, body.to_string())
            }
        }

        #[tokio::test]
        async fn a_tls_client_is_served_with_and_without_a_certificate() {
            let server = Server::start(Duration::from_secs(30)).await;
            let ok = "HTTP/1.1 200 OK".to_string();

            assert_eq!(server.get(None).await, (ok.clone(), "none".to_string()));

            let alice = server
                .ca
                .issue_client("alice", &["system:masters"], Validity::default_cert())
                .expect("issued");
            assert_eq!(
                server.get(Some(&alice)).await,
                (ok.clone(), "user alice".to_string())
            );

            // A certificate of another CA passes the handshake; the request sees it and the
            // chain check refuses it.
            let stranger = Ca::generate_in_memory(Validity::default_cert())
                .expect("a CA")
                .issue_client("mallory", &[], Validity::default_cert())
                .expect("issued");
            assert_eq!(
                server.get(Some(&stranger)).await,
                (
                    ok,
                    "rejected: x509: certificate signed by unknown authority".to_string()
                )
            );
            server.stop().await;
        }

        #[tokio::test]
        async fn a_silent_client_is_dropped_after_the_handshake_timeout() {
            let timeout = Duration::from_millis(300);
            let server = Server::start(timeout).await;
            let started = tokio::time::Instant::now();
            let mut tcp = TcpStream::connect(server.addr).await.expect("connected");
            let mut buf = [0u8; 64];
            let read = tokio::time::timeout(BOUND, tcp.read(&mut buf))
                .await
                .expect("the server closes the connection before the bound");
            assert!(
                matches!(read, Ok(0) | Err(_)),
                "closed without an answer: {read:?}"
            );
            assert!(started.elapsed() >= timeout, "{:?}", started.elapsed());
            server.stop().await;
        }

        #[tokio::test]
        async fn a_plaintext_request_on_the_tls_port_is_closed() {
            let server = Server::start(Duration::from_secs(30)).await;
            let mut tcp = TcpStream::connect(server.addr).await.expect("connected");
            tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .expect("sent");
            let mut answer = Vec::new();
            let read = tokio::time::timeout(BOUND, tcp.read_to_end(&mut answer))
                .await
                .expect("the server closes the connection");
            // At most a TLS alert (content type 21), never an HTTP answer.
            assert!(
                read.is_err() || answer.is_empty() || answer[0] == 21,
                "{answer:?}"
            );
            assert!(!answer.starts_with(b"HTTP/"));
            server.stop().await;
        }
    }
}
