//! The Slack channel end to end: the real `pincer gateway` with
//! `[channels.slack]` pointed at a local Slack (tests/support/slack_api.rs:
//! the Web API and a Socket Mode websocket) and the mock model. A message
//! goes in as Slack sends it, the agent runs, the reply comes out as Slack
//! receives it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::slack_api::{
    SlackApi, block_actions, buttons_of, channel_message, dm, event_callback, markdown_of, sign,
};
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};

const BOT: &str = "xoxb-test-bot-token";
const APP: &str = "xapp-test-app-token";
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// The user's config: the gateway, and Slack at `slack` with `U1` allowed.
/// The chat's sessions run unsandboxed (`sandbox = { mode = "off" }` in
/// the channel's table): these tests are about the questions commands
/// ask; `channels_telegram.rs` proves a chat's commands are confined.
fn write_config(sandbox: &Sandbox, slack: &SlackApi, extra: &str) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "[gateway]\napproval_timeout_secs = 120\n\n[channels.slack]\napi_url = \"{}\"\nallow = [\"U1\"]\nedit_interval_ms = 150\nsandbox = {{ mode = \"off\" }}\n{extra}\n",
            slack.url
        ),
    )
    .unwrap();
}

async fn start_gateway(sandbox: &Sandbox, mock: &MockModel) -> Gateway {
    let token = new_token();
    let mut cmd = gateway_command(sandbox, mock, Some(&token), &[]);
    cmd.env("SLACK_BOT_TOKEN", BOT)
        .env("SLACK_APP_TOKEN", APP)
        .env("SLACK_SIGNING_SECRET", SECRET);
    Gateway::spawn(cmd, Some(&token)).await
}

/// A sandbox, the mock model with `replies`, the local Slack and a gateway
/// connected to it over Socket Mode.
async fn socket_setup(replies: Vec<Reply>) -> (Sandbox, MockModel, SlackApi, Gateway) {
    socket_setup_in(Sandbox::new(), replies).await
}

async fn socket_setup_in(
    sandbox: Sandbox,
    replies: Vec<Reply>,
) -> (Sandbox, MockModel, SlackApi, Gateway) {
    let mock = MockModel::start().await;
    for reply in replies {
        mock.push(reply);
    }
    let slack = SlackApi::start(BOT, APP).await;
    write_config(&sandbox, &slack, "");
    let gateway = start_gateway(&sandbox, &mock).await;
    slack
        .wait("the gateway's Socket Mode connection", |s| s.connected())
        .await;
    (sandbox, mock, slack, gateway)
}

fn text(reply: &str) -> Reply {
    Reply::sse(anthropic_text(reply, 10))
}

/// What the user wrote in model request `index`.
fn user_text(mock: &MockModel, index: usize) -> String {
    let body = &mock.requests()[index].body;
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    support::without_time_lines(&last)["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

/// A message pincer posts whole: its exact body.
fn posted(channel: &str, markdown: &str, thread: Option<&str>) -> Value {
    let mut body = json!({"channel": channel, "text": markdown,
        "blocks": [{"type": "markdown", "text": markdown}],
        "unfurl_links": false, "unfurl_media": false});
    if let Some(thread) = thread {
        body["thread_ts"] = json!(thread);
    }
    body
}

#[tokio::test]
async fn a_direct_message_runs_the_agent_and_the_reply_streams_into_one_message() {
    let parts = [
        "Hello Ana, this is the first part of the answer. ",
        "Here comes the second part, ",
        "and this is the end.",
    ];
    let whole = parts.concat();
    let streamed = Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: Duration::from_millis(300),
        gate: None,
    };
    let (_sandbox, mock, slack, gateway) = socket_setup(vec![streamed]).await;
    let envelope = slack.push_event(dm("D1", "U1", "say hello &amp; more", "1.000100"));
    slack
        .wait("the whole reply, the envelope acknowledged", |s| {
            s.texts() == vec![whole.clone()] && s.acked(&envelope)
        })
        .await;
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(user_text(&mock, 0), "say hello & more");

    // One message, posted early and then edited to the whole text.
    let posts = slack.bodies_of("chat.postMessage");
    assert_eq!(posts.len(), 1, "{posts:#?}");
    let first = markdown_of(&posts[0]);
    assert!(
        first.len() < whole.len() && whole.starts_with(&first),
        "{first}"
    );
    assert_eq!(posts[0], posted("D1", &first, None));
    let ts = slack.messages()[0].0.clone();
    let updates = slack.bodies_of("chat.update");
    assert!(!updates.is_empty());
    assert_eq!(
        updates.last().unwrap(),
        &json!({"channel": "D1", "ts": ts, "text": whole,
            "blocks": [{"type": "markdown", "text": whole}]})
    );
    // Each edit waited the configured interval after the one before.
    let edits = slack.calls_of("chat.update");
    for pair in edits.windows(2) {
        assert!(pair[1].at - pair[0].at >= Duration::from_millis(140));
    }
    // The chat is a session like any other.
    let mut admin = gateway.admin().await;
    let list = admin.call_ok("sessions.list", json!({})).await;
    let keys: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["key"].as_str())
        .collect();
    assert!(keys.contains(&"slack:dm:D1"), "{keys:?}");
    assert!(mock.violations().is_empty());
}

