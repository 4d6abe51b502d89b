//! MCP servers end to end: the real `pincer acp` connects to the test MCP
//! server (`tests/mcp_server/server.rs`, built on `rmcp`) over stdio and
//! streamable HTTP, offers its tools to the mock model, runs them through
//! the permission step, and ends the servers with their sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, requests_of, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_tool_call, anthropic_tool_calls};
use support::{mcp_server_bin as server_bin, prompt, selected, spawn_anthropic, wait_until};

fn stdio_server(name: &str, args: &[&str]) -> Value {
    json!({"name": name, "command": server_bin(), "args": args, "env": []})
}

async fn new_session(acp: &mut Acp, sandbox: &Sandbox, servers: Value) -> String {
    acp.initialize().await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": servers}),
        )
        .await;
    result["sessionId"].as_str().unwrap().to_string()
}

fn tool_names(mock: &MockModel, index: usize) -> Vec<String> {
    mock.requests()[index].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

fn mcp_tool_names(mock: &MockModel, index: usize) -> Vec<String> {
    tool_names(mock, index)
        .into_iter()
        .filter(|n| n.starts_with("mcp__"))
        .collect()
}

/// The tool results of request `index`: (call id, is_error, content blocks).
fn tool_results(mock: &MockModel, index: usize) -> Vec<(String, bool, Value)> {
    let body = &mock.requests()[index].body;
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            (
                b["tool_use_id"].as_str().unwrap().to_string(),
                b["is_error"].as_bool().unwrap_or(false),
                b["content"].clone(),
            )
        })
        .collect()
}

