//! End-to-end: `pincer --help`, `--version` and `pincer run`, against the
//! mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};

async fn output(mut cmd: tokio::process::Command) -> std::process::Output {
    cmd.stdin(std::process::Stdio::null());
    tokio::time::timeout(std::time::Duration::from_secs(20), cmd.output())
        .await
        .expect("pincer finished")
        .unwrap()
}

#[tokio::test]
async fn version_and_help() {
    let sandbox = Sandbox::new();
    let out = output(sandbox.command(&["--version"])).await;
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("pincer {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = output(sandbox.command(&["--help"])).await;
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for command in ["acp", "run"] {
        assert!(help.contains(command), "{help}");
    }
    let out = output(sandbox.command(&["acp", "--help"])).await;
    assert!(String::from_utf8(out.stdout).unwrap().contains("--model"));
}

#[tokio::test]
async fn run_prints_the_answer() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "What does hello.txt say?"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let out = output(cmd).await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "I'll read the file.The file says hello.\n"
    );
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "→ Read hello.txt\n");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn run_json_prints_session_updates_then_the_result() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai/tool_read.sse"));
    mock.push(Reply::fixture("openai/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "--json", "--model", "openai/gpt-5", "read hello.txt"]);
    cmd.env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", mock.openai_url());
    let out = output(cmd).await;
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A start event, the notifications, the result object (tests/it/run_cli.rs
    // checks those two whole).
    let (last, rest) = lines.split_last().unwrap();
    let (first, notifications) = rest.split_first().unwrap();
    assert_eq!(first["type"], "system");
    assert_eq!(last["type"], "result");
    assert_eq!(last["stop_reason"], "end_turn");
    let kinds: Vec<&str> = notifications
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "session/update");
            n["params"]["update"]["sessionUpdate"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        kinds[..3],
        ["tool_call", "tool_call_update", "usage_update"]
    );
    assert!(
        kinds[3..kinds.len() - 1]
            .iter()
            .all(|k| *k == "agent_message_chunk")
    );
    assert_eq!(kinds.last(), Some(&"usage_update"));
}

#[tokio::test]
async fn run_read_only_refuses_what_needs_permission() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("x.txt");
    std::fs::write(&file, "secret\n").unwrap();
    let mock = MockModel::start().await;
    let args = json!({"path": file}).to_string();
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"read","arguments":args}}]},"finish_reason":null}]}),
        json!({"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}),
    );
    mock.push(Reply::sse(body));
    mock.push(Reply::fixture("openai/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "--model", "openai/gpt-5", "read it"]);
    cmd.env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", mock.openai_url());
    let out = output(cmd).await;
    assert!(out.status.success(), "{out:?}");
    let tool = mock.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap();
    assert!(!tool["content"].as_str().unwrap().contains("secret"));
    assert!(tool["content"].as_str().unwrap().contains("declined"));
}

#[tokio::test]
async fn run_fails_with_a_message_and_a_non_zero_exit() {
    let sandbox = Sandbox::new();
    // No credentials (8: a usage error is 2).
    let out = output(sandbox.command(&["run", "hi"])).await;
    assert_eq!(out.status.code(), Some(8));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("ANTHROPIC_API_KEY")
    );
    assert!(out.stdout.is_empty());

    // A stop other than end_turn.
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/max_tokens.sse"));
    let mut cmd = sandbox.command(&["run", "hi"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("output limit")
    );

    // A provider that is down.
    let mut cmd = sandbox.command(&["run", "hi"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    std::fs::write(sandbox.home().join("config.toml"), "max_retries = 0\n").unwrap();
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("cannot connect to anthropic"), "{stderr}");
}

/// What a stranger (a chat display name) or a model (a session title) chose
/// reaches the owner's terminal without its escape sequences: a title
/// change, a screen clear, an OSC 52 clipboard write, a bidi override.
#[tokio::test]
async fn names_keys_and_titles_reach_the_terminal_without_control_characters() {
    const HOSTILE: &str =
        "Eve\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}1m\u{202e}";
    let sandbox = Sandbox::new();
    let far = 4_000_000_000u64;
    let access = json!({
        "pending": {"ABCDEFGH": {"channel": "telegram", "user": "42\u{1b}[1m", "name": HOSTILE, "expires": far}},
    });
    std::fs::create_dir_all(sandbox.home().join("channels")).unwrap();
    std::fs::write(
        sandbox.home().join("channels").join("access.json"),
        access.to_string(),
    )
    .unwrap();
    let id = "sess_hostile";
    let dir = sandbox.home().join("sessions").join("--elsewhere--");
    std::fs::create_dir_all(&dir).unwrap();
    let header = json!({"type": "session", "version": 1, "id": id, "cwd": "/elsewhere", "created": "2026-01-01T00:00:00Z"});
    std::fs::write(dir.join(format!("{id}.jsonl")), format!("{header}\n")).unwrap();
    std::fs::write(dir.join(format!("{id}.title")), HOSTILE).unwrap();
    std::fs::create_dir_all(sandbox.home().join("gateway")).unwrap();
    std::fs::write(
        sandbox.home().join("gateway").join("keys.json"),
        json!({"keys": {format!("telegram:dm:{HOSTILE}"): id}}).to_string(),
    )
    .unwrap();

    let clean = |out: &std::process::Output| {
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout.clone()).unwrap();
        let bad: Vec<char> = text
            .chars()
            .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
            .collect();
        assert_eq!(bad, Vec::<char>::new(), "{text:?}");
        text
    };
    let listed = clean(&output(sandbox.command(&["channels", "list"])).await);
    assert!(listed.contains("Eve\u{fffd}]0;owned"), "{listed:?}");
    let sessions = clean(&output(sandbox.command(&["sessions", "list"])).await);
    assert!(sessions.contains("sess_hostile"), "{sessions:?}");
    assert!(
        sessions.contains("[telegram:dm:Eve\u{fffd}"),
        "{sessions:?}"
    );
    clean(&output(sandbox.command(&["sessions", "show", id])).await);
    let approved = clean(&output(sandbox.command(&["channels", "approve", "ABCDEFGH"])).await);
    assert!(approved.starts_with("Approved Eve\u{fffd}"), "{approved:?}");
}