#[tokio::test]
async fn a_channel_answers_only_a_mention_and_a_thread_reply_stays_in_the_thread() {
    let (_sandbox, mock, slack, _gateway) =
        socket_setup(vec![text("Four."), text("Threaded answer.")]).await;
    let ignored = slack.push_event(channel_message(
        "C1",
        "U1",
        "hello everyone",
        "2.000100",
        None,
    ));
    let asked = slack.push_event(channel_message(
        "C1",
        "U1",
        "<@UBOT> what is 2+2?",
        "2.000200",
        None,
    ));
    slack.wait("the answer", |s| s.texts() == ["Four."]).await;
    let in_thread = slack.push_event(channel_message(
        "C1",
        "U1",
        "<@UBOT> and in a thread?",
        "2.000400",
        Some("2.000300"),
    ));
    slack
        .wait("the thread's answer, every envelope acknowledged", |s| {
            s.texts() == ["Four.", "Threaded answer."]
                && [&ignored, &asked, &in_thread].iter().all(|e| s.acked(e))
        })
        .await;
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(user_text(&mock, 0), "what is 2+2?");
    assert_eq!(user_text(&mock, 1), "and in a thread?");
    assert_eq!(
        slack.bodies_of("chat.postMessage"),
        vec![
            posted("C1", "Four.", None),
            posted("C1", "Threaded answer.", Some("2.000300"))
        ]
    );
}

#[tokio::test]
async fn a_long_reply_is_split_into_messages_slack_takes() {
    let paragraphs: Vec<String> = (0..4)
        .map(|i| format!("{}{i}", "word ".repeat(1000)).trim().to_string())
        .collect();
    let whole = paragraphs.join("\n\n");
    let (_sandbox, _mock, slack, _gateway) = socket_setup(vec![text(&whole)]).await;
    slack.push_event(dm("D1", "U1", "write a lot", "3.000100"));
    let expected = vec![
        format!("{}\n\n{}", paragraphs[0], paragraphs[1]),
        format!("{}\n\n{}", paragraphs[2], paragraphs[3]),
    ];
    slack
        .wait("the reply in two messages", |s| s.texts() == expected)
        .await;
    // Slack refused nothing (the mock refuses a markdown block over 12,000).
    assert!(slack.calls().iter().all(|c| c.ok), "{:#?}", slack.calls());
}

