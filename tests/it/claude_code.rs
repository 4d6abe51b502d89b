//! End to end: turns run through Claude Code (the scripted fake `claude`
//! of tests/fake_claude, which speaks the recorded stream-json and control
//! protocol) behind `pincer acp`, with failover to pincer's own loop
//! against the mock model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::{prompt, selected};

/// A sandbox whose config runs `anthropic`'s Claude models through the
/// fake CLI, with the mock model behind pincer's own loop.
struct Harness {
    sandbox: Sandbox,
    mock: MockModel,
}

impl Harness {
    async fn new(script: Value) -> Self {
        Self::with_config(script, |fake| {
            format!(
                "model = \"anthropic/claude-sonnet-4-5\"\n[providers.anthropic]\nruntime = \"claude-code\"\nclaude_path = \"{fake}\"\n"
            )
        })
        .await
    }

    async fn with_config(script: Value, config: impl Fn(&str) -> String) -> Self {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let fake = support::fake_claude_bin();
        std::fs::write(
            sandbox.home().join("config.toml"),
            config(fake.to_str().unwrap()),
        )
        .unwrap();
        let harness = Self { sandbox, mock };
        harness.script(script);
        harness
    }

    fn script(&self, script: Value) {
        std::fs::write(self.path("script.json"), script.to_string()).unwrap();
    }

    fn path(&self, name: &str) -> PathBuf {
        self.sandbox.dir.path().join(name)
    }

    fn acp(&self) -> Acp {
        self.acp_with(|_| {})
    }

    fn acp_with(&self, extra: impl FnOnce(&mut tokio::process::Command)) -> Acp {
        let mut cmd = self.sandbox.command(&["acp"]);
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", self.mock.anthropic_url())
            .env("FAKE_CLAUDE_SCRIPT", self.path("script.json"))
            .env("FAKE_CLAUDE_LOG", self.path("log.jsonl"));
        extra(&mut cmd);
        Acp::spawn(cmd)
    }

    /// What the fake CLI logged: argv, stdin lines, tool results, exits.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The argv of each conversation the fake was started for.
    fn spawns(&self) -> Vec<Vec<String>> {
        self.log()
            .iter()
            .filter_map(|e| e.get("argv"))
            .map(|argv| {
                argv.as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|argv| argv.iter().any(|a| a == "-p"))
            .collect()
    }

    /// The user lines the fake received.
    fn user_lines(&self) -> Vec<Value> {
        self.log()
            .iter()
            .filter_map(|e| e.get("stdin"))
            .filter(|line| line["type"] == "user")
            .cloned()
            .collect()
    }

    /// The session's transcript entries (after the header).
    fn transcript(&self, session: &str) -> Vec<Value> {
        let dir = self.sandbox.home().join("sessions");
        for cwd in std::fs::read_dir(&dir).unwrap() {
            let path = cwd.unwrap().path().join(format!("{session}.jsonl"));
            if path.exists() {
                return std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .skip(1)
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect();
            }
        }
        panic!("no transcript for {session}")
    }

    async fn session(&self, acp: &mut Acp) -> String {
        acp.initialize().await;
        acp.new_session(&self.sandbox.work()).await
    }
}

/// The value of `--flag=value` or `--flag value` in argv.
fn flag(argv: &[String], name: &str) -> Option<String> {
    let eq = format!("{name}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if let Some(value) = a.strip_prefix(&eq) {
            Some(value.to_string())
        } else if a == name {
            argv.get(i + 1).cloned()
        } else {
            None
        }
    })
}

/// Transcript entries of `kind` with their main field.
fn entries<'a>(transcript: &'a [Value], kind: &str) -> Vec<&'a Value> {
    transcript.iter().filter(|e| e["type"] == kind).collect()
}

/// The text of each user block of a user line.
fn texts(line: &Value) -> Vec<String> {
    line["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"].as_str().unwrap_or("<image>").to_string())
        .collect()
}

/// `(sessionUpdate, text or toolCallId/status)` of each update, chunks
/// joined, for comparing what the editor saw.
fn shape(updates: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for u in updates {
        let kind = u["sessionUpdate"].as_str().unwrap().to_string();
        let detail = match kind.as_str() {
            "agent_message_chunk" | "agent_thought_chunk" => {
                u["content"]["text"].as_str().unwrap().to_string()
            }
            "tool_call" => format!("{} {}", u["toolCallId"].as_str().unwrap(), u["status"]),
            "tool_call_update" => format!(
                "{} {}",
                u["toolCallId"].as_str().unwrap(),
                u["status"].as_str().unwrap_or("-")
            ),
            "usage_update" => String::new(),
            _ => String::new(),
        };
        if let Some(last) = out.last_mut()
            && last.0 == kind
            && kind.ends_with("_chunk")
        {
            last.1.push_str(&detail);
            continue;
        }
        out.push((kind, detail));
    }
    out.retain(|(kind, _)| kind != "available_commands_update" && kind != "session_info_update");
    out
}

