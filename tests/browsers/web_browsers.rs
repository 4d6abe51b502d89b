//! The web chat page in both browsers the issue names, current Chromium
//! and Firefox (Debian's, headless, through chromedriver and geckodriver;
//! see tests/support/browser.rs), on a wide desktop (1280×900) and a
//! phone's narrow screen (390×844): it signs in, sends a prompt and shows
//! the streamed reply, and on the phone nothing is wider than the screen
//! and the controls are on it. And the page's safety in a browser: the
//! gateway refuses a websocket from a page of another origin (while the
//! same script from its own origin is accepted), and the page's CSP blocks
//! an inline or a remote script that gets into its DOM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::browser::{Browser, Emulation, Engine};
use support::gateway::Gateway;
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_deltas, anthropic_text};

const DESKTOP: (u32, u32) = (1280, 900);
const PHONE: (u32, u32) = (390, 844);

/// For each control (by `data-testid`, the first match): "ok" when it is
/// shown and wholly inside the viewport, else what is wrong.
const IN_VIEW: &str = "
const vw = document.documentElement.clientWidth, vh = innerHeight;
const where = (el) => {
  if (!el) return 'missing';
  const r = el.getBoundingClientRect(), cs = getComputedStyle(el);
  if (r.width === 0 || r.height === 0 || cs.visibility === 'hidden') return 'not shown';
  if (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5)
    return `outside the ${vw}x${vh} viewport: (${Math.round(r.left)},${Math.round(r.top)})-(${Math.round(r.right)},${Math.round(r.bottom)})`;
  return 'ok';
};
const out = {};
for (const id of arguments[0]) out[id] = where(document.querySelector(`[data-testid=\"${id}\"]`));
return out;";

/// "ok" for each of `ids` when it is in the viewport.
async fn in_view(browser: &Browser, ids: &[&str]) -> Value {
    browser
        .client
        .execute(IN_VIEW, vec![json!(ids)])
        .await
        .unwrap()
}

fn all_ok(ids: &[&str]) -> Value {
    Value::Object(ids.iter().map(|id| (id.to_string(), json!("ok"))).collect())
}

/// The page's width against the viewport's: nothing may scroll sideways.
/// (A mobile browser zooms out to show a page wider than the screen, and
/// then reports a wider `innerWidth`: that counts as overflow too.)
async fn assert_no_horizontal_overflow(browser: &Browser, width: u32, when: &str) {
    let widths = browser
        .eval(
            "return [document.documentElement.scrollWidth, innerWidth, \
             [...document.querySelectorAll('body *')].filter((el) => \
               el.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5 \
               && el.getClientRects().length > 0).map((el) => \
               el.dataset.testid || el.id || el.className || el.tagName).slice(0, 8)];",
        )
        .await;
    let (scroll, inner) = (widths[0].as_f64().unwrap(), widths[1].as_f64().unwrap());
    assert!(
        scroll <= inner && inner <= f64::from(width),
        "{} {when}: the page is {scroll}px wide in a {width}px screen (viewport {inner}px; \
         it scrolls sideways); wider than the screen: {}",
        browser.engine.name(),
        widths[2]
    );
}

/// On the phone, the session list is on the screen, or the page has its
/// own control for it (one whose `aria-controls` names the list or a panel
/// around it) that is, and pressing it brings the list up.
async fn assert_session_list_reachable(browser: &Browser) {
    let item = in_view(browser, &["session-item"]).await;
    if item == all_ok(&["session-item"]) {
        return;
    }
    let opened = browser
        .eval(
            "const list = document.querySelector('[data-testid=session-list]'); \
             const ids = []; \
             for (let e = list; e; e = e.parentElement) if (e.id) ids.push(e.id); \
             const control = [...document.querySelectorAll('[aria-controls]')].find((c) => \
               c.getAttribute('aria-controls').split(/\\s+/).some((id) => ids.includes(id))); \
             if (!control) return false; \
             const r = control.getBoundingClientRect(); \
             if (r.width === 0 || r.right > innerWidth || r.bottom > innerHeight) return false; \
             control.click(); return true;",
        )
        .await;
    assert_eq!(
        opened,
        json!(true),
        "{}: on a phone the session list is not on the screen ({item}) and no control \
         (aria-controls naming the list or its panel) that is on it opens it",
        browser.engine.name()
    );
    browser
        .until(
            "the session list opened by its control",
            "const el = document.querySelector('[data-testid=session-item]'); \
             const r = el && el.getBoundingClientRect(); \
             return !!r && r.width > 0 && r.left >= 0 && r.right <= innerWidth \
               && r.top >= 0 && r.bottom <= innerHeight;",
        )
        .await;
}

