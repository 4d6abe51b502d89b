//! The Telegram channel end to end: the real `pincer gateway` polls a local
//! Bot API (tests/support/telegram_api.rs, speaking Telegram's request and
//! error shapes) and runs the agent against the mock model. Each test is
//! one thing a Telegram user or the bot's owner does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};
use support::telegram_api::{Shown, TelegramApi};

const OWNER: i64 = 111_222_333;
const STRANGER: i64 = 444_555_666;
const GROUP: i64 = -100_500_600;

/// For the tests of questions: the chat's sessions run unsandboxed (`sandbox = { mode = "off" }` in
/// the channel's table): these tests are about the questions commands
/// ask; `channels_telegram.rs` proves a chat's commands are confined.
const UNSANDBOXED: &str = "sandbox = { mode = \"off\" }";

struct Bot {
    sandbox: Sandbox,
    mock: MockModel,
    api: TelegramApi,
    gateway: Option<Gateway>,
}

impl Drop for Bot {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(gateway) = &self.gateway
        {
            eprintln!("gateway stderr:\n{}", gateway.stderr.text());
        }
    }
}

/// The user's config: the Telegram channel pointed at the mock, `extra`
/// lines in its table.
fn write_config(sandbox: &Sandbox, api: &TelegramApi, extra: &str) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [\"{OWNER}\"]\npoll_timeout_secs = 5\nedit_interval_ms = 200\n{extra}\n",
            api.url
        ),
    )
    .unwrap();
}

impl Bot {
    async fn start(extra: &str) -> Self {
        Self::start_in(Sandbox::new(), extra).await
    }

    async fn start_in(sandbox: Sandbox, extra: &str) -> Self {
        let mock = MockModel::start().await;
        let api = TelegramApi::start().await;
        write_config(&sandbox, &api, extra);
        let mut bot = Self {
            sandbox,
            mock,
            api,
            gateway: None,
        };
        bot.launch().await;
        bot
    }

    async fn launch(&mut self) {
        let token = new_token();
        let mut cmd = gateway_command(&self.sandbox, &self.mock, Some(&token), &[]);
        cmd.env("TELEGRAM_BOT_TOKEN", &self.api.token);
        let gateway = Gateway::spawn(cmd, Some(&token)).await;
        gateway
            .stderr
            .wait_line(TIMEOUT, |l| {
                l.contains("channel telegram started").then_some(())
            })
            .await
            .expect("the channel starts");
        self.gateway = Some(gateway);
    }

    async fn stop(&mut self) -> String {
        match self.gateway.take() {
            Some(gateway) => gateway.stop().await,
            None => String::new(),
        }
    }

    fn gateway(&self) -> &Gateway {
        self.gateway.as_ref().unwrap()
    }