fn text_of(content: &Value) -> String {
    content
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The agent text sent to the editor among `messages`.
fn agent_text(messages: &[Value]) -> String {
    updates_of(messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// Reads on until the agent text contains `fragment` (reports of failing
/// servers arrive on their own schedule).
async fn wait_for_text(acp: &mut Acp, mut seen: Vec<Value>, fragment: &str) -> String {
    loop {
        let text = agent_text(&seen);
        if text.contains(fragment) {
            return text;
        }
        seen.push(acp.next().await);
    }
}

#[tokio::test]
async fn stdio_server_tools_are_offered_run_with_permission_and_mapped() {
    let sandbox = Sandbox::new();
    // The server's scope from config: its `crash` tool is never offered.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[mcp.servers.notes]\ndeny = [\"crash\"]\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("c_note", "mcp__notes__add_note", r#"{"text":"hi"}"#),
        ("c_echo", "mcp__notes__echo", r#"{"text":"yo"}"#),
        ("c_image", "mcp__notes__image", "{}"),
        ("c_fail", "mcp__notes__fail", "{}"),
    ])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = new_session(&mut acp, &sandbox, json!([stdio_server("notes", &[])])).await;
    let id = acp
        .send("session/prompt", prompt(&session, "use notes"))
        .await;
    let (response, before) = acp
        .drive(id, |method, params| match method {
            "session/request_permission" => {
                assert_eq!(params["toolCall"]["title"], "Add note (notes)");
                selected("allow_once")
            }
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    // Only the tool not annotated read-only asked.
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);

    let offered = mock.requests()[0].body["tools"].clone();
    let echo = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__notes__echo")
        .unwrap()
        .clone();
    assert_eq!(
        echo,
        json!({
            "name": "mcp__notes__echo",
            "description": "Echo the text back",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        })
    );
    assert_eq!(
        mcp_tool_names(&mock, 0),
        vec![
            "mcp__notes__echo",
            "mcp__notes__add_note",
            "mcp__notes__image",
            "mcp__notes__fail",
            "mcp__notes__slow",
            "mcp__notes__read_file",
            "mcp__notes__write_file",
            "mcp__notes__add_tool",
        ]
    );

    let results = tool_results(&mock, 1);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    let (_, error, content) = by_id("c_note");
    assert!(!error);
    assert_eq!(
        text_of(&content),
        "saved note 1: hi\nResource link: note://1 (name: note 1, text/plain)"
    );
    let (_, error, content) = by_id("c_echo");
    assert!(!error);
    assert_eq!(text_of(&content), "echo: yo");
    let (_, error, content) = by_id("c_image");
    assert!(!error);
    assert_eq!(content[0]["type"], "image");
    assert_eq!(content[0]["source"]["media_type"], "image/png");
    let (_, error, content) = by_id("c_fail");
    assert!(error);
    assert_eq!(text_of(&content), "the tool failed on purpose");

    // The editor sees each call with the tool's title and kind.
    let updates = updates_of(&before);
    let started: Vec<(Value, Value)> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        // `other` is the default kind, which goes unsaid.
        .map(|u| {
            (
                u["title"].clone(),
                u.get("kind").cloned().unwrap_or(json!("other")),
            )
        })
        .collect();
    assert_eq!(
        started,
        vec![
            (json!("Add note (notes)"), json!("other")),
            (json!("Echo (notes)"), json!("read")),
            (json!("image (notes)"), json!("read")),
            (json!("fail (notes)"), json!("read")),
        ]
    );
}

#[tokio::test]
async fn http_server_works_and_announced_tool_changes_are_picked_up() {
    let sandbox = Sandbox::new();
    let mut server = tokio::process::Command::new(server_bin())
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = {
        use tokio::io::AsyncBufReadExt;
        let stdout = server.stdout.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_add",
        "mcp__web__add_tool",
        &json!({}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    mock.push(Reply::sse(anthropic_tool_call(
        "c_extra",
        "mcp__web__extra",
        &json!({}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let init = acp.initialize().await;
    assert_eq!(
        init["agentCapabilities"]["mcpCapabilities"],
        json!({"http": true, "sse": false})
    );
    let result = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": [
                {"type": "http", "name": "web", "url": url, "headers": [
                    {"name": "X-Test", "value": "1"},
                    {"name": "Authorization", "value": "Bearer token"},
                ]}
            ]}),
        )
        .await;
    let session = result["sessionId"].as_str().unwrap().to_string();
    // The change arrives on its own stream (a subscription), so it is
    // looked for at the next prompt.
    for text in ["grow", "use it"] {
        let id = acp.send("session/prompt", prompt(&session, text)).await;
        let (response, _) = acp
            .drive(id, |method, _| panic!("unexpected {method}"))
            .await;
        assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    }
    let before_change = mcp_tool_names(&mock, 0);
    assert!(before_change.contains(&"mcp__web__add_tool".to_string()));
    assert!(!before_change.contains(&"mcp__web__extra".to_string()));
    assert!(mcp_tool_names(&mock, 2).contains(&"mcp__web__extra".to_string()));
    let results = tool_results(&mock, 3);
    assert_eq!(results.len(), 1);
    assert!(!results[0].1);
    assert_eq!(text_of(&results[0].2), "extra ran");
}

#[tokio::test]
async fn a_stdio_server_s_new_tool_is_offered_at_the_next_turn() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_add",
        "mcp__srv__add_tool",
        &json!({}),
    )));
    mock.push(Reply::sse(anthropic_tool_call(
        "c_extra",
        "mcp__srv__extra",
        &json!({}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = new_session(&mut acp, &sandbox, json!([stdio_server("srv", &[])])).await;
    let id = acp.send("session/prompt", prompt(&session, "grow")).await;
    let (response, _) = acp
        .drive(id, |method, _| panic!("unexpected {method}"))
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert!(!mcp_tool_names(&mock, 0).contains(&"mcp__srv__extra".to_string()));
    assert!(mcp_tool_names(&mock, 1).contains(&"mcp__srv__extra".to_string()));
    let results = tool_results(&mock, 2);
    assert_eq!(text_of(&results[0].2), "extra ran");
}

#[tokio::test]
async fn a_crashing_server_is_reported_and_its_tools_disappear() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_crash",
        "mcp__srv__crash",
        &json!({}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = new_session(&mut acp, &sandbox, json!([stdio_server("srv", &[])])).await;
    let id = acp
        .send("session/prompt", prompt(&session, "crash it"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| panic!("unexpected {method}"))
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let results = tool_results(&mock, 1);
    assert!(results[0].1, "{results:?}");
    assert!(
        text_of(&results[0].2).starts_with("MCP server `srv` stopped while running crash"),
        "{results:?}"
    );
    assert_eq!(mcp_tool_names(&mock, 1), Vec::<String>::new());
    let text = wait_for_text(&mut acp, before, "MCP server `srv`").await;
    assert!(
        text.contains("Its tools are unavailable for the rest of this session."),
        "{text}"
    );
    // The session goes on without the server.
    let id = acp
        .send("session/prompt", prompt(&session, "still there?"))
        .await;
    let (response, _) = acp
        .drive(id, |method, _| panic!("unexpected {method}"))
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(mcp_tool_names(&mock, 2), Vec::<String>::new());
    assert!(tool_names(&mock, 2).contains(&"read".to_string()));
}

#[tokio::test]
async fn slow_calls_time_out_and_a_server_that_never_starts_is_reported() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "[mcp]\ntimeout = 1\nstartup_timeout = 2\n\n[mcp.servers.hung]\ncommand = {:?}\nargs = [\"--hang\"]\n",
            server_bin().display().to_string()
        ),
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_slow",
        "mcp__srv__slow",
        &json!({"seconds": 30}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = new_session(&mut acp, &sandbox, json!([stdio_server("srv", &[])])).await;
    let started = std::time::Instant::now();
    let id = acp
        .send("session/prompt", prompt(&session, "be slow"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| panic!("unexpected {method}"))
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert!(started.elapsed() < Duration::from_secs(25));
    let results = tool_results(&mock, 1);
    assert!(results[0].1);
    assert_eq!(
        text_of(&results[0].2),
        "MCP tool slow (server `srv`) timed out after 1 s and was abandoned. Try something else or ask the user."
    );
    // The hung server never offered anything; the slow one still does.
    let names = mcp_tool_names(&mock, 1);
    assert!(
        names.iter().all(|n| n.starts_with("mcp__srv__")),
        "{names:?}"
    );
    assert!(names.contains(&"mcp__srv__slow".to_string()));
    let text = wait_for_text(&mut acp, before, "MCP server `hung`").await;
    assert!(
        text.contains("MCP server `hung` did not start within 2 s."),
        "{text}"
    );
    assert!(
        text.contains("MCP server `srv` did not answer slow within 1 s"),
        "{text}"
    );
}

/// Whether a process is gone (or a zombie nobody has reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn pids_from(file: &std::path::Path) -> Vec<u32> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && text.ends_with('\n')
        {
            return text
                .split_whitespace()
                .map(|p| p.parse().unwrap())
                .collect();
        }
        assert!(std::time::Instant::now() < deadline, "no pid file");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_gone(pids: &[u32]) {
    wait_until(
        &format!("processes {pids:?} still running"),
        Duration::from_secs(10),
        || pids.iter().all(|p| gone(*p)),
    )
    .await;
}

#[tokio::test]
async fn server_processes_end_with_their_session_and_with_pincer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let first_file = sandbox.dir.path().join("first.pids");
    let second_file = sandbox.dir.path().join("second.pids");
    let first = new_session(
        &mut acp,
        &sandbox,
        json!([stdio_server(
            "one",
            &["--pid-file", first_file.to_str().unwrap()]
        )]),
    )
    .await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": [stdio_server(
                "two",
                &["--pid-file", second_file.to_str().unwrap()]
            )]}),
        )
        .await;
    assert!(result["sessionId"].is_string());
    // Each server and the child it started.
    let first_pids = pids_from(&first_file).await;
    let second_pids = pids_from(&second_file).await;
    assert_eq!(first_pids.len(), 2);
    assert!(!first_pids.iter().any(|p| gone(*p)));

    acp.call("session/close", json!({"sessionId": first})).await;
    wait_gone(&first_pids).await;
    assert!(!second_pids.iter().any(|p| gone(*p)));

    // The editor goes away: the other session's server ends too.
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
    wait_gone(&second_pids).await;
}

