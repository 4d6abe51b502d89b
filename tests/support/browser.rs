//! A real browser for the web page's tests: Debian's Chromium or Firefox
//! (ESR), headless, driven over W3C WebDriver by chromedriver or geckodriver
//! (tests/support/webdriver.rs is the client), so one test body runs in
//! both engines.
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

use serde_json::json;
use tokio::process::{Child, Command};

use super::acp_client::TIMEOUT;
use super::webdriver::KeyAction;
pub use super::webdriver::{Client, Element, Key};

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

/// Starts a WebDriver server (`program args…`, logging to `log`) in a
/// process group of its own and waits until it listens on `port`. A
/// driver `kept` for the pool outlives this test's process; any other is
/// killed with it.
async fn spawn_driver(
    env: &[(&str, String)],
    program: &Path,
    args: &[String],
    port: u16,
    log: &Path,
    kept: bool,
) -> Child {
    let log_file = std::fs::File::create(log).unwrap();
    let driver = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().unwrap())
        .stderr(log_file)
        .kill_on_drop(!kept)
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
    let url = client.capabilities()["webSocketUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("geckodriver offered no WebDriver BiDi connection"))
        .to_string();
    let context = client.window().await.unwrap();
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

/// How to start a browser: its window, what it tells pages of the
/// system's settings, the directory for its profile and logs, and whether
/// it is `kept` for the pool (its driver then outlives the test).
struct Launch<'a> {
    width: u32,
    height: u32,
    emulation: Emulation,
    dir: &'a Path,
    kept: bool,
}

/// A browser and its WebDriver session, started for one test.
struct Started {
    client: Client,
    driver: Child,
    /// The driver's port.
    port: u16,
    bidi: Option<Bidi>,
}

