//! End-to-end: transcripts on disk and `session/load`, with the real binary
//! and the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, spawn_anthropic, wait_until};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;

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
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "accept-edits"}),
    )
    .await;
    // An editor shows the prompts it sent; a replay gives them the ids of
    // their transcript entries (e1 is the mode change).
    let mut live = vec![
        json!({"sessionUpdate": "user_message_chunk", "messageId": "e2", "content": {"type": "text", "text": "think first"}}),
    ];
    let id = acp
        .send("session/prompt", prompt(&session, "think first"))
        .await;
    let (_, before) = acp.until_response(id).await;
    live.extend(updates_of(&before));
    // e3 is the answer, e4 the turn's checkpoint.
    live.push(json!({"sessionUpdate": "user_message_chunk", "messageId": "e5", "content": {"type": "text", "text": "now edit"}}));
    let id = acp
        .send("session/prompt", prompt(&session, "now edit"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    live.extend(updates_of(&before));
    drop(acp);

    // A new process, as after closing the editor.
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
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
        // The time line closing each user message is not stored: a loaded
        // session's earlier messages go without it.
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| !support::is_time_line(item))
                .map(without_cache_marks)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A version-1 transcript, frozen in `fixtures/sessions/` as the format
/// was first released: every later pincer must load it.
#[tokio::test]
async fn a_frozen_version_1_transcript_loads_and_continues() {
    let sandbox = Sandbox::new();
    let dir = sandbox.home().join("sessions/--home-me-project--");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/sessions/v1.jsonl"),
        dir.join("sess_1f2e.jsonl"),
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    // Loaded from another cwd than the one it was recorded in.
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": "sess_1f2e", "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    let result = &response["result"];
    assert_eq!(result["modes"]["currentModeId"], "accept-edits", "{result}");
    let model = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap();
    assert_eq!(model["currentValue"], "anthropic/claude-haiku-4-5");
    let replayed = normalise(updates_of(&before));
    assert_eq!(
        replayed,
        vec![
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e1", "content": {"type": "text", "text": "What does hello.txt say?"}}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "toolu_01", "name": "read", "title": "Read hello.txt", "kind": "read",
                   "status": "in_progress", "locations": [{"path": "/home/me/project/hello.txt"}], "rawInput": {"path": "hello.txt"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_01", "name": "read", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "hello"}}],
                   "rawOutput": {"output": "hello", "isError": false}}),
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "e4", "content": {"type": "text", "text": "It says hello."}}),
        ]
    );
    acp.call("session/prompt", prompt("sess_1f2e", "And now?"))
        .await;
    let request = &mock.requests()[0].body;
    assert_eq!(request["model"], "claude-haiku-4-5");
    let messages = without_cache_marks(&request["messages"]);
    assert_eq!(
        messages,
        json!([
            {"role": "user", "content": [{"type": "text", "text": "What does hello.txt say?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "hello.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "hello"}], "is_error": false}]},
            {"role": "assistant", "content": [{"type": "text", "text": "It says hello."}]},
            {"role": "user", "content": [{"type": "text", "text": "And now?"}]},
        ])
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn an_unknown_session_answers_resource_not_found_with_its_id() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
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

