//! `pincer acp --connect` against OpenClaw's gateway: the real binary, driven
//! over ACP as an editor drives it, talks to a mock OpenClaw 2026.9.6 gateway
//! (`support::openclaw_gateway`) that replays recorded OpenClaw frames
//! (`fixtures/openclaw-gateway/`, the shapes of `../shared/GATEWAY-NOTES.md`).
//! Each test compares the ACP updates and results with what the bridge's spec
//! (docs/bridge.md) promises, and what the mock received with what OpenClaw
//! expects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, requests_of, updates_of};
use support::openclaw_gateway::{OpenClawGateway, Script};
use support::{prompt, selected};

/// The gateway's shared token.
const TOKEN: &str = "openclaw-gateway-token-0123456789abcdef";

/// `policy.tickIntervalMs` of the mock (which ticks every half of it):
/// short, so that ticks interleave with the frames of a test, as they do on
/// a live line.
const TICK_MS: u64 = 1000;

/// The key and remote directory of the session the gateway already has.
const MAIN_KEY: &str = "agent:main:main";
const MAIN_CWD: &str = "/srv/project";

/// `pincer acp --connect URL --token-file FILE <extra>`; the token sits in a
/// file of the sandbox, never on the command line.
fn spawn_bridge(sandbox: &Sandbox, url: &str, token: &str, extra: &[&str]) -> Acp {
    let file = sandbox.dir.path().join("gateway-token");
    std::fs::write(&file, token).unwrap();
    let file = file.display().to_string();
    let mut args = vec!["acp", "--connect", url, "--token-file", &file];
    args.extend_from_slice(extra);
    Acp::spawn(sandbox.command(&args))
}

/// A mock OpenClaw gateway that has the main session, and a bridge to it,
/// initialized.
async fn connected(extra: &[&str]) -> (Sandbox, OpenClawGateway, Acp) {
    let gateway = OpenClawGateway::start(TOKEN, TICK_MS).await;
    gateway.add_session(
        json!({"key": MAIN_KEY, "kind": "direct", "updatedAt": 1_795_500_000_000u64,
        "derivedTitle": "Fix the build", "spawnedCwd": MAIN_CWD}),
    );
    let sandbox = Sandbox::new();
    let mut acp = spawn_bridge(&sandbox, &gateway.url(), TOKEN, extra);
    acp.initialize().await;
    (sandbox, gateway, acp)
}

/// `session/new` from the editor's directory; returns the whole result.
async fn new_session(acp: &mut Acp, sandbox: &Sandbox) -> Value {
    acp.call(
        "session/new",
        json!({"cwd": sandbox.work(), "mcpServers": []}),
    )
    .await
}

/// Queues fixture `name`, prompts `text` and returns the response and the
/// updates before it (answering no client requests).
async fn prompt_with(
    acp: &mut Acp,
    gateway: &OpenClawGateway,
    session: &str,
    text: &str,
    fixture: &str,
) -> (Value, Vec<Value>) {
    gateway.queue(Script::fixture(fixture));
    let id = acp.send("session/prompt", prompt(session, text)).await;
    let (response, before) = acp.until_response(id).await;
    (response, updates_of(&before))
}

/// A new session's key.
async fn session_key(acp: &mut Acp, sandbox: &Sandbox) -> String {
    new_session(acp, sandbox).await["sessionId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The run id of the first `chat.send` the gateway received.
fn first_run(gateway: &OpenClawGateway) -> String {
    gateway.params_of("chat.send")[0]["idempotencyKey"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The texts of the `kind` chunks among `updates`, in order.
fn chunks(updates: &[Value], kind: &str) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect()
}

fn message_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
}

fn thought_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}})
}

fn text_content(text: &str) -> Value {
    json!([{"type": "content", "content": {"type": "text", "text": text}}])
}

/// The `_meta` every session result carries (spec "Session results"); the
/// URL as the bridge parsed it, with its root path.
fn remote_meta(gateway: &OpenClawGateway, key: &str, cwd: Option<&str>) -> Value {
    let url = format!("{}/", gateway.url());
    json!({"pincer/remote": {"gateway": url, "sessionKey": key, "cwd": cwd}})
}

fn is_uuid_v4(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok_and(|u| u.get_version_num() == 4)
}

// GATEWAY-NOTES §3 (handshake: challenge, connect, hello-ok), §7 step 1 (the
// bridge answers initialize only after hello-ok).
#[tokio::test]
async fn initialize_is_answered_after_hello_ok_with_the_remote_capabilities() {
    let gateway = OpenClawGateway::start(TOKEN, TICK_MS).await;
    gateway.hold_hellos(true);
    let sandbox = Sandbox::new();
    let mut acp = spawn_bridge(&sandbox, &gateway.url(), TOKEN, &[]);
    let id = acp
        .send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    gateway.wait_requests("connect", 1).await;
    // While the gateway holds its hello, initialize cannot succeed: the
    // bridge gives up on this dial with an error that names the gateway.
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32603, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains(&gateway.url()), "{message}");
    assert_eq!(gateway.hellos(), 0);

    gateway.hold_hellos(false);
    let id = acp
        .send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert!(gateway.hellos() >= 1);
    let result = response["result"].clone();
    assert_eq!(
        result,
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
                // The ACP library's default: no auth capabilities.
                "auth": {},
            },
            "agentInfo": {"name": "pincer", "title": "pincer (remote)", "version": env!("CARGO_PKG_VERSION")},
            "authMethods": [],
        })
    );
    let connect = gateway.params_of("connect").pop().unwrap();
    let client = &connect["client"];
    assert!(client["version"].is_string() && client["platform"].is_string());
    assert_eq!(
        connect,
        json!({
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "displayName": "pincer acp", "version": client["version"],
                       "platform": client["platform"], "mode": "cli"},
            "caps": ["tool-events", "exec-approvals", "session-scoped-events", "pincer.chat-deltas"],
            "role": "operator",
            "scopes": ["operator.admin"],
            "auth": {"token": TOKEN},
        })
    );
}

