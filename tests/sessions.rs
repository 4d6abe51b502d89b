//! End-to-end: transcripts on disk and `session/load`, with the real binary
//! and the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Joins consecutive chunks of the same kind and drops what a replay does
/// not repeat (usage), so live and replayed updates compare.
fn normalise(updates: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for update in updates {
        let kind = update["sessionUpdate"].as_str().unwrap().to_string();
        if kind == "usage_update" {
            continue;
        }
        if kind.ends_with("_chunk")
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == kind.as_str()
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap_or_default(),
                update["content"]["text"].as_str().unwrap_or_default()
            );
            last["content"]["text"] = Value::String(joined);
            continue;
        }
        out.push(update);
    }
    out
}

#[tokio::test]
async fn a_fresh_process_loads_the_conversation_and_the_model_sees_the_same_history() {
    let sandbox = Sandbox::new();
    sandbox.write("notes.txt", "alpha\nbeta\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/thinking.sse"));
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_edit",
        "edit",
        &json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "accept-edits"}),
    )
    .await;
    let mut live = vec![
        json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "think first"}}),
    ];
    let id = acp
        .send("session/prompt", prompt(&session, "think first"))
        .await;
    let (_, before) = acp.until_response(id).await;
    live.extend(updates_of(&before));
    live.push(json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "now edit"}}));
    let id = acp
        .send("session/prompt", prompt(&session, "now edit"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    live.extend(updates_of(&before));
    drop(acp);

    // A new process, as after closing the editor.
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(&sandbox, &mock);
    let init = acp.initialize().await;
    assert_eq!(init["agentCapabilities"]["loadSession"], json!(true));
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(response["result"]["modes"]["currentModeId"], "accept-edits");
    let replayed = updates_of(&before);
    assert_eq!(normalise(replayed), normalise(live));

    // The model continues with exactly the history it had.
    let id = acp
        .send("session/prompt", prompt(&session, "and now?"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let requests = mock.requests();
    // Cache breakpoints move to the newest turn; everything else is equal.
    let before_restart = without_cache_marks(&requests[2].body["messages"]);
    let after_load = without_cache_marks(&requests[3].body["messages"]);
    let (before_restart, after_load) = (
        before_restart.as_array().unwrap(),
        after_load.as_array().unwrap(),
    );
    assert_eq!(after_load.len(), before_restart.len() + 2);
    assert_eq!(after_load[..before_restart.len()], before_restart[..]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

fn without_cache_marks(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_marks(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_marks).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn an_unknown_session_answers_resource_not_found_with_its_id() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": "sess_nope", "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32002));
    assert_eq!(response["error"]["data"]["sessionId"], json!("sess_nope"));
}
