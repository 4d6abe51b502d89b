//! The web chat page's accessibility, in real browsers (Debian's headless
//! Chromium and Firefox; see tests/support/browser.rs): an axe-core audit
//! (WCAG 2 A and AA rules) of the login view and of a conversation with a
//! reply, a tool card and an approval; the names and roles screen readers
//! get for the controls; a whole session driven from the keyboard alone
//! with a visible focus indicator wherever the focus lands; and the user's
//! dark colour scheme and reduced-motion setting respected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::support::browser::Key;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::browser::{Browser, Emulation, Engine};
use support::gateway::Gateway;
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};

// ---- axe-core --------------------------------------------------------------

/// axe-core's script, installed by `.ci/axe-core` (pinned, from npm) on
/// first use.
fn axe_source() -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/axe-core");
    let output = std::process::Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let path = stdout
        .lines()
        .find_map(|l| l.strip_prefix("AXE_CORE="))
        .filter(|_| output.status.success())
        .unwrap_or_else(|| {
            panic!(
                "`.ci/axe-core` could not install axe-core ({}); it needs npm and the npm \
                 registry: {stdout}",
                output.status
            )
        });
    std::fs::read_to_string(path).unwrap()
}

/// Runs axe-core's WCAG 2.0/2.1/2.2 level A and AA rules on the page as it
/// is and returns the violations (rule, impact, and each failing node).
/// axe is injected through WebDriver's Execute Script, which the page's
/// CSP does not govern (the page itself could not load it: `script-src
/// 'self'`).
async fn axe_violations(browser: &Browser, axe: &str) -> Value {
    let loaded = browser
        .eval(&format!("{axe}\n;return typeof window.axe?.run;"))
        .await;
    assert_eq!(loaded, json!("function"), "axe-core did not load");
    browser
        .eval(
            "return window.axe.run(document, { \
               runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa'] }, \
               resultTypes: ['violations'] \
             }).then((r) => r.violations.map((v) => ({ \
               rule: v.id, impact: v.impact, help: v.help, \
               nodes: v.nodes.map((n) => n.target.join(' ') + ' — ' + n.failureSummary) })));",
        )
        .await
}

/// A conversation in the page: a reply with markdown and a code block,
/// then a tool call that asks for approval (shown, then allowed).
async fn audit(engine: Engine) {
    let axe = tokio::task::spawn_blocking(axe_source).await.unwrap();
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::sse(anthropic_text(
        "Here is **some** code:\n\n```rust\nfn main() {}\n```\n\nand a [link](https://example.com/).",
        10,
    )));
    let marker = sandbox.work().join(format!("ran-{}", uuid::Uuid::new_v4()));
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_a11y",
        "bash",
        &json!({"command": format!("touch {}", marker.display())}),
    )));
    mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser.testid("login-secret").await;
    let mut found = serde_json::Map::new();
    found.insert("login".into(), axe_violations(&browser, &axe).await);

    browser
        .sign_in(gateway.addr, gateway.token.as_deref().unwrap())
        .await;
    let input = browser.testid("message-input").await;
    input.send_keys("Show me code").await.unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser
        .until(
            "the reply with code",
            "return !!document.querySelector('[data-testid=message][data-role=assistant] pre');",
        )
        .await;
    browser
        .until(
            "the session in the list",
            "return document.querySelectorAll('[data-testid=session-item]').length === 1;",
        )
        .await;
    found.insert("reply".into(), axe_violations(&browser, &axe).await);

    input.send_keys("Touch the file").await.unwrap();
    browser.testid("send").await.click().await.unwrap();
    let allow = browser.testid("approval-allow-once").await;
    found.insert("approval".into(), axe_violations(&browser, &axe).await);
    browser
        .screenshot(&format!("a11y-{}-approval", engine.name()))
        .await;
    allow.click().await.unwrap();
    browser
        .until(
            "the tool card and the final reply",
            "const m = [...document.querySelectorAll('[data-testid=message][data-role=assistant]')]; \
             return !!document.querySelector('[data-testid=tool-card]') \
               && m.some((e) => e.textContent.trim() === 'Done.');",
        )
        .await;
    assert!(marker.exists(), "the approved command did not run");
    found.insert("tool".into(), axe_violations(&browser, &axe).await);

    // Every audited view, with no violation in any.
    let none: serde_json::Map<String, Value> =
        found.keys().map(|view| (view.clone(), json!([]))).collect();
    assert_eq!(
        Value::Object(found),
        Value::Object(none),
        "{}: axe-core found WCAG 2 A/AA violations",
        engine.name()
    );
}