    /// Waits for the run a Telegram message started to end.
    async fn run_ended(&self, chat: i64, message: i64) {
        let mut admin = self.gateway().admin().await;
        let run = format!("telegram:{chat}:{message}");
        // The run exists once the gateway polled the message.
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let waited = admin
                .call("agent.wait", json!({"runId": run, "timeoutMs": 20_000}))
                .await;
            if waited["ok"] == true {
                assert_eq!(waited["payload"]["status"], "ok", "{waited}");
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "{waited}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The text of the last user message of a model request.
fn last_user_text(body: &Value) -> String {
    let message = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    match &message["content"] {
        Value::String(text) => text.clone(),
        // The first block is what the user wrote (pincer adds the time in
        // a block of its own).
        Value::Array(blocks) => blocks[0]["text"].as_str().unwrap_or_default().to_string(),
        _ => String::new(),
    }
}

fn texts(shown: &[Shown]) -> Vec<String> {
    shown.iter().map(|m| m.text.clone()).collect()
}

#[tokio::test]
async fn a_direct_message_is_answered_with_a_streamed_reply_in_telegram_html() {
    let bot = Bot::start("").await;
    bot.mock.push(Reply::Sse {
        body: anthropic_deltas(&[
            "The answer is **forty",
            "-two**, and here",
            " is why: it is",
            " the meaning of `everything`.",
        ]),
        delay: Duration::from_millis(250),
        gate: None,
    });
    let sent = bot.api.dm(OWNER, "What is the answer?");
    let want = "The answer is forty-two, and here is why: it is the meaning of everything.";
    let shown = bot
        .api
        .until_chat(OWNER, "the whole reply", |m| {
            m.len() == 1 && m[0].text == want
        })
        .await;
    assert_eq!(
        shown[0].html,
        "The answer is <b>forty-two</b>, and here is why: it is the meaning of <code>everything</code>."
    );
    // Streamed: one message, edited as the text grew.
    assert!(shown[0].edits >= 1, "{shown:?}");
    // `channels.status` (OpenClaw's `channels status`): running, and the
    // message came in.
    let mut admin = bot.gateway().admin().await;
    let status = admin.call_ok("channels.status", json!({})).await;
    assert_eq!(status["channelOrder"], json!(["telegram"]), "{status}");
    assert_eq!(status["channelLabels"]["telegram"], "Telegram");
    assert_eq!(status["channelDefaultAccountId"]["telegram"], "default");
    assert_eq!(status["channels"]["telegram"]["running"], true, "{status}");
    let account = &status["channelAccounts"]["telegram"][0];
    assert_eq!(
        (
            &account["running"],
            &account["configured"],
            &account["lastError"]
        ),
        (&json!(true), &json!(true), &Value::Null),
        "{status}"
    );
    assert!(account["lastInboundAt"].as_u64().is_some(), "{status}");
    assert!(account["lastStartAt"].as_u64().is_some(), "{status}");
    let calls = bot.api.calls();
    let first_send = calls
        .iter()
        .position(|c| c.method == "sendmessage")
        .unwrap();
    let typing = calls
        .iter()
        .position(|c| c.method == "sendchataction")
        .unwrap();
    assert!(typing < first_send, "typing shown before the reply");
    assert_eq!(
        calls[typing].body,
        json!({"chat_id": OWNER, "action": "typing"})
    );
    assert_eq!(
        calls[first_send].body["parse_mode"], "HTML",
        "{:?}",
        calls[first_send].body
    );
    let requests = bot.mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(last_user_text(&requests[0].body), "What is the answer?");
    bot.run_ended(OWNER, sent).await;

    // The chat's session has its key, in the gateway and on the command line.
    let mut admin = bot.gateway().admin().await;
    let list = admin.call_ok("sessions.list", json!({})).await;
    let keys: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert!(
        keys.contains(&format!("telegram:dm:{OWNER}").as_str()),
        "{keys:?}"
    );
    let output = bot
        .sandbox
        .command(&["sessions", "list"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("[telegram:dm:{OWNER}]")),
        "{stdout}"
    );
}

#[tokio::test]
async fn a_long_reply_is_split_under_telegram_s_limit_with_code_blocks_closed() {
    let bot = Bot::start("").await;
    let mut reply = String::new();
    for i in 0..18 {
        reply.push_str(&format!(
            "Paragraph {i}: {}\n\n",
            "lorem ipsum dolor sit amet ".repeat(12).trim()
        ));
    }
    reply.push_str("```rust\n");
    for i in 0..200 {
        reply.push_str(&format!("let value_{i} = compute({i}) + 1;\n"));
    }
    reply.push_str("```\n\nThe end.");
    bot.mock.push(Reply::sse(anthropic_text(&reply, 10)));
    bot.api.dm(OWNER, "Write a lot.");
    let shown = bot
        .api
        .until_chat(OWNER, "the last piece", |m| {
            m.last().is_some_and(|m| m.text.ends_with("The end."))
        })
        .await;
    assert!(shown.len() >= 3, "{} messages", shown.len());
    for message in &shown {
        assert!(
            message.text.encode_utf16().count() <= 4096,
            "{}",
            message.text.len()
        );
        // A piece cut inside the code block closes and reopens it.
        assert_eq!(
            message.html.matches("<pre>").count(),
            message.html.matches("</pre>").count()
        );
    }
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    let shown_words: Vec<String> = shown.iter().flat_map(|m| words(&m.text)).collect();
    let want: Vec<String> = words(&reply.replace("```rust", "").replace("```", ""));
    assert_eq!(shown_words, want, "every word once, in order");
}

#[tokio::test]
async fn an_approval_is_answered_with_an_inline_button_and_only_by_an_allowed_user() {
    let bot = Bot::start(UNSANDBOXED).await;
    let marker = bot
        .sandbox
        .work()
        .join(format!("ran-{}", uuid::Uuid::new_v4().simple()));
    bot.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_tg1",
        "bash",
        &json!({"command": format!("echo ran > {}", marker.display())}),
    )));
    bot.mock.push(Reply::sse(anthropic_text("Done.", 10)));
    bot.api.dm(OWNER, "Make the marker.");
    let question = bot
        .api
        .until_chat(OWNER, "the question", |m| {
            m.iter().any(|m| !m.buttons.is_empty())
        })
        .await
        .into_iter()
        .find(|m| !m.buttons.is_empty())
        .unwrap();
    assert!(
        question.text.contains(&marker.display().to_string()),
        "{}",
        question.text
    );
    let labels: Vec<&str> = question.buttons.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(labels, vec!["Allow once", "Always allow", "Deny"]);
    for (_, data) in &question.buttons {
        assert!(data.starts_with("ap:") && data.len() <= 64, "{data}");
    }
    let allow = question.buttons[0].1.clone();

