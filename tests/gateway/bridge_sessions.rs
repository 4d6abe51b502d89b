//! `pincer acp --connect` and the gateway's sessions: attaching to a key
//! another client started (`--session`, `--session-label`,
//! `--require-existing`, `--reset-session`), prompts with images and
//! resources, config options and modes, list / resume / close, `wss://`
//! through a TLS relay, and turns other clients run in a session the
//! editor has open. Each test drives the real bridge over ACP on stdio
//! pipes against a real `pincer gateway` with the mock model behind it;
//! the gateway's own websocket clients play the other clients.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, coalesce, updates_of};
use support::bridge::{
    Remote, TestCa, TlsRelay, bridge_command, initialize, session_new, streamed_text, turn_on,
};
use support::gateway::{Gateway, new_key};
use support::mock_model::{MockModel, Reply};
use support::prompt;
use support::sse::anthropic_text;

/// The model's messages of request `index` without pincer's time lines.
fn messages(mock: &MockModel, index: usize) -> Vec<Value> {
    let body = &mock.requests()[index].body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(support::without_time_lines)
        .collect()
}

/// The updates of `messages` without session info, joined.
fn replayed(before: &[Value]) -> Vec<Value> {
    coalesce(updates_of(before))
}

/// Sends a prompt and reads until its answer; the answer and what came
/// before.
async fn ask(acp: &mut Acp, params: Value) -> (Value, Vec<Value>) {
    let id = acp.send("session/prompt", params).await;
    acp.until_response(id).await
}

/// The user and assistant texts of a model request, in order.
fn conversation(mock: &MockModel, index: usize) -> Vec<(String, String)> {
    messages(mock, index)
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                blocks => blocks
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
            (m["role"].as_str().unwrap().to_string(), text)
        })
        .collect()
}

// ---------------------------------------------------------------- --session

#[tokio::test]
async fn session_attaches_to_a_key_another_client_started_and_goes_on_with_its_history() {
    let r = Remote::start().await;
    let key = new_key();
    let mut admin = r.gateway.admin().await;
    turn_on(
        &mut admin,
        &r.mock,
        &key,
        "Remember the word apricot.",
        "Noted: apricot.",
    )
    .await;

    let mut acp = r.another_bridge(&["--session", &key]).await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    assert_eq!(response["result"]["sessionId"], json!(key), "{response}");
    assert_eq!(
        response["result"]["_meta"]["pincer/remote"]["sessionKey"],
        json!(key)
    );

    r.mock
        .push(Reply::sse(anthropic_text("It was apricot.", 10)));
    let (answer, before) = ask(&mut acp, prompt(&key, "Which word was it?")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&before), "It was apricot.");
    // The model saw the earlier turn: the prompt landed in that session.
    assert_eq!(
        conversation(&r.mock, 1),
        vec![
            ("user".to_string(), "Remember the word apricot.".to_string()),
            ("assistant".to_string(), "Noted: apricot.".to_string()),
            ("user".to_string(), "Which word was it?".to_string()),
        ]
    );

    // A bridge that loads the key replays both turns.
    let mut third = r.another_bridge(&[]).await;
    let id = third
        .send(
            "session/load",
            json!({"sessionId": key, "cwd": r.editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = third.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(
        replayed(&before),
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Remember the word apricot."}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Noted: apricot."}}),
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Which word was it?"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "It was apricot."}}),
        ]
    );
}

