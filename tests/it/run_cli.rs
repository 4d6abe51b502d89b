//! End-to-end: `pincer run` for scripts and terminals, against the real
//! binary and the mock model: the prompt from stdin (piped for real), runs
//! saved as sessions and continued, the output formats, the flags and the
//! exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::process::Output;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};

/// `pincer run ARGS` in `sandbox` against `mock` (Anthropic), with `stdin`
/// piped in and closed (`None`: stdin at /dev/null).
async fn run(sandbox: &Sandbox, mock: &MockModel, args: &[&str], stdin: Option<&str>) -> Output {
    let mut full = vec!["run"];
    full.extend_from_slice(args);
    let mut cmd = sandbox.command(&full);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    finish(cmd, stdin).await
}

async fn finish(mut cmd: tokio::process::Command, stdin: Option<&str>) -> Output {
    use tokio::io::AsyncWriteExt;
    if stdin.is_none() {
        cmd.stdin(std::process::Stdio::null());
    }
    let mut child = cmd.spawn().unwrap();
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
        drop(pipe);
    }
    tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("pincer finished")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The user text of the last user message of request `index`, without
/// pincer's time line.
fn user_text(mock: &MockModel, index: usize) -> String {
    let body = support::without_time_lines(&mock.requests()[index].body);
    let messages = body["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("")
}

/// The tool names offered in request `index`.
fn offered_tools(mock: &MockModel, index: usize) -> Vec<String> {
    mock.requests()[index].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// `pincer sessions list --json` of the sandbox.
async fn sessions(sandbox: &Sandbox) -> Vec<Value> {
    let out = finish(sandbox.command(&["sessions", "list", "--json"]), None).await;
    assert!(out.status.success(), "{out:?}");
    lines(&out)
}

const HELLO: &str = "Hello from the mock model.\n";

#[tokio::test]
async fn piped_stdin_is_the_prompt() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let out = run(&sandbox, &mock, &[], Some("What is 2+2?\n")).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(text(&out.stdout), HELLO);
    assert_eq!(user_text(&mock, 0), "What is 2+2?\n");
    // `-` says so explicitly.
    let out = run(&sandbox, &mock, &["-"], Some("And 3+3?")).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(user_text(&mock, 1), "And 3+3?");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn piped_stdin_and_an_argument_combine_as_codex_exec_does() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let log = "error: disk full\nretrying\n";
    let out = run(&sandbox, &mock, &["explain this"], Some(log)).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        user_text(&mock, 0),
        "explain this\n\n<stdin>\nerror: disk full\nretrying\n</stdin>"
    );
}