    // A stranger's press is refused and changes nothing.
    let refused = bot.api.press(STRANGER, &question, &allow);
    let answer = bot
        .api
        .until("the stranger's press answered", |api| {
            api.calls_of("answercallbackquery")
                .into_iter()
                .find(|c| c.body["callback_query_id"] == refused.as_str())
        })
        .await;
    assert_eq!(answer.body["text"], "You may not answer this.");
    assert!(!marker.exists());

    let pressed = bot.api.press(OWNER, &question, &allow);
    bot.api
        .until_chat(OWNER, "the final reply", |m| {
            m.last().is_some_and(|m| m.text == "Done.")
        })
        .await;
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    let answer = bot
        .api
        .until("the owner's press answered", |api| {
            api.calls_of("answercallbackquery")
                .into_iter()
                .find(|c| c.body["callback_query_id"] == pressed.as_str())
        })
        .await;
    assert_eq!(answer.body["text"], "✅ Allowed once.");
    // The question now says how it was answered, without its buttons.
    let settled = bot
        .api
        .until_chat(OWNER, "the question settled", |m| {
            m.iter()
                .any(|m| m.id == question.id && m.buttons.is_empty())
        })
        .await
        .into_iter()
        .find(|m| m.id == question.id)
        .unwrap();
    assert!(
        settled.text.ends_with("✅ Allowed once."),
        "{}",
        settled.text
    );
}