// GATEWAY-NOTES §4 (acp-bridge:<uuid> keys, run id = idempotency key), §5
// chat.send (no working-directory prefix in pincer's bridge), §6 (the chat
// example).
#[tokio::test]
async fn session_new_makes_an_acp_bridge_key_and_a_prompt_is_sent_as_written() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let id = acp
        .send(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    let result = &response["result"];
    let key = result["sessionId"].as_str().unwrap().to_string();
    let uuid = key.strip_prefix("acp-bridge:").unwrap();
    assert!(is_uuid_v4(uuid), "{key}");
    // A new session has no row yet; OpenClaw's hello-ok names no default cwd.
    assert_eq!(result["_meta"], remote_meta(&gateway, &key, None));
    let info: Vec<&Value> = before
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["sessionUpdate"] == "session_info_update")
        .collect();
    assert_eq!(info.len(), 1, "{before:?}");
    assert_eq!(info[0]["_meta"], remote_meta(&gateway, &key, None));

    gateway.queue(Script::fixture("reply"));
    let id = acp.send("session/prompt", prompt(&key, "hello")).await;
    let (response, mut before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        updates_of(&before),
        vec![message_chunk("Mock gateway reply")]
    );
    // After the turn the row is read again (the gateway made it on first use,
    // titled by the message): a session_info_update.
    let title = |m: &Value| m["params"]["update"]["title"] == "hello";
    while !before.iter().any(title) {
        before.push(acp.next().await);
    }
    let info = before.iter().find(|m| title(m)).unwrap();
    assert_eq!(
        info["params"],
        json!({"sessionId": key, "update": {"sessionUpdate": "session_info_update", "title": "hello",
            "updatedAt": "2026-11-24T07:14:34.767Z", "_meta": remote_meta(&gateway, &key, None)}})
    );
    let send = gateway.params_of("chat.send").pop().unwrap();
    let run = send["idempotencyKey"].as_str().unwrap();
    assert!(is_uuid_v4(run), "{send}");
    assert_eq!(
        send,
        json!({"sessionKey": key, "message": "hello", "idempotencyKey": run})
    );
}

// GATEWAY-NOTES §6 "Protocol-4 delta semantics": coalesced suffixes in one
// frame, cumulative message, final with the last characters.
#[tokio::test]
async fn coalesced_deltas_stream_every_character_exactly_once() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) = prompt_with(&mut acp, &gateway, &key, "greet", "chat-deltas").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        chunks(&updates, "agent_message_chunk"),
        vec!["Hel", "lo, wo", "rld! Ünïcödé 🦀", "\nSecond line", "."]
    );
    assert_eq!(
        chunks(&updates, "agent_message_chunk").concat(),
        "Hello, world! Ünïcödé 🦀\nSecond line."
    );
    assert_eq!(updates.len(), 5, "{updates:?}");
}

// GATEWAY-NOTES §6 "Protocol-4 delta semantics": replace:true with the full
// replacement in deltaText; the spec: the rewritten part is not sent, the
// stream goes on from the new text.
#[tokio::test]
async fn a_replace_rewrite_sends_nothing_for_the_rewritten_part_and_goes_on_from_the_new_text() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) = prompt_with(&mut acp, &gateway, &key, "greet", "chat-replace").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        updates,
        vec![
            message_chunk("Helo"),
            message_chunk(" wrld"),
            message_chunk(", again"),
            message_chunk("."),
        ]
    );
}

// GATEWAY-NOTES §6 chat table: thinking blocks of the cumulative message →
// agent_thought_chunk; text blocks joined with "\n".
#[tokio::test]
async fn thinking_blocks_become_thought_chunks_and_text_blocks_join_with_newlines() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) = prompt_with(&mut acp, &gateway, &key, "hi", "thinking").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        updates,
        vec![
            thought_chunk("The user"),
            thought_chunk(" wants a greeting."),
            message_chunk("Hi"),
            message_chunk(" there"),
            message_chunk("\nBye"),
        ]
    );
}

