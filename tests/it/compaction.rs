//! End-to-end: long sessions cross the model's window and keep going —
//! memory flush, compaction, overflow retry, and a reload that keeps the
//! summary — with the real binary and the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::prompt;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};

const SUMMARY: &str = "## Goal\nAnswer the user's questions.";
const SUMMARY_2: &str =
    "## Goal\nAnswer the user's questions.\n\n## Progress\n### Done\napp.rs written.";

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    // The title call is a side request too; keep it out of the way.
    spawn_with(sandbox, mock, "title_model = \"none\"\n")
}

/// The texts of a request's messages, flattened per message.
fn texts(body: &Value) -> Vec<Vec<String>> {
    support::without_time_lines(body)["messages"]
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

/// A config for long-session tests: recent history of 150 tokens is kept
/// word for word, so a few hundred characters of conversation already
/// leave older messages to summarise; edits need no permission.
const LONG_SESSION_CONFIG: &str =
    "title_model = \"none\"\ndefault_mode = \"bypass\"\n\n[compaction]\nkeep_recent_tokens = 150\n";

fn spawn_with(sandbox: &Sandbox, mock: &MockModel, config: &str) -> Acp {
    std::fs::write(sandbox.home().join("config.toml"), config).unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

/// The summary as the model sees it, `summary` being the whole stored text
/// (the model's summary and the file lists).
fn summary_block_of(summary: &str) -> String {
    format!(
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{summary}\n</summary>"
    )
}

/// The ids of a request's tool calls and of its tool results, in order.
fn call_ids(body: &Value) -> (Vec<String>, Vec<String>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for message in body["messages"].as_array().unwrap() {
        for part in message["content"].as_array().unwrap() {
            match part["type"].as_str().unwrap() {
                "tool_use" => calls.push(part["id"].as_str().unwrap().to_string()),
                "tool_result" => results.push(part["tool_use_id"].as_str().unwrap().to_string()),
                _ => {}
            }
        }
    }
    (calls, results)
}

/// The compaction entries of a transcript.
fn compaction_entries(sandbox: &Sandbox, session: &str) -> Vec<Value> {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(sandbox.home().join("sessions")).unwrap() {
        let path = dir.unwrap().path().join(format!("{session}.jsonl"));
        if let Ok(text) = std::fs::read_to_string(path) {
            found.extend(
                text.lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|e| e["type"] == "compaction"),
            );
        }
    }
    found
}

#[tokio::test]
async fn a_long_session_flushes_memory_then_compacts_and_keeps_going() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let memory = sandbox.home().join("agents/main/workspace/MEMORY.md");
    sandbox.write("notes.txt", &"The build uses make. ".repeat(100));
    // About 200 tokens each: more than the 150 kept, so the cut falls
    // right before them.
    let second = format!("Now write app.rs. {}", "Keep it small. ".repeat(53));
    let fourth = format!("And now? {}", "Explain it all. ".repeat(50));
    let app = "fn main() {\n    println!(\"hi\");\n}\n";

    // Turn 1 reads a file, turn 2 writes one; turn 2's answer reports a
    // context close to Sonnet's 200,000 window.
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_read",
        "read",
        &json!({"path": "notes.txt"}),
    )));
    mock.push(Reply::sse(anthropic_text(
        "The notes say to use make.",
        1_000,
    )));
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_write",
        "write",
        &json!({"path": "app.rs", "content": app}),
    )));
    mock.push(Reply::sse(anthropic_text("Written.", 185_000)));
    // The memory flush: the model writes a note, then has nothing to say.
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_mem",
        "write",
        &json!({"path": memory, "content": "- The user likes short answers.\n"}),
    )));
    mock.push(Reply::sse(anthropic_text("NO_REPLY", 10)));
    mock.push_side(Reply::sse(anthropic_text(SUMMARY, 5_000)));
    mock.push(Reply::sse(anthropic_text("third answer", 3_000)));

    let mut acp = spawn_with(&sandbox, &mock, LONG_SESSION_CONFIG);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    for text in ["read notes.txt", second.as_str()] {
        let result = acp.call("session/prompt", prompt(&session, text)).await;
        assert_eq!(result["stopReason"], "end_turn", "{result}");
    }
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("app.rs")).unwrap(),
        app
    );
    let id = acp
        .send("session/prompt", prompt(&session, "third question"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    // The flush ran silently with file tools only, inside the workspace.
    let requests = mock.requests();
    assert_eq!(requests.len(), 7);
    let flush = &requests[4].body;
    assert_eq!(tool_names(flush), ["read", "write", "edit"]);
    let flush_texts = texts(flush);
    assert!(
        flush_texts.last().unwrap()[0].starts_with("Pre-compaction memory flush."),
        "{flush_texts:?}"
    );
    assert_eq!(flush_texts[0], ["read notes.txt"]);
    assert_eq!(
        std::fs::read_to_string(&memory).unwrap(),
        "- The user likes short answers.\n"
    );
    // Then the summary was written from the old history only: the first
    // turn, with its read …
    let side = mock.side_requests();
    assert_eq!(side.len(), 1);
    assert!(side[0].body["system"].to_string().contains("summar"));
    let asked = texts(&side[0].body)[0][0].clone();
    for expected in [
        "[User]: read notes.txt",
        "[Assistant tool calls]: read({\"path\":\"notes.txt\"})",
        "[Tool result]: ",
        "[Assistant]: The notes say to use make.",
    ] {
        assert!(
            asked.contains(expected),
            "{expected:?} missing from {asked}"
        );
    }
    assert!(!asked.contains("Now write app.rs"), "{asked}");
    // … and the turn went on with the summary (naming the file read) and
    // the recent tail word for word: the write call with its result.
    let summary1 = format!("{SUMMARY}\n\n<read-files>\nnotes.txt\n</read-files>");
    let tail = vec![
        vec![summary_block_of(&summary1), second.clone()],
        vec!["tool_use".to_string()],
        vec!["tool_result".to_string()],
        vec!["Written.".to_string()],
        vec!["third question".to_string()],
    ];
    assert_eq!(texts(&requests[6].body), tail);
    assert_eq!(
        call_ids(&requests[6].body),
        (
            vec!["toolu_write".to_string()],
            vec!["toolu_write".to_string()]
        )
    );
    // The editor was told, and saw nothing of the flush.
    let shown = message_texts(&updates_of(&before));
    assert!(shown.starts_with("Compacting the conversation"), "{shown}");
    assert!(shown.contains("Context compacted"), "{shown}");
    assert!(shown.ends_with("third answer"), "{shown}");
    assert!(!shown.contains("NO_REPLY"), "{shown}");
    // The transcript's compaction entry keeps the file lists.
    let entries = compaction_entries(&sandbox, &session);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["summary"], summary1.as_str());
    assert_eq!(entries[0]["read_files"], json!(["notes.txt"]));
    assert_eq!(entries[0].get("modified_files"), None);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    // A fresh process shows the whole conversation and continues from the
    // summary and the same tail.
    acp.close_stdin();
    acp.wait_exit().await;
    mock.push(Reply::sse(anthropic_text("fourth answer", 185_000)));
    let mut acp = spawn_with(&sandbox, &mock, LONG_SESSION_CONFIG);
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
    assert_eq!(users, ["read notes.txt", second.as_str(), "third question"]);
    let agent = message_texts(&replayed);
    assert!(
        agent.starts_with("The notes say to use make.Written.Context compacted"),
        "{agent}"
    );
    acp.call("session/prompt", prompt(&session, &fourth)).await;
    let mut expected = tail.clone();
    expected.push(vec!["third answer".to_string()]);
    expected.push(vec![fourth.clone()]);
    assert_eq!(texts(&mock.requests()[7].body), expected);

    // The next compaction updates the first summary, and the file lists
    // add up: the read from before the first compaction stays, the write
    // summarised now joins it.
    mock.push(Reply::sse(anthropic_text("NO_REPLY", 10)));
    mock.push_side(Reply::sse(anthropic_text(SUMMARY_2, 6_000)));
    mock.push(Reply::sse(anthropic_text("fifth answer", 3_000)));
    let result = acp
        .call("session/prompt", prompt(&session, "fifth question"))
        .await;
    assert_eq!(result["stopReason"], "end_turn", "{result}");
    let side = mock.side_requests();
    assert_eq!(side.len(), 2);
    let asked = texts(&side[1].body)[0][0].clone();
    assert!(
        asked.contains(&format!(
            "<previous-summary>\n{SUMMARY}\n</previous-summary>\n\nThe conversation above continues from the previous summary. UPDATE the previous summary"
        )),
        "{asked}"
    );
    assert!(asked.contains("[User]: Now write app.rs"), "{asked}");
    assert!(!asked.contains("<read-files>"), "{asked}");
    let summary2 = format!(
        "{SUMMARY_2}\n\n<read-files>\nnotes.txt\n</read-files>\n\n<modified-files>\napp.rs\n</modified-files>"
    );
    assert_eq!(
        texts(&mock.requests()[9].body),
        vec![
            vec![summary_block_of(&summary2), fourth.clone()],
            vec!["fourth answer".to_string()],
            vec!["fifth question".to_string()],
        ]
    );
    let entries = compaction_entries(&sandbox, &session);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["summary"], summary2.as_str());
    assert_eq!(entries[1]["read_files"], json!(["notes.txt"]));
    assert_eq!(entries[1]["modified_files"], json!(["app.rs"]));
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
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

