//! The web UI: a live picture of the cluster, its objects and its traces, served by the API
//! server itself at `/ui` (`docs/ui.md`).
//!
//! Kubernetes' counterpart is the Dashboard (`kubernetes/dashboard`), a separate deployment
//! with its own backend that proxies the API. Unlike it, miniplane's UI is a handful of plain
//! HTML, CSS and JavaScript module files (`apiserver/ui/`) compiled into the binary with
//! `include_str!`: no build step, nothing fetched from elsewhere, it works offline. The
//! browser talks to the same REST API as kubectl (lists, `?watch=1` streams, lists at an old
//! `resourceVersion` for the replay) and to the trace collector; the server adds nothing
//! for it but these files.
//!
//! ```text
//!   GET /ui, /ui/            index.html
//!   GET /ui/{file}           app.js, board.js, ... style.css (one module per view)
//!   browser ──fetch──▶ /api/v1/pods?watch=1 ...   /miniplane/v1/traces/{id}?view=tree
//! ```
//!
//! Every file goes out with a Content-Security-Policy that allows the UI's own files and API
//! only (no inline script, nothing from elsewhere) and forbids framing (`frame-ancestors
//! 'none'`, `X-Frame-Options: DENY`), and `X-Content-Type-Options: nosniff`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, Result};

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The UI's Content-Security-Policy: its own files and its own server's API, nothing inline
/// (styles set from script through the CSSOM are not inline), never in a frame.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_str!(concat!("../ui/", $name)),
        }
    };
}

/// Every file of the UI. The JavaScript modules import each other by relative path, so the
/// browser fetches exactly these.
const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("style.css", CSS),
    asset!("app.js", JS),
    asset!("dom.js", JS),
    asset!("informer.js", JS),
    asset!("board.js", JS),
    asset!("objects.js", JS),
    asset!("events.js", JS),
    asset!("trace.js", JS),
    asset!("controllers.js", JS),
];

/// Answers `GET /ui` (`file` = `None`) and `GET /ui/{file}`: the embedded file, or a 404
/// `Status` for a name the UI does not have.
pub fn serve(file: Option<&str>) -> Result<Response> {
    let name = match file {
        None | Some("") => "index.html",
        Some(name) => name,
    };
    let asset = ASSETS
        .iter()
        .find(|a| a.name == name)
        .ok_or(ApiError::PathNotFound)?;
    let mut resp = (StatusCode::OK, asset.body).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    // The files change with the binary: a browser must not keep an old app.js beside a new
    // index.html, and revalidating costs nothing on loopback.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_every_asset_with_its_type_and_refuses_others() {
        for asset in ASSETS {
            let resp = serve(Some(asset.name)).expect("an embedded asset");
            assert_eq!(resp.status(), StatusCode::OK);
            assert_eq!(
                resp.headers()[header::CONTENT_TYPE],
                asset.content_type,
                "{}",
                asset.name
            );
            assert!(!asset.body.is_empty(), "{} is empty", asset.name);
            let h = resp.headers();
            assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
            let csp = h[header::CONTENT_SECURITY_POLICY].to_str().expect("ASCII");
            assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
            assert!(csp.contains("script-src 'self'"), "{csp}");
        }
        assert!(serve(None).is_ok(), "/ui is the index");
        assert!(matches!(
            serve(Some("../Cargo.toml")),
            Err(ApiError::PathNotFound)
        ));
    }

    #[test]
    fn every_module_the_ui_imports_is_embedded() {
        // A module missing from ASSETS would be a 404 in the browser: check every
        // `from "./x.js"` and every `/ui/x` reference against the table.
        for asset in ASSETS {
            for part in asset.body.split(['"', '\'']) {
                let name = part
                    .strip_prefix("./")
                    .or_else(|| part.strip_prefix("/ui/"))
                    .filter(|n| n.ends_with(".js") || n.ends_with(".css"));
                if let Some(name) = name {
                    assert!(
                        ASSETS.iter().any(|a| a.name == name),
                        "{} refers to {name}, which is not embedded",
                        asset.name
                    );
                }
            }
        }
    }
}