// GATEWAY-NOTES §6 "agent": tool stream start/update/result with sessionKey;
// lifecycle and assistant streams ignored.
#[tokio::test]
async fn agent_tool_events_become_tool_calls_and_the_other_streams_are_ignored() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) =
        prompt_with(&mut acp, &gateway, &key, "build it", "tool-events").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let read_result = json!({"content": [{"type": "text", "text": "fn main() {}\n"}]});
    let exec_result =
        json!({"content": [{"type": "text", "text": "error: could not compile `demo`"}]});
    assert_eq!(
        updates,
        vec![
            message_chunk("Reading the file."),
            json!({"sessionUpdate": "tool_call", "toolCallId": "tc-read",
                   "title": "read: path: /srv/project/src/main.rs", "kind": "read", "status": "in_progress",
                   "rawInput": {"path": "/srv/project/src/main.rs"},
                   "locations": [{"path": "/srv/project/src/main.rs"}]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "tc-read", "status": "in_progress",
                   "content": text_content("fn main() {")}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "tc-read", "status": "completed",
                   "content": text_content("fn main() {}\n"), "rawOutput": read_result}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "tc-exec",
                   "title": "exec: command: cargo test", "kind": "execute", "status": "in_progress",
                   "rawInput": {"command": "cargo test"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "tc-exec", "status": "failed",
                   "content": text_content("error: could not compile `demo`"), "rawOutput": exec_result}),
            message_chunk(" It does not compile."),
        ]
    );
}

/// Prompts the approval fixture `fixture` and answers the permission request
/// with `answer`; returns the prompt's response, the permission requests and
/// the updates.
async fn approval_turn(
    acp: &mut Acp,
    gateway: &OpenClawGateway,
    key: &str,
    fixture: &str,
    answer: Value,
) -> (Value, Vec<Value>, Vec<Value>) {
    gateway.queue(Script::fixture(fixture));
    let id = acp.send("session/prompt", prompt(key, "clean up")).await;
    let (response, before) = acp.drive(id, |_, _| answer.clone()).await;
    let asks = requests_of(&before, "session/request_permission")
        .into_iter()
        .map(|m| m["params"].clone())
        .collect();
    (response, asks, updates_of(&before))
}

/// What the editor is asked for the fixture's approval (spec "approvals").
fn assert_exec_permission(asks: &[Value], key: &str) {
    assert_eq!(asks.len(), 1, "{asks:?}");
    let ask = &asks[0];
    assert_eq!(ask["sessionId"], key);
    let tool = &ask["toolCall"];
    assert_eq!(
        (&tool["toolCallId"], &tool["kind"], &tool["status"]),
        (&json!("tc-exec"), &json!("execute"), &json!("pending"))
    );
    // The spec leaves the title open (OpenClaw's bridge says "exec: command:
    // rm -rf build", GATEWAY-NOTES §7); it must show the command.
    let title = tool["title"].as_str().unwrap();
    assert!(title.contains("rm -rf build"), "{title}");
    let options: Vec<(Value, Value)> = ask["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["optionId"].clone(), o["kind"].clone()))
        .collect();
    assert_eq!(
        options,
        vec![
            (json!("allow-once"), json!("allow_once")),
            (json!("allow-always"), json!("allow_always")),
            (json!("deny"), json!("reject_once")),
        ]
    );
}

// GATEWAY-NOTES §6 "Approval events" (exec.approval.requested) and §7 step 4
// (tool start, approval, exec.approval.get/resolve, the chosen optionId).
#[tokio::test]
async fn an_exec_approval_is_asked_in_the_editor_and_the_choice_is_relayed() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, asks, updates) = approval_turn(
        &mut acp,
        &gateway,
        &key,
        "exec-approval-allowed",
        selected("allow-once"),
    )
    .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_exec_permission(&asks, &key);
    let run = first_run(&gateway);
    let approval = format!("appr-{run}");
    assert_eq!(
        gateway.params_of("exec.approval.resolve"),
        vec![json!({"id": approval, "decision": "allow-once"})]
    );
    assert_eq!(
        updates,
        vec![
            json!({"sessionUpdate": "tool_call", "toolCallId": "tc-exec",
                   "title": "exec: command: rm -rf build", "kind": "execute", "status": "in_progress",
                   "rawInput": {"command": "rm -rf build"}}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "tc-exec", "status": "completed",
                   "content": text_content("removed build/"),
                   "rawOutput": {"content": [{"type": "text", "text": "removed build/"}]}}),
            message_chunk("Removed the build directory."),
        ]
    );
}

// GATEWAY-NOTES §7 step 4 (any outcome but an allow resolves deny) and §5
// exec.approval.resolve (decision deny).
#[tokio::test]
async fn a_rejected_approval_is_relayed_as_deny() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, asks, updates) = approval_turn(
        &mut acp,
        &gateway,
        &key,
        "exec-approval-denied",
        selected("deny"),
    )
    .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_exec_permission(&asks, &key);
    let run = first_run(&gateway);
    assert_eq!(
        gateway.params_of("exec.approval.resolve"),
        vec![json!({"id": format!("appr-{run}"), "decision": "deny"})]
    );
    assert_eq!(
        chunks(&updates, "agent_message_chunk"),
        vec!["The command was not run."]
    );

    // A cancelled permission request is a deny too.
    let (response, asks, _) = approval_turn(
        &mut acp,
        &gateway,
        &key,
        "exec-approval-denied",
        json!({"outcome": {"outcome": "cancelled"}}),
    )
    .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(asks.len(), 1);
    let run = gateway.params_of("chat.send")[1]["idempotencyKey"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        gateway.params_of("exec.approval.resolve")[1],
        json!({"id": format!("appr-{run}"), "decision": "deny"})
    );
}

