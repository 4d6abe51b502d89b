//! The web chat page the gateway serves, in a real browser (Debian's
//! headless Chromium through chromedriver; see tests/support/browser.rs).
//! Each test is one thing a user does on the page: sign in and get a
//! streamed markdown reply; answer an approval; stop a run; reload and find
//! the history; rename and delete a session; change the model and the
//! thinking level; attach an image; see usage and cost; send while the
//! agent is busy; watch a session another client runs; keep the text whole
//! across a dropped line and a gateway restart. Model text with markup in
//! it stays text. Screenshots of the main states go to target/screenshots/.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::bridge::{Proxy, free_port, gateway_on};
use support::browser::{Browser, Emulation, Engine};
use support::gateway::Gateway;
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};

/// The messages shown, as (role, text).
const MESSAGES: &str = "return [...document.querySelectorAll('[data-testid=message]')]\
     .map(m => [m.dataset.role, m.querySelector('.body')?.textContent.trim() ?? '']);";

/// A gateway with the mock model, and the page signed in to it.
struct Page {
    sandbox: Sandbox,
    mock: MockModel,
    gateway: Gateway,
    browser: Browser,
}

impl Page {
    async fn open() -> Self {
        Self::open_in(Engine::Chromium).await
    }

    async fn open_in(engine: Engine) -> Self {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let gateway = Gateway::start(&sandbox, &mock).await;
        let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;
        let page = Self {
            sandbox,
            mock,
            gateway,
            browser,
        };
        let url = format!("http://{}/", page.gateway.addr);
        page.sign_in(&url, false).await;
        page
    }

    /// A page signed in through a proxy that records what the gateway
    /// sends it (`Proxy::downstream`).
    async fn through_proxy() -> (Self, Proxy) {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let gateway = Gateway::start(&sandbox, &mock).await;
        let proxy = Proxy::start(gateway.addr).await;
        let browser = Browser::launch(Engine::Chromium, 1280, 900, Emulation::default()).await;
        let page = Self {
            sandbox,
            mock,
            gateway,
            browser,
        };
        page.sign_in(&format!("http://127.0.0.1:{}/", proxy.port), false)
            .await;
        (page, proxy)
    }

    /// Loads `url` and signs in with the gateway's token.
    async fn sign_in(&self, url: &str, stay: bool) {
        self.browser.client.goto(url).await.unwrap();
        let token = self.gateway.token.as_deref().unwrap();
        self.browser
            .testid("login-secret")
            .await
            .send_keys(token)
            .await
            .unwrap();
        if stay {
            self.browser
                .testid("stay-signed-in")
                .await
                .click()
                .await
                .unwrap();
        }
        self.browser
            .testid("login-submit")
            .await
            .click()
            .await
            .unwrap();
        self.signed_in().await;
    }

    async fn signed_in(&self) {
        self.browser
            .until(
                "the signed-in view (and no login form)",
                "return getComputedStyle(document.getElementById('app')).display !== 'none' \
                 && getComputedStyle(document.getElementById('login')).display === 'none' \
                 && document.querySelector('[data-testid=connection]').dataset.state === 'connected';",
            )
            .await;
    }

    /// Saves a screenshot (named for the engine when it is not Chromium).
    async fn screenshot(&self, name: &str) {
        match self.browser.engine {
            Engine::Chromium => self.browser.screenshot(name).await,
            engine => {
                self.browser
                    .screenshot(&format!("{name}-{}", engine.name()))
                    .await
            }
        }
    }

    async fn js(&self, script: &str) -> Value {
        self.browser.client.execute(script, vec![]).await.unwrap()
    }

    async fn click(&self, testid: &str) {
        self.browser.testid(testid).await.click().await.unwrap();
    }

    /// Types `text` in the message box and presses Send.
    async fn send(&self, text: &str) {
        self.browser
            .testid("message-input")
            .await
            .send_keys(text)
            .await
            .unwrap();
        self.click("send").await;
    }

    /// Waits until the page shows these messages (role, text), in order.
    async fn until_messages(&self, what: &str, expected: &[(&str, &str)]) {
        let expected: Value = expected.iter().map(|(r, t)| json!([r, t])).collect();
        self.browser.until_equals(what, MESSAGES, &expected).await;
    }

    /// The messages shown, as (role, text).
    async fn messages(&self) -> Value {
        self.js(MESSAGES).await
    }

    async fn until_idle(&self) {
        self.browser
            .until(
                "the run's end (Stop disabled)",
                "return document.querySelector('[data-testid=stop]').disabled;",
            )
            .await;
    }

    /// The tool cards shown: kind, title, status.
    async fn cards(&self) -> Value {
        self.js(
            "return [...document.querySelectorAll('[data-testid=tool-card]')].map(c => [\
               c.querySelector('[data-testid=tool-kind]').textContent,\
               c.querySelector('[data-testid=tool-title]').textContent,\
               c.querySelector('[data-testid=tool-status]').textContent]);",
        )
        .await
    }
}

/// A model request's user messages' text blocks, in order.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_string())
        // pincer tells the model the time in a block of its own.
        .filter(|t| !t.starts_with("Current time: "))
        .collect()
}

#[tokio::test]
async fn the_page_logs_in_sends_a_prompt_and_shows_the_streamed_reply_as_markdown() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["**Hello**", " from ", "`pincer`", "."]),
        delay: Duration::from_millis(30),
        gate: None,
    });
    let browser = Browser::start(1280, 900).await;
    let page = Page {
        sandbox,
        mock,
        gateway,
        browser,
    };
    let url = format!("http://{}/", page.gateway.addr);
    page.browser.client.goto(&url).await.unwrap();
    page.screenshot("web-login").await;
    page.sign_in(&url, false).await;
    page.screenshot("web-signed-in").await;
    // The token is nowhere in the URL, and not stored: the user did not
    // ask to stay signed in.
    let token = page.gateway.token.clone().unwrap();
    let url = page.browser.client.current_url().await.unwrap();
    assert!(!url.as_str().contains(&token));
    let stored = page
        .js("return JSON.stringify(Object.entries(sessionStorage)) + JSON.stringify(Object.entries(localStorage)) + document.cookie;")
        .await;
    assert!(!stored.as_str().unwrap().contains(&token), "{stored}");

    page.send("Say hello").await;
    page.until_messages(
        "the streamed reply",
        &[("user", "Say hello"), ("assistant", "Hello from pincer.")],
    )
    .await;
    let rendered = page
        .js(
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return [m.querySelector('strong')?.textContent, m.querySelector('code')?.textContent];",
        )
        .await;
    assert_eq!(rendered, json!(["Hello", "pincer"]));
    page.until_idle().await;
    page.screenshot("web-reply").await;
    assert_eq!(page.mock.requests().len(), 1);
    assert_eq!(user_texts(&page.mock.requests()[0].body), vec!["Say hello"]);
}

