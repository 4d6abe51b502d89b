//! The WhatsApp channel end to end: the real `pincer gateway` with
//! `[channels.whatsapp]` pointing at a mock of the Cloud API
//! (tests/support/whatsapp_api.rs), the mock model behind the agent, and
//! the test in Meta's place posting signed webhooks to the gateway's
//! `/channels/whatsapp`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};
use support::whatsapp_api::{
    GraphApi, Meta, button_reply, delivered_status, signature, text_message,
};

const PHONE_ID: &str = "106540352242922";
const USER: &str = "16505551234";

/// A gateway with a WhatsApp channel, its Graph API mock and Meta.
struct WhatsAppTest {
    sandbox: Sandbox,
    mock: MockModel,
    api: GraphApi,
    gateway: Option<Gateway>,
    meta: Meta,
    token: String,
    verify_token: String,
    app_secret: String,
    allow: Vec<String>,
    approval_timeout_secs: u64,
}

impl WhatsAppTest {
    async fn start(allow: &[&str]) -> Self {
        Self::start_with(allow, 120).await
    }

    async fn start_with(allow: &[&str], approval_timeout_secs: u64) -> Self {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let token = format!("EAAG-{unique}");
        let api = GraphApi::start(&token, PHONE_ID).await;
        let mut test = Self {
            sandbox,
            mock,
            api,
            gateway: None,
            meta: Meta::new("127.0.0.1:9".parse().unwrap(), "", PHONE_ID),
            token,
            verify_token: format!("verify-{unique}"),
            app_secret: format!("secret-{unique}"),
            allow: allow.iter().map(|a| a.to_string()).collect(),
            approval_timeout_secs,
        };
        test.restart().await;
        test
    }

    /// Starts the gateway (again, after a stop) on the same home.
    async fn restart(&mut self) {
        if let Some(gateway) = self.gateway.take() {
            gateway.stop().await;
        }
        // The chat's sessions run unsandboxed: these tests are about the
        // questions commands ask; `channels_telegram.rs` proves a chat's
        // commands are confined.
        let config = format!(
            "[gateway]\napproval_timeout_secs = {}\n\n[channels.whatsapp]\nphone_number_id = \"{PHONE_ID}\"\napi_url = \"{}\"\nallow = {}\nsandbox = {{ mode = \"off\" }}\n",
            self.approval_timeout_secs,
            self.api.url(),
            serde_json::to_string(&self.allow).unwrap(),
        );
        std::fs::write(self.sandbox.home().join("config.toml"), config).unwrap();
        let gateway_token = new_token();
        let mut cmd = gateway_command(&self.sandbox, &self.mock, Some(&gateway_token), &[]);
        cmd.env("WHATSAPP_TOKEN", &self.token)
            .env("WHATSAPP_VERIFY_TOKEN", &self.verify_token)
            .env("WHATSAPP_APP_SECRET", &self.app_secret);
        let gateway = Gateway::spawn(cmd, Some(&gateway_token)).await;
        let started = gateway
            .stderr
            .wait_line(TIMEOUT, |l| {
                l.contains("channel whatsapp started").then_some(())
            })
            .await;
        assert!(
            started.is_some(),
            "no WhatsApp channel: {}",
            gateway.stderr.text()
        );
        self.meta = Meta::new(gateway.addr, &self.app_secret, PHONE_ID);
        self.gateway = Some(gateway);
    }

    fn gateway(&self) -> &Gateway {
        self.gateway.as_ref().unwrap()
    }

    /// `text` from `from` as message `wamid`; the webhook's answer.
    async fn say(&self, from: &str, wamid: &str, text: &str) -> (u16, String) {
        let body = self
            .meta
            .envelope(from, "Sheena Nelson", vec![text_message(from, wamid, text)]);
        self.meta.notify(&self.api, &body).await
    }
}

/// The Cloud API's text message to `to`.
fn text_to(to: &str, body: &str) -> Value {
    json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
        "type": "text", "text": {"preview_url": false, "body": body}})
}