// GATEWAY-NOTES §5 chat.abort ({sessionKey, runId}; the prompt answers
// cancelled first) and §6 chat aborted (ignored once the prompt settled).
#[tokio::test]
async fn cancel_answers_cancelled_and_aborts_the_run_whose_late_events_are_dropped() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    gateway.queue(Script::fixture("aborted"));
    let id = acp.send("session/prompt", prompt(&key, "count")).await;
    let mut before = Vec::new();
    loop {
        let message = acp.next().await;
        let first_chunk = message["params"]["update"]["sessionUpdate"] == "agent_message_chunk";
        before.push(message);
        if first_chunk {
            break;
        }
    }
    acp.notify("session/cancel", json!({"sessionId": key}))
        .await;
    let (response, rest) = acp.until_response(id).await;
    before.extend(rest);
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    assert_eq!(updates_of(&before), vec![message_chunk("Counting: 1")]);
    let run = gateway.params_of("chat.send")[0]["idempotencyKey"].clone();
    let aborts = gateway.wait_requests("chat.abort", 1).await;
    assert_eq!(aborts, vec![json!({"sessionKey": key, "runId": run})]);

    // The run's late `aborted` (with its partial text) ends nothing and
    // shows nothing: the next turn streams exactly its own reply.
    let (response, updates) = prompt_with(&mut acp, &gateway, &key, "again", "reply").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(updates, vec![message_chunk("Mock gateway reply")]);
}

// GATEWAY-NOTES §6 chat table: final stopReason max_tokens, error with
// errorKind refusal, error with another kind and errorMessage.
#[tokio::test]
async fn stop_reasons_max_tokens_refusal_and_an_error_with_its_message() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) =
        prompt_with(&mut acp, &gateway, &key, "list", "final-max-tokens").await;
    assert_eq!(response["result"], json!({"stopReason": "max_tokens"}));
    assert_eq!(
        chunks(&updates, "agent_message_chunk").concat(),
        "The list goes on and on"
    );

    let (response, updates) = prompt_with(&mut acp, &gateway, &key, "tell", "error-refusal").await;
    assert_eq!(response["result"], json!({"stopReason": "refusal"}));
    assert_eq!(updates, vec![message_chunk("I can")]);

    let (response, _) = prompt_with(&mut acp, &gateway, &key, "again", "error-rate-limit").await;
    assert!(response.get("result").is_none(), "{response}");
    assert_eq!(response["error"]["code"], -32603, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(
            "429 rate_limit_error: Number of request tokens has exceeded your per-minute rate limit"
        ),
        "{message}"
    );
}

/// A transcript in the shape of OpenClaw's chat.history messages (pi-ai's
/// message types: text, thinking and toolCall blocks, toolResult messages).
fn main_history() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": "Why does the build fail?", "timestamp": 1_795_500_000_000u64}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Check the manifest."},
            {"type": "text", "text": "Let me look."},
            {"type": "toolCall", "id": "tc-1", "name": "read", "arguments": {"path": "/srv/project/Cargo.toml"}},
        ], "stopReason": "toolUse", "timestamp": 1_795_500_001_000u64}),
        json!({"role": "toolResult", "toolCallId": "tc-1", "toolName": "read",
               "content": [{"type": "text", "text": "[package]"}], "isError": false, "timestamp": 1_795_500_002_000u64}),
        json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": "tc-2", "name": "exec", "arguments": {"command": "cargo build"}},
        ], "stopReason": "toolUse", "timestamp": 1_795_500_003_000u64}),
        json!({"role": "toolResult", "toolCallId": "tc-2", "toolName": "exec",
               "content": [{"type": "text", "text": "error[E0433]"}], "isError": true, "timestamp": 1_795_500_004_000u64}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "A missing import."}],
               "stopReason": "stop", "timestamp": 1_795_500_005_000u64}),
        json!({"role": "user", "content": [{"type": "text", "text": "Thanks"}], "timestamp": 1_795_500_006_000u64}),
    ]
}

// GATEWAY-NOTES §5 chat.history ({sessionKey, limit ≤ 1000}; message shape
// unverified there, pi-ai's here) and sessions.list rows (spawnedCwd).
#[tokio::test]
async fn session_load_replays_chat_history_and_an_unknown_key_is_an_error() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    gateway.set_history(MAIN_KEY, main_history());
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": MAIN_KEY, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(
        response["result"]["_meta"],
        remote_meta(&gateway, MAIN_KEY, Some(MAIN_CWD))
    );
    assert_eq!(
        gateway.params_of("chat.history"),
        vec![json!({"sessionKey": MAIN_KEY, "limit": 1000})]
    );
    let user = |text: &str| json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}});
    let updates: Vec<Value> = updates_of(&before);
    // Titles and kinds of replayed calls follow the live rules; the test pins
    // what the history says: ids, status, input and output.
    let calls: Vec<Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|u| json!([u["toolCallId"], u["kind"], u["rawInput"]]))
        .collect();
    assert_eq!(
        calls,
        vec![
            json!(["tc-1", "read", {"path": "/srv/project/Cargo.toml"}]),
            json!(["tc-2", "execute", {"command": "cargo build"}]),
        ]
    );
    let shape: Vec<Value> = updates
        .iter()
        .map(|u| match u["sessionUpdate"].as_str().unwrap() {
            "tool_call" => json!({"tool_call": u["toolCallId"]}),
            "tool_call_update" => json!({"tool_call_update": u["toolCallId"], "status": u["status"], "content": u["content"]}),
            _ => u.clone(),
        })
        .collect();
    assert_eq!(
        shape,
        vec![
            user("Why does the build fail?"),
            thought_chunk("Check the manifest."),
            message_chunk("Let me look."),
            json!({"tool_call": "tc-1"}),
            json!({"tool_call_update": "tc-1", "status": "completed", "content": text_content("[package]")}),
            json!({"tool_call": "tc-2"}),
            json!({"tool_call_update": "tc-2", "status": "failed", "content": text_content("error[E0433]")}),
            message_chunk("A missing import."),
            user("Thanks"),
        ]
    );

    let id = acp
        .send(
            "session/load",
            json!({"sessionId": "agent:main:nope", "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no session agent:main:nope on the gateway"),
        "{response}"
    );
}

