//! End-to-end: the gateway protocol features the web chat page needs
//! (issue 17), over a real websocket to the real `pincer gateway` with the
//! mock model: renaming a session (`sessions.patch {label}`), tool events a
//! page can draw as cards (`kind`, `diffs`, a command's `output` while it
//! runs), usage and cost (`agent` `stream:"usage"`, the `final`'s `usage`,
//! the session row), the session's queue mode for `chat.send` on a busy
//! session, and tool cards rebuilt from `chat.history`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use std::sync::Arc;

use support::acp_client::{Sandbox, TIMEOUT, process_running};
use support::gateway::{Client, Gateway, gateway_command, new_key, new_token};
use support::mock_model::{MockModel, Reply};
use support::spawn_anthropic;
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_calls};

/// `value` with only `keys` (those it has).
fn pick(value: &Value, keys: &[&str]) -> Value {
    let mut out = Map::new();
    for key in keys {
        if let Some(v) = value.get(*key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// The `agent` events' data of `run` on `stream`, in order.
fn agent_data(client: &Client, run: &str, stream: &str) -> Vec<Value> {
    client
        .payloads_of("agent")
        .into_iter()
        .filter(|p| p["runId"] == run && p["stream"] == stream)
        .map(|p| p["data"].clone())
        .collect()
}

/// A marker unique to this test's sandbox, for its processes.
fn marker(sandbox: &Sandbox) -> String {
    sandbox
        .dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string()
}

/// The user's config: no approvals, so that tools run at once.
fn bypass(sandbox: &Sandbox) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "default_mode = \"bypass\"\n",
    )
    .unwrap();
}

/// Starts a run on a fresh key whose model reads a.txt, edits it and runs
/// a command that prints a line, waits for `go` in the project, and prints
/// another; waits for the first line to reach the client while the command
/// runs (returning that event), lets the command finish and returns after
/// the run's end.
struct ToolRun {
    sandbox: Sandbox,
    mock: MockModel,
    gateway: Gateway,
    client: Client,
    key: String,
    run: String,
    live: Value,
}

async fn tool_run() -> ToolRun {
    let sandbox = Sandbox::new();
    bypass(&sandbox);
    sandbox.write("a.txt", "alpha\nbeta\n");
    let mock = MockModel::start().await;
    let tag = marker(&sandbox);
    let command = format!(
        "echo first line; while [ ! -f go ]; do sleep 0.02; done; echo second line # {tag}"
    );
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("r1", "read", r#"{"path": "a.txt"}"#),
        (
            "e1",
            "edit",
            r#"{"path": "a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}"#,
        ),
        ("b1", "bash", &json!({ "command": command }).to_string()),
    ])));
    mock.push(Reply::sse(anthropic_text("Done.", 50)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "edit and run").await;
    // The command's first line reaches the client while it still runs.
    let live = client
        .next_where("the command's first line while it runs", |f| {
            f["event"] == "agent"
                && f["payload"]["stream"] == "tool"
                && f["payload"]["data"]["toolCallId"] == "b1"
                && f["payload"]["data"]["phase"] == "update"
                && f["payload"]["data"]["partialResult"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|o| o.contains("first line"))
        })
        .await;
    assert!(
        process_running(&format!("echo second line # {tag}")),
        "the command had ended before its output was seen"
    );
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    ToolRun {
        sandbox,
        mock,
        gateway,
        client,
        key,
        run,
        live,
    }
}

