//! Which requests the server answers at all, before any handler: the `Host` must be one of the
//! server's names and a browser's `Origin` the server's own or one allowed by
//! `--cors-allowed-origins`. This is what keeps web pages out while the server has no
//! authentication: a page on another origin cannot write (its `Origin` is refused) and a
//! DNS-rebinding page cannot read (its `Host` is its own domain name).
//!
//! Mirrors kube-apiserver's `WithCORS` filter (`staging/src/k8s.io/apiserver/pkg/server/
//! filters/cors.go`, `--cors-allowed-origins`: regular expressions, the headers below on an
//! allowed origin, 204 to its preflight). Unlike kube-apiserver, which lets a request with an
//! unlisted origin through without CORS headers and relies on authentication, a request with
//! a foreign `Origin` is refused (403) whatever its verb; the `Host` check has no counterpart
//! there.
//!
//! ```text
//!   Host     absent, localhost, 127.0.0.1, [::1], the bind address, --allowed-host names
//!            (any port; any IP literal when bound to 0.0.0.0 or [::])      else 403
//!   Origin   absent, or scheme://host[:port] = http://<Host> (the UI's own pages),
//!            or matching a --cors-allowed-origins expression (+ CORS headers)  else 403
//! ```

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use regex::Regex;

/// Who may send requests: the server's names and the cross-origin pages allowed.
#[derive(Debug, Clone, Default)]
pub struct AccessOptions {
    /// Host names (or addresses) the server answers to besides `localhost`, the loopback
    /// addresses and the bind address (`--allowed-host`).
    pub allowed_hosts: Vec<String>,
    /// Regular expressions of the origins whose pages may call the API
    /// (`--cors-allowed-origins`); none by default.
    pub cors_allowed_origins: Vec<Regex>,
    /// The address the server is bound to (set when it starts serving).
    pub bind_address: Option<IpAddr>,
}

/// CORS headers of an allowed origin, as kube-apiserver sends them.
const ALLOW_METHODS: &str = "POST, GET, OPTIONS, PUT, DELETE, PATCH";
const ALLOW_HEADERS: &str = "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, X-Requested-With, If-Modified-Since";
const EXPOSE_HEADERS: &str = "Date";

/// What to do with a request.
#[derive(Debug)]
pub enum Verdict {
    /// Serve it.
    Serve,
    /// Serve it and add these CORS headers to the answer (an allowed cross origin).
    ServeCors(HeaderValue),
    /// Answer this instead (a refusal, or an allowed origin's preflight).
    Answer(Response),
}

impl AccessOptions {
    /// Decides on a request from its method and headers.
    pub fn check(&self, method: &Method, headers: &HeaderMap) -> Verdict {
        let host = headers.get(header::HOST).map(|h| h.to_str().unwrap_or(""));
        if let Some(host) = host
            && !self.host_allowed(host)
        {
            return Verdict::Answer(forbidden(format!(
                "the request's Host {host:?} is not one of this server's names (add it with --allowed-host)"
            )));
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Verdict::Serve;
        };
        let origin_text = origin.to_str().unwrap_or("");
        if host.is_some_and(|h| same_origin(origin_text, h)) {
            return Verdict::Serve;
        }
        if !origin_text.is_empty()
            && self
                .cors_allowed_origins
                .iter()
                .any(|re| re.is_match(origin_text))
        {
            if method == Method::OPTIONS {
                let mut resp = Response::new(axum::body::Body::empty());
                *resp.status_mut() = StatusCode::NO_CONTENT;
                add_cors_headers(&mut resp, origin.clone());
                return Verdict::Answer(resp);
            }
            return Verdict::ServeCors(origin.clone());
        }
        Verdict::Answer(forbidden(format!(
            "requests from origin {origin_text:?} are not allowed: only the server's own pages and --cors-allowed-origins may call it"
        )))
    }

    /// Whether `host` (a `Host` header: name or address, optional port) names this server.
    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if name.is_empty() {
            return false;
        }
        if name == "localhost" {
            return true;
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            let ip = ip.to_canonical();
            if ip.is_loopback() || Some(ip) == self.bind_address.map(|a| a.to_canonical()) {
                return true;
            }
            // Bound to every address: any address of this machine names it, and an address
            // cannot be rebound the way a DNS name can.
            if self.bind_address.is_some_and(|a| a.is_unspecified()) {
                return true;
            }
        }
        self.allowed_hosts
            .iter()
            .any(|allowed| host_name(allowed) == name)
    }
}