// GATEWAY-NOTES §5 sessions.list (params, rows: key, derivedTitle |
// displayName | label, updatedAt ms, spawnedCwd | spawnedWorkspaceDir,
// hasMore).
#[tokio::test]
async fn session_list_maps_rows_and_pages_with_a_cursor() {
    let gateway = OpenClawGateway::start(TOKEN, TICK_MS).await;
    gateway.add_session(
        json!({"key": MAIN_KEY, "kind": "direct", "updatedAt": 1_795_504_474_767u64,
        "derivedTitle": "Fix the build", "displayName": "main", "spawnedCwd": MAIN_CWD}),
    );
    gateway.add_session(json!({"key": "agent:main:telegram:group:42", "kind": "group",
        "updatedAt": 1_795_500_000_000u64, "displayName": "Team chat", "spawnedWorkspaceDir": "/srv/workspace"}));
    gateway.add_session(
        json!({"key": "acp-bridge:0b7e", "kind": "direct", "updatedAt": 1_795_400_000_000u64,
        "label": "spike"}),
    );
    for n in 0..99 {
        gateway.add_session(
            json!({"key": format!("agent:main:cron:{n}"), "kind": "direct",
            "updatedAt": 1_795_300_000_000u64, "derivedTitle": format!("job {n}")}),
        );
    }
    let sandbox = Sandbox::new();
    let mut acp = spawn_bridge(&sandbox, &gateway.url(), TOKEN, &[]);
    acp.initialize().await;

    let first = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    let sessions = first["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 100, "{first}");
    assert_eq!(
        sessions[..3].to_vec(),
        vec![
            json!({"sessionId": MAIN_KEY, "cwd": MAIN_CWD, "title": "Fix the build",
                   "updatedAt": "2026-11-24T07:14:34.767Z",
                   "_meta": remote_meta(&gateway, MAIN_KEY, Some(MAIN_CWD))}),
            json!({"sessionId": "agent:main:telegram:group:42", "cwd": "/srv/workspace", "title": "Team chat",
                   "updatedAt": "2026-11-24T06:00:00.000Z",
                   "_meta": remote_meta(&gateway, "agent:main:telegram:group:42", Some("/srv/workspace"))}),
            // ACP requires an absolute cwd; the row names none (and
            // OpenClaw's hello-ok no default), which `_meta` tells as null.
            json!({"sessionId": "acp-bridge:0b7e", "cwd": "/", "title": "spike",
                   "updatedAt": "2026-11-23T02:13:20.000Z",
                   "_meta": remote_meta(&gateway, "acp-bridge:0b7e", None)}),
        ]
    );
    let cursor = first["nextCursor"]
        .as_str()
        .expect("nextCursor when hasMore");
    let second = acp
        .call(
            "session/list",
            json!({"cwd": sandbox.work(), "cursor": cursor}),
        )
        .await;
    let keys: Vec<&str> = second["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec!["agent:main:cron:97", "agent:main:cron:98"]);
    assert!(
        second.get("nextCursor").is_none_or(Value::is_null),
        "{second}"
    );
    let lists = gateway.params_of("sessions.list");
    let pages: Vec<Value> = lists
        .iter()
        .filter(|p| p.get("search").is_none())
        .map(|p| {
            json!([
                p["limit"],
                p["offset"].as_u64().unwrap_or(0),
                p["includeDerivedTitles"]
            ])
        })
        .collect();
    assert_eq!(pages, vec![json!([100, 0, true]), json!([100, 100, true])]);
}

// GATEWAY-NOTES §4 (session keys) and §5 sessions.list (row spawnedCwd is the
// session's directory).
#[tokio::test]
async fn the_session_flag_attaches_new_sessions_to_an_existing_key() {
    let (sandbox, gateway, mut acp) = connected(&["--session", MAIN_KEY]).await;
    let result = new_session(&mut acp, &sandbox).await;
    assert_eq!(result["sessionId"], MAIN_KEY);
    assert_eq!(
        result["_meta"],
        remote_meta(&gateway, MAIN_KEY, Some(MAIN_CWD))
    );
    let (response, updates) = prompt_with(&mut acp, &gateway, MAIN_KEY, "status?", "reply").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(updates, vec![message_chunk("Mock gateway reply")]);
    assert_eq!(gateway.params_of("chat.send")[0]["sessionKey"], MAIN_KEY);
}

// GATEWAY-NOTES §5 sessions.resolve (the bridge calls it for
// --require-existing).
#[tokio::test]
async fn require_existing_with_an_unknown_key_fails_session_new() {
    let (sandbox, gateway, mut acp) =
        connected(&["--session", "agent:main:nope", "--require-existing"]).await;
    let id = acp
        .send(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no session agent:main:nope on the gateway"),
        "{response}"
    );
    assert_eq!(
        gateway.params_of("sessions.resolve"),
        vec![json!({"key": "agent:main:nope"})]
    );
    assert!(gateway.params_of("chat.send").is_empty());
}

// GATEWAY-NOTES §5 sessions.reset ({key}; the bridge calls it first with
// --reset-session) and §7 step 2.
#[tokio::test]
async fn reset_session_resets_the_key_before_anything_else() {
    let (sandbox, gateway, mut acp) = connected(&["--session", MAIN_KEY, "--reset-session"]).await;
    let handshake_done = gateway.requests().len();
    let result = new_session(&mut acp, &sandbox).await;
    assert_eq!(result["sessionId"], MAIN_KEY);
    let after: Vec<(String, Value)> = gateway.requests()[handshake_done..]
        .iter()
        .map(|r| (r.method.clone(), r.params.clone()))
        .collect();
    assert_eq!(
        after.first(),
        Some(&("sessions.reset".to_string(), json!({"key": MAIN_KEY}))),
        "{after:?}"
    );
}

// GATEWAY-NOTES §3 step 4 (a bad token: INVALID_REQUEST "unauthorized:
// gateway token mismatch (…)", details AUTH_TOKEN_MISMATCH, close 1008).
#[tokio::test]
async fn a_refused_token_fails_initialize_with_the_reason_and_the_bridge_keeps_serving() {
    let gateway = OpenClawGateway::start(TOKEN, TICK_MS).await;
    let sandbox = Sandbox::new();
    let mut acp = spawn_bridge(
        &sandbox,
        &gateway.url(),
        "not-the-gateway-token-123456",
        &[],
    );
    let id = acp
        .send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32603, "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    let url = gateway.url();
    assert!(
        message.contains(&url)
            && message.contains("refused")
            && message.contains("gateway token mismatch"),
        "{message}"
    );
    assert_eq!(gateway.hellos(), 0);
    assert!(acp.is_running());
    let tries = gateway.params_of("connect").len();

    // A later initialize tries once more (a refused token is not retried in
    // the background) and fails the same way.
    let id = acp
        .send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("gateway token mismatch"), "{response}");
    // Exactly one more dial: an initialize that came while the start's
    // dial was under way took that dial's refusal without asking for
    // another, and nothing dials on its own after a refusal.
    assert_eq!(gateway.params_of("connect").len(), tries + 1);
    assert!(acp.is_running());
}

// GATEWAY-NOTES §2 "Reconnect" (the client reconnects, then agent.wait
// {runId, timeoutMs:0} per prompt in flight) and §6 (cumulative message).
#[tokio::test]
async fn a_line_dropped_mid_run_reconnects_and_the_text_arrives_once_and_complete() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let hellos = gateway.hellos();
    let (response, updates) =
        prompt_with(&mut acp, &gateway, &key, "pangram", "reconnect-mid-run").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        chunks(&updates, "agent_message_chunk").concat(),
        "The quick brown fox jumps over the lazy dog."
    );
    assert!(gateway.hellos() > hellos);
    let run = gateway.params_of("chat.send")[0]["idempotencyKey"].clone();
    assert_eq!(
        gateway.params_of("agent.wait")[0],
        json!({"runId": run, "timeoutMs": 0})
    );
}