#[tokio::test]
async fn tool_events_carry_kind_diffs_and_the_commands_output_while_it_runs() {
    let t = tool_run().await;
    let path = t.sandbox.work().join("a.txt");
    let command = t.live["payload"]["data"]["output"].clone();
    assert_eq!(
        pick(
            &t.live["payload"]["data"],
            &["phase", "name", "kind", "toolCallId", "output"]
        ),
        json!({"phase": "update", "name": "bash", "kind": "execute", "toolCallId": "b1",
               "output": "first line"}),
        "{command}"
    );
    let tools = agent_data(&t.client, &t.run, "tool");
    // Every update of the command shows its output so far: the fenced
    // text OpenClaw's clients show, and the same text plain.
    let updates: Vec<&Value> = tools.iter().filter(|d| d["phase"] == "update").collect();
    assert!(!updates.is_empty());
    for update in &updates {
        let output = update["output"].as_str().unwrap();
        assert!(
            "first line\nsecond line".starts_with(output) && output.starts_with("first line"),
            "{update}"
        );
        assert_eq!(
            update["partialResult"],
            json!({"content": [{"type": "text", "text": format!("```console\n{output}\n```")}]}),
        );
    }
    let bash_start = tools
        .iter()
        .find(|d| d["toolCallId"] == "b1" && d["phase"] == "start")
        .unwrap();
    let others: Vec<Value> = tools
        .iter()
        .filter(|d| d["phase"] != "update")
        .cloned()
        .collect();
    assert_eq!(
        others,
        vec![
            json!({"phase": "start", "name": "read", "kind": "read", "toolCallId": "r1",
                   "title": "Read a.txt", "args": {"path": "a.txt"}}),
            json!({"phase": "result", "name": "read", "kind": "read", "toolCallId": "r1",
                   "isError": false, "result": {"content": [{"type": "text", "text": "alpha\nbeta"}]}}),
            json!({"phase": "start", "name": "edit", "kind": "edit", "toolCallId": "e1",
                   "title": "Edit a.txt",
                   "args": {"path": "a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}}),
            json!({"phase": "result", "name": "edit", "kind": "edit", "toolCallId": "e1",
                   "isError": false,
                   "result": {"content": [{"type": "text", "text": format!("Edited {}", path.display())}]},
                   "diffs": [{"path": path, "oldText": "alpha\nbeta\n", "newText": "alpha\ngamma\n"}]}),
            json!({"phase": "start", "name": "bash", "kind": "execute", "toolCallId": "b1",
                   "title": bash_start["title"], "args": bash_start["args"]}),
            json!({"phase": "result", "name": "bash", "kind": "execute", "toolCallId": "b1",
                   "isError": false,
                   "result": {"content": [{"type": "text", "text": "first line\nsecond line"}]},
                   "output": "first line\nsecond line"}),
        ]
    );
    assert_eq!(t.mock.violations(), Vec::<String>::new());
    drop(t.gateway);
}

#[tokio::test]
async fn chat_history_gives_a_reloaded_page_what_its_tool_cards_showed() {
    let mut t = tool_run().await;
    let path = t.sandbox.work().join("a.txt");
    let history = t
        .client
        .call_ok("chat.history", json!({"sessionKey": t.key}))
        .await;
    let messages: Vec<Value> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let mut m = m.clone();
            let object = m.as_object_mut().unwrap();
            // (OpenClaw's metadata and stop reasons have a test of
            // their own in gateway.rs.)
            for noise in ["timestamp", "model", "provider", "__openclaw", "stopReason"] {
                object.remove(noise);
            }
            m
        })
        .collect();
    // The prompt is named by its transcript entry, and as turn 1 (what
    // the page's "Rewind to here" and "Fork from here" send).
    let prompt_id = messages[0]["id"].clone();
    assert!(
        prompt_id.as_str().is_some_and(|id| id.starts_with('e')),
        "{prompt_id}"
    );
    let calls = &messages[1]["content"];
    let bash_args = calls[2]["arguments"].clone();
    let bash_title = calls[2]["title"].clone();
    assert_eq!(
        messages,
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "edit and run"}], "id": prompt_id, "turn": 1}),
            json!({"role": "assistant", "content": [
                {"type": "toolCall", "id": "r1", "name": "read", "kind": "read", "title": "Read a.txt",
                 "arguments": {"path": "a.txt"}},
                {"type": "toolCall", "id": "e1", "name": "edit", "kind": "edit", "title": "Edit a.txt",
                 "arguments": {"path": "a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}},
                {"type": "toolCall", "id": "b1", "name": "bash", "kind": "execute", "title": bash_title,
                 "arguments": bash_args},
            ]}),
            json!({"role": "toolResult", "toolCallId": "r1", "toolName": "read", "kind": "read",
                   "content": [{"type": "text", "text": "alpha\nbeta"}], "isError": false}),
            json!({"role": "toolResult", "toolCallId": "e1", "toolName": "edit", "kind": "edit",
                   "content": [{"type": "text", "text": "Successfully replaced 1 block(s) in a.txt.\n\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma"}],
                   "isError": false,
                   "diffs": [{"path": path, "oldText": "alpha\nbeta\n", "newText": "alpha\ngamma\n"}]}),
            json!({"role": "toolResult", "toolCallId": "b1", "toolName": "bash", "kind": "execute",
                   "content": [{"type": "text", "text": "first line\nsecond line"}], "isError": false}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
        ]
    );
    assert_eq!(bash_args, json!({"command": bash_title}));
    drop(t.gateway);
}

