//! The read side of a connection, following HTTP/1.1 framing ahead of hyper: it finds each
//! request's head (request line and headers) on keep-alive and pipelined connections, so that
//! request targets longer than `http::Uri` holds (65,534 bytes) are served, and heads larger
//! than kube-apiserver accepts are refused with its bytes.
//!
//! Mirrors Go's `net/http` server as `staging/src/k8s.io/apiserver/pkg/server/secure_serving.go`
//! configures it (`MaxHeaderBytes: 1 << 20`): `(*conn).readRequest` reads a request line and
//! headers of up to `MaxHeaderBytes + 4096` bytes (`initialReadLimitSize`, the "bufio slop"),
//! whatever the length of the URI; past that `(*conn).serve` writes
//! `HTTP/1.1 431 Request Header Fields Too Large` with a plain-text body and closes the
//! connection (`closeWriteAndWait`).
//!
//! ```text
//!  socket ─▶ Follower ─┬─ head: target ≤ 65,534 bytes ─────────────▶ hyper, unchanged
//!                      ├─ head: longer target ─▶ placeholder target ─▶ hyper; the real one in
//!                      │                        the side table, put on the request as a
//!                      │                        [`LongTarget`] extension
//!                      ├─ body: Content-Length or chunked, passed unchanged (framing followed
//!                      │        as hyper's decoder reads it)
//!                      └─ head over 1 MiB + 4 KiB ─▶ hyper sees the connection end after the
//!                                                   requests before it are answered; then
//!                                                   Go's 431 bytes, and the connection closes
//! ```
//!
//! A head hyper will refuse (a malformed request line or header, an unknown transfer coding)
//! makes the follower stop rewriting: the bytes go to hyper as they are, hyper answers 400 and
//! closes the connection.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use futures::task::AtomicWaker;

use crate::request::LongTarget;

/// The most bytes of request line and headers Go's server reads for one request:
/// kube-apiserver's `MaxHeaderBytes` (1 MiB) plus Go's 4096 bytes of bufio slop.
pub const MAX_HEAD_BYTES: usize = (1 << 20) + 4096;

/// The longest request target `http::Uri` (and so hyper) accepts.
pub const MAX_URI_BYTES: usize = 65_534;

/// Go's answer to a head over [`MAX_HEAD_BYTES`], byte for byte (`net/http/server.go`).
pub const TOO_LARGE_RESPONSE: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large";

/// Placeholder targets start with this; a client's own target that starts with it goes
/// through the side table too, so a placeholder is never taken for a client's.
pub const PLACEHOLDER_PREFIX: &str = "/.miniplane-request-target/";

/// A target hyper refuses with 400 (not UTF-8), for a long one that `http::Uri` would refuse
/// for its characters (as hyper refuses a short one).
const INVALID_TARGET: &[u8] = b"/\xff";

/// Long targets read but not yet taken by their requests, in bytes, above which the follower
/// stops reading until hyper catches up (pipelined long requests cannot pile up).
const PENDING_CAP: usize = 2 * MAX_HEAD_BYTES;

/// What the reading side and the connection's requests share.
#[derive(Default)]
pub struct Shared {
    targets: Mutex<HashMap<String, String>>,
    pending_bytes: AtomicUsize,
    heads: AtomicU64,
    dispatched: AtomicU64,
    answered: AtomicU64,
    reader: AtomicWaker,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request arrived from hyper (its head was one the follower passed): counts it and
    /// returns the long target behind a placeholder.
    pub fn dispatch(&self, path: &str) -> Option<LongTarget> {
        self.dispatched.fetch_add(1, Ordering::AcqRel);
        let target = if path.starts_with(PLACEHOLDER_PREFIX) {
            let t = self.lock().remove(path);
            if let Some(t) = &t {
                self.pending_bytes.fetch_sub(t.len(), Ordering::AcqRel);
                self.reader.wake();
            }
            t
        } else {
            None
        };
        target.map(LongTarget::new)
    }

    /// A response has been sent in full (or dropped).
    pub fn answered(&self) {
        self.answered.fetch_add(1, Ordering::AcqRel);
        self.reader.wake();
    }

    /// Every head passed to hyper has been dispatched and answered.
    pub(crate) fn settled(&self) -> bool {
        let heads = self.heads.load(Ordering::Acquire);
        self.dispatched.load(Ordering::Acquire) >= heads
            && self.answered.load(Ordering::Acquire) >= heads
    }

