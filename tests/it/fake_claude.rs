//! The scripted fake `claude` (tests/fake_claude/claude.rs) on its own,
//! driven over its stdio the way pincer drives the real CLI: the tests of
//! the Claude Code runtime trust it to speak the recorded protocol, so its
//! lines are checked here against the shapes in the recordings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

struct Fake {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
}

fn write_script(dir: &tempfile::TempDir, script: Value) {
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
}

fn command(dir: &tempfile::TempDir, args: &[&str]) -> Command {
    let mut command = Command::new(support::fake_claude_bin());
    command
        .args(args)
        .current_dir(dir.path())
        .env("FAKE_CLAUDE_SCRIPT", dir.path().join("script.json"))
        .env("FAKE_CLAUDE_LOG", dir.path().join("log.jsonl"))
        .env_remove("ANTHROPIC_API_KEY");
    command
}

fn spawn(dir: &tempfile::TempDir, args: &[&str]) -> Fake {
    let mut child = command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if tx.send(value).is_err() {
                break;
            }
        }
    });
    let stdin = child.stdin.take();
    Fake {
        child,
        stdin,
        lines,
    }
}

impl Fake {
    fn send(&mut self, value: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{value}").unwrap();
        stdin.flush().unwrap();
    }

    fn next(&self) -> Value {
        self.lines
            .recv_timeout(Duration::from_secs(10))
            .expect("a line from the fake")
    }

    /// Sends a user line and answers control requests with `answer` until
    /// the turn's `result`; returns every line the fake wrote, scrubbed.
    fn turn(&mut self, text: &str, mut answer: impl FnMut(&Value) -> Value) -> Vec<Value> {
        self.send(json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]}}));
        let mut seen = Vec::new();
        loop {
            let line = self.next();
            if line["type"] == "control_request" {
                let response = answer(&line["request"]);
                let id = line["request_id"].clone();
                self.send(json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": response}}));
            }
            seen.push(scrub(line.clone()));
            if line["type"] == "result" {
                return seen;
            }
        }
    }

    fn finish(mut self) -> i32 {
        self.stdin.take();
        self.child.wait().unwrap().code().unwrap()
    }
}

/// pincer's in-process MCP server, answering through `mcp_message`.
fn mcp(request: &Value) -> Value {
    let message = &request["message"];
    let result = match message["method"].as_str().unwrap() {
        "initialize" => {
            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "pincer", "version": "0"}})
        }
        "tools/list" => json!({"tools": [{"name": "read", "inputSchema": {"type": "object"}}]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "file b"}]}),
        _ => json!({}),
    };
    json!({"mcp_response": {"jsonrpc": "2.0", "id": message["id"], "result": result}})
}

/// Ids, times and durations differ per run; everything else is compared.
fn scrub(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| match k.as_str() {
                    "uuid" | "request_id" | "timestamp" | "duration_ms" | "duration_api_ms"
                    | "ttft_ms" => (k, json!("*")),
                    _ => (k, scrub(v)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(scrub).collect()),
        other => other,
    }
}

fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            [&l["subtype"], &l["event"]["type"], &l["request"]["subtype"]]
                .iter()
                .filter_map(|v| v.as_str())
                .fold(l["type"].as_str().unwrap().to_owned(), |a, b| {
                    format!("{a}/{b}")
                })
        })
        .collect()
}

fn log(dir: &tempfile::TempDir) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.path().join("log.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const ARGS: &[&str] = &[
    "-p",
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "--tools",
    "",
    "--model",
    "claude-sonnet-4-5",
    "--session-id=sess-1",
];

