//! OpenClaw's own Control UI (the `openclaw` npm package's
//! `dist/control-ui`, installed by `.ci/openclaw`) served by `pincer
//! gateway` with `[gateway] control_ui`, in headless Chromium: it signs in
//! with the token in the address's fragment, as OpenClaw's dashboard
//! links do, sends a message and shows the streamed reply; a running
//! reply is stopped from it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use support::acp_client::Sandbox;
use support::browser::{Browser, Emulation, Engine};
use support::gateway::{Gateway, write_gateway_config};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_deltas;

/// A function body that finds the first element matching `selector`
/// anywhere in the page, inside shadow roots too (the UI's components
/// keep theirs there), as `found`.
fn deep(selector: &str) -> String {
    format!(
        "const deep = (root) => {{ const hit = root.querySelector({selector:?}); if (hit) return hit; \
           for (const el of root.querySelectorAll('*')) {{ if (el.shadowRoot) {{ const f = deep(el.shadowRoot); if (f) return f; }} }} \
           return null; }}; const found = deep(document);"
    )
}

/// A function body giving all the page's text, shadow roots included.
const ALL_TEXT: &str = "const text = (root) => { let t = ''; for (const n of root.childNodes) { \
       if (n.nodeType === 3) t += n.textContent; else if (n.nodeType === 1) { t += text(n); if (n.shadowRoot) t += text(n.shadowRoot); } } \
       return t; }; const all = text(document.body);";

/// A gateway serving the installed package's Control UI, and Chromium;
/// `config` is more of the gateway's config.toml.
async fn serving(config: &str) -> (Sandbox, MockModel, Gateway, Browser) {
    let sandbox = Sandbox::new();
    let package = support::openclaw::package_dir();
    write_gateway_config(
        &sandbox,
        &format!("control_ui = {:?}\n{config}", package.display().to_string()),
    );
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let browser = Browser::launch(Engine::Chromium, 1400, 900, Emulation::default()).await;
    (sandbox, mock, gateway, browser)
}

struct ControlUi {
    sandbox: Sandbox,
    mock: MockModel,
    gateway: Gateway,
    browser: Browser,
}

impl ControlUi {
    async fn open() -> Self {
        Self::open_at("", "").await
    }

    /// The UI at `path`, on a gateway with `config` too.
    async fn open_at(path: &str, config: &str) -> Self {
        let (sandbox, mock, gateway, browser) = serving(config).await;
        let token = gateway.token.clone().unwrap();
        browser
            .client
            .goto(&format!("http://{}/{path}#token={token}", gateway.addr))
            .await
            .unwrap();
        let ui = Self {
            sandbox,
            mock,
            gateway,
            browser,
        };
        if !path.is_empty() {
            return ui;
        }
        ui.browser
            .until(
                "the Control UI's message box",
                &format!(
                    "{} return found !== null && !found.disabled;",
                    deep("textarea[placeholder^='Message']")
                ),
            )
            .await;
        ui
    }

    /// Types `text` into the message box and sends it with Enter.
    async fn send(&self, text: &str) {
        self.browser
            .eval(&format!(
                "{} found.focus(); return true;",
                deep("textarea[placeholder^='Message']")
            ))
            .await;
        self.browser.type_text(text).await;
        self.browser.press(&['\u{e007}']).await;
    }

    async fn until_text(&self, what: &str, text: &str) {
        self.browser
            .until(what, &format!("{ALL_TEXT} return all.includes({text:?});"))
            .await;
    }
}

#[tokio::test]
async fn openclaws_control_ui_signs_in_sends_and_shows_the_streamed_reply() {
    let ui = ControlUi::open().await;
    // The page is OpenClaw's, served from the package with its scripts
    // allowed by hash, and not pincer's own.
    let page = reqwest::get(format!("http://{}/", ui.gateway.addr))
        .await
        .unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("'sha256-"), "{csp}");
    assert!(!page.text().await.unwrap().contains("login-secret"));

    ui.mock.push(Reply::sse(anthropic_deltas(&[
        "Hello ",
        "from ",
        "pincer, ",
        "through OpenClaw's own UI.",
    ])));
    ui.send("Say hello to the Control UI").await;
    ui.until_text(
        "the streamed reply",
        "Hello from pincer, through OpenClaw's own UI.",
    )
    .await;
    let request = ui.mock.requests()[0].body.to_string();
    assert!(request.contains("Say hello to the Control UI"), "{request}");
    ui.browser.screenshot("control-ui-reply").await;

    // The session is pincer's: another client sees it with the exchange.
    let mut client = ui.gateway.admin().await;
    let history = client
        .call_ok("chat.history", json!({"sessionKey": "agent:main:main"}))
        .await;
    let texts = history["messages"].to_string();
    assert!(
        texts.contains("Say hello to the Control UI")
            && texts.contains("through OpenClaw's own UI."),
        "{history}"
    );
}