// GATEWAY-NOTES §2 "Reconnect" and §5 agent.wait (status ok with
// terminalReply for a run that ended while the client was away).
#[tokio::test]
async fn a_run_that_ended_while_the_line_was_down_is_completed_from_agent_wait() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) =
        prompt_with(&mut acp, &gateway, &key, "pangram", "reconnect-after-end").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        chunks(&updates, "agent_message_chunk").concat(),
        "Pack my box with five dozen liquor jugs."
    );
}

// GATEWAY-NOTES §6 agent stream "approval" (the legacy approval path) and
// §5 exec.approval.get/resolve.
#[tokio::test]
async fn a_legacy_agent_approval_event_is_asked_and_relayed_too() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, asks, updates) = approval_turn(
        &mut acp,
        &gateway,
        &key,
        "agent-approval",
        selected("allow-always"),
    )
    .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let run = first_run(&gateway);
    let approval = format!("appr-legacy-{run}");
    assert_eq!(asks.len(), 1, "{asks:?}");
    let tool = &asks[0]["toolCall"];
    // Without a tool call id the approval id stands for it (spec
    // "approvals").
    assert_eq!(
        (&tool["toolCallId"], &tool["kind"], &tool["status"]),
        (&json!(approval), &json!("execute"), &json!("pending"))
    );
    assert!(
        tool["title"].as_str().unwrap().contains("git push --force"),
        "{tool}"
    );
    assert_eq!(
        gateway.params_of("exec.approval.resolve"),
        vec![json!({"id": approval, "decision": "allow-always"})]
    );
    assert_eq!(updates, vec![message_chunk("Pushed.")]);
}

// GATEWAY-NOTES §6 chat table (delta: deltaText required, message optional;
// seq per run).
#[tokio::test]
async fn deltas_without_a_message_follow_the_run_seq_and_a_repeat_is_dropped() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    let (response, updates) =
        prompt_with(&mut acp, &gateway, &key, "count", "chat-delta-text").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        updates,
        vec![
            message_chunk("One"),
            message_chunk(" two"),
            message_chunk(" three"),
            message_chunk("."),
        ]
    );
}