#[tokio::test]
async fn staying_signed_in_keeps_the_credential_in_this_tab_only() {
    let page = Page::open().await;
    let token = page.gateway.token.clone().unwrap();
    // Not asked: a reload shows the login form again.
    page.browser.client.refresh().await.unwrap();
    page.browser.testid("login-secret").await;
    assert_eq!(
        page.js("return getComputedStyle(document.getElementById('app')).display;")
            .await,
        json!("none")
    );
    // Asked: the reload signs in by itself, from session storage (never
    // local storage or a cookie, which outlive the tab).
    let url = format!("http://{}/", page.gateway.addr);
    page.sign_in(&url, true).await;
    page.browser.client.refresh().await.unwrap();
    page.signed_in().await;
    let stores = page
        .js("return [JSON.stringify(Object.entries(sessionStorage)), JSON.stringify(Object.entries(localStorage)), document.cookie];")
        .await;
    assert!(stores[0].as_str().unwrap().contains(&token), "{stores}");
    assert_eq!(stores[1], json!("[]"));
    assert_eq!(stores[2], json!(""));
    // Signing out forgets it.
    page.click("sign-out").await;
    page.browser.testid("login-secret").await;
    let left = page
        .js("return JSON.stringify(Object.entries(sessionStorage));")
        .await;
    assert!(!left.as_str().unwrap().contains(&token), "{left}");
}

#[tokio::test]
async fn a_wrong_token_is_refused_with_a_message() {
    let page = Page::open().await;
    page.click("sign-out").await;
    page.browser
        .testid("login-secret")
        .await
        .send_keys("not-the-token")
        .await
        .unwrap();
    page.click("login-submit").await;
    page.browser
        .until(
            "the refusal",
            "return document.querySelector('[data-testid=login-error]').textContent.length > 0;",
        )
        .await;
    assert_eq!(
        page.js("return getComputedStyle(document.getElementById('app')).display;")
            .await,
        json!("none")
    );
}

#[tokio::test]
async fn markup_in_a_reply_is_shown_as_text_and_never_runs() {
    let page = Page::open().await;
    let hostile = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
    page.mock.push(Reply::sse(anthropic_text(hostile, 10)));
    page.send("Show me markup").await;
    page.until_messages(
        "the reply as text",
        &[("user", "Show me markup"), ("assistant", hostile)],
    )
    .await;
    let state = page
        .js(
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return [typeof window.__pwned, m.querySelectorAll('script, img').length];",
        )
        .await;
    assert_eq!(state, json!(["undefined", 0]));
}

/// A `bash` call that needs the user's approval; the page answers with
/// the button `answer`. Returns the marker the command would create.
async fn bash_approval(page: &Page, answer: &str) -> std::path::PathBuf {
    let marker = format!("approved-{}", uuid::Uuid::new_v4());
    page.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b1",
        "bash",
        &json!({"command": format!("echo ran > {marker} && echo printed")}),
    )));
    page.mock.push(Reply::sse(anthropic_text("Done.", 10)));
    page.send("Make the marker.").await;
    page.browser.testid("approval").await;
    let question = page
        .js("return document.querySelector('[data-testid=approval] p').textContent;")
        .await;
    assert!(
        question.as_str().unwrap().contains(&marker),
        "the question names the command: {question}"
    );
    let offered = page
        .js("return [...document.querySelectorAll('[data-testid=approval] button')].map(b => [b.dataset.testid, b.textContent]);")
        .await;
    assert_eq!(
        offered,
        json!([
            ["approval-allow-once", "Allow once"],
            ["approval-allow-always", "Always allow"],
            ["approval-reject", "Reject"]
        ])
    );
    page.screenshot("web-approval").await;
    page.click(answer).await;
    page.until_idle().await;
    page.sandbox.work().join(marker)
}

async fn approve_a_tool_call(engine: Engine) {
    let page = Page::open_in(engine).await;
    let marker = bash_approval(&page, "approval-allow-once").await;
    assert!(marker.exists(), "the approved command did not run");
    page.until_messages(
        "the reply after the tool",
        &[("user", "Make the marker."), ("assistant", "Done.")],
    )
    .await;
    let cards = page.cards().await;
    assert_eq!(cards.as_array().unwrap().len(), 1, "{cards}");
    assert_eq!(cards[0][0], json!("execute"));
    assert!(
        cards[0][1].as_str().unwrap().contains("echo ran"),
        "the card's title is the call's, not the tool's name: {cards}"
    );
    assert_eq!(cards[0][2], json!("done"));
    let terminal = page
        .js("return document.querySelector('[data-testid=tool-card] [data-testid=tool-terminal]')?.textContent;")
        .await;
    assert!(
        terminal.as_str().unwrap_or_default().contains("printed"),
        "the command's output as a terminal block: {terminal}"
    );
    let args = page
        .js("return JSON.parse(document.querySelector('[data-testid=tool-args]').textContent);")
        .await;
    assert!(
        args["command"].as_str().unwrap().contains("echo ran"),
        "{args}"
    );
    assert_eq!(
        page.js("return [...document.querySelectorAll('[data-testid=approval-outcome]')].map(o => o.textContent);")
            .await,
        json!(["Allow once"])
    );
    // The card comes between the question and the answer.
    let order = page
        .js("return [...document.querySelectorAll('#messages > li')].map(li => li.dataset.testid + ':' + (li.dataset.role || ''));")
        .await;
    assert_eq!(
        order,
        json!([
            "message:user",
            "tool-card:",
            "approval:",
            "message:assistant"
        ])
    );
    page.screenshot("web-tool-card").await;
}

#[tokio::test]
async fn rejecting_a_tool_call_runs_nothing() {
    let page = Page::open().await;
    let marker = bash_approval(&page, "approval-reject").await;
    assert!(!marker.exists(), "a rejected command ran");
    let cards = page.cards().await;
    assert_eq!(cards[0][2], json!("failed"));
    assert_eq!(
        page.js("return [...document.querySelectorAll('[data-testid=approval-outcome]')].map(o => o.textContent);")
            .await,
        json!(["Reject"])
    );
}