/// The name part of a `Host` value, lower case, without port, brackets or a final dot.
fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `origin` (`scheme://authority`) is the page origin of a server reached as `host`.
fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return false,
    };
    let norm = |a: &str| {
        let a = a.to_ascii_lowercase();
        a.strip_suffix(default_port)
            .map(str::to_string)
            .unwrap_or(a)
    };
    norm(authority) == norm(host.trim())
}

/// Adds the CORS headers of an allowed origin.
pub fn add_cors_headers(resp: &mut Response, origin: HeaderValue) {
    let h = resp.headers_mut();
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOW_METHODS),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOW_HEADERS),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
        HeaderValue::from_static("true"),
    );
}

/// A 403 `Status` (reason `Forbidden`).
fn forbidden(message: String) -> Response {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": {},
        "code": 403,
    });
    crate::response::json_response(StatusCode::FORBIDDEN, &status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn verdict(
        opts: &AccessOptions,
        method: Method,
        pairs: &[(&'static str, &'static str)],
    ) -> u16 {
        match opts.check(&method, &headers(pairs)) {
            Verdict::Serve => 0,
            Verdict::ServeCors(_) => 1,
            Verdict::Answer(r) => r.status().as_u16(),
        }
    }

    #[test]
    fn the_server_answers_to_its_own_names_only() {
        let opts = AccessOptions {
            allowed_hosts: vec!["cp.example".into()],
            bind_address: Some("10.1.2.3".parse().expect("an address")),
            ..AccessOptions::default()
        };
        for ok in [
            "localhost",
            "localhost:6443",
            "LOCALHOST.",
            "127.0.0.1:1234",
            "127.0.0.1",
            "[::1]:6443",
            "10.1.2.3:6443",
            "cp.example:443",
        ] {
            assert!(opts.host_allowed(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:6443",
            "10.9.9.9:6443",
            "",
            "localhost.evil.example",
        ] {
            assert!(!opts.host_allowed(bad), "{bad}");
        }
        assert_eq!(verdict(&opts, Method::GET, &[]), 0, "no Host: HTTP/1.0");
        assert_eq!(
            verdict(&opts, Method::GET, &[("host", "attacker.example:6443")]),
            403
        );
        let any = AccessOptions {
            bind_address: Some("0.0.0.0".parse().expect("an address")),
            ..AccessOptions::default()
        };
        assert!(any.host_allowed("192.168.1.5:6443"));
        assert!(!any.host_allowed("rebound.example:6443"));
    }

    #[test]
    fn only_the_servers_own_origin_and_allowed_ones_may_call_it() {
        let mut opts = AccessOptions::default();
        let host = ("host", "127.0.0.1:6443");
        assert_eq!(verdict(&opts, Method::POST, &[host]), 0);
        assert_eq!(
            verdict(
                &opts,
                Method::POST,
                &[host, ("origin", "http://127.0.0.1:6443")]
            ),
            0
        );
        for foreign in [
            "https://evil.example",
            "null",
            "http://127.0.0.1:8080",
            "http://localhost:6443",
        ] {
            let h = headers(&[host]);
            let mut h2 = h.clone();
            h2.insert("origin", HeaderValue::from_str(foreign).expect("a header"));
            assert!(
                matches!(opts.check(&Method::POST, &h2), Verdict::Answer(r) if r.status() == StatusCode::FORBIDDEN),
                "{foreign}"
            );
        }
        assert_eq!(
            verdict(
                &opts,
                Method::GET,
                &[("host", "localhost"), ("origin", "http://localhost")]
            ),
            0,
            "default port"
        );
        opts.cors_allowed_origins = vec![Regex::new(r"^https://dash\.example$").expect("a regex")];
        assert_eq!(
            verdict(
                &opts,
                Method::POST,
                &[host, ("origin", "https://dash.example")]
            ),
            1
        );
        assert_eq!(
            verdict(
                &opts,
                Method::OPTIONS,
                &[host, ("origin", "https://dash.example")]
            ),
            204
        );
    }
}