#[tokio::test]
async fn list_pages_newest_first_and_titles_come_from_the_first_prompt() {
    let sandbox = Sandbox::new();
    let other = tempfile::tempdir().unwrap();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    // Only sessions that got a prompt are listed: an editor opens many it
    // never uses (see tests/it/editor_fixes.rs).
    let mut ids = Vec::new();
    for n in 0..54 {
        let id = acp.new_session(&sandbox.work()).await;
        mock.push(Reply::fixture("anthropic/text.sse"));
        acp.call("session/prompt", prompt(&id, &format!("task {n}")))
            .await;
        ids.push(id);
    }
    // A session elsewhere is not listed for this cwd.
    let elsewhere = acp.new_session(&other.path().canonicalize().unwrap()).await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    acp.call("session/prompt", prompt(&elsewhere, "elsewhere"))
        .await;
    // The newest one gets a prompt, and with it a title.
    let newest = acp.new_session(&sandbox.work()).await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let id = acp
        .send(
            "session/prompt",
            prompt(&newest, "Fix the flaky login test\nplease"),
        )
        .await;
    let (_, before) = acp.until_response(id).await;
    let info = before
        .iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update")
        .unwrap();
    assert_eq!(
        info["params"]["update"]["title"],
        "Fix the flaky login test"
    );
    ids.push(newest.clone());

    let first = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    let page1 = first["sessions"].as_array().unwrap();
    assert_eq!(page1.len(), 50);
    assert_eq!(page1[0]["sessionId"], json!(newest));
    assert_eq!(page1[0]["title"], "Fix the flaky login test");
    assert!(page1[0]["updatedAt"].as_str().unwrap().ends_with('Z'));
    let cursor = first["nextCursor"].as_str().unwrap().to_string();
    let second = acp
        .call(
            "session/list",
            json!({"cwd": sandbox.work(), "cursor": cursor}),
        )
        .await;
    let page2 = second["sessions"].as_array().unwrap();
    assert_eq!(page2.len(), 5);
    assert!(second.get("nextCursor").is_none() || second["nextCursor"].is_null());
    let mut listed: Vec<String> = page1
        .iter()
        .chain(page2)
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    ids.sort();
    assert_eq!(listed, ids);
}

/// The `session_info_update` titles among `messages`, in order.
fn titles(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "session_info_update")
        .filter_map(|m| m["params"]["update"]["title"].as_str().map(String::from))
        .collect()
}