/// Signs in, sends a prompt to the mock model and sees the streamed reply
/// rendered as markdown; on a phone-sized screen, checks the layout at each
/// step; screenshots each state.
async fn chat_round_trip(engine: Engine, (width, height): (u32, u32)) {
    let phone = width < 600;
    let shot = |state: &str| {
        format!(
            "browsers-{}-{}-{state}",
            engine.name(),
            if phone { "phone" } else { "desktop" }
        )
    };
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["**Streamed**", " reply ", "from `pincer`", "."]),
        delay: Duration::from_millis(30),
        gate: None,
    });
    let browser = Browser::launch(engine, width, height, Emulation::default()).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser.testid("login-secret").await;
    // The page's viewport is the size asked for, else the layout checks
    // below would check another screen.
    assert_eq!(
        browser
            .eval("return [innerWidth, devicePixelRatio, outerWidth];")
            .await[0],
        json!(width),
        "{}: {}",
        engine.name(),
        browser
            .eval("return [innerWidth, devicePixelRatio, outerWidth];")
            .await
    );
    // Without the emulation flags the browser reports the usual light,
    // moving system (the dark / reduced-motion tests in web_a11y.rs start
    // browsers that say otherwise).
    assert_eq!(
        browser
            .eval(
                "return [matchMedia('(prefers-color-scheme: dark)').matches, \
                 matchMedia('(prefers-reduced-motion: reduce)').matches];"
            )
            .await,
        json!([false, false])
    );
    browser.screenshot(&shot("login")).await;
    if phone {
        assert_no_horizontal_overflow(&browser, width, "on the login view").await;
        let ids = ["login-secret", "stay-signed-in", "login-submit"];
        assert_eq!(in_view(&browser, &ids).await, all_ok(&ids), "login view");
    }

    browser
        .sign_in(gateway.addr, gateway.token.as_deref().unwrap())
        .await;
    browser.screenshot(&shot("signed-in")).await;
    let composer = ["message-input", "send", "stop"];
    if phone {
        assert_no_horizontal_overflow(&browser, width, "signed in").await;
        assert_eq!(
            in_view(&browser, &composer).await,
            all_ok(&composer),
            "signed in"
        );
    }

    browser
        .testid("message-input")
        .await
        .send_keys("Say hello")
        .await
        .unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser
        .until(
            "the streamed reply",
            "const m = document.querySelectorAll('[data-testid=message][data-role=assistant]'); \
             return m.length === 1 && m[0].textContent.trim() === 'Streamed reply from pincer.';",
        )
        .await;
    let rendered = browser
        .eval(
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return [m.querySelector('strong')?.textContent, m.querySelector('code')?.textContent, \
               [...document.querySelectorAll('[data-testid=message][data-role=user]')] \
                 .map((u) => u.querySelector('.body').textContent.trim())];",
        )
        .await;
    assert_eq!(rendered, json!(["Streamed", "pincer", ["Say hello"]]));
    // The session is listed once its first prompt has run.
    browser
        .until(
            "the session in the list",
            "return document.querySelectorAll('[data-testid=session-item]').length === 1;",
        )
        .await;
    browser.screenshot(&shot("reply")).await;
    if phone {
        assert_no_horizontal_overflow(&browser, width, "with a reply").await;
        assert_eq!(
            in_view(&browser, &composer).await,
            all_ok(&composer),
            "with a reply"
        );
        assert_session_list_reachable(&browser).await;
        browser.screenshot(&shot("sessions")).await;
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let sent = requests[0].body.to_string();
    assert!(
        sent.contains("Say hello"),
        "the model was not sent the prompt: {sent}"
    );
}

