//! End-to-end: the framework around the model — tool policy, loop
//! detection, hooks, steering and follow-ups, silent replies — with the
//! real binary and the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, spawn_anthropic, wait_until};

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, coalesce, requests_of, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call, anthropic_tool_calls};

fn user_config(sandbox: &Sandbox, toml: &str) {
    std::fs::write(sandbox.home().join("config.toml"), toml).unwrap();
}

fn hook_path(name: &str) -> String {
    format!("{}/fixtures/hooks/{name}", env!("CARGO_MANIFEST_DIR"))
}

async fn open(acp: &mut Acp, sandbox: &Sandbox, mode: &str) -> String {
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": mode}),
    )
    .await;
    session
}

/// The tools a model request offered, by name.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The result the model was sent for call `id`: its text and error flag.
fn tool_result(body: &Value, id: &str) -> (String, bool) {
    for message in body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                let text: Vec<&str> = block["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(|c| c["text"].as_str())
                    .collect();
                return (text.join("\n"), block["is_error"] == json!(true));
            }
        }
    }
    panic!("no result for {id} in {body}")
}

/// The text of every user message the model was sent, in order.
fn user_texts(body: &Value) -> Vec<String> {
    support::without_time_lines(body)["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| match &m["content"] {
            Value::String(text) => vec![text.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test]
async fn the_model_is_offered_only_what_the_policy_allows_and_cannot_call_the_rest() {
    let sandbox = Sandbox::new();
    user_config(
        &sandbox,
        "[tools]\ndeny = [\"BASH\", \"group:search\"]\n[tools.by_provider.\"anthropic/claude-sonnet-4-5\"]\ndeny = [\"process\"]\n",
    );
    // A project can take tools away but not give them back.
    sandbox.write(
        ".pincer/config.toml",
        "[tools]\nprofile = \"full\"\nallow = [\"*\"]\ndeny = [\"write\"]\n",
    );
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "b1",
        "bash",
        &json!({"command": "touch escaped"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox, "bypass").await;
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let requests = mock.requests();
    assert_eq!(
        offered(&requests[0].body),
        vec!["read", "edit", "ask_user", "todo", "task"]
    );
    // The system prompt lists the same tools.
    let system = requests[0].body["system"].to_string();
    assert!(
        system.contains("- read:") && system.contains("- edit:"),
        "{system}"
    );
    assert!(
        !system.contains("- bash:") && !system.contains("- write:"),
        "{system}"
    );
    assert_eq!(
        tool_result(&requests[1].body, "b1"),
        (
            "Tool bash is not available here (denied by `BASH` in [tools] allow/deny). Use only the tools you were given.".to_string(),
            true
        )
    );
    assert!(!sandbox.work().join("escaped").exists());

    // `pincer tools` says the same, with the step that removed each tool.
    let out = sandbox
        .command(&["tools", "--json", "--model", "anthropic/claude-sonnet-4-5"])
        .env("ANTHROPIC_API_KEY", "test-key")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines,
        vec![
            json!({"tool": "read", "offered": true}),
            json!({"tool": "write", "offered": false, "removedBy": "denied by `write` in [tools] allow/deny of the project's .pincer/config.toml"}),
            json!({"tool": "edit", "offered": true}),
            json!({"tool": "bash", "offered": false, "removedBy": "denied by `BASH` in [tools] allow/deny"}),
            json!({"tool": "process", "offered": false, "removedBy": "denied by `process` in [tools.by_provider.\"anthropic/claude-sonnet-4-5\"]"}),
            json!({"tool": "grep", "offered": false, "removedBy": "denied by `group:search` in [tools] allow/deny"}),
            json!({"tool": "find", "offered": false, "removedBy": "denied by `group:search` in [tools] allow/deny"}),
            json!({"tool": "ls", "offered": false, "removedBy": "denied by `group:search` in [tools] allow/deny"}),
            json!({"tool": "ask_user", "offered": true}),
            json!({"tool": "todo", "offered": true}),
        ]
    );
}

#[tokio::test]
async fn a_model_that_repeats_itself_is_warned_then_refused_then_stopped() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "alpha\n");
    let mock = MockModel::start().await;
    for n in 0..40 {
        mock.push(Reply::sse(anthropic_tool_call(
            &format!("r{n}"),
            "read",
            &json!({"path": "a.txt"}),
        )));
    }
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox, "default").await;
    let id = acp
        .send("session/prompt", prompt(&session, "read it"))
        .await;
    let (response, before) = acp.until_response(id).await;
    // The breaker ends the run at the 30th call; the user is told why.
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let requests = mock.requests();
    assert_eq!(requests.len(), 30);
    let last = coalesce(updates_of(&before)).pop().unwrap();
    assert_eq!(last["sessionUpdate"], "agent_message_chunk");
    assert!(
        last["content"]["text"].as_str().unwrap().starts_with(
            "Stopped: the agent was stuck in a loop (you have made this exact `read` call 30 times)"
        ),
        "{last}"
    );
    let body = &requests[29].body;
    assert_eq!(tool_result(body, "r8"), ("alpha".to_string(), false));
    assert_eq!(
        tool_result(body, "r9"),
        (
            "alpha\nWarning: you have made this exact `read` call 10 times. If you are not making progress, change your approach instead of repeating it.".to_string(),
            false
        )
    );
    let (refused, is_error) = tool_result(body, "r19");
    assert!(is_error);
    assert!(
        refused.starts_with("Not run: you have made this exact `read` call 20 times"),
        "{refused}"
    );
}