#[tokio::test]
async fn an_approval_is_answered_with_a_button_and_a_stranger_s_press_does_nothing() {
    let sandbox = Sandbox::new();
    let marker = sandbox.work().join("approved-by-button");
    let command = format!("touch {}", marker.display());
    let (_sandbox, mock, slack, _gateway) = socket_setup_in(
        sandbox,
        vec![
            Reply::sse(anthropic_tool_call(
                "toolu_s",
                "bash",
                &json!({"command": command}),
            )),
            text("Done."),
        ],
    )
    .await;
    slack.push_event(dm("D1", "U1", "touch it", "4.000100"));
    slack
        .wait("the question with buttons", |s| {
            s.messages().iter().any(|(_, m)| !buttons_of(m).is_empty())
        })
        .await;
    let (ts, question) = slack
        .messages()
        .into_iter()
        .find(|(_, m)| !buttons_of(m).is_empty())
        .unwrap();
    let buttons = buttons_of(&question);
    let id = buttons[0]
        .strip_prefix("ap:")
        .unwrap()
        .rsplit_once(':')
        .unwrap()
        .0
        .to_string();
    assert_eq!(
        buttons,
        vec![
            format!("ap:{id}:allow-once"),
            format!("ap:{id}:allow-always"),
            format!("ap:{id}:deny")
        ]
    );

    // Someone not allowed presses "Allow once": told so, nothing runs.
    let stranger = slack.push_interactive(block_actions("D1", "U666", &ts, &buttons[0]));
    slack
        .wait("the stranger's note", |s| {
            s.calls_of("chat.postEphemeral").len() == 1 && s.acked(&stranger)
        })
        .await;
    assert_eq!(
        slack.bodies_of("chat.postEphemeral"),
        vec![json!({"channel": "D1", "user": "U666", "text": "You may not answer this."})]
    );
    assert!(!marker.exists());
    assert_eq!(mock.requests().len(), 1);

    let pressed = slack.push_interactive(block_actions("D1", "U1", &ts, &buttons[0]));
    slack
        .wait("the reply after the tool ran", |s| {
            s.texts().last().map(String::as_str) == Some("Done.") && s.acked(&pressed)
        })
        .await;
    assert!(marker.exists());
    // The question lost its buttons and says what was decided.
    let settled = slack
        .messages()
        .into_iter()
        .find(|(t, _)| *t == ts)
        .unwrap()
        .1;
    assert_eq!(buttons_of(&settled), Vec::<String>::new());
    assert!(
        markdown_of(&settled).ends_with("\n\n✅ Allowed once."),
        "{settled}"
    );
    assert_eq!(
        slack.bodies_of("chat.postEphemeral")[1],
        json!({"channel": "D1", "user": "U1", "text": "✅ Allowed once."})
    );
    assert_eq!(mock.requests().len(), 2);
}

#[tokio::test]
async fn an_unknown_user_gets_a_pairing_code_and_nothing_runs_until_approved() {
    let (sandbox, mock, slack, _gateway) = socket_setup(vec![text("Welcome.")]).await;
    slack.push_event(dm("D9", "U9", "hi, run rm -rf /", "5.000100"));
    slack
        .wait("the pairing answer", |s| s.texts().len() == 1)
        .await;
    let answer = slack.texts()[0].clone();
    let code = answer
        .split("give them this code:\n\n")
        .nth(1)
        .and_then(|rest| rest.split("\n\n").next())
        .unwrap_or_else(|| panic!("no code in {answer}"))
        .to_string();
    assert_eq!(
        answer,
        format!(
            "This assistant is private. To ask its owner for access, give them this code:\n\n{code}\n\nThey approve it with `pincer channels approve {code}`. The code lasts an hour."
        )
    );
    assert!(mock.requests().is_empty());

    let approved = sandbox
        .command(&["channels", "approve", &code])
        .output()
        .await
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    assert_eq!(
        String::from_utf8_lossy(&approved.stdout),
        "Approved U9 on slack.\n"
    );

    slack.push_event(dm("D9", "U9", "hi again", "5.000200"));
    slack
        .wait("the agent's answer", |s| s.texts().len() == 2)
        .await;
    assert_eq!(slack.texts()[1], "Welcome.");
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(user_text(&mock, 0), "hi again");
}

#[tokio::test]
async fn a_rate_limited_post_waits_what_slack_asks_then_goes_out_once() {
    let (_sandbox, _mock, slack, _gateway) = socket_setup(vec![text("Short.")]).await;
    slack.rate_limit("chat.postMessage", 1);
    slack.push_event(dm("D1", "U1", "hi", "6.000100"));
    slack.wait("the reply", |s| s.texts() == ["Short."]).await;
    let posts = slack.calls_of("chat.postMessage");
    assert_eq!(posts.len(), 2);
    assert!(!posts[0].ok && posts[1].ok);
    let gap = posts[1].at - posts[0].at;
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
}