/// The pids a `--starts-file` lists, one per start of the server.
fn starts(file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// How many of the model's requests so far offered `tool`.
fn requests_offering(mock: &MockModel, tool: &str) -> usize {
    (0..mock.requests().len())
        .filter(|i| mcp_tool_names(mock, *i).iter().any(|n| n == tool))
        .count()
}

#[tokio::test]
async fn sessions_of_a_project_share_one_process_per_server_configuration() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let shared_file = sandbox.dir.path().join("shared.starts");
    let other_file = sandbox.dir.path().join("other.starts");
    let shared = stdio_server("notes", &["--starts-file", shared_file.to_str().unwrap()]);
    // The same name, another configuration (its arguments differ).
    let other = stdio_server("notes", &["--starts-file", other_file.to_str().unwrap()]);
    acp.initialize().await;
    let mut sessions = Vec::new();
    for servers in [json!([shared]), json!([shared]), json!([other])] {
        let result = acp
            .call(
                "session/new",
                json!({"cwd": sandbox.work(), "mcpServers": servers}),
            )
            .await;
        sessions.push(result["sessionId"].as_str().unwrap().to_string());
    }
    // A turn in each: every session is offered the server's tools.
    for (n, session) in sessions.iter().enumerate() {
        mock.push(Reply::fixture("anthropic/text.sse"));
        let result = acp.call("session/prompt", prompt(session, "hi")).await;
        assert_eq!(result, json!({"stopReason": "end_turn"}));
        assert_eq!(requests_offering(&mock, "mcp__notes__echo"), n + 1);
    }
    // Two sessions with one configuration: one process; the other
    // configuration: a process of its own.
    let shared_pids = starts(&shared_file);
    let other_pids = starts(&other_file);
    assert_eq!((shared_pids.len(), other_pids.len()), (1, 1));
    assert_ne!(shared_pids, other_pids);

    // The shared server outlives the first session that used it…
    acp.call("session/close", json!({"sessionId": sessions[0]}))
        .await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let result = acp
        .call("session/prompt", prompt(&sessions[1], "again"))
        .await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    assert_eq!(requests_offering(&mock, "mcp__notes__echo"), 4);
    assert!(!gone(shared_pids[0]));
    // …and ends with the last one.
    acp.call("session/close", json!({"sessionId": sessions[1]}))
        .await;
    wait_gone(&shared_pids).await;
    assert!(!gone(other_pids[0]));
    assert_eq!(starts(&shared_file).len(), 1);

    // pincer exits: the other server ends with it.
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
    wait_gone(&other_pids).await;
}

