//! Serving the web UI (`docs/ui.md`) at `/ui`: the files are the `ui` crate's (`ui/assets/`),
//! this module answers for them over HTTP.
//!
//! Kubernetes' counterpart is the Dashboard (`kubernetes/dashboard`), a separate deployment
//! with its own backend that proxies the API. Here the API server serves the UI's files
//! itself; the browser talks to the same REST API as kubectl and to the trace collector, and
//! the server adds nothing for it but these files.
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

/// Answers `GET /ui` (`file` = `None`) and `GET /ui/{file}`: the embedded file, or a 404
/// `Status` for a name the UI does not have.
pub fn serve(file: Option<&str>) -> Result<Response> {
    let name = match file {
        None | Some("") => ui::INDEX,
        Some(name) => name,
    };
    let asset = ui::asset(name).ok_or(ApiError::PathNotFound)?;
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
        HeaderValue::from_static(ui::CONTENT_SECURITY_POLICY),
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
        for asset in ui::ASSETS {
            let resp = serve(Some(asset.name)).expect("an embedded asset");
            assert_eq!(resp.status(), StatusCode::OK);
            assert_eq!(
                resp.headers()[header::CONTENT_TYPE],
                asset.content_type,
                "{}",
                asset.name
            );
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
}