#[tokio::test]
async fn a_stranger_gets_a_pairing_code_and_nothing_else_until_the_owner_approves_it() {
    let bot = Bot::start("").await;
    bot.api.dm(STRANGER, "hello, run rm -rf ~");
    let shown = bot
        .api
        .until_chat(STRANGER, "the pairing answer", |m| !m.is_empty())
        .await;
    assert_eq!(shown.len(), 1);
    let code = shown[0]
        .text
        .lines()
        .map(str::trim)
        .find(|l| {
            l.len() == 8
                && l.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
        .unwrap_or_else(|| panic!("no code in {:?}", shown[0].text))
        .to_string();
    assert!(
        shown[0]
            .text
            .contains(&format!("pincer channels approve {code}"))
    );
    // In a group, a stranger's mention gets nothing at all.
    bot.api.mention(GROUP, STRANGER, "hi");
    // The same stranger writing again and again is not answered again
    // within the minute (each answer would spend the bot's rate limit).
    // Another stranger who writes after them is answered, which shows
    // that the flood was read.
    for n in 0..50 {
        bot.api.dm(STRANGER, &format!("again {n}"));
    }
    let other = STRANGER + 1;
    bot.api.dm(other, "me too");
    bot.api
        .until_chat(other, "the other stranger's code", |m| !m.is_empty())
        .await;
    assert_eq!(bot.api.chat(STRANGER).len(), 1);
    assert!(bot.mock.requests().is_empty(), "the agent never ran");
    assert!(bot.api.chat(GROUP).is_empty());

    let wrong = bot
        .sandbox
        .command(&["channels", "approve", "ABCDEFGH"])
        .output()
        .await
        .unwrap();
    assert!(!wrong.status.success());
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("no pairing code ABCDEFGH"));
    let approved = bot
        .sandbox
        .command(&["channels", "approve", &code.to_lowercase()])
        .output()
        .await
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    assert_eq!(
        String::from_utf8_lossy(&approved.stdout),
        format!("Approved User{STRANGER} (@user{STRANGER}) ({STRANGER}) on telegram.\n")
    );
    let list = bot
        .sandbox
        .command(&["channels", "list"])
        .output()
        .await
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert_eq!(lines[0], format!("approved  telegram  {STRANGER}"));
    assert!(
        lines[1].starts_with(&format!("waiting   telegram  {other} User{other}")),
        "{listed}"
    );

    bot.mock
        .push(Reply::sse(anthropic_text("Welcome aboard.", 10)));
    bot.api.dm(STRANGER, "hello again");
    bot.api
        .until_chat(STRANGER, "the agent's answer", |m| {
            m.last().is_some_and(|m| m.text == "Welcome aboard.")
        })
        .await;
    assert_eq!(last_user_text(&bot.mock.requests()[0].body), "hello again");
}

#[tokio::test]
async fn a_429_is_waited_out_for_as_long_as_telegram_says() {
    let bot = Bot::start("").await;
    bot.api.rate_limit("sendmessage", 2);
    bot.mock.push(Reply::sse(anthropic_text("Short.", 10)));
    bot.api.dm(OWNER, "hi");
    bot.api
        .until_chat(OWNER, "the reply", |m| {
            m.len() == 1 && m[0].text == "Short."
        })
        .await;
    let sends = bot.api.calls_of("sendmessage");
    assert_eq!(sends.len(), 2);
    assert_eq!(sends[0].error, Some(429));
    assert_eq!(sends[1].error, None);
    let gap = sends[1].at - sends[0].at;
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
    assert!(gap < Duration::from_secs(6), "retried after {gap:?}");
}

#[tokio::test]
async fn no_reply_is_never_sent_to_the_chat() {
    let bot = Bot::start("").await;
    bot.mock.push(Reply::Sse {
        body: anthropic_deltas(&["NO_", "REP", "LY"]),
        delay: Duration::from_millis(100),
        gate: None,
    });
    let first = bot.api.dm(OWNER, "just listen");
    bot.run_ended(OWNER, first).await;
    bot.mock.push(Reply::sse(anthropic_text("pong", 10)));
    bot.api.dm(OWNER, "ping");
    let shown = bot
        .api
        .until_chat(OWNER, "pong", |m| m.iter().any(|m| m.text == "pong"))
        .await;
    assert_eq!(texts(&shown), vec!["pong"]);
}

#[tokio::test]
async fn nothing_is_lost_or_run_twice_across_a_gateway_restart() {
    let mut bot = Bot::start("").await;
    bot.mock.push(Reply::sse(anthropic_text("First.", 10)));
    bot.api.dm(OWNER, "one");
    bot.api
        .until_chat(OWNER, "the first reply", |m| m.len() == 1)
        .await;
    // Telegram forgets an update once a poll's offset passes it: wait for
    // that confirmation, then stop the gateway.
    bot.api
        .until("the offset past the first update", |api| {
            (api.unconfirmed() == 0).then_some(())
        })
        .await;
    bot.stop().await;

    // Written while pincer is down.
    let two = bot.api.dm(OWNER, "two");
    bot.mock.push(Reply::sse(anthropic_text("Second.", 10)));
    bot.launch().await;
    bot.api
        .until_chat(OWNER, "the second reply", |m| m.len() == 2)
        .await;
    bot.run_ended(OWNER, two).await;
    let requests = bot.mock.requests();
    let asked: Vec<String> = requests.iter().map(|r| last_user_text(&r.body)).collect();
    assert_eq!(asked, vec!["one", "two"]);
    assert_eq!(texts(&bot.api.chat(OWNER)), vec!["First.", "Second."]);
}

#[tokio::test]
async fn in_a_group_the_agent_answers_only_when_mentioned_and_in_the_group() {
    let bot = Bot::start("").await;
    bot.api
        .group(GROUP, OWNER, "talking among ourselves", json!([]));
    bot.mock.push(Reply::sse(anthropic_text("Four.", 10)));
    bot.api.mention(GROUP, OWNER, "what is 2+2?");
    bot.api
        .until_chat(GROUP, "the group reply", |m| {
            m.len() == 1 && m[0].text == "Four."
        })
        .await;
    let requests = bot.mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(last_user_text(&requests[0].body), "what is 2+2?");
    assert!(bot.api.chat(OWNER).is_empty());
    let mut admin = bot.gateway().admin().await;
    let list = admin.call_ok("sessions.list", json!({})).await;
    assert!(
        list.to_string()
            .contains(&format!("telegram:group:{GROUP}"))
    );
}

#[tokio::test]
async fn chat_commands_start_over_stop_change_the_model_and_report_status() {
    let bot = Bot::start("").await;
    bot.mock.push(Reply::sse(anthropic_text("Hello.", 10)));
    bot.api.dm(OWNER, "hi");
    bot.api.until_chat(OWNER, "hello", |m| m.len() == 1).await;
    let mut admin = bot.gateway().admin().await;
    let key = format!("telegram:dm:{OWNER}");
    let before = admin.call_ok("sessions.resolve", json!({"key": key})).await;

    bot.api.dm(OWNER, "/status");
    let shown = bot
        .api
        .until_chat(OWNER, "the status", |m| m.len() == 2)
        .await;
    assert!(
        shown[1].text.starts_with("• Model: anthropic/"),
        "{}",
        shown[1].text
    );
    assert!(shown[1].text.ends_with("\n• Idle."), "{}", shown[1].text);

    bot.api.dm(OWNER, "/model");
    let shown = bot
        .api
        .until_chat(OWNER, "the model list", |m| m.len() == 3)
        .await;
    let lines: Vec<&str> = shown[2].text.lines().collect();
    assert!(lines[0].starts_with("Model: anthropic/"), "{lines:?}");
    assert!(lines.contains(&"• anthropic/claude-opus-4-1"), "{lines:?}");
    assert_eq!(lines.last(), Some(&"Change it with /model PROVIDER/MODEL"));
    bot.api.dm(OWNER, "/model anthropic/claude-opus-4-1");
    let shown = bot
        .api
        .until_chat(OWNER, "the model answer", |m| m.len() == 4)
        .await;
    assert_eq!(shown[3].text, "Model set to anthropic/claude-opus-4-1.");
    bot.mock
        .push(Reply::sse(anthropic_text("On the new model.", 10)));
    bot.api.dm(OWNER, "and now?");
    bot.api
        .until_chat(OWNER, "the reply", |m| m.len() == 5)
        .await;
    assert_eq!(bot.mock.requests()[1].body["model"], "claude-opus-4-1");

    bot.api.dm(OWNER, "/new");
    let shown = bot
        .api
        .until_chat(OWNER, "the reset", |m| m.len() == 6)
        .await;
    assert_eq!(shown[5].text, "Started a new session.");
    let after = admin.call_ok("sessions.resolve", json!({"key": key})).await;
    assert_ne!(before, after);

    // /stop ends a run that is still streaming.
    bot.mock.push(Reply::Sse {
        body: anthropic_deltas(&["A very long story that goes on"; 40]),
        delay: Duration::from_millis(200),
        gate: None,
    });
    let long = bot.api.dm(OWNER, "tell me a long story");
    bot.mock.wait_for_requests(3, TIMEOUT).await;
    bot.api.dm(OWNER, "/stop");
    bot.api
        .until_chat(OWNER, "stopped", |m| m.iter().any(|m| m.text == "Stopped."))
        .await;
    let run = format!("telegram:{OWNER}:{long}");
    let waited = admin
        .call_ok("agent.wait", json!({"runId": run, "timeoutMs": 20_000}))
        .await;
    assert_ne!(waited["status"], "ok", "{waited}");
}

#[tokio::test]
async fn a_refused_token_stops_the_channel_once_and_the_gateway_keeps_serving() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let api = TelegramApi::start().await;
    write_config(&sandbox, &api, "");
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    cmd.env("TELEGRAM_BOT_TOKEN", "123:wrong");
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let line = gateway
        .stderr
        .wait_line(TIMEOUT, |l| {
            l.contains("channel telegram stopped")
                .then(|| l.to_string())
        })
        .await
        .expect("the channel says it stopped");
    assert!(line.contains("Telegram refused the bot token"), "{line}");
    assert!(
        !line.contains("123:wrong"),
        "the token is never printed: {line}"
    );
    let mut admin = gateway.admin().await;
    admin.call_ok("health", json!({})).await;
    assert_eq!(api.calls_of("getme").len(), 1, "no retry storm");
    // `channels.status` (OpenClaw's `channels status`) says so, without
    // the token.
    let status = admin.call_ok("channels.status", json!({})).await;
    let account = &status["channelAccounts"]["telegram"][0];
    assert_eq!(
        (&account["accountId"], &account["running"]),
        (&json!("default"), &json!(false)),
        "{status}"
    );
    assert!(
        account["lastError"].as_str().is_some_and(
            |e| e.contains("Telegram refused the bot token") && !e.contains("123:wrong")
        ),
        "{status}"
    );
    assert!(account["lastStopAt"].as_u64().is_some(), "{status}");
    gateway.stop().await;
}