/// pincer's `initialize`: the fake asks the MCP server's `initialize` first
/// (as the real CLI does) and then answers.
fn start(fake: &mut Fake) {
    fake.send(json!({"type": "control_request", "request_id": "req_1", "request": {"subtype": "initialize", "hooks": null}}));
    let request = fake.next();
    assert_eq!(
        scrub(request["request"]["message"].clone()),
        json!({"method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "claude-code", "title": "Claude Code", "version": "2.1.197", "description": "Anthropic's agentic coding tool", "websiteUrl": "https://claude.com/claude-code"}}, "jsonrpc": "2.0", "id": 0})
    );
    let id = request["request_id"].clone();
    fake.send(json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": mcp(&request["request"])}}));
    let answer = fake.next();
    assert_eq!(
        (
            answer["type"].clone(),
            answer["response"]["subtype"].clone(),
            answer["response"]["request_id"].clone()
        ),
        (json!("control_response"), json!("success"), json!("req_1"))
    );
}

#[test]
fn one_turn_streams_init_text_and_result() {
    let dir = tempfile::tempdir().unwrap();
    write_script(
        &dir,
        json!({"processes": [{"turns": [[{"text": "Hello", "usage": {"input_tokens": 10, "output_tokens": 5}}]]}]}),
    );
    let mut fake = spawn(&dir, ARGS);
    start(&mut fake);
    let lines = fake.turn("hi", mcp);
    assert_eq!(
        kinds(&lines),
        [
            "control_request/mcp_message",
            "control_request/mcp_message",
            "system/init",
            "system/status",
            "stream_event/message_start",
            "stream_event/content_block_start",
            "stream_event/content_block_delta",
            "stream_event/content_block_delta",
            "assistant",
            "stream_event/content_block_stop",
            "stream_event/message_delta",
            "stream_event/message_stop",
            "result/success"
        ]
    );
    let cwd = dir.path().display().to_string();
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        lines[2],
        json!({"type": "system", "subtype": "init", "cwd": cwd, "session_id": "sess-1", "tools": ["mcp__pincer__read"],
        "mcp_servers": [{"name": "pincer", "status": "connected"}], "model": "claude-sonnet-4-5", "permissionMode": "default",
        "slash_commands": ["clear", "compact", "context", "usage"], "apiKeySource": "none", "claude_code_version": "2.1.197", "output_style": "default",
        "agents": ["claude"], "skills": [], "plugins": [], "analytics_disabled": false, "product_feedback_disabled": false, "uuid": "*",
        "memory_paths": {"auto": format!("{home}/.claude/projects/{}/memory/", cwd.replace('/', "-"))}, "fast_mode_state": "off"})
    );
    let deltas: Vec<&Value> = lines[6..8]
        .iter()
        .map(|l| &l["event"]["delta"]["text"])
        .collect();
    assert_eq!(deltas, [&json!("He"), &json!("llo")]);
    assert_eq!(
        lines[8],
        json!({"type": "assistant", "message": {"id": "msg_fake_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello"}], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1},
        "context_management": null}, "parent_tool_use_id": null, "session_id": "sess-1", "uuid": "*"})
    );
    assert_eq!(
        lines[10]["event"],
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}})
    );
    let mut result = lines[12].clone();
    assert_eq!(result["usage"]["input_tokens"], 10);
    result.as_object_mut().unwrap().remove("usage");
    assert_eq!(
        result,
        json!({"type": "result", "subtype": "success", "is_error": false, "api_error_status": null, "duration_ms": "*", "duration_api_ms": "*",
        "num_turns": 1, "result": "Hello", "stop_reason": "end_turn", "session_id": "sess-1", "total_cost_usd": 0.000105,
        "modelUsage": {"claude-sonnet-4-5": {"inputTokens": 10, "outputTokens": 5, "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0, "webSearchRequests": 0,
            "costUSD": 0.000105, "contextWindow": 200000, "maxOutputTokens": 64000}}, "permission_denials": [], "terminal_reason": "completed", "fast_mode_state": "off", "uuid": "*"})
    );
    assert_eq!(fake.finish(), 0);
    let log = log(&dir);
    assert_eq!(log[0]["argv"], json!(ARGS));
    assert_eq!(
        log.iter().find(|e| e.get("tools").is_some()).unwrap()["tools"],
        json!({"tools": [{"name": "read", "inputSchema": {"type": "object"}}]})
    );
    assert_eq!(log.last().unwrap(), &json!({"exit": 0}));
}