/// The newest user text the model was sent in request `index`.
fn user_text(mock: &MockModel, index: usize) -> String {
    let body = &mock.requests()[index].body;
    let last = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    let blocks: Vec<&str> = match &last["content"] {
        Value::String(text) => vec![text.as_str()],
        content => content
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| !support::is_time_line(b))
            .filter_map(|b| b["text"].as_str())
            .collect(),
    };
    blocks.join("\n")
}

#[tokio::test]
async fn the_webhook_is_verified_only_with_the_verify_token() {
    let test = WhatsAppTest::start(&[USER]).await;
    let verify = test.verify_token.clone();
    assert_eq!(
        test.meta.verify("subscribe", &verify, "1158201444").await,
        (200, "1158201444".to_string())
    );
    assert_eq!(
        test.meta.verify("subscribe", "guessed", "1158201444").await,
        (403, "forbidden".to_string())
    );
    assert_eq!(
        test.meta
            .verify("subscribe", &format!("{verify}x"), "1158201444")
            .await,
        (403, "forbidden".to_string())
    );
    assert_eq!(
        test.meta.verify("unsubscribe", &verify, "1158201444").await,
        (403, "forbidden".to_string())
    );
}

#[tokio::test]
async fn a_message_runs_the_agent_and_the_reply_comes_back_whole_in_whatsapp_markup() {
    let test = WhatsAppTest::start(&[USER]).await;
    test.mock.push(Reply::sse(anthropic_text(
        "**Hello** from _pincer_, see [the docs](https://example.com).",
        10,
    )));
    assert_eq!(
        test.say(USER, "wamid.in1", "hi there").await,
        (200, String::new())
    );
    let messages = test.api.wait_messages(1, TIMEOUT).await;
    assert_eq!(
        messages,
        vec![text_to(
            USER,
            "*Hello* from _pincer_, see the docs (https://example.com)."
        )]
    );
    assert_eq!(test.mock.requests().len(), 1);
    assert_eq!(user_text(&test.mock, 0), "hi there");
    // Marked read with the typing indicator while the agent worked.
    let typing = json!({"messaging_product": "whatsapp", "status": "read",
        "message_id": "wamid.in1", "typing_indicator": {"type": "text"}});
    let receipts: Vec<(Value, u16)> = test
        .api
        .requests()
        .into_iter()
        .filter(|r| !r.is_message())
        .map(|r| (r.body, r.status))
        .collect();
    assert!(!receipts.is_empty(), "no typing indicator");
    for receipt in receipts {
        assert_eq!(receipt, (typing.clone(), 200));
    }
    // Every call carried the token (the mock refuses others).
    assert!(
        test.api
            .requests()
            .iter()
            .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {}", test.token)))
    );
    // A delivery status is not a message: nothing runs.
    let status = delivered_status(&test.meta, USER, "wamid.out1");
    assert_eq!(
        test.meta.notify(&test.api, &status).await,
        (200, String::new())
    );
    test.mock.push(Reply::sse(anthropic_text("Second.", 10)));
    test.say(USER, "wamid.in2", "again").await;
    test.api.wait_messages(2, TIMEOUT).await;
    assert_eq!(test.mock.requests().len(), 2);
    assert_eq!(user_text(&test.mock, 1), "again");
}

#[tokio::test]
async fn a_long_reply_is_split_under_4096_characters_at_paragraphs() {
    let test = WhatsAppTest::start(&[USER]).await;
    let paragraphs: Vec<String> = ["a", "b", "c"].iter().map(|c| c.repeat(2000)).collect();
    test.mock
        .push(Reply::sse(anthropic_text(&paragraphs.join("\n\n"), 10)));
    test.say(USER, "wamid.long", "tell me everything").await;
    let messages = test.api.wait_messages(2, TIMEOUT).await;
    assert_eq!(
        messages,
        vec![
            text_to(USER, &format!("{}\n\n{}", paragraphs[0], paragraphs[1])),
            text_to(USER, &paragraphs[2]),
        ]
    );
}