#[tokio::test]
async fn mcp_list_shows_configured_servers_their_state_and_tools() {
    let sandbox = Sandbox::new();
    let bin = server_bin().display().to_string();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "[mcp]\nstartup_timeout = 2\n\n[mcp.servers.notes]\ncommand = {bin:?}\n\n[mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n\n[mcp.servers.off]\ncommand = {bin:?}\nenabled = false\n"
        ),
    )
    .unwrap();
    let output = sandbox
        .command(&["mcp", "list"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let expected = format!(
        "MCP servers for {work}:
  broken (/nonexistent/mcp-server): failed: could not be started (/nonexistent/mcp-server: No such file or directory (os error 2))
  notes ({bin}): ready
    mcp__notes__echo  (read-only)
    mcp__notes__add_note
    mcp__notes__image  (read-only)
    mcp__notes__fail  (read-only)
    mcp__notes__slow  (read-only)
    mcp__notes__crash  (read-only)
    mcp__notes__read_file  (read-only)
    mcp__notes__write_file
    mcp__notes__add_tool  (read-only)
  off: disabled
",
        work = sandbox.work().display()
    );
    assert_eq!(text, expected);

    // `pincer tools` judges the servers' tools with the rest.
    let output = sandbox
        .command(&["tools", "--json", "--mode", "plan"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l["tool"].as_str().unwrap().starts_with("mcp__notes__"))
        .take(2)
        .collect();
    assert_eq!(
        lines,
        vec![
            json!({"tool": "mcp__notes__echo", "offered": true}),
            json!({"tool": "mcp__notes__add_note", "offered": false, "removedBy": "not allowed by the session's `plan` mode"}),
        ]
    );
}

#[tokio::test]
async fn a_loaded_session_connects_to_the_servers_it_is_given() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::sse(anthropic_tool_call(
        "c_echo",
        "mcp__later__echo",
        &json!({"text": "back"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = new_session(&mut acp, &sandbox, json!([])).await;
    let id = acp.send("session/prompt", prompt(&session, "hello")).await;
    acp.until_response(id).await;
    assert_eq!(mcp_tool_names(&mock, 0), Vec::<String>::new());
    acp.call("session/close", json!({"sessionId": session}))
        .await;
    acp.call(
        "session/load",
        json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": [stdio_server("later", &[])]}),
    )
    .await;
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (response, _) = acp
        .drive(id, |method, _| panic!("unexpected {method}"))
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert!(mcp_tool_names(&mock, 1).contains(&"mcp__later__echo".to_string()));
    let results = tool_results(&mock, 2);
    assert_eq!(text_of(&results[0].2), "echo: back");
}

/// An editor's server named like one in the user's config replaces it: the
/// editor's command line is the one started (its pid file appears, its
/// tool answers), and the configured one never runs (its pid file never
/// appears, also after the session ended).
#[tokio::test]
async fn an_editor_server_replaces_a_configured_one_of_the_same_name() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let bin = server_bin().display().to_string();
    let configured = sandbox.dir.path().join("configured.pids");
    let editor = sandbox.dir.path().join("editor.pids");
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n\n[mcp.servers.notes]\ncommand = {bin:?}\nargs = [\"--pid-file\", {:?}]\nenv = {{ FROM = \"config\" }}\n",
            configured.display().to_string()
        ),
    )
    .unwrap();
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_echo",
        "mcp__notes__echo",
        &json!({"text": "which one?"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = new_session(
        &mut acp,
        &sandbox,
        json!([{
            "name": "notes",
            "command": server_bin(),
            "args": ["--pid-file", editor],
            "env": [{"name": "FROM", "value": "editor"}]
        }]),
    )
    .await;
    let result = acp.call("session/prompt", prompt(&session, "echo")).await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    // The tool ran (a read-only tool: no question), through a server that
    // was started with the editor's arguments.
    assert_eq!(
        tool_results(&mock, 1),
        vec![(
            "toolu_echo".to_string(),
            false,
            json!([{"type": "text", "text": "echo: which one?"}])
        )]
    );
    let editor_pids = pids_from(&editor).await;
    assert_eq!(editor_pids.len(), 2);
    assert!(
        !configured.exists(),
        "the configured server was started too"
    );
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
    wait_gone(&editor_pids).await;
    assert!(!configured.exists(), "the configured server was started");
}

/// The reference servers' release the roots and progress tests use (npm).
const REFERENCE_SERVERS_VERSION: &str = "2026.8.31";

fn target_dir() -> std::path::PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => manifest.join(dir),
        None => manifest.join("target"),
    }
}

/// The entry scripts of `@modelcontextprotocol/server-filesystem` and
/// `server-everything`, installing the pinned release under the target
/// directory on first use (a lock file serialises test processes racing to
/// install). Needs node and npm: the test fails, never skips, without them.
fn ensure_reference_servers() -> (std::path::PathBuf, std::path::PathBuf) {
    let target = target_dir();
    std::fs::create_dir_all(&target).unwrap();
    let prefix = target.join(format!("mcp-reference-{REFERENCE_SERVERS_VERSION}"));
    let packages = ["server-filesystem", "server-everything"];
    let lock = std::fs::File::create(
        target.join(format!("mcp-reference-{REFERENCE_SERVERS_VERSION}.lock")),
    )
    .unwrap();
    lock.lock().unwrap();
    let installed = packages.iter().all(|package| {
        std::fs::read_to_string(prefix.join(format!(
            "node_modules/@modelcontextprotocol/{package}/package.json"
        )))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|p| p["version"] == REFERENCE_SERVERS_VERSION)
    });
    if !installed {
        eprintln!(
            "installing the MCP reference servers {REFERENCE_SERVERS_VERSION} into {}",
            prefix.display()
        );
        let mut args: Vec<String> = ["install", "--no-audit", "--no-fund", "--prefix"]
            .map(String::from)
            .to_vec();
        args.push(prefix.to_str().unwrap().to_string());
        args.extend(
            packages
                .iter()
                .map(|p| format!("@modelcontextprotocol/{p}@{REFERENCE_SERVERS_VERSION}")),
        );
        let output = std::process::Command::new("npm")
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot install the MCP reference servers: `npm {}` did not start ({e}); \
                     install node and npm",
                    args.join(" ")
                )
            });
        assert!(
            output.status.success(),
            "cannot install the MCP reference servers: `npm {}` failed ({})\n--- stdout ---\n{}\n\
             --- stderr ---\n{}\nIt needs npm and a reachable npm registry.",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
    }
    let script = |package: &str| {
        prefix.join(format!(
            "node_modules/@modelcontextprotocol/{package}/dist/index.js"
        ))
    };
    let (filesystem, everything) = (script(packages[0]), script(packages[1]));
    for script in [&filesystem, &everything] {
        assert!(script.is_file(), "no {}", script.display());
    }
    (filesystem, everything)
}