// GATEWAY-NOTES §5 chat.send (attachments [{type, mimeType, fileName,
// content(base64)}]; the bridge's message).
#[tokio::test]
async fn prompt_blocks_become_the_chat_send_message_and_its_attachments() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    gateway.queue(Script::fixture("reply"));
    let blocks = json!([
        {"type": "text", "text": "Look at these"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        {"type": "resource", "resource": {"uri": "file:///home/me/src/lib.rs", "text": "pub fn x() {}\n"}},
        {"type": "resource_link", "uri": "file:///home/me/notes.md", "name": "notes.md"},
        {"type": "text", "text": "and say why."},
    ]);
    let result = acp
        .call(
            "session/prompt",
            json!({"sessionId": key, "prompt": blocks}),
        )
        .await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    let send = gateway.params_of("chat.send").pop().unwrap();
    assert_eq!(
        send,
        json!({
            "sessionKey": key,
            // The link's line stands where the link was among the blocks
            // (the spec's "appended" read as "added as a line").
            "message": "Look at these\n[Resource: notes.md <file:///home/me/notes.md>]\nand say why.",
            "idempotencyKey": send["idempotencyKey"],
            "attachments": [
                {"type": "image", "mimeType": "image/png", "content": "iVBORw0KGgo="},
                {"type": "file", "mimeType": "text/plain", "fileName": "lib.rs", "content": "cHViIGZuIHgoKSB7fQo="},
            ],
        })
    );
}

// GATEWAY-NOTES §4 (events carry the session key; the bridge matches by
// session) and §6 (chat events go to every operator connection).
#[tokio::test]
async fn a_run_another_client_started_on_an_open_session_reaches_the_editor() {
    let (sandbox, gateway, mut acp) = connected(&["--session", MAIN_KEY]).await;
    let key = session_key(&mut acp, &sandbox).await;
    assert_eq!(key, MAIN_KEY);
    gateway.run_elsewhere(MAIN_KEY, Script::fixture("reply"));
    let update = loop {
        let message = acp.next().await;
        let update = &message["params"]["update"];
        if message["method"] == "session/update" && update["sessionUpdate"] == "agent_message_chunk"
        {
            assert_eq!(message["params"]["sessionId"], MAIN_KEY);
            break update.clone();
        }
    };
    assert_eq!(update, message_chunk("Mock gateway reply"));
}

// GATEWAY-NOTES §7 step 8 (session/close → chat.abort when a run is active)
// and §5 chat.abort.
#[tokio::test]
async fn session_close_aborts_the_run_in_flight() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    gateway.queue(Script::fixture("aborted"));
    let prompt_id = acp.send("session/prompt", prompt(&key, "count")).await;
    loop {
        let message = acp.next().await;
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            break;
        }
    }
    let close = acp.send("session/close", json!({"sessionId": key})).await;
    let run = gateway.params_of("chat.send")[0]["idempotencyKey"].clone();
    let aborts = gateway.wait_requests("chat.abort", 1).await;
    assert_eq!(aborts, vec![json!({"sessionKey": key, "runId": run})]);
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let message = acp.next().await;
        if message.get("method").is_none() {
            answered.push(message);
        }
    }
    for response in &answered {
        assert!(response.get("error").is_none(), "{response}");
    }
    let ids: Vec<&Value> = answered.iter().map(|m| &m["id"]).collect();
    assert!(
        ids.contains(&&json!(close)) && ids.contains(&&json!(prompt_id)),
        "{answered:?}"
    );
}

/// The `(id, currentValue, values)` of each config option in `options`.
fn option_values(options: &Value) -> Vec<Value> {
    options
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let values: Vec<&Value> = o["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| &v["value"])
                .collect();
            json!([o["id"], o["currentValue"], values])
        })
        .collect()
}

// GATEWAY-NOTES §5 models.list ({models:[{id, provider, …}]}), sessions.list
// rows (model, modelProvider, thinkingLevel) and sessions.patch ({key,
// model | thinkingLevel}).
#[tokio::test]
async fn config_options_come_from_models_list_and_the_row_and_set_config_option_patches_the_session()
 {
    let gateway = OpenClawGateway::start(TOKEN, TICK_MS).await;
    gateway.add_session(
        json!({"key": MAIN_KEY, "kind": "direct", "updatedAt": 1_795_500_000_000u64,
        "derivedTitle": "Fix the build", "spawnedCwd": MAIN_CWD,
        "model": "claude-sonnet-4-6", "modelProvider": "anthropic", "thinkingLevel": "low"}),
    );
    let sandbox = Sandbox::new();
    let mut acp = spawn_bridge(&sandbox, &gateway.url(), TOKEN, &["--session", MAIN_KEY]);
    acp.initialize().await;
    let result = new_session(&mut acp, &sandbox).await;
    let levels = json!(["off", "minimal", "low", "medium", "high"]);
    let models = json!(["anthropic/claude-sonnet-4-6", "openai/gpt-5.2"]);
    // OpenClaw's gateway has no permission modes: only the model and the
    // thinking level are offered.
    assert_eq!(
        option_values(&result["configOptions"]),
        vec![
            json!(["model", "anthropic/claude-sonnet-4-6", models]),
            json!(["thought_level", "low", levels]),
        ]
    );

    let result = acp
        .call(
            "session/set_config_option",
            json!({"sessionId": MAIN_KEY, "configId": "model", "value": "openai/gpt-5.2"}),
        )
        .await;
    assert_eq!(
        option_values(&result["configOptions"])[0],
        json!(["model", "openai/gpt-5.2", models])
    );
    let result = acp
        .call(
            "session/set_config_option",
            json!({"sessionId": MAIN_KEY, "configId": "thought_level", "value": "high"}),
        )
        .await;
    assert_eq!(
        option_values(&result["configOptions"])[1],
        json!(["thought_level", "high", levels])
    );
    assert_eq!(
        gateway.params_of("sessions.patch"),
        vec![
            json!({"key": MAIN_KEY, "model": "openai/gpt-5.2"}),
            json!({"key": MAIN_KEY, "thinkingLevel": "high"}),
        ]
    );
}