#[tokio::test]
async fn an_edit_is_shown_as_a_diff() {
    let page = Page::open().await;
    page.sandbox.write(
        "notes.txt",
        "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n",
    );
    page.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_e1",
        "edit",
        &json!({"path": "notes.txt", "edits": [{"oldText": "five\n", "newText": "FIVE\nfive and a half\n"}]}),
    )));
    page.mock.push(Reply::sse(anthropic_text("Edited.", 10)));
    page.send("Edit the notes.").await;
    // The default mode asks before an edit.
    page.browser.testid("approval").await;
    page.click("approval-allow-once").await;
    page.until_idle().await;
    assert_eq!(
        std::fs::read_to_string(page.sandbox.work().join("notes.txt")).unwrap(),
        "one\ntwo\nthree\nfour\nFIVE\nfive and a half\nsix\nseven\neight\nnine\nten\n"
    );
    page.browser
        .until(
            "the diff",
            "return !!document.querySelector('[data-testid=tool-diff]');",
        )
        .await;
    let diff = page
        .js("const d = document.querySelector('[data-testid=tool-diff]'); \
             return [d.querySelector('figcaption').textContent, \
                     [...d.querySelectorAll('pre > span')].map(s => s.className + ' ' + s.textContent)];")
        .await;
    assert!(
        diff[0].as_str().unwrap().ends_with("notes.txt"),
        "the diff names the file: {diff}"
    );
    assert_eq!(
        diff[1],
        json!([
            "diff-gap ⋯\n",
            "diff-ctx  two\n",
            "diff-ctx  three\n",
            "diff-ctx  four\n",
            "diff-del -five\n",
            "diff-add +FIVE\n",
            "diff-add +five and a half\n",
            "diff-ctx  six\n",
            "diff-ctx  seven\n",
            "diff-ctx  eight\n",
            "diff-gap ⋯\n"
        ])
    );
    let title = page.cards().await[0][1].clone();
    assert!(title.as_str().unwrap().contains("notes.txt"), "{title}");
    page.screenshot("web-diff").await;
}

#[tokio::test]
async fn thinking_is_shown_collapsed_and_opens() {
    let page = Page::open().await;
    page.mock.push(Reply::fixture("anthropic/thinking.sse"));
    page.send("hi").await;
    page.until_idle().await;
    page.browser
        .until(
            "the thinking",
            "return !!document.querySelector('[data-testid=thinking]');",
        )
        .await;
    let shown = page
        .js("const t = document.querySelector('[data-testid=thinking]'); \
             return [t.open, t.textContent.includes('The user says hi.'), t.closest('[data-testid=message]').dataset.role];")
        .await;
    assert_eq!(shown, json!([false, true, "assistant"]));
    page.browser
        .client
        .find("[data-testid=thinking] summary")
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        page.js("return document.querySelector('[data-testid=thinking]').open;")
            .await,
        json!(true)
    );
}

#[tokio::test]
async fn stop_aborts_the_run() {
    let page = Page::open().await;
    page.mock.push(Reply::Stall {
        body: anthropic_deltas(&["Working on it", " and on"]),
        events: 3,
    });
    page.send("Take your time").await;
    page.browser
        .until(
            "the first words and an enabled Stop",
            "return !document.querySelector('[data-testid=stop]').disabled \
             && document.querySelector('[data-testid=message][data-role=assistant] .body')?.textContent === 'Working on it';",
        )
        .await;
    page.click("stop").await;
    page.until_idle().await;
    page.browser
        .until(
            "the stopped status",
            "return document.querySelector('[data-testid=status]').textContent === 'Stopped.';",
        )
        .await;
    // The words so far stay; the page can send again.
    page.mock.push(Reply::sse(anthropic_text("Again.", 10)));
    page.send("Once more").await;
    page.until_messages(
        "the next turn",
        &[
            ("user", "Take your time"),
            ("assistant", "Working on it"),
            ("user", "Once more"),
            ("assistant", "Again."),
        ],
    )
    .await;
}

async fn reload_with_history(engine: Engine) {
    let page = Page::open_in(engine).await;
    page.sandbox.write("hello.txt", "hello from the file\n");
    page.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_r1",
        "read",
        &json!({"path": "hello.txt"}),
    )));
    page.mock
        .push(Reply::sse(anthropic_text("It says **hello**.", 10)));
    page.send("What does hello.txt say?").await;
    page.until_messages(
        "the reply",
        &[
            ("user", "What does hello.txt say?"),
            ("assistant", "It says hello."),
        ],
    )
    .await;
    page.until_idle().await;
    let before = page.cards().await;
    let url = page.browser.client.current_url().await.unwrap();
    assert!(
        url.fragment().unwrap_or_default().starts_with("s="),
        "{url}"
    );

    page.browser.client.refresh().await.unwrap();
    let token = page.gateway.token.clone().unwrap();
    page.browser
        .testid("login-secret")
        .await
        .send_keys(&token)
        .await
        .unwrap();
    page.click("login-submit").await;
    page.signed_in().await;
    page.until_messages(
        "the history",
        &[
            ("user", "What does hello.txt say?"),
            ("assistant", "It says hello."),
        ],
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('[data-testid=message][data-role=assistant] strong')?.textContent;")
            .await,
        json!("hello")
    );
    assert_eq!(page.cards().await, before);
    let output = page
        .js("return document.querySelector('[data-testid=tool-card] [data-testid=tool-output]')?.textContent;")
        .await;
    assert!(
        output
            .as_str()
            .unwrap_or_default()
            .contains("hello from the file"),
        "{output}"
    );
    // The session is the current one in the list.
    let current = page
        .js("return document.querySelector('[data-testid=session-item][aria-current=true]')?.textContent;")
        .await;
    assert!(
        current
            .as_str()
            .unwrap_or_default()
            .contains("What does hello.txt say?"),
        "{current}"
    );
    page.screenshot("web-history").await;
}

/// Two sessions, each with one exchange; the page ends on the second.
async fn two_sessions(page: &Page) {
    page.mock
        .push(Reply::sse(anthropic_text("First answer.", 10)));
    page.send("First question").await;
    page.until_idle().await;
    page.click("session-new").await;
    page.mock
        .push(Reply::sse(anthropic_text("Second answer.", 10)));
    page.send("Second question").await;
    page.until_messages(
        "the second session",
        &[("user", "Second question"), ("assistant", "Second answer.")],
    )
    .await;
    page.until_idle().await;
    page.browser
        .until(
            "both sessions listed",
            "return document.querySelectorAll('[data-testid=session-item]').length === 2;",
        )
        .await;
}

