//! A real headless Chromium driven through chromedriver (W3C WebDriver,
//! <https://www.w3.org/TR/webdriver2/>) with the `fantoccini` WebDriver client, for the web
//! UI's tests. The tests are plain blocking functions, so [`Browser`] owns a small tokio
//! runtime and blocks on each command.
//!
//! ```text
//!   test ──spawn──▶ chromedriver --port=0   prints "ChromeDriver was started successfully on port N"
//!     └──fantoccini─▶ new session {goog:chromeOptions: headless, no sandbox, own profile}
//!                     goto · execute · find + click · screenshot · close
//! ```
//!
//! Chromium and chromedriver must be installed (Debian: `apt-get install chromium
//! chromium-driver`); when they are not, [`Browser::start`] fails the test saying so: the UI
//! tests never pass by skipping.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::runtime::Runtime;

/// How long chromedriver may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A browser session, closed (and chromedriver stopped) on drop.
pub struct Browser {
    driver: Child,
    runtime: Runtime,
    /// `None` once closed.
    client: Option<Client>,
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
        let profile = tempfile::tempdir().expect("a profile directory");
        let caps = json!({
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
        });
        let Value::Object(caps) = caps else {
            unreachable!("capabilities are an object")
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the WebDriver client");
        let connected = runtime.block_on(
            ClientBuilder::new(HttpConnector::new())
                .capabilities(caps)
                .connect(&format!("http://127.0.0.1:{port}")),
        );
        let client = match connected {
            Ok(client) => client,
            Err(e) => {
                let _ = driver.kill();
                panic!(
                    "chromedriver could not start Chromium ({}): {e}",
                    chromium.display()
                );
            }
        };
        Browser {
            driver,
            runtime,
            client: Some(client),
            _profile: profile,
        }
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("an open session")
    }

    /// Opens `url` (and waits for the page to load).
    pub fn navigate(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("WebDriver navigate to {url}: {e}"));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page and returns what
    /// it returns.
    pub fn execute(&self, script: &str, args: Value) -> Value {
        let args = match args {
            Value::Array(args) => args,
            other => vec![other],
        };
        self.runtime
            .block_on(self.client().execute(script, args))
            .unwrap_or_else(|e| panic!("WebDriver execute {script}: {e}"))
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
            let clicked = self.runtime.block_on(async {
                let element = self.client().find(Locator::Css(selector)).await?;
                element.click().await
            });
            match clicked {
                Ok(()) => return,
                Err(e) if e.is_stale_element_reference() => continue,
                Err(e) => panic!("click {selector}: {e}"),
            }
        }
        panic!("click {selector}: the element kept being replaced");
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        self.runtime
            .block_on(self.client().screenshot())
            .unwrap_or_else(|e| panic!("WebDriver screenshot: {e}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
