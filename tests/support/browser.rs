//! A real headless Chromium driven through chromedriver's WebDriver HTTP protocol
//! (W3C WebDriver, <https://www.w3.org/TR/webdriver2/>), for the web UI's tests: a small
//! blocking client over the raw HTTP client of [`super::http`], no WebDriver crate.
//!
//! ```text
//!   test ──spawn──▶ chromedriver --port=0   prints "ChromeDriver was started successfully on port N"
//!     └──HTTP────▶ POST /session {goog:chromeOptions: headless, no sandbox, own profile}
//!                  POST /session/{id}/url | /execute/sync | /element | /element/{e}/click
//!                  GET  /session/{id}/screenshot
//! ```
//!
//! Chromium and chromedriver must be installed (Debian: `apt-get install chromium
//! chromium-driver`); when they are not, [`Browser::start`] fails the test saying so: the UI
//! tests never pass by skipping.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http;

/// How long chromedriver may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A browser session, closed (and chromedriver stopped) on drop.
pub struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    _profile: tempfile::TempDir,
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The Chromium executable: Debian's real binary behind its `/usr/bin/chromium` wrapper
/// script, or whatever `chromium`/`chromium-browser`/`google-chrome` is on the PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let debian = PathBuf::from("/usr/lib/chromium/chromium");
    if debian.is_file() {
        return Some(debian);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(find_in_path)
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a window of `width`×`height`.
    pub fn start(width: u32, height: u32) -> Browser {
        const MISSING: &str = "the web UI tests need Chromium and chromedriver: \
            apt-get install -y chromium chromium-driver (or set CHROMIUM and put chromedriver on PATH)";
        let driver_path = find_in_path("chromedriver")
            .unwrap_or_else(|| panic!("chromedriver not found on PATH; {MISSING}"));
        let chromium = chromium().unwrap_or_else(|| panic!("chromium not found; {MISSING}"));
        let mut driver = Command::new(&driver_path)
            .arg("--port=0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}; {MISSING}", driver_path.display()));
        let stdout = driver.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent && let Some(rest) = line.split("started successfully on port ").nth(1) {
                    let _ = tx.send(rest.trim_end_matches('.').trim().to_owned());
                    sent = true;
                }
            }
        });
        let port: u16 = match rx.recv_timeout(START_TIMEOUT) {
            Ok(p) => p.parse().expect("chromedriver's port"),
            Err(_) => {
                let _ = driver.kill();
                panic!("chromedriver did not start within {START_TIMEOUT:?}");
            }
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let profile = tempfile::tempdir().expect("a profile directory");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-extensions", "--hide-scrollbars",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        let resp = http::request(
            addr,
            "POST",
            "/session",
            Some("application/json"),
            caps.to_string().as_bytes(),
        )
        .expect("POST /session to chromedriver");
        let body = resp.json();
        let Some(session) = body["value"]["sessionId"].as_str().map(str::to_owned) else {
            let _ = driver.kill();
            panic!(
                "chromedriver could not start Chromium ({}): {body}",
                chromium.display()
            );
        };
        Browser {
            driver,
            addr,
            session,
            _profile: profile,
        }
    }

    /// Sends one command; `Err` carries WebDriver's error object.
    fn try_command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let path = format!("/session/{}{path}", self.session);
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let resp = http::request(
            self.addr,
            method,
            &path,
            Some("application/json"),
            body.as_bytes(),
        )
        .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"));
        let value = resp.json();
        if resp.status == 200 {
            Ok(value["value"].clone())
        } else {
            Err(value["value"].clone())
        }
    }

    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_command(method, path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path} failed: {e}"))
    }

    /// Opens `url` (and waits for the page to load).
    pub fn navigate(&self, url: &str) {
        self.command("POST", "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page and returns what
    /// it returns.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": args })),
        )
    }

    /// Runs `script` every 100 ms until it returns something other than `null`/`false`, and
    /// returns that; panics after `timeout` naming `what` and the last value.
    pub fn wait_for(&self, what: &str, timeout: Duration, script: &str) -> Value {
        match self.poll(timeout, script) {
            Some(v) => v,
            None => {
                let page = self.execute(
                    "return document.getElementById('main').innerText.slice(0, 3000)",
                    json!([]),
                );
                panic!(
                    "timed out after {timeout:?} waiting for: {what}\nthe page showed:\n{}",
                    page.as_str().unwrap_or_default()
                );
            }
        }
    }

    /// Like [`Browser::wait_for`], but `None` after `timeout`, for conditions that may
    /// legitimately not happen.
    pub fn poll(&self, timeout: Duration, script: &str) -> Option<Value> {
        let start = Instant::now();
        loop {
            let v = self.execute(script, json!([]));
            if !v.is_null() && v != Value::Bool(false) {
                return Some(v);
            }
            if start.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Clicks the first element matching the CSS `selector`, as a user would (WebDriver's
    /// element click: it must be visible and not covered).
    pub fn click(&self, selector: &str) {
        // Centred first, as a reader would scroll to it: WebDriver only scrolls the window,
        // and a row at the edge of a scrolled panel can sit under its sticky header.
        self.execute(
            "const e = document.querySelector(arguments[0]); if (e) e.scrollIntoView({block: 'center', inline: 'nearest'});",
            json!([selector]),
        );
        // The live views redraw what changed: an element found just before its object
        // changed is stale, and is found again (a reader would click the new one).
        for _ in 0..5 {
            let found = self.command(
                "POST",
                "/element",
                Some(json!({ "using": "css selector", "value": selector })),
            );
            let id = found
                .as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no element {selector}: {found}"))
                .to_owned();
            match self.try_command("POST", &format!("/element/{id}/click"), Some(json!({}))) {
                Ok(_) => return,
                Err(e) if e["error"] == "stale element reference" => continue,
                Err(e) => panic!("click {selector}: {e}"),
            }
        }
        panic!("click {selector}: the element kept being replaced");
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let data = self.command("GET", "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(data.as_str().expect("a base64 screenshot"))
            .expect("valid base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let path = format!("/session/{}", self.session);
        let _ = http::request(self.addr, "DELETE", &path, None, b"");
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