#[tokio::test]
async fn a_text_turn_streams_like_the_native_loop_and_records_the_claude_session() {
    let h = Harness::new(json!({"processes": [{"turns": [
        [{"thinking": "Let me think.", "text": "Hello from Claude Code", "model": "claude-opus-4-8"}]
    ]}]}))
    .await;
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        shape(&updates_of(&before)),
        vec![
            (
                "agent_thought_chunk".to_string(),
                "Let me think.".to_string()
            ),
            (
                "agent_message_chunk".to_string(),
                "Hello from Claude Code".to_string()
            ),
            ("usage_update".to_string(), String::new()),
        ]
    );
    // The CLI runs as the issue says, with none of its own tools.
    let spawns = h.spawns();
    assert_eq!(spawns.len(), 1);
    let argv = &spawns[0];
    for expected in [
        "-p",
        "--verbose",
        "--include-partial-messages",
        "--strict-mcp-config",
    ] {
        assert!(argv.iter().any(|a| a == expected), "{expected} in {argv:?}");
    }
    assert_eq!(flag(argv, "--input-format").as_deref(), Some("stream-json"));
    assert_eq!(
        flag(argv, "--output-format").as_deref(),
        Some("stream-json")
    );
    assert_eq!(flag(argv, "--tools").as_deref(), Some(""));
    assert_eq!(
        flag(argv, "--permission-prompt-tool").as_deref(),
        Some("stdio")
    );
    assert_eq!(flag(argv, "--model").as_deref(), Some("claude-sonnet-4-5"));
    assert!(
        flag(argv, "--disallowedTools")
            .unwrap()
            .split(',')
            .any(|t| t == "Bash")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&flag(argv, "--mcp-config").unwrap()).unwrap(),
        json!({"mcpServers": {"pincer": {"type": "sdk", "name": "pincer"}}})
    );
    let claude_session = flag(argv, "--session-id").unwrap();
    // pincer's own variables (its home, a gateway token) stay with pincer.
    let log = h.log();
    let env = &log.iter().find(|e| e.get("argv").is_some()).unwrap()["env"];
    assert_eq!(env["PINCER"], json!([]), "{env}");
    assert_eq!(env["ANTHROPIC_API_KEY"], true, "the user's own environment");
    assert!(flag(argv, "--resume").is_none());
    // pincer's tools were listed to it over the tunnelled MCP server.
    let tools: Vec<String> = h.log().iter().find_map(|e| e.get("tools")).unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    for tool in ["read", "write", "edit", "bash", "grep", "find", "ls"] {
        assert!(tools.contains(&tool.to_string()), "{tool} in {tools:?}");
    }
    // The prompt went in with the time line the history keeps.
    // The transcript: the prompt, the answer with the real model, and the
    // runtime with the Claude Code session to resume.
    let transcript = h.transcript(&session);
    let messages = entries(&transcript, "message");
    let lines = h.user_lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(
        texts(&lines[0]),
        vec![
            "hi".to_string(),
            messages[0]["time"].as_str().unwrap().to_string()
        ]
    );
    assert_eq!(messages.len(), 2);
    let answer = &messages[1]["message"];
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["provider"], "anthropic");
    assert_eq!(answer["api"], "anthropic-messages");
    assert_eq!(answer["model"], "claude-opus-4-8");
    assert_eq!(
        answer["content"],
        json!([
            {"type": "thinking", "thinking": "Let me think.", "signature": answer["content"][0]["signature"]},
            {"type": "text", "text": "Hello from Claude Code"}
        ])
    );
    let runtime = entries(&transcript, "runtime");
    assert_eq!(runtime.len(), 1);
    assert_eq!(runtime[0]["runtime"], "claude-code");
    assert_eq!(runtime[0]["resume"], json!(claude_session));
    assert!(
        h.mock.requests().is_empty(),
        "pincer's own loop was not used"
    );
    acp.assert_stdout_was_json_rpc();
}

/// A recorded CLI output (fixtures/claude-code/NAME.jsonl) as script
/// steps: its lines, and its `result` ending the turn.
fn recorded(name: &str) -> Vec<Value> {
    support::mock_model::fixture(&format!("claude-code/{name}.jsonl"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let line: Value = serde_json::from_str(l).unwrap();
            if line["type"] == "result" {
                json!({"result": line})
            } else {
                json!({"line": line})
            }
        })
        .collect()
}

