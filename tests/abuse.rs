//! The abuse part of the robustness suite: clients that hold connections without finishing a
//! request, watchers that never read, thousands of watchers, bodies too large or too deep.
//! Throughout, the server answers `/readyz`, keeps delivering to the watchers that read, and
//! its resident memory (from `/proc/<pid>/status`) stays under a stated bound; afterwards the
//! connections it was made to hold are closed.
//!
//! The counts are small enough for CI; set the environment variables below for a longer run
//! (figures and the command in docs/reliability.md, "Abuse"):
//!
//! ```text
//!   MINIPLANE_ABUSE_WATCHERS      watchers that read        (default 1000)
//!   MINIPLANE_ABUSE_SLOW_LORIS    half-sent request heads   (default 500)
//!   MINIPLANE_ABUSE_HALF_OPEN     silent connections and half-sent bodies (default 500)
//!   MINIPLANE_ABUSE_NON_READING   watchers that never read  (default 20)
//! ```
// Helpers outside #[test] fns unwrap too: a failed step is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{self, DEADLINE, Server, eventually};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpSocket, TcpStream};

/// Where the floods of large events go (the watchers that do not read watch it).
const NAMESPACE: &str = "default";

/// Where the watchers that read watch (small events: the server's work stays modest).
const READERS_NAMESPACE: &str = "abuse";

fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Open file descriptors of a process (its sockets among them).
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The sockets process `pid` holds: its listener and its connections. Unlike
/// [`open_files`], this does not move with the store's own files (a WAL segment or a
/// checkpoint opened while the storm writes).
fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    })
}