/// Without the token the UI asks for it (the gateway's refusal is one
/// OpenClaw's UI knows), and the files it needs around the page are the
/// gateway's to give only with the token.
#[tokio::test]
async fn without_the_token_the_control_ui_asks_for_it() {
    let (_sandbox, mock, gateway, browser) = serving("").await;
    browser
        .client
        .goto(&format!("http://{}/chat/main", gateway.addr))
        .await
        .unwrap();
    browser
        .until(
            "the UI's request for the gateway's token",
            &format!("{ALL_TEXT} return all.includes('expects its token');"),
        )
        .await;
    let config = reqwest::get(format!("http://{}/control-ui-config.json", gateway.addr))
        .await
        .unwrap();
    assert_eq!(config.status().as_u16(), 401);
    let config = reqwest::Client::new()
        .get(format!("http://{}/control-ui-config.json", gateway.addr))
        .bearer_auth(gateway.token.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(config.status().as_u16(), 200);
    let config: serde_json::Value = config.json().await.unwrap();
    assert_eq!(config["assistantName"], "pincer");
    assert!(mock.requests().is_empty());
}

/// A reply still coming is stopped with the UI's stop button: the
/// gateway's run ends aborted, and the next message is answered.
#[tokio::test]
async fn a_running_reply_is_stopped_from_the_control_ui() {
    let ui = ControlUi::open().await;
    let mut watcher = ui.gateway.admin().await;
    watcher
        .call_ok("chat.subscribe", json!({"sessionKey": "agent:main:main"}))
        .await;
    ui.mock.push(Reply::Stall {
        body: anthropic_deltas(&["Counting: ", "one, ", "two, ", "three"]),
        events: 4,
    });
    ui.send("Count slowly").await;
    ui.until_text("the start of the reply", "Counting:").await;
    ui.browser
        .until(
            "the stop button",
            &format!(
                "{} if (found) found.click(); return found !== null;",
                deep("button[aria-label='Stop generating']")
            ),
        )
        .await;
    let end = watcher
        .next_where("the run's end", |f| {
            f["event"] == "chat"
                && matches!(
                    f["payload"]["state"].as_str(),
                    Some("final" | "aborted" | "error")
                )
        })
        .await;
    assert_eq!(end["payload"]["state"], "aborted", "{end}");
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Stopped ", "and back."])));
    ui.send("Are you there?").await;
    ui.until_text("the next reply", "Stopped and back.").await;
}

/// A command the agent wants to run is asked in the UI's approval card;
/// "Allow once" runs it on the gateway's machine and the turn goes on.
#[tokio::test]
async fn a_command_is_approved_in_the_control_ui() {
    let ui = ControlUi::open().await;
    ui.mock.push(Reply::sse(support::sse::anthropic_tool_call(
        "toolu_1",
        "bash",
        &json!({"command": "echo approved > marker.txt"}),
    )));
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["The marker ", "is made."])));
    ui.send("Make the marker").await;
    ui.until_text("the approval card", "Exec approval needed")
        .await;
    let marker = ui.sandbox.work().join("marker.txt");
    assert!(!marker.exists(), "the command ran before it was approved");
    ui.browser.screenshot("control-ui-approval").await;
    ui.browser
        .until(
            "the Allow once button",
            &format!(
                "{} if (found && found.textContent.trim() === 'Allow once') {{ found.click(); return true; }} return false;",
                deep("button.btn.primary")
            ),
        )
        .await;
    ui.until_text("the reply after the command", "The marker is made.")
        .await;
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap_or_default(),
        "approved\n"
    );
}