#[tokio::test]
async fn a_no_reply_answer_sends_nothing() {
    let (_sandbox, mock, slack, _gateway) =
        socket_setup(vec![text("NO_REPLY"), text("Hello.")]).await;
    slack.push_event(dm("D1", "U1", "just listen", "7.000100"));
    mock.wait_for_requests(1, TIMEOUT).await;
    // The next message's answer comes out: the first one had its chance.
    slack.push_event(dm("D1", "U1", "now answer", "7.000200"));
    slack
        .wait("the second answer", |s| s.texts() == ["Hello."])
        .await;
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(slack.calls_of("chat.postMessage").len(), 1);
    assert_eq!(slack.calls_of("chat.update").len(), 0);
}

#[tokio::test]
async fn an_envelope_not_acknowledged_comes_again_after_a_restart_and_runs_once() {
    let (sandbox, mock, slack, gateway) =
        socket_setup(vec![text("First answer."), text("Second answer.")]).await;
    // Slack refreshes the connection: pincer opens a new one at once.
    slack.disconnect("refresh_requested");
    slack
        .wait("a second connection", |s| {
            s.connections() == 2 && s.connected()
        })
        .await;
    assert_eq!(slack.calls_of("apps.connections.open").len(), 2);
    // The connection breaks: pincer connects again (after a backoff).
    slack.drop_connection();
    slack
        .wait("a third connection", |s| {
            s.connections() == 3 && s.connected()
        })
        .await;
    assert_eq!(slack.calls_of("apps.connections.open").len(), 3);

    // The acknowledgement of the first message never reaches Slack (the
    // gateway dies right after sending it).
    slack.lose_acks(true);
    let first = slack.push_event(dm("D1", "U1", "first", "8.000100"));
    slack
        .wait("the first answer", |s| s.texts() == ["First answer."])
        .await;
    slack
        .wait("the acknowledgement sent", |s| s.acks().contains(&first))
        .await;
    gateway.stop().await;
    slack.lose_acks(false);
    // Written while the gateway was down: waits for it.
    let second = slack.push_event(dm("D1", "U1", "second", "8.000200"));
    assert!(!slack.acked(&first) && !slack.acked(&second));

    let _gateway = start_gateway(&sandbox, &mock).await;
    slack
        .wait("both envelopes acknowledged", |s| {
            s.acked(&first) && s.acked(&second)
        })
        .await;
    slack
        .wait("the second answer", |s| {
            s.texts() == ["First answer.", "Second answer."]
        })
        .await;
    assert_eq!(slack.deliveries(&first), 2);
    // The first message ran once; the second once.
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(user_text(&mock, 0), "first");
    assert_eq!(user_text(&mock, 1), "second");
    assert_eq!(slack.calls_of("chat.postMessage").len(), 2);
}

/// Posts `body` to the gateway's `/channels/slack` with Slack's headers.
async fn post(
    gateway: &Gateway,
    body: &[u8],
    content_type: &str,
    timestamp: i64,
    signature: &str,
) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("http://{}/channels/slack", gateway.addr))
        .header("content-type", content_type)
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body.to_vec())
        .timeout(TIMEOUT)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Posts `body` signed with the secret, again while the channel is still