async fn reference_servers() -> (std::path::PathBuf, std::path::PathBuf) {
    tokio::task::spawn_blocking(ensure_reference_servers)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

fn node() -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("no `node` on PATH: install node and npm"))
}

fn file_uri(path: &std::path::Path) -> String {
    url::Url::from_file_path(path).unwrap().to_string()
}

/// One prompt whose single model turn calls `calls` on `servers`
/// (permissions allowed once), then ends; returns what the editor saw.
async fn prompt_calling(
    sandbox: &Sandbox,
    mock: &MockModel,
    servers: Value,
    calls: &[(&str, &str, &str)],
) -> Vec<Value> {
    mock.push(Reply::sse(anthropic_tool_calls(calls)));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(sandbox, mock);
    let session = new_session(&mut acp, sandbox, servers).await;
    let id = acp
        .send("session/prompt", prompt(&session, "use the servers"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| match method {
            "session/request_permission" => selected("allow_once"),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    before
}

#[tokio::test]
async fn reference_servers_get_the_session_directory_as_root_and_show_progress() {
    let (filesystem, everything) = reference_servers().await;
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello from the root\n");
    let node = node();
    // The filesystem server is started without a directory: the session's
    // working directory must reach it as a root.
    let servers = json!([
        {"name": "fs", "command": node, "args": [filesystem], "env": []},
        {"name": "ev", "command": node, "args": [everything, "stdio"], "env": []},
    ]);
    let hello = sandbox.work().join("hello.txt");
    let mock = MockModel::start().await;
    let path = json!({"path": hello}).to_string();
    let before = prompt_calling(
        &sandbox,
        &mock,
        servers,
        &[
            ("c_read", "mcp__fs__read_text_file", &path),
            ("c_roots", "mcp__ev__get-roots-list", "{}"),
            (
                "c_long",
                "mcp__ev__trigger-long-running-operation",
                r#"{"duration": 0.3, "steps": 3}"#,
            ),
        ],
    )
    .await;

    let results = tool_results(&mock, 1);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    let (_, error, content) = by_id("c_read");
    assert_eq!(
        (error, text_of(&content)),
        (false, "hello from the root\n".to_string())
    );
    let (_, error, content) = by_id("c_roots");
    let work = sandbox.work();
    let name = work.file_name().unwrap().to_str().unwrap();
    assert!(!error, "{content}");
    assert!(
        text_of(&content).starts_with(&format!(
            "Current MCP Roots (1 total):\n\n1. {name}\n   URI: {}\n",
            file_uri(&work)
        )),
        "{content}"
    );
    let (_, error, content) = by_id("c_long");
    assert_eq!(
        (error, text_of(&content)),
        (
            false,
            "Long running operation completed. Duration: 0.3 seconds, Steps: 3.".to_string()
        )
    );

    // The server's progress reports showed in the running call.
    let progress: Vec<String> = updates_of(&before)
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "c_long")
        .filter(|u| u.get("status").is_none())
        .filter_map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .map(String::from)
        })
        .collect();
    assert_eq!(
        progress,
        vec![
            "Progress: 1 of 3 (33%)",
            "Progress: 2 of 3 (67%)",
            "Progress: 3 of 3 (100%)"
        ]
    );
}

