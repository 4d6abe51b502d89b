//! End-to-end: the gateway protocol features the web chat page needs
//! (issue 17), over a real websocket to the real `pincer gateway` with the
//! mock model: renaming a session (`sessions.patch {label}`), tool events a
//! page can draw as cards (`kind`, `diffs`, a command's `output` while it
//! runs), usage and cost (`agent` `stream:"usage"`, the `final`'s `usage`,
//! the session row), the session's queue mode for `chat.send` on a busy
//! session, and tool cards rebuilt from `chat.history`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use support::acp_client::{Sandbox, TIMEOUT, process_running};
use support::gateway::{Client, Gateway, new_key};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_calls};
use support::wait_until;

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

#[tokio::test]
async fn tool_events_carry_kind_diffs_and_the_commands_output_while_it_runs() {
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
                && f["payload"]["data"]["output"]
                    .as_str()
                    .is_some_and(|o| o.contains("first line"))
        })
        .await;
    assert!(
        process_running(&format!("echo second line # {tag}")),
        "the command had ended before its output was seen"
    );
    assert_eq!(
        pick(&live["payload"]["data"], &["phase", "name", "kind", "toolCallId", "output"]),
        json!({"phase": "update", "name": "bash", "kind": "execute", "toolCallId": "b1",
               "output": "first line"})
    );
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let tools = agent_data(&client, &run, "tool");
    std::fs::write("/tmp/gwnotes/tools.json", serde_json::to_string_pretty(&tools).unwrap()).unwrap();
    let usage = agent_data(&client, &run, "usage");
    std::fs::write("/tmp/gwnotes/usage.json", serde_json::to_string_pretty(&(usage, end)).unwrap()).unwrap();
    assert_eq!(mock.violations(), Vec::<String>::new());
}