/// The path of the one transcript in the sandbox.
fn only_transcript(sandbox: &Sandbox) -> std::path::PathBuf {
    let found: Vec<_> = std::fs::read_dir(sandbox.home().join("sessions"))
        .unwrap()
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

#[tokio::test]
async fn assistant_entries_record_who_answered_and_how() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "hi")).await;
    acp.close_stdin();
    acp.wait_exit().await;
    let text = std::fs::read_to_string(only_transcript(&sandbox)).unwrap();
    let assistant: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["message"]["role"] == "assistant")
        .unwrap();
    let message = &assistant["message"];
    assert_eq!(message["provider"], "anthropic");
    assert_eq!(message["api"], "anthropic-messages");
    assert_eq!(message["model"], "claude-sonnet-4-5");
    assert_eq!(message["auth_profile"], "env:ANTHROPIC_API_KEY");
    assert_eq!(message["stop_reason"], "stop");
    assert_eq!(message["usage"]["output"], 10);
    assert!(assistant["id"].is_string() && assistant["parentId"].is_string());
    assert!(assistant["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(!text.contains("test-key"), "the key leaked into {text}");
}

#[tokio::test]
async fn a_cheap_model_names_the_session_after_its_first_turn() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push_side(Reply::fixture("anthropic/title.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "hello there, can you greet me?\nthanks"),
        )
        .await;
    // At once: the first line of the prompt; then the model's title,
    // cleaned of its quotes and period, which may come before the turn's
    // end or after it.
    let (_, mut seen) = acp.until_response(id).await;
    while titles(&seen).len() < 2 {
        seen.push(acp.next().await);
    }
    assert_eq!(
        titles(&seen),
        ["hello there, can you greet me?", "Greet the mock model"]
    );

    // One side call, to the provider's cheapest model, without tools, about
    // the opening exchange; the loop's own requests are unaffected.
    let side = mock.side_requests();
    assert_eq!(side.len(), 1);
    let body = &side[0].body;
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert!(body.get("tools").is_none(), "{body}");
    assert!(body.get("thinking").is_none(), "{body}");
    assert!(body["max_tokens"].as_u64().unwrap() <= 64, "{body}");
    let asked = body["messages"][0]["content"].to_string();
    assert!(asked.contains("hello there, can you greet me?"), "{asked}");
    assert!(asked.contains("Hello from the mock model."), "{asked}");
    assert_eq!(mock.requests().len(), 1);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    // Only the first turn names the session.
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (_, before) = acp.until_response(id).await;
    assert!(titles(&before).is_empty());
    assert_eq!(mock.side_requests().len(), 1);

    // The title is kept: listed now, in the transcript, and after a restart.
    let listed = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    assert_eq!(listed["sessions"][0]["title"], "Greet the mock model");
    acp.close_stdin();
    acp.wait_exit().await;
    let transcript = only_transcript(&sandbox);
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(
        text.lines()
            .any(|l| l.contains(r#""type":"title""#)
                && l.contains(r#""title":"Greet the mock model""#)),
        "{text}"
    );
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let listed = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    assert_eq!(listed["sessions"][0]["title"], "Greet the mock model");
    // Deleting the session removes its title too.
    acp.call("session/delete", json!({"sessionId": session}))
        .await;
    assert_eq!(
        std::fs::read_dir(transcript.parent().unwrap())
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn without_a_title_from_the_model_the_first_prompt_stays_the_title() {
    for config in ["", "title_model = \"none\"\n"] {
        let sandbox = Sandbox::new();
        std::fs::write(sandbox.home().join("config.toml"), config).unwrap();
        let mock = MockModel::start().await;
        mock.push(Reply::fixture("anthropic/text.sse"));
        mock.push(Reply::fixture("anthropic/text.sse"));
        let mut acp = spawn_anthropic(&sandbox, &mock);
        acp.initialize().await;
        let session = acp.new_session(&sandbox.work()).await;
        let id = acp.send("session/prompt", prompt(&session, "hi")).await;
        acp.until_response(id).await;
        if config.is_empty() {
            // The title call fails (nothing queued: 503); nothing is lost.
            mock.wait_for_side_requests(1, std::time::Duration::from_secs(10))
                .await;
        }
        let id = acp.send("session/prompt", prompt(&session, "again")).await;
        let (_, before) = acp.until_response(id).await;
        assert!(titles(&before).is_empty(), "{config}: {before:?}");
        let expected = usize::from(config.is_empty());
        assert_eq!(mock.side_requests().len(), expected, "{config}");
        let listed = acp
            .call("session/list", json!({"cwd": sandbox.work()}))
            .await;
        assert_eq!(listed["sessions"][0]["title"], "hi", "{config}");
        assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    }
}

#[tokio::test]
async fn resume_restores_without_replay_and_delete_removes_the_session() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hello")).await;
    acp.until_response(id).await;
    acp.call("session/close", json!({"sessionId": session}))
        .await;
    // Closed: prompting it is an unknown session until it is resumed.
    let id = acp
        .send("session/prompt", prompt(&session, "still there?"))
        .await;
    let (closed, _) = acp.until_response(id).await;
    assert_eq!(closed["error"]["code"], json!(-32002));

    let id = acp
        .send(
            "session/resume",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (resumed, before) = acp.until_response(id).await;
    assert!(resumed.get("error").is_none(), "{resumed}");
    assert_eq!(updates_of(&before), Vec::<Value>::new());
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        mock.requests()[1].body["messages"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    acp.call("session/delete", json!({"sessionId": session}))
        .await;
    let listed = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    assert_eq!(listed["sessions"], json!([]));
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (gone, _) = acp.until_response(id).await;
    assert_eq!(gone["error"]["code"], json!(-32002));
    assert_eq!(gone["error"]["data"]["sessionId"], json!(session));
}

/// Loads `session` in a fresh process and returns the replayed updates.
async fn load_in_new_process(
    sandbox: &Sandbox,
    mock: &MockModel,
    session: &str,
) -> (Acp, Vec<Value>) {
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
    (acp, updates_of(&before))
}

#[tokio::test]
async fn a_kill_during_a_streaming_turn_or_a_tool_leaves_a_transcript_that_loads() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.send("session/prompt", prompt(&session, "stream then die"))
        .await;
    loop {
        let m = acp.next().await;
        if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    acp.child.start_kill().unwrap();
    acp.wait_exit().await;
    let (mut acp, replayed) = load_in_new_process(&sandbox, &mock, &session).await;
    assert_eq!(
        replayed,
        vec![
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e1", "content": {"type": "text", "text": "stream then die"}})
        ]
    );

    // Now a kill while a tool runs: the call was recorded, its result not.
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_sleep",
        "bash",
        &json!({"command": format!("sleep {}", support::acp_client::unique_sleep())}),
    )));
    acp.send("session/prompt", prompt(&session, "run it")).await;
    loop {
        let m = acp.next().await;
        if m["params"]["update"]["sessionUpdate"] == "tool_call" {
            break;
        }
    }
    acp.child.start_kill().unwrap();
    acp.wait_exit().await;
    let (mut acp, replayed) = load_in_new_process(&sandbox, &mock, &session).await;
    let kinds: Vec<&str> = replayed
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "user_message_chunk",
            "user_message_chunk",
            "tool_call",
            "tool_call_update"
        ]
    );
    assert_eq!(replayed[3]["status"], "failed");

    // The model can go on: the cut-off call has an error result.
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = acp
        .send("session/prompt", prompt(&session, "what happened?"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn the_sessions_command_lists_shows_and_deletes() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "What does hello.txt say?"),
        )
        .await;
    acp.until_response(id).await;
    drop(acp);

    let run = |args: &[&str]| {
        let mut cmd = sandbox.command(args);
        cmd.stdin(std::process::Stdio::null());
        async move { cmd.output().await.unwrap() }
    };
    let out = run(&["sessions", "list", "--json"]).await;
    assert!(out.status.success());
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["sessionId"], json!(session));
    assert_eq!(lines[0]["title"], "What does hello.txt say?");
    assert_eq!(lines[0]["cwd"], json!(sandbox.work()));

    let out = run(&["sessions", "show", &session]).await;
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for expected in [
        "## User\n\nWhat does hello.txt say?",
        "I'll read the file.",
        "→ read {\"path\":\"hello.txt\"}",
        "✓ read result:\nhello",
        "The file says hello.",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }

    let out = run(&["sessions", "delete", &session]).await;
    assert!(out.status.success());
    let out = run(&["sessions", "list", "--json"]).await;
    assert!(out.stdout.is_empty());
    let out = run(&["sessions", "show", &session]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("no session")
    );
}

#[tokio::test]
async fn two_processes_write_their_own_sessions_at_the_same_time() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for _ in 0..2 {
        mock.push(Reply::fixture("anthropic/text.sse"));
    }
    let mut a = spawn_anthropic(&sandbox, &mock);
    let mut b = spawn_anthropic(&sandbox, &mock);
    a.initialize().await;
    b.initialize().await;
    let sa = a.new_session(&sandbox.work()).await;
    let sb = b.new_session(&sandbox.work()).await;
    let ia = a.send("session/prompt", prompt(&sa, "from a")).await;
    let ib = b.send("session/prompt", prompt(&sb, "from b")).await;
    let ((ra, _), (rb, _)) = tokio::join!(a.until_response(ia), b.until_response(ib));
    assert_eq!(ra["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(rb["result"], json!({"stopReason": "end_turn"}));
    drop((a, b));
    for (session, text) in [(&sa, "from a"), (&sb, "from b")] {
        let (_, replayed) = load_in_new_process(&sandbox, &mock, session).await;
        assert_eq!(
            replayed,
            vec![
                json!({"sessionUpdate": "user_message_chunk", "messageId": "e1", "content": {"type": "text", "text": text}}),
                json!({"sessionUpdate": "agent_message_chunk", "messageId": "e2", "content": {"type": "text", "text": "Hello from the mock model."}}),
            ]
        );
    }
}

#[tokio::test]
async fn closing_a_busy_session_ends_its_work() {
    use std::time::Duration;
    use support::acp_client::process_running;

    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = format!("sleep {}", support::acp_client::unique_sleep());
    mock.push(Reply::sse(anthropic_tool_call(
        "slow",
        "bash",
        &json!({ "command": sleeper }),
    )));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    let id = acp.send("session/prompt", prompt(&session, "wait")).await;
    wait_until("the command never started", Duration::from_secs(10), || {
        process_running(&sleeper)
    })
    .await;
    let close = acp
        .send("session/close", json!({"sessionId": session}))
        .await;
    // Both the close and the running prompt answer promptly, in either order.
    let (mut closed, mut answered) = (None, None);
    while closed.is_none() || answered.is_none() {
        let message = tokio::time::timeout(Duration::from_secs(2), acp.next())
            .await
            .expect("the close and the running prompt both answer");
        if message.get("method").is_some() {
            continue;
        }
        if message["id"] == json!(close) {
            closed = Some(message);
        } else if message["id"] == json!(id) {
            answered = Some(message);
        }
    }
    let closed = closed.unwrap();
    assert!(closed.get("error").is_none(), "{closed}");
    assert_eq!(
        answered.unwrap()["result"],
        json!({"stopReason": "cancelled"})
    );
    wait_until(
        "the command outlived its session",
        Duration::from_secs(2),
        || !process_running(&sleeper),
    )
    .await;
    drop(acp);
    // What happened up to the close is on disk and loads.
    let (_acp, replayed) = load_in_new_process(&sandbox, &mock, &session).await;
    assert!(
        replayed
            .iter()
            .any(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "slow"),
        "{replayed:?}"
    );
}

/// `pincer acp` started by `sh` with `umask 000`, as a careless launcher
/// would: what pincer creates must not depend on the umask.
fn spawn_with_open_umask(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    let std = cmd.as_std_mut();
    let program = std.get_program().to_owned();
    let mut shell = tokio::process::Command::new("sh");
    shell
        .arg("-c")
        .arg("umask 000; exec \"$0\" acp")
        .arg(program)
        .env_clear()
        .envs(
            std.get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .current_dir(sandbox.work())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    Acp::spawn(shell)
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Transcripts hold the whole conversation and every file the model read:
/// they, their titles and their directories are the user's alone, also
/// under `umask 000`, and those an older pincer left open are narrowed when
/// the session is opened again.
#[tokio::test]
async fn transcripts_titles_and_session_directories_are_private_whatever_the_umask() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push_side(Reply::fixture("anthropic/title.sse"));
    let mut acp = spawn_with_open_umask(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hello")).await;
    // The model's title (after the prompt's own, "hello") is saved beside
    // the transcript when it arrives, before the turn's end or after it.
    let (_, mut seen) = acp.until_response(id).await;
    while !titles(&seen).iter().any(|t| t != "hello") {
        seen.push(acp.next().await);
    }
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());

    let transcript = only_transcript(&sandbox);
    let dir = transcript.parent().unwrap().to_path_buf();
    let title = transcript.with_extension("title");
    let prompt = transcript.with_extension("prompt");
    let modes = |paths: &[&std::path::Path]| -> Vec<String> {
        paths
            .iter()
            .map(|p| {
                format!(
                    "{} {:o}",
                    p.file_name().unwrap().to_string_lossy(),
                    mode_of(p)
                )
            })
            .collect()
    };
    let sessions = sandbox.home().join("sessions");
    let paths = [sessions.as_path(), &dir, &transcript, &title, &prompt];
    let expected = vec![
        "sessions 700".to_string(),
        format!("{} 700", dir.file_name().unwrap().to_string_lossy()),
        format!("{session}.jsonl 600"),
        format!("{session}.title 600"),
        format!("{session}.prompt 600"),
    ];
    assert_eq!(modes(&paths), expected);
    // Nothing else was left beside them (a partial title, say).
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);

    // Files an older pincer made readable by everyone are narrowed when the
    // session is opened again.
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(&sessions, 0o755), (&dir, 0o777), (&transcript, 0o644)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut acp = spawn_with_open_umask(&sandbox, &mock);
    acp.initialize().await;
    acp.call(
        "session/resume",
        json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
    )
    .await;
    assert_eq!(modes(&paths), expected);
}

/// A transcript whose last line was cut in the middle (the process died
/// mid-write) loads over ACP: the complete entries are replayed, the torn
/// one is skipped, and the session goes on.
#[tokio::test]
async fn a_transcript_cut_in_the_middle_of_a_line_loads_over_acp_and_continues() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::sse(support::sse::anthropic_text(
        "the second answer",
        20,
    )));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "first")).await;
    acp.call("session/prompt", prompt(&session, "second")).await;
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());

    let transcript = only_transcript(&sandbox);
    let full = std::fs::read_to_string(&transcript).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    // The answer, and after it the turn's checkpoint, which a process
    // killed while writing the answer never got to.
    let at = lines
        .iter()
        .position(|l| l.contains("the second answer"))
        .unwrap();
    assert!(lines[at + 1].contains("\"type\":\"checkpoint\""), "{full}");
    let last = lines[at];
    let without_last = format!("{}\n", lines[..at].join("\n"));
    // Cut halfway through the last entry, as a kill mid-write leaves it.
    let cut = format!("{without_last}{}", &last[..last.len() / 2]);
    assert!(serde_json::from_str::<Value>(&cut[without_last.len()..]).is_err());

    // What loading replays without the last entry at all…
    std::fs::write(&transcript, &without_last).unwrap();
    let (acp, whole_lines_only) = load_in_new_process(&sandbox, &mock, &session).await;
    drop(acp);
    // …is exactly what it replays with the torn entry.
    std::fs::write(&transcript, &cut).unwrap();
    let (mut acp, replayed) = load_in_new_process(&sandbox, &mock, &session).await;
    assert_eq!(normalise(replayed.clone()), normalise(whole_lines_only));
    assert_eq!(
        normalise(replayed),
        vec![
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e1", "content": {"type": "text", "text": "first"}}),
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "e2", "content": {"type": "text", "text": "Hello from the mock model."}}),
            // e3 is the first turn's checkpoint.
            json!({"sessionUpdate": "user_message_chunk", "messageId": "e4", "content": {"type": "text", "text": "second"}}),
        ]
    );

    mock.push(Reply::sse(support::sse::anthropic_text(
        "the third answer",
        30,
    )));
    let result = acp.call("session/prompt", prompt(&session, "third")).await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    let messages = without_cache_marks(&mock.requests().last().unwrap().body["messages"]);
    let texts: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        vec!["first", "Hello from the mock model.", "second", "third"]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
    // The torn line was closed off, so the transcript still loads whole.
    let (_acp, again) = load_in_new_process(&sandbox, &mock, &session).await;
    let texts: Vec<(&str, &str)> = again
        .iter()
        .map(|u| {
            (
                u["sessionUpdate"].as_str().unwrap(),
                u["content"]["text"].as_str().unwrap(),
            )
        })
        .filter(|(kind, _)| kind.ends_with("_chunk"))
        .collect();
    let mut joined: Vec<(&str, String)> = Vec::new();
    for (kind, text) in texts {
        match joined.last_mut() {
            Some((last, so_far)) if *last == kind && kind == "agent_message_chunk" => {
                so_far.push_str(text)
            }
            _ => joined.push((kind, text.to_string())),
        }
    }
    assert_eq!(
        joined,
        vec![
            ("user_message_chunk", "first".to_string()),
            (
                "agent_message_chunk",
                "Hello from the mock model.".to_string()
            ),
            ("user_message_chunk", "second".to_string()),
            ("user_message_chunk", "third".to_string()),
            ("agent_message_chunk", "the third answer".to_string()),
        ]
    );
}

