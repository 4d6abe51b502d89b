//! A real browser for the web page's tests: Debian's Chromium or Firefox
//! (ESR), headless, driven over W3C WebDriver by chromedriver or geckodriver
//! (fantoccini is the client), so one test body runs in both engines.
//! Chromium and chromedriver are installed by `.ci/chromium` when missing,
//! Firefox and geckodriver (built from its crates.io release) by
//! `.ci/firefox` (as `cargo nextest run` on a fresh machine would need); a
//! test never skips for want of them. Each browser has its own profile
//! directory and its own driver on a free loopback port. A browser can be
//! started with the user's dark colour scheme and reduced-motion setting
//! ([`Emulation`]), each engine's own way. Neither headless browser makes a
//! window narrower than 500 pixels, so a phone's screen (390 wide) is
//! emulated: chromedriver's mobile emulation in Chromium, WebDriver BiDi's
//! `browsingContext.setViewport` in Firefox.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::process::{Child, Command};

use super::acp_client::TIMEOUT;

const CHROMIUM: &str = "/usr/bin/chromium";
/// The narrowest window either headless browser makes; narrower screens
/// (phones) are emulated.
const MIN_WINDOW_WIDTH: u32 = 500;
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

/// Which browser engine a [`Browser`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Chromium,
    Firefox,
}

impl Engine {
    /// Lower-case name, for screenshot files and messages.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Chromium => "chromium",
            Engine::Firefox => "firefox",
        }
    }
}

/// The user's system settings the browser reports to the page
/// (`prefers-color-scheme`, `prefers-reduced-motion`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Emulation {
    pub dark: bool,
    pub reduced_motion: bool,
}

/// Where `.ci/firefox` put Firefox and geckodriver (it installs them the
/// first time; later calls only print the paths).
fn firefox_paths() -> (PathBuf, PathBuf) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/firefox");
    let output = std::process::Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let var = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(PathBuf::from)
    };
    match (output.status.success(), var("FIREFOX"), var("GECKODRIVER")) {
        (true, Some(firefox), Some(gecko)) if firefox.is_file() && gecko.is_file() => {
            (firefox, gecko)
        }
        _ => panic!(
            "the web page's Firefox tests need Debian's firefox-esr and geckodriver; \
             `.ci/firefox` could not install them ({}); it printed: {stdout}",
            output.status
        ),
    }
}

/// A free loopback port (the driver binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts a WebDriver server (`program args…`, logging to `log`) and waits
/// until it listens on `port`.
async fn spawn_driver(
    env: &[(&str, String)],
    program: &Path,
    args: &[String],
    port: u16,
    log: &Path,
) -> Child {
    let log_file = std::fs::File::create(log).unwrap();
    let driver = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} did not listen on port {port}; its log: {}",
            program.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    driver
}