#[tokio::test]
async fn ping_pong_with_configured_thresholds_is_stopped() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "alpha\n");
    sandbox.write("b.txt", "beta\n");
    user_config(
        &sandbox,
        "[loop_detection]\nwarning = 3\nblock = 4\nbreaker = 6\n",
    );
    let mock = MockModel::start().await;
    for n in 0..10 {
        let path = if n % 2 == 0 { "a.txt" } else { "b.txt" };
        mock.push(Reply::sse(anthropic_tool_call(
            &format!("p{n}"),
            "read",
            &json!({"path": path}),
        )));
    }
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox, "default").await;
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(mock.requests().len(), 6);
    let body = &mock.requests()[5].body;
    assert!(
        tool_result(body, "p2")
            .0
            .contains("Warning: you have alternated")
    );
    assert!(tool_result(body, "p3").1, "the 4th call is refused");
    let text = coalesce(updates_of(&before)).pop().unwrap()["content"]["text"].clone();
    assert!(
        text.as_str()
            .unwrap()
            .contains("alternated between the same two calls 6 times"),
        "{text}"
    );
}

#[tokio::test]
async fn a_cycle_of_repeated_calls_is_a_no_progress_streak() {
    let sandbox = Sandbox::new();
    for name in ["a.txt", "b.txt", "c.txt"] {
        sandbox.write(name, name);
    }
    user_config(
        &sandbox,
        "[loop_detection]\nwarning = 3\nblock = 4\nbreaker = 6\n",
    );
    let mock = MockModel::start().await;
    for n in 0..12 {
        let path = ["a.txt", "b.txt", "c.txt"][n % 3];
        mock.push(Reply::sse(anthropic_tool_call(
            &format!("c{n}"),
            "read",
            &json!({"path": path}),
        )));
    }
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox, "default").await;
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    // The streak starts with the first repeat (call 4): it warns at call 6,
    // refuses from call 7 and stops the run at call 9.
    assert_eq!(mock.requests().len(), 9);
    let body = &mock.requests()[8].body;
    assert_eq!(tool_result(body, "c4"), ("b.txt".to_string(), false));
    assert!(
        tool_result(body, "c5")
            .0
            .ends_with("Warning: your last 3 calls only repeated earlier calls and got the same results. If you are not making progress, change your approach instead of repeating it.")
    );
    let (refused, is_error) = tool_result(body, "c6");
    assert!(
        is_error && refused.starts_with("Not run: your last 4 calls"),
        "{refused}"
    );
    let text = coalesce(updates_of(&before)).pop().unwrap()["content"]["text"].clone();
    assert!(
        text.as_str()
            .unwrap()
            .contains("your last 6 calls only repeated earlier calls"),
        "{text}"
    );
}