#[tokio::test]
async fn sessions_are_listed_searched_switched_renamed_and_deleted() {
    let page = Page::open().await;
    two_sessions(&page).await;
    let listed = page
        .js("return [...document.querySelectorAll('[data-testid=session-item]')].map(i => i.querySelector('.session-title').textContent).sort();")
        .await;
    assert_eq!(listed, json!(["First question", "Second question"]));
    let meta = page
        .js("return document.querySelector('[data-testid=session-item] small').textContent;")
        .await;
    let cwd = page.sandbox.work().display().to_string();
    assert!(meta.as_str().unwrap().contains(&cwd), "{meta} names {cwd}");
    assert!(
        meta.as_str().unwrap().contains("claude"),
        "{meta} names the model"
    );

    // Search.
    page.browser
        .testid("session-search")
        .await
        .send_keys("first")
        .await
        .unwrap();
    page.browser
        .until(
            "one match",
            "return document.querySelectorAll('[data-testid=session-item]').length === 1;",
        )
        .await;
    // Switch.
    page.click("session-item").await;
    page.until_messages(
        "the first session",
        &[("user", "First question"), ("assistant", "First answer.")],
    )
    .await;
    page.browser
        .testid("session-search")
        .await
        .clear()
        .await
        .unwrap();

    // Rename: the gateway keeps the name.
    page.click("session-rename").await;
    let input = page.browser.testid("rename-input").await;
    input.clear().await.unwrap();
    input.send_keys("Renamed by hand").await.unwrap();
    page.click("rename-save").await;
    page.browser
        .until(
            "the new name",
            "return document.querySelector('[data-testid=session-title]').textContent === 'Renamed by hand' \
             && [...document.querySelectorAll('[data-testid=session-item] .session-title')].some(t => t.textContent === 'Renamed by hand');",
        )
        .await;
    let mut admin = page.gateway.admin().await;
    let rows = admin.call_ok("sessions.list", json!({})).await;
    let titles: Vec<&str> = rows["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["derivedTitle"].as_str().unwrap())
        .collect();
    assert!(titles.contains(&"Renamed by hand"), "{rows}");

    // Delete, after confirming.
    page.click("session-delete").await;
    page.click("delete-confirm").await;
    page.browser
        .until(
            "one session left, open",
            "return document.querySelectorAll('[data-testid=session-item]').length === 1 \
             && document.querySelector('[data-testid=session-title]').textContent === 'Second question';",
        )
        .await;
    let rows = admin.call_ok("sessions.list", json!({})).await;
    assert_eq!(rows["sessions"].as_array().unwrap().len(), 1, "{rows}");
}

#[tokio::test]
async fn model_and_thinking_level_changed_on_the_page_reach_the_model() {
    let page = Page::open().await;
    page.mock.push(Reply::sse(anthropic_text("One.", 10)));
    page.send("First").await;
    page.until_idle().await;
    let options = page
        .js(
            "const s = document.querySelector('[data-testid=model-select]'); \
             return [s.value, [...s.options].map(o => o.value)];",
        )
        .await;
    let current = options[0].as_str().unwrap().to_string();
    let other = options[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .find(|v| *v != current && v.starts_with("anthropic/"))
        .expect("another Anthropic model offered")
        .to_string();
    page.js(&format!(
        "const s = document.querySelector('[data-testid=model-select]'); s.value = {}; \
         s.dispatchEvent(new Event('change'));",
        serde_json::to_string(&other).unwrap()
    ))
    .await;
    page.browser
        .until(
            "thinking levels of the new model",
            "return document.querySelector('[data-testid=thinking-select]').options.length > 1;",
        )
        .await;
    page.js(
        "const s = document.querySelector('[data-testid=thinking-select]'); s.value = 'high'; \
         s.dispatchEvent(new Event('change'));",
    )
    .await;
    page.browser
        .until(
            "the session's new settings",
            &format!(
                "return document.querySelector('[data-testid=model-select]').value === {} \
                 && document.querySelector('[data-testid=thinking-select]').value === 'high';",
                serde_json::to_string(&other).unwrap()
            ),
        )
        .await;
    page.mock.push(Reply::sse(anthropic_text("Two.", 10)));
    page.send("Second").await;
    page.until_idle().await;
    let requests = page.mock.requests();
    let last = &requests.last().unwrap().body;
    assert_eq!(
        last["model"].as_str().unwrap(),
        other.trim_start_matches("anthropic/")
    );
    assert!(
        last["thinking"].is_object(),
        "thinking asked for: {}",
        last["thinking"]
    );
}

#[tokio::test]
async fn an_attached_image_reaches_the_model() {
    let page = Page::open().await;
    // A 1×1 PNG.
    let png = base64_decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
    );
    let file = page.sandbox.write("dot.png", "");
    std::fs::write(&file, &png).unwrap();
    page.browser
        .testid("attach-input")
        .await
        .send_keys(&file.display().to_string())
        .await
        .unwrap();
    page.browser
        .until(
            "the attachment's preview",
            "return document.querySelectorAll('[data-testid=attachment] img').length === 1;",
        )
        .await;
    page.mock.push(Reply::sse(anthropic_text("A dot.", 10)));
    page.send("What is this?").await;
    page.until_idle().await;
    let body = &page.mock.requests()[0].body;
    let blocks = body["messages"][0]["content"].as_array().unwrap().clone();
    let image = blocks
        .iter()
        .find(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("no image in {blocks:?}"));
    assert_eq!(image["source"]["media_type"], json!("image/png"));
    assert_eq!(
        base64_decode(image["source"]["data"].as_str().unwrap()),
        png
    );
    assert_eq!(
        page.js("return document.querySelectorAll('[data-testid=attachment]').length;")
            .await,
        json!(0)
    );
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

#[tokio::test]
async fn context_usage_and_cost_are_shown() {
    let page = Page::open().await;
    page.mock
        .push(Reply::sse(anthropic_text("Counted.", 12_345)));
    page.send("Count").await;
    page.until_idle().await;
    page.browser
        .until(
            "usage",
            "const u = document.querySelector('[data-testid=usage]').textContent; \
             return /Context: 12,3\\d\\d \\/ [\\d,]+ tokens/.test(u) && /Cost: \\$\\d+\\.\\d{4}/.test(u);",
        )
        .await;
}

#[tokio::test]
async fn a_message_sent_while_busy_follows_the_queue_mode() {
    let page = Page::open().await;
    let gate = Arc::new(tokio::sync::Notify::new());
    page.mock.push(Reply::Sse {
        body: anthropic_deltas(&["First", " reply."]),
        delay: Duration::from_millis(5),
        gate: Some(gate.clone()),
    });
    page.mock
        .push(Reply::sse(anthropic_text("Second reply.", 10)));
    page.js(
        "const s = document.querySelector('[data-testid=queue-select]'); s.value = 'followup'; \
         s.dispatchEvent(new Event('change'));",
    )
    .await;
    page.send("First").await;
    page.browser
        .until(
            "the busy state (Stop enabled, Send says Queue)",
            "return !document.querySelector('[data-testid=stop]').disabled \
             && document.querySelector('[data-testid=send]').textContent === 'Queue';",
        )
        .await;
    page.send("Second").await;
    // Follow-up: the second message waits for the first turn.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(page.mock.requests().len(), 1);
    gate.notify_one();
    page.browser
        .until(
            "both replies",
            "return [...document.querySelectorAll('[data-testid=message][data-role=assistant] .body')].map(b => b.textContent).join('|') === 'First reply.|Second reply.';",
        )
        .await;
    let requests = page.mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        user_texts(&requests[1].body),
        vec!["First".to_string(), "Second".to_string()]
    );
}

#[tokio::test]
async fn a_session_run_by_another_client_updates_live() {
    let page = Page::open().await;
    page.mock.push(Reply::sse(anthropic_text("Mine.", 10)));
    page.send("From the page").await;
    page.until_idle().await;
    let key = page
        .js("return decodeURIComponent(location.hash.slice(3));")
        .await
        .as_str()
        .unwrap()
        .to_string();
    // An editor (or any client) prompts the same session.
    let mut editor = page.gateway.admin().await;
    page.mock.push(Reply::Sse {
        body: anthropic_deltas(&["Streamed ", "to everyone."]),
        delay: Duration::from_millis(20),
        gate: None,
    });
    editor.chat_send(&key, "From the editor").await;
    page.until_messages(
        "the other client's turn",
        &[
            ("user", "From the page"),
            ("assistant", "Mine."),
            ("user", "From the editor"),
            ("assistant", "Streamed to everyone."),
        ],
    )
    .await;
    // A session another client starts appears in the list.
    page.mock.push(Reply::sse(anthropic_text("Elsewhere.", 10)));
    editor.chat_send("editor:other", "A new one").await;
    page.browser
        .until(
            "the new session in the list",
            "return [...document.querySelectorAll('[data-testid=session-item]')].some(i => i.textContent.includes('A new one'));",
        )
        .await;
}

async fn dropped_line(engine: Engine) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let proxy = Proxy::start(gateway.addr).await;
    let browser = Browser::launch(engine, 1280, 900, Emulation::default()).await;
    let page = Page {
        sandbox,
        mock,
        gateway,
        browser,
    };
    page.sign_in(&format!("http://127.0.0.1:{}/", proxy.port), false)
        .await;
    let parts: Vec<String> = (0..40).map(|i| format!("word{i} ")).collect();
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    page.mock.push(Reply::Sse {
        body: anthropic_deltas(&refs),
        delay: Duration::from_millis(40),
        gate: None,
    });
    page.send("Stream a lot").await;
    page.browser
        .until(
            "some words",
            "return (document.querySelector('[data-testid=message][data-role=assistant] .body')?.textContent || '').includes('word3');",
        )
        .await;
    assert!(proxy.cut() > 0, "no connection to cut");
    page.browser
        .until(
            "the reconnecting notice",
            "return document.querySelector('[data-testid=connection]').dataset.state === 'reconnecting';",
        )
        .await;
    page.signed_in().await;
    let whole = parts.concat();
    page.until_messages(
        "the whole reply, once",
        &[("user", "Stream a lot"), ("assistant", whole.trim_end())],
    )
    .await;
    page.until_idle().await;
    assert_eq!(
        page.messages().await,
        json!([["user", "Stream a lot"], ["assistant", whole.trim_end()]])
    );
}