#[tokio::test]
async fn an_approval_is_answered_with_a_reply_button() {
    let test = WhatsAppTest::start(&[USER]).await;
    let marker = test
        .sandbox
        .work()
        .join(format!("ran-{}", uuid::Uuid::new_v4().simple()));
    let command = format!("touch {}", marker.display());
    test.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_w",
        "bash",
        &json!({"command": command}),
    )));
    test.mock.push(Reply::sse(anthropic_text("Done.", 30)));
    test.say(USER, "wamid.ask", "touch it").await;
    let question = test.api.wait_messages(1, TIMEOUT).await.remove(0);
    let buttons = question["interactive"]["action"]["buttons"].clone();
    let first = buttons[0]["reply"]["id"].as_str().unwrap().to_string();
    let id = first
        .strip_prefix("ap:")
        .and_then(|r| r.strip_suffix(":allow-once"))
        .unwrap()
        .to_string();
    let body_text = question["interactive"]["body"]["text"].as_str().unwrap();
    assert!(body_text.contains(&command), "{body_text}");
    assert_eq!(
        question,
        json!({"messaging_product": "whatsapp", "recipient_type": "individual", "to": USER,
            "type": "interactive", "interactive": {"type": "button", "body": {"text": body_text},
            "action": {"buttons": [
                {"type": "reply", "reply": {"id": format!("ap:{id}:allow-once"), "title": "Allow once"}},
                {"type": "reply", "reply": {"id": format!("ap:{id}:allow-always"), "title": "Always allow"}},
                {"type": "reply", "reply": {"id": format!("ap:{id}:deny"), "title": "Deny"}}]}}})
    );
    assert!(!marker.exists());
    // The user presses "Allow once" under the question (wamid.out1).
    let press = button_reply(
        USER,
        "wamid.press",
        "wamid.out1",
        &format!("ap:{id}:allow-once"),
        "Allow once",
    );
    let body = test.meta.envelope(USER, "Sheena Nelson", vec![press]);
    assert_eq!(
        test.meta.notify(&test.api, &body).await,
        (200, String::new())
    );
    let mut messages = test.api.wait_messages(3, TIMEOUT).await;
    assert!(marker.exists(), "the approved command did not run");
    messages.remove(0);
    messages.sort_by_key(|m| m.to_string());
    let mut note = text_to(USER, "✅ Allowed once.");
    note["context"] = json!({"message_id": "wamid.out1"});
    let mut expected = vec![text_to(USER, "Done."), note];
    expected.sort_by_key(|m| m.to_string());
    assert_eq!(messages, expected);
    assert_eq!(test.mock.requests().len(), 2);
    // The outcome was told once: the next reply is the fourth message.
    test.mock.push(Reply::sse(anthropic_text("Next.", 30)));
    test.say(USER, "wamid.next", "and now?").await;
    let messages = test.api.wait_messages(4, TIMEOUT).await;
    assert_eq!(messages.len(), 4, "{messages:#?}");
    assert_eq!(messages[3], text_to(USER, "Next."));
}

#[tokio::test]
async fn an_unanswered_approval_is_rejected_and_the_chat_is_told_below_it() {
    let test = WhatsAppTest::start_with(&[USER], 1).await;
    let marker = test
        .sandbox
        .work()
        .join(format!("ran-{}", uuid::Uuid::new_v4().simple()));
    test.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_t",
        "bash",
        &json!({"command": format!("touch {}", marker.display())}),
    )));
    test.mock
        .push(Reply::sse(anthropic_text("Not run, then.", 30)));
    test.say(USER, "wamid.slow", "touch it").await;
    let mut messages = test.api.wait_messages(3, TIMEOUT).await;
    assert_eq!(messages.remove(0)["type"], "interactive");
    messages.sort_by_key(|m| m.to_string());
    let mut expected = vec![
        text_to(USER, "Not answered in time: rejected."),
        text_to(USER, "Not run, then."),
    ];
    expected.sort_by_key(|m| m.to_string());
    assert_eq!(messages, expected);
    assert!(!marker.exists(), "a rejected command ran");
    let (_, is_error, _) = support::tool_results(&test.mock, 1)
        .into_iter()
        .find(|(id, ..)| id == "toolu_t")
        .unwrap();
    assert!(is_error);
}