#[tokio::test]
async fn chromium_desktop_signs_in_and_streams_a_reply() {
    chat_round_trip(Engine::Chromium, DESKTOP).await;
}

#[tokio::test]
async fn chromium_phone_signs_in_streams_a_reply_and_fits_the_screen() {
    chat_round_trip(Engine::Chromium, PHONE).await;
}

#[tokio::test]
async fn firefox_desktop_signs_in_and_streams_a_reply() {
    chat_round_trip(Engine::Firefox, DESKTOP).await;
}

#[tokio::test]
async fn firefox_phone_signs_in_streams_a_reply_and_fits_the_screen() {
    chat_round_trip(Engine::Firefox, PHONE).await;
}

// ---- origin and CSP ------------------------------------------------------

/// A tiny HTTP server on its own loopback port (so another origin than the
/// gateway's) that answers every request with `page`, and records the
/// paths it was asked for.
struct OtherOrigin {
    addr: SocketAddr,
    paths: Arc<Mutex<Vec<String>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl OtherOrigin {
    async fn start(page: String, content_type: &'static str) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let seen = paths.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let page = page.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                    seen.lock().unwrap().push(path);
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{page}",
                        page.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        Self {
            addr,
            paths,
            _task: task,
        }
    }
}

/// A script that opens the gateway's websocket, answers the challenge with
/// a `connect` carrying the right token, and on `hello-ok` sends a prompt
/// to session `key`; it records what happened in `window.__probe` (an
/// array of steps) and sets `window.__probeDone` when it has finished.
fn probe_script(gateway: SocketAddr, token: &str, key: &str) -> String {
    let connect = json!({
        "type": "req", "id": "c", "method": "connect",
        "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "probe", "version": "1", "platform": "browser", "mode": "webchat"},
            "role": "operator", "scopes": ["operator.admin"], "caps": [],
            "auth": {"token": token},
        },
    });
    let send = json!({
        "type": "req", "id": "s", "method": "chat.send",
        "params": {"sessionKey": key, "message": "sent from a page", "idempotencyKey": uuid::Uuid::new_v4().to_string()},
    });
    format!(
        "window.__probe = []; window.__probeDone = false;
const ws = new WebSocket('ws://{gateway}/');
const done = () => {{ window.__probeDone = true; }};
ws.onopen = () => window.__probe.push('open');
ws.onerror = () => window.__probe.push('error');
ws.onclose = (e) => {{ window.__probe.push('close ' + e.code); done(); }};
ws.onmessage = (m) => {{
  const f = JSON.parse(m.data);
  if (f.type === 'event' && f.event === 'connect.challenge') ws.send(JSON.stringify({connect}));
  else if (f.type === 'res' && f.id === 'c') {{
    window.__probe.push(f.ok ? 'hello-ok' : 'refused: ' + (f.error && f.error.message));
    if (f.ok) ws.send(JSON.stringify({send})); else done();
  }} else if (f.type === 'res' && f.id === 's') {{
    window.__probe.push(f.ok ? 'chat.send ok' : 'chat.send refused');
    done();
  }}
}};"
    )
}

/// The session keys the gateway lists.
async fn listed_keys(gateway: &Gateway) -> Vec<String> {
    let mut admin = gateway.admin().await;
    let listed = admin.call_ok("sessions.list", json!({})).await;
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"].as_str().unwrap().to_string())
        .collect()
}