fn approx(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-12)
}

/// `{contextTokens, contextWindow, costUsd}` with the cost checked
/// approximately and then replaced by `cost`, for a whole comparison.
fn usage_shape(usage: &Value, cost: f64) -> Value {
    assert!(approx(&usage["costUsd"], cost), "{usage} (cost {cost})");
    let mut usage = usage.clone();
    usage["costUsd"] = json!(cost);
    usage
}

/// The row of `key` in `sessions.list`.
async fn row_of(client: &mut Client, key: &str) -> Value {
    let listed = client.call_ok("sessions.list", json!({})).await;
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row for {key}: {listed}"))
        .clone()
}

// One answer: 50 input and 12 output tokens of claude-sonnet-4-5 ($3 and
// $15 a million): 62 tokens in the context, $0.00033.
const CALL_COST: f64 = 0.00033;

#[tokio::test]
async fn usage_and_cost_reach_clients_each_turn_and_rows_keep_them_across_a_restart() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for text in ["One.", "Two.", "Three."] {
        mock.push(Reply::sse(anthropic_text(text, 50)));
    }
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let mut finals = Vec::new();
    let mut reports = Vec::new();
    for text in ["one", "two"] {
        let run = client.chat_send(&key, text).await;
        let end = client.chat_end(&run).await;
        finals.push(end["payload"]["usage"].clone());
        reports.extend(agent_data(&client, &run, "usage"));
    }
    let expected =
        |cost: f64| json!({"contextTokens": 62, "contextWindow": 200000, "costUsd": cost});
    let shown: Vec<Value> = reports
        .iter()
        .zip([CALL_COST, 2.0 * CALL_COST])
        .map(|(u, c)| usage_shape(u, c))
        .collect();
    assert_eq!(shown, vec![expected(CALL_COST), expected(2.0 * CALL_COST)]);
    assert_eq!(finals, reports, "each final repeats the run's usage");

    let row_usage = |row: &Value, cost: f64| {
        let picked = pick(
            row,
            &[
                "totalTokens",
                "totalTokensFresh",
                "contextTokens",
                "costUsd",
            ],
        );
        assert!(approx(&picked["costUsd"], cost), "{row}");
        let mut picked = picked;
        picked["costUsd"] = json!(cost);
        picked
    };
    let fresh = |cost: f64| json!({"totalTokens": 62, "totalTokensFresh": true, "contextTokens": 200000, "costUsd": cost});
    let row = row_of(&mut client, &key).await;
    assert_eq!(row_usage(&row, 2.0 * CALL_COST), fresh(2.0 * CALL_COST));
    drop(client);
    gateway.stop().await;

    // A new gateway reads them from the transcript, and the session's cost
    // goes on from its total.
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let row = row_of(&mut client, &key).await;
    assert_eq!(row_usage(&row, 2.0 * CALL_COST), fresh(2.0 * CALL_COST));
    let run = client.chat_send(&key, "three").await;
    let end = client.chat_end(&run).await;
    assert_eq!(
        usage_shape(&end["payload"]["usage"], 3.0 * CALL_COST),
        expected(3.0 * CALL_COST)
    );
    let row = row_of(&mut client, &key).await;
    assert_eq!(row_usage(&row, 3.0 * CALL_COST), fresh(3.0 * CALL_COST));
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// The `title` entries of a session's transcript, in order.
fn title_entries(sandbox: &Sandbox, session: &str) -> Vec<Value> {
    let file = walk(&sandbox.home().join("sessions"))
        .into_iter()
        .find(|p| p.file_name().unwrap().to_string_lossy() == format!("{session}.jsonl"))
        .unwrap_or_else(|| panic!("no transcript for {session}"));
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "title")
        .map(|e| pick(&e, &["title", "by_user"]))
        .collect()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn a_label_renames_the_session_everywhere_survives_a_restart_and_a_model_title_does_not_replace_it()
 {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Hello.", 30)));
    // The model's title is held until the user has renamed the session.
    let gate = Arc::new(tokio::sync::Notify::new());
    mock.push_side(Reply::Sse {
        body: anthropic_text("Greeting the user", 10),
        delay: std::time::Duration::ZERO,
        gate: Some(gate.clone()),
    });
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    cmd.env("RUST_LOG", "warn,pincer::acp::session=info");
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let mut client = gateway.admin().await;
    let mut watcher = gateway.operator(&["operator.read"], &[]).await;
    watcher.call_ok("sessions.subscribe", json!({})).await;
    let key = new_key();
    let run = client.chat_send(&key, "say hello").await;
    client.chat_end(&run).await;
    mock.wait_for_side_requests(1, TIMEOUT).await;

    // Hostile and broken labels are refused, each saying why.
    let too_long = "x".repeat(201);
    for (label, says) in [
        (json!(""), "`label` is empty"),
        (json!("   "), "`label` is empty"),
        (json!(too_long), "`label` has 201 characters"),
        (json!("two\nlines"), "`label` holds a control character"),
        (json!("\u{1b}[31mred"), "`label` holds a control character"),
        (json!(42), "sessions.patch: `label` must be a string"),
    ] {
        let res = client
            .call("sessions.patch", json!({"key": key, "label": label}))
            .await;
        assert_eq!(res["ok"], json!(false), "{res}");
        let message = res["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(says), "{label}: {message}");
    }
    let label = format!("Renamed: {}", "é".repeat(191));
    assert_eq!(label.chars().count(), 200);
    let patched = client
        .call_ok(
            "sessions.patch",
            json!({"key": key, "label": format!("  {label} ")}),
        )
        .await;
    let names = ["key", "label", "derivedTitle", "displayName"];
    let named = json!({"key": key, "label": label, "derivedTitle": label, "displayName": label});
    assert_eq!(pick(&patched["entry"], &names), named);
    let changed = watcher
        .next_where("sessions.changed for the rename", |f| {
            f["event"] == "sessions.changed" && f["payload"]["reason"] == "patch"
        })
        .await;
    assert_eq!(changed["payload"]["key"], json!(key));
    assert_eq!(pick(&changed["payload"]["session"], &names), named);
    let session_id = patched["sessionId"].as_str().unwrap().to_string();

    // The model's title comes back now, and is not used.
    gate.notify_one();
    gateway
        .stderr
        .wait_line(TIMEOUT, |l| {
            l.contains("the user named the session meanwhile")
                .then_some(())
        })
        .await
        .unwrap_or_else(|| {
            panic!(
                "the model's title was not dropped:\n{}",
                gateway.stderr.text()
            )
        });
    assert_eq!(
        title_entries(&sandbox, &session_id),
        vec![json!({"title": label, "by_user": true})]
    );
    assert_eq!(pick(&row_of(&mut client, &key).await, &names), named);
    let after_rename: Vec<Value> = watcher
        .payloads_of("sessions.changed")
        .into_iter()
        .skip_while(|p| p["reason"] != "patch")
        .filter(|p| p["reason"] == "title")
        .collect();
    assert!(after_rename.len() <= 1, "{after_rename:?}");
    drop((client, watcher));
    gateway.stop().await;

    // After a restart: the gateway's list, `pincer sessions list` and an
    // editor's session/list all show the label.
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    assert_eq!(pick(&row_of(&mut client, &key).await, &names), named);
    let out = sandbox
        .command(&["sessions", "list", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| pick(&serde_json::from_str(l).unwrap(), &["sessionId", "title"]))
        .collect();
    assert_eq!(rows, vec![json!({"sessionId": session_id, "title": label})]);
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let listed = acp.call("session/list", json!({})).await;
    let sessions: Vec<Value> = listed["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|s| pick(s, &["sessionId", "title"]))
        .collect();
    assert_eq!(
        sessions,
        vec![json!({"sessionId": session_id, "title": label})]
    );
    drop(acp);

    // A delete is announced to subscribers with the key it had.
    let mut watcher = gateway.operator(&["operator.read"], &[]).await;
    watcher.call_ok("sessions.subscribe", json!({})).await;
    let deleted = client.call_ok("sessions.delete", json!({"key": key})).await;
    assert_eq!(deleted, json!({"ok": true, "key": key, "deleted": true}));
    let changed = watcher
        .next_where("sessions.changed for the delete", |f| {
            f["event"] == "sessions.changed" && f["payload"]["reason"] == "delete"
        })
        .await;
    assert_eq!(
        pick(&changed["payload"], &["reason", "key", "sessionId"]),
        json!({"reason": "delete", "key": key, "sessionId": session_id})
    );
    let listed = client.call_ok("sessions.list", json!({})).await;
    assert_eq!(listed["sessions"], json!([]));
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// The user texts of a model request, time lines left out.
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

/// The text and error flag of the tool result for `id` in a request.
fn tool_result(body: &Value, id: &str) -> (String, bool) {
    for message in body["messages"].as_array().unwrap() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                let text: Vec<&str> = block["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["text"].as_str())
                    .collect();
                return (text.join("\n"), block["is_error"] == json!(true));
            }
        }
    }
    panic!("no result for {id} in {body}")
}

/// The model's next answer runs a command that waits for `go` in the
/// project, then reads a.txt.
fn push_busy_turn(sandbox: &Sandbox, mock: &MockModel) {
    sandbox.write("a.txt", "alpha\n");
    let command = format!(
        "while [ ! -f go ]; do sleep 0.02; done; echo went # {}",
        marker(sandbox)
    );
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("w1", "bash", &json!({ "command": command }).to_string()),
        ("r1", "read", r#"{"path": "a.txt"}"#),
    ])));
}