/// Waits until process `pid` holds at most `most` sockets; on timeout the message says how
/// many it still held.
fn sockets_at_most(what: &str, pid: u32, most: usize) {
    let start = Instant::now();
    loop {
        let held = open_sockets(pid);
        if held <= most {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out waiting for {what}: the server holds {held} sockets, at most {most} expected"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Connections waiting in the kernel to be accepted on `addr`'s listening socket (the
/// `rx_queue` of its LISTEN row in `/proc/net/tcp`).
fn accept_backlog(addr: SocketAddr) -> usize {
    let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!(":{:04X}", addr.port());
    tcp.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 4 && f[1].ends_with(&local) && f[3] == "0A")
        .and_then(|f| f[4].split(':').nth(1).map(str::to_string))
        .and_then(|rx| usize::from_str_radix(&rx, 16).ok())
        .unwrap_or(0)
}

/// Samples a process's resident memory until dropped, keeping the largest value.
struct MemoryWatch {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl MemoryWatch {
    fn start(pid: u32) -> MemoryWatch {
        let peak = Arc::new(AtomicU64::new(rss(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        MemoryWatch { peak, stop }
    }

    fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for MemoryWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

/// A connection whose receive buffer is as small as the kernel allows, so a client that does
/// not read stalls the server's writes after a few KiB.
async fn connect_small(addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(addr).await.unwrap()
}

fn watch_head(addr: SocketAddr, namespace: &str, query: &str) -> String {
    format!(
        "GET /api/v1/namespaces/{namespace}/configmaps?watch=1{query} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\r\n"
    )
}

/// Opens a watch and reads its response head.
async fn open_watch(addr: SocketAddr, namespace: &str) -> BufReader<TcpStream> {
    let mut tcp = connect(addr).await;
    tcp.write_all(watch_head(addr, namespace, "").as_bytes())
        .await
        .unwrap();
    let mut reader = BufReader::new(tcp);
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "watch answered {line:?}");
    loop {
        line.clear();
        reader.read_line(&mut line).await.unwrap();
        if line == "\r\n" || line.is_empty() {
            return reader;
        }
    }
}

/// Reads a watch's chunks, counting the events in `seen`, until the stream ends.
async fn read_events(mut reader: BufReader<TcpStream>, seen: Arc<AtomicUsize>) {
    let mut size = String::new();
    loop {
        size.clear();
        if reader.read_line(&mut size).await.unwrap_or(0) == 0 {
            return;
        }
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return;
        };
        if n == 0 {
            return;
        }
        let mut chunk = vec![0; n + 2];
        if reader.read_exact(&mut chunk).await.is_err() {
            return;
        }
        let events = chunk[..n].iter().filter(|b| **b == b'\n').count();
        seen.fetch_add(events, Ordering::Relaxed);
    }
}

/// Waits (polling) until the server has closed `tcp`: a read returns end of file or an error.
async fn closed_by_server(tcp: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// `GET /readyz` on a new connection.
fn readyz_response(addr: SocketAddr) -> support::HttpResponse {
    support::http::request(addr, "GET", "/readyz", None, b"").unwrap()
}

/// `GET /readyz` on a new connection: the status code, or 0 when the connection failed.
fn readyz(addr: SocketAddr) -> u16 {
    match support::http::request(addr, "GET", "/readyz", None, b"") {
        Ok(r) => r.status,
        Err(e) => {
            eprintln!("GET /readyz: {e}");
            0
        }
    }
}

fn big_configmap(name: &str, size: usize, generation: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"blob": format!("{generation}{}", "x".repeat(size))},
    })
}

/// Writes `rounds` versions of a 512 KiB ConfigMap: megabytes of watch events.
fn flood(s: &Server, name: &str, rounds: usize) {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    s.send_json("POST", &path, &big_configmap(name, 512 * 1024, 0))
        .expect_created();
    for i in 1..=rounds {
        let body = big_configmap(name, 512 * 1024, i).to_string();
        // Amid a storm the server's connection cap may be full of requests whose stalled
        // bodies have not timed out yet: a new connection then gets 429 and is closed, which
        // resets the sending of a large body. A client retries that, as this one does.
        let mut tries = 0;
        let resp = loop {
            tries += 1;
            let sent = support::http::request(
                s.addr,
                "PUT",
                &format!("{path}/{name}"),
                Some("application/json"),
                body.as_bytes(),
            );
            match sent {
                Ok(resp) if resp.status != 429 || tries >= 40 => break resp,
                Err(e) if tries >= 40 => panic!("PUT {path}/{name}: {e} after {tries} tries"),
                _ => std::thread::sleep(Duration::from_millis(250)),
            }
        };
        assert_eq!(resp.status, 200, "{}", resp.text());
    }
}

/// A watch with `timeoutSeconds=3` whose client stops reading while megabytes of events are
/// due: the watch ends at its timeout and its connection is closed soon after (the watch-end
/// grace), long before the write-stall timeout (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_is_not_read_is_closed_after_its_timeout() {
    let s = Server::start();
    let pid = s.pid();
    let before = open_files(pid);
    let mut stuck = Vec::new();
    for _ in 0..3 {
        let mut tcp = connect_small(s.addr).await;
        tcp.write_all(watch_head(s.addr, NAMESPACE, "&timeoutSeconds=3").as_bytes())
            .await
            .unwrap();
        stuck.push(tcp);
    }
    let opened = Instant::now();
    let server = tokio::task::block_in_place(|| {
        eventually("the watches open", DEADLINE, || {
            (open_files(pid) >= before + 3).then_some(())
        });
        flood(&s, "flood", 16);
        s
    });
    let closed = tokio::task::block_in_place(|| {
        eventually(
            "the server closes the connections of the unread watches",
            Duration::from_secs(20),
            || (open_files(pid) <= before).then_some(opened.elapsed()),
        )
    });
    assert!(closed < Duration::from_secs(20), "closed after {closed:?}");
    drop(stuck);
    drop(server);
}

/// SIGTERM while a watcher does not read: the server still exits on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_server_while_a_watcher_does_not_read() {
    let mut s = Server::start();
    let pid = s.pid();
    let before = open_files(pid);
    let mut tcp = connect_small(s.addr).await;
    tcp.write_all(watch_head(s.addr, NAMESPACE, "").as_bytes())
        .await
        .unwrap();
    tokio::task::block_in_place(|| {
        eventually("the watch opens", DEADLINE, || {
            (open_files(pid) > before).then_some(())
        });
        flood(&s, "flood", 16);
        assert!(s.stop(), "the server did not exit within 10 s of SIGTERM");
    });
    drop(tcp);
}

/// At the cap with every connection busy (watches), a new connection gets 429 with a
/// `Status` and is closed; a request whose body stops coming gets 504 and is closed; once a
/// watch ends, there is room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_answers_429_and_a_stalled_body_504() {
    let s = Server::start_with(&["--max-connections", "3", "--body-read-timeout", "1s"]);
    let addr = s.addr;
    let mut watches = Vec::new();
    for _ in 0..2 {
        watches.push(open_watch(addr, NAMESPACE).await);
    }
    // The third connection: a request whose body never comes.
    let mut stalled = connect(addr).await;
    let head = format!(
        "POST /api/v1/namespaces/{NAMESPACE}/configmaps HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stalled.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(answer.contains("\"reason\":\"Timeout\""), "{answer}");
    assert!(
        answer.contains(
            "Timeout: request did not complete within requested timeout - context deadline exceeded"
        ),
        "{answer}"
    );
    // A third watch fills the cap with busy connections.
    watches.push(open_watch(addr, NAMESPACE).await);
    let refused = tokio::task::block_in_place(|| readyz_response(addr));
    assert_eq!(refused.header("retry-after"), Some("1"));
    let msg = refused.expect_status(429, "TooManyRequests");
    assert_eq!(msg, "Too many requests, please try again later.");
    // A watch that ends frees its place.
    drop(watches.pop());
    tokio::task::block_in_place(|| {
        eventually("/readyz once a watch has gone", DEADLINE, || {
            (readyz(addr) == 200).then_some(())
        });
    });
    drop(s);
}