#[tokio::test]
async fn hooks_block_rewrite_and_fail_open_in_pipeline_order() {
    let sandbox = Sandbox::new();
    sandbox.write("secret.txt", "PASSWORD=hunter2\n");
    sandbox.write("victim.txt", "still here\n");
    let log = sandbox.home().join("hooks.jsonl");
    let record = format!("HOOK_LOG={} {}", log.display(), hook_path("record.py"));
    user_config(
        &sandbox,
        &format!(
            r#"[tools]
deny = ["ls"]

[loop_detection]
warning = 2
block = 2
breaker = 10

[[hooks]]
event = "session_start"
command = "{record}"

[[hooks]]
event = "user_prompt_submit"
command = "{record}"

[[hooks]]
event = "before_tool_call"
command = "{record}"
priority = 100

[[hooks]]
event = "before_tool_call"
command = "{block}"
matcher = "bash"

[[hooks]]
event = "before_tool_call"
command = "{rewrite}"
matcher = "bash"
priority = -1

[[hooks]]
event = "before_tool_call"
command = "{crash}"

[[hooks]]
event = "before_tool_call"
command = "{hang}"
timeout = 0.5

[[hooks]]
event = "after_tool_call"
command = "{redact}"
matcher = "read"

[[hooks]]
event = "after_tool_call"
command = "{colour}"
matcher = "edit"

[[hooks]]
event = "agent_end"
command = "{record}"

[[hooks]]
event = "session_end"
command = "{record}"
"#,
            block = hook_path("block_rm.py"),
            rewrite = hook_path("rewrite_params.py"),
            crash = hook_path("crash.sh"),
            hang = hook_path("hang.sh"),
            redact = hook_path("rewrite_result.py"),
            colour = hook_path("colour_result.sh"),
        ),
    );
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        // Policy first: the denied tool never reaches a hook.
        ("l1", "ls", "{}"),
        // A hook blocks it: the file stays.
        ("b1", "bash", r#"{"command": "rm victim.txt"}"#),
        // A hook rewrites it, and permission is asked for what will run.
        ("b2", "bash", r#"{"command": "echo hi"}"#),
        // An after hook rewrites the result.
        ("r1", "read", r#"{"path": "secret.txt"}"#),
        // Loop detection refuses the repeat before any hook sees it.
        ("r2", "read", r#"{"path": "secret.txt"}"#),
        // Whatever a hook answers is sanitised.
        (
            "e1",
            "edit",
            r#"{"path": "secret.txt", "edits": [{"oldText": "PASSWORD", "newText": "PW"}]}"#,
        ),
    ])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "do it")).await;
    let (response, before) = acp
        .drive(id, |method, _| {
            assert_eq!(method, "session/request_permission");
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let asked: Vec<Value> = requests_of(&before, "session/request_permission")
        .iter()
        .map(|r| r["params"]["toolCall"]["rawInput"].clone())
        .collect();
    assert_eq!(
        asked,
        vec![
            json!({"command": "echo hooked; echo hi"}),
            json!({"path": "secret.txt", "edits": [{"oldText": "PASSWORD", "newText": "PW"}]}),
        ]
    );
    let body = &mock.requests()[1].body;
    assert!(tool_result(body, "l1").0.contains("not available here"));
    assert_eq!(
        tool_result(body, "b1"),
        (
            "Blocked by a hook: Deleting files is not allowed in this project.".to_string(),
            true
        )
    );
    assert_eq!(tool_result(body, "b2"), ("hooked\nhi".to_string(), false));
    assert_eq!(
        tool_result(body, "r1"),
        ("[checked] PASSWORD=[redacted]".to_string(), false)
    );
    assert!(
        tool_result(body, "r2")
            .0
            .starts_with("Not run: you have made this exact `read` call 2 times")
    );
    assert_eq!(
        tool_result(body, "e1"),
        ("coloured result".to_string(), false)
    );
    assert!(sandbox.work().join("victim.txt").exists());

    acp.call("session/close", json!({"sessionId": session}))
        .await;
    // session_end runs in the background after the close. Every hook is
    // awaited before the next one starts (session_start before the first
    // prompt's hooks, agent_end before the prompt answers), so the log has
    // one order; only whole lines are read, a line being written is not.
    let read_log = || -> Vec<Value> {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        whole
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_until("the session_end hook ran", Duration::from_secs(10), || {
        read_log()
            .last()
            .is_some_and(|e| e["event"] == "session_end")
    })
    .await;
    let events = read_log();
    let seen: Vec<String> = events
        .iter()
        .map(|e| match e["tool_name"].as_str() {
            Some(tool) => format!(
                "{} {tool} {}",
                e["event"].as_str().unwrap(),
                e["tool_call_id"].as_str().unwrap()
            ),
            None => e["event"].as_str().unwrap().to_string(),
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            "session_start",
            "user_prompt_submit",
            "before_tool_call bash b1",
            "before_tool_call bash b2",
            "before_tool_call read r1",
            "before_tool_call edit e1",
            "agent_end",
            "session_end",
        ]
    );
    assert_eq!(events[1]["prompt"], "do it");
    assert_eq!(events[1]["session_id"], json!(session));
    assert_eq!(events[6]["stop_reason"], "end_turn");
}

#[tokio::test]
async fn a_prompt_hook_can_refuse_a_prompt() {
    let sandbox = Sandbox::new();
    user_config(
        &sandbox,
        &format!(
            "[[hooks]]\nevent = \"user_prompt_submit\"\ncommand = \"{}\"\nfail_closed = true\n",
            hook_path("crash.sh")
        ),
    );
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hello")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "refusal"}));
    assert_eq!(mock.requests().len(), 0);
    let said = coalesce(updates_of(&before)).pop().unwrap();
    assert!(
        said["content"]["text"]
            .as_str()
            .unwrap()
            .contains("hook exploded"),
        "{said}"
    );
}

/// A command that runs until `go` appears in the project; its comment
/// names the sandbox, so `process_running` finds only this test's.
fn wait_for_go(sandbox: &Sandbox) -> String {
    serde_json::json!({
        "command": format!("while [ ! -f go ]; do sleep 0.02; done; echo went # {}", marker(sandbox))
    })
    .to_string()
}

/// A string unique to this test: the name of its sandbox.
fn marker(sandbox: &Sandbox) -> String {
    sandbox
        .dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string()
}

/// Starts a prompt whose first tool waits for `go`, sends a second prompt
/// while it waits, then lets it finish. Returns what the editor saw from
/// then on, in order: each prompt's answer (`first end_turn`) and the
/// model's text (`text …`), so a test can tell which request answered when.
async fn second_prompt_while_busy(acp: &mut Acp, sandbox: &Sandbox, session: &str) -> Vec<String> {
    let first = acp.send("session/prompt", prompt(session, "first")).await;
    wait_until("the tool never started", Duration::from_secs(10), || {
        support::acp_client::process_running(&format!("done; echo went # {}", marker(sandbox)))
    })
    .await;
    let second = acp.send("session/prompt", prompt(session, "second")).await;
    // Requests are handled in order: once a later one is answered, the
    // second prompt has been taken in. (A little slack on top for a loaded
    // machine; the tool waits for `go` however long this takes.)
    let list = acp
        .send("session/list", json!({"cwd": sandbox.work()}))
        .await;
    let mut early = Vec::new();
    loop {
        let message = acp.next().await;
        if message.get("method").is_none() && message["id"] == json!(list) {
            break;
        }
        early.push(message);
    }
    assert!(
        early.iter().all(|m| m.get("method").is_some()),
        "no prompt may answer before the tool finishes: {early:?}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let mut seen: Vec<String> = Vec::new();
    let mut answers = 0;
    while answers < 2 {
        let message = tokio::time::timeout(Duration::from_secs(10), acp.next())
            .await
            .expect("both prompts answer");
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            let text = update["content"]["text"].as_str().unwrap();
            match seen.last_mut() {
                Some(last) if last.starts_with("text ") => last.push_str(text),
                _ => seen.push(format!("text {text}")),
            }
        } else if message.get("method").is_none() {
            let which = if message["id"] == json!(first) {
                "first"
            } else if message["id"] == json!(second) {
                "second"
            } else {
                continue;
            };
            answers += 1;
            seen.push(format!(
                "{which} {}",
                message["result"]["stopReason"].as_str().unwrap()
            ));
        }
    }
    seen
}

#[tokio::test]
async fn steering_skips_the_rest_of_the_batch_and_the_model_reads_the_new_message() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "alpha\n");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("w1", "bash", &wait_for_go(&sandbox)),
        ("r1", "read", r#"{"path": "a.txt"}"#),
    ])));
    mock.push(Reply::sse(anthropic_text(
        "Understood, doing the second thing.",
        50,
    )));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox, "bypass").await;
    let seen = second_prompt_while_busy(&mut acp, &sandbox, &session).await;
    // The first request is done once the second takes over, before the
    // model answers it.
    assert_eq!(
        seen,
        vec![
            "first end_turn",
            "text Understood, doing the second thing.",
            "second end_turn"
        ]
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[1].body;
    assert_eq!(tool_result(body, "w1"), ("went".to_string(), false));
    assert_eq!(
        tool_result(body, "r1"),
        (
            "Skipped: the user sent a new message while this batch ran; read it and decide again."
                .to_string(),
            true
        )
    );
    assert_eq!(user_texts(body), vec!["first", "second"]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn follow_ups_wait_for_the_run_to_end() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "alpha\n");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("w1", "bash", &wait_for_go(&sandbox)),
        ("r1", "read", r#"{"path": "a.txt"}"#),
    ])));
    mock.push(Reply::sse(anthropic_text("First done.", 50)));
    mock.push(Reply::sse(anthropic_text("Second done.", 60)));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox, "bypass").await;
    acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "queue", "value": "follow-up"}),
    )
    .await;
    let seen = second_prompt_while_busy(&mut acp, &sandbox, &session).await;
    // The first request answers after the model finished with it, when the
    // second message continues the run.
    assert_eq!(
        seen,
        vec![
            "text First done.",
            "first end_turn",
            "text Second done.",
            "second end_turn"
        ]
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    // The batch ran whole, and the model finished the first prompt before
    // it saw the second.
    assert_eq!(
        tool_result(&requests[1].body, "r1"),
        ("alpha".to_string(), false)
    );
    assert_eq!(user_texts(&requests[1].body), vec!["first"]);
    assert_eq!(user_texts(&requests[2].body), vec!["first", "second"]);
    let messages = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(messages[messages.len() - 2]["role"], "assistant");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_silent_reply_is_kept_but_never_shown() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("NO_REPLY", 20)));
    mock.push(Reply::sse(anthropic_text("NO, really.", 20)));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "ping")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let shown: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    assert_eq!(shown, Vec::<Value>::new());
    // A reply that only starts like the token is shown whole.
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (_, before) = acp.until_response(id).await;
    let shown: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].clone())
        .collect();
    assert_eq!(shown, vec![json!("NO, really.")]);
    // The model keeps its own silent reply in its history.
    let body = &mock.requests()[1].body;
    assert_eq!(body["messages"][1]["role"], "assistant");
    assert_eq!(body["messages"][1]["content"][0]["text"], "NO_REPLY");
    drop(acp);

    // A reload replays the conversation without it.
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (_, before) = acp.until_response(id).await;
    let replayed: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].clone())
        .collect();
    assert_eq!(replayed, vec![json!("NO, really.")]);
}