/// A session an editor started (over the gateway's `/acp`) is in the UI's
/// session list, and opens there with its conversation.
#[tokio::test]
async fn a_session_an_editor_started_opens_in_the_control_ui() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let ui = ControlUi::open().await;
    ui.mock.push(Reply::sse(anthropic_deltas(&[
        "The parser ",
        "is in the lexer module.",
    ])));
    // The editor: ACP over the gateway's port.
    let mut request = format!("ws://{}/acp", ui.gateway.addr)
        .into_client_request()
        .unwrap();
    let bearer = format!("Bearer {}", ui.gateway.token.as_deref().unwrap());
    request
        .headers_mut()
        .insert("authorization", bearer.parse().unwrap());
    let (mut editor, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let mut call = async |id: u64, method: &str, params: serde_json::Value| {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        editor
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
        loop {
            let frame = tokio::time::timeout(support::acp_client::TIMEOUT, editor.next())
                .await
                .expect("the editor's answer")
                .unwrap()
                .unwrap();
            let Message::Text(text) = frame else { continue };
            let message: serde_json::Value = serde_json::from_str(text.as_str()).unwrap();
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    };
    call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let created = call(
        2,
        "session/new",
        json!({"cwd": ui.sandbox.work(), "mcpServers": []}),
    )
    .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let answered = call(
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "Where is the parser?"}]}),
    )
    .await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");

    // The UI lists it (its title is its first prompt) and opens it.
    ui.browser
        .until(
            "the editor's session in the UI's list, opened",
            &format!(
                "{ALL_TEXT} if (!all.includes('Where is the parser?')) return false; \
                 const find = (root) => {{ for (const el of root.querySelectorAll('a, button, [role=button], [role=link], li')) {{ \
                   if (el.textContent.includes('Where is the parser?') && !el.closest('textarea')) return el; }} \
                   for (const el of root.querySelectorAll('*')) {{ if (el.shadowRoot) {{ const f = find(el.shadowRoot); if (f) return f; }} }} return null; }}; \
                 const row = find(document); if (row) row.click(); return row !== null;"
            ),
        )
        .await;
    ui.until_text(
        "the editor's conversation",
        "The parser is in the lexer module.",
    )
    .await;
    ui.browser.screenshot("control-ui-editor-session").await;
}

/// A `[[cron]]` job is on the UI's automations page, with its schedule,
/// its last run and, opened, its prompt.
#[tokio::test]
async fn a_cron_job_is_shown_on_the_control_ui_s_automations_page() {
    let ui = ControlUi::open_at(
        "automations",
        "\n[[cron]]\nname = \"morning-digest\"\nschedule = \"0 7 * * *\"\ntimezone = \"UTC\"\nprompt = \"Summarise the overnight build failures\"\n",
    )
    .await;
    ui.until_text("the job on the automations page", "morning-digest")
        .await;
    ui.until_text("its schedule", "0 7 * * *").await;
    // Opened: its prompt is in the job's form.
    ui.browser
        .until(
            "the job's row, clicked",
            "const find = (root) => { for (const el of root.querySelectorAll('button, a, [role=button], [role=row], tr, li')) { \
               if (el.textContent.includes('morning-digest') && el.textContent.length < 400) return el; } \
               for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) { const f = find(el.shadowRoot); if (f) return f; } } return null; }; \
             const row = find(document); if (row) row.click(); return row !== null;",
        )
        .await;
    ui.browser
        .until(
            "the job's prompt in its form",
            "const find = (root) => { for (const el of root.querySelectorAll('textarea, input')) { \
               if ((el.value || '').includes('Summarise the overnight build failures')) return el; } \
               for (const el of root.querySelectorAll('*')) { if (el.shadowRoot) { const f = find(el.shadowRoot); if (f) return f; } } return null; }; \
             return find(document) !== null;",
        )
        .await;
}