/// A tool that reports progress as it works may run past the call timeout
/// (each report starts it again, as the MCP spec allows); a silent one may
/// not (`slow_calls_time_out_and_a_server_that_never_starts_is_reported`).
#[tokio::test]
async fn a_call_that_reports_progress_outlives_the_timeout() {
    let (_, everything) = reference_servers().await;
    let sandbox = Sandbox::new();
    // A report every half second against a timeout of two: a loaded
    // machine may delay a report, not by a second and a half.
    std::fs::write(sandbox.home().join("config.toml"), "[mcp]\ntimeout = 2\n").unwrap();
    let servers = json!([
        {"name": "ev", "command": node(), "args": [everything, "stdio"], "env": []},
    ]);
    let mock = MockModel::start().await;
    // Four seconds in all, twice the timeout.
    prompt_calling(
        &sandbox,
        &mock,
        servers,
        &[(
            "c_long",
            "mcp__ev__trigger-long-running-operation",
            r#"{"duration": 4, "steps": 8}"#,
        )],
    )
    .await;
    let results = tool_results(&mock, 1);
    let (_, error, content) = results[0].clone();
    assert_eq!(
        (error, text_of(&content)),
        (
            false,
            "Long running operation completed. Duration: 4 seconds, Steps: 8.".to_string()
        )
    );
}