/// The transcripts in the sandbox, by session id.
fn transcript_of(sandbox: &Sandbox, id: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(sandbox.home().join("sessions"))
        .ok()?
        .flatten()
        .map(|d| d.path().join(format!("{id}.jsonl")))
        .find(|p| p.is_file())
}

/// Issue 30: a client that creates a session in one process and prompts
/// it from the next (`acpx sessions new`, then `acpx prompt`) got -32002
/// from `session/resume`: a session never prompted was not saved. It is
/// now on disk from its creation, loadable and resumable by any later
/// process, and still not listed until its first prompt; one left
/// unprompted for more than a day is removed when sessions are listed.
#[tokio::test]
async fn a_session_created_in_one_process_is_resumed_and_loaded_in_the_next() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let work = sandbox.work();
    let reopen = |id: &str| json!({"sessionId": id, "cwd": work, "mcpServers": []});

    let mut first = spawn_anthropic(&sandbox, &mock);
    first.initialize().await;
    let session = first.new_session(&work).await;
    let abandoned = first.new_session(&work).await;
    first.close_stdin();
    assert!(first.wait_exit().await.success());
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(25 * 3600);
    std::fs::File::options()
        .append(true)
        .open(transcript_of(&sandbox, &abandoned).unwrap())
        .unwrap()
        .set_modified(old)
        .unwrap();

    // A second process lists neither and loads the new one, empty.
    let mut second = spawn_anthropic(&sandbox, &mock);
    second.initialize().await;
    let list = second.call("session/list", json!({"cwd": work})).await;
    assert_eq!(list["sessions"], json!([]));
    assert_eq!(transcript_of(&sandbox, &abandoned), None);
    let id = second.send("session/load", reopen(&session)).await;
    let (response, before) = second.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(updates_of(&before), Vec::<Value>::new());
    second.close_stdin();
    assert!(second.wait_exit().await.success());

    // A third resumes it and prompts it: now it is listed.
    let mut third = spawn_anthropic(&sandbox, &mock);
    third.initialize().await;
    third.call("session/resume", reopen(&session)).await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let result = third
        .call(
            "session/prompt",
            prompt(&session, "hello from the next process"),
        )
        .await;
    assert_eq!(result["stopReason"], "end_turn");
    let list = third.call("session/list", json!({"cwd": work})).await;
    let listed: Vec<Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| json!([s["sessionId"], s["title"]]))
        .collect();
    assert_eq!(
        listed,
        vec![json!([session, "hello from the next process"])]
    );
    third.close_stdin();
    assert!(third.wait_exit().await.success());
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_session_unloaded_while_idle_comes_back_with_its_history() {
    let sandbox = Sandbox::new();
    // The session_end hook runs when the idle session is unloaded.
    let ended = sandbox.home().join("ended");
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n\n[acp]\nsession_idle_secs = 1\n\n[[hooks]]\nevent = \"session_end\"\ncommand = \"echo unloaded >> {}\"\n",
            ended.display()
        ),
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", prompt(&session, "remember 42"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    wait_until(
        "the idle session was unloaded",
        std::time::Duration::from_secs(10),
        || ended.exists(),
    )
    .await;

    // Its next use opens it again from its transcript: the model sees the
    // earlier turn, exactly as it was.
    let id = acp
        .send("session/prompt", prompt(&session, "which number?"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let first = without_cache_marks(&requests[0].body["messages"]);
    let second = without_cache_marks(&requests[1].body["messages"]);
    let (first, second) = (first.as_array().unwrap(), second.as_array().unwrap());
    assert_eq!(second.len(), first.len() + 2);
    assert_eq!(second[..first.len()], first[..]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}