/// The UI's logs page shows the gateway's log, and a line written later
/// arrives by its polling.
#[tokio::test]
async fn the_control_ui_s_logs_page_shows_the_gateway_s_log() {
    let ui = ControlUi::open_at("logs", "").await;
    ui.until_text("the gateway's start in its log", "listening on ws://")
        .await;
    // A later line: an address that failed to sign in five times is
    // locked out, and that is logged.
    for _ in 0..5 {
        let mut stranger = support::gateway::Client::open(ui.gateway.addr).await;
        let refused = stranger
            .connect(support::gateway::connect_params(
                Some("not-the-token-0123456789"),
                &[],
                &[],
            ))
            .await;
        assert_eq!(refused["ok"], false, "{refused}");
    }
    let logged = std::fs::read_to_string(ui.sandbox.home().join("logs/gateway.log")).unwrap();
    let last = logged.lines().last().unwrap().to_string();
    assert!(last.contains("failed sign-ins"), "{logged}");
    let line: serde_json::Value = serde_json::from_str(&last).unwrap();
    let message = line["message"].as_str().unwrap().to_string();
    ui.until_text("the newest line", &message).await;
}

/// The UI's usage page shows what a session used: its row, its tokens,
/// and opened, its messages; no error and no "incomplete data" retries.
#[tokio::test]
async fn the_control_ui_s_usage_page_shows_what_a_session_used() {
    let ui = ControlUi::open().await;
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Tokens ", "were counted."])));
    ui.send("Count my tokens").await;
    ui.until_text("the reply", "Tokens were counted.").await;
    // What the page reads, from another client: the session's 30 tokens
    // (10 in, 20 out) and their price.
    let mut client = ui.gateway.admin().await;
    let used = client
        .call_ok(
            "sessions.usage",
            json!({"limit": 1000, "includeContextWeight": false}),
        )
        .await;
    assert_eq!(used["totals"]["totalTokens"], 30, "{used}");
    assert_eq!(used["sessions"][0]["key"], "agent:main:main", "{used}");
    let cost = used["totals"]["totalCost"].as_f64().unwrap();
    assert!(cost > 0.0, "{used}");

    let token = ui.gateway.token.clone().unwrap();
    ui.browser
        .client
        .goto(&format!("http://{}/usage#token={token}", ui.gateway.addr))
        .await
        .unwrap();
    ui.until_text("the session on the usage page", "Count my tokens")
        .await;
    // The page's own state: no error, provider usage not "unavailable"
    // (which retries the whole snapshot), nothing "incomplete".
    let page = |script: &str| {
        format!(
            "const find = (root) => {{ for (const el of root.querySelectorAll('*')) {{ \
               if ('providerUsageUnavailable' in el) return el; \
               if (el.shadowRoot) {{ const f = find(el.shadowRoot); if (f) return f; }} }} return null; }}; \
             const page = find(document); {script}"
        )
    };
    let state = ui
        .browser
        .eval(&page(
            "return page && { error: page.usageError, unavailable: page.providerUsageUnavailable, \
               incomplete: page.providerUsageIncomplete, loading: page.usageLoading };",
        ))
        .await;
    assert_eq!(
        state,
        json!({"error": null, "unavailable": false, "incomplete": false, "loading": false})
    );
    // The session opened: its messages come from `sessions.usage.logs`.
    ui.browser
        .until(
            "the session's row, clicked",
            &format!(
                "{ALL_TEXT} const find = (root) => {{ for (const el of root.querySelectorAll('.session-bar-row, [class*=session-row], tr, li, button')) {{ \
                   if (el.textContent.includes('Count my tokens') && el.textContent.length < 400) return el; }} \
                   for (const el of root.querySelectorAll('*')) {{ if (el.shadowRoot) {{ const f = find(el.shadowRoot); if (f) return f; }} }} return null; }}; \
                 const row = find(document); if (row) row.click(); return row !== null;"
            ),
        )
        .await;
    ui.until_text("the session's logged reply", "Tokens were counted.")
        .await;
    ui.browser.screenshot("control-ui-usage").await;
}