#[tokio::test]
async fn a_webhook_is_taken_only_with_telegram_s_secret_header() {
    let secret = format!("s_{}", uuid::Uuid::new_v4().simple());
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let api = TelegramApi::start().await;
    write_config(
        &sandbox,
        &api,
        "mode = \"webhook\"\nwebhook_secret_env = \"TG_HOOK_SECRET\"\nwebhook_url = \"https://bot.example.com/channels/telegram\"",
    );
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    cmd.env("TELEGRAM_BOT_TOKEN", &api.token)
        .env("TG_HOOK_SECRET", &secret);
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let set = api
        .until("setWebhook", |api| {
            api.calls_of("setwebhook").into_iter().next()
        })
        .await;
    assert_eq!(
        set.body,
        json!({"url": "https://bot.example.com/channels/telegram", "secret_token": secret, "allowed_updates": ["message", "callback_query"]})
    );
    let update = json!({"update_id": 5, "message": {
        "message_id": 9, "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
        "chat": {"id": OWNER, "type": "private"}, "date": 1_764_020_000, "text": "via webhook"}});
    let url = format!("http://{}/channels/telegram", gateway.addr);
    let http = reqwest::Client::new();
    for bad in [None, Some("wrong"), Some("")] {
        let mut request = http.post(&url).json(&update);
        if let Some(bad) = bad {
            request = request.header("X-Telegram-Bot-Api-Secret-Token", bad);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{bad:?}");
    }
    assert!(mock.requests().is_empty());
    // A body far beyond any update is refused before it is read whole:
    // 413, or the line closed while the client was still writing.
    let huge = http
        .post(&url)
        .header("X-Telegram-Bot-Api-Secret-Token", &secret)
        .body(vec![b'x'; 2 * 1024 * 1024])
        .send()
        .await;
    match huge {
        Ok(response) => assert_eq!(response.status(), 413),
        Err(e) => assert!(e.is_request(), "{e}"),
    }
    assert!(mock.requests().is_empty());
    bot_reply(&mock, "Hooked.");
    // A new connection: the refused upload's may still be closing, and a
    // pooled client could send on it.
    let response = reqwest::Client::new()
        .post(&url)
        .header("X-Telegram-Bot-Api-Secret-Token", &secret)
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    api.until_chat(OWNER, "the reply", |m| {
        m.len() == 1 && m[0].text == "Hooked."
    })
    .await;
    assert!(
        api.calls_of("getupdates").is_empty(),
        "no polling in webhook mode"
    );
    gateway.stop().await;
}

fn bot_reply(mock: &MockModel, text: &str) {
    mock.push(Reply::sse(anthropic_text(text, 10)));
}

#[tokio::test]
async fn a_message_sent_while_the_agent_works_follows_the_session_s_queue_mode() {
    let bot = Bot::start("").await;
    bot.mock.push(Reply::sse(anthropic_text("Hello.", 10)));
    let first = bot.api.dm(OWNER, "hi");
    bot.run_ended(OWNER, first).await;
    let mut admin = bot.gateway().admin().await;
    let key = format!("telegram:dm:{OWNER}");
    admin
        .call_ok(
            "sessions.patch",
            json!({"key": key, "queueMode": "followup"}),
        )
        .await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    bot.mock.push(Reply::Sse {
        body: anthropic_text("The slow answer.", 10),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    bot.mock
        .push(Reply::sse(anthropic_text("The follow-up answer.", 10)));
    bot.api.dm(OWNER, "slow question");
    bot.mock.wait_for_requests(2, TIMEOUT).await;
    let later = bot.api.dm(OWNER, "while you work");
    // Taken by the gateway (and so waiting as a follow-up) before the
    // first answer is let through.
    bot.api
        .until("the second message taken", |api| {
            (api.unconfirmed() == 0).then_some(())
        })
        .await;
    assert_eq!(
        bot.mock.requests().len(),
        2,
        "a follow-up waits for the turn to end"
    );
    gate.notify_one();
    bot.run_ended(OWNER, later).await;
    let shown = bot
        .api
        .until_chat(OWNER, "both answers", |m| m.len() == 3)
        .await;
    assert_eq!(
        texts(&shown),
        vec!["Hello.", "The slow answer.", "The follow-up answer."]
    );
    let asked: Vec<String> = bot
        .mock
        .requests()
        .iter()
        .map(|r| last_user_text(&r.body))
        .collect();
    assert_eq!(asked, vec!["hi", "slow question", "while you work"]);
}

#[tokio::test]
async fn an_unanswered_approval_is_rejected_after_the_timeout_and_says_so() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let api = TelegramApi::start().await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\napproval_timeout_secs = 1\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [\"{OWNER}\"]\npoll_timeout_secs = 5\n{UNSANDBOXED}\n",
            api.url
        ),
    )
    .unwrap();
    let mut bot = Bot {
        sandbox,
        mock,
        api,
        gateway: None,
    };
    bot.launch().await;
    let marker = bot
        .sandbox
        .work()
        .join(format!("never-{}", uuid::Uuid::new_v4().simple()));
    bot.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_tg2",
        "bash",
        &json!({"command": format!("echo ran > {}", marker.display())}),
    )));
    bot.mock
        .push(Reply::sse(anthropic_text("I was not allowed.", 10)));
    bot.api.dm(OWNER, "Make the marker.");
    let shown = bot
        .api
        .until_chat(OWNER, "the timed-out question and the reply", |m| {
            m.iter().any(|m| {
                m.text.ends_with("Not answered in time: rejected.") && m.buttons.is_empty()
            }) && m.last().is_some_and(|m| m.text == "I was not allowed.")
        })
        .await;
    assert!(shown[0].text.contains(&marker.display().to_string()));
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_chat_s_session_shows_its_key_on_the_web_page() {
    let bot = Bot::start("").await;
    bot.mock.push(Reply::sse(anthropic_text("Hi there.", 10)));
    let sent = bot.api.dm(OWNER, "hello from Telegram");
    bot.run_ended(OWNER, sent).await;
    let browser = support::browser::Browser::start(1280, 900).await;
    let gateway = bot.gateway();
    browser
        .sign_in(gateway.addr, gateway.token.as_deref().unwrap())
        .await;
    browser
        .until(
            "the chat's session, named by its key",
            &format!(
                "return [...document.querySelectorAll('[data-testid=session-item]')].some(b => \
                 b.dataset.key === 'telegram:dm:{OWNER}' && b.querySelector('small').textContent.startsWith('telegram:dm:{OWNER} · '));"
            ),
        )
        .await;
}