#[tokio::test]
async fn compaction_hooks_are_told_before_and_after() {
    let sandbox = Sandbox::new();
    let log = sandbox.home().join("hooks.jsonl");
    let record = format!("HOOK_LOG={} {}", log.display(), hook_path("record.py"));
    user_config(
        &sandbox,
        &format!(
            "title_model = \"none\"\n[[hooks]]\nevent = \"before_compaction\"\ncommand = \"{record}\"\n\n[[hooks]]\nevent = \"after_compaction\"\ncommand = \"{record}\"\n"
        ),
    );
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Hello there.", 40)));
    mock.push(Reply::sse(anthropic_text("Still here.", 60)));
    mock.push_side(Reply::sse(anthropic_text("## Goal\nSay hello", 50)));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    for text in ["hello", "and again", "/compact"] {
        let id = acp.send("session/prompt", prompt(&session, text)).await;
        let (response, _) = acp.until_response(id).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{text}");
    }
    let events: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(Value, Value, Value)> = events
        .iter()
        .map(|e| (e["event"].clone(), e["reason"].clone(), e["ok"].clone()))
        .collect();
    assert_eq!(
        seen,
        vec![
            (json!("before_compaction"), json!("manual"), Value::Null),
            (json!("after_compaction"), json!("manual"), json!(true)),
        ]
    );
    assert_eq!(events[0]["session_id"], json!(session));
    assert_eq!(events[0]["messages"], json!(4));
}