/// The composer's permission picker names pincer's modes by OpenClaw's
/// names: the session starts at "Default", a pick of "Read Only" makes it
/// pincer's plan mode (the next model call is offered no tool that
/// changes anything), and OpenClaw's AI-reviewed "Workspace", which pincer
/// has not, is refused in the UI's own error line.
#[tokio::test]
async fn the_control_ui_s_permission_picker_sets_pincer_s_mode() {
    let ui = ControlUi::open().await;
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Ready ", "when you are."])));
    ui.send("First message").await;
    ui.until_text("the first reply", "Ready when you are.")
        .await;
    let trigger = deep("button[data-chat-permission-select]");
    ui.browser
        .until_equals(
            "the picker's label",
            &format!("{trigger} return found && found.getAttribute('aria-label');"),
            &json!("Execution permissions: Default"),
        )
        .await;
    // Opens the picker, then picks the option (in a block of its own: the
    // two lookups both declare `deep` and `found`).
    let pick = |option: &str| {
        format!(
            "{{ {trigger} if (!found) return false; found.click(); }} \
             {{ {} if (!found) return false; found.click(); return true; }}",
            deep(&format!(
                "wa-dropdown-item[data-chat-permission-option='{option}']"
            ))
        )
    };
    ui.browser
        .until("Read Only picked", &pick("read-only"))
        .await;
    ui.browser
        .until_equals(
            "the picker's label after the pick",
            &format!("{trigger} return found && found.getAttribute('aria-label');"),
            &json!("Execution permissions: Read Only"),
        )
        .await;
    let mut admin = ui.gateway.admin().await;
    let listed = admin
        .call_ok("sessions.list", json!({"search": "agent:main:main"}))
        .await;
    let row = &listed["sessions"][0];
    assert_eq!(
        (&row["key"], &row["mode"], &row["permissionMode"]),
        (
            &json!("agent:main:main"),
            &json!("plan"),
            &json!("read-only")
        ),
        "{listed}"
    );
    ui.browser.screenshot("control-ui-read-only").await;

    // The mode is the session's: the model is offered no tool that writes.
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Only ", "reading now."])));
    ui.send("Second message").await;
    ui.until_text("the second reply", "Only reading now.").await;
    let request = &ui.mock.requests()[1].body;
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"read"), "{tools:?}");
    for writer in ["write", "edit", "bash"] {
        assert!(!tools.contains(&writer), "{tools:?}");
    }

    // Workspace (an AI reviewer) is not pincer's: the UI shows the refusal
    // and the session stays read-only.
    ui.browser
        .until("Workspace picked", &pick("workspace"))
        .await;
    ui.until_text("the refusal", "not supported by pincer")
        .await;
    let listed = admin
        .call_ok("sessions.list", json!({"search": "agent:main:main"}))
        .await;
    assert_eq!(listed["sessions"][0]["mode"], json!("plan"), "{listed}");
}

/// The composer's model picker lists pincer's catalog; a pick is the
/// session's model (the next model call asks for it), and the picker's
/// default option (sent as `model: null`) goes back to the configured one.
#[tokio::test]
async fn the_control_ui_s_model_picker_sets_the_session_s_model() {
    let ui = ControlUi::open().await;
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["On the ", "default."])));
    ui.send("Which model?").await;
    ui.until_text("the first reply", "On the default.").await;
    let default = ui.mock.requests()[0].body["model"]
        .as_str()
        .unwrap()
        .to_string();
    // The picker's options, `provider/id`, the default one marked.
    let options = "const all = []; const walk = (root) => { for (const el of root.querySelectorAll('[data-chat-model-option]')) all.push([el.dataset.chatModelOption, el.dataset.chatModelDefault === 'true']); \
           for (const el of root.querySelectorAll('*')) if (el.shadowRoot) walk(el.shadowRoot); }; walk(document);";
    ui.browser
        .until(
            "the picker's options",
            &format!("{options} return all.length > 1;"),
        )
        .await;
    let options = ui.browser.eval(&format!("{options} return all;")).await;
    let options: Vec<(String, bool)> = serde_json::from_value(options).unwrap();
    assert!(
        options.contains(&(format!("anthropic/{default}"), true)),
        "{options:?}"
    );
    let other = options
        .iter()
        .find(|(value, is_default)| !is_default && value.starts_with("anthropic/"))
        .unwrap_or_else(|| panic!("no other anthropic model in {options:?}"))
        .0
        .clone();
    let pick = |value: &str| {
        format!(
            "{{ {} if (found) found.click(); }} {{ {} if (!found) return false; found.click(); return true; }}",
            deep("[data-chat-model-provider-toggle][aria-expanded='false']"),
            deep(&format!("[data-chat-model-option='{value}']"))
        )
    };
    ui.browser
        .until("the other model picked", &pick(&other))
        .await;
    let mut admin = ui.gateway.admin().await;
    let model_of_main = async |admin: &mut support::gateway::Client| {
        let listed = admin
            .call_ok("sessions.list", json!({"search": "agent:main:main"}))
            .await;
        let row = &listed["sessions"][0];
        format!(
            "{}/{}",
            row["modelProvider"].as_str().unwrap_or_default(),
            row["model"].as_str().unwrap_or_default()
        )
    };
    let mut picked = String::new();
    for _ in 0..100 {
        picked = model_of_main(&mut admin).await;
        if picked == other {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(picked, other);
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["On the ", "other one."])));
    ui.send("And now?").await;
    ui.until_text("the second reply", "On the other one.").await;
    assert_eq!(
        format!(
            "anthropic/{}",
            ui.mock.requests()[1].body["model"].as_str().unwrap()
        ),
        other
    );
    ui.browser.screenshot("control-ui-model-picked").await;

    // Back to the default: the picker sends `model: null`.
    ui.browser
        .until("the default picked", &pick(&format!("anthropic/{default}")))
        .await;
    for _ in 0..100 {
        picked = model_of_main(&mut admin).await;
        if picked == format!("anthropic/{default}") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(picked, format!("anthropic/{default}"));
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Back on ", "the default."])));
    ui.send("And back?").await;
    ui.until_text("the third reply", "Back on the default.")
        .await;
    assert_eq!(ui.mock.requests()[2].body["model"], json!(default));
}