#[tokio::test]
async fn an_outage_of_the_bot_api_is_retried_with_backoff_and_nothing_is_lost() {
    let bot = Bot::start("").await;
    // The poll in flight ends; the next two fail like a broken proxy.
    bot.api
        .until("the first long poll", |api| {
            (!api.calls_of("getupdates").is_empty()).then_some(())
        })
        .await;
    bot.api.fail("getupdates", 502);
    bot.api.fail("getupdates", 502);
    bot.api.fail("sendmessage", 503);
    bot.mock.push(Reply::sse(anthropic_text("Still here.", 10)));
    bot.api.dm(OWNER, "are you there?");
    bot.api
        .until_chat(OWNER, "the reply", |m| {
            m.len() == 1 && m[0].text == "Still here."
        })
        .await;
    let polls = bot.api.calls_of("getupdates");
    let failed: Vec<_> = polls.iter().filter(|c| c.error == Some(502)).collect();
    assert_eq!(failed.len(), 2);
    // Backoff: the second try waits at least a second after the first.
    assert!(failed[1].at - failed[0].at >= Duration::from_millis(900));
    let sends = bot.api.calls_of("sendmessage");
    assert_eq!(
        sends.iter().map(|c| c.error).collect::<Vec<_>>(),
        vec![Some(503), None]
    );
    assert_eq!(bot.mock.requests().len(), 1, "one run");
}