#[tokio::test]
async fn chromium_axe_finds_no_wcag_violations() {
    audit(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_axe_finds_no_wcag_violations() {
    audit(Engine::Firefox).await;
}

// ---- names and roles -------------------------------------------------------

/// The controls' accessible names (non-empty) and roles, as the browser's
/// accessibility tree computes them (WebDriver's Get Computed Label and
/// Role), on the login view and signed in.
async fn names_and_roles(engine: Engine) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::sse(anthropic_text("Hi.", 10)));
    let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    let mut got = serde_json::Map::new();
    let mut want = serde_json::Map::new();
    let mut check = async |browser: &Browser, id: &str, role: &str| {
        let element = browser.testid(id).await;
        let (name, computed) = browser.accessible(&element).await;
        got.insert(id.into(), json!([!name.trim().is_empty(), computed]));
        want.insert(id.into(), json!([true, role]));
    };
    // A password field has no ARIA role of its own (HTML-AAM); Chromium
    // calls it a textbox, Firefox gives none.
    let password_role = match engine {
        Engine::Chromium => "textbox",
        Engine::Firefox => "",
    };
    for (id, role) in [
        ("login-secret", password_role),
        ("stay-signed-in", "checkbox"),
        ("login-submit", "button"),
    ] {
        check(&browser, id, role).await;
    }
    browser
        .sign_in(gateway.addr, gateway.token.as_deref().unwrap())
        .await;
    browser
        .testid("message-input")
        .await
        .send_keys("Hello")
        .await
        .unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser.testid("session-item").await;
    for (id, role) in [
        ("session-search", "searchbox"),
        ("session-new", "button"),
        ("session-item", "button"),
        ("message-input", "textbox"),
        ("send", "button"),
        ("stop", "button"),
    ] {
        check(&browser, id, role).await;
    }
    assert_eq!(Value::Object(got), Value::Object(want), "{}", engine.name());
}

#[tokio::test]
async fn chromium_controls_have_names_and_roles() {
    names_and_roles(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_controls_have_names_and_roles() {
    names_and_roles(Engine::Firefox).await;
}

// ---- keyboard only ---------------------------------------------------------

/// The colour helpers the page checks share: `rgb(css colour)` and WCAG's
/// relative luminance `lum`.
macro_rules! colour_math {
    () => {
        "
const rgb = (s) => { const m = (s.match(/[\\d.]+/g) || []).map(Number); return { r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1 }; };
const lum = ({ r, g, b }) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };"
    };
}

/// The focused element's focus indicator: [testid, :focus-visible, an
/// outline (or box-shadow) is drawn, its contrast with the background
/// ≥ 3:1 (WCAG 1.4.11)].
const FOCUS_RING: &str = concat!(colour_math!(), "
const el = document.activeElement, cs = getComputedStyle(el);
let bg = null;
for (let e = el.parentElement; e && !bg; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.a > 0) bg = c; }
bg = bg || { r: 255, g: 255, b: 255 };
const outline = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) > 0;
const shadow = cs.boxShadow && cs.boxShadow !== 'none';
const ringColour = outline ? rgb(cs.outlineColor) : null;
const ratio = ringColour ? (Math.max(lum(ringColour), lum(bg)) + 0.05) / (Math.min(lum(ringColour), lum(bg)) + 0.05) : (shadow ? 3 : 0);
return [el.dataset.testid || el.outerHTML.slice(0, 80), el.matches(':focus-visible'), !!(outline || shadow), ratio >= 3];");