#[test]
fn tool_use_asks_permission_and_calls_pincer_with_the_tool_use_id() {
    let dir = tempfile::tempdir().unwrap();
    let tool_use = json!({"id": "toolu_a", "name": "read", "input": {"path": "a.txt"}});
    write_script(
        &dir,
        json!({"processes": [{"turns": [[{"tool_uses": [tool_use]}, {"text": "done"}]]}]}),
    );
    let mut fake = spawn(&dir, ARGS);
    start(&mut fake);
    let mut asked = Vec::new();
    let lines = fake.turn("read a", |request| {
        asked.push(request.clone());
        match request["subtype"].as_str().unwrap() {
            "can_use_tool" => json!({"behavior": "allow", "updatedInput": {"path": "b.txt"}}),
            _ => mcp(request),
        }
    });
    assert_eq!(
        asked[2],
        json!({"subtype": "can_use_tool", "tool_name": "mcp__pincer__read", "display_name": "Read", "input": {"path": "a.txt"},
        "permission_suggestions": [{"type": "addRules", "rules": [{"toolName": "mcp__pincer__read"}], "behavior": "allow", "destination": "localSettings"}],
        "tool_use_id": "toolu_a"})
    );
    assert_eq!(
        asked[3],
        json!({"subtype": "mcp_message", "server_name": "pincer", "message": {"method": "tools/call",
        "params": {"name": "read", "arguments": {"path": "b.txt"}, "_meta": {"claudecode/toolUseId": "toolu_a", "progressToken": 2}}, "jsonrpc": "2.0", "id": 2}})
    );
    // As recorded: the permission request comes before the block's stop.
    let at = |kind: &str| kinds(&lines).iter().position(|k| k == kind).unwrap();
    assert!(at("control_request/can_use_tool") < at("stream_event/content_block_stop"));
    let result = lines.iter().find(|l| l["type"] == "user").unwrap();
    assert_eq!(
        result,
        &json!({"type": "user", "message": {"role": "user", "content": [{"tool_use_id": "toolu_a", "type": "tool_result",
        "content": [{"type": "text", "text": "file b"}]}]}, "parent_tool_use_id": null, "session_id": "sess-1", "uuid": "*", "timestamp": "*",
        "tool_use_result": [{"type": "text", "text": "file b"}]})
    );
    assert_eq!(lines.last().unwrap()["num_turns"], 2);
    assert_eq!(fake.finish(), 0);
}

#[test]
fn resume_of_an_unknown_session_prints_only_an_error_result() {
    let dir = tempfile::tempdir().unwrap();
    write_script(&dir, json!({"processes": [{"no_conversation": true}]}));
    let output = command(&dir, &["-p", "--resume=stale-id"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "No conversation found with session ID: stale-id\n"
    );
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| scrub(serde_json::from_str(l).unwrap()))
        .collect();
    assert_eq!(
        lines,
        [
            json!({"type": "result", "subtype": "error_during_execution", "duration_ms": "*", "duration_api_ms": "*", "is_error": true,
        "num_turns": 0, "stop_reason": null, "session_id": "stale-id", "total_cost_usd": 0,
        "usage": {"input_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 0,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0}, "inference_geo": "", "iterations": [], "speed": "standard"},
        "modelUsage": {}, "permission_denials": [], "uuid": "*", "errors": ["No conversation found with session ID: stale-id"]})
        ]
    );
}

#[test]
fn each_spawn_takes_the_next_process_and_auth_status_takes_none() {
    let dir = tempfile::tempdir().unwrap();
    let process = |text: &str| json!({"turns": [[{"text": text}]]});
    write_script(
        &dir,
        json!({"logged_in": false, "processes": [process("first process"), process("second process")]}),
    );
    let mut answers = Vec::new();
    for _ in 0..2 {
        let auth = command(&dir, &["auth", "status"]).output().unwrap();
        assert_eq!((auth.status.code(), String::from_utf8(auth.stdout).unwrap()),
            (Some(1), "{\"loggedIn\": false, \"authMethod\": \"none\", \"apiProvider\": \"firstParty\"}\n".to_owned()));
        let mut fake = spawn(&dir, ARGS);
        start(&mut fake);
        answers.push(fake.turn("hi", mcp).last().unwrap()["result"].clone());
        assert_eq!(fake.finish(), 0);
    }
    assert_eq!(answers, [json!("first process"), json!("second process")]);
}