#[tokio::test]
async fn the_page_reconnects_after_the_gateway_restarts() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let token = support::gateway::new_token();
    let port = free_port();
    let gateway = gateway_on(&sandbox, &mock, &token, port).await;
    let browser = Browser::start(1280, 900).await;
    let page = Page {
        sandbox,
        mock,
        gateway,
        browser,
    };
    let url = format!("http://{}/", page.gateway.addr);
    page.sign_in(&url, false).await;
    page.mock.push(Reply::sse(anthropic_text("Before.", 10)));
    page.send("Before the restart").await;
    page.until_idle().await;
    // A turn in flight when the gateway dies.
    page.mock.push(Reply::Stall {
        body: anthropic_deltas(&["Half"]),
        events: 3,
    });
    page.send("During").await;
    page.browser
        .until(
            "the half reply",
            "return [...document.querySelectorAll('[data-testid=message] .body')].some(b => b.textContent === 'Half');",
        )
        .await;
    let Page {
        sandbox,
        mock,
        gateway,
        browser,
    } = page;
    gateway.stop().await;
    browser
        .until(
            "the reconnecting notice",
            "return document.querySelector('[data-testid=connection]').dataset.state === 'reconnecting';",
        )
        .await;
    let gateway = gateway_on(&sandbox, &mock, &token, port).await;
    let page = Page {
        sandbox,
        mock,
        gateway,
        browser,
    };
    page.signed_in().await;
    page.until_idle().await;
    page.browser
        .until(
            "the restart told",
            "return document.querySelector('[data-testid=status]').textContent === 'The gateway restarted.';",
        )
        .await;
    page.mock.push(Reply::sse(anthropic_text("After.", 10)));
    page.send("After the restart").await;
    page.browser
        .until(
            "the answer after the restart",
            "const t = [...document.querySelectorAll('[data-testid=message] .body')].map(b => b.textContent); \
             return t[0] === 'Before the restart' && t[1] === 'Before.' && t.at(-2) === 'After the restart' && t.at(-1) === 'After.';",
        )
        .await;
}