type Bidi =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Sets the top-level browsing context's viewport to `width` × `height`
/// through WebDriver BiDi (`browsingContext.setViewport`) and returns the
/// connection, which must stay open for the override to last.
async fn phone_viewport(client: &Client, width: u32, height: u32) -> Bidi {
    use futures::{SinkExt, StreamExt};
    let url = client
        .capabilities()
        .and_then(|caps| caps.get("webSocketUrl"))
        .and_then(|url| url.as_str())
        .unwrap_or_else(|| panic!("geckodriver offered no WebDriver BiDi connection"))
        .to_string();
    let context: String = client.window().await.unwrap().into();
    let (mut bidi, _) = tokio_tungstenite::connect_async(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot open WebDriver BiDi at {url}: {e}"));
    let command = json!({
        "id": 1,
        "method": "browsingContext.setViewport",
        "params": {
            "context": context,
            "viewport": {"width": width, "height": height},
            "devicePixelRatio": 3.0,
        },
    });
    bidi.send(tokio_tungstenite::tungstenite::Message::text(
        command.to_string(),
    ))
    .await
    .unwrap();
    let answer = tokio::time::timeout(TIMEOUT, async {
        while let Some(message) = bidi.next().await {
            let text = message.unwrap().into_text().unwrap_or_default();
            let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if value["id"] == json!(1) {
                return value;
            }
        }
        panic!("WebDriver BiDi closed before answering setViewport");
    })
    .await
    .unwrap_or_else(|_| panic!("WebDriver BiDi did not answer setViewport"));
    assert_eq!(answer["type"], json!("success"), "setViewport: {answer}");
    bidi
}

pub struct Browser {
    pub client: Client,
    /// Which engine this is.
    pub engine: Engine,
    /// Firefox's WebDriver BiDi connection, when it holds a viewport
    /// override.
    _bidi: Option<Bidi>,
    _driver: Child,
    _profile: tempfile::TempDir,
}

/// The driver runs in a process group of its own with the browser it
/// starts: killing only the driver (as dropping its `Child` does) would
/// leave the browser's processes running after the test, hundreds of them
/// over a test run.
impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self._driver.id() {
            let group = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

impl Browser {
    /// A headless Chromium with a fresh profile, `width` × `height`.
    pub async fn start(width: u32, height: u32) -> Self {
        Self::chromium(width, height, Emulation::default()).await
    }

    /// A headless Firefox with a fresh profile, `width` × `height`.
    pub async fn firefox(width: u32, height: u32) -> Self {
        Self::launch(Engine::Firefox, width, height, Emulation::default()).await
    }

    /// A headless `engine` with a fresh profile, `width` × `height`, that
    /// tells pages the system settings in `emulation`.
    pub async fn launch(engine: Engine, width: u32, height: u32, emulation: Emulation) -> Self {
        match engine {
            Engine::Chromium => Self::chromium(width, height, emulation).await,
            Engine::Firefox => Self::start_firefox(width, height, emulation).await,
        }
    }

    async fn start_firefox(width: u32, height: u32, emulation: Emulation) -> Self {
        let (firefox, geckodriver) = tokio::task::spawn_blocking(firefox_paths).await.unwrap();
        let profile = tempfile::tempdir().unwrap();
        let port = free_port();
        // geckodriver makes a fresh profile under --profile-root (this
        // browser's own temporary directory) and lets Firefox choose its
        // Marionette port, so parallel tests do not meet.
        let driver = spawn_driver(
            &[],
            &geckodriver,
            &[
                format!("--port={port}"),
                "--host=127.0.0.1".to_string(),
                format!("--profile-root={}", profile.path().display()),
                format!("--binary={}", firefox.display()),
                format!("--websocket-port={}", free_port()),
            ],
            port,
            &profile.path().join("geckodriver.log"),
        )
        .await;
        let mut prefs = serde_json::Map::new();
        for (name, value) in [
            ("browser.shell.checkDefaultBrowser", json!(false)),
            ("datareporting.policy.dataSubmissionEnabled", json!(false)),
            ("toolkit.telemetry.reportingpolicy.firstRun", json!(false)),
            ("app.update.disabledForTesting", json!(true)),
            ("browser.region.network.url", json!("")),
            ("network.captive-portal-service.enabled", json!(false)),
            ("network.connectivity-service.enabled", json!(false)),
        ] {
            prefs.insert(name.to_string(), value);
        }
        if emulation.dark {
            // The system theme, and the content override that follows it
            // (0 = dark), so pages see `prefers-color-scheme: dark`.
            prefs.insert("ui.systemUsesDarkTheme".to_string(), json!(1));
            prefs.insert(
                "layout.css.prefers-color-scheme.content-override".to_string(),
                json!(0),
            );
        }
        if emulation.reduced_motion {
            prefs.insert("ui.prefersReducedMotion".to_string(), json!(1));
        }
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".to_string(), json!("firefox"));
        // WebDriver BiDi, for the phone's viewport below.
        caps.insert("webSocketUrl".to_string(), json!(true));
        caps.insert(
            "moz:firefoxOptions".to_string(),
            json!({
                "binary": firefox,
                "args": [
                    "-headless",
                    "-width", width.max(MIN_WINDOW_WIDTH).to_string(),
                    "-height", height.to_string(),
                ],
                "prefs": prefs,
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start headless Firefox through geckodriver: {e}; its log: {}",
                    std::fs::read_to_string(profile.path().join("geckodriver.log"))
                        .unwrap_or_default()
                )
            });
        // -width/-height size the window; make sure the viewport is what
        // the test asked for whatever the window's chrome takes.
        client
            .set_window_size(width.max(MIN_WINDOW_WIDTH), height)
            .await
            .unwrap();
        // Headless Firefox will not make a window narrower than 500 CSS
        // pixels: a phone's screen is WebDriver BiDi's viewport override
        // (what Firefox's responsive design mode does), three device
        // pixels per CSS pixel as on a phone. The override lasts as long
        // as the BiDi connection, which the browser keeps.
        let bidi = if width < MIN_WINDOW_WIDTH {
            Some(phone_viewport(&client, width, height).await)
        } else {
            None
        };
        Self {
            client,
            engine: Engine::Firefox,
            _bidi: bidi,
            _driver: driver,
            _profile: profile,
        }
    }

    async fn chromium(width: u32, height: u32, emulation: Emulation) -> Self {
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
            .process_group(0)
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
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".to_string(),
            "--disable-gpu".to_string(),
            "--disable-quic".to_string(),
            "--no-first-run".to_string(),
            "--disable-background-networking".to_string(),
            "--disable-component-update".to_string(),
            "--disable-sync".to_string(),
            format!("--user-data-dir={}", profile.path().display()),
            format!("--window-size={width},{height}"),
        ];
        if emulation.dark {
            // Blink's preferred colour scheme (0 = dark) and the system's
            // dark theme: pages see `prefers-color-scheme: dark`.
            args.push("--blink-settings=preferredColorScheme=0".to_string());
            args.push("--force-dark-mode".to_string());
        }
        if emulation.reduced_motion {
            args.push("--force-prefers-reduced-motion".to_string());
        }
        let mut options = json!({ "binary": CHROMIUM, "args": args });
        if width < MIN_WINDOW_WIDTH {
            // Headless Chromium will not make a window narrower than 500
            // pixels: a phone's screen is chromedriver's mobile emulation
            // (its viewport, three device pixels per CSS pixel, touch).
            options["mobileEmulation"] = json!({
                "deviceMetrics": {
                    "width": width, "height": height, "pixelRatio": 3.0,
                    "mobile": true, "touch": true,
                },
            });
        }
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".to_string(), options);
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&url)
            .await
            .unwrap_or_else(|e| panic!("cannot start headless Chromium through chromedriver: {e}"));
        Self {
            client,
            engine: Engine::Chromium,
            _bidi: None,
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

/// Keyboard input through WebDriver's actions API: real key events, as a
/// person at a keyboard would make them (no clicks, no `element.focus()`).
impl Browser {
    /// Evaluates `script` (a function body) and returns what it returned.
    pub async fn eval(&self, script: &str) -> serde_json::Value {
        self.client
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed in {}: {e}\n{script}", self.engine.name()))
    }

    /// Presses and releases each key in turn (`Key::Tab.into()`, `'a'`, …).
    pub async fn press(&self, keys: &[char]) {
        let mut actions = KeyActions::new("keyboard".to_string());
        for &key in keys {
            actions = actions
                .then(KeyAction::Down { value: key })
                .then(KeyAction::Up { value: key });
        }
        self.client.perform_actions(actions).await.unwrap();
    }

    /// Holds `modifier` while pressing `key` (Shift+Tab).
    pub async fn chord(&self, modifier: Key, key: Key) {
        let actions = KeyActions::new("keyboard".to_string())
            .then(KeyAction::Down {
                value: modifier.into(),
            })
            .then(KeyAction::Down { value: key.into() })
            .then(KeyAction::Up { value: key.into() })
            .then(KeyAction::Up {
                value: modifier.into(),
            });
        self.client.perform_actions(actions).await.unwrap();
    }

    /// Types `text` into whatever has the focus.
    pub async fn type_text(&self, text: &str) {
        let keys: Vec<char> = text.chars().collect();
        self.press(&keys).await;
    }

    /// The `data-testid` of the focused element (`None` when it has none).
    pub async fn focused_testid(&self) -> Option<String> {
        self.eval("return document.activeElement?.dataset?.testid ?? null;")
            .await
            .as_str()
            .map(str::to_string)
    }

    /// Presses Tab (or Shift+Tab when `back`) until the focused element
    /// satisfies `is_target` (a JS expression over `el`, the focused
    /// element), at most 40 times; fails naming `what` when it is never
    /// reached.
    pub async fn tab_until(&self, what: &str, back: bool, is_target: &str) {
        let check = format!("const el = document.activeElement; return !!el && !!({is_target});");
        for _ in 0..40 {
            if self.eval(&check).await == json!(true) {
                return;
            }
            if back {
                self.chord(Key::Shift, Key::Tab).await;
            } else {
                self.press(&[Key::Tab.into()]).await;
            }
        }
        let path = self
            .eval(
                "const el = document.activeElement; return el ? el.outerHTML.slice(0, 200) : null;",
            )
            .await;
        panic!(
            "{}: {what} cannot be reached with {} (focus is on {path})",
            self.engine.name(),
            if back { "Shift+Tab" } else { "Tab" }
        );
    }

    /// Opens the gateway's page at `addr` and signs in with `token` (typed
    /// into the login field, submitted with its button).
    pub async fn sign_in(&self, addr: std::net::SocketAddr, token: &str) {
        self.client.goto(&format!("http://{addr}/")).await.unwrap();
        self.testid("login-secret")
            .await
            .send_keys(token)
            .await
            .unwrap();
        self.testid("login-submit").await.click().await.unwrap();
        self.until_signed_in().await;
    }

    /// Waits for the signed-in view: the message box shown, the login
    /// field gone.
    pub async fn until_signed_in(&self) {
        self.until(
            "the signed-in view (and no login form)",
            "const shown = (el) => !!el && el.getClientRects().length > 0 \
               && getComputedStyle(el).visibility !== 'hidden'; \
             return shown(document.querySelector('[data-testid=message-input]')) \
               && !shown(document.querySelector('[data-testid=login-secret]'));",
        )
        .await;
    }
}

/// WebDriver's Get Computed Label / Get Computed Role for one element: the
/// name and role the browser's own accessibility tree gives it, which is
/// what a screen reader announces.
#[derive(Debug)]
struct ComputedA11y {
    element: String,
    what: &'static str,
}

impl fantoccini::wd::WebDriverCompatibleCommand for ComputedA11y {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/element/{}/{}",
            session_id.unwrap_or_default(),
            self.element,
            self.what
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (axum::http::Method::GET, None)
    }
}

impl Browser {
    /// The accessible name and role the browser computes for `element`.
    pub async fn accessible(&self, element: &fantoccini::elements::Element) -> (String, String) {
        let mut out = Vec::new();
        for what in ["computedlabel", "computedrole"] {
            let value = self
                .client
                .issue_cmd(ComputedA11y {
                    element: element.element_id().to_string(),
                    what,
                })
                .await
                .unwrap_or_else(|e| panic!("{}: {what} failed: {e}", self.engine.name()));
            out.push(value.as_str().unwrap_or_default().to_string());
        }
        (out[0].clone(), out[1].clone())
    }
}