/// Kills a driver's process group: the driver and the browser it started.
/// (Killing only the driver would leave the browser's processes running,
/// hundreds of them over a test run.)
fn kill_group(pgid: u32) {
    let group = nix::unistd::Pid::from_raw(pgid as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
}

pub struct Browser {
    pub client: Client,
    /// Which engine this is.
    pub engine: Engine,
    /// Firefox's WebDriver BiDi connection, when it holds a viewport
    /// override.
    _bidi: Option<Bidi>,
    owner: Owner,
}

/// Who ends a [`Browser`].
enum Owner {
    /// Started for this test alone: killed with it.
    Test {
        driver: Child,
        _profile: tempfile::TempDir,
    },
    /// Lent by the [`pool`]: given back when the test passes, killed when
    /// it fails.
    Pool(pool::Lease),
}

impl Drop for Browser {
    fn drop(&mut self) {
        match &mut self.owner {
            Owner::Test { driver, .. } => {
                if let Some(pid) = driver.id() {
                    kill_group(pid);
                }
            }
            // A failed test may have left the browser in any state, and
            // whoever looks into the failure wants the next run to start
            // from scratch.
            Owner::Pool(lease) => lease.give_back(std::thread::panicking()),
        }
    }
}

/// Browsers kept between tests. Starting one is most of a browser test's
/// cost on two cores (measured here: Chromium's session with its first
/// page about 2.8 s of CPU, Firefox's about 4.5 s, against 0.35 s for a
/// new tab in a running one), and nextest runs every test in a process of
/// its own, so a browser that serves several tests has to outlive the
/// test that started it.
///
/// A browser is kept in a slot (a directory under the target directory's
/// `tmp/browser-pool/`, one set of slots per engine, window size and
/// emulation). A test takes a slot by locking its `lock` file (an
/// exclusive `flock`, which the kernel releases when the test's process
/// ends however it ends). The slot's `state` file names the running
/// driver (its port and process group) and the WebDriver session. The
/// test opens a fresh tab in that session (a new tab has its own
/// `sessionStorage`, where the page keeps a credential) and closes every
/// other, or starts a browser when the slot has none or the one it has
/// does not answer. Each kept browser has a watchdog (`bash`, detached) that
/// kills it, and deletes its profile, once its slot has been unlocked for
/// `IDLE` seconds: browsers end soon after the run that used them.
mod pool {
    use super::*;

    /// Slots per kind of browser: the browser tests run at most two at a
    /// time (.config/nextest.toml), and a slot whose lock is briefly held
    /// by its watchdog is passed over.
    const SLOTS: usize = 3;
    /// Seconds a kept browser waits unused before its watchdog ends it.
    const IDLE: u64 = 20;

    /// What the slot's `state` file says.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct State {
        port: u16,
        session: String,
        pgid: u32,
    }

    /// A slot taken by this test.
    pub(super) struct Lease {
        dir: PathBuf,
        /// Locked while the test holds the slot.
        _lock: std::fs::File,
        /// The process group of the slot's browser, once known.
        pgid: Option<u32>,
    }

    /// Takes a free slot for browsers of this kind, if one is free.
    pub(super) fn take(kind: &str) -> Option<Lease> {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-pool");
        for slot in 0..SLOTS {
            let dir = root.join(format!("{kind}-{slot}"));
            std::fs::create_dir_all(&dir).unwrap();
            let lock = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("lock"))
                .unwrap();
            if lock.try_lock().is_ok() {
                return Some(Lease {
                    dir,
                    _lock: lock,
                    pgid: None,
                });
            }
        }
        None
    }

    impl Lease {
        fn state_path(&self) -> PathBuf {
            self.dir.join("state")
        }

        /// Where the slot's browser keeps its profile.
        pub(super) fn profile(&self) -> PathBuf {
            self.dir.join("profile")
        }

        /// The slot's running browser, in a fresh tab that is its only
        /// one; `None` (with the browser ended) when there is none or it
        /// does not answer.
        pub(super) async fn reuse(&mut self, engine: Engine) -> Option<Client> {
            let state: State = std::fs::read(self.state_path())
                .ok()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())?;
            self.pgid = Some(state.pgid);
            let fresh_tab = async {
                let client = Client::existing_session(
                    &format!("http://127.0.0.1:{}", state.port),
                    &state.session,
                )
                .await
                .ok()?;
                let old = client.windows().await.ok()?;
                let tab = client.new_tab().await.ok()?;
                for window in old {
                    client.switch_to_window(&window).await.ok()?;
                    client.close_window().await.ok()?;
                }
                client.switch_to_window(&tab).await.ok()?;
                if engine == Engine::Chromium {
                    // Chromium leaves a tab opened this way without the
                    // focus (`document.hasFocus()` is false, so nothing
                    // on the page is `:focus-visible`) even once it is
                    // the only one.
                    client
                        .command(
                            "goog/cdp/execute",
                            Some(json!({ "cmd": "Page.bringToFront", "params": {} })),
                        )
                        .await
                        .ok()?;
                }
                Some(client)
            };
            match tokio::time::timeout(Duration::from_secs(10), fresh_tab).await {
                Ok(Some(client)) => Some(client),
                _ => {
                    self.end();
                    None
                }
            }
        }

        /// Keeps the browser just started in this slot, with a watchdog
        /// that ends it when the slot stays unused.
        pub(super) async fn keep(&mut self, client: &Client, port: u16, pgid: u32) {
            let session = client.session_id().to_string();
            let state = State {
                port,
                session,
                pgid,
            };
            std::fs::write(self.state_path(), serde_json::to_vec(&state).unwrap()).unwrap();
            self.pgid = Some(pgid);
            // $1 lock, $2 state, $3 process group, $4 idle seconds,
            // $5 profile. The lock is only tried: a test that finds it
            // held by the watchdog takes another slot.
            // The watchdog runs in the background of a shell that ends at
            // once (waited for here), so it belongs to no test process.
            const WATCHDOG: &str = r#"watch() {
  exec 9>>"$1"
  while sleep 2; do
    if ! kill -0 -- "-$3" 2>/dev/null; then
      grep -q "\"pgid\":$3[,}]" "$2" 2>/dev/null && rm -f "$2"
      exit 0
    fi
    if flock -n 9; then
      used=$(stat -c %Y "$2" 2>/dev/null || echo 0)
      if [ $(( $(date +%s) - used )) -ge "$4" ]; then
        kill -KILL -- "-$3"
        grep -q "\"pgid\":$3[,}]" "$2" 2>/dev/null && rm -f "$2"
        rm -rf "$5"
        exit 0
      fi
      flock -u 9
    fi
  done
}
watch "$@" &"#;
            use std::os::unix::process::CommandExt;
            let status = std::process::Command::new("bash")
                .arg("-c")
                .arg(WATCHDOG)
                .arg("browser-pool-watchdog")
                .arg(self.dir.join("lock"))
                .arg(self.state_path())
                .arg(pgid.to_string())
                .arg(IDLE.to_string())
                .arg(self.profile())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .status()
                .expect("cannot start the browser pool's watchdog");
            assert!(status.success(), "the browser pool's watchdog: {status}");
        }

        /// Ends the slot's browser and forgets it.
        fn end(&mut self) {
            // Only a WebDriver driver's group: a browser that died on its
            // own leaves its process group's number behind in the state,
            // and the system may have given it to something else since.
            if let Some(pgid) = self.pgid.take()
                && std::fs::read(format!("/proc/{pgid}/cmdline")).is_ok_and(|cmdline| {
                    let program = cmdline.split(|&b| b == 0).next().unwrap_or_default();
                    program.ends_with(b"chromedriver") || program.ends_with(b"geckodriver")
                })
            {
                kill_group(pgid);
            }
            let _ = std::fs::remove_file(self.state_path());
            let _ = std::fs::remove_dir_all(self.profile());
        }

        /// Gives the slot back: the browser stays for the next test, or
        /// ends when this test failed.
        pub(super) fn give_back(&mut self, failed: bool) {
            if failed {
                self.end();
            } else if let Ok(state) = std::fs::File::options()
                .append(true)
                .open(self.state_path())
            {
                // The watchdog counts idleness from here.
                let _ = state.set_modified(std::time::SystemTime::now());
            }
        }
    }
}