#[tokio::test]
async fn the_page_signs_in_with_the_gateway_s_password() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    support::gateway::write_gateway_config(&sandbox, "auth = \"password\"");
    let password = format!("pw-{}", uuid::Uuid::new_v4());
    let mut cmd = support::gateway::gateway_command(&sandbox, &mock, None, &[]);
    cmd.env("PINCER_GATEWAY_PASSWORD", &password);
    let gateway = Gateway::spawn(cmd, None).await;
    let browser = Browser::start(1280, 900).await;
    let page = Page {
        sandbox,
        mock,
        gateway,
        browser,
    };
    let url = format!("http://{}/", page.gateway.addr);
    page.browser.client.goto(&url).await.unwrap();
    page.js("document.querySelector('input[name=kind][value=password]').click();")
        .await;
    // A wrong password first: refused, the form stays.
    page.browser
        .testid("login-secret")
        .await
        .send_keys("wrong")
        .await
        .unwrap();
    page.click("login-submit").await;
    page.browser
        .until(
            "the refusal",
            "return document.querySelector('[data-testid=login-error]').textContent.includes('password');",
        )
        .await;
    page.browser
        .testid("login-secret")
        .await
        .send_keys(&password)
        .await
        .unwrap();
    page.click("login-submit").await;
    page.signed_in().await;
    page.mock.push(Reply::sse(anthropic_text("In.", 10)));
    page.send("Hello").await;
    page.until_messages("the reply", &[("user", "Hello"), ("assistant", "In.")])
        .await;
}

#[tokio::test]
async fn a_mode_chosen_on_the_page_decides_what_is_asked() {
    let page = Page::open().await;
    page.mock.push(Reply::sse(anthropic_text("Ready.", 10)));
    page.send("Start").await;
    page.until_idle().await;
    let modes = page
        .js("return [...document.querySelector('[data-testid=mode-select]').options].map(o => o.value);")
        .await;
    assert_eq!(modes, json!(["default", "accept-edits", "plan", "bypass"]));
    page.js(
        "const s = document.querySelector('[data-testid=mode-select]'); s.value = 'accept-edits'; \
         s.dispatchEvent(new Event('change'));",
    )
    .await;
    page.browser
        .until(
            "the mode kept by the gateway",
            "return document.querySelector('[data-testid=status]').textContent === '' \
             && document.querySelector('[data-testid=mode-select]').value === 'accept-edits';",
        )
        .await;
    page.sandbox.write("notes.txt", "old\n");
    page.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_m1",
        "edit",
        &json!({"path": "notes.txt", "edits": [{"oldText": "old", "newText": "new"}]}),
    )));
    page.mock.push(Reply::sse(anthropic_text("Edited.", 10)));
    page.send("Edit it").await;
    page.until_idle().await;
    // Accept edits: the edit ran without a question.
    assert_eq!(
        std::fs::read_to_string(page.sandbox.work().join("notes.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(
        page.js("return document.querySelectorAll('[data-testid=approval]').length;")
            .await,
        json!(0)
    );
}

#[tokio::test]
async fn the_session_an_editor_runs_streams_into_the_page() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let token = support::gateway::new_token();
    let (mut editor, addr) = support::gateway::acp_with_gateway(&sandbox, &mock, &token).await;
    editor.initialize().await;
    let session = editor.new_session(&sandbox.work()).await;
    mock.push(Reply::sse(anthropic_text("Hello, editor.", 10)));
    let prompt =
        |text: &str| json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
    let first = editor.call("session/prompt", prompt("In the editor")).await;
    assert_eq!(first["stopReason"], json!("end_turn"), "{first}");

    let browser = Browser::start(1280, 900).await;
    browser
        .client
        .goto(&format!("http://{addr}/"))
        .await
        .unwrap();
    browser
        .testid("login-secret")
        .await
        .send_keys(&token)
        .await
        .unwrap();
    browser.testid("login-submit").await.click().await.unwrap();
    // The editor's session is in the list; the page opens it with its
    // history.
    browser
        .until(
            "the editor's session open",
            &format!(
                "return document.querySelector('[data-testid=session-item][aria-current=true]')?.dataset.key === {} \
                 && [...document.querySelectorAll('[data-testid=message] .body')].map(b => b.textContent.trim()).join('|') === 'In the editor|Hello, editor.';",
                serde_json::to_string(&session).unwrap()
            ),
        )
        .await;
    // The editor's next turn streams in while it runs.
    let gate = Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["Streaming ", "live."]),
        delay: Duration::from_millis(5),
        gate: Some(gate.clone()),
    });
    let id = editor
        .send("session/prompt", prompt("Again from the editor"))
        .await;
    browser
        .until(
            "the editor's prompt, and the turn running",
            "return [...document.querySelectorAll('[data-testid=message] .body')].map(b => b.textContent.trim()).join('|') === 'In the editor|Hello, editor.|Again from the editor' \
             && !document.querySelector('[data-testid=stop]').disabled;",
        )
        .await;
    gate.notify_one();
    browser
        .until(
            "the streamed reply",
            "return [...document.querySelectorAll('[data-testid=message] .body')].map(b => b.textContent.trim()).join('|') === 'In the editor|Hello, editor.|Again from the editor|Streaming live.' \
             && document.querySelector('[data-testid=stop]').disabled;",
        )
        .await;
    let (response, _) = editor.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], json!("end_turn"));
    browser.screenshot("web-editor-session").await;
}

