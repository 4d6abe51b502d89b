//! A real browser for the web page's tests: Debian's Chromium, headless,
//! driven over W3C WebDriver by its chromedriver (fantoccini is the
//! client). Chromium and chromedriver are installed by `.ci/chromium` when
//! missing (as `cargo nextest run` on a fresh machine would need); a test
//! never skips for want of them. Each browser has its own profile directory
//! and its own driver on a free loopback port.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::process::{Child, Command};

use super::acp_client::TIMEOUT;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

fn installed() -> bool {
    Path::new(CHROMIUM).is_file() && Path::new(CHROMEDRIVER).is_file()
}

/// Chromium and chromedriver, installed by `.ci/chromium` if need be.
fn ensure_installed() {
    if installed() {
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/chromium");
    let status = std::process::Command::new(&script)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        status.success() && installed(),
        "the web page's tests need Debian's chromium and chromium-driver ({CHROMIUM}, \
         {CHROMEDRIVER}); `.ci/chromium` could not install them ({status})"
    );
}

pub struct Browser {
    pub client: Client,
    _driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// A headless Chromium with a fresh profile, `width` × `height`.
    pub async fn start(width: u32, height: u32) -> Self {
        tokio::task::spawn_blocking(ensure_installed).await.unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "chromedriver did not listen"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_string(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    format!("--user-data-dir={}", profile.path().display()),
                    format!("--window-size={width},{height}"),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("cannot start headless Chromium through chromedriver: {e}"));
        Self {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    /// The element with this `data-testid`, once it exists.
    pub async fn testid(&self, id: &str) -> fantoccini::elements::Element {
        let selector = format!("[data-testid=\"{id}\"]");
        self.client
            .wait()
            .at_most(TIMEOUT)
            .for_element(Locator::Css(&selector))
            .await
            .unwrap_or_else(|e| panic!("no element [data-testid={id}] on the page: {e}"))
    }

    /// Evaluates `script` until it returns true, or fails after the timeout.
    pub async fn until(&self, what: &str, script: &str) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let value = self.client.execute(script, vec![]).await.unwrap();
            if value == json!(true) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the page never showed {what}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Saves a screenshot under target/screenshots/NAME.png (not committed).
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}