/// Sends "first" (a busy turn), and once its command runs, "second"
/// without a queue mode of its own; lets the command finish. Returns both
/// runs' ends.
async fn first_then_second(client: &mut Client, sandbox: &Sandbox, key: &str) -> (Value, Value) {
    let first = client.chat_send(key, "first").await;
    let running = format!("done; echo went # {}", marker(sandbox));
    support::wait_until("the waiting command never started", TIMEOUT, || {
        process_running(&running)
    })
    .await;
    let second = client.chat_send(key, "second").await;
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let first = client.chat_end(&first).await;
    let second = client.chat_end(&second).await;
    (first["payload"].clone(), second["payload"].clone())
}

#[tokio::test]
async fn a_followup_queue_mode_set_by_sessions_patch_holds_for_chat_send_after_a_restart() {
    let sandbox = Sandbox::new();
    bypass(&sandbox);
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Hello.", 30)));
    push_busy_turn(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text("First done.", 50)));
    mock.push(Reply::sse(anthropic_text("Second done.", 60)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "hello").await;
    client.chat_end(&run).await;
    let patched = client
        .call_ok(
            "sessions.patch",
            json!({"key": key, "queueMode": "followup"}),
        )
        .await;
    assert_eq!(patched["entry"]["queueMode"], "followup", "{patched}");
    drop(client);
    gateway.stop().await;

    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let (first, second) = first_then_second(&mut client, &sandbox, &key).await;
    assert_eq!(first["state"], "final", "{first}");
    assert_eq!(first["message"]["content"][0]["text"], "First done.");
    assert_eq!(second["state"], "final", "{second}");
    assert_eq!(second["message"]["content"][0]["text"], "Second done.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    // The batch ran whole; "second" came after the first run's answer.
    assert_eq!(
        tool_result(&requests[2].body, "w1"),
        ("went".to_string(), false)
    );
    assert_eq!(
        tool_result(&requests[2].body, "r1"),
        ("alpha".to_string(), false)
    );
    assert_eq!(user_texts(&requests[2].body), vec!["hello", "first"]);
    assert_eq!(
        user_texts(&requests[3].body),
        vec!["hello", "first", "second"]
    );
    assert_eq!(row_of(&mut client, &key).await["queueMode"], "followup");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_steer_queue_mode_set_by_sessions_patch_delivers_chat_send_into_the_running_turn() {
    let sandbox = Sandbox::new();
    // The user's default is follow-up; the session is set to steer.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "default_mode = \"bypass\"\nqueue_mode = \"follow-up\"\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    push_busy_turn(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text(
        "Understood, the second thing.",
        50,
    )));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let patched = client
        .call_ok("sessions.patch", json!({"key": key, "queueMode": "steer"}))
        .await;
    assert_eq!(patched["ok"], json!(true), "{patched}");
    let (first, second) = first_then_second(&mut client, &sandbox, &key).await;
    assert_eq!(first["state"], "final", "{first}");
    assert_eq!(second["state"], "final", "{second}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        tool_result(&requests[1].body, "w1"),
        ("went".to_string(), false)
    );
    assert_eq!(
        tool_result(&requests[1].body, "r1"),
        (
            "Skipped: the user sent a new message while this batch ran; read it and decide again."
                .to_string(),
            true
        )
    );
    assert_eq!(user_texts(&requests[1].body), vec!["first", "second"]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn chat_send_images_in_the_bridges_shape_and_as_a_browsers_data_url_reach_the_model() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Two dots.", 30)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let run = uuid::Uuid::new_v4().to_string();
    let attachments = json!([
        // As `pincer acp --connect` sends an editor's image (src/bridge/wire.rs).
        {"type": "image", "mimeType": "image/png", "fileName": "dot.png", "content": png},
        // As a page sends what `FileReader.readAsDataURL` gave it.
        {"type": "image", "fileName": "pasted.png", "content": format!("data:image/png;base64,{png}")},
    ]);
    client
        .call_ok(
            "chat.send",
            json!({"sessionKey": key, "message": "what are these?", "idempotencyKey": run,
                   "attachments": attachments}),
        )
        .await;
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let body = support::without_time_lines(&mock.requests()[0].body);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let images: Vec<Value> = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "image")
        .map(|b| b["source"].clone())
        .collect();
    let source = json!({"type": "base64", "media_type": "image/png", "data": png});
    assert_eq!(images, vec![source.clone(), source]);
    assert_eq!(
        user_texts(&mock.requests()[0].body),
        vec!["what are these?"]
    );
    // A data URL that is not base64 is refused, and says which attachment.
    let res = client
        .call(
            "chat.send",
            json!({"sessionKey": key, "message": "and this?", "idempotencyKey": uuid::Uuid::new_v4().to_string(),
                   "attachments": [{"type": "image", "content": "data:image/png;base64,@@not base64@@"}]}),
        )
        .await;
    assert_eq!(
        pick(&res["error"], &["message"]),
        json!({"message": "attachments[0].content is not base64"})
    );
    assert_eq!(mock.requests().len(), 1);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// A session key is printable text: one with an escape sequence or a bidi