#[tokio::test]
async fn approving_a_tool_call_runs_it_and_its_card_shows_the_output() {
    approve_a_tool_call(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_approving_a_tool_call_runs_it_and_its_card_shows_the_output() {
    approve_a_tool_call(Engine::Firefox).await;
}

#[tokio::test]
async fn a_reload_shows_the_history_of_the_open_session() {
    reload_with_history(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_a_reload_shows_the_history_of_the_open_session() {
    reload_with_history(Engine::Firefox).await;
}

#[tokio::test]
async fn a_dropped_line_neither_loses_nor_doubles_text() {
    dropped_line(Engine::Chromium).await;
}

#[tokio::test]
async fn firefox_a_dropped_line_neither_loses_nor_doubles_text() {
    dropped_line(Engine::Firefox).await;
}

#[tokio::test]
async fn a_link_cannot_point_the_page_at_a_session_it_does_not_list() {
    let page = Page::open().await;
    page.mock.push(Reply::sse(anthropic_text("Mine.", 10)));
    page.send("My session").await;
    page.until_idle().await;
    let mine = page
        .js("return decodeURIComponent(location.hash.slice(3));")
        .await;
    let token = page.gateway.token.clone().unwrap();
    // A link someone sent, naming a session the gateway does not list
    // (where the user's next message would go), then a malformed one: the
    // page opens the user's latest session instead, and keeps working.
    for hash in ["#s=telegram%3Adm%3A424242", "#s=%E0%A4%A"] {
        let url = format!("http://{}/{hash}", page.gateway.addr);
        page.browser.client.goto(&url).await.unwrap();
        page.browser.client.refresh().await.unwrap();
        page.browser
            .testid("login-secret")
            .await
            .send_keys(&token)
            .await
            .unwrap();
        page.click("login-submit").await;
        page.signed_in().await;
        page.until_messages(
            "the user's own session",
            &[("user", "My session"), ("assistant", "Mine.")],
        )
        .await;
        assert_eq!(
            page.js("return decodeURIComponent(location.hash.slice(3));")
                .await,
            mine
        );
    }
    page.mock
        .push(Reply::sse(anthropic_text("Still mine.", 10)));
    page.send("Next").await;
    page.until_idle().await;
    let mut admin = page.gateway.admin().await;
    let rows = admin.call_ok("sessions.list", json!({})).await;
    let keys: Vec<&str> = rows["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec![mine.as_str().unwrap()]);
}

/// The page asks for the events of the sessions it shows only
/// (`session-scoped-events`): another session streaming on the gateway
/// sends it nothing (seen at a proxy between the page and the gateway),
/// and the session it shows still streams into it.
#[tokio::test]
async fn the_page_hears_the_session_it_shows_and_not_another_sessions_stream() {
    let (page, proxy) = Page::through_proxy().await;
    page.mock.push(Reply::sse(anthropic_text("Mine.", 10)));
    page.send("From the page").await;
    page.until_idle().await;

    // Another client's session streams meanwhile.
    let mut editor = page.gateway.admin().await;
    page.mock.push(Reply::Sse {
        body: anthropic_deltas(&["Zan", "zibar ", "and more"]),
        delay: Duration::from_millis(5),
        gate: None,
    });
    let run = editor.chat_send("editor:other", "Another topic").await;
    editor.chat_end(&run).await;

    // The page's own session again: what the gateway sent the page
    // before has passed the proxy once this has.
    page.mock.push(Reply::Sse {
        body: anthropic_deltas(&["Mine ", "again."]),
        delay: Duration::from_millis(5),
        gate: None,
    });
    page.send("Again").await;
    page.until_messages(
        "the page's second turn",
        &[
            ("user", "From the page"),
            ("assistant", "Mine."),
            ("user", "Again"),
            ("assistant", "Mine again."),
        ],
    )
    .await;
    page.until_idle().await;
    let heard = String::from_utf8_lossy(&proxy.downstream.lock().unwrap()).into_owned();
    assert!(heard.contains("again."), "{heard}");
    assert!(
        !heard.contains("zibar"),
        "another session's stream reached the page"
    );
}

/// The page follows the session it shows: after it switches to a new one,
/// the session it left streams (another client's run) without a frame of
/// it reaching the page.
#[tokio::test]
async fn the_page_stops_hearing_a_session_it_switched_away_from() {
    let (page, proxy) = Page::through_proxy().await;
    page.mock.push(Reply::sse(anthropic_text("First.", 10)));
    page.send("In the first session").await;
    page.until_idle().await;
    let left = page
        .js("return decodeURIComponent(location.hash.slice(3));")
        .await
        .as_str()
        .unwrap()
        .to_string();
    page.click("session-new").await;
    page.mock.push(Reply::sse(anthropic_text("Second.", 10)));
    page.send("In the second session").await;
    page.until_idle().await;

    // Another client runs the session the page left.
    let mut editor = page.gateway.admin().await;
    page.mock.push(Reply::Sse {
        body: anthropic_deltas(&["Zan", "zibar ", "and more"]),
        delay: Duration::from_millis(5),
        gate: None,
    });
    let run = editor.chat_send(&left, "Another topic").await;
    editor.chat_end(&run).await;

    // The shown session again: what the gateway sent the page before has
    // passed the proxy once this has.
    page.mock
        .push(Reply::sse(anthropic_text("Second again.", 10)));
    page.send("Again").await;
    page.until_messages(
        "the second session's second turn",
        &[
            ("user", "In the second session"),
            ("assistant", "Second."),
            ("user", "Again"),
            ("assistant", "Second again."),
        ],
    )
    .await;
    page.until_idle().await;
    let heard = String::from_utf8_lossy(&proxy.downstream.lock().unwrap()).into_owned();
    assert!(heard.contains("Second again."), "{heard}");
    assert!(
        !heard.contains("zibar"),
        "the session the page left still streamed to it"
    );
}

/// A turn that writes `file`, its write approved on the page.
async fn writing_turn(page: &Page, file: &str) {
    page.mock.push(Reply::sse(anthropic_tool_call(
        &format!("toolu_{}", file.replace('.', "_")),
        "write",
        &json!({"path": file, "content": "written\n"}),
    )));
    page.mock.push(Reply::sse(anthropic_text("Written.", 10)));
    page.send(&format!("Write {file}")).await;
    page.browser
        .until(
            "the write's question",
            "return [...document.querySelectorAll('[data-testid=approval] button')].some(b => !b.disabled);",
        )
        .await;
    page.js("[...document.querySelectorAll('[data-testid=approval-allow-once]')].filter(b => !b.disabled).pop().click();")
        .await;
    page.until_idle().await;
}

const USER_TEXTS: &str = "return [...document.querySelectorAll('[data-testid=message][data-role=user] .body')].map(b => b.textContent.trim());";

#[tokio::test]
async fn a_user_message_can_be_rewound_to_and_forked_from() {
    let page = Page::open().await;
    writing_turn(&page, "one.txt").await;
    writing_turn(&page, "two.txt").await;
    // Once a turn has ended its message offers both.
    page.browser
        .until(
            "the actions on both user messages",
            "return document.querySelectorAll('[data-testid=rewind-here]').length === 2 \
             && document.querySelectorAll('[data-testid=fork-here]').length === 2;",
        )
        .await;
    let original = page.js("return location.hash;").await;

    // Fork from the second message: a new session holding the first turn.
    page.js("document.querySelectorAll('[data-testid=fork-here]')[1].click();")
        .await;
    page.browser
        .until_equals("the fork's messages", USER_TEXTS, &json!(["Write one.txt"]))
        .await;
    assert_ne!(page.js("return location.hash;").await, original);
    assert!(page.sandbox.work().join("two.txt").exists());

    // Back in the first session, rewind to the second message: the
    // question uses the session's words, and the file goes.
    let key = original
        .as_str()
        .unwrap()
        .trim_start_matches("#s=")
        .to_string();
    page.js(&format!(
        "document.querySelector('[data-testid=session-item][data-key=\"' + decodeURIComponent({key:?}) + '\"]').click();"
    ))
    .await;
    page.browser
        .until_equals(
            "the first session again",
            USER_TEXTS,
            &json!(["Write one.txt", "Write two.txt"]),
        )
        .await;
    page.browser
        .until(
            "its actions",
            "return document.querySelectorAll('[data-testid=rewind-here]').length === 2;",
        )
        .await;
    page.js("document.querySelectorAll('[data-testid=rewind-here]')[1].click();")
        .await;
    page.browser
        .until(
            "the restore's question",
            "return [...document.querySelectorAll('[data-testid=approval-allow-once]')].some(b => !b.disabled && b.textContent === 'Restore');",
        )
        .await;
    // The question says which file goes back, with its diff, and is not
    // worded as a command to run.
    page.browser
        .until_equals(
            "the restore's question shows its file",
            "const card = [...document.querySelectorAll('[data-testid=approval]')].pop(); \
             return [card.querySelector('[data-testid=approval-details]')?.textContent.includes('two.txt'), \
                     card.querySelector('[data-testid=tool-diff] figcaption')?.textContent.endsWith('two.txt'), \
                     card.textContent.includes('asks to run'), \
                     document.querySelector('[data-testid=status]').textContent.includes('asks to run')];",
            &json!([true, true, false, false]),
        )
        .await;
    page.screenshot("web-rewind").await;
    page.js("[...document.querySelectorAll('[data-testid=approval-allow-once]')].filter(b => !b.disabled).pop().click();")
        .await;
    page.browser
        .until_equals("the rewound session", USER_TEXTS, &json!(["Write one.txt"]))
        .await;
    assert!(!page.sandbox.work().join("two.txt").exists());
    assert!(page.sandbox.work().join("one.txt").exists());
}

/// The helper cards shown: title, agent, status.
const HELPERS: &str = "return [...document.querySelectorAll('[data-testid=helper-card]')].map(c => [\
     c.querySelector('[data-testid=helper-title]').textContent,\
     c.querySelector('[data-testid=helper-agent]').textContent,\
     c.querySelector('[data-testid=helper-status]').textContent,\
     c.closest('[data-testid=tool-card]')?.dataset.toolCallId ?? '']);";

#[tokio::test]
async fn a_helper_is_a_card_in_its_task_call_and_stop_ends_it_alone() {
    let page = Page::open().await;
    let gate = Arc::new(tokio::sync::Notify::new());
    page.mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "count the stars", "prompt": "JOB-STARS: count them"}),
    )));
    page.mock.push_for(
        "JOB-STARS",
        Reply::Sse {
            body: anthropic_text("Too many.", 10),
            delay: Duration::ZERO,
            gate: Some(gate.clone()),
        },
    );
    page.mock
        .push(Reply::sse(anthropic_text("The helper was stopped.", 10)));
    page.send("Count the stars with a helper").await;
    page.browser
        .until_equals(
            "the running helper's card in the task call",
            HELPERS,
            &json!([["count the stars", "general-purpose", "running", "t1"]]),
        )
        .await;
    page.screenshot("helper-running").await;
    page.click("helper-stop").await;
    page.browser
        .until_equals(
            "the stopped helper",
            HELPERS,
            &json!([["count the stars", "general-purpose", "stopped", "t1"]]),
        )
        .await;
    // Its parent went on, told that the user stopped it.
    page.until_idle().await;
    let messages = page.messages().await;
    assert_eq!(
        messages.as_array().unwrap().last().unwrap(),
        &json!(["assistant", "The helper was stopped."]),
        "{messages}"
    );
    let last = page.mock.requests().last().unwrap().body.to_string();
    assert!(last.contains("The user stopped this helper"), "{last}");
    assert!(
        page.js("return document.querySelector('[data-testid=helper-stop]').hidden;")
            .await
            .as_bool()
            .unwrap()
    );
    gate.notify_one();
}

