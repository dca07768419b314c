//! A raw HTTP/1.1 client over `std::net::TcpStream`, for requests no well-behaved client would
//! send (wrong content types, malformed bodies, 3 MiB bodies) and for reading watch streams
//! line by line. One request per connection (`Connection: close`); chunked bodies are decoded.

use super::Server;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a raw request may wait for the server.
const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// A response read in full.
#[derive(Debug)]
pub struct HttpResponse {
    /// HTTP status code.
    pub status: u16,
    /// Header names are lower-cased.
    pub headers: Vec<(String, String)>,
    /// The (de-chunked) body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics (showing the body) when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }

    /// Checks the response is `201 Created` and returns the object.
    pub fn expect_created(&self) -> serde_json::Value {
        assert_eq!(self.status, 201, "expected 201 Created: {}", self.text());
        self.json()
    }

    /// Checks the response is a Kubernetes `Status` failure with `code` and `reason`, and
    /// returns its message.
    pub fn expect_status(&self, code: u16, reason: &str) -> String {
        assert_eq!(self.status, code, "HTTP status; body: {}", self.text());
        let status = self.json();
        assert_eq!(status["kind"], "Status", "a Status body: {status}");
        assert_eq!(status["status"], "Failure", "{status}");
        assert_eq!(status["reason"], reason, "{status}");
        assert_eq!(status["code"], code, "{status}");
        status["message"].as_str().unwrap_or_default().to_owned()
    }
}

impl HttpResponse {
    /// Checks the response is 422 Invalid about `field` of `kind` `name` (details as
    /// `errors.NewInvalid` builds them) and returns the message.
    pub fn expect_invalid(&self, kind: &str, name: &str, field: &str) -> String {
        let msg = self.expect_status(422, "Invalid");
        let status = self.json();
        let details = &status["details"];
        assert_eq!(details["kind"], kind, "{status}");
        assert_eq!(details["name"], name, "{status}");
        assert_eq!(details["causes"][0]["field"], field, "{status}");
        assert_eq!(
            details["causes"][0]["reason"], "FieldValueInvalid",
            "{status}"
        );
        msg
    }
}

/// `GET path` on `addr` from async code (the client is blocking).
pub async fn get_async(addr: SocketAddr, path: String) -> HttpResponse {
    tokio::task::spawn_blocking(move || request(addr, "GET", &path, None, b"").unwrap())
        .await
        .unwrap()
}

impl Server {
    /// Sends one request. `content_type` `None` sends no Content-Type header.
    pub fn http(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> HttpResponse {
        request(self.addr, method, path, content_type, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// `GET path` with `Accept: application/json`.
    pub fn get(&self, path: &str) -> HttpResponse {
        self.http("GET", path, None, b"")
    }

    /// Sends `body` as JSON with `method`.
    pub fn send_json(&self, method: &str, path: &str, body: &serde_json::Value) -> HttpResponse {
        self.http(
            method,
            path,
            Some("application/json"),
            body.to_string().as_bytes(),
        )
    }

    /// Opens a watch (`path` must carry `watch=1`) and reads events until `count` arrived, the
    /// server closed the stream, or `timeout` passed.
    pub fn watch_events(
        &self,
        path: &str,
        count: usize,
        timeout: Duration,
    ) -> (u16, Vec<serde_json::Value>) {
        watch(self.addr, path, count, timeout).unwrap_or_else(|e| panic!("watch {path}: {e}"))
    }
}

fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

fn write_request(
    stream: &mut TcpStream,
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nUser-Agent: miniplane-e2e\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    // A server may answer (413) and close before reading a large body; that is not an error
    // of the request as long as a response can be read.
    let _ = stream.write_all(body);
    stream.flush()
}

/// Reads the status line and headers.
fn read_head(reader: &mut impl BufRead) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    Ok((status, headers))
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"))
}

/// Reads the next chunk of a chunked body; `None` at the last (empty) chunk.
fn read_chunk(reader: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut size = String::new();
    if reader.read_line(&mut size)? == 0 {
        return Ok(None);
    }
    let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
        .map_err(|e| std::io::Error::other(format!("bad chunk size {size:?}: {e}")))?;
    if size == 0 {
        return Ok(None);
    }
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk)?;
    chunk.truncate(size);
    Ok(Some(chunk))
}

/// Sends one request to `addr` (see [`Server::http`]).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> std::io::Result<HttpResponse> {
    let mut stream = connect(addr, IO_TIMEOUT)?;
    write_request(&mut stream, addr, method, path, content_type, body)?;
    read_response(stream)
}

/// Sends a request whose head (request line and headers, each ending in CRLF, without the
/// blank line) is written as given, for headers the other helpers set themselves (`Host`).
pub fn request_raw(addr: SocketAddr, head: &str, body: &[u8]) -> std::io::Result<HttpResponse> {
    let mut stream = connect(addr, IO_TIMEOUT)?;
    stream.write_all(head.as_bytes())?;
    stream.write_all(b"\r\n")?;
    let _ = stream.write_all(body);
    stream.flush()?;
    read_response(stream)
}

/// Reads one response in full.
fn read_response(stream: TcpStream) -> std::io::Result<HttpResponse> {
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader)?;
    let mut body = Vec::new();
    if is_chunked(&headers) {
        while let Some(chunk) = read_chunk(&mut reader)? {
            body.extend(chunk);
        }
    } else if let Some(len) = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Opens a watch on `addr` (see [`Server::watch_events`]).
pub fn watch(
    addr: SocketAddr,
    path: &str,
    count: usize,
    timeout: Duration,
) -> std::io::Result<(u16, Vec<serde_json::Value>)> {
    watch_with(addr, path, count, timeout, |_| {})
}

/// [`watch`], calling `on_event` with each event as it arrives (to act while the watch is
/// open).
pub fn watch_with(
    addr: SocketAddr,
    path: &str,
    count: usize,
    timeout: Duration,
    mut on_event: impl FnMut(&serde_json::Value),
) -> std::io::Result<(u16, Vec<serde_json::Value>)> {
    let deadline = Instant::now() + timeout;
    let mut stream = connect(addr, timeout)?;
    write_request(&mut stream, addr, "GET", path, None, b"")?;
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader)?;
    let chunked = is_chunked(&headers);
    let mut pending = Vec::new();
    let mut events = Vec::new();
    while events.len() < count && Instant::now() < deadline {
        let data = if chunked {
            match read_chunk(&mut reader) {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break;
                }
                Err(e) => return Err(e),
            }
        } else {
            let mut buf = vec![0; 64 * 1024];
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => buf[..n].to_vec(),
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    break;
                }
                Err(e) => return Err(e),
            }
        };
        pending.extend(data);
        while let Some(pos) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event = serde_json::from_slice(&line).map_err(|e| {
                std::io::Error::other(format!(
                    "bad watch line ({e}): {}",
                    String::from_utf8_lossy(&line)
                ))
            })?;
            on_event(&event);
            events.push(event);
        }
    }
    // A non-200 answer carries a Status body instead of events.
    if status != 200
        && !pending.is_empty()
        && let Ok(v) = serde_json::from_slice(&pending)
    {
        events.push(v);
    }
    Ok((status, events))
}