    pub(crate) fn backlogged(&self) -> bool {
        self.pending_bytes.load(Ordering::Acquire) > PENDING_CAP
    }

    pub(crate) fn register_reader(&self, waker: &std::task::Waker) {
        self.reader.register(waker);
    }

    fn insert(&self, placeholder: String, target: String) {
        self.pending_bytes.fetch_add(target.len(), Ordering::AcqRel);
        self.lock().insert(placeholder, target);
    }
}

/// Where the follower is in the byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Collecting a request head.
    Head,
    /// Passing a Content-Length body: bytes left.
    Length(u64),
    /// Following a chunked body.
    Chunked(Chunk),
    /// Stopped following: bytes go to hyper unchanged.
    Passthrough,
    /// A head over the limit: nothing more goes to hyper.
    TooLarge,
}

/// hyper's chunked decoder states (`proto/h1/decode.rs` `ChunkedState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Start,
    Size(u64),
    SizeLws(u64),
    Extension(u64),
    SizeLf(u64),
    Body(u64),
    BodyCr,
    BodyLf,
    Trailer,
    TrailerLf,
    EndCr,
    EndLf,
}

/// The framing follower of one connection (no I/O: bytes in, bytes for hyper out).
pub struct Follower {
    state: State,
    head: Vec<u8>,
    /// Bytes of `head` already searched for line ends.
    scanned: usize,
    line_start: usize,
    /// Start and end (after its newline) of the request line within `head`.
    request_line: Option<(usize, usize)>,
    next_placeholder: u64,
}

/// A parsed head's framing, as hyper derives it.
enum Framing {
    Body(State),
    /// hyper refuses the head (or may take the connection over): stop following.
    Unfollowable,
}

impl Default for Follower {
    fn default() -> Self {
        Follower::new()
    }
}

impl Follower {
    /// A follower at the start of a connection.
    pub fn new() -> Follower {
        Follower {
            state: State::Head,
            head: Vec::new(),
            scanned: 0,
            line_start: 0,
            request_line: None,
            next_placeholder: 0,
        }
    }

    /// Whether a head over [`MAX_HEAD_BYTES`] was read: nothing more goes to hyper.
    pub fn too_large(&self) -> bool {
        self.state == State::TooLarge
    }

    /// Follows `input` (bytes read from the client), appending what hyper is to read to `out`
    /// and recording long targets in `shared`.
    pub fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>, shared: &Shared) {
        while !input.is_empty() {
            match self.state {
                State::Head => {
                    let before = self.head.len();
                    self.head.extend_from_slice(input);
                    match self.find_head_end() {
                        Some(end) => {
                            let used = end - before;
                            input = &input[used..];
                            self.head.truncate(end);
                            self.finish_head(out, shared);
                        }
                        None => {
                            if self.head.len() > MAX_HEAD_BYTES {
                                self.state = State::TooLarge;
                                self.head = Vec::new();
                            }
                            return;
                        }
                    }
                }
                State::Length(left) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        State::Head
                    } else {
                        State::Length(left)
                    };
                }
                State::Chunked(Chunk::Body(left)) => {
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    let left = left - n as u64;
                    self.state = State::Chunked(if left == 0 {
                        Chunk::BodyCr
                    } else {
                        Chunk::Body(left)
                    });
                }
                State::Chunked(c) => {
                    let b = input[0];
                    out.push(b);
                    input = &input[1..];
                    self.state = match chunk_step(c, b) {
                        Some(None) => State::Head,
                        Some(Some(next)) => State::Chunked(next),
                        None => State::Passthrough,
                    };
                }
                State::Passthrough => {
                    out.extend_from_slice(input);
                    return;
                }
                State::TooLarge => return,
            }
        }
    }

    /// The end (after the blank line) of the head in `head`, if it is there within the
    /// limit; scans each byte once however the head arrives.
    fn find_head_end(&mut self) -> Option<usize> {
        let limit = self.head.len().min(MAX_HEAD_BYTES);
        while self.scanned < limit {
            let from = self.scanned;
            let Some(off) = self.head[from..limit].iter().position(|&b| b == b'\n') else {
                self.scanned = limit;
                return None;
            };
            let nl = from + off;
            self.scanned = nl + 1;
            let start = self.line_start;
            let line = &self.head[start..nl];
            let blank = line.is_empty() || line == b"\r";
            self.line_start = nl + 1;
            match self.request_line {
                // httparse skips empty lines before the request line.
                None if blank => {}
                None => self.request_line = Some((start, nl + 1)),
                Some(_) if blank => return Some(nl + 1),
                Some(_) => {}
            }
        }
        None
    }

    /// Passes the complete head in `head` to `out` (its target replaced if long) and moves to
    /// its body.
    fn finish_head(&mut self, out: &mut Vec<u8>, shared: &Shared) {
        let head = std::mem::take(&mut self.head);
        let (rl_start, rl_end) = self.request_line.take().unwrap_or((0, 0));
        self.scanned = 0;
        self.line_start = 0;
        let Some(line) = RequestLine::parse(&head[rl_start..rl_end]) else {
            out.extend_from_slice(&head);
            self.state = State::Passthrough;
            return;
        };
        let framing = framing(&line, &head[rl_end..]);
        let state = match framing {
            Framing::Body(s) => s,
            Framing::Unfollowable => State::Passthrough,
        };
        out.extend_from_slice(&head[..rl_start]);
        let target = line.target;
        let rewrite =
            target.len() > MAX_URI_BYTES || target.starts_with(PLACEHOLDER_PREFIX.as_bytes());
        if rewrite && state != State::Passthrough {
            out.extend_from_slice(line.method);
            out.push(b' ');
            let origin = target.first() == Some(&b'/');
            match std::str::from_utf8(target) {
                Ok(t) if origin && http_accepts(t) => {
                    let placeholder = format!("{PLACEHOLDER_PREFIX}{}", self.next_placeholder);
                    self.next_placeholder += 1;
                    let stored = t.split('#').next().unwrap_or_default();
                    out.extend_from_slice(placeholder.as_bytes());
                    shared.insert(placeholder, stored.to_owned());
                }
                _ if origin => out.extend_from_slice(INVALID_TARGET),
                // absolute-form and the rest: left to hyper (414 when too long).
                _ => out.extend_from_slice(target),
            }
            out.push(b' ');
            out.extend_from_slice(line.rest);
        } else {
            out.extend_from_slice(&head[rl_start..rl_end]);
        }
        out.extend_from_slice(&head[rl_end..]);
        shared.heads.fetch_add(1, Ordering::AcqRel);
        self.state = state;
        // Keep a large head's buffer from staying allocated.
        if head.capacity() <= 4 * 1024 {
            let mut head = head;
            head.clear();
            self.head = head;
        }
    }
}