#[tokio::test]
async fn require_existing_refuses_an_unknown_key_without_creating_it_and_accepts_a_known_one() {
    let r = Remote::start().await;
    let unknown = new_key();
    let mut acp = r
        .another_bridge(&["--session", &unknown, "--require-existing"])
        .await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("no session {unknown} on the gateway")),
        "{response}"
    );
    // Nothing was made of the key on the gateway.
    let mut admin = r.gateway.admin().await;
    let listed = admin
        .call_ok("sessions.list", json!({"search": unknown}))
        .await;
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert_eq!(
        admin
            .call("sessions.resolve", json!({"key": unknown}))
            .await["ok"],
        json!(false)
    );

    let known = new_key();
    turn_on(&mut admin, &r.mock, &known, "Hello there.", "Hi.").await;
    let mut acp = r
        .another_bridge(&["--session", &known, "--require-existing"])
        .await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    assert_eq!(response["result"]["sessionId"], json!(known), "{response}");

    // Without --require-existing the unknown key is taken as it is (the
    // gateway makes its session on the first prompt).
    let mut acp = r.another_bridge(&["--session", &unknown]).await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    assert_eq!(
        response["result"]["sessionId"],
        json!(unknown),
        "{response}"
    );
    r.mock.push(Reply::sse(anthropic_text("New here.", 10)));
    let (answer, _) = ask(&mut acp, prompt(&unknown, "First prompt.")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        admin
            .call_ok("sessions.resolve", json!({"key": unknown}))
            .await["key"],
        json!(unknown)
    );
}

#[tokio::test]
async fn reset_session_gives_the_key_a_fresh_session_and_the_model_no_old_history() {
    let r = Remote::start().await;
    let key = new_key();
    let mut admin = r.gateway.admin().await;
    turn_on(&mut admin, &r.mock, &key, "The secret is plum.", "Got it.").await;
    let before = admin.call_ok("sessions.resolve", json!({"key": key})).await["sessionId"].clone();

    let mut acp = r
        .another_bridge(&["--session", &key, "--reset-session"])
        .await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    assert_eq!(response["result"]["sessionId"], json!(key), "{response}");
    let after = admin.call_ok("sessions.resolve", json!({"key": key})).await["sessionId"].clone();
    assert_ne!(after, before, "the key still names its old session");

    r.mock.push(Reply::sse(anthropic_text("What secret?", 10)));
    let (answer, _) = ask(&mut acp, prompt(&key, "What is the secret?")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        conversation(&r.mock, 1),
        vec![("user".to_string(), "What is the secret?".to_string())]
    );
}

#[tokio::test]
async fn session_label_attaches_to_the_session_with_that_title() {
    let r = Remote::start().await;
    let key = new_key();
    let mut admin = r.gateway.admin().await;
    let title = format!("Review the parser {}", uuid::Uuid::new_v4().simple());
    turn_on(&mut admin, &r.mock, &key, &title, "Reviewed.").await;
    // Another session, so that the label has to pick.
    turn_on(&mut admin, &r.mock, &new_key(), "Something else.", "Ok.").await;

    let mut acp = r.another_bridge(&["--session-label", &title]).await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    assert_eq!(response["result"]["sessionId"], json!(key), "{response}");
    r.mock
        .push(Reply::sse(anthropic_text("Still reviewed.", 10)));
    let (answer, _) = ask(&mut acp, prompt(&key, "And now?")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(conversation(&r.mock, 2)[0], ("user".to_string(), title));

    // A label nothing has: refused, whether or not the key must exist.
    let missing = format!("no such title {}", uuid::Uuid::new_v4().simple());
    let mut acp = r.another_bridge(&["--session-label", &missing]).await;
    let response = session_new(&mut acp, &r.editor.work()).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("no session {missing} on the gateway")),
        "{response}"
    );
}

// ----------------------------------------------------------------- prompts

