//! End-to-end: long sessions cross the model's window and keep going —
//! memory flush, compaction, overflow retry, and a reload that keeps the
//! summary — with the real binary and the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};

const SUMMARY: &str = "## Goal\nAnswer the user's questions.";

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    // The title call is a side request too; keep it out of the way.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// The texts of a request's messages, flattened per message.
fn texts(body: &Value) -> Vec<Vec<String>> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    c["text"]
                        .as_str()
                        .map(String::from)
                        .unwrap_or_else(|| c["type"].as_str().unwrap().to_string())
                })
                .collect()
        })
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn summary_block() -> String {
    format!(
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{SUMMARY}\n</summary>"
    )
}

fn message_texts(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn a_long_session_flushes_memory_then_compacts_and_keeps_going() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let memory = sandbox.home().join("agents/main/workspace/MEMORY.md");
    mock.push(Reply::sse(anthropic_text("first answer", 1_000)));
    // The second call reports a context close to Sonnet's 200,000 window.
    mock.push(Reply::sse(anthropic_text("second answer", 185_000)));
    // The memory flush: the model writes a note, then has nothing to say.
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_mem",
        "write",
        &json!({"path": memory, "content": "- The user likes short answers.\n"}),
    )));
    mock.push(Reply::sse(anthropic_text("NO_REPLY", 10)));
    mock.push_side(Reply::sse(anthropic_text(SUMMARY, 5_000)));
    mock.push(Reply::sse(anthropic_text("third answer", 3_000)));

    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    for text in ["first question", "second question"] {
        acp.call("session/prompt", prompt(&session, text)).await;
    }
    let id = acp
        .send("session/prompt", prompt(&session, "third question"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    // The flush ran silently with file tools only, inside the workspace.
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    let flush = &requests[2].body;
    assert_eq!(tool_names(flush), ["read", "write", "edit"]);
    let flush_texts = texts(flush);
    assert!(
        flush_texts.last().unwrap()[0].starts_with("Pre-compaction memory flush."),
        "{flush_texts:?}"
    );
    assert_eq!(flush_texts[0], ["first question"]);
    assert_eq!(
        std::fs::read_to_string(&memory).unwrap(),
        "- The user likes short answers.\n"
    );
    // Then the summary was written from the old history …
    let side = mock.side_requests();
    assert_eq!(side.len(), 1);
    assert!(side[0].body["system"].to_string().contains("summar"));
    let asked = texts(&side[0].body)[0][0].clone();
    for expected in ["[User]: first question", "[Assistant]: second answer"] {
        assert!(
            asked.contains(expected),
            "{expected:?} missing from {asked}"
        );
    }
    // … and the turn went on with the summary and the recent tail.
    assert_eq!(
        texts(&requests[4].body),
        vec![vec![summary_block(), "third question".to_string()]]
    );
    // The editor was told, and saw nothing of the flush.
    let shown = message_texts(&updates_of(&before));
    assert!(shown.starts_with("Compacting the conversation"), "{shown}");
    assert!(shown.contains("Context compacted"), "{shown}");
    assert!(shown.ends_with("third answer"), "{shown}");
    assert!(!shown.contains("NO_REPLY"), "{shown}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    // A fresh process shows the whole conversation and continues from the
    // summary.
    acp.close_stdin();
    acp.wait_exit().await;
    mock.push(Reply::sse(anthropic_text("fourth answer", 3_100)));
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (_, replay) = acp.until_response(id).await;
    let replayed = updates_of(&replay);
    let users: Vec<&str> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        users,
        ["first question", "second question", "third question"]
    );
    let agent = message_texts(&replayed);
    assert!(
        agent.starts_with("first answersecond answerContext compacted"),
        "{agent}"
    );
    acp.call("session/prompt", prompt(&session, "fourth question"))
        .await;
    let last = mock.requests().last().unwrap().body.clone();
    assert_eq!(
        texts(&last),
        vec![
            vec![summary_block(), "third question".to_string()],
            vec!["third answer".to_string()],
            vec!["fourth question".to_string()],
        ]
    );
}

#[tokio::test]
async fn an_overflow_compacts_once_and_retries_then_says_plainly_when_that_is_not_enough() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let overflow = || {
        Reply::status(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        )
    };
    mock.push(Reply::sse(anthropic_text("first answer", 1_000)));
    mock.push(overflow());
    mock.push_side(Reply::sse(anthropic_text(SUMMARY, 500)));
    mock.push(Reply::sse(anthropic_text("second answer", 2_000)));

    let mut acp = spawn(&sandbox, &mock);
    // This client shows compaction updates.
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"compaction": {}}}}),
    )
    .await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "first question"))
        .await;
    let id = acp
        .send("session/prompt", prompt(&session, "second question"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(texts(&requests[1].body).len(), 3);
    assert_eq!(
        texts(&requests[2].body),
        vec![vec![summary_block(), "second question".to_string()]]
    );
    // No memory flush on an overflow: straight to the summary.
    assert_eq!(mock.side_requests().len(), 1);
    let compaction: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "compaction_update")
        .collect();
    assert_eq!(compaction.len(), 2, "{compaction:?}");
    assert_eq!(compaction[0]["status"], "in_progress");
    assert_eq!(compaction[1]["status"], "completed");
    assert_eq!(compaction[1]["summary"][0]["text"], SUMMARY);
    assert_eq!(compaction[0]["compactionId"], compaction[1]["compactionId"]);

    // Still too long after compacting: one compaction, then a plain error.
    mock.push(overflow());
    mock.push_side(Reply::sse(anthropic_text(SUMMARY, 500)));
    mock.push(overflow());
    let id = acp
        .send("session/prompt", prompt(&session, "third question"))
        .await;
    let (response, _) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("still too long") && message.contains("new session"),
        "{response}"
    );
    assert_eq!(mock.requests().len(), 5);
    assert_eq!(mock.side_requests().len(), 2);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// Writes a stored session whose model calls happened at `at` (RFC 3339):