/// override (which `pincer sessions list` would print on the owner's
/// terminal) is refused wherever keys enter, saying why.
#[tokio::test]
async fn a_session_key_with_a_control_character_is_refused() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let token = new_token();
    let gateway = Gateway::spawn(
        gateway_command(&sandbox, &mock, Some(&token), &[]),
        Some(&token),
    )
    .await;
    let mut client = gateway.admin().await;
    for key in [
        "x\u{1b}]0;owned\u{7}",
        "tab\tkey",
        "a\u{9b}b",
        "evil\u{202e}gnp",
    ] {
        for (method, params) in [
            (
                "chat.send",
                json!({"sessionKey": key, "message": "hi", "idempotencyKey": new_key()}),
            ),
            ("chat.history", json!({"sessionKey": key})),
            ("sessions.patch", json!({"key": key, "label": "x"})),
            ("sessions.reset", json!({"key": key})),
        ] {
            let res = client.call(method, params).await;
            assert_eq!(res["ok"], json!(false), "{method} {key:?}: {res}");
            let message = res["error"]["message"].as_str().unwrap();
            assert!(
                message.contains("holds a control character"),
                "{method} {key:?}: {message}"
            );
        }
    }
    assert_eq!(mock.requests().len(), 0);
}

/// A long reply streamed in small pieces costs a client that builds the
/// text from deltas (pincer's page and bridge, `pincer.chat-deltas`) bytes
/// linear in its length, and an OpenClaw client (which reads the
/// cumulative `message` of `chat`) gets the text so far in `chat` only,
/// never again in the `agent` `assistant` event. Each frame used to carry
/// the whole text twice: some 2,000 bytes per character here.
#[tokio::test]
async fn a_long_reply_costs_each_client_bytes_linear_in_its_length() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let parts: Vec<String> = (0..2000).map(|n| format!("word{n:04}, ")).collect();
    let whole = parts.concat();
    assert_eq!(whole.len(), 20_000);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    // Spaced out, so that the pieces reach the gateway one by one.
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: std::time::Duration::from_millis(1),
        gate: None,
    });
    let token = new_token();
    let gateway = Gateway::spawn(
        gateway_command(&sandbox, &mock, Some(&token), &[]),
        Some(&token),
    )
    .await;
    let mut openclaw = gateway.admin().await;
    let mut lean = gateway
        .operator(
            // A writer: a reader may follow only sessions that exist, and
            // this one asks about the key before its first message.
            &["operator.read", "operator.write"],
            &["session-scoped-events", "pincer.chat-deltas"],
        )
        .await;
    let key = new_key();
    lean.call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let run = openclaw.chat_send(&key, "Say a lot.").await;
    openclaw.chat_end(&run).await;
    let end = lean.chat_end(&run).await;
    assert_eq!(
        end["payload"]["message"]["content"][0]["text"],
        json!(whole)
    );

    let of_run = |client: &Client| -> Vec<Value> {
        client
            .events
            .iter()
            .filter(|e| e["payload"]["runId"] == json!(run))
            .cloned()
            .collect()
    };
    let bytes = |events: &[Value]| events.iter().map(|e| e.to_string().len()).sum::<usize>();

    // The lean client: the text from the deltas, each piece once.
    let events = of_run(&lean);
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "chat" && e["payload"]["state"] == "delta")
        .map(|e| &e["payload"])
        .collect();
    // Small deltas (pieces that arrive together may travel together).
    assert!(deltas.len() >= 50, "{} deltas", deltas.len());
    let built: String = deltas
        .iter()
        .map(|d| d["deltaText"].as_str().unwrap())
        .collect();
    assert_eq!(built, whole);
    // Its first delta carries the text so far, the others not.
    assert_eq!(
        deltas[0]["message"]["content"][0]["text"],
        deltas[0]["deltaText"]
    );
    assert!(deltas[1..].iter().all(|d| d.get("message").is_none()));
    // Linear: each character a few times (the chat delta, the agent
    // delta, the final message) plus a frame's fields per delta; the text
    // so far with each delta would be some 20,000 bytes per delta here.
    let total = bytes(&events);
    let bound = 3 * whole.len() + 500 * deltas.len();
    assert!(
        total <= bound,
        "{total} bytes for {} characters in {} deltas",
        whole.len(),
        deltas.len()
    );

    // The OpenClaw client: the cumulative text in `chat` only.
    let events = of_run(&openclaw);
    let assistant: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "agent" && e["payload"]["stream"] == "assistant")
        .map(|e| &e["payload"]["data"])
        .collect();
    assert_eq!(assistant.len(), deltas.len());
    for data in &assistant {
        let fields: Vec<&String> = data.as_object().unwrap().keys().collect();
        assert_eq!(fields, vec!["delta"], "{data}");
    }
    let last = events
        .iter()
        .rev()
        .find(|e| e["event"] == "chat" && e["payload"]["state"] == "delta")
        .unwrap();
    assert_eq!(
        last["payload"]["message"]["content"][0]["text"],
        json!(whole)
    );
}