#[tokio::test]
async fn a_prompt_with_an_image_an_embedded_resource_and_a_link_reaches_the_model() {
    let mut r = Remote::start().await;
    // A file the link names exists on the gateway's machine: the gateway
    // must not read it (the link is the editor's, not the server's).
    let secret = format!("server-only {}", uuid::Uuid::new_v4());
    let linked = r.server.write("notes/plan.md", &secret);
    let link = url::Url::from_file_path(&linked).unwrap().to_string();
    let session = r.new_session().await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    r.mock.push(Reply::sse(anthropic_text("Seen.", 10)));
    let (answer, _) = ask(
        &mut r.acp,
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Look at these."},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "resource", "resource": {"uri": "file:///home/me/src/lib.rs", "mimeType": "text/x-rust", "text": "fn main() {}\n"}},
            {"type": "resource_link", "name": "plan.md", "uri": link},
            {"type": "resource", "resource": {"uri": "file:///home/me/data.csv?raw=1", "mimeType": "text/csv", "blob": "YSxiCjEsMgo="}},
        ]}),
    )
    .await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        messages(&r.mock, 0),
        vec![json!({"role": "user", "content": [
            {"type": "text", "text": format!("Look at these.\n[Resource: plan.md <{link}>]")},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "<file uri=\"attachment:lib.rs\">\nfn main() {}\n\n</file>"},
            {"type": "text", "text": "<file uri=\"attachment:data.csv\">\na,b\n1,2\n\n</file>"},
        ]})]
    );
    let body = r.mock.requests()[0].body.to_string();
    assert!(!body.contains(&secret), "the gateway read the linked file");
}

#[tokio::test]
async fn an_audio_prompt_is_refused_and_nothing_reaches_the_gateway() {
    let mut r = Remote::start().await;
    let session = r.new_session().await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let (answer, _) = ask(
        &mut r.acp,
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Listen."},
            {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
        ]}),
    )
    .await;
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    // The gateway never heard of the prompt: no model call, no session.
    let mut admin = r.gateway.admin().await;
    let listed = admin
        .call_ok("sessions.list", json!({"search": session}))
        .await;
    assert_eq!(listed["sessions"], json!([]), "{listed}");
    assert!(r.mock.requests().is_empty());
}

// ------------------------------------------------------------------ options

/// The value `option` offers other than its current one.
fn other_value(options: &Value, option: &str) -> String {
    let option = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == option)
        .unwrap_or_else(|| panic!("no {option} option in {options}"));
    option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["value"].as_str().unwrap().to_string())
        .find(|v| *v != option["currentValue"])
        .unwrap_or_else(|| panic!("{option} offers one value only"))
}

fn current(options: &Value, option: &str) -> Value {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == option)
        .unwrap_or_else(|| panic!("no {option} option in {options}"))["currentValue"]
        .clone()
}

#[tokio::test]
async fn set_config_option_model_changes_the_model_of_the_next_request() {
    let mut r = Remote::start().await;
    let created = r.new_session().await;
    let session = created["sessionId"].as_str().unwrap().to_string();
    let model = other_value(&created["configOptions"], "model");
    let result = r
        .acp
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": model}),
        )
        .await;

    r.mock
        .push(Reply::sse(anthropic_text("From the other model.", 10)));
    let (answer, _) = ask(&mut r.acp, prompt(&session, "Who answers?")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let (_, id) = model.split_once('/').unwrap();
    assert_eq!(r.mock.requests()[0].body["model"], json!(id));
    // The answer to set_config_option showed the new model.
    assert_eq!(current(&result["configOptions"], "model"), json!(model));
}

#[tokio::test]
async fn set_config_option_thought_level_turns_thinking_on_for_the_next_request() {
    let mut r = Remote::start().await;
    let created = r.new_session().await;
    let session = created["sessionId"].as_str().unwrap().to_string();
    assert_eq!(
        current(&created["configOptions"], "thought_level"),
        json!("off")
    );
    let result = r
        .acp
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
        )
        .await;

    r.mock
        .push(Reply::sse(anthropic_text("Thought about it.", 10)));
    let (answer, _) = ask(&mut r.acp, prompt(&session, "Think.")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        r.mock.requests()[0].body["thinking"]["type"],
        json!("enabled"),
        "{}",
        r.mock.requests()[0].body
    );
    // The answer to set_config_option showed the new level.
    assert_eq!(
        current(&result["configOptions"], "thought_level"),
        json!("high")
    );
}