/// The roots text `get-roots-list` of server-everything answers with.
async fn roots_listed(
    tool: &std::sync::Arc<dyn pincer::tools::Tool>,
    dir: &std::path::Path,
) -> String {
    let output = tool
        .execute(
            json!({}),
            &pincer::tools::ToolContext::local(dir.to_path_buf()),
        )
        .await;
    assert!(!output.is_error, "{output:?}");
    output.text()
}

#[tokio::test]
async fn changed_roots_are_announced_and_the_server_asks_again() {
    use pincer::mcp::{Manager, Origin, ServerSpec, Transport};
    use pincer::tools::ToolSource;

    let (_, everything) = reference_servers().await;
    let first = tempfile::tempdir().unwrap();
    let second = tempfile::tempdir().unwrap();
    let spec = ServerSpec {
        name: "ev".to_string(),
        transport: Transport::Stdio {
            command: node(),
            args: vec![
                everything.to_str().unwrap().to_string(),
                "stdio".to_string(),
            ],
            env: Vec::new(),
            cwd: first.path().to_path_buf(),
            confined: pincer::mcp::Confined::No,
        },
        call_timeout: Duration::from_secs(30),
        origin: Origin::Config,
    };
    let manager = Manager::start(
        vec![spec],
        vec![first.path().to_path_buf()],
        Duration::from_secs(30),
    );
    manager.ready().await;
    let tool = manager
        .tools()
        .await
        .into_iter()
        .find(|t| t.name() == "mcp__ev__get-roots-list")
        .expect("server-everything offers get-roots-list to a client with roots");
    let listed = roots_listed(&tool, first.path()).await;
    assert!(listed.contains(&file_uri(first.path())), "{listed}");

    manager.set_roots(vec![second.path().to_path_buf()]).await;
    assert_eq!(manager.roots(), vec![second.path().to_path_buf()]);
    // The server asks `roots/list` again when it hears of the change, on
    // its own schedule: ask it until it knows the new root.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let listed = roots_listed(&tool, first.path()).await;
        if listed.contains(&file_uri(second.path())) {
            assert!(!listed.contains(&file_uri(first.path())), "{listed}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never saw the new root: {listed}"
        );
        tokio::task::yield_now().await;
    }
    manager.shutdown().await;
}