async fn assert_focus_ring(browser: &Browser, id: &str) {
    assert_eq!(
        browser.eval(FOCUS_RING).await,
        json!([id, true, true, true]),
        "{}: no visible focus indicator on {id} (testid, :focus-visible, drawn, contrast ≥ 3)",
        browser.engine.name()
    );
}

async fn keyboard_only(engine: Engine) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["First ", "answer."]),
        delay: Duration::from_millis(20),
        gate: None,
    });
    // The second reply never starts: the run stays busy until stopped.
    let never = Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["Never ", "shown."]),
        delay: Duration::ZERO,
        gate: Some(never.clone()),
    });
    mock.push(Reply::sse(anthropic_text("Third answer.", 10)));
    let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser.testid("login-secret").await;

    // Sign in: Tab to the field, type the token, Enter.
    browser
        .tab_until(
            "the login field",
            false,
            "el.dataset.testid === 'login-secret'",
        )
        .await;
    assert_focus_ring(&browser, "login-secret").await;
    browser.type_text(gateway.token.as_deref().unwrap()).await;
    browser.press(&[Key::Enter.into()]).await;
    browser.until_signed_in().await;

    // Type a message, Tab to Send, press Space; the reply streams in.
    browser
        .tab_until(
            "the message box",
            false,
            "el.dataset.testid === 'message-input'",
        )
        .await;
    browser.type_text("First question").await;
    browser
        .tab_until("the send button", false, "el.dataset.testid === 'send'")
        .await;
    assert_focus_ring(&browser, "send").await;
    browser.press(&[Key::Space.into()]).await;
    let replies = "return [...document.querySelectorAll('[data-testid=message][data-role=assistant]')] \
                   .map((m) => m.textContent.trim());";
    browser
        .until(
            "the first reply",
            &format!("return (() => {{ {replies} }})().includes('First answer.');"),
        )
        .await;

    // A second message, sent with Enter from the message box, keeps the
    // run busy: Tab reaches Stop, and Enter on it stops the run.
    browser
        .tab_until(
            "the message box",
            true,
            "el.dataset.testid === 'message-input'",
        )
        .await;
    browser.type_text("Second question").await;
    browser.press(&[Key::Enter.into()]).await;
    support::wait_until(
        "the model to be asked again",
        support::acp_client::TIMEOUT,
        || mock.requests().len() == 2,
    )
    .await;
    browser
        .tab_until("the stop button", false, "el.dataset.testid === 'stop'")
        .await;
    assert_focus_ring(&browser, "stop").await;
    browser.press(&[Key::Enter.into()]).await;
    browser
        .until(
            "the run stopped (Stop disabled again)",
            "return document.querySelector('[data-testid=stop]').disabled === true;",
        )
        .await;
    // Where the keyboard user is once Stop has done its work (checked at
    // the end, so the rest of the session is still tried): the focus must
    // not fall back to the top of the page with the button that had it.
    let focus_after_stop = browser
        .eval(
            // After the next frames (browsers move the focus off a button
            // that became disabled when they next render); a disabled
            // element is no place for the focus either.
            "return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => { \
               const el = document.activeElement; \
               done(!el || el === document.body ? 'nothing (the page body)' \
                 : el.disabled ? `the disabled ${el.dataset.testid || el.tagName}` : 'kept'); \
             })));",
        )
        .await;

    // A new session, with a message of its own. Stop handed the focus to
    // the message box; the session list is before it. (Forward, Tab would
    // leave the page for the browser's own controls and come back, and
    // headless Firefox then draws no focus ring on what it lands on.)
    browser
        .tab_until(
            "the new-session button",
            true,
            "el.dataset.testid === 'session-new'",
        )
        .await;
    assert_focus_ring(&browser, "session-new").await;
    browser.press(&[Key::Enter.into()]).await;
    browser
        .until(
            "an empty conversation",
            "return document.querySelectorAll('[data-testid=message]').length === 0;",
        )
        .await;
    browser
        .tab_until(
            "the message box",
            false,
            "el.dataset.testid === 'message-input'",
        )
        .await;
    browser.type_text("Third question").await;
    browser.press(&[Key::Enter.into()]).await;
    browser
        .until(
            "the third reply",
            &format!("return JSON.stringify((() => {{ {replies} }})()) === '[\"Third answer.\"]';"),
        )
        .await;
    browser
        .until(
            "both sessions in the list",
            "return document.querySelectorAll('[data-testid=session-item]').length === 2;",
        )
        .await;

    // Back to the first session through the list, with Shift+Tab and Enter.
    browser
        .tab_until(
            "the first session in the list",
            true,
            "el.dataset.testid === 'session-item' && el.textContent.includes('First question')",
        )
        .await;
    assert_focus_ring(&browser, "session-item").await;
    browser.press(&[Key::Enter.into()]).await;
    browser
        .until(
            "the first session's history",
            &format!(
                "const r = (() => {{ {replies} }})(); \
                 return r.includes('First answer.') && !r.includes('Third answer.');"
            ),
        )
        .await;
    browser
        .screenshot(&format!("a11y-{}-keyboard", engine.name()))
        .await;
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(
        focus_after_stop,
        json!("kept"),
        "{}: after Stop (which then disables itself) the focus was on {focus_after_stop}, \
         so a keyboard user starts again from the top of the page (WCAG 2.4.3)",
        engine.name()
    );
}