#[tokio::test]
async fn set_mode_plan_changes_the_gateway_sessions_mode_and_takes_the_writing_tools_away() {
    let mut r = Remote::start().await;
    let session = r.new_session().await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let id = r
        .acp
        .send(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    let (response, before) = r.acp.until_response(id).await;
    assert_eq!(response["result"], json!({}), "{response}");

    r.mock.push(Reply::sse(anthropic_text("A plan.", 10)));
    let (answer, _) = ask(&mut r.acp, prompt(&session, "Plan it.")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let tools: Vec<String> = r.mock.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.contains(&"read".to_string()), "{tools:?}");
    for writer in ["write", "edit", "bash"] {
        assert!(!tools.contains(&writer.to_string()), "{tools:?}");
    }
    let mut admin = r.gateway.admin().await;
    let listed = admin
        .call_ok("sessions.list", json!({"search": session}))
        .await;
    // pincer's mode, and OpenClaw's name for it.
    assert_eq!(listed["sessions"][0]["mode"], json!("plan"));
    assert_eq!(listed["sessions"][0]["permissionMode"], json!("read-only"));

    // The editor was told, with the options as they are now.
    let updates = updates_of(&before);
    assert_eq!(
        updates[0],
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    );
    assert_eq!(updates[1]["sessionUpdate"], "config_option_update");
    assert_eq!(current(&updates[1]["configOptions"], "mode"), json!("plan"));
}

#[tokio::test]
async fn set_config_option_on_a_session_with_turns_answers_each_new_value() {
    let mut r = Remote::start().await;
    let created = r.new_session().await;
    let session = created["sessionId"].as_str().unwrap().to_string();
    r.mock.push(Reply::sse(anthropic_text("First.", 10)));
    let (answer, _) = ask(&mut r.acp, prompt(&session, "Start.")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));

    let model = other_value(&created["configOptions"], "model");
    for (option, value) in [
        ("model", model.as_str()),
        ("thought_level", "low"),
        ("queue", "followup"),
        ("mode", "accept-edits"),
    ] {
        let result = r
            .acp
            .call(
                "session/set_config_option",
                json!({"sessionId": session, "configId": option, "value": value}),
            )
            .await;
        assert_eq!(
            current(&result["configOptions"], option),
            json!(value),
            "{result}"
        );
    }
    let mut admin = r.gateway.admin().await;
    let row = admin
        .call_ok("sessions.list", json!({"search": session}))
        .await["sessions"][0]
        .clone();
    assert_eq!(
        (
            format!(
                "{}/{}",
                row["modelProvider"].as_str().unwrap(),
                row["model"].as_str().unwrap()
            ),
            &row["thinkingLevel"],
            &row["queueMode"],
            &row["mode"],
            &row["permissionMode"]
        ),
        (
            model.clone(),
            &json!("low"),
            &json!("followup"),
            &json!("accept-edits"),
            &json!("guarded")
        ),
        "{row}"
    );
}

#[tokio::test]
async fn an_unknown_config_option_value_or_mode_is_invalid_params_and_changes_nothing() {
    let mut r = Remote::start().await;
    let session = r.new_session().await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    r.mock.push(Reply::sse(anthropic_text("First.", 10)));
    let (answer, _) = ask(&mut r.acp, prompt(&session, "Start.")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    let mut admin = r.gateway.admin().await;
    let row_before = admin
        .call_ok("sessions.list", json!({"search": session}))
        .await["sessions"][0]
        .clone();

    for (method, params, named) in [
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "temperature", "value": "hot"}),
            "temperature",
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "nowhere/no-model"}),
            "nowhere",
        ),
        (
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "boiling"}),
            "boiling",
        ),
        (
            "session/set_mode",
            json!({"sessionId": session, "modeId": "yolo"}),
            "yolo",
        ),
    ] {
        let id = r.acp.send(method, params.clone()).await;
        let (response, _) = r.acp.until_response(id).await;
        assert_eq!(
            response["error"]["code"],
            json!(-32602),
            "{params}: {response}"
        );
        assert!(
            response["error"]["message"]
                .as_str()
                .unwrap()
                .contains(named),
            "{params}: {response}"
        );
    }
    let mut row_after = admin
        .call_ok("sessions.list", json!({"search": session}))
        .await["sessions"][0]
        .clone();
    row_after["updatedAt"] = row_before["updatedAt"].clone();
    assert_eq!(row_after, row_before);
}