/// The whole storm at once (counts from the environment, see the module docs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_watches_are_served_through_slow_loris_half_open_and_many_watchers() {
    let watchers = count("MINIPLANE_ABUSE_WATCHERS", 1000);
    let slow_loris = count("MINIPLANE_ABUSE_SLOW_LORIS", 500);
    let half_open = count("MINIPLANE_ABUSE_HALF_OPEN", 500);
    let non_reading = count("MINIPLANE_ABUSE_NON_READING", 20);
    // Room for the watchers and a little more: the idle connections must be evicted to serve
    // /readyz.
    let cap = watchers + non_reading + 100;
    // This process holds every client connection.
    apiserver::raise_nofile_limit();
    let cap_flag = cap.to_string();
    let s = Server::start_with(&[
        "--max-connections",
        &cap_flag,
        "--header-read-timeout",
        "3s",
        "--body-read-timeout",
        "3s",
    ]);
    let (addr, pid) = (s.addr, s.pid());
    let idle_files = open_files(pid);
    let idle_sockets = open_sockets(pid);
    let idle_rss = rss(pid);
    let memory = MemoryWatch::start(pid);
    tokio::task::block_in_place(|| {
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": READERS_NAMESPACE}});
        s.send_json("POST", "/api/v1/namespaces", &ns)
            .expect_created();
    });

    // Watchers that read.
    let seen = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for _ in 0..watchers {
        let reader = open_watch(addr, READERS_NAMESPACE).await;
        readers.push(tokio::spawn(read_events(reader, seen.clone())));
    }
    // Watchers that never read.
    let mut unread = Vec::new();
    for _ in 0..non_reading {
        let mut tcp = connect_small(addr).await;
        tcp.write_all(watch_head(addr, NAMESPACE, "").as_bytes())
            .await
            .unwrap();
        unread.push(tcp);
    }
    // Slow loris: a request head that never ends, one header line every 500 ms.
    let connected = Arc::new(AtomicUsize::new(0));
    let loris_closed = Arc::new(AtomicUsize::new(0));
    let mut holders = Vec::new();
    for i in 0..slow_loris {
        let (closed, connected) = (loris_closed.clone(), connected.clone());
        holders.push(tokio::spawn(async move {
            let result = TcpStream::connect(addr).await;
            connected.fetch_add(1, Ordering::Relaxed);
            let Ok(mut tcp) = result else {
                closed.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let head = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\n");
            if tcp.write_all(head.as_bytes()).await.is_ok() {
                let mut buf = [0u8; 1024];
                loop {
                    tokio::select! {
                        r = tcp.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { break },
                        () = tokio::time::sleep(Duration::from_millis(500)) => {
                            if tcp.write_all(format!("X-Loris-{i}: 1\r\n").as_bytes()).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
            closed.fetch_add(1, Ordering::Relaxed);
        }));
    }
    // Half open: connections that send nothing, and requests whose body never arrives. A
    // silent connection the kernel completed while the listen queue was full never reaches
    // the server (nor is ever closed by it): those are checked from the server's side.
    let stalled_bodies = half_open / 2;
    let bodies_closed = Arc::new(AtomicUsize::new(0));
    for i in 0..half_open {
        let (closed, connected) = (bodies_closed.clone(), connected.clone());
        holders.push(tokio::spawn(async move {
            let result = TcpStream::connect(addr).await;
            connected.fetch_add(1, Ordering::Relaxed);
            let Ok(mut tcp) = result else {
                if i % 2 == 1 {
                    closed.fetch_add(1, Ordering::Relaxed);
                }
                return;
            };
            if i % 2 == 1 {
                let head = format!(
                    "POST /api/v1/namespaces/{NAMESPACE}/configmaps HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"kind\":"
                );
                let _ = tcp.write_all(head.as_bytes()).await;
            }
            closed_by_server(&mut tcp).await;
            if i % 2 == 1 {
                closed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    tokio::task::block_in_place(|| {
        eventually("every attacker has connected", DEADLINE, || {
            (connected.load(Ordering::Relaxed) >= slow_loris + half_open).then_some(())
        });
        // ... and the server has taken them all from its listen queue: a connection accepted
        // amid a burst larger than the free places can be evicted before it sends a byte.
        eventually("the server has accepted every connection", DEADLINE, || {
            (accept_backlog(addr) == 0).then_some(())
        });
        // While the storm holds the server: /readyz, an event to every reading watcher, the
        // bodies too large or too deep.
        for _ in 0..5 {
            assert_eq!(readyz(addr), 200, "/readyz during the storm");
        }
        let path = format!("/api/v1/namespaces/{READERS_NAMESPACE}/configmaps");
        let small = |name: &str| serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
        s.send_json("POST", &path, &small("before-the-flood"))
            .expect_created();
        eventually("every reading watcher sees the ADDED", DEADLINE, || {
            (seen.load(Ordering::Relaxed) >= watchers).then_some(())
        });
        // Megabytes for the watchers that do not read: the others are not held up.
        flood(&s, "flood", 8);
        s.send_json("POST", &path, &small("after-the-flood"))
            .expect_created();
        eventually(
            "every reading watcher sees the next ADDED",
            DEADLINE,
            || (seen.load(Ordering::Relaxed) >= watchers * 2).then_some(()),
        );
        bad_bodies(&s);
        assert_eq!(readyz(addr), 200, "/readyz after the bad bodies");

        // The server closes what it was made to hold: heads and bodies that never end.
        eventually("the slow-loris connections are closed", DEADLINE, || {
            (loris_closed.load(Ordering::Relaxed) >= slow_loris).then_some(())
        });
        eventually(
            "the requests whose bodies never came are closed",
            DEADLINE,
            || (bodies_closed.load(Ordering::Relaxed) >= stalled_bodies).then_some(()),
        );
        // What the server still holds: the watchers' connections (those that did not read
        // are cut off by the watch cache once the flood filled their buffers).
        sockets_at_most(
            "the server holds no half-open connection",
            pid,
            idle_sockets + watchers + non_reading + 5,
        );
        assert_eq!(readyz(addr), 200, "/readyz after the storm");
    });
    let peak = memory.peak();
    drop(memory);
    let connections = watchers + slow_loris + half_open + non_reading;
    let bound = 256 * 1024 * 1024 + connections as u64 * 64 * 1024;
    eprintln!(
        "abuse: {watchers} watchers, {slow_loris} slow loris, {half_open} half open, {non_reading} not reading; server RSS idle {} MiB, peak {} MiB (bound {} MiB); open files idle {idle_files}",
        idle_rss >> 20,
        peak >> 20,
        bound >> 20
    );
    assert!(
        peak < bound,
        "peak RSS {} MiB over the bound {} MiB",
        peak >> 20,
        bound >> 20
    );

    // Once the clients go, so do their files.
    drop(unread);
    for r in readers {
        r.abort();
    }
    for h in holders {
        h.abort();
    }
    tokio::task::block_in_place(|| {
        sockets_at_most(
            "the server's connections back to idle",
            pid,
            idle_sockets + 5,
        );
        drop(s);
    });
}

/// Bodies over the 3 MiB limit (declared or streamed) and nested deeper than any object:
/// 4xx answers, the server stays up.
fn bad_bodies(s: &Server) {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let big = vec![b' '; 4 * 1024 * 1024];
    let resp = s.http("POST", &path, Some("application/json"), &big);
    resp.expect_status(413, "RequestEntityTooLarge");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n",
        s.addr
    );
    let mut chunked = Vec::new();
    for _ in 0..5 {
        chunked.extend_from_slice(format!("{:x}\r\n", 1024 * 1024).as_bytes());
        chunked.extend(std::iter::repeat_n(b' ', 1024 * 1024));
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let resp = support::http::request_raw(s.addr, &head, &chunked).unwrap();
    resp.expect_status(413, "RequestEntityTooLarge");
    let depth = 1_000_000;
    let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let resp = s.http("POST", &path, Some("application/json"), json.as_bytes());
    assert!(
        (400..500).contains(&resp.status),
        "deep JSON: {}",
        resp.status
    );
    let yaml = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let resp = s.http("POST", &path, Some("application/yaml"), yaml.as_bytes());
    assert!(
        (400..500).contains(&resp.status),
        "deep YAML: {}",
        resp.status
    );
    let yaml = format!("{}1{}", "{a: ".repeat(300_000), "}".repeat(300_000));
    let resp = s.http("POST", &path, Some("application/yaml"), yaml.as_bytes());
    assert!(
        (400..500).contains(&resp.status),
        "deep YAML mapping: {}",
        resp.status
    );
    let resp = s.http(
        "POST",
        &path,
        Some("application/yaml"),
        "- ".repeat(100_000).as_bytes(),
    );
    assert!(
        (400..500).contains(&resp.status),
        "deep YAML block: {}",
        resp.status
    );
}