/// an old read with a 10,000-character result, then three more answers.
fn stored_session(sandbox: &Sandbox, id: &str, at: &str) -> String {
    let dir = sandbox.home().join("sessions/--elsewhere--");
    std::fs::create_dir_all(&dir).unwrap();
    let big = format!(
        "{}{}{}",
        "h".repeat(1_500),
        "m".repeat(7_000),
        "t".repeat(1_500)
    );
    let assistant = |content: Value, stop: &str| {
        json!({"role": "assistant", "content": content, "provider": "anthropic", "api": "anthropic-messages",
               "model": "claude-sonnet-4-5", "stop_reason": stop, "usage": {"input": 3000, "output": 10, "cache_read": 0, "cache_write": 0}})
    };
    let user = |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text}]});
    let records = [
        json!({"type": "message", "message": user("read big.txt")}),
        json!({"type": "message", "message": assistant(json!([{"type": "tool_call", "id": "toolu_big", "name": "read", "arguments": {"path": "big.txt"}}]), "tool_use")}),
        json!({"type": "tool_result", "message": {"tool_call_id": "toolu_big", "tool_name": "read", "content": [{"type": "text", "text": big}], "is_error": false}}),
        json!({"type": "message", "message": assistant(json!([{"type": "text", "text": "read it"}]), "stop")}),
        json!({"type": "message", "message": user("and?")}),
        json!({"type": "message", "message": assistant(json!([{"type": "text", "text": "more"}]), "stop")}),
        json!({"type": "message", "message": user("and then?")}),
        json!({"type": "message", "message": assistant(json!([{"type": "text", "text": "done"}]), "stop")}),
    ];
    let mut lines = vec![
        json!({"type": "session", "version": 1, "id": id, "cwd": "/elsewhere", "created": at})
            .to_string(),
    ];
    for (n, mut record) in records.into_iter().enumerate() {
        record["id"] = json!(format!("e{}", n + 1));
        record["parentId"] = if n == 0 {
            Value::Null
        } else {
            json!(format!("e{n}"))
        };
        record["timestamp"] = json!(at);
        lines.push(record.to_string());
    }
    let text = lines.join("\n") + "\n";
    std::fs::write(dir.join(format!("{id}.jsonl")), &text).unwrap();
    text
}

#[tokio::test]
async fn old_tool_results_are_trimmed_only_after_the_prompt_cache_expired() {
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    for (id, at, expect_trimmed) in [
        ("sess_idle", "2026-01-01T08:00:00.000Z", true),
        ("sess_warm", now.as_str(), false),
    ] {
        let sandbox = Sandbox::new();
        let stored = stored_session(&sandbox, id, at);
        let mock = MockModel::start().await;
        mock.push(Reply::sse(anthropic_text("ok", 3_100)));
        mock.push(Reply::sse(anthropic_text("ok again", 3_200)));
        let mut acp = spawn(&sandbox, &mock);
        acp.initialize().await;
        acp.call(
            "session/load",
            json!({"sessionId": id, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
        acp.call("session/prompt", prompt(id, "next")).await;
        acp.call("session/prompt", prompt(id, "and next")).await;
        for request in mock.requests() {
            let result = &request.body["messages"][2]["content"][0]["content"][0]["text"];
            let result = result.as_str().unwrap();
            assert_eq!(
                result.contains("were trimmed"),
                expect_trimmed,
                "{id}: {}",
                &result[..100]
            );
            if expect_trimmed {
                // Head and tail survive; the same trimmed text is sent again
                // on the next call, so the new cache prefix holds.
                assert!(
                    result.starts_with(&"h".repeat(1_500)) && result.ends_with(&"t".repeat(1_500))
                );
                assert!(result.chars().count() < 3_200);
            } else {
                assert_eq!(result.chars().count(), 10_000);
            }
        }
        // The transcript keeps the full result.
        let path = sandbox
            .home()
            .join(format!("sessions/--elsewhere--/{id}.jsonl"));
        let now_text = std::fs::read_to_string(path).unwrap();
        assert!(
            now_text.starts_with(&stored),
            "{id}: the stored entries changed"
        );
        assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    }
}