// ------------------------------------------------- list, resume and close

#[tokio::test]
async fn session_list_gives_each_gateway_session_with_its_remote_place() {
    let r = Remote::start().await;
    let mut admin = r.gateway.admin().await;
    let keys: Vec<String> = (0..3).map(|_| new_key()).collect();
    for (i, key) in keys.iter().enumerate() {
        turn_on(
            &mut admin,
            &r.mock,
            key,
            &format!("Task number {i}."),
            "Ok.",
        )
        .await;
    }
    let mut acp = r.another_bridge(&[]).await;
    let listed = acp.call("session/list", json!({})).await;
    assert_eq!(listed.get("nextCursor"), None, "{listed}");
    let remote = r.server.work().display().to_string();
    let mut rows: Vec<Value> = listed["sessions"].as_array().unwrap().clone();
    rows.sort_by_key(|row| row["title"].as_str().unwrap_or_default().to_string());
    assert_eq!(rows.len(), 3, "{listed}");
    for (i, (row, key)) in rows.iter().zip(&keys).enumerate() {
        let updated = row["updatedAt"].as_str().unwrap();
        assert!(
            humantime::parse_rfc3339(updated).is_ok(),
            "not ISO 8601: {updated}"
        );
        let mut row = row.clone();
        row.as_object_mut().unwrap().remove("updatedAt");
        assert_eq!(
            row,
            json!({
                "sessionId": key,
                "cwd": remote,
                "title": format!("Task number {i}."),
                "_meta": {"pincer/remote": {"gateway": r.gateway.url(), "sessionKey": key, "cwd": remote}},
            })
        );
    }
}