/// A request line as httparse reads it (one space between its parts).
struct RequestLine<'a> {
    method: &'a [u8],
    target: &'a [u8],
    http_11: bool,
    /// The version and the line end, as received.
    rest: &'a [u8],
}

impl<'a> RequestLine<'a> {
    fn parse(line: &'a [u8]) -> Option<RequestLine<'a>> {
        let sp = line.iter().position(|&b| b == b' ')?;
        let method = &line[..sp];
        let after = &line[sp + 1..];
        let sp2 = after.iter().position(|&b| b == b' ')?;
        let target = &after[..sp2];
        let rest = &after[sp2 + 1..];
        if method.is_empty() || !method.iter().all(|&b| is_token(b)) {
            return None;
        }
        if target.is_empty() || !target.iter().all(|&b| matches!(b, b'!'..=0x7e | 0x80..)) {
            return None;
        }
        let version = rest
            .strip_suffix(b"\n")
            .map(|v| v.strip_suffix(b"\r").unwrap_or(v))?;
        let http_11 = match version {
            b"HTTP/1.1" => true,
            b"HTTP/1.0" => false,
            _ => return None,
        };
        Some(RequestLine {
            method,
            target,
            http_11,
            rest,
        })
    }
}

/// httparse's header-name token characters.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// Whether `http::Uri` accepts an origin-form target of any length: its characters checked in
/// pieces short enough for `PathAndQuery` (the path's and the query's own rules).
fn http_accepts(target: &str) -> bool {
    const PIECE: usize = 60_000;
    let target = target.split('#').next().unwrap_or_default();
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let check = |s: &str, lead: &str| {
        let mut rest = s;
        while !rest.is_empty() {
            let mut cut = rest.len().min(PIECE);
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            let piece = format!("{lead}{}", &rest[..cut]);
            if axum::http::uri::PathAndQuery::try_from(piece.as_str()).is_err() {
                return false;
            }
            rest = &rest[cut..];
        }
        true
    };
    check(path, "/") && query.is_none_or(|q| check(q, "/?"))
}

/// The body framing hyper derives from a head (`proto/h1/role.rs` `Server::parse`), or
/// [`Framing::Unfollowable`] where hyper refuses the head or may hand the connection over.
fn framing(line: &RequestLine<'_>, headers: &[u8]) -> Framing {
    if line.method == b"CONNECT" {
        return Framing::Unfollowable;
    }
    let mut length: Option<u64> = None;
    let mut is_cl = false;
    let mut is_te = false;
    let mut chunked = false;
    for raw in headers.split(|&b| b == b'\n') {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.is_empty() {
            continue;
        }
        let Some(colon) = raw.iter().position(|&b| b == b':') else {
            return Framing::Unfollowable;
        };
        let name = &raw[..colon];
        if name.is_empty() || !name.iter().all(|&b| is_token(b)) {
            return Framing::Unfollowable;
        }
        let value = trim(&raw[colon + 1..]);
        if !value
            .iter()
            .all(|&b| b == b'\t' || matches!(b, b' '..=0x7e | 0x80..))
        {
            return Framing::Unfollowable;
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if !line.http_11 {
                return Framing::Unfollowable;
            }
            is_te = true;
            if is_cl {
                length = None;
            }
            chunked = std::str::from_utf8(value)
                .ok()
                .filter(|s| s.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)))
                .and_then(|s| s.rsplit(',').next())
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("chunked"));
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            // hyper hands the connection over after a `101 Switching Protocols`
            // (`crate::connect`): what follows is no longer HTTP.
            return Framing::Unfollowable;
        } else if name.eq_ignore_ascii_case(b"content-length") {
            is_cl = true;
            if is_te {
                continue;
            }
            let Some(n) = digits(value) else {
                return Framing::Unfollowable;
            };
            match length {
                Some(prev) if prev != n => return Framing::Unfollowable,
                _ => length = Some(n),
            }
        }
    }
    if is_te && !chunked {
        return Framing::Unfollowable;
    }
    Framing::Body(if is_te {
        State::Chunked(Chunk::Start)
    } else {
        match length {
            Some(n) if n > 0 => State::Length(n),
            _ => State::Head,
        }
    })
}