#[tokio::test]
async fn a_stranger_gets_a_pairing_code_and_no_run_until_approved() {
    let test = WhatsAppTest::start(&[]).await;
    let stranger = "447700900123";
    assert_eq!(
        test.say(stranger, "wamid.s1", "hello").await,
        (200, String::new())
    );
    let refusal = test.api.wait_messages(1, TIMEOUT).await.remove(0);
    let text = refusal["text"]["body"].as_str().unwrap().to_string();
    let code = text
        .lines()
        .skip_while(|l| !l.contains("give them this code"))
        .find(|l| !l.trim().is_empty() && !l.contains("give them this code"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(refusal, text_to(stranger, &text));
    assert!(text.starts_with("This assistant is private."), "{text}");
    assert!(test.mock.requests().is_empty(), "a stranger ran the agent");
    // A picture from the stranger gets nothing: only text gets a code.
    let picture = json!({"from": stranger, "id": "wamid.s2", "timestamp": "1", "type": "image",
        "image": {"id": "m1", "mime_type": "image/jpeg"}});
    let body = test.meta.envelope(stranger, "Sam", vec![picture]);
    assert_eq!(
        test.meta.notify(&test.api, &body).await,
        (200, String::new())
    );

    let approved = test
        .sandbox
        .command(&["channels", "approve", &code])
        .output()
        .await
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    assert_eq!(
        String::from_utf8_lossy(&approved.stdout),
        format!("Approved Sheena Nelson ({stranger}) on whatsapp.\n")
    );
    test.mock.push(Reply::sse(anthropic_text("Welcome.", 10)));
    test.say(stranger, "wamid.s3", "hello again").await;
    let messages = test.api.wait_messages(2, TIMEOUT).await;
    assert_eq!(messages[1], text_to(stranger, "Welcome."));
    assert_eq!(test.mock.requests().len(), 1);
    assert_eq!(user_text(&test.mock, 0), "hello again");
    // An allowed user's picture is answered: only text is read.
    let picture = json!({"from": stranger, "id": "wamid.s4", "timestamp": "1", "type": "image",
        "image": {"id": "m2", "mime_type": "image/jpeg"}});
    let body = test.meta.envelope(stranger, "Sam", vec![picture]);
    test.meta.notify(&test.api, &body).await;
    let messages = test.api.wait_messages(3, TIMEOUT).await;
    let mut only_text = text_to(
        stranger,
        "I can only read text messages for now: please write your request.",
    );
    only_text["context"] = json!({"message_id": "wamid.s4"});
    assert_eq!(messages[2], only_text);
}

#[tokio::test]
async fn a_pair_rate_limit_is_waited_out_before_the_reply_is_sent_again() {
    let test = WhatsAppTest::start(&[USER]).await;
    test.api.fail_next(1, 400, 131056);
    test.mock.push(Reply::sse(anthropic_text("Patience.", 10)));
    test.say(USER, "wamid.rl", "hi").await;
    test.api.wait_messages(1, TIMEOUT * 2).await;
    let sends: Vec<_> = test
        .api
        .requests()
        .into_iter()
        .filter(|r| r.is_message())
        .collect();
    assert_eq!(
        sends
            .iter()
            .map(|r| (r.status, r.body.clone()))
            .collect::<Vec<_>>(),
        vec![
            (400, text_to(USER, "Patience.")),
            (200, text_to(USER, "Patience."))
        ]
    );
    let gap = sends[1].at - sends[0].at;
    assert!(gap >= Duration::from_secs(6), "retried after {gap:?}");
}

#[tokio::test]
async fn a_no_reply_answer_is_never_sent() {
    let test = WhatsAppTest::start(&[USER]).await;
    test.mock.push(Reply::sse(anthropic_text("NO_REPLY", 10)));
    test.mock.push(Reply::sse(anthropic_text("pong", 10)));
    test.say(USER, "wamid.quiet", "stay quiet").await;
    let mut admin = test.gateway().admin().await;
    let run = format!("whatsapp:{USER}:wamid.quiet");
    let waited = admin
        .call_ok("agent.wait", json!({"runId": run, "timeoutMs": 20_000}))
        .await;
    assert_eq!(waited["status"], "ok", "{waited}");
    // The next reply is the first message sent: nothing went before it.
    test.say(USER, "wamid.ping", "ping").await;
    let messages = test.api.wait_messages(1, TIMEOUT).await;
    assert_eq!(messages, vec![text_to(USER, "pong")]);
}

#[tokio::test]
async fn a_request_without_the_app_s_signature_runs_nothing() {
    let test = WhatsAppTest::start(&[USER]).await;
    let forged = test.meta.envelope(
        USER,
        "Sheena Nelson",
        vec![text_message(USER, "wamid.f1", "rm -rf ~")],
    );
    let bytes = serde_json::to_vec(&forged).unwrap();
    let good = signature(&test.app_secret, &bytes);
    let mut tampered = bytes.clone();
    let at = tampered.len() - 10;
    tampered[at] = b' ';
    for (body, signature) in [
        (bytes.clone(), None),
        (bytes.clone(), Some(signature("guessed-secret", &bytes))),
        (bytes.clone(), Some(good.replace("sha256=", "sha1="))),
        (bytes.clone(), Some("sha256=".to_string())),
        (tampered, Some(good.clone())),
    ] {
        assert_eq!(
            test.meta.post_raw(&body, signature.as_deref()).await,
            (401, "unauthorized".to_string())
        );
    }
    // A signed message after them is the only one the agent sees.
    test.mock.push(Reply::sse(anthropic_text("Signed.", 10)));
    assert_eq!(
        test.say(USER, "wamid.g1", "signed hello").await,
        (200, String::new())
    );
    let messages = test.api.wait_messages(1, TIMEOUT).await;
    assert_eq!(messages, vec![text_to(USER, "Signed.")]);
    assert_eq!(test.mock.requests().len(), 1);
    assert_eq!(user_text(&test.mock, 0), "signed hello");
}

#[tokio::test]
async fn a_redelivered_message_runs_once_also_after_a_restart() {
    let mut test = WhatsAppTest::start(&[USER]).await;
    for reply in ["One.", "Two.", "Three."] {
        test.mock.push(Reply::sse(anthropic_text(reply, 10)));
    }
    assert_eq!(
        test.say(USER, "wamid.r1", "one").await,
        (200, String::new())
    );
    test.api.wait_messages(1, TIMEOUT).await;
    // Meta did not see the 200 and sends it again.
    assert_eq!(
        test.say(USER, "wamid.r1", "one").await,
        (200, String::new())
    );
    test.say(USER, "wamid.r2", "two").await;
    test.api.wait_messages(2, TIMEOUT).await;

    test.restart().await;
    assert_eq!(
        test.say(USER, "wamid.r1", "one").await,
        (200, String::new())
    );
    test.say(USER, "wamid.r3", "three").await;
    let messages = test.api.wait_messages(3, TIMEOUT).await;
    assert_eq!(
        messages,
        vec![
            text_to(USER, "One."),
            text_to(USER, "Two."),
            text_to(USER, "Three.")
        ]
    );
    let asked: Vec<String> = (0..test.mock.requests().len())
        .map(|i| user_text(&test.mock, i))
        .collect();
    assert_eq!(asked, vec!["one", "two", "three"]);
}