/// A client that follows only the sessions it shows (`session-scoped-events`)
/// stops hearing one with `chat.unsubscribe`, as pincer's web page does
/// when it switches away and its bridge when the editor closes a session.
#[tokio::test]
async fn chat_unsubscribe_stops_a_session_s_events_and_keeps_the_others() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let (left, shown) = (new_key(), new_key());
    for key in [&left, &shown] {
        mock.push(Reply::sse(anthropic_text("Hello.", 5)));
        let run = admin.chat_send(key, "hi").await;
        admin.chat_end(&run).await;
    }
    let mut page = gateway
        .operator(&["operator.read"], &["session-scoped-events"])
        .await;
    for key in [&left, &shown] {
        page.call_ok("chat.history", json!({"sessionKey": key, "limit": 1}))
            .await;
    }
    let answer = page
        .call_ok("chat.unsubscribe", json!({"sessionKey": left}))
        .await;
    assert_eq!(answer, json!({"ok": true}));

    // The session it left streams first, then the one it shows: once the
    // page has the second run's end, anything of the first was before it.
    mock.push(Reply::sse(anthropic_text("Not for the page.", 5)));
    let quiet = admin.chat_send(&left, "more").await;
    admin.chat_end(&quiet).await;
    mock.push(Reply::sse(anthropic_text("For the page.", 5)));
    let heard = admin.chat_send(&shown, "more").await;
    admin.chat_end(&heard).await;
    let end = page.chat_end(&heard).await;
    assert_eq!(
        end["payload"]["message"]["content"][0]["text"],
        json!("For the page.")
    );
    let runs: std::collections::BTreeSet<&str> = page
        .events
        .iter()
        .filter(|e| e["event"] == "chat" || e["event"] == "agent")
        .filter_map(|e| e["payload"]["runId"].as_str())
        .collect();
    assert_eq!(runs, std::collections::BTreeSet::from([heard.as_str()]));
}