#[tokio::test]
async fn an_empty_prompt_is_a_usage_error_and_nothing_is_sent() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for (args, stdin) in [
        (vec![], None),
        (vec![], Some(" \n\n")),
        (vec!["-"], Some("")),
        (vec!["   "], None),
    ] {
        let out = run(&sandbox, &mock, &args, stdin).await;
        assert_eq!(out.status.code(), Some(2), "{args:?} {stdin:?}: {out:?}");
        assert!(
            text(&out.stderr).starts_with("pincer: the prompt is empty;"),
            "{}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    // In JSON, the error is the result object.
    let out = run(&sandbox, &mock, &["--output-format", "json"], None).await;
    assert_eq!(out.status.code(), Some(2));
    let mut result = lines(&out).remove(0);
    result["duration_ms"] = json!(0);
    assert_eq!(
        result,
        json!({
            "type": "result",
            "subtype": "error_usage",
            "is_error": true,
            "exit_code": 2,
            "error": "the prompt is empty; pass it as an argument (`pincer run \"…\"`) or pipe it in (`echo … | pincer run`)",
            "session_id": null,
            "duration_ms": 0,
        })
    );
    assert_eq!(mock.requests().len(), 0);
    assert_eq!(sessions(&sandbox).await, Vec::<Value>::new());
}

#[tokio::test]
async fn runs_are_sessions_listed_and_continued() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for _ in 0..3 {
        mock.push(Reply::fixture("anthropic/text.sse"));
    }
    let out = run(&sandbox, &mock, &["first question"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let listed = sessions(&sandbox).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let id = listed[0]["sessionId"].as_str().unwrap().to_string();
    assert!(id.starts_with("sess_"), "{id}");
    assert_eq!(listed[0]["title"], "first question");
    assert_eq!(listed[0]["cwd"], json!(sandbox.work()));

    // --continue: the most recent session here, with its history.
    let out = run(&sandbox, &mock, &["--continue", "second question"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let history = |index: usize| -> Vec<(String, String)> {
        let body = support::without_time_lines(&mock.requests()[index].body);
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let content = m["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<String>();
                (m["role"].as_str().unwrap().to_string(), content)
            })
            .collect()
    };
    let turn = |q: &str| {
        vec![
            ("user".to_string(), q.to_string()),
            (
                "assistant".to_string(),
                "Hello from the mock model.".to_string(),
            ),
        ]
    };
    let mut expected = turn("first question");
    expected.push(("user".into(), "second question".into()));
    assert_eq!(history(1), expected);

    // --resume with a prefix of the id (without `sess_`).
    let prefix = &id["sess_".len().."sess_".len() + 10];
    let out = run(&sandbox, &mock, &["--resume", prefix, "third"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut expected = turn("first question");
    expected.extend(turn("second question"));
    expected.push(("user".into(), "third".into()));
    assert_eq!(history(2), expected);
    // Still one session.
    assert_eq!(sessions(&sandbox).await.len(), 1);
    // `sessions show` takes the prefix too, and shows the whole run.
    let out = finish(sandbox.command(&["sessions", "show", prefix]), None).await;
    assert!(out.status.success(), "{out:?}");
    let shown = text(&out.stdout);
    for q in ["first question", "second question", "third"] {
        assert!(shown.contains(&format!("## User\n\n{q}\n")), "{shown}");
    }
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn an_ambiguous_or_unknown_id_is_an_error_listing_the_matches() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    for q in ["one", "two"] {
        let out = run(&sandbox, &mock, &[q], None).await;
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let mut ids: Vec<String> = sessions(&sandbox)
        .await
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let out = run(&sandbox, &mock, &["--resume", "sess_", "three"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        format!(
            "pincer: --resume: `sess_` names 2 sessions: {}, {}; give more of the id\n",
            ids[0], ids[1]
        )
    );
    let out = run(&sandbox, &mock, &["--resume", "nosuch", "three"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        text(&out.stderr),
        "pincer: --resume: no session nosuch; `pincer sessions list` shows the sessions there are\n"
    );
    // Nothing was sent for either.
    assert_eq!(mock.requests().len(), 2);
    // `sessions show` / `delete`: the same.
    let out = finish(sandbox.command(&["sessions", "show", "sess_"]), None).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("names 2 sessions"), "{out:?}");
    let out = finish(
        sandbox.command(&["sessions", "delete", &ids[0][..16]]),
        None,
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), format!("Deleted {}.\n", ids[0]));
    let left: Vec<Value> = sessions(&sandbox).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["sessionId"], json!(ids[1]));
}

#[tokio::test]
async fn continue_without_a_session_here_is_a_usage_error() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let out = run(&sandbox, &mock, &["--continue", "hi"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("there is no session in"),
        "{out:?}"
    );
    assert_eq!(mock.requests().len(), 0);
}

/// The result object with the values that change from run to run set
/// aside (duration) or checked on their own (cost).
fn normalised(mut result: Value) -> Value {
    assert!(result["duration_ms"].as_u64().is_some(), "{result}");
    result["duration_ms"] = json!(0);
    result
}

#[tokio::test]
async fn stream_json_starts_with_the_session_and_ends_with_the_result() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let out = run(&sandbox, &mock, &["--json", "read hello.txt"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = lines(&out);
    let id = sessions(&sandbox).await[0]["sessionId"].clone();
    let first = lines.first().unwrap().clone();
    let tools = first["tools"].clone();
    assert_eq!(
        first,
        json!({
            "type": "system",
            "subtype": "init",
            "session_id": id,
            "model": "anthropic/claude-sonnet-4-5",
            "cwd": sandbox.work(),
            "tools": tools,
            "mode": "plan",
            "resumed": false,
        })
    );
    assert!(
        tools.as_array().unwrap().contains(&json!("read")),
        "{tools}"
    );
    let middle = &lines[1..lines.len() - 1];
    assert!(!middle.is_empty());
    for n in middle {
        assert_eq!(n["method"], "session/update", "{n}");
        assert_eq!(n["params"]["sessionId"], id);
    }
    let result = lines.last().unwrap().clone();
    let cost = result["total_cost_usd"].as_f64().unwrap();
    assert!(cost > 0.0, "{result}");
    assert_eq!(
        normalised(result.clone()),
        json!({
            "type": "result",
            "subtype": "success",
            "is_error": false,
            "exit_code": 0,
            "stop_reason": "end_turn",
            "result": "The file says hello.",
            "session_id": id,
            "model": "anthropic/claude-sonnet-4-5",
            "cwd": sandbox.work(),
            "num_turns": 2,
            "duration_ms": 0,
            "total_cost_usd": cost,
            "usage": result["usage"].clone(),
        })
    );
    let usage = &result["usage"];
    for key in [
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    ] {
        assert!(usage[key].as_u64().is_some(), "{usage}");
    }
    assert!(usage["output_tokens"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn output_format_json_prints_only_the_result() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let out = run(&sandbox, &mock, &["--output-format", "json", "hi"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "result");
    assert_eq!(lines[0]["result"], "Hello from the mock model.");
    assert_eq!(lines[0]["num_turns"], 1);
    assert_eq!(
        lines[0]["usage"],
        json!({"input_tokens": 21, "output_tokens": 10, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})
    );
    // text is the default, and `--output-format text` says so.
    mock.push(Reply::fixture("anthropic/text.sse"));
    let out = run(&sandbox, &mock, &["--output-format", "text", "hi"], None).await;
    assert_eq!(text(&out.stdout), HELLO);
}

#[tokio::test]
async fn errors_are_reported_in_the_chosen_format_with_distinct_exit_codes() {
    let sandbox = Sandbox::new();
    // No credentials: 8, not the usage error's 2.
    let out = finish(
        sandbox.command(&["run", "--output-format", "json", "hi"]),
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    let result = normalised(lines(&out).remove(0));
    assert_eq!(result["subtype"], "error_credentials");
    assert_eq!(result["exit_code"], 8);
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY"),
        "{result}"
    );
    let out = finish(sandbox.command(&["run", "hi"]), None).await;
    assert_eq!(out.status.code(), Some(8), "{out:?}");
    assert!(text(&out.stderr).contains("ANTHROPIC_API_KEY"));

    // A provider that is down: 1, in stream-json the result object too.
    let mut cmd = sandbox.command(&["run", "--json", "-c", "max_retries=0", "hi"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    let out = finish(cmd, None).await;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let lines = lines(&out);
    assert_eq!(lines[0]["type"], "system");
    let result = lines.last().unwrap();
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["stop_reason"], Value::Null);
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("cannot connect to anthropic"),
        "{result}"
    );

    // A key the provider rejects: 8 as well.
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let out = run(&sandbox, &mock, &["-c", "max_retries=0", "hi"], None).await;
    assert_eq!(out.status.code(), Some(8), "{out:?}");
}

#[tokio::test]
async fn help_documents_the_exit_codes() {
    let sandbox = Sandbox::new();
    let out = finish(sandbox.command(&["run", "--help"]), None).await;
    assert!(out.status.success());
    let help = text(&out.stdout);
    for line in [
        "  0    success",
        "  2    usage error",
        "  8    no credentials",
        "  130  cancelled",
        "  5    --max-turns",
    ] {
        assert!(help.contains(line), "{line}: {help}");
    }
}

#[tokio::test]
async fn sigint_cancels_with_130_and_the_transcript_records_it() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 3,
    });
    let mut cmd = sandbox.command(&["run", "--output-format", "json", "wait for it"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .stdin(std::process::Stdio::null());
    let child = cmd.spawn().unwrap();
    mock.wait_for_requests(1, Duration::from_secs(20)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let result = lines(&out).remove(0);
    assert_eq!(result["subtype"], "error_cancelled");
    assert_eq!(result["stop_reason"], "cancelled");
    assert_eq!(result["exit_code"], 130);
    assert_eq!(sessions(&sandbox).await[0]["title"], "wait for it");
}

/// A reply that calls `read` on `path`.
fn read_call(path: &str) -> Reply {
    Reply::sse(support::sse::anthropic_tool_call(
        "toolu_1",
        "read",
        &json!({"path": path}),
    ))
}

#[tokio::test]
async fn max_turns_stops_the_run_with_its_own_exit_code() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a\n");
    let mock = MockModel::start().await;
    mock.push(read_call("a.txt"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let out = run(&sandbox, &mock, &["--max-turns", "1", "read a.txt"], None).await;
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(
        text(&out.stderr).contains("stopped after 1 model calls"),
        "{out:?}"
    );
    assert_eq!(mock.requests().len(), 1);
    // The same through -c.
    let mock = MockModel::start().await;
    mock.push(read_call("a.txt"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let out = run(
        &sandbox,
        &mock,
        &["--output-format", "json", "-c", "max_turns=1", "read a.txt"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert_eq!(lines(&out)[0]["subtype"], "error_max_turns");
    assert_eq!(lines(&out)[0]["stop_reason"], "max_turn_requests");
    assert_eq!(mock.requests().len(), 1);
    // 0 is not a number of turns.
    let out = run(&sandbox, &mock, &["--max-turns", "0", "hi"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[tokio::test]
async fn config_overrides_are_checked_and_name_the_bad_key() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let out = run(&sandbox, &mock, &["-c", "max_turnz=3", "hi"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("pincer: -c max_turnz=3: unknown field `max_turnz`"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&sandbox, &mock, &["-c", "max_turns=lots", "hi"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("pincer: -c max_turns=lots: invalid type"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mock.requests().len(), 0);
    // A good one applies: the model comes from it.
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "-c", "model=openai/gpt-5", "hi"]);
    cmd.env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", mock.openai_url());
    let out = finish(cmd, None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(mock.requests()[0].body["model"], "gpt-5");
}

#[tokio::test]
async fn allowed_and_disallowed_tools_narrow_what_the_model_is_offered() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let out = run(
        &sandbox,
        &mock,
        &["--allowed-tools", "read,grep", "hi"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(offered_tools(&mock, 0), vec!["read", "grep"]);
    let all = {
        let out = run(&sandbox, &mock, &["--mode", "bypass", "hi"], None).await;
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        offered_tools(&mock, 1)
    };
    assert!(all.contains(&"bash".to_string()), "{all:?}");
    let out = run(
        &sandbox,
        &mock,
        &[
            "--mode",
            "bypass",
            "--disallowed-tools",
            "group:runtime",
            "--disallowed-tools",
            "write",
            "hi",
        ],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let expected: Vec<String> = all
        .iter()
        .filter(|t| !["bash", "process", "write"].contains(&t.as_str()))
        .cloned()
        .collect();
    assert_eq!(offered_tools(&mock, 2), expected);
    // A name no tool has, or an unknown group: a usage error, nothing sent.
    let out = run(&sandbox, &mock, &["--allowed-tools", "raed", "hi"], None).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("pincer: --allowed-tools: no tool named `raed`"),
        "{}",
        text(&out.stderr)
    );
    let out = run(
        &sandbox,
        &mock,
        &["--disallowed-tools", "group:nope", "hi"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).contains("unknown tool group `group:nope`"),
        "{out:?}"
    );
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn cwd_runs_in_another_directory() {
    let sandbox = Sandbox::new();
    let other = tempfile::tempdir().unwrap();
    let other_dir = other.path().canonicalize().unwrap();
    std::fs::write(other_dir.join("hello.txt"), "hello from elsewhere\n").unwrap();
    let mock = MockModel::start().await;
    mock.push(read_call("hello.txt"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let dir = other_dir.to_str().unwrap();
    let out = run(&sandbox, &mock, &["--cwd", dir, "read hello.txt"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let results = support::tool_results(&mock, 1);
    assert_eq!(results.len(), 1);
    assert!(!results[0].1, "{results:?}");
    assert!(results[0].2.contains("hello from elsewhere"), "{results:?}");
    // The session belongs to that directory.
    let listed = sessions(&sandbox).await;
    assert_eq!(listed[0]["cwd"], json!(other_dir));
    // A directory that does not exist: a usage error.
    let missing = other_dir.join("missing");
    let out = run(
        &sandbox,
        &mock,
        &["--cwd", missing.to_str().unwrap(), "hi"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).starts_with("pincer: --cwd "), "{out:?}");
}

#[tokio::test]
async fn quiet_and_verbose_change_what_goes_to_stderr() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    for _ in 0..2 {
        mock.push(Reply::fixture("anthropic/tool_read.sse"));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
    }
    let out = run(&sandbox, &mock, &["--quiet", "read hello.txt"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "I'll read the file.The file says hello.\n"
    );
    assert_eq!(text(&out.stderr), "");
    let out = run(&sandbox, &mock, &["--verbose", "read hello.txt"], None).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{stderr}");
    let id = sessions(&sandbox).await[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        lines[0],
        format!(
            "pincer: session {id} · anthropic/claude-sonnet-4-5 · {}",
            sandbox.work().display()
        )
    );
    assert_eq!(lines[1], "→ Read hello.txt");
    assert!(
        lines[2].starts_with("pincer: 2 model calls, ") && lines[2].ends_with(" s"),
        "{stderr}"
    );
}

/// `pincer run ARGS` on a terminal (a pty) as stdin, stdout and stderr,
/// as a person types it, with `env` added: the program, and what the
/// terminal shows, filled as it comes.
struct OnTerminal {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    killer: Box<dyn portable_pty::ChildKiller + Send + Sync>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    screen: std::sync::Arc<std::sync::Mutex<String>>,
    read: tokio::task::JoinHandle<()>,
}

impl OnTerminal {
    fn start(sandbox: &Sandbox, mock: &MockModel, args: &[&str], env: &[(&str, &str)]) -> Self {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_pincer"));
        cmd.arg("run");
        cmd.args(args);
        cmd.env_clear();
        cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
        cmd.env("HOME", sandbox.home());
        cmd.env("PINCER_HOME", sandbox.home());
        cmd.env("RUST_LOG", "warn");
        cmd.env("ANTHROPIC_API_KEY", "test-key");
        cmd.env("ANTHROPIC_BASE_URL", mock.anthropic_url());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(sandbox.work());
        let child = pair.slave.spawn_command(cmd).unwrap();
        let killer = child.clone_killer();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let screen = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let filling = screen.clone();
        // The terminal is read until the program is gone (EOF or EIO).
        let read = tokio::task::spawn_blocking(move || {
            let mut all = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut reader, &mut buf) {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
                *filling.lock().unwrap() = String::from_utf8_lossy(&all).into_owned();
            }
        });
        Self {
            child,
            killer,
            master: pair.master,
            screen,
            read,
        }
    }

    /// Waits until the terminal shows `text`.
    async fn shows(&mut self, text: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !self.screen.lock().unwrap().contains(text) {
            if tokio::time::Instant::now() > deadline {
                self.killer.kill().unwrap();
                panic!(
                    "the terminal never showed {text:?}: {:?}",
                    self.screen.lock().unwrap()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the program to end: its exit code and the whole screen.
    async fn end(self) -> (u32, String) {
        let Self {
            mut child,
            mut killer,
            master,
            screen,
            read,
        } = self;
        let waited = tokio::time::timeout(
            Duration::from_secs(20),
            tokio::task::spawn_blocking(move || child.wait().unwrap()),
        )
        .await;
        let Ok(status) = waited else {
            // Killed, so that the threads reading and waiting end too.
            killer.kill().unwrap();
            panic!("pincer was still running after 20 s");
        };
        drop(master);
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .unwrap()
            .unwrap();
        let text = screen.lock().unwrap().replace("\r\n", "\n");
        (status.unwrap().exit_code(), text)
    }
}

/// `pincer run ARGS` on a terminal: its exit code and what it showed.
async fn run_on_terminal(sandbox: &Sandbox, mock: &MockModel, args: &[&str]) -> (u32, String) {
    OnTerminal::start(sandbox, mock, args, &[]).end().await
}

#[tokio::test]
async fn a_terminal_stdin_is_never_read() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    // An argument: the run answers without waiting for the terminal.
    let (code, screen) = run_on_terminal(&sandbox, &mock, &["--quiet", "hi"]).await;
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Hello from the mock model."), "{screen}");
    assert_eq!(user_text(&mock, 0), "hi");
    // No argument, or `-`: a usage error at once, not a wait.
    let (code, screen) = run_on_terminal(&sandbox, &mock, &[]).await;
    assert_eq!(code, 2, "{screen}");
    assert!(screen.contains("the prompt is empty"), "{screen}");
    let (code, screen) = run_on_terminal(&sandbox, &mock, &["-"]).await;
    assert_eq!(code, 2, "{screen}");
    assert!(screen.contains("stdin is a terminal"), "{screen}");
    assert_eq!(mock.requests().len(), 1);
}

/// `pincer run ARGS` on a terminal (a pty) with `env` added, the mock's
/// answer held back until the screen shows `before`: what the screen
/// showed, and the exit code.
async fn watch_on_terminal(
    sandbox: &Sandbox,
    args: &[&str],
    env: &[(&str, &str)],
    before: &str,
) -> (u32, String) {
    let body = support::mock_model::fixture("anthropic/text.sse");
    watch_on_terminal_replying(sandbox, args, env, before, body).await
}

/// [`watch_on_terminal`] with the model answering `body` (SSE).
async fn watch_on_terminal_replying(
    sandbox: &Sandbox,
    args: &[&str],
    env: &[(&str, &str)],
    before: &str,
    body: String,
) -> (u32, String) {
    let mock = MockModel::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body,
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    let mut terminal = OnTerminal::start(sandbox, &mock, args, env);
    terminal.shows(before).await;
    gate.notify_one();
    terminal.end().await
}

#[tokio::test]
async fn a_terminal_gets_a_spinner_until_the_first_token_and_a_closing_line() {
    let sandbox = Sandbox::new();
    let (code, screen) = watch_on_terminal(&sandbox, &["hi"], &[], "waiting for the model…").await;
    assert_eq!(code, 0, "{screen}");
    // The spinner is erased before the answer.
    let answer = screen.find("Hello from the mock model.").unwrap();
    let spinner = screen.rfind("waiting for the model…").unwrap();
    assert!(spinner < answer, "{screen:?}");
    assert!(screen[spinner..answer].contains("\r\x1b[2K"), "{screen:?}");
    // A dim closing line with tokens, cost and time.
    let closing = screen.lines().last().unwrap();
    assert!(
        closing.starts_with("\x1b[2mpincer: 1 model call, 21 tokens in, 10 out, $")
            && closing.ends_with(" s\x1b[0m"),
        "{closing:?}"
    );
}

#[tokio::test]
async fn no_color_keeps_the_terminal_plain() {
    let sandbox = Sandbox::new();
    let (code, screen) = watch_on_terminal(
        &sandbox,
        &["hi"],
        &[("NO_COLOR", "1")],
        "waiting for the model…",
    )
    .await;
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("\x1b[2m"), "{screen:?}");
    let closing = screen.lines().last().unwrap();
    assert!(
        closing.starts_with("pincer: 1 model call, 21 tokens in, 10 out, $"),
        "{closing:?}"
    );
}

/// A `--continue` an hour later sends the earlier turn exactly as the
/// first run sent it (its time line included), so the provider's prompt
/// cache is read rather than written again.
#[tokio::test]
async fn continue_repeats_the_previous_request_byte_for_byte() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let clock = sandbox.dir.path().join("clock");
    let at = |time: &str| {
        std::fs::write(&clock, time).unwrap();
    };
    let run_at = |args: &'static [&'static str]| {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        let mut cmd = sandbox.command(&full);
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
            .env("PINCER_CLOCK_FILE", &clock);
        finish(cmd, None)
    };
    at("2026-11-24T09:00:00Z");
    assert_eq!(run_at(&["first question"]).await.status.code(), Some(0));
    at("2026-11-24T10:00:00Z");
    assert_eq!(
        run_at(&["--continue", "second question"])
            .await
            .status
            .code(),
        Some(0)
    );
    let requests = mock.requests();
    let (first, second) = (&requests[0].body, &requests[1].body);
    assert_eq!(first["system"], second["system"]);
    assert_eq!(first["tools"], second["tools"]);
    // Cache breakpoints move to the newest turns; the content is the same.
    let strip = |message: &Value| {
        let mut message = message.clone();
        for block in message["content"].as_array_mut().unwrap() {
            block.as_object_mut().unwrap().remove("cache_control");
        }
        message
    };
    let sent: Vec<Value> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(strip)
        .collect();
    let again: Vec<Value> = second["messages"].as_array().unwrap()[..sent.len()]
        .iter()
        .map(strip)
        .collect();
    assert_eq!(again, sent);
    assert!(sent[0].to_string().contains("09:00"), "{}", sent[0]);
}

/// On a terminal the answer's Markdown is drawn with styles (a heading,
/// strong text, code, a bullet, a code block shown as it is); under
/// `NO_COLOR`, and when stdout is piped, the model's text comes unchanged.
#[tokio::test]
async fn a_terminal_shows_the_answer_as_styled_markdown() {
    let answer = "# Plan\nUse **care** and `cargo test`.\n- one\n```sh\necho **raw**\n```\n";
    let body = support::sse::anthropic_text(answer, 5);
    let sandbox = Sandbox::new();
    let (code, screen) = watch_on_terminal_replying(
        &sandbox,
        &["hi"],
        &[],
        "waiting for the model…",
        body.clone(),
    )
    .await;
    assert_eq!(code, 0, "{screen}");
    let styled = "\x1b[1;4mPlan\x1b[0m\nUse \x1b[1mcare\x1b[0m and \x1b[36mcargo test\x1b[0m.\n• one\n\x1b[2m```sh\x1b[0m\n\x1b[36mecho **raw**\x1b[0m\n\x1b[2m```\x1b[0m\n";
    assert!(screen.contains(styled), "{screen:?}");

    let sandbox = Sandbox::new();
    let (code, screen) = watch_on_terminal_replying(
        &sandbox,
        &["hi"],
        &[("NO_COLOR", "1")],
        "waiting for the model…",
        body.clone(),
    )
    .await;
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains(answer), "{screen:?}");

    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(body));
    let out = run(&sandbox, &mock, &["hi"], None).await;
    assert_eq!(text(&out.stdout), answer);
}