// GATEWAY-NOTES §5 sessions.resolve ({label} → {ok, key}).
#[tokio::test]
async fn a_session_label_resolves_to_its_key() {
    let gateway = OpenClawGateway::start(TOKEN, TICK_MS).await;
    gateway.add_session(json!({"key": "agent:main:cron:nightly", "kind": "direct",
        "updatedAt": 1_795_500_000_000u64, "label": "nightly", "spawnedWorkspaceDir": "/srv/nightly"}));
    let sandbox = Sandbox::new();
    let mut acp = spawn_bridge(
        &sandbox,
        &gateway.url(),
        TOKEN,
        &["--session-label", "nightly"],
    );
    acp.initialize().await;
    let result = new_session(&mut acp, &sandbox).await;
    assert_eq!(result["sessionId"], "agent:main:cron:nightly");
    assert_eq!(
        result["_meta"],
        remote_meta(&gateway, "agent:main:cron:nightly", Some("/srv/nightly"))
    );
    assert_eq!(
        gateway.params_of("sessions.resolve"),
        vec![json!({"label": "nightly"})]
    );
}

// GATEWAY-NOTES §7 step 8 (session/resume reads the row; no replay).
#[tokio::test]
async fn session_resume_opens_a_session_without_replaying_it() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    gateway.set_history(MAIN_KEY, main_history());
    let id = acp
        .send(
            "session/resume",
            json!({"sessionId": MAIN_KEY, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(
        response["result"]["_meta"],
        remote_meta(&gateway, MAIN_KEY, Some(MAIN_CWD)),
        "{response}"
    );
    assert_eq!(updates_of(&before), Vec::<Value>::new());
    assert!(gateway.params_of("chat.history").is_empty());
    // The session is open: a prompt goes to it.
    let (response, updates) = prompt_with(&mut acp, &gateway, MAIN_KEY, "go on", "reply").await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(updates, vec![message_chunk("Mock gateway reply")]);
}

// The spec's refusals before anything reaches the gateway: MCP servers
// (they would run on the editor's machine) and audio (GATEWAY-NOTES §5
// chat.send attachments carry images and files).
#[tokio::test]
async fn mcp_servers_and_audio_are_invalid_params_and_reach_nothing() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let id = acp
        .send(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": [{"name": "fs", "command": "/bin/true", "args": [], "env": []}]}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");

    let key = session_key(&mut acp, &sandbox).await;
    let id = acp
        .send(
            "session/prompt",
            json!({"sessionId": key, "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}]}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert!(gateway.params_of("chat.send").is_empty());
}

// GATEWAY-NOTES §6 "Approval events" (an approval names its session; the
// gateway broadcasts it to every operator connection).
#[tokio::test]
async fn an_approval_of_a_session_the_bridge_has_not_open_is_neither_asked_nor_answered() {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    gateway.queue(Script::fixture("foreign-approval"));
    let id = acp.send("session/prompt", prompt(&key, "go")).await;
    let (response, mut seen) = acp.drive(id, |_, _| selected("allow-always")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    // One more turn: anything the foreign approval set off has had its time.
    gateway.queue(Script::fixture("reply"));
    let id = acp.send("session/prompt", prompt(&key, "again")).await;
    let (_, more) = acp.drive(id, |_, _| selected("allow-always")).await;
    seen.extend(more);
    assert!(
        requests_of(&seen, "session/request_permission").is_empty(),
        "{seen:?}"
    );
    assert!(gateway.params_of("exec.approval.get").is_empty());
    assert!(gateway.params_of("exec.approval.resolve").is_empty());
}

// GATEWAY-NOTES §3 hello-ok (`server.bootId`) and §5 agent.wait: OpenClaw
// answers `timeout` for a run id it does not know, as for a run still going,
// so only the new bootId tells the bridge that a restarted gateway lost it.
#[tokio::test]
async fn a_gateway_that_restarted_mid_run_is_told_by_its_boot_id_and_the_prompt_ends_with_the_reason()
 {
    let (sandbox, gateway, mut acp) = connected(&[]).await;
    let key = session_key(&mut acp, &sandbox).await;
    gateway.queue(Script::fixture("restart-mid-run"));
    let id = acp.send("session/prompt", prompt(&key, "talk")).await;
    let mut seen = Vec::new();
    while chunks(&updates_of(&seen), "agent_message_chunk").concat() != "Half a sentence" {
        let message = acp.next().await;
        assert!(message.get("method").is_some(), "{message}");
        seen.push(message);
    }
    gateway.restart();
    let (response, _) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("no longer knows this turn"), "{response}");
}
