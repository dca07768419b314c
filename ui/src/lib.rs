//! # ui — the web UI's files
//!
//! A live picture of the cluster, its objects and its traces (`docs/ui.md`): a handful of plain
//! HTML, CSS and JavaScript module files (`ui/assets/`) compiled into the binary with
//! `include_str!`. No build step, nothing fetched from elsewhere: it works offline. The
//! browser talks to the same REST API as kubectl (lists, `?watch=1` streams, lists at an old
//! `resourceVersion` for the replay) and to the trace collector.
//!
//! Kubernetes' counterpart is the Dashboard (`kubernetes/dashboard`), a deployment of its own
//! with a backend that proxies the API. Here the files are a component of their own and the
//! API server serves them at `/ui` (`apiserver/src/ui.rs`, which adds the HTTP headers); this
//! crate depends on nothing.

/// One embedded file of the UI.
#[derive(Debug)]
pub struct Asset {
    /// Its name under `/ui/` (`app.js`).
    pub name: &'static str,
    /// The `Content-Type` it is served with.
    pub content_type: &'static str,
    /// Its text.
    pub body: &'static str,
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The UI's Content-Security-Policy: its own files and its own server's API, nothing inline
/// (styles set from script through the CSSOM are not inline), never in a frame.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page `/ui` itself.
pub const INDEX: &str = "index.html";

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_str!(concat!("../assets/", $name)),
        }
    };
}

/// Every file of the UI. The JavaScript modules import each other by relative path, so the
/// browser fetches exactly these.
pub const ASSETS: &[Asset] = &[
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
    asset!("history.js", JS),
];

/// The file named `name` (as under `/ui/`), if the UI has one.
pub fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_body_and_a_known_type() {
        for asset in ASSETS {
            assert!(!asset.body.is_empty(), "{} is empty", asset.name);
            let expected = match asset.name.rsplit_once('.').map(|(_, ext)| ext) {
                Some("html") => HTML,
                Some("js") => JS,
                Some("css") => CSS,
                other => panic!("{}: unexpected extension {other:?}", asset.name),
            };
            assert_eq!(asset.content_type, expected, "{}", asset.name);
        }
        assert_eq!(asset(INDEX).map(|a| a.content_type), Some(HTML));
        assert!(asset("../Cargo.toml").is_none());
        assert!(asset("missing.js").is_none());
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
                        super::asset(name).is_some(),
                        "{} refers to {name}, which is not embedded",
                        asset.name
                    );
                }
            }
        }
    }

    #[test]
    fn every_file_in_the_assets_folder_is_embedded() {
        // A file added to ui/assets/ but not to ASSETS would never be served.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        for entry in std::fs::read_dir(&dir).expect("ui/assets is readable") {
            let name = entry.expect("a directory entry").file_name();
            let name = name.to_string_lossy();
            assert!(asset(&name).is_some(), "ui/assets/{name} is not in ASSETS");
        }
    }
}