/// The tool results of the transcript: (call id, is_error, text).
fn tool_results(transcript: &[Value]) -> Vec<(String, bool, String)> {
    entries(transcript, "tool_result")
        .iter()
        .map(|e| {
            let m = &e["message"];
            (
                m["toolCallId"]
                    .as_str()
                    .or(m["tool_call_id"].as_str())
                    .unwrap()
                    .to_string(),
                m["isError"]
                    .as_bool()
                    .or(m["is_error"].as_bool())
                    .unwrap_or(false),
                m["content"][0]["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// What the fake CLI got back for each tool call it sent: (tool_use id,
/// isError, text).
fn call_results(h: &Harness) -> Vec<(String, bool, String)> {
    h.log()
        .iter()
        .filter_map(|e| e.get("call_result"))
        .map(|r| {
            // The control response's payload, whichever level the fake
            // logged it at.
            let response = &r["response"];
            let mcp = [
                &response["mcp_response"],
                &response["response"]["mcp_response"],
                &response["response"]["response"]["mcp_response"],
            ]
            .into_iter()
            .find(|m| !m.is_null())
            .unwrap_or_else(|| panic!("no mcp_response in {r}"));
            let result = &mcp["result"];
            (
                r["tool_use_id"].as_str().unwrap_or("<none>").to_string(),
                result["isError"].as_bool().unwrap_or(false),
                result["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn tool_calls_pair_by_tool_use_id_and_go_through_pincer_s_permission_question() {
    let h = Harness::new(json!({"processes": [{"turns": [[
        // Two calls of one tool, run in the other order than asked.
        {"tool_uses": [
            {"id": "toolu_a", "name": "read", "input": {"path": "a.txt"}},
            {"id": "toolu_b", "name": "read", "input": {"path": "b.txt"}}
        ], "calls": [{"id": "toolu_b"}, {"id": "toolu_a"}]},
        {"tool_uses": [{"id": "toolu_w", "name": "write", "input": {"path": "c.txt", "content": "written\n"}}]},
        {"tool_uses": [{"id": "toolu_x", "name": "write", "input": {"path": "d.txt", "content": "refused\n"}}]},
        {"text": "All done."}
    ]]}]}))
    .await;
    h.sandbox.write("a.txt", "alpha\n");
    h.sandbox.write("b.txt", "beta\n");
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let mut asked = Vec::new();
    let (response, before) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            let call = params["toolCall"]["toolCallId"]
                .as_str()
                .unwrap()
                .to_string();
            asked.push(call.clone());
            selected(if call == "toolu_w" {
                "allow_once"
            } else {
                "reject_once"
            })
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The editor was asked about the writes, by the model's call ids.
    assert_eq!(asked, vec!["toolu_w".to_string(), "toolu_x".to_string()]);
    assert_eq!(
        std::fs::read_to_string(h.sandbox.work().join("c.txt")).unwrap(),
        "written\n"
    );
    assert!(!h.sandbox.work().join("d.txt").exists());
    // Each result went back to the call that asked for it.
    let results = call_results(&h);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    assert!(by_id("toolu_a").2.contains("alpha"), "{results:?}");
    assert!(by_id("toolu_b").2.contains("beta"), "{results:?}");
    assert!(!by_id("toolu_w").1);
    assert!(by_id("toolu_x").1, "a declined call is an error result");
    assert!(by_id("toolu_x").2.contains("declined"), "{results:?}");
    // Every call started and ended in the editor, under its own id.
    let tool_updates: Vec<(String, String)> = shape(&updates_of(&before))
        .into_iter()
        .filter(|(kind, _)| kind.starts_with("tool_call"))
        .collect();
    for call in ["toolu_a", "toolu_b", "toolu_w", "toolu_x"] {
        let own: Vec<&String> = tool_updates
            .iter()
            .filter(|(_, d)| d.starts_with(call))
            .map(|(_, d)| d)
            .collect();
        assert_eq!(own.first().unwrap(), &&format!("{call} \"in_progress\""));
        let last = own.last().unwrap();
        let end = if call == "toolu_x" {
            "failed"
        } else {
            "completed"
        };
        assert_eq!(last, &&format!("{call} {end}"), "{tool_updates:?}");
    }
    // The history mirrors it: each result after its call, by id, with
    // the failed one an error.
    let transcript = h.transcript(&session);
    let results = tool_results(&transcript);
    let ids: Vec<(&str, bool)> = results.iter().map(|r| (r.0.as_str(), r.1)).collect();
    assert_eq!(
        ids,
        vec![
            ("toolu_b", false),
            ("toolu_a", false),
            ("toolu_w", false),
            ("toolu_x", true)
        ]
    );
    let calls: Vec<Vec<String>> = entries(&transcript, "message")
        .iter()
        .filter(|m| m["message"]["role"] == "assistant")
        .map(|m| {
            m["message"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "toolCall" || b["type"] == "tool_call")
                .map(|b| {
                    format!(
                        "{} {}",
                        b["id"].as_str().unwrap(),
                        b["name"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            vec!["toolu_a read".to_string(), "toolu_b read".to_string()],
            vec!["toolu_w write".to_string()],
            vec!["toolu_x write".to_string()],
            vec![]
        ]
    );
}

#[tokio::test]
async fn a_call_without_its_tool_use_id_is_refused_with_start_end_and_an_error_and_the_history_stays_valid()
 {
    let h = Harness::new(json!({"processes": [
        {"turns": [[
            {"tool_uses": [{"id": "toolu_m", "name": "read", "input": {"path": "a.txt"}}],
             "calls": [{"id": "toolu_m", "meta_id": null}]},
            {"tool_uses": [{"id": "toolu_n", "name": "read", "input": {"path": "a.txt"}}],
             "calls": [{"id": "toolu_n", "meta_id": "toolu_never_asked"}]},
            {"tool_uses": [{"id": "toolu_v", "name": "read", "input": {}}],
             "calls": [{"id": "toolu_v", "claude_answers": {"content": "InputValidationError: path is required", "is_error": true}}]},
            {"text": "Could not read it."}
        ]]},
        {"exit_at_start": {"code": 1, "stderr": "boom"}}
    ]}))
    .await;
    h.sandbox.write("a.txt", "alpha\n");
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, "read a")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The CLI got error results and ran nothing of pincer's for them.
    let results = call_results(&h);
    assert_eq!(results.len(), 2, "{results:?}");
    for (_, is_error, text) in &results {
        assert!(*is_error);
        assert!(text.starts_with("pincer did not run this call"), "{text}");
    }
    // Each unpaired call still started and ended (failed) in the editor,
    // and so did each tool_use Claude Code answered itself.
    let updates = updates_of(&before);
    let starts: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|u| u["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(starts.len(), 5, "{starts:?}");
    assert_eq!(
        starts
            .iter()
            .filter(|id| id.starts_with("unpaired-"))
            .count(),
        2
    );
    for id in ["toolu_m", "toolu_n", "toolu_v"] {
        assert!(starts.contains(&id), "{starts:?}");
    }
    for start in &starts {
        let end = updates
            .iter()
            .rfind(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == *start)
            .unwrap();
        assert_eq!(end["status"], "failed", "{start}");
    }
    let transcript = h.transcript(&session);
    let mirrored: Vec<(String, bool)> = tool_results(&transcript)
        .into_iter()
        .filter(|r| r.0.starts_with("toolu_"))
        .map(|r| (r.0, r.1))
        .collect();
    assert_eq!(
        mirrored,
        vec![
            ("toolu_m".to_string(), true),
            ("toolu_n".to_string(), true),
            ("toolu_v".to_string(), true)
        ]
    );
    drop(acp);

    // A later turn on pincer's own loop (the CLI fails at once) sends the
    // reloaded history, and every result in it has its call.
    h.mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = h.acp();
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": h.sandbox.work(), "mcpServers": []}),
        )
        .await;
    acp.until_response(id).await;
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(h.mock.requests().len(), 1);
    assert_eq!(h.mock.violations(), Vec::<String>::new());
    let sent = &h.mock.requests()[0].body["messages"];
    let results: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["tool_use_id"].as_str().unwrap().to_string().leak() as &str)
        .collect();
    assert_eq!(results, vec!["toolu_m", "toolu_n", "toolu_v"]);
}

/// Runs one prompt in a new session; returns the response, the updates
/// and the session id.
async fn one_prompt(h: &Harness, text: &str) -> (Value, Vec<Value>, String) {
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, text)).await;
    let (response, before) = acp.until_response(id).await;
    acp.assert_stdout_was_json_rpc();
    (response, updates_of(&before), session)
}

/// The text the editor was shown, thoughts and notices included.
fn shown(updates: &[Value]) -> String {
    updates
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// Each failure before Claude Code showed anything: pincer's own loop
/// answers the same turn (against the mock), and says why.
async fn falls_back(script: Value, claude_path: Option<&str>, why: &str) {
    let h = match claude_path {
        None => Harness::new(script).await,
        Some(path) => {
            let path = path.to_string();
            Harness::with_config(script, move |_| {
                format!(
                    "model = \"anthropic/claude-sonnet-4-5\"\n[providers.anthropic]\nruntime = \"claude-code\"\nclaude_path = \"{path}\"\n"
                )
            })
            .await
        }
    };
    h.mock.push(Reply::fixture("anthropic/text.sse"));
    let (response, updates, session) = one_prompt(&h, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = shown(&updates);
    assert!(
        text.contains("Claude Code could not answer") && text.contains(why),
        "{why}: {text}"
    );
    assert!(
        text.contains("pincer's own loop answers this turn with anthropic/claude-sonnet-4-5"),
        "{text}"
    );
    assert!(text.contains("Hello from the"), "{text}");
    // The same turn: one prompt, once, to the mock.
    assert_eq!(h.mock.requests().len(), 1);
    let sent = h.mock.requests()[0].body["messages"].clone();
    assert_eq!(sent.as_array().unwrap().len(), 1);
    assert_eq!(sent[0]["content"][0]["text"], "hello");
    let transcript = h.transcript(&session);
    let runtimes: Vec<&Value> = entries(&transcript, "runtime");
    assert_eq!(runtimes.len(), 1);
    assert_eq!(runtimes[0]["runtime"], "native");
    let answer = entries(&transcript, "message")
        .into_iter()
        .rfind(|m| m["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(answer["message"]["model"], "claude-sonnet-4-5");
}

#[tokio::test]
async fn a_missing_cli_fails_over_to_the_native_loop() {
    falls_back(
        json!({"processes": []}),
        Some("/nonexistent/bin/claude"),
        "`/nonexistent/bin/claude` was not found",
    )
    .await;
}

#[tokio::test]
async fn a_cli_that_is_not_logged_in_fails_over_before_it_is_started() {
    let script = json!({"logged_in": false, "processes": [{"turns": [[{"text": "never"}]]}]});
    falls_back(script, None, "it is not logged in").await;
}

#[tokio::test]
async fn a_login_the_cli_rejects_mid_turn_fails_over() {
    let script = json!({"processes": [{"turns": [recorded("not_logged_in")]}]});
    falls_back(script, None, "Not logged in").await;
}

#[tokio::test]
async fn a_rate_limited_cli_fails_over() {
    let script = json!({"processes": [{"turns": [recorded("rate_limit")]}]});
    falls_back(script, None, "Request rejected (429)").await;
}

#[tokio::test]
async fn a_cli_that_dies_before_any_output_fails_over() {
    let script =
        json!({"processes": [{"exit_at_start": {"code": 2, "stderr": "fatal: segfault-ish\n"}}]});
    falls_back(
        script,
        None,
        "it exited with code 2 before the turn ended: fatal: segfault-ish",
    )
    .await;
}

#[tokio::test]
async fn a_failure_after_output_is_reported_not_retried_elsewhere() {
    let h = Harness::new(json!({"processes": [{"turns": [[
        {"text": "Partial answer"},
        {"result": {"type": "result", "subtype": "success", "is_error": true, "api_error_status": 500,
            "result": "API Error: 500 Internal server error", "session_id": "$SESSION", "num_turns": 1}}
    ]]}]}))
    .await;
    let (response, updates, _) = one_prompt(&h, "hello").await;
    let message = response["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
        + response["error"]["data"].to_string().as_str();
    assert!(message.contains("500"), "{response}");
    assert!(shown(&updates).contains("Partial answer"));
    assert!(
        h.mock.requests().is_empty(),
        "no second answer from another loop"
    );
}

/// Loads `session` in a new `pincer acp` and prompts it once.
async fn load_and_prompt(h: &Harness, session: &str, text: &str) -> (Value, Vec<Value>) {
    let mut acp = h.acp();
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": h.sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (loaded, _) = acp.until_response(id).await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let id = acp.send("session/prompt", prompt(session, text)).await;
    let (response, before) = acp.until_response(id).await;
    (response, updates_of(&before))
}

#[tokio::test]
async fn a_reloaded_session_resumes_its_claude_code_session() {
    let h = Harness::new(json!({"processes": [
        {"turns": [[{"text": "First answer."}]]},
        {"turns": [[{"text": "Second answer."}]]}
    ]}))
    .await;
    let (_, _, session) = one_prompt(&h, "one").await;
    let (response, updates) = load_and_prompt(&h, &session, "two").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(shown(&updates).contains("Second answer."));
    let spawns = h.spawns();
    assert_eq!(spawns.len(), 2);
    let first = flag(&spawns[0], "--session-id").unwrap();
    assert_eq!(flag(&spawns[1], "--resume"), Some(first.clone()));
    assert_eq!(flag(&spawns[1], "--session-id"), None);
    // The resumed session saw the first turn: only the new prompt goes in.
    let lines = h.user_lines();
    assert_eq!(texts(&lines[1])[0], "two");
    assert_eq!(texts(&lines[1]).len(), 2);
    let transcript = h.transcript(&session);
    let resumes: Vec<&Value> = entries(&transcript, "runtime")
        .iter()
        .map(|r| &r["resume"])
        .collect();
    assert_eq!(resumes, vec![&json!(first), &json!(first)]);
}

#[tokio::test]
async fn a_stale_resume_id_is_cleared_and_the_turn_retried_once_in_a_new_claude_session() {
    let h = Harness::new(json!({"processes": [
        {"turns": [[{"text": "First answer."}]]},
        {"no_conversation": true},
        {"turns": [[{"text": "Fresh answer."}]]}
    ]}))
    .await;
    let (_, _, session) = one_prompt(&h, "one").await;
    let (response, updates) = load_and_prompt(&h, &session, "two").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = shown(&updates);
    assert!(text.contains("Fresh answer."), "{text}");
    assert!(text.contains("no longer has its session"), "{text}");
    let spawns = h.spawns();
    assert_eq!(spawns.len(), 3);
    let stale = flag(&spawns[0], "--session-id").unwrap();
    assert_eq!(flag(&spawns[1], "--resume"), Some(stale.clone()));
    let fresh = flag(&spawns[2], "--session-id").unwrap();
    assert_ne!(fresh, stale);
    assert_eq!(flag(&spawns[2], "--resume"), None);
    // The new Claude Code session gets the conversation so far first.
    let lines = h.user_lines();
    let sent = texts(lines.last().unwrap());
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[0].starts_with("<conversation-so-far>"), "{sent:?}");
    assert!(
        sent[0].contains("[user]\none") && sent[0].contains("[assistant]\nFirst answer."),
        "{}",
        sent[0]
    );
    assert_eq!(sent[1], "two");
    let transcript = h.transcript(&session);
    let last = entries(&transcript, "runtime").pop().unwrap().clone();
    assert_eq!(
        last,
        json!({"type": "runtime", "runtime": "claude-code", "resume": fresh, "id": last["id"], "parentId": last["parentId"], "timestamp": last["timestamp"]})
    );
    assert!(h.mock.requests().is_empty());
}

#[tokio::test]
async fn a_turn_the_native_loop_answered_reaches_the_claude_session_with_the_next_prompt() {
    let h = Harness::new(json!({"processes": [
        {"turns": [
            [{"text": "From Claude Code."}],
            [{"exit": {"code": 1, "stderr": "API Error: overloaded"}}]
        ]},
        {"turns": [[{"text": "Back on Claude Code."}]]}
    ]}))
    .await;
    h.mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    for text in ["one", "two", "three"] {
        let id = acp.send("session/prompt", prompt(&session, text)).await;
        let (response, _) = acp.until_response(id).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    assert_eq!(h.mock.requests().len(), 1, "the second turn ran natively");
    let spawns = h.spawns();
    assert_eq!(spawns.len(), 2);
    let first = flag(&spawns[0], "--session-id").unwrap();
    assert_eq!(flag(&spawns[1], "--resume"), Some(first));
    let sent = texts(h.user_lines().last().unwrap());
    assert!(sent[0].starts_with("<conversation-so-far>"), "{sent:?}");
    assert!(
        sent[0].contains("[user]\ntwo") && sent[0].contains("Hello from the"),
        "{}",
        sent[0]
    );
    assert!(!sent[0].contains("[user]\none"), "{}", sent[0]);
    assert_eq!(sent[1], "three");
}

#[tokio::test]
async fn a_context_overflow_without_compaction_is_a_clear_error_and_not_retried() {
    let h = Harness::new(json!({"processes": [{"turns": [recorded("overflow")]}]})).await;
    let (response, _, _) = one_prompt(&h, "hello").await;
    let error = response["error"].to_string();
    assert!(
        error.contains("too long") && error.contains("Claude Code did not compact it"),
        "{response}"
    );
    assert_eq!(h.user_lines().len(), 1, "not retried");
    assert!(h.mock.requests().is_empty());
}

/// Claude Code's compaction as it reports it, `trigger` set.
fn compaction(trigger: &str) -> Vec<Value> {
    let mut steps = recorded("compaction");
    steps[2]["line"]["compact_metadata"]["trigger"] = json!(trigger);
    steps
}

#[tokio::test]
async fn a_context_overflow_after_claude_code_compacted_is_retried_once() {
    let mut first = compaction("auto");
    first.extend(recorded("overflow"));
    let h =
        Harness::new(json!({"processes": [{"turns": [first, [{"text": "It fits now."}]]}]})).await;
    let (response, updates, session) = one_prompt(&h, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(shown(&updates).contains("It fits now."));
    let lines = h.user_lines();
    assert_eq!(lines.len(), 2);
    assert_eq!(texts(&lines[0])[0], "hello");
    assert_eq!(texts(&lines[1]), texts(&lines[0]), "the same prompt again");
    let transcript = h.transcript(&session);
    assert_eq!(entries(&transcript, "compaction").len(), 1);
}

#[tokio::test]
async fn claude_code_s_compaction_is_pincer_s_compaction_start_and_end() {
    let mut turn = compaction("auto");
    turn.push(json!({"text": "Still here."}));
    let h = Harness::new(json!({"processes": [{"turns": [turn]}]})).await;
    let (response, updates, session) = one_prompt(&h, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // As the native loop's compaction shows it in an editor without
    // compaction updates: a note while it runs, the result after.
    let text = shown(&updates);
    let native_start = "Compacting";
    assert!(text.contains(native_start), "{text}");
    assert!(text.contains("1552"), "tokens before: {text}");
    let transcript = h.transcript(&session);
    let compactions = entries(&transcript, "compaction");
    assert_eq!(compactions.len(), 1);
    assert!(
        compactions[0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("This session is being continued from a previous conversation"),
        "{}",
        compactions[0]
    );
    assert_eq!(compactions[0]["tokens_before"], 1552);
    // The history keeps the prompt of the run that compacted, after the
    // summary: reloading gives the same.
    assert!(shown(&updates).contains("Still here."));
}

#[tokio::test]
async fn a_message_sent_mid_turn_is_delivered_at_the_next_turn() {
    let sandbox_go = tempfile::tempdir().unwrap();
    let go = sandbox_go.path().join("go");
    let h = Harness::new(json!({"processes": [{"turns": [
        [{"wait_for_file": go}, {"text": "First."}],
        [{"text": "Second."}]
    ]}]}))
    .await;
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let first = acp.send("session/prompt", prompt(&session, "one")).await;
    support::wait_until(
        "the CLI got the first prompt",
        Duration::from_secs(10),
        || h.user_lines().len() == 1,
    )
    .await;
    let second = acp.send("session/prompt", prompt(&session, "two")).await;
    // Requests are handled in order: once a later one is answered, the
    // second prompt is in the session's queue.
    let list = acp
        .send("session/list", json!({"cwd": h.sandbox.work()}))
        .await;
    acp.until_response(list).await;
    assert_eq!(h.user_lines().len(), 1, "held while the turn runs");
    std::fs::write(&go, "").unwrap();
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let message = tokio::time::timeout(Duration::from_secs(10), acp.next())
            .await
            .expect("both prompts answer");
        if message.get("method").is_none() {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            answered.push(message["id"].as_i64().unwrap());
        }
    }
    answered.sort();
    assert_eq!(answered, vec![first, second]);
    // The CLI got the second message only after it answered the first.
    let order: Vec<String> = h
        .log()
        .iter()
        .filter_map(|e| {
            if e.get("result_sent").is_some() {
                Some("result".to_string())
            } else {
                e.get("stdin")
                    .filter(|l| l["type"] == "user")
                    .map(|l| texts(l)[0].clone())
            }
        })
        .collect();
    assert_eq!(order, vec!["one", "result", "two", "result"]);
    let transcript = h.transcript(&session);
    let said: Vec<String> = entries(&transcript, "message")
        .iter()
        .map(|m| {
            let message = &m["message"];
            let text = message["content"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|b| b["text"].as_str())
                .unwrap_or("");
            format!("{} {text}", message["role"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        said,
        vec![
            "user one",
            "assistant First.",
            "user two",
            "assistant Second."
        ]
    );
}

#[tokio::test]
async fn cancelling_interrupts_the_cli_and_the_prompt_answers_cancelled() {
    let go = tempfile::tempdir().unwrap();
    let h = Harness::new(json!({"processes": [{"turns": [
        [{"text": "Working on it."}, {"wait_for_file": go.path().join("never")}, {"text": "too late"}],
        [{"text": "Next one."}]
    ]}]}))
    .await;
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let id = acp
        .send("session/prompt", prompt(&session, "long job"))
        .await;
    support::wait_until("the CLI got the prompt", Duration::from_secs(10), || {
        h.user_lines().len() == 1
    })
    .await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    assert!(!shown(&updates_of(&before)).contains("too late"));
    assert!(
        h.log().iter().any(|e| e.get("interrupted").is_some()),
        "the CLI was interrupted, not killed"
    );
    // The same process takes the next prompt.
    let id = acp.send("session/prompt", prompt(&session, "next")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(shown(&updates_of(&before)).contains("Next one."));
    assert_eq!(h.spawns().len(), 1);
}

#[tokio::test]
async fn claude_code_s_calls_meet_pincer_s_tool_policy_and_hooks() {
    let block = format!("{}/fixtures/hooks/block_rm.py", env!("CARGO_MANIFEST_DIR"));
    let h = Harness::with_config(
        json!({"processes": [{"turns": [[
            {"tool_uses": [{"id": "toolu_ls", "name": "ls", "input": {}}]},
            {"tool_uses": [{"id": "toolu_rm", "name": "bash", "input": {"command": "rm victim.txt"}}]},
            {"tool_uses": [{"id": "toolu_echo", "name": "bash", "input": {"command": "echo from-pincer"}}]},
            {"text": "Done."}
        ]]}]}),
        move |fake| {
            format!(
                "model = \"anthropic/claude-sonnet-4-5\"\n[providers.anthropic]\nruntime = \"claude-code\"\nclaude_path = \"{fake}\"\n[tools]\ndeny = [\"ls\"]\n[[hooks]]\nevent = \"before_tool_call\"\ncommand = \"{block}\"\n"
            )
        },
    )
    .await;
    h.sandbox.write("victim.txt", "still here\n");
    let mut acp = h.acp();
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let mut asked = Vec::new();
    let (response, _) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            asked.push(
                params["toolCall"]["toolCallId"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
            selected("allow_once")
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The denied tool is not offered to Claude Code at all.
    let listed: Vec<String> = h.log().iter().find_map(|e| e.get("tools")).unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(!listed.contains(&"ls".to_string()), "{listed:?}");
    // The hook refused the deletion before anyone was asked; the editor
    // was asked about the other command alone, and it ran.
    assert_eq!(asked, vec!["toolu_echo".to_string()]);
    assert_eq!(
        std::fs::read_to_string(h.sandbox.work().join("victim.txt")).unwrap(),
        "still here\n"
    );
    let results = call_results(&h);
    let rm = results.iter().find(|r| r.0 == "toolu_rm").unwrap();
    assert!(
        rm.1 && rm.2.contains("Deleting files is not allowed"),
        "{rm:?}"
    );
    let echo = results.iter().find(|r| r.0 == "toolu_echo").unwrap();
    assert!(!echo.1 && echo.2.contains("from-pincer"), "{echo:?}");
    // The denied call still has its start, end and error result.
    let transcript = h.transcript(&session);
    let ls = tool_results(&transcript)
        .into_iter()
        .find(|r| r.0 == "toolu_ls")
        .unwrap();
    assert!(ls.1 && ls.2.contains("not available here"), "{ls:?}");
}

#[tokio::test]
async fn a_subscription_provider_runs_through_the_cli_and_never_touches_its_credentials() {
    let h = Harness::with_config(
        json!({"processes": [{"turns": [
            [{"text": "Subscribed answer."}],
            [{"exit": {"code": 1, "stderr": "API Error: overloaded"}}]
        ]}]}),
        |fake| format!("model = \"claude-max/claude-sonnet-4-5\"\n[providers.claude-max]\nclaude_path = \"{fake}\"\n"),
    )
    .await;
    // The CLI's own login, which pincer must never read or send.
    let claude_dir = h.sandbox.home().join(".claude");
    std::fs::create_dir_all(&claude_dir).unwrap();
    std::fs::write(
        claude_dir.join(".credentials.json"),
        r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-NEVER-SEND-THIS","refreshToken":"sk-ant-ort01-NOR-THIS","expiresAt":9999999999999}}"#,
    )
    .unwrap();
    h.mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = h.acp_with(|cmd| {
        cmd.env_remove("ANTHROPIC_API_KEY");
    });
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, "one")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(shown(&updates_of(&before)).contains("Subscribed answer."));
    assert_eq!(
        flag(&h.spawns()[0], "--model").as_deref(),
        Some("claude-sonnet-4-5")
    );
    // Claude Code cannot answer the next turn: pincer's own loop does, as
    // anthropic/claude-sonnet-4-5, with no credential of the CLI's.
    let id = acp.send("session/prompt", prompt(&session, "two")).await;
    let (_, before) = acp.until_response(id).await;
    assert!(
        shown(&updates_of(&before)).contains("with anthropic/claude-sonnet-4-5"),
        "{}",
        shown(&updates_of(&before))
    );
    for request in h.mock.requests() {
        let seen = format!("{:?} {}", request.headers, request.body);
        assert!(!seen.contains("NEVER-SEND-THIS") && !seen.contains("NOR-THIS"));
    }
    let transcript = std::fs::read_to_string(
        std::fs::read_dir(h.sandbox.home().join("sessions"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join(format!("{session}.jsonl")),
    )
    .unwrap();
    assert!(!transcript.contains("NEVER-SEND-THIS"));
    let answer = entries(&h.transcript(&session), "message")
        .into_iter()
        .find(|m| m["message"]["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(answer["message"]["provider"], "claude-max");
}

#[tokio::test]
async fn a_project_cannot_choose_the_runtime_or_the_program_it_runs() {
    let h = Harness::with_config(json!({"processes": []}), |_| {
        "model = \"anthropic/claude-sonnet-4-5\"\n".to_string()
    })
    .await;
    let marker = h.path("project-ran");
    let evil = h.sandbox.write(
        "evil-claude.sh",
        &format!("#!/bin/sh\ntouch {}\n", marker.display()),
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    h.sandbox.write(
        ".pincer/config.toml",
        &format!(
            "[providers.anthropic]\nruntime = \"claude-code\"\nclaude_path = \"{}\"\n[providers.claude-max]\nclaude_path = \"{}\"\n",
            evil.display(),
            evil.display()
        ),
    );
    for trusted in [false, true] {
        if trusted {
            let out = h
                .sandbox
                .command(&["trust", h.sandbox.work().to_str().unwrap()])
                .output()
                .await
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
        h.mock.push(Reply::fixture("anthropic/text.sse"));
        let (response, updates, _) = one_prompt(&h, "hello").await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        assert!(shown(&updates).contains("Hello from the"));
        assert!(
            !marker.exists(),
            "the project's program ran (trusted: {trusted})"
        );
    }
    assert_eq!(h.mock.requests().len(), 2, "pincer's own loop answered");
}

/// What a gateway client sees of one turn: the final chat message's text,
/// the tool events' phases (ids, names, arguments, results), the
/// lifecycle.
async fn gateway_turn(config: &str, script: Option<Value>) -> (String, Vec<Value>, Vec<Value>) {
    use support::gateway::{Gateway, gateway_command, new_key, new_token, write_gateway_config};
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    write_gateway_config(&sandbox, config);
    let script_path = sandbox.dir.path().join("script.json");
    std::fs::write(&script_path, script.unwrap_or(json!({})).to_string()).unwrap();
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    cmd.env("FAKE_CLAUDE_SCRIPT", &script_path)
        .env("FAKE_CLAUDE_LOG", sandbox.dir.path().join("log.jsonl"));
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "What does hello.txt say?").await;
    let end = client.chat_end(&run).await;
    client
        .next_where("the lifecycle end", |f| {
            f["event"] == "agent"
                && f["payload"]["stream"] == "lifecycle"
                && f["payload"]["data"]["phase"] == "end"
        })
        .await;
    let text = end["payload"]["message"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default();
    let of = |stream: &str| -> Vec<Value> {
        client
            .payloads_of("agent")
            .into_iter()
            .filter(|p| p["runId"] == run && p["stream"] == stream)
            .map(|p| p["data"].clone())
            .collect()
    };
    let tools: Vec<Value> = of("tool")
        .into_iter()
        .filter(|d| d["phase"] != "update")
        .map(|d| {
            json!({"phase": d["phase"], "name": d["name"], "toolCallId": d["toolCallId"],
                "args": d["args"], "isError": d["isError"], "content": d["result"]["content"]})
        })
        .collect();
    let lifecycle = of("lifecycle")
        .into_iter()
        .map(|d| d["phase"].clone())
        .collect();
    (text, tools, lifecycle)
}

#[tokio::test]
async fn a_gateway_client_cannot_tell_a_claude_code_turn_from_a_native_one() {
    let native = gateway_turn("", None).await;
    let fake = support::fake_claude_bin();
    let claude = gateway_turn(
        &format!(
            "[providers.anthropic]\nruntime = \"claude-code\"\nclaude_path = \"{}\"\n",
            fake.display()
        ),
        Some(json!({"processes": [{"turns": [[
            {"text": "I'll read the file.", "tool_uses": [{"id": "toolu_01", "name": "read", "input": {"path": "hello.txt"}}]},
            {"text": "The file says hello."}
        ]]}]})),
    )
    .await;
    assert!(native.0.ends_with("The file says hello."), "{native:?}");
    assert_eq!(native.1.len(), 2, "{native:?}");
    assert_eq!(claude, native);
}

#[tokio::test]
async fn pincer_keeps_no_login_for_a_subscription_provider() {
    let sandbox = Sandbox::new();
    let mut cmd = sandbox.command(&["login", "--provider", "claude-max", "--api-key"]);
    let mut child = cmd.spawn().unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"sk-ant-api03-not-for-pincer\n")
            .await
            .unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("`claude-max` runs through your Claude Code CLI, which keeps its own login"),
        "{stderr}"
    );
    let stored = walk(&sandbox.home());
    assert!(!stored.contains("not-for-pincer"), "{stored}");
}

/// Every file's text under `dir`.
fn walk(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&walk(&path));
        } else {
            out.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    out
}

/// `pincer run` with the fake CLI: stdout's JSON result.
async fn pincer_run(h: &Harness, args: &[&str]) -> Value {
    let mut all = vec!["run", "--output-format", "json"];
    all.extend_from_slice(args);
    let mut cmd = h.sandbox.command(&all);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", h.mock.anthropic_url())
        .env("FAKE_CLAUDE_SCRIPT", h.path("script.json"))
        .env("FAKE_CLAUDE_LOG", h.path("log.jsonl"))
        .stdin(std::process::Stdio::null());
    let out = cmd.output().await.unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn pincer_run_goes_through_claude_code_and_continue_resumes_its_session() {
    let h = Harness::new(json!({"processes": [
        {"turns": [[{"text": "Headless answer."}]]},
        {"turns": [[{"text": "Continued answer."}]]}
    ]}))
    .await;
    let first = pincer_run(&h, &["hi"]).await;
    assert_eq!(first["result"], "Headless answer.", "{first}");
    let second = pincer_run(&h, &["--continue", "more"]).await;
    assert_eq!(second["result"], "Continued answer.", "{second}");
    assert_eq!(second["session_id"], first["session_id"]);
    let spawns = h.spawns();
    assert_eq!(spawns.len(), 2);
    assert_eq!(
        flag(&spawns[1], "--resume"),
        flag(&spawns[0], "--session-id")
    );
    assert!(h.mock.requests().is_empty());
}

/// The model ids an editor may pick in a new session.
async fn offered_models(h: &Harness) -> Vec<String> {
    let mut acp = h.acp();
    acp.initialize().await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": h.sandbox.work(), "mcpServers": []}),
        )
        .await;
    result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap()["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn subscription_models_are_offered_only_when_their_cli_is_there() {
    let with_cli = Harness::with_config(json!({}), |fake| {
        format!("[providers.claude-pro]\nclaude_path = \"{fake}\"\n")
    })
    .await;
    let offered = offered_models(&with_cli).await;
    assert!(
        offered.contains(&"claude-pro/claude-sonnet-4-5".to_string()),
        "{offered:?}"
    );
    let without = Harness::with_config(json!({}), |_| {
        "[providers.claude-pro]\nclaude_path = \"/nonexistent/claude\"\n".to_string()
    })
    .await;
    let offered = offered_models(&without).await;
    assert!(
        !offered.iter().any(|m| m.starts_with("claude-pro/")),
        "{offered:?}"
    );
    assert!(offered.contains(&"anthropic/claude-sonnet-4-5".to_string()));
}

#[tokio::test]
async fn a_silent_cli_is_stopped_after_the_idle_timeout_and_the_turn_fails_over() {
    let never = tempfile::tempdir().unwrap();
    let h = Harness::with_config(
        json!({"processes": [{"turns": [[{"wait_for_file": never.path().join("never")}]]}]}),
        |fake| {
            format!(
                "model = \"anthropic/claude-sonnet-4-5\"\nstream_idle_timeout = 1\n[providers.anthropic]\nruntime = \"claude-code\"\nclaude_path = \"{fake}\"\n"
            )
        },
    )
    .await;
    h.mock.push(Reply::fixture("anthropic/text.sse"));
    let (response, updates, _) = one_prompt(&h, "hello").await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = shown(&updates);
    assert!(text.contains("it made no progress for 1 s"), "{text}");
    assert!(text.contains("Hello from the"), "{text}");
    assert_eq!(h.mock.requests().len(), 1);
}

#[tokio::test]
async fn a_workflow_s_llm_step_in_a_subscription_session_runs_in_a_claude_conversation_of_its_own()
{
    let h = Harness::with_config(
        json!({"processes": [
            {"turns": [[{"text": "Hello."}], [{"text": "Again."}]]},
            {"turns": [[{"text": "{\"n\": 2}"}]]}
        ]}),
        |fake| format!("model = \"claude-max/claude-sonnet-4-5\"\n[providers.claude-max]\nclaude_path = \"{fake}\"\n"),
    )
    .await;
    let dir = h.sandbox.home().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("count.toml"),
        r#"description = "Counts"
[[steps]]
id = "ask"
kind = "llm"
prompt = "How many files?"
  [steps.schema]
  type = "object"
  required = ["n"]
  [steps.schema.properties.n]
  type = "integer"
"#,
    )
    .unwrap();
    // No API key: the CLI's login is the only way to the model.
    let mut acp = h.acp_with(|cmd| {
        cmd.env_remove("ANTHROPIC_API_KEY");
    });
    let session = h.session(&mut acp).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    acp.until_response(id).await;
    let id = acp
        .send("session/prompt", prompt(&session, "/workflow count"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let text = shown(&updates_of(&before));
    assert!(text.contains("{\"n\": 2}"), "the step streamed: {text}");
    assert!(
        text.contains("Workflow `count` finished (1 steps): {\"n\":2}"),
        "{text}"
    );
    // The session's conversation goes on in its own Claude session.
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (_, before) = acp.until_response(id).await;
    assert!(shown(&updates_of(&before)).contains("Again."));
    let spawns = h.spawns();
    assert_eq!(spawns.len(), 2, "{spawns:?}");
    let session_claude = flag(&spawns[0], "--session-id").unwrap();
    let step_claude = flag(&spawns[1], "--session-id").unwrap();
    assert_ne!(session_claude, step_claude);
    assert!(flag(&spawns[1], "--resume").is_none());
    assert_eq!(
        flag(&spawns[1], "--model").as_deref(),
        Some("claude-sonnet-4-5")
    );
    // The step's prompt went to the step's process, asking for the JSON.
    let lines = h.user_lines();
    assert_eq!(lines.len(), 3);
    let step_line = texts(&lines[1]).join("\n");
    assert!(step_line.contains("How many files?"), "{step_line}");
    assert!(step_line.contains("JSON schema"), "{step_line}");
    assert!(
        texts(&lines[2]).iter().all(|t| !t.contains("How many")),
        "the session's Claude conversation never saw the step"
    );
    // The transcript resumes the session's Claude session, not the step's.
    let transcript = h.transcript(&session);
    let resumes: Vec<&Value> = entries(&transcript, "runtime")
        .iter()
        .map(|e| &e["resume"])
        .collect();
    assert_eq!(
        resumes,
        vec![&json!(session_claude), &json!(session_claude)]
    );
    assert!(h.mock.requests().is_empty() && h.mock.side_requests().is_empty());
}