#[tokio::test]
async fn in_polling_mode_nothing_posted_to_the_gateway_reaches_the_agent() {
    let bot = Bot::start("").await;
    let update = json!({"update_id": 5, "message": {
        "message_id": 9, "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
        "chat": {"id": OWNER, "type": "private"}, "date": 1_764_020_000, "text": "forged"}});
    let http = reqwest::Client::new();
    for path in [
        "/channels/telegram",
        "/channels/telegram/x",
        "/channels/slack",
        "/channels/",
    ] {
        let url = format!("http://{}{path}", bot.gateway().addr);
        let response = http
            .post(&url)
            .header("X-Telegram-Bot-Api-Secret-Token", "anything")
            .json(&update)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404, "{path}");
    }
    bot.mock.push(Reply::sse(anthropic_text("Real.", 10)));
    bot.api.dm(OWNER, "real");
    bot.api
        .until_chat(OWNER, "the real reply", |m| m.len() == 1)
        .await;
    let asked: Vec<String> = bot
        .mock
        .requests()
        .iter()
        .map(|r| last_user_text(&r.body))
        .collect();
    assert_eq!(asked, vec!["real"]);
}

#[tokio::test]
async fn the_same_short_answer_twice_is_sent_twice() {
    let bot = Bot::start("").await;
    // The first answer waits out a rate limit, so the second run has
    // ended before its chat gets to it.
    bot.api.rate_limit("sendmessage", 1);
    for _ in 0..2 {
        bot.mock.push(Reply::sse(anthropic_text("OK.", 10)));
        let sent = bot.api.dm(OWNER, "say ok");
        bot.run_ended(OWNER, sent).await;
    }
    let shown = bot
        .api
        .until_chat(OWNER, "both answers", |m| m.len() == 2)
        .await;
    assert_eq!(texts(&shown), vec!["OK.", "OK."]);
}

#[tokio::test]
async fn messages_collected_into_one_turn_get_one_answer() {
    let bot = Bot::start("").await;
    bot.mock.push(Reply::sse(anthropic_text("Hello.", 10)));
    let first = bot.api.dm(OWNER, "hi");
    bot.run_ended(OWNER, first).await;
    let mut admin = bot.gateway().admin().await;
    let key = format!("telegram:dm:{OWNER}");
    admin
        .call_ok(
            "sessions.patch",
            json!({"key": key, "queueMode": "collect"}),
        )
        .await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    bot.mock.push(Reply::Sse {
        body: anthropic_text("First turn.", 10),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    bot.mock
        .push(Reply::sse(anthropic_text("Both notes taken.", 10)));
    bot.api.dm(OWNER, "start");
    bot.mock.wait_for_requests(2, TIMEOUT).await;
    bot.api.dm(OWNER, "note one");
    let last = bot.api.dm(OWNER, "note two");
    bot.api
        .until("both notes taken", |api| {
            (api.unconfirmed() == 0).then_some(())
        })
        .await;
    gate.notify_one();
    bot.run_ended(OWNER, last).await;
    bot.mock.wait_for_requests(3, TIMEOUT).await;
    let shown = bot
        .api
        .until_chat(OWNER, "the collected answer", |m| {
            m.iter().any(|m| m.text == "Both notes taken.")
        })
        .await;
    assert_eq!(
        texts(&shown),
        vec!["Hello.", "First turn.", "Both notes taken."]
    );
}

#[tokio::test]
async fn undo_in_a_chat_puts_the_last_turn_s_files_back_after_the_owner_says_so() {
    let bot = Bot::start(UNSANDBOXED).await;
    let file = bot.sandbox.work().join("made.txt");
    bot.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_tg_w",
        "bash",
        &json!({"command": format!("echo made > {}", file.display())}),
    )));
    bot.mock.push(Reply::sse(anthropic_text("Made.", 10)));
    bot.api.dm(OWNER, "Make the file.");
    let question = bot
        .api
        .until_chat(OWNER, "the command's question", |m| {
            m.iter().any(|m| !m.buttons.is_empty())
        })
        .await
        .into_iter()
        .find(|m| !m.buttons.is_empty())
        .unwrap();
    bot.api.press(OWNER, &question, &question.buttons[0].1);
    bot.api
        .until_chat(OWNER, "the reply", |m| {
            m.last().is_some_and(|m| m.text == "Made.")
        })
        .await;
    assert!(file.exists());

    // /undo asks, in the question's own words, then puts the file back.
    bot.api.dm(OWNER, "/undo");
    let undo = bot
        .api
        .until_chat(OWNER, "the undo's question", |m| {
            m.iter()
                .any(|m| m.id != question.id && !m.buttons.is_empty())
        })
        .await
        .into_iter()
        .find(|m| m.id != question.id && !m.buttons.is_empty())
        .unwrap();
    assert!(undo.text.contains("Undo turn 1"), "{}", undo.text);
    // It says which file goes, and how many lines it changes.
    assert!(
        undo.text.contains("Puts back 1 file") && undo.text.contains("• made.txt (+0 −1)"),
        "{}",
        undo.text
    );
    assert!(!undo.text.contains("asks to run"), "{}", undo.text);
    let labels: Vec<&str> = undo.buttons.iter().map(|b| b.0.as_str()).collect();
    assert_eq!(labels, vec!["Restore", "Cancel"]);
    bot.api.press(OWNER, &undo, &undo.buttons[0].1);
    bot.api
        .until_chat(OWNER, "the undo's report", |m| {
            m.iter()
                .any(|m| m.text.contains("Undo turn 1") && m.text.contains("done"))
        })
        .await;
    assert!(!file.exists());
}