#[tokio::test]
async fn chromium_the_page_works_from_the_keyboard_alone() {
    keyboard_only(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_the_page_works_from_the_keyboard_alone() {
    keyboard_only(Engine::Firefox).await;
}

// ---- dark mode and reduced motion ------------------------------------------

/// Colours: [body background luminance, body text luminance, body text
/// contrast, every shown text's contrast failures (WCAG 1.4.3: 4.5:1, 3:1
/// for large text; disabled controls exempt)].
const COLOURS: &str = concat!(colour_math!(), "
const ratio = (a, b) => (Math.max(lum(a), lum(b)) + 0.05) / (Math.min(lum(a), lum(b)) + 0.05);
const canvas = (() => { const d = document.createElement('div'); d.style.backgroundColor = 'Canvas'; document.body.append(d); const c = rgb(getComputedStyle(d).backgroundColor); d.remove(); return c; })();
const bgOf = (el) => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c.a > 0) return c; } return canvas; };
const body = document.body, bodyBg = bgOf(body), bodyFg = rgb(getComputedStyle(body).color);
const failures = [];
for (const el of document.querySelectorAll('body *')) {
  if (!el.getClientRects().length || el.closest(':disabled')) continue;
  const text = [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join('').trim();
  if (!text) continue;
  const cs = getComputedStyle(el);
  if (cs.visibility === 'hidden') continue;
  const r = ratio(rgb(cs.color), bgOf(el));
  const size = parseFloat(cs.fontSize), bold = parseInt(cs.fontWeight, 10) >= 700;
  const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
  if (r < need) failures.push(`${el.dataset.testid || el.id || el.tagName.toLowerCase()} \"${text.slice(0, 30)}\": ${r.toFixed(2)} < ${need} (${cs.color} on ${JSON.stringify(bgOf(el))})`);
}
return [lum(bodyBg), lum(bodyFg), ratio(bodyFg, bodyBg), failures];");

/// Anything that moves: elements (and ::before/::after) with a non-zero
/// transition or animation duration, smooth scrolling, running animations.
const MOTION: &str = "
const moving = [];
const nonzero = (v) => v.split(',').some((d) => parseFloat(d) > 0);
for (const el of [document.documentElement, ...document.querySelectorAll('*')]) {
  for (const pseudo of [null, '::before', '::after']) {
    const cs = getComputedStyle(el, pseudo);
    const name = (el.dataset?.testid || el.id || el.tagName.toLowerCase()) + (pseudo || '');
    if (nonzero(cs.transitionDuration)) moving.push(`${name}: transition ${cs.transitionDuration}`);
    if (cs.animationName !== 'none' && nonzero(cs.animationDuration)) moving.push(`${name}: animation ${cs.animationName} ${cs.animationDuration}`);
    if (!pseudo && cs.scrollBehavior === 'smooth') moving.push(`${name}: smooth scrolling`);
  }
}
for (const a of document.getAnimations()) moving.push(`running animation ${a.animationName || a.id || a.constructor.name}`);
return moving;";

async fn assert_dark_and_still(browser: &Browser, view: &str) {
    let colours = browser.eval(COLOURS).await;
    let (bg, fg, contrast) = (
        colours[0].as_f64().unwrap(),
        colours[1].as_f64().unwrap(),
        colours[2].as_f64().unwrap(),
    );
    let name = browser.engine.name();
    assert!(
        bg < 0.1,
        "{name} {view}: the background is not dark in dark mode (luminance {bg})"
    );
    assert!(
        fg > 0.4,
        "{name} {view}: the text is not light in dark mode (luminance {fg})"
    );
    assert!(
        contrast >= 4.5,
        "{name} {view}: body text contrast {contrast} < 4.5"
    );
    assert_eq!(
        colours[3],
        json!([]),
        "{name} {view}: text below WCAG contrast in dark mode"
    );
    assert_eq!(
        browser.eval(MOTION).await,
        json!([]),
        "{name} {view}: something moves although the user asked for reduced motion"
    );
}

async fn dark_and_reduced_motion(engine: Engine) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["A **dark** ", "reply with `code`", "."]),
        delay: Duration::from_millis(20),
        gate: None,
    });
    let browser = Browser::launch(
        engine,
        1280,
        900,
        Emulation {
            dark: true,
            reduced_motion: true,
        },
    )
    .await;
    browser
        .client
        .goto(&format!("http://{}/", gateway.addr))
        .await
        .unwrap();
    browser.testid("login-secret").await;
    assert_eq!(
        browser
            .eval(
                "return [matchMedia('(prefers-color-scheme: dark)').matches, \
                 matchMedia('(prefers-reduced-motion: reduce)').matches];"
            )
            .await,
        json!([true, true]),
        "{}: the browser does not report the emulated settings",
        engine.name()
    );
    assert_dark_and_still(&browser, "login view").await;
    browser
        .screenshot(&format!("a11y-{}-dark-login", engine.name()))
        .await;

    browser
        .sign_in(gateway.addr, gateway.token.as_deref().unwrap())
        .await;
    browser
        .testid("message-input")
        .await
        .send_keys("Say something dark")
        .await
        .unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser
        .until(
            "the reply",
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return !!m && m.textContent.trim() === 'A dark reply with code.';",
        )
        .await;
    browser.testid("session-item").await;
    assert_dark_and_still(&browser, "signed in with a reply").await;
    // axe-core's contrast rules (and the others) on the dark page too.
    let axe = tokio::task::spawn_blocking(axe_source).await.unwrap();
    assert_eq!(
        axe_violations(&browser, &axe).await,
        json!([]),
        "{}: axe-core found WCAG 2 A/AA violations in dark mode",
        engine.name()
    );
    browser
        .screenshot(&format!("a11y-{}-dark-reply", engine.name()))
        .await;
}

#[tokio::test]
async fn chromium_dark_mode_and_reduced_motion_are_respected() {
    dark_and_reduced_motion(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_dark_mode_and_reduced_motion_are_respected() {
    dark_and_reduced_motion(Engine::Firefox).await;
}