#[tokio::test]
async fn a_configured_cache_ttl_decides_when_old_results_are_trimmed() {
    let ago = |seconds: u64| {
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(seconds);
        humantime::format_rfc3339_millis(at).to_string()
    };
    // Ten minutes idle is past the default 5 minutes but inside an hour's
    // cache; two minutes idle is inside the default but past one minute.
    for (ttl, idle, expect_trimmed) in [("1h", 600, false), ("1m", 120, true)] {
        let sandbox = Sandbox::new();
        stored_session(&sandbox, "sess_ttl", &ago(idle));
        let mock = MockModel::start().await;
        mock.push(Reply::sse(anthropic_text("ok", 3_100)));
        let mut acp = spawn_with(
            &sandbox,
            &mock,
            &format!("title_model = \"none\"\ncache_ttl = \"{ttl}\"\n"),
        );
        acp.initialize().await;
        acp.call(
            "session/load",
            json!({"sessionId": "sess_ttl", "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
        acp.call("session/prompt", prompt("sess_ttl", "next")).await;
        let request = &mock.requests()[0];
        let result = request.body["messages"][2]["content"][0]["content"][0]["text"]
            .as_str()
            .unwrap();
        assert_eq!(
            result.contains("were trimmed"),
            expect_trimmed,
            "cache_ttl {ttl}, idle {idle}s"
        );
        assert_eq!(result.chars().count() == 10_000, !expect_trimmed);
        assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    }
}