#[tokio::test]
async fn a_finished_helper_opens_as_its_own_session_and_leads_back_to_its_parent() {
    let page = Page::open().await;
    page.mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "check the docs", "prompt": "JOB-DOCS: read the docs"}),
    )));
    page.mock.push_for(
        "JOB-DOCS",
        Reply::sse(anthropic_text("The docs are **fine**.", 10)),
    );
    page.mock.push(Reply::sse(anthropic_text(
        "Your helper says the docs are fine.",
        10,
    )));
    page.send("Check the docs with a helper").await;
    page.until_idle().await;
    page.browser
        .until_equals(
            "the finished helper's card",
            HELPERS,
            &json!([["check the docs", "general-purpose", "done", "t1"]]),
        )
        .await;
    // The session list has it under its parent.
    page.browser
        .until(
            "the helper's row under its parent's",
            "const rows = [...document.querySelectorAll('#session-list li')];\
             return rows.length === 2 && !rows[0].classList.contains('helper-row') \
               && rows[1].classList.contains('helper-row') \
               && rows[1].textContent.includes('check the docs');",
        )
        .await;
    page.click("helper-open").await;
    page.until_messages(
        "the helper's own conversation",
        &[
            ("user", "JOB-DOCS: read the docs"),
            ("assistant", "The docs are fine."),
        ],
    )
    .await;
    page.browser
        .until(
            "the helper's title and the way back",
            "return document.querySelector('[data-testid=session-title]').textContent === 'check the docs' \
             && !document.querySelector('[data-testid=session-parent]').hidden;",
        )
        .await;
    page.screenshot("helper-opened").await;
    page.click("session-parent").await;
    page.until_messages(
        "the parent's conversation again",
        &[
            ("user", "Check the docs with a helper"),
            ("assistant", "Your helper says the docs are fine."),
        ],
    )
    .await;
    // Its card comes back with the history, as it ended.
    page.browser
        .until_equals(
            "the helper's card from the history",
            HELPERS,
            &json!([["check the docs", "general-purpose", "done", "t1"]]),
        )
        .await;
    assert!(
        page.js("return document.querySelector('[data-testid=session-parent]').hidden;")
            .await
            .as_bool()
            .unwrap()
    );
}
