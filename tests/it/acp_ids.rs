//! End-to-end: what ACP added to tool calls and message chunks. Every
//! `tool_call` / `tool_call_update` (and the tool call of a permission
//! request) carries the tool's `name`; every agent, thought and user
//! message chunk carries a `messageId` that is the same for all chunks of
//! one message, differs between messages, and is the same live and on
//! every replay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, requests_of, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;
use support::{mcp_server_bin, prompt, selected, spawn_anthropic};

/// The message chunks among `updates` as (kind, messageId), one per chunk.
fn chunk_ids(updates: &[Value]) -> Vec<(String, String)> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"].as_str().unwrap().ends_with("_chunk"))
        .map(|u| {
            (
                u["sessionUpdate"].as_str().unwrap().to_string(),
                u["messageId"].as_str().unwrap_or("<none>").to_string(),
            )
        })
        .collect()
}

/// Consecutive chunks of one kind and one message joined.
fn by_message(updates: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for update in updates {
        if update["sessionUpdate"] == "usage_update" {
            continue;
        }
        if update["sessionUpdate"]
            .as_str()
            .unwrap()
            .ends_with("_chunk")
            && let Some(last) = out.last_mut()
            && last["sessionUpdate"] == update["sessionUpdate"]
            && last["messageId"] == update["messageId"]
        {
            let joined = format!(
                "{}{}",
                last["content"]["text"].as_str().unwrap(),
                update["content"]["text"].as_str().unwrap()
            );
            last["content"]["text"] = Value::String(joined);
            continue;
        }
        out.push(update.clone());
    }
    out
}

async fn load(sandbox: &Sandbox, mock: &MockModel, session: &str) -> Vec<Value> {
    let mut acp = spawn_anthropic(sandbox, mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    updates_of(&before)
}

#[tokio::test]
async fn a_tool_round_trip_names_the_tool_on_every_call_update_and_permission_request() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_w",
        "write",
        &json!({"path": "out.txt", "content": "hi\n"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", prompt(&session, "write out.txt"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| match method {
            "session/request_permission" => selected("allow_once"),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let asked = requests_of(&before, "session/request_permission");
    assert_eq!(asked.len(), 1);
    let work = sandbox.work().display().to_string();
    let asked = &asked[0]["params"]["toolCall"];
    let normal = |v: &Value| -> Value {
        serde_json::from_str(&v.to_string().replace(&work, "$WORK")).unwrap()
    };
    let diff = json!([{"type": "diff", "path": "$WORK/out.txt", "newText": "hi\n"}]);
    assert_eq!(
        normal(asked),
        json!({
            "toolCallId": "toolu_w",
            "name": "write",
            "title": "Write out.txt",
            "kind": "edit",
            "content": diff,
            "rawInput": {"path": "out.txt", "content": "hi\n"}
        })
    );
    let call = json!({
        "sessionUpdate": "tool_call",
        "toolCallId": "toolu_w",
        "name": "write",
        "title": "Write out.txt",
        "kind": "edit",
        "status": "in_progress",
        "locations": [{"path": "$WORK/out.txt"}],
        "rawInput": {"path": "out.txt", "content": "hi\n"}
    });
    let done = json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": "toolu_w",
        "name": "write",
        "status": "completed",
        "content": diff,
        "rawOutput": {"path": "$WORK/out.txt", "bytes": 3, "created": true}
    });
    // The prompt is entry e1, the call e2, its result e3, the answer e4.
    let answer = json!({"sessionUpdate": "agent_message_chunk", "messageId": "e4", "content": {"type": "text", "text": "The file says hello."}});
    assert_eq!(
        normal(&Value::Array(by_message(&updates_of(&before)))),
        json!([call, done, answer])
    );
    assert_eq!(
        std::fs::read_to_string(format!("{work}/out.txt")).unwrap(),
        "hi\n"
    );
    drop(acp);

    // The replay shows the same, after the prompt.
    let replayed = load(&sandbox, &mock, &session).await;
    assert_eq!(
        normal(&Value::Array(by_message(&replayed))),
        json!([
            {"sessionUpdate": "user_message_chunk", "messageId": "e1", "content": {"type": "text", "text": "write out.txt"}},
            call,
            done,
            answer
        ])
    );
}