impl Browser {
    /// A headless Chromium, `width` × `height`, with a profile that no
    /// other test uses at the same time.
    pub async fn start(width: u32, height: u32) -> Self {
        Self::launch(Engine::Chromium, width, height, Emulation::default()).await
    }

    /// A headless Firefox, `width` × `height`, with a profile that no
    /// other test uses at the same time.
    pub async fn firefox(width: u32, height: u32) -> Self {
        Self::launch(Engine::Firefox, width, height, Emulation::default()).await
    }

    /// A headless `engine`, `width` × `height`, that tells pages the
    /// system settings in `emulation`: a kept one from the [`pool`], in a
    /// fresh tab, when one is free; otherwise one started for this test.
    /// (An emulated phone's screen is set up for one session, so phones
    /// always get a browser of their own.)
    pub async fn launch(engine: Engine, width: u32, height: u32, emulation: Emulation) -> Self {
        let kind = format!(
            "{}-{width}x{height}{}{}",
            engine.name(),
            if emulation.dark { "-dark" } else { "" },
            if emulation.reduced_motion {
                "-reduced-motion"
            } else {
                ""
            }
        );
        let lease = if width >= MIN_WINDOW_WIDTH {
            pool::take(&kind)
        } else {
            None
        };
        let Some(mut lease) = lease else {
            let profile = tempfile::tempdir().unwrap();
            let launch = Launch {
                width,
                height,
                emulation,
                dir: profile.path(),
                kept: false,
            };
            let started = Self::start_engine(engine, &launch).await;
            return Self {
                client: started.client,
                engine,
                _bidi: started.bidi,
                owner: Owner::Test {
                    driver: started.driver,
                    _profile: profile,
                },
            };
        };
        if let Some(client) = lease.reuse(engine).await {
            return Self {
                client,
                engine,
                _bidi: None,
                owner: Owner::Pool(lease),
            };
        }
        let profile = lease.profile();
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).unwrap();
        let launch = Launch {
            width,
            height,
            emulation,
            dir: &profile,
            kept: true,
        };
        let started = Self::start_engine(engine, &launch).await;
        let port = started.port;
        let pgid = started.driver.id().expect("the driver is running");
        lease.keep(&started.client, port, pgid).await;
        Self {
            client: started.client,
            engine,
            _bidi: started.bidi,
            owner: Owner::Pool(lease),
        }
    }

    /// Starts `engine` and its driver as `launch` says.
    async fn start_engine(engine: Engine, launch: &Launch<'_>) -> Started {
        match engine {
            Engine::Chromium => Self::start_chromium(launch).await,
            Engine::Firefox => Self::start_firefox(launch).await,
        }
    }

    async fn start_firefox(launch: &Launch<'_>) -> Started {
        let (firefox, geckodriver) = tokio::task::spawn_blocking(firefox_paths).await.unwrap();
        let port = free_port();
        // geckodriver makes a fresh profile under --profile-root (this
        // browser's own directory) and lets Firefox choose its
        // Marionette port, so parallel tests do not meet.
        let driver = spawn_driver(
            &[],
            &geckodriver,
            &[
                format!("--port={port}"),
                "--host=127.0.0.1".to_string(),
                format!("--profile-root={}", launch.dir.display()),
                format!("--binary={}", firefox.display()),
                format!("--websocket-port={}", free_port()),
            ],
            port,
            &launch.dir.join("geckodriver.log"),
            launch.kept,
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
        if launch.emulation.dark {
            // The system theme, and the content override that follows it
            // (0 = dark), so pages see `prefers-color-scheme: dark`.
            prefs.insert("ui.systemUsesDarkTheme".to_string(), json!(1));
            prefs.insert(
                "layout.css.prefers-color-scheme.content-override".to_string(),
                json!(0),
            );
        }
        if launch.emulation.reduced_motion {
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
                    "-width", launch.width.max(MIN_WINDOW_WIDTH).to_string(),
                    "-height", launch.height.to_string(),
                ],
                "prefs": prefs,
            }),
        );
        let client = Client::new_session(&format!("http://127.0.0.1:{port}"), caps.into())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start headless Firefox through geckodriver: {e}; its log: {}",
                    std::fs::read_to_string(launch.dir.join("geckodriver.log")).unwrap_or_default()
                )
            });
        // -width/-height size the window; make sure the viewport is what
        // the test asked for whatever the window's chrome takes.
        client
            .set_window_size(launch.width.max(MIN_WINDOW_WIDTH), launch.height)
            .await
            .unwrap();
        // Headless Firefox will not make a window narrower than 500 CSS
        // pixels: a phone's screen is WebDriver BiDi's viewport override
        // (what Firefox's responsive design mode does), three device
        // pixels per CSS pixel as on a phone. The override lasts as long
        // as the BiDi connection, which the browser keeps.
        let bidi = if launch.width < MIN_WINDOW_WIDTH {
            Some(phone_viewport(&client, launch.width, launch.height).await)
        } else {
            None
        };
        Started {
            client,
            driver,
            port,
            bidi,
        }
    }

    async fn start_chromium(launch: &Launch<'_>) -> Started {
        tokio::task::spawn_blocking(ensure_installed).await.unwrap();
        let port = free_port();
        let driver = spawn_driver(
            &[],
            Path::new(CHROMEDRIVER),
            &[format!("--port={port}")],
            port,
            &launch.dir.join("chromedriver.log"),
            launch.kept,
        )
        .await;
        let url = format!("http://127.0.0.1:{port}");
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".to_string(),
            "--disable-gpu".to_string(),
            "--disable-quic".to_string(),
            "--no-first-run".to_string(),
            "--disable-background-networking".to_string(),
            "--disable-component-update".to_string(),
            "--disable-sync".to_string(),
            format!("--user-data-dir={}", launch.dir.join("chromium").display()),
            format!("--window-size={},{}", launch.width, launch.height),
        ];
        if launch.emulation.dark {
            // Blink's preferred colour scheme (0 = dark) and the system's
            // dark theme: pages see `prefers-color-scheme: dark`.
            args.push("--blink-settings=preferredColorScheme=0".to_string());
            args.push("--force-dark-mode".to_string());
        }
        if launch.emulation.reduced_motion {
            args.push("--force-prefers-reduced-motion".to_string());
        }
        let mut options = json!({ "binary": CHROMIUM, "args": args });
        if launch.width < MIN_WINDOW_WIDTH {
            // Headless Chromium will not make a window narrower than 500
            // pixels: a phone's screen is chromedriver's mobile emulation
            // (its viewport, three device pixels per CSS pixel, touch).
            options["mobileEmulation"] = json!({
                "deviceMetrics": {
                    "width": launch.width, "height": launch.height, "pixelRatio": 3.0,
                    "mobile": true, "touch": true,
                },
            });
        }
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".to_string(), options);
        let client = Client::new_session(&url, caps.into())
            .await
            .unwrap_or_else(|e| panic!("cannot start headless Chromium through chromedriver: {e}"));
        Started {
            client,
            driver,
            port,
            bidi: None,
        }
    }

    /// The element with this `data-testid`, once it exists.
    pub async fn testid(&self, id: &str) -> Element {
        let selector = format!("[data-testid=\"{id}\"]");
        self.client
            .wait_for(&selector, TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("no element [data-testid={id}] on the page: {e}"))
    }

    /// Evaluates `script` (a function body) until it returns true, or
    /// fails after the timeout.
    pub async fn until(&self, what: &str, script: &str) {
        if !self.wait_in_page(script).await {
            panic!("the page never showed {what}");
        }
    }

    /// Waits until `script` (a function body) returns a value equal to
    /// `expected` (compared as JSON), or fails after the timeout showing
    /// what it returned last.
    pub async fn until_equals(&self, what: &str, script: &str, expected: &serde_json::Value) {
        let want = serde_json::to_string(&expected.to_string()).unwrap();
        let check = format!(
            "const got = (() => {{ {script} }})(); \
             return JSON.stringify(got) === JSON.stringify(JSON.parse({want}));"
        );
        if !self.wait_in_page(&check).await {
            let shown = self.eval(script).await;
            panic!("the page never showed {what}: it shows {shown:#}");
        }
    }

    /// Waits in the page itself until `check` (a function body) returns
    /// true: true when it did, false when the timeout passed. The page
    /// checks every 10 ms, so a wait costs one WebDriver command instead of
    /// one every 25 ms (those round trips through the driver were a large
    /// part of a browser test's CPU). A wait whose page goes away (a
    /// reload, a navigation) is started again in the new one; an exception
    /// in `check` fails the test.
    async fn wait_in_page(&self, check: &str) -> bool {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        // What WebDriver last said when a wait could not run: a page going
        // away is brief, a driver that stopped answering is not.
        let mut failed: Option<super::webdriver::Error> = None;
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                if let Some(error) = failed {
                    panic!(
                        "{}: the page could not be checked: {error}",
                        self.engine.name()
                    );
                }
                return false;
            }
            // Well under WebDriver's script timeout (30 s by default).
            let slice = (deadline - now).min(Duration::from_secs(5));
            let waiter = format!(
                "const done = arguments[arguments.length - 1];
const check = () => {{ {check} }};
const end = Date.now() + {ms};
const tick = () => {{
  let ok;
  try {{ ok = check(); }} catch (e) {{ done({{ error: String((e && e.stack) || e) }}); return; }}
  if (ok === true) done(true);
  else if (Date.now() >= end) done(false);
  else setTimeout(tick, 10);
}};
tick();",
                ms = slice.as_millis()
            );
            match self.client.execute_async(&waiter, vec![]).await {
                Ok(serde_json::Value::Bool(true)) => return true,
                Ok(serde_json::Value::Bool(false)) => failed = None,
                Ok(value) => panic!(
                    "{}: a wait's check failed: {}\n{check}",
                    self.engine.name(),
                    value["error"]
                ),
                // The page went away under the wait.
                Err(error) => {
                    failed = Some(error);
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
            }
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
        let actions: Vec<KeyAction> = keys
            .iter()
            .flat_map(|&key| [KeyAction::Down(key), KeyAction::Up(key)])
            .collect();
        self.client.keys(&actions).await.unwrap();
    }

    /// Holds `modifier` while pressing `key` (Shift+Tab).
    pub async fn chord(&self, modifier: Key, key: Key) {
        let (modifier, key) = (char::from(modifier), char::from(key));
        let actions = [
            KeyAction::Down(modifier),
            KeyAction::Down(key),
            KeyAction::Up(key),
            KeyAction::Up(modifier),
        ];
        self.client.keys(&actions).await.unwrap();
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

impl Browser {
    /// The accessible name and role the browser computes for `element`.
    pub async fn accessible(&self, element: &Element) -> (String, String) {
        let mut out = Vec::new();
        for what in ["computedlabel", "computedrole"] {
            let value = self
                .client
                // WebDriver's Get Computed Label / Get Computed Role: the
                // name and role the browser's own accessibility tree gives
                // the element, which is what a screen reader announces.
                .command(&format!("element/{}/{what}", element.element_id()), None)
                .await
                .unwrap_or_else(|e| panic!("{}: {what} failed: {e}", self.engine.name()));
            out.push(value.as_str().unwrap_or_default().to_string());
        }
        (out[0].clone(), out[1].clone())
    }
}
