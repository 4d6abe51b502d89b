#![allow(dead_code)]
pub mod acp_client;
pub mod attacker;
pub mod bridge;
pub mod browser;
pub mod claude_code;
pub mod discord_api;
pub mod gateway;
pub mod mock_model;
pub mod openclaw;
pub mod openclaw_gateway;
pub mod python_sdk;
pub mod services;
pub mod slack_api;
pub mod sse;
pub mod telegram_api;
pub mod webdriver;
pub mod whatsapp_api;

use acp_client::{Acp, Sandbox};
use mock_model::MockModel;

/// `pincer acp` in `sandbox` with an Anthropic key, talking to `mock`.
pub fn spawn_anthropic(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

/// The params of a `session/prompt` with one text block.
pub fn prompt(session: &str, text: &str) -> serde_json::Value {
    serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Polls `done` every 20 ms until it holds, failing with `what` after
/// `timeout`: waiting on a condition with a deadline, never a bare sleep.
pub async fn wait_until(what: &str, timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A permission answer choosing `option` (`allow_once`, `reject_always`, …).
pub fn selected(option: &str) -> serde_json::Value {
    serde_json::json!({"outcome": {"outcome": "selected", "optionId": option}})
}

/// The tool results the model received in request `index` of `mock`:
/// (call id, is_error, text).
pub fn tool_results(mock: &MockModel, index: usize) -> Vec<(String, bool, String)> {
    let body = &mock.requests()[index].body;
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text: String = b["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c["text"].as_str())
                .collect();
            (
                b["tool_use_id"].as_str().unwrap().to_string(),
                b["is_error"].as_bool().unwrap_or(false),
                text,
            )
        })
        .collect()
}

/// The test MCP server (`tests/mcp_server/server.rs`), an example target
/// that `cargo test` and `cargo nextest run` build beside the tests.
pub fn mcp_server_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().unwrap().parent().unwrap();
    let bin = target.join("examples").join("pincer-test-mcp-server");
    assert!(
        bin.exists(),
        "{} is missing; run the tests with `cargo test` / `cargo nextest run`, or `cargo build --example pincer-test-mcp-server`",
        bin.display()
    );
    bin
}

/// The scripted fake `claude` CLI (tests/fake_claude/claude.rs), built by
/// `cargo test` / `cargo nextest run` as an example beside the tests. A run
/// filtered with `--test NAME` does not rebuild examples: after changing the
/// fake, `cargo build --example pincer-test-fake-claude` first.
pub fn fake_claude_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().unwrap().parent().unwrap();
    let bin = target.join("examples").join("pincer-test-fake-claude");
    assert!(
        bin.exists(),
        "{} is missing; run the tests with `cargo test` / `cargo nextest run`, or `cargo build --example pincer-test-fake-claude`",
        bin.display()
    );
    bin
}

/// Whether a content block (Anthropic's `{"type": "text", "text": …}` or
/// Bedrock's `{"text": …}`) is the time line pincer closes each user
/// message with.
pub fn is_time_line(block: &serde_json::Value) -> bool {
    block["text"]
        .as_str()
        .is_some_and(|text| text.starts_with("Current time: "))
}

/// `value` without the time lines in any content array: for tests that
/// compare what the user wrote with what the model received.
pub fn without_time_lines(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), without_time_lines(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| !is_time_line(item))
                .map(without_time_lines)
                .collect(),
        ),
        other => other.clone(),
    }
}

/// An agent config for library tests: the mock model as Anthropic with a
/// test key, default permissions over `project`, no retries.
pub fn agent_config(mock: &MockModel, project: &std::path::Path) -> pincer::agent::AgentConfig {
    let url = mock.anthropic_url();
    let catalog = pincer::llm::catalog::Catalog::new(&Default::default(), &|k| {
        (k == "ANTHROPIC_BASE_URL").then(|| url.clone())
    });
    pincer::agent::AgentConfig {
        auth_profile: None,
        compaction: Default::default(),
        memory_dir: None,
        prune: Default::default(),
        last_call: None,
        credentials: None,
        fallbacks: Vec::new(),
        rotate_rate_limits: false,
        guard: Default::default(),
        extra_tools: None,
        clock: Default::default(),
        session_id: None,
        runtime: None,
        checkpoints: None,
        subagents: None,
        model: catalog.resolve("anthropic/claude-sonnet-4-5").unwrap(),
        key: Some(pincer::llm::Secret::new("test-key")),
        thinking: pincer::llm::ThinkingLevel::Off,
        system_prompt: "You are a test.".to_string(),
        max_turns: 10,
        stream: pincer::llm::StreamConfig {
            idle_timeout: std::time::Duration::from_secs(5),
        },
        max_retries: 0,
        retry_base_delay: std::time::Duration::from_millis(1),
        permissions: std::sync::Arc::new(pincer::agent::Permissions::new(
            pincer::agent::Mode::Default,
            vec![project.to_path_buf()],
            None,
        )),
    }
}

/// Installs Debian's `package` through `.ci/debian-tool` when `program`
/// is not on PATH; fails (never skips) when that cannot be done.
pub fn ensure_tool(program: &str, package: &str) {
    ensure_tool_on(
        program,
        package,
        &std::env::var_os("PATH").unwrap_or_default(),
    );
}

/// [`ensure_tool`], looking for `program` on `path` (Debian puts some
/// servers in `/usr/sbin`, off an ordinary user's PATH).
pub fn ensure_tool_on(program: &str, package: &str, path: &std::ffi::OsStr) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/debian-tool");
    let output = std::process::Command::new(&script)
        .args([program, package])
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        output.status.success(),
        "`{program}` is missing and `.ci/debian-tool {program} {package}` could not install it \
         ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