#[tokio::test]
async fn an_mcp_tool_goes_by_its_mcp_name() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_echo",
        "mcp__notes__echo",
        &json!({"text": "yo"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": [
                {"name": "notes", "command": mcp_server_bin(), "args": [], "env": []}
            ]}),
        )
        .await;
    let session = result["sessionId"].as_str().unwrap().to_string();
    let id = acp
        .send("session/prompt", prompt(&session, "echo yo"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| match method {
            "session/request_permission" => selected("allow_once"),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let calls: Vec<(Value, Value)> = updates_of(&before)
        .iter()
        .filter(|u| u["toolCallId"] == "c_echo")
        .map(|u| (u["sessionUpdate"].clone(), u["name"].clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            (json!("tool_call"), json!("mcp__notes__echo")),
            (json!("tool_call_update"), json!("mcp__notes__echo")),
        ]
    );
}

#[tokio::test]
async fn message_ids_are_stable_per_message_live_and_on_every_replay() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/thinking.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push_side(Reply::sse(support::sse::anthropic_text(
        "## Goal\nGreet",
        300,
    )));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let mut live = Vec::new();
    for text in ["hi", "again", "/compact"] {
        let id = acp.send("session/prompt", prompt(&session, text)).await;
        let (response, before) = acp.until_response(id).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        live.extend(updates_of(&before));
    }
    drop(acp);
    let mut expected_live: Vec<(String, String)> = Vec::new();
    // The thinking and the text of one answer: each chunk of it carries
    // its message's id; the thought is a message of its own.
    let thinking_chunks = chunk_ids(&live)
        .iter()
        .filter(|(k, _)| k == "agent_thought_chunk")
        .count();
    assert!(thinking_chunks >= 1);
    for _ in 0..thinking_chunks {
        expected_live.push(("agent_thought_chunk".into(), "e2-thought".into()));
    }
    let first_text = chunk_ids(&live)
        .iter()
        .filter(|(k, id)| k == "agent_message_chunk" && id == "e2")
        .count();
    assert!(first_text >= 1);
    for _ in 0..first_text {
        expected_live.push(("agent_message_chunk".into(), "e2".into()));
    }
    let second_text = chunk_ids(&live).len() - thinking_chunks - first_text - 1;
    for _ in 0..second_text {
        // e3 is the first turn's checkpoint, e4 the second prompt.
        expected_live.push(("agent_message_chunk".into(), "e5".into()));
    }
    // The compaction's marker is its own message, not part of the answer
    // before it.
    expected_live.push(("agent_message_chunk".into(), "compaction-0".into()));
    assert_eq!(chunk_ids(&live), expected_live);

    // Two replays: the same ids as live, and as each other; the prompts
    // go by their own entries' ids.
    let first = load(&sandbox, &mock, &session).await;
    let second = load(&sandbox, &mock, &session).await;
    assert_eq!(first, second);
    let marker = by_message(&first)[6]["content"]["text"].clone();
    assert_eq!(
        by_message(&first),
        vec![
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e1", "content": {"type": "text", "text": "hi"}}),
            json!({"sessionUpdate": "agent_thought_chunk", "messageId": "e2-thought", "content": {"type": "text", "text": "The user says hi. I should greet them back briefly."}}),
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "e2", "content": {"type": "text", "text": "Hi there! How can I help?"}}),
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e4", "content": {"type": "text", "text": "again"}}),
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "e5", "content": {"type": "text", "text": "Hello from the mock model."}}),
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e7", "content": {"type": "text", "text": "/compact"}}),
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "compaction-0", "content": {"type": "text", "text": marker}}),
        ][..]
    );
    // Live and replayed answers, message by message (the compaction
    // marker's live text also has the size after it, which is not stored).
    let live_answers: Vec<Value> = by_message(&live)
        .into_iter()
        .filter(|u| u["messageId"] != "compaction-0")
        .collect();
    let replayed_answers: Vec<Value> = by_message(&first)
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "user_message_chunk" && u["messageId"] != "compaction-0")
        .collect();
    assert_eq!(live_answers, replayed_answers);
}

/// The trust question is a pseudo tool call named `trust_project`, and what
/// pincer tells the user about it is a message of its own, apart from the
/// model's answer.
#[tokio::test]
async fn the_trust_question_is_named_and_its_notice_is_a_message_of_its_own() {
    let sandbox = Sandbox::new();
    let pwned = sandbox.dir.path().join("pwned-trust-name");
    std::fs::create_dir_all(sandbox.work().join(".git")).unwrap();
    sandbox.write(
        ".pincer/config.toml",
        &format!(
            "[mcp.servers.pwn]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {}\"]\n",
            pwned.display()
        ),
    );
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp
        .drive(id, |method, _| match method {
            "session/request_permission" => selected("reject_once"),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(!pwned.exists());
    let asked = requests_of(&before, "session/request_permission");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["params"]["toolCall"]["name"], "trust_project");
    let shown: Vec<(Value, Value, Value)> = by_message(&updates_of(&before))
        .iter()
        .map(|u| {
            (
                u["sessionUpdate"].clone(),
                u["name"].clone(),
                u["messageId"].clone(),
            )
        })
        .collect();
    let notice = shown[2].2.as_str().unwrap().to_string();
    assert!(notice.starts_with("notice-"), "{notice}");
    assert_eq!(
        shown,
        vec![
            (json!("tool_call"), json!("trust_project"), Value::Null),
            (
                json!("tool_call_update"),
                json!("trust_project"),
                Value::Null
            ),
            (json!("agent_message_chunk"), Value::Null, json!(notice)),
            (json!("agent_message_chunk"), Value::Null, json!("e2")),
        ]
    );
}

/// A call's progress updates (here the editor terminal it runs in) are
/// named too, not only its start and end.
#[tokio::test]
async fn progress_updates_of_a_call_carry_its_name() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_bash",
        "bash",
        &json!({"command": "cargo --version"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({"terminal": true})).await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", prompt(&session, "version?"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| match method {
            "session/request_permission" => selected("allow_once"),
            "terminal/create" => json!({"terminalId": "term-1"}),
            "terminal/wait_for_exit" => json!({"exitCode": 0}),
            "terminal/output" => {
                json!({"output": "cargo 1.95.0\n", "truncated": false, "exitStatus": {"exitCode": 0}})
            }
            "terminal/release" => json!({}),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let calls: Vec<(Value, Value, Value)> = updates_of(&before)
        .iter()
        .filter(|u| u["toolCallId"] == "c_bash")
        .map(|u| {
            (
                u["sessionUpdate"].clone(),
                u["name"].clone(),
                u["status"].clone(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            (json!("tool_call"), json!("bash"), json!("in_progress")),
            // The terminal it runs in, while it runs.
            (json!("tool_call_update"), json!("bash"), Value::Null),
            (json!("tool_call_update"), json!("bash"), json!("completed")),
        ]
    );
}