async fn foreign_origin_is_refused(engine: Engine) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    let key = format!("web-origin:{}", uuid::Uuid::new_v4());
    let script = probe_script(gateway.addr, &token, &key);
    let elsewhere = OtherOrigin::start(
        format!(
            "<!doctype html><html lang=en><meta charset=utf-8><title>elsewhere</title>\
             <script>{script}</script></html>"
        ),
        "text/html; charset=utf-8",
    )
    .await;
    let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;

    // The page from the other origin, with the right token, is refused at
    // the upgrade: the socket never opens.
    browser
        .client
        .goto(&format!("http://{}/", elsewhere.addr))
        .await
        .unwrap();
    browser
        .until(
            "the other origin's probe to end",
            "return window.__probeDone === true;",
        )
        .await;
    assert_eq!(
        browser.eval("return window.__probe;").await,
        json!(["error", "close 1006"]),
        "{}: a page from {} reached the gateway",
        engine.name(),
        elsewhere.addr
    );
    let refused = gateway
        .stderr
        .wait_line(TIMEOUT, |line| {
            line.contains("refused a browser connection from a foreign origin")
                .then_some(())
        })
        .await;
    assert!(
        refused.is_some(),
        "the gateway did not log the refused origin: {}",
        gateway.stderr.text()
    );
    assert_eq!(listed_keys(&gateway).await, Vec::<String>::new());
    assert_eq!(mock.requests().len(), 0);

    // Control: the same script in a page of the gateway's own origin
    // (run through WebDriver, which the page's CSP does not govern) is
    // accepted, and its prompt makes the session.
    mock.push(Reply::sse(anthropic_text("accepted", 10)));
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser.testid("login-secret").await;
    browser.eval(&format!("{script}\nreturn true;")).await;
    browser
        .until(
            "the own origin's probe to end",
            "return window.__probeDone === true;",
        )
        .await;
    assert_eq!(
        browser.eval("return window.__probe;").await,
        json!(["open", "hello-ok", "chat.send ok"])
    );
    support::wait_until("the model to get the prompt", TIMEOUT, || {
        mock.requests().len() == 1
    })
    .await;
    assert!(listed_keys(&gateway).await.contains(&key));
}

#[tokio::test]
async fn chromium_a_page_from_another_origin_cannot_use_the_gateway() {
    foreign_origin_is_refused(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_a_page_from_another_origin_cannot_use_the_gateway() {
    foreign_origin_is_refused(Engine::Firefox).await;
}

/// The page's CSP in a browser: a `<script>` element that gets into the DOM
/// (here put there through WebDriver, whose own scripts the CSP does not
/// govern) neither runs inline code nor loads a script from another
/// origin, and the browser reports each as a policy violation.
async fn csp_blocks_injected_scripts(engine: Engine) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let elsewhere = OtherOrigin::start("window.__remote = 1;".to_string(), "text/javascript").await;
    let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser.testid("login-secret").await;
    browser
        .eval(&format!(
            "window.__violations = []; window.__byWebDriver = 1; \
             document.addEventListener('securitypolicyviolation', (e) => \
               window.__violations.push([e.effectiveDirective, e.blockedURI, e.disposition])); \
             const inline = document.createElement('script'); \
             inline.textContent = 'window.__inline = 1;'; \
             document.head.append(inline); \
             const remote = document.createElement('script'); \
             remote.src = 'http://{}/remote.js'; \
             document.head.append(remote); \
             return true;",
            elsewhere.addr
        ))
        .await;
    browser
        .until(
            "two policy violations",
            "return window.__violations.length >= 2;",
        )
        .await;
    let state = browser
        .eval(
            "return [typeof window.__inline, typeof window.__remote, window.__byWebDriver, \
             window.__violations.map(([d, u, how]) => [d, u.replace(/:\\d+\\/.*/, ''), how]).sort()];",
        )
        .await;
    assert_eq!(
        state,
        json!([
            "undefined",
            "undefined",
            1,
            [
                ["script-src-elem", "http://127.0.0.1", "enforce"],
                ["script-src-elem", "inline", "enforce"],
            ]
        ]),
        "{}",
        engine.name()
    );
    assert_eq!(*elsewhere.paths.lock().unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn chromium_the_csp_blocks_an_injected_inline_or_remote_script() {
    csp_blocks_injected_scripts(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_the_csp_blocks_an_injected_inline_or_remote_script() {
    csp_blocks_injected_scripts(Engine::Firefox).await;
}