#[tokio::test]
async fn a_chat_s_commands_run_in_the_sandbox_and_can_never_leave_it() {
    // A home and project outside temp (which the sandbox lets commands
    // write), and pincer's own sandbox settings as users have them: the
    // channel's session is confined even though this gateway's own mode
    // is off, and nobody is asked to let a command out.
    let sandbox = Sandbox::outside_temp();
    let outside = sandbox.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let escaped = outside.join("escaped.txt");
    let inside = sandbox.work().join("inside.txt");
    let bot = Bot::start_in(sandbox, "").await;
    bot.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_in",
        "bash",
        &json!({"command": format!("echo in > {}", inside.display())}),
    )));
    bot.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_out",
        "bash",
        &json!({"command": format!("echo out > {}", escaped.display())}),
    )));
    bot.mock.push(Reply::sse(anthropic_text("Done.", 10)));
    bot.api.dm(OWNER, "Write both files.");
    let shown = bot
        .api
        .until_chat(OWNER, "the final reply", |m| {
            m.last().is_some_and(|m| m.text == "Done.")
        })
        .await;
    assert!(
        shown.iter().all(|m| m.buttons.is_empty()),
        "a question was asked: {:?}",
        texts(&shown)
    );
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), "in\n");
    assert!(!escaped.exists());
    let inside_result = support::tool_results(&bot.mock, 1);
    assert!(!inside_result[0].1, "{:?}", inside_result);
    let outside_result = support::tool_results(&bot.mock, 2);
    assert!(outside_result[0].1);
    assert!(
        outside_result[0]
            .2
            .contains("This session cannot run commands outside the sandbox"),
        "{:?}",
        outside_result
    );
}

#[tokio::test]
async fn work_that_ends_after_the_turn_brings_its_answer_to_the_chat() {
    let bot = Bot::start("").await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    bot.mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "index the wiki", "prompt": "JOB-WIKI: index it", "background": true}),
    )));
    bot.mock.push_for(
        "JOB-WIKI",
        Reply::Sse {
            body: anthropic_text("Indexed 42 pages.", 10),
            delay: Duration::ZERO,
            gate: Some(gate.clone()),
        },
    );
    bot.mock
        .push(Reply::sse(anthropic_text("A helper is on it.", 10)));
    bot.mock.push_for(
        "[Background task t1",
        Reply::sse(anthropic_text("Done: the wiki has 42 pages.", 10)),
    );
    let sent = bot.api.dm(OWNER, "index the wiki in the background");
    bot.run_ended(OWNER, sent).await;
    bot.api
        .until_chat(OWNER, "the first answer", |m| {
            m.iter().any(|m| m.text == "A helper is on it.")
        })
        .await;
    gate.notify_one();
    // Nobody wrote again: the helper's answer started a turn, and its
    // reply came to the chat by itself.
    let shown = bot
        .api
        .until_chat(OWNER, "the answer of the finished work", |m| m.len() == 2)
        .await;
    assert_eq!(
        texts(&shown),
        vec!["A helper is on it.", "Done: the wiki has 42 pages."]
    );
    let requests = bot.mock.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("Indexed 42 pages."), "{last}");
}