/// The pages beyond the chat open without an error: each shows what
/// pincer has (its sessions on the activity page, its skills, the
/// machine it runs on, its queues) or, for OpenClaw's features pincer has
/// not got (plugins, background task runners, managed worktrees, meeting
/// transcripts, voice), the page's own "none" state, and never "unknown
/// method" or a refusal where the page expects an answer.
#[tokio::test]
async fn every_page_of_the_control_ui_opens_without_an_error() {
    let ui = ControlUi::open().await;
    // A skill of the user's, and a session with a title.
    let skill = ui.sandbox.home().join("skills/release-notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: release-notes\ndescription: Writes the release notes from the merged changes.\n---\nRead the log.\n",
    )
    .unwrap();
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Planned ", "the release."])));
    ui.send("Plan the autumn release").await;
    ui.until_text("the reply", "Planned the release.").await;

    let token = ui.gateway.token.clone().unwrap();
    let errors = [
        "unknown method",
        "not supported by pincer",
        "Could not load",
        "could not be refreshed",
        "could not be verified",
        "invalid response",
        "returned an invalid",
    ];
    // Each page, and what shows it loaded.
    let pages = [
        ("activity", "Plan the autumn release"),
        ("skills", "release-notes"),
        ("systems", "No desktop available"),
        ("sessions", "Plan the autumn release"),
        ("plugins", "No plugins found"),
        ("tasks", "No background tasks yet."),
        ("worktrees", "No managed worktrees."),
        ("meetings", "Your meeting notes, together"),
        ("debug", "Lanes"),
        ("dashboards", "Dashboards"),
        ("settings/appearance", "Claw"),
        ("chat", "No realtime voice provider is configured."),
    ];
    for (page, shown) in pages {
        ui.browser
            .client
            .goto(&format!("http://{}/{page}#token={token}", ui.gateway.addr))
            .await
            .unwrap();
        ui.until_text(&format!("the {page} page's {shown:?}"), shown)
            .await;
        // What loads after the page's first answer has had time to.
        tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
        let text = ui
            .browser
            .eval(&format!("{ALL_TEXT} return all.replace(/\\s+/g, ' ');"))
            .await;
        let text = text.as_str().unwrap_or_default();
        ui.browser
            .screenshot(&format!("control-ui-page-{}", page.replace('/', "-")))
            .await;
        for error in errors {
            assert!(
                !text.contains(error),
                "the {page} page shows {error:?}: {text}"
            );
        }
    }
}