#[tokio::test]
async fn session_list_pages_past_a_hundred_sessions_with_a_cursor() {
    let r = Remote::start().await;
    let mut admin = r.gateway.admin().await;
    // A session is listed once it has a transcript: one short turn each,
    // all started at once.
    let mut keys: Vec<String> = (0..103).map(|_| new_key()).collect();
    let mut runs = Vec::new();
    for key in &keys {
        r.mock.push(Reply::sse(anthropic_text("Ok.", 10)));
        runs.push(admin.chat_send(key, "Hi.").await);
    }
    for run in &runs {
        let end = admin.chat_end(run).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
    }
    let mut acp = r.another_bridge(&[]).await;
    let first = acp.call("session/list", json!({})).await;
    assert_eq!(first["sessions"].as_array().unwrap().len(), 100);
    assert_eq!(first["nextCursor"], json!("100"), "{}", first["nextCursor"]);
    let second = acp.call("session/list", json!({"cursor": "100"})).await;
    assert_eq!(second.get("nextCursor"), None);
    let mut listed: Vec<String> = first["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["sessions"].as_array().unwrap())
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    keys.sort();
    assert_eq!(listed, keys);

    let id = acp
        .send("session/list", json!({"cursor": "not-a-cursor"}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32602), "{response}");
}

#[tokio::test]
async fn resume_opens_an_existing_key_without_replay_and_refuses_an_unknown_one() {
    let r = Remote::start().await;
    let key = new_key();
    let mut admin = r.gateway.admin().await;
    turn_on(&mut admin, &r.mock, &key, "First words.", "First answer.").await;

    let mut acp = r.another_bridge(&[]).await;
    let id = acp
        .send(
            "session/resume",
            json!({"sessionId": key, "cwd": r.editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(
        response["result"]["_meta"]["pincer/remote"]["sessionKey"],
        json!(key)
    );
    assert_eq!(replayed(&before), Vec::<Value>::new(), "resume replayed");
    r.mock
        .push(Reply::sse(anthropic_text("Second answer.", 10)));
    let (answer, before) = ask(&mut acp, prompt(&key, "Second words.")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&before), "Second answer.");
    assert_eq!(conversation(&r.mock, 1).len(), 3);

    let unknown = new_key();
    let id = acp
        .send(
            "session/resume",
            json!({"sessionId": unknown, "cwd": r.editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(
        response["error"]["message"],
        json!(format!("no session {unknown} on the gateway")),
        "{response}"
    );
    // The refused key is not open: a prompt to it is refused too.
    let (answer, _) = ask(&mut acp, prompt(&unknown, "Hello?")).await;
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
}

#[tokio::test]
async fn close_aborts_the_running_turn_on_the_gateway() {
    let mut r = Remote::start().await;
    let session = r.new_session().await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut admin = r.gateway.admin().await;
    r.mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    let prompt_id = r
        .acp
        .send("session/prompt", prompt(&session, "Say something long."))
        .await;
    r.mock.wait_for_requests(1, support::bridge::WAIT).await;
    let started = admin
        .next_where("the bridge's run", |f| {
            f["event"] == "chat" && f["payload"]["sessionKey"] == json!(session)
        })
        .await;
    let run = started["payload"]["runId"].as_str().unwrap().to_string();

    let close = r
        .acp
        .send("session/close", json!({"sessionId": session}))
        .await;
    let (closed, before) = r.acp.until_response(close).await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    // The editor's prompt ended as cancelled (its answer may come before
    // or after the close's).
    let answer = match before
        .iter()
        .find(|m| m.get("method").is_none() && m["id"] == json!(prompt_id))
    {
        Some(answer) => answer.clone(),
        None => r.acp.until_response(prompt_id).await.0,
    };
    assert_eq!(answer["result"], json!({"stopReason": "cancelled"}));
    // The gateway's run ended: aborted.
    let end = admin.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "aborted", "{end}");

    // The session is closed for this bridge; the gateway answers the next
    // prompt from another one.
    let (answer, _) = ask(&mut r.acp, prompt(&session, "Still there?")).await;
    assert_eq!(answer["error"]["code"], json!(-32602), "{answer}");
    let mut other = r.another_bridge(&[]).await;
    other
        .call(
            "session/resume",
            json!({"sessionId": session, "cwd": r.editor.work(), "mcpServers": []}),
        )
        .await;
    r.mock.push(Reply::sse(anthropic_text("Yes.", 10)));
    let (answer, before) = ask(&mut other, prompt(&session, "Still there?")).await;
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&before), "Yes.");
}

// --------------------------------------------------------------------- wss

/// Which roots the bridge trusts (what its `SSL_CERT_FILE` holds).
enum Roots {
    TheRelaysCa,
    AnotherCa,
    Nothing,
}

/// A gateway behind a TLS relay with a certificate of its own CA, and a
/// bridge to `wss://localhost:PORT` whose `SSL_CERT_FILE` holds `roots`.
async fn over_tls(roots: Roots) -> (Sandbox, Sandbox, MockModel, Gateway, TlsRelay, Acp) {
    let server = Sandbox::new();
    let editor = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&server, &mock).await;
    let ca = TestCa::new();
    let relay = TlsRelay::start(gateway.addr, &ca).await;
    let file = editor.dir.path().join("roots.pem");
    let pem = match roots {
        Roots::TheRelaysCa => ca.ca_pem.clone(),
        Roots::AnotherCa => TestCa::named("some other CA").ca_pem,
        Roots::Nothing => String::new(),
    };
    std::fs::write(&file, pem).unwrap();
    let token = gateway.token.clone().unwrap();
    let mut cmd = bridge_command(&editor, &relay.url(), &token, &[]);
    cmd.env("SSL_CERT_FILE", &file);
    let acp = Acp::spawn(cmd);
    (server, editor, mock, gateway, relay, acp)
}

#[tokio::test]
async fn wss_connects_through_tls_with_the_roots_of_ssl_cert_file_and_streams() {
    let (_server, editor, mock, gateway, relay, mut acp) = over_tls(Roots::TheRelaysCa).await;
    let response = initialize(&mut acp).await;
    assert!(
        response.get("error").is_none(),
        "{response}\nrelay refused: {:?}",
        relay.refused.lock().unwrap()
    );
    let created = session_new(&mut acp, &editor.work()).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(
        created["result"]["_meta"]["pincer/remote"]["gateway"],
        json!(relay.url())
    );
    mock.push(Reply::sse(support::sse::anthropic_deltas(&[
        "Over ", "TLS ", "it ", "streams.",
    ])));
    let (answer, before) = ask(&mut acp, prompt(&session, "Stream please.")).await;
    assert_eq!(
        answer["result"],
        json!({"stopReason": "end_turn"}),
        "{}",
        gateway.stderr.text()
    );
    assert_eq!(streamed_text(&before), "Over TLS it streams.");
    // The upgrade (and the connect frame after it) went through the
    // relay's TLS.
    assert!(
        relay.plaintext_text().starts_with("GET / HTTP/1.1\r\n"),
        "{}",
        relay.plaintext_text()
    );
    assert!(relay.refused.lock().unwrap().is_empty());
}

#[tokio::test]
async fn wss_with_an_untrusted_certificate_fails_initialize_before_the_token_is_sent() {
    let (_server, _editor, _mock, _gateway, relay, mut acp) = over_tls(Roots::AnotherCa).await;
    let response = initialize(&mut acp).await;
    assert_eq!(response["error"]["code"], json!(-32603), "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("cannot reach the gateway at {}: ", relay.url()))
            && message.to_lowercase().contains("certificate")
            && message.contains("TLS")
            && message.contains("SSL_CERT_FILE"),
        "{response}"
    );
    // The relay saw the handshake fail (it may log it after the bridge
    // answered).
    let refused = relay.refused.clone();
    support::wait_until(
        "the relay saw no failed TLS handshake",
        support::bridge::WAIT,
        || !refused.lock().unwrap().is_empty(),
    )
    .await;
    // The handshake failed before any byte of the websocket (its upgrade,
    // the connect frame with the token) could pass.
    assert_eq!(relay.plaintext_text(), "", "bytes passed the TLS relay");
    assert!(acp.is_running());
}

#[tokio::test]
async fn wss_without_any_trusted_root_says_so_and_dials_nothing() {
    let (_server, _editor, _mock, _gateway, relay, mut acp) = over_tls(Roots::Nothing).await;
    let response = initialize(&mut acp).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("cannot reach the gateway at {}: ", relay.url()))
            && message.contains("SSL_CERT_FILE"),
        "{response}"
    );
    assert!(relay.refused.lock().unwrap().is_empty());
    assert_eq!(relay.plaintext_text(), "");
}

// ------------------------------------------------- other clients' turns

#[tokio::test]
async fn a_turn_another_client_runs_in_an_open_session_reaches_the_editor() {
    let mut r = Remote::start().await;
    let session = r.new_session().await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut admin = r.gateway.admin().await;
    // A turn in a session the editor has not open: none of it may reach
    // the editor (the sessionId check below catches it).
    turn_on(
        &mut admin,
        &r.mock,
        &new_key(),
        "Private to another session.",
        "Not for this editor.",
    )
    .await;
    turn_on(
        &mut admin,
        &r.mock,
        &session,
        "Hello from the web chat.",
        "Hello, web chat.",
    )
    .await;
    // The editor sent no prompt; what the other client ran arrives as
    // updates all the same.
    let mut seen = Vec::new();
    loop {
        let message = r.acp.next().await;
        assert_eq!(message["method"], "session/update", "{message}");
        assert_eq!(message["params"]["sessionId"], json!(session));
        seen.push(message);
        if streamed_text(&seen) == "Hello, web chat." {
            break;
        }
    }
    assert_eq!(
        replayed(&seen),
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Hello from the web chat."}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello, web chat."}}),
        ]
    );
}