/// starting (503).
async fn post_signed(gateway: &Gateway, body: &[u8], content_type: &str) -> (u16, String) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let ts = now();
        let answer = post(
            gateway,
            body,
            content_type,
            ts,
            &sign(SECRET, &ts.to_string(), body),
        )
        .await;
        if answer.0 != 503 || tokio::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_events_api_takes_only_signed_fresh_requests() {
    let sandbox = Sandbox::new();
    let marker = sandbox.work().join("approved-by-form");
    let mock = MockModel::start().await;
    mock.push(text("Fine."));
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_e",
        "bash",
        &json!({"command": format!("touch {}", marker.display())}),
    )));
    mock.push(text("Done."));
    let slack = SlackApi::start(BOT, APP).await;
    write_config(&sandbox, &slack, "mode = \"events\"");
    let gateway = start_gateway(&sandbox, &mock).await;

    let challenge = json!({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}).to_string();
    assert_eq!(
        post_signed(&gateway, challenge.as_bytes(), "application/json").await,
        (
            200,
            json!({"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"})
                .to_string()
        )
    );

    // Forged, replayed and unsigned requests are refused before anything
    // reads them.
    let forged = event_callback(dm("D1", "U1", "forged", "9.000100"), "EvF1").to_string();
    let ts = now();
    let refused = [
        post(
            &gateway,
            forged.as_bytes(),
            "application/json",
            ts,
            &sign("not-the-secret", &ts.to_string(), forged.as_bytes()),
        )
        .await,
        post(
            &gateway,
            forged.as_bytes(),
            "application/json",
            ts - 301,
            &sign(SECRET, &(ts - 301).to_string(), forged.as_bytes()),
        )
        .await,
        post(&gateway, forged.as_bytes(), "application/json", ts, "v0=").await,
        post(
            &gateway,
            b"{\"type\":\"event_callback\"}",
            "application/json",
            ts,
            &sign(SECRET, &ts.to_string(), forged.as_bytes()),
        )
        .await,
    ];
    for answer in refused {
        assert_eq!(answer, (401, "unauthorized".to_string()));
    }

    let good = event_callback(dm("D1", "U1", "good", "9.000200"), "EvG1").to_string();
    assert_eq!(
        post_signed(&gateway, good.as_bytes(), "application/json").await,
        (200, String::new())
    );
    slack.wait("the answer", |s| s.texts() == ["Fine."]).await;
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(user_text(&mock, 0), "good");
    // Slack's retry of the same event is only acknowledged.
    assert_eq!(
        post_signed(&gateway, good.as_bytes(), "application/json").await,
        (200, String::new())
    );

    // An approval answered by a button: a form post with `payload=`.
    let touch = event_callback(dm("D1", "U1", "touch it", "9.000300"), "EvG2").to_string();
    assert_eq!(
        post_signed(&gateway, touch.as_bytes(), "application/json")
            .await
            .0,
        200
    );
    slack
        .wait("the question", |s| {
            s.messages().iter().any(|(_, m)| !buttons_of(m).is_empty())
        })
        .await;
    let (ts, question) = slack
        .messages()
        .into_iter()
        .find(|(_, m)| !buttons_of(m).is_empty())
        .unwrap();
    let allow = buttons_of(&question)[0].clone();
    let form = |payload: &Value| {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish()
    };
    let press = form(&block_actions("D1", "U1", &ts, &allow));
    let unsigned = now();
    assert_eq!(
        post(
            &gateway,
            press.as_bytes(),
            "application/x-www-form-urlencoded",
            unsigned,
            &sign("not-the-secret", &unsigned.to_string(), press.as_bytes())
        )
        .await
        .0,
        401
    );
    assert!(!marker.exists());
    assert_eq!(
        post_signed(
            &gateway,
            press.as_bytes(),
            "application/x-www-form-urlencoded"
        )
        .await,
        (200, String::new())
    );
    slack
        .wait("the reply after the tool ran", |s| {
            s.texts().last().map(String::as_str) == Some("Done.")
        })
        .await;
    assert!(marker.exists());
    assert_eq!(mock.requests().len(), 3);
    // No Socket Mode in this mode.
    assert!(slack.calls_of("apps.connections.open").is_empty());
}

#[tokio::test]
async fn a_refused_token_stops_the_channel_once_and_the_gateway_keeps_serving() {
    for (bot, app, method) in [
        ("xoxb-wrong", APP, "auth.test"),
        (BOT, "xapp-wrong", "apps.connections.open"),
    ] {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let slack = SlackApi::start(BOT, APP).await;
        write_config(&sandbox, &slack, "");
        let token = new_token();
        let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
        cmd.env("SLACK_BOT_TOKEN", bot).env("SLACK_APP_TOKEN", app);
        let gateway = Gateway::spawn(cmd, Some(&token)).await;
        let line = gateway
            .stderr
            .wait_line(TIMEOUT, |l| {
                l.contains("channel slack stopped").then(|| l.to_string())
            })
            .await
            .expect("the channel says it stopped");
        assert_eq!(
            line,
            format!(
                "pincer gateway: channel slack stopped: Slack refused the token for {method} (invalid_auth); check the tokens and scopes of [channels.slack]"
            )
        );
        let mut admin = gateway.admin().await;
        admin.call_ok("health", json!({})).await;
        assert_eq!(slack.calls_of(method).len(), 1, "no retry storm");
        assert_eq!(slack.connections(), 0);
        gateway.stop().await;
    }
}