/// A picture attached in the composer (its photo input, as a picked file)
/// reaches the model with the message, as an image.
#[tokio::test]
async fn a_picture_attached_in_the_control_ui_reaches_the_model() {
    // A 1×1 PNG.
    const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let ui = ControlUi::open().await;
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["A single ", "pixel."])));
    ui.browser
        .until(
            "the picture picked in the photo input",
            &format!(
                "{} if (!found) return false; \
                 const bytes = Uint8Array.from(atob({PIXEL:?}), c => c.charCodeAt(0)); \
                 const picked = new DataTransfer(); picked.items.add(new File([bytes], 'pixel.png', {{type: 'image/png'}})); \
                 found.files = picked.files; found.dispatchEvent(new Event('change', {{bubbles: true}})); return true;",
                deep("input.agent-chat__photo-input")
            ),
        )
        .await;
    // The composer shows it before it is sent.
    ui.browser
        .until(
            "the attachment's preview",
            &format!(
                "{} return found !== null;",
                deep("img[src^='data:image/png'], img[src^='blob:']")
            ),
        )
        .await;
    // (With a picture the message box asks for a caption.)
    ui.browser
        .eval(&format!("{} found.focus(); return true;", deep("textarea")))
        .await;
    ui.browser.type_text("What is in this picture?").await;
    ui.browser.press(&['\u{e007}']).await;
    ui.until_text("the reply", "A single pixel.").await;
    let request = &ui.mock.requests()[0].body;
    let content = request["messages"][0]["content"].as_array().unwrap();
    let image = content
        .iter()
        .find(|block| block["type"] == "image")
        .unwrap_or_else(|| panic!("no image in {request}"));
    assert_eq!(
        image["source"],
        json!({"type": "base64", "media_type": "image/png", "data": PIXEL})
    );
    assert!(
        content
            .iter()
            .any(|block| block["text"] == "What is in this picture?"),
        "{request}"
    );
    // The history keeps the picture's place, not its bytes (as OpenClaw's
    // does).
    let mut admin = ui.gateway.admin().await;
    let history = admin
        .call_ok("chat.history", json!({"sessionKey": "agent:main:main"}))
        .await;
    let sent = &history["messages"][0]["content"];
    assert_eq!(
        sent[1],
        json!({"type": "image", "mimeType": "image/png", "omitted": true, "bytes": 70}),
        "{history}"
    );
    ui.browser.screenshot("control-ui-attachment").await;
}

/// The agent's plan shows as the UI's "Task progress" card above the
/// composer, its step under way named, as it changes during the run.
#[tokio::test]
async fn the_agent_s_plan_shows_as_the_control_ui_s_task_progress_card() {
    let ui = ControlUi::open().await;
    ui.mock.push(Reply::sse(support::sse::anthropic_tool_call(
        "t1",
        "todo",
        &json!({"todos": [
            {"content": "Read the parser", "status": "completed"},
            {"content": "Fix the off-by-one", "status": "in_progress"},
            {"content": "Run the tests", "status": "pending"},
        ]}),
    )));
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Planned ", "it out."])));
    ui.send("Fix the parser").await;
    ui.until_text("the reply", "Planned it out.").await;
    ui.browser
        .until(
            "the progress card with the step under way",
            &format!(
                "{} return found !== null && found.textContent.includes('Fix the off-by-one');",
                deep(".session-progress-card")
            ),
        )
        .await;
    ui.browser.screenshot("control-ui-progress-card").await;

    // Its refresh button asks the agent to bring the plan up to date; the
    // card shows the new revision.
    ui.mock.push_for(
        "Bring your plan up to date",
        Reply::sse(support::sse::anthropic_tool_call(
            "t2",
            "todo",
            &json!({"todos": [
                {"content": "Read the parser", "status": "completed"},
                {"content": "Fix the off-by-one", "status": "completed"},
                {"content": "Run the tests (refreshed)", "status": "in_progress"},
            ]}),
        )),
    );
    ui.mock
        .push(Reply::sse(anthropic_deltas(&["Plan ", "updated."])));
    ui.browser
        .eval(&format!(
            "{} found.click(); return true;",
            deep(".session-progress-card__refresh")
        ))
        .await;
    ui.browser
        .until(
            "the refreshed card",
            &format!(
                "{} return found !== null && found.textContent.includes('Run the tests (refreshed)');",
                deep(".session-progress-card")
            ),
        )
        .await;
    ui.browser
        .until(
            "the refresh button's \"updated\" state",
            &format!(
                "{} return found !== null && found.dataset.state === 'updated';",
                deep(".session-progress-card__refresh")
            ),
        )
        .await;
}
