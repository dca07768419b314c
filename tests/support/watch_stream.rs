//! A raw watch stream read on a thread: list, then `?watch=true&resourceVersion=<list RV>`,
//! every event handed to a callback in order, reconnecting from the last resourceVersion when
//! the server ends the watch. The tests check invariants at *every* observed state with it.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use super::http::request;

/// A watch running on a thread; stopped on drop.
pub struct WatchStream {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WatchStream {
    /// Lists `path` (a collection, e.g. `/api/v1/namespaces/default/pods`), calls
    /// `on_event("ADDED", obj)` for each item and `on_event("LISTED", null)` after the last,
    /// then streams events to `on_event`.
    pub fn start(
        addr: SocketAddr,
        path: &str,
        mut on_event: impl FnMut(&str, &Value) + Send + 'static,
    ) -> WatchStream {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let list = request(addr, "GET", path, None, b"").expect("list before watch");
        let list: Value = serde_json::from_slice(&list.body).expect("a JSON list");
        let mut rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_owned();
        for item in list["items"].as_array().into_iter().flatten() {
            on_event("ADDED", item);
        }
        on_event("LISTED", &Value::Null);
        let path = path.to_owned();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let _ = stream(addr, &path, &mut rv, &flag, &mut on_event);
            }
        });
        WatchStream {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One watch connection; returns when it ends, fails, or `stop` is set.
fn stream(
    addr: SocketAddr,
    path: &str,
    rv: &mut String,
    stop: &AtomicBool,
    on_event: &mut impl FnMut(&str, &Value),
) -> std::io::Result<()> {
    let mut tcp = TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_millis(100)))?;
    write!(
        tcp,
        "GET {path}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    )?;
    let mut reader = BufReader::new(tcp);
    let mut buf = Vec::new();
    // Skip the head; the body is chunked: "size\r\n data \r\n". Lines of the data are
    // newline-delimited JSON events, so scanning for '{' lines is enough.
    let mut line = Vec::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // Keep what was read so far of a partial line.
                buf.extend_from_slice(&line);
                continue;
            }
            Err(e) => return Err(e),
        }
        buf.extend_from_slice(&line);
        let text = String::from_utf8_lossy(&buf).trim().to_owned();
        buf.clear();
        if !text.starts_with('{') {
            continue;
        }
        let Ok(event) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        if kind == "ERROR" {
            // Expired: start again from a fresh list is not needed by these tests.
            return Ok(());
        }
        if let Some(v) = event["object"]["metadata"]["resourceVersion"].as_str() {
            *rv = v.to_owned();
        }
        if kind != "BOOKMARK" {
            on_event(&kind, &event["object"]);
        }
    }
}