/// A header value without the whitespace httparse trims.
fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |p| p + 1);
    &v[start..end.max(start)]
}

/// hyper's `Content-Length` digits (no sign, no space).
fn digits(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |acc, &b| match b {
        b'0'..=b'9' => acc.checked_mul(10)?.checked_add(u64::from(b - b'0')),
        _ => None,
    })
}

/// One byte of chunked framing: the next state, `Some(None)` at the body's end, `None` where
/// hyper's decoder fails.
fn chunk_step(c: Chunk, b: u8) -> Option<Option<Chunk>> {
    let hex = |b: u8| match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    };
    let grow = |size: u64, d: u64| size.checked_mul(16)?.checked_add(d);
    Some(Some(match c {
        Chunk::Start => Chunk::Size(grow(0, hex(b)?)?),
        Chunk::Size(size) => match b {
            b'\t' | b' ' => Chunk::SizeLws(size),
            b';' => Chunk::Extension(size),
            b'\r' => Chunk::SizeLf(size),
            _ => Chunk::Size(grow(size, hex(b)?)?),
        },
        Chunk::SizeLws(size) => match b {
            b'\t' | b' ' => Chunk::SizeLws(size),
            b';' => Chunk::Extension(size),
            b'\r' => Chunk::SizeLf(size),
            _ => return None,
        },
        Chunk::Extension(size) => match b {
            b'\r' => Chunk::SizeLf(size),
            b'\n' => return None,
            _ => Chunk::Extension(size),
        },
        Chunk::SizeLf(size) => match b {
            b'\n' if size == 0 => Chunk::EndCr,
            b'\n' => Chunk::Body(size),
            _ => return None,
        },
        // Body bytes are passed in bulk by the caller.
        Chunk::Body(_) => return None,
        Chunk::BodyCr => match b {
            b'\r' => Chunk::BodyLf,
            _ => return None,
        },
        Chunk::BodyLf => match b {
            b'\n' => Chunk::Start,
            _ => return None,
        },
        Chunk::Trailer => match b {
            b'\r' => Chunk::TrailerLf,
            _ => Chunk::Trailer,
        },
        Chunk::TrailerLf => match b {
            b'\n' => Chunk::EndCr,
            _ => return None,
        },
        Chunk::EndCr => match b {
            b'\r' => Chunk::EndLf,
            _ => Chunk::Trailer,
        },
        Chunk::EndLf => match b {
            b'\n' => return Some(None),
            _ => return None,
        },
    }))
}

mod io;

pub use io::Following;

#[cfg(test)]
mod tests;
