//! End-to-end: `pincer gateway` speaks OpenClaw's gateway protocol as
//! docs/gateway.md describes it: the handshake and `hello-ok`, ticks,
//! every method of the spec's table, streaming a turn with a tool call,
//! approvals, abort, two clients on one session, reconnecting, sessions
//! that `pincer sessions list` and an editor see, and messages sent while
//! a session is busy. The real binary, a real websocket client, the mock
//! model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pretty_assertions::assert_eq;
use serde_json::{Map, Value, json};
use support::acp_client::{Sandbox, TIMEOUT, coalesce, process_running, updates_of};
use support::gateway::{
    Client, Gateway, acp_with_gateway, connect_params, new_key, write_gateway_config,
};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call, anthropic_tool_calls};
use support::{spawn_anthropic, wait_until};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `value` with only `keys` (those it has): the fields the spec names,
/// compared whole, whatever else a server adds.
fn pick(value: &Value, keys: &[&str]) -> Value {
    let mut out = Map::new();
    for key in keys {
        if let Some(v) = value.get(*key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Value::Object(out)
}

/// A transcript message (`chat.history`, `sessions.get`) reduced to the
/// fields the spec names, its timestamp checked and dropped.
fn message_shape(message: &Value) -> Value {
    pick(
        message,
        &["role", "content", "toolCallId", "toolName", "isError"],
    )
}

/// Every message has its `timestamp` (ms): checked last in a test, so
/// that a missing one does not hide other differences.
fn assert_timestamps(messages: &Value) {
    let missing: Vec<&Value> = messages
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| !m["timestamp"].is_u64())
        .collect();
    assert_eq!(
        missing,
        Vec::<&Value>::new(),
        "messages without a timestamp"
    );
}

fn messages_shape(messages: &Value) -> Vec<Value> {
    messages
        .as_array()
        .unwrap_or_else(|| panic!("messages is not an array: {messages}"))
        .iter()
        .map(message_shape)
        .collect()
}

/// The text of a `chat` event's `message`.
fn message_text(payload: &Value) -> String {
    payload["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chat event payloads of one run, in the order received.
fn chat_of(client: &Client, run: &str) -> Vec<Value> {
    client
        .payloads_of("chat")
        .into_iter()
        .filter(|p| p["runId"] == run)
        .collect()
}

/// The `agent` event payloads of one run with `stream`.
fn agent_of(client: &Client, run: &str, stream: &str) -> Vec<Value> {
    client
        .payloads_of("agent")
        .into_iter()
        .filter(|p| p["runId"] == run && p["stream"] == stream)
        .collect()
}

/// The texts of the user messages a model request carried (without the
/// time line pincer adds).
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

/// The methods and events the spec lists.
const METHODS: &[&str] = &[
    "chat.send",
    "chat.abort",
    "chat.history",
    "chat.subscribe",
    "agent",
    "agent.wait",
    "sessions.list",
    "sessions.resolve",
    "sessions.get",
    "sessions.patch",
    "sessions.reset",
    "sessions.delete",
    "sessions.compact",
    "sessions.rewind",
    "sessions.fork",
    "sessions.subscribe",
    "sessions.unsubscribe",
    "models.list",
    "exec.approval.get",
    "exec.approval.list",
    "exec.approval.resolve",
    "health",
];
const EVENTS: &[&str] = &[
    "chat",
    "agent",
    "tick",
    "session.message",
    "sessions.changed",
    "exec.approval.requested",
    "exec.approval.resolved",
];

/// The `server.bootId` another connection's hello carries.
async fn other_hello_boot(gateway: &Gateway) -> String {
    let client = gateway.admin().await;
    client.hello["server"]["bootId"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn the_handshake_challenge_hello_ok_and_ticks_have_the_specs_shape() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "tick_interval_ms = 200");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let before = now_ms();
    let mut client = Client::open(gateway.addr).await;
    let after = now_ms();
    let challenge = client.challenge.clone();
    let nonce = challenge["payload"]["nonce"].as_str().unwrap().to_string();
    let ts = challenge["payload"]["ts"].as_u64().unwrap();
    assert!(nonce.len() >= 16, "a weak nonce: {nonce:?}");
    assert!(
        before.saturating_sub(1000) <= ts && ts <= after + 1000,
        "{ts}"
    );
    assert_eq!(
        challenge,
        json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}})
    );
    // Each connection gets its own nonce.
    let other = Client::open(gateway.addr).await;
    assert_ne!(other.challenge["payload"]["nonce"], json!(nonce));

    let id = client
        .request(
            "connect",
            connect_params(gateway.token.as_deref(), &[], &["tool-events"]),
        )
        .await;
    let res = client.response(&id).await;
    assert_eq!(res["ok"], json!(true), "{res}");
    let mut hello = res["payload"].clone();
    let conn_id = hello["server"]["connId"].as_str().unwrap().to_string();
    assert!(hello["snapshot"]["uptimeMs"].is_u64(), "{hello}");
    let methods: Vec<String> =
        serde_json::from_value(hello["features"]["methods"].clone()).unwrap();
    let events: Vec<String> = serde_json::from_value(hello["features"]["events"].clone()).unwrap();
    for method in METHODS {
        assert!(
            methods.iter().any(|m| m == method),
            "{method} not in {methods:?}"
        );
    }
    for event in EVENTS {
        assert!(
            events.iter().any(|e| e == event),
            "{event} not in {events:?}"
        );
    }
    hello["server"]["connId"] = json!("<conn>");
    // One boot id for the process's life (clients tell a restart by it).
    let boot = hello["server"]["bootId"].as_str().unwrap().to_string();
    assert!(uuid::Uuid::parse_str(&boot).is_ok(), "{boot}");
    assert_eq!(other_hello_boot(&gateway).await, boot);
    hello["server"]["bootId"] = json!("<boot>");
    hello["snapshot"]["uptimeMs"] = json!("<uptime>");
    hello["features"] = json!("<features>");
    // OpenClaw's three defaults, and what a new session here starts with
    // (for `pincer acp --connect`, which shows it before the first turn).
    let modes: Vec<Value> = ["default", "accept-edits", "plan", "bypass"]
        .iter()
        .map(|id| json!(id))
        .collect();
    let defaults = hello["snapshot"]["sessionDefaults"].clone();
    let ids: Vec<Value> = defaults["permissionModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(ids, modes);
    assert_eq!(
        pick(
            &defaults,
            &[
                "cwd",
                "model",
                "thinkingLevel",
                "permissionMode",
                "queueMode"
            ]
        ),
        json!({"cwd": sandbox.work(), "model": "anthropic/claude-sonnet-4-5", "thinkingLevel": "off",
               "permissionMode": "default", "queueMode": "steer"})
    );
    hello["snapshot"]["sessionDefaults"] =
        pick(&defaults, &["defaultAgentId", "mainKey", "mainSessionKey"]);
    assert_eq!(
        hello,
        json!({
            "type": "hello-ok",
            "protocol": 4,
            "server": {"version": format!("pincer {}", env!("CARGO_PKG_VERSION")), "connId": "<conn>", "bootId": "<boot>",
                       "controlUiBuildSource": "configured"},
            "features": "<features>",
            "snapshot": {
                "presence": [], "health": {}, "stateVersion": {"presence": 0, "health": 0},
                "uptimeMs": "<uptime>",
                "sessionDefaults": {"defaultAgentId": "main", "mainKey": "main", "mainSessionKey": "agent:main:main"},
                "authMode": "token"
            },
            "auth": {"role": "operator", "scopes": ["operator.admin"], "method": "token"},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 200}
        })
    );
    // No device token, ever.
    assert!(res["payload"]["auth"].get("deviceToken").is_none());

    // Ticks come, and every event of the connection is numbered from 1.
    let first = client.next_event("tick").await;
    let second = client.next_event("tick").await;
    for tick in [&first, &second] {
        assert!(tick["payload"]["ts"].is_u64(), "{tick}");
        assert_eq!(pick(&tick["payload"], &["ts"]), tick["payload"]);
    }
    let seqs: Vec<u64> = client
        .events
        .iter()
        .skip(1) // the challenge has none
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(client.events[0].get("seq").is_none());
    // Narrowed scopes are what hello-ok grants.
    let reader = gateway.operator(&["operator.read"], &[]).await;
    assert_eq!(reader.hello["auth"]["scopes"], json!(["operator.read"]));
    // The spec's connId is a uuid (a counter tells a client how many
    // others there were).
    assert!(
        uuid::Uuid::parse_str(&conn_id).is_ok(),
        "connId {conn_id:?} is not a uuid"
    );
}

#[tokio::test]
async fn a_turn_with_a_tool_call_streams_to_two_clients_tool_events_only_with_the_cap() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut tools = gateway.admin().await;
    let mut plain = gateway.operator(&[], &[]).await;
    let key = new_key();
    let run = tools.chat_send(&key, "What does hello.txt say?").await;
    let end = tools.chat_end(&run).await;
    let plain_end = plain.chat_end(&run).await;
    assert_eq!(end["payload"], plain_end["payload"]);

    // chat: numbered per run from 1, deltas cumulative, then final.
    let chat = chat_of(&tools, &run);
    let seqs: Vec<u64> = chat.iter().map(|p| p["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=chat.len() as u64).collect::<Vec<_>>());
    let (last, deltas) = chat.split_last().unwrap();
    assert!(!deltas.is_empty());
    let mut so_far = String::new();
    for delta in deltas {
        assert_eq!(delta["state"], "delta", "{delta}");
        assert_eq!(delta["sessionKey"], json!(key));
        assert_eq!(delta["message"]["role"], "assistant", "{delta}");
        let text = delta["deltaText"].as_str().unwrap();
        if delta["replace"] == json!(true) {
            so_far = text.to_string();
        } else {
            so_far.push_str(text);
        }
        assert_eq!(message_text(delta), so_far, "{delta}");
    }
    assert!(so_far.contains("I'll read the file."), "{so_far:?}");
    assert!(so_far.ends_with("The file says hello."), "{so_far:?}");
    assert_eq!(
        pick(last, &["runId", "sessionKey", "seq", "state", "stopReason"]),
        json!({"runId": run, "sessionKey": key, "seq": chat.len(), "state": "final", "stopReason": "stop"})
    );
    assert!(
        message_text(last).ends_with("The file says hello."),
        "{last}"
    );
    // Both clients saw the same chat events.
    assert_eq!(chat_of(&plain, &run), chat);

    // agent: the tool's start and result, before the final, with the cap.
    let tool_events = agent_of(&tools, &run, "tool");
    for event in &tool_events {
        assert_eq!(
            pick(event, &["runId", "sessionKey", "stream"]),
            json!({"runId": run, "sessionKey": key, "stream": "tool"})
        );
        assert!(event["ts"].is_u64() && event["seq"].is_u64(), "{event}");
    }
    let phases: Vec<Value> = tool_events
        .iter()
        .map(|e| &e["data"])
        .filter(|d| d["phase"] != "update")
        .map(|d| {
            let mut shape = pick(d, &["phase", "name", "toolCallId", "args", "isError"]);
            if d["phase"] == "result" {
                shape["result"] = json!({"content": d["result"]["content"]});
            }
            shape
        })
        .collect();
    assert_eq!(
        phases,
        vec![
            json!({"phase": "start", "name": "read", "toolCallId": "toolu_01", "args": {"path": "hello.txt"}}),
            json!({"phase": "result", "name": "read", "toolCallId": "toolu_01", "isError": false,
                   "result": {"content": [{"type": "text", "text": "hello"}]}}),
        ]
    );
    let position = |client: &Client, pred: &dyn Fn(&Value) -> bool| {
        client.events.iter().position(pred).unwrap()
    };
    let last_tool = tools
        .events
        .iter()
        .rposition(|e| e["event"] == "agent" && e["payload"]["stream"] == "tool")
        .unwrap();
    let final_at = position(&tools, &|e| {
        e["event"] == "chat" && e["payload"]["state"] == "final"
    });
    assert!(last_tool < final_at, "a tool event came after the final");
    // The first text came before the tool started.
    let first_tool = position(&tools, &|e| {
        e["event"] == "agent" && e["payload"]["stream"] == "tool"
    });
    let first_delta = position(&tools, &|e| e["event"] == "chat");
    assert!(first_delta < first_tool);
    // Lifecycle: start, then end.
    tools
        .next_where("the lifecycle end", |f| {
            f["event"] == "agent"
                && f["payload"]["stream"] == "lifecycle"
                && f["payload"]["data"]["phase"] == "end"
        })
        .await;
    let lifecycle: Vec<Value> = agent_of(&tools, &run, "lifecycle")
        .iter()
        .map(|e| e["data"]["phase"].clone())
        .collect();
    assert_eq!(lifecycle, vec![json!("start"), json!("end")]);
    // Without the cap: no tool events at all.
    assert_eq!(agent_of(&plain, &run, "tool"), Vec::<Value>::new());
    // The client that did not send saw the user's message join.
    let joined = plain.next_event("session.message").await;
    assert_eq!(
        pick(&joined["payload"], &["sessionKey", "runId"]),
        json!({"sessionKey": key, "runId": run})
    );
    assert_eq!(message_text(&joined["payload"]), "What does hello.txt say?");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn chat_send_is_idempotent_in_flight_then_ok() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body: support::mock_model::fixture("anthropic/text.sse"),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = uuid::Uuid::new_v4().to_string();
    let send = json!({"sessionKey": key, "message": "hello", "idempotencyKey": run});
    let first = client.call_ok("chat.send", send.clone()).await;
    assert_eq!(first, json!({"runId": run, "status": "started"}));
    mock.wait_for_requests(1, TIMEOUT).await;
    let again = client.call_ok("chat.send", send.clone()).await;
    assert_eq!(again, json!({"runId": run, "status": "in_flight"}));
    gate.notify_one();
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    let after = client.call_ok("chat.send", send.clone()).await;
    assert_eq!(after, json!({"runId": run, "status": "ok"}));
    // One run only: one model request, one user message in the history.
    assert_eq!(mock.requests().len(), 1);
    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    assert_eq!(
        messages_shape(&history["messages"]),
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "hello"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Hello from the mock model."}]}),
        ]
    );
    assert_eq!(
        chat_of(&client, &run)
            .iter()
            .filter(|p| p["state"] == "final")
            .count(),
        1
    );
    assert_timestamps(&history["messages"]);
}

#[tokio::test]
async fn chat_abort_stops_the_run_with_an_aborted_event_and_the_session_goes_on() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    mock.push(Reply::fixture("anthropic/text.sse"));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let mut watcher = gateway.operator(&["operator.read"], &[]).await;
    let key = new_key();
    let run = client.chat_send(&key, "talk forever").await;
    let delta = client.chat_state(&run, "delta").await;
    assert_eq!(delta["payload"]["deltaText"], "Hello");
    // Another run id aborts nothing.
    let nothing = client
        .call_ok(
            "chat.abort",
            json!({"sessionKey": key, "runId": "not-this-one"}),
        )
        .await;
    assert_eq!(nothing, json!({"ok": true, "aborted": false, "runIds": []}));
    let aborted = client
        .call_ok("chat.abort", json!({"sessionKey": key, "runId": run}))
        .await;
    assert_eq!(
        aborted,
        json!({"ok": true, "aborted": true, "runIds": [run]})
    );
    for who in [&mut client, &mut watcher] {
        let end = who.chat_end(&run).await;
        assert_eq!(
            pick(
                &end["payload"],
                &["runId", "sessionKey", "state", "stopReason"]
            ),
            json!({"runId": run, "sessionKey": key, "state": "aborted", "stopReason": "aborted"})
        );
    }
    let again = client
        .call_ok("chat.abort", json!({"sessionKey": key}))
        .await;
    assert_eq!(again, json!({"ok": true, "aborted": false, "runIds": []}));
    // The session takes the next message.
    let next = client.chat_send(&key, "hello").await;
    let end = client.chat_end(&next).await;
    assert_eq!(end["payload"]["state"], "final");
    assert_eq!(message_text(&end["payload"]), "Hello from the mock model.");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// `chat.abort` with a run id stops that run alone, as OpenClaw's gateway
/// does: a message sent after it (OpenClaw's bridge sends the next prompt
/// as soon as it answered the cancelled one, and the two requests may be
/// handled in either order) runs next instead of being aborted with it.
#[tokio::test]
async fn chat_abort_of_a_run_leaves_the_message_sent_after_it() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    mock.push(Reply::sse(anthropic_text("Second answer.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let first = client.chat_send(&key, "talk forever").await;
    client.chat_state(&first, "delta").await;
    let second = uuid::Uuid::new_v4().to_string();
    client
        .call_ok(
            "chat.send",
            json!({"sessionKey": key, "message": "then this", "idempotencyKey": second, "queueMode": "followup"}),
        )
        .await;
    let aborted = client
        .call_ok("chat.abort", json!({"sessionKey": key, "runId": first}))
        .await;
    assert_eq!(
        aborted,
        json!({"ok": true, "aborted": true, "runIds": [first]})
    );
    let end = client.chat_end(&first).await;
    assert_eq!(end["payload"]["state"], "aborted", "{end}");
    let end = client.chat_end(&second).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    assert_eq!(message_text(&end["payload"]), "Second answer.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        user_texts(&requests[1].body),
        vec!["talk forever", "then this"]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// `chat.abort` of a message that waits for a busy session drops that
/// message alone: the running run and the messages after it go on.
#[tokio::test]
async fn chat_abort_of_a_waiting_message_drops_it_alone() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    busy_mock(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text("First done.", 50)));
    mock.push(Reply::sse(anthropic_text("Third done.", 60)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut client, key, first, runs) =
        busy_session(&gateway, &sandbox, "followup", &["second", "third"]).await;
    let aborted = client
        .call_ok("chat.abort", json!({"sessionKey": key, "runId": runs[0]}))
        .await;
    assert_eq!(
        aborted,
        json!({"ok": true, "aborted": true, "runIds": [runs[0]]})
    );
    let end = client.chat_end(&runs[0]).await;
    assert_eq!(end["payload"]["state"], "aborted", "{end}");
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let end = client.chat_end(&first).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let end = client.chat_end(&runs[1]).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    assert!(message_text(&end["payload"]).ends_with("Third done."));
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(user_texts(&requests[2].body), vec!["first", "third"]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn the_agent_method_answers_twice_and_agent_wait_reports_the_end() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body: anthropic_text("The main session.", 20),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = uuid::Uuid::new_v4().to_string();
    let before = now_ms();
    let id = client
        .request(
            "agent",
            json!({"message": "hello", "idempotencyKey": run, "sessionKey": key}),
        )
        .await;
    let accepted = client.response(&id).await;
    assert_eq!(accepted["ok"], json!(true), "{accepted}");
    let at = accepted["payload"]["acceptedAt"].as_u64().unwrap();
    assert!(at + 1000 >= before && at <= now_ms() + 1000);
    assert_eq!(
        pick(&accepted["payload"], &["runId", "sessionKey", "status"]),
        json!({"runId": run, "sessionKey": key, "status": "accepted"})
    );
    let done = client.response(&id).await;
    assert_eq!(done["ok"], json!(true), "{done}");
    assert!(done["payload"]["summary"].is_string(), "{done}");
    assert_eq!(
        pick(&done["payload"], &["runId", "status", "result"]),
        json!({"runId": run, "status": "ok",
               "result": {"text": "Hello from the mock model.", "stopReason": "stop",
                          "payloads": [{"text": "Hello from the mock model."}]}})
    );
    // The same events as chat.send.
    assert_eq!(chat_of(&client, &run).last().unwrap()["state"], "final");
    let waited = client.call_ok("agent.wait", json!({"runId": run})).await;
    assert_eq!(
        pick(&waited, &["runId", "status", "terminalReply"]),
        json!({"runId": run, "status": "ok",
               "terminalReply": {"disposition": "visible", "text": "Hello from the mock model."}})
    );

    // Without a session key: agent:main:main. While it runs, agent.wait
    // times out.
    let main_run = uuid::Uuid::new_v4().to_string();
    let id = client
        .request(
            "agent",
            json!({"message": "main?", "idempotencyKey": main_run}),
        )
        .await;
    let accepted = client.response(&id).await;
    assert_eq!(accepted["payload"]["sessionKey"], "agent:main:main");
    mock.wait_for_requests(2, TIMEOUT).await;
    let waited = client
        .call_ok("agent.wait", json!({"runId": main_run, "timeoutMs": 100}))
        .await;
    assert_eq!(
        pick(&waited, &["runId", "status"]),
        json!({"runId": main_run, "status": "timeout"})
    );
    gate.notify_one();
    let done = client.response(&id).await;
    assert_eq!(done["payload"]["result"]["text"], "The main session.");
    let resolved = client
        .call_ok("sessions.resolve", json!({"key": "agent:main:main"}))
        .await;
    assert_eq!(resolved["key"], "agent:main:main");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn sessions_methods_list_resolve_get_patch_reset_and_delete() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::sse(anthropic_text("Second key.", 20)));
    mock.push(Reply::sse(anthropic_text("With another model.", 20)));
    mock.push(Reply::sse(anthropic_text("A fresh start.", 20)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let mut watcher = gateway.operator(&["operator.read"], &[]).await;
    assert_eq!(
        watcher.call_ok("sessions.subscribe", json!({})).await,
        json!({"ok": true, "subscribed": true})
    );
    let listed = client.call_ok("sessions.list", json!({})).await;
    assert_eq!(
        pick(&listed, &["sessions", "hasMore", "count"]),
        json!({"sessions": [], "hasMore": false, "count": 0})
    );

    let key = new_key();
    let run = client.chat_send(&key, "say hello").await;
    client.chat_end(&run).await;
    let changed = watcher
        .next_where("sessions.changed for the key", |f| {
            f["event"] == "sessions.changed" && f["payload"]["key"] == json!(key)
        })
        .await;
    let first_changes: Vec<Value> = watcher
        .payloads_of("sessions.changed")
        .iter()
        .filter(|p| p["key"] != json!(key))
        .cloned()
        .collect();
    assert!(changed["payload"]["reason"].is_string(), "{changed}");

    let listed = client.call_ok("sessions.list", json!({})).await;
    assert!(listed["ts"].is_u64(), "{listed}");
    assert_eq!(
        pick(&listed, &["hasMore", "count"]),
        json!({"hasMore": false, "count": 1})
    );
    let row = listed["sessions"][0].clone();
    let session_id = row["sessionId"].as_str().unwrap().to_string();
    assert!(
        row["updatedAt"].as_u64().unwrap() + 60_000 > now_ms(),
        "{row}"
    );
    assert_eq!(
        pick(
            &row,
            &["key", "sessionId", "kind", "derivedTitle", "spawnedCwd",]
        ),
        json!({"key": key, "sessionId": session_id, "kind": "direct", "derivedTitle": "say hello",
               "spawnedCwd": sandbox.work()})
    );

    // resolve by key and by session id.
    let by_key = client
        .call_ok("sessions.resolve", json!({"key": key}))
        .await;
    let expected = json!({"ok": true, "key": key, "agentId": "main", "sessionId": session_id});
    assert_eq!(
        pick(&by_key, &["ok", "key", "agentId", "sessionId"]),
        expected
    );
    let by_id = client
        .call_ok("sessions.resolve", json!({"sessionId": session_id}))
        .await;
    assert_eq!(
        pick(&by_id, &["ok", "key", "agentId", "sessionId"]),
        expected
    );

    // get: the transcript.
    let got = client.call_ok("sessions.get", json!({"key": key})).await;
    let got_messages = got["messages"].clone();
    assert_eq!(got["key"], json!(key));
    assert_eq!(got["sessionId"], json!(session_id));
    assert_eq!(
        messages_shape(&got["messages"]),
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "say hello"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "Hello from the mock model."}]}),
        ]
    );

    // search and paging.
    let other = new_key();
    let run = client.chat_send(&other, "another one").await;
    client.chat_end(&run).await;
    let found = client
        .call_ok("sessions.list", json!({"search": other}))
        .await;
    let keys: Vec<Value> = found["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    assert_eq!(keys, vec![json!(other)]);
    let page = client.call_ok("sessions.list", json!({"limit": 1})).await;
    assert_eq!(page["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(page["hasMore"], json!(true));
    assert_eq!(page["sessions"][0]["key"], json!(other), "newest first");

    // patch: the thinking level and the model, which the next turn uses.
    let models = client.call_ok("models.list", json!({})).await;
    let first_model = mock.requests()[0].body["model"]
        .as_str()
        .unwrap()
        .to_string();
    let current = first_model.as_str();
    let other_model = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["provider"] == "anthropic"
                && m["reasoning"] == json!(true)
                && m["id"] != current
                && !current.ends_with(m["id"].as_str().unwrap())
        })
        .unwrap_or_else(|| panic!("no second anthropic model in {models}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let patched = client
        .call_ok(
            "sessions.patch",
            json!({"key": key, "model": other_model, "thinkingLevel": "high"}),
        )
        .await;
    assert_eq!(
        pick(&patched, &["ok", "key"]),
        json!({"ok": true, "key": key})
    );
    assert_eq!(patched["entry"]["key"], json!(key), "{patched}");
    let patched_entry = patched["entry"].clone();
    let run = client.chat_send(&key, "again").await;
    client.chat_end(&run).await;
    let sent_model = mock.requests().last().unwrap().body["model"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        other_model.ends_with(&sent_model) || sent_model.ends_with(&other_model),
        "{sent_model} vs {other_model}"
    );
    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let history_thinking = history["thinkingLevel"].clone();
    assert_eq!(history["sessionId"], json!(session_id));
    assert_eq!(history["messages"].as_array().unwrap().len(), 4);
    let limited = client
        .call_ok("chat.history", json!({"sessionKey": key, "limit": 2}))
        .await;
    assert_eq!(
        messages_shape(&limited["messages"]),
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "again"}]}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "With another model."}]}),
        ]
    );

    // reset: a fresh session for the key; the old transcript stays.
    let reset = client.call_ok("sessions.reset", json!({"key": key})).await;
    let new_id = reset["sessionId"].as_str().unwrap().to_string();
    assert_ne!(new_id, session_id);
    assert_eq!(reset, json!({"ok": true, "key": key, "sessionId": new_id}));
    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    assert_eq!(history["messages"], json!([]));
    let run = client.chat_send(&key, "start over").await;
    client.chat_end(&run).await;
    assert_eq!(
        user_texts(&mock.requests().last().unwrap().body),
        vec!["start over"]
    );
    let out = sandbox
        .command(&["sessions", "list", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let ids: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["sessionId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert!(
        ids.contains(&session_id) && ids.contains(&new_id),
        "{ids:?}"
    );

    // delete.
    let deleted = client
        .call_ok("sessions.delete", json!({"key": other}))
        .await;
    assert_eq!(
        pick(&deleted, &["ok", "key", "deleted"]),
        json!({"ok": true, "key": other, "deleted": true})
    );
    let listed = client.call_ok("sessions.list", json!({})).await;
    let keys: Vec<Value> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    // (The transcript `reset` left may be listed under its id.)
    assert!(
        keys.contains(&json!(key)) && !keys.contains(&json!(other)),
        "{keys:?}"
    );
    let again = client
        .call_ok("sessions.delete", json!({"key": other}))
        .await;
    assert_eq!(again["deleted"], json!(false));
    assert_eq!(
        watcher.call_ok("sessions.unsubscribe", json!({})).await,
        json!({"ok": true, "subscribed": false})
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    // What the spec names beyond the above, all reported at once.
    let mut problems: Vec<String> = Vec::new();
    let untimed = got_messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m["timestamp"].is_u64())
        .count();
    if untimed > 0 {
        problems.push(format!(
            "{untimed} sessions.get messages without a timestamp"
        ));
    }
    // Events about the first session named it by the key its client used.
    if !first_changes.is_empty() {
        problems.push(format!(
            "sessions.changed with keys nobody used: {first_changes:?}"
        ));
    }
    for field in ["displayName", "model", "thinkingLevel"] {
        if !row[field].is_string() {
            problems.push(format!("the session row has no {field}: {row}"));
        }
    }
    if row["modelProvider"] != "anthropic" {
        problems.push(format!(
            "the session row's modelProvider is not anthropic: {row}"
        ));
    }
    if patched_entry["thinkingLevel"] != "high" {
        problems.push(format!(
            "sessions.patch's entry has no thinkingLevel high: {patched_entry}"
        ));
    }
    if history_thinking != "high" {
        problems.push(format!(
            "chat.history's thinkingLevel is {history_thinking}, not high"
        ));
    }
    assert_eq!(problems, Vec::<String>::new());
}

#[tokio::test]
async fn sessions_compact_summarises_the_history() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    // No title calls: the only side call is the summary.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "remember the word pelican").await;
    client.chat_end(&run).await;
    let sides = mock.side_requests().len();
    mock.push_side(Reply::sse(anthropic_text(
        "The user asked to remember pelican.",
        30,
    )));
    let compacted = client
        .call_ok("sessions.compact", json!({"key": key}))
        .await;
    assert_eq!(
        pick(&compacted, &["ok", "key", "compacted"]),
        json!({"ok": true, "key": key, "compacted": true})
    );
    assert!(
        compacted["result"]["tokensBefore"].as_u64().unwrap() > 0,
        "{compacted}"
    );
    let summary_request = mock
        .side_requests()
        .into_iter()
        .nth(sides)
        .expect("no summary request");
    assert!(
        summary_request
            .body
            .to_string()
            .contains("remember the word pelican")
    );
    // The next turn starts from the summary.
    mock.push(Reply::sse(anthropic_text("Pelican.", 30)));
    let run = client.chat_send(&key, "which word?").await;
    client.chat_end(&run).await;
    let body = mock.requests().last().unwrap().body.to_string();
    assert!(
        body.contains("The user asked to remember pelican."),
        "{body}"
    );
    // A summary that cannot be written is a failed compaction, with the
    // reason, and the history stays as it was.
    mock.push_side(Reply::status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}"#,
    ));
    let failed = client
        .call_ok("sessions.compact", json!({"key": key}))
        .await;
    assert_eq!(
        pick(&failed, &["ok", "compacted"]),
        json!({"ok": false, "compacted": false}),
        "{failed}"
    );
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("prompt is too long"),
        "{failed}"
    );
    // What pincer does not do is refused, never ignored.
    for (params, field) in [
        (json!({"key": key, "maxLines": 200}), "maxLines"),
        (json!({"key": key, "keepRecent": 2}), "keepRecent"),
    ] {
        let refused = client.call("sessions.compact", params).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(field) && message.contains("not supported by pincer"),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn models_list_and_health() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.operator(&["operator.read"], &[]).await;
    let models = client.call_ok("models.list", json!({})).await;
    let list = models["models"].as_array().unwrap();
    assert!(
        list.iter().any(|m| m["provider"] == "anthropic"),
        "{models}"
    );
    for model in list {
        assert!(
            model["id"].is_string() && model["name"].is_string(),
            "{model}"
        );
        assert!(model["provider"].is_string(), "{model}");
        assert!(
            model["contextWindow"].as_u64().is_some_and(|w| w > 0),
            "{model}"
        );
        assert!(model["reasoning"].is_boolean(), "{model}");
    }
    let health = client.call_ok("health", json!({})).await;
    assert!(health["uptimeMs"].is_u64(), "{health}");
    assert_eq!(pick(&health, &["ok"]), json!({"ok": true}));
}

/// The usage methods add up the sessions' model calls as OpenClaw's
/// usage page and `openclaw gateway usage-cost` read them, for a client
/// with read access; their mistakes are refused as OpenClaw refuses them.
#[tokio::test]
async fn usage_methods_answer_in_openclaw_s_shapes() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let (first, second) = (new_key(), new_key());
    mock.push(Reply::sse(anthropic_text("One.", 100)));
    let run = admin.chat_send(&first, "first prompt").await;
    admin.chat_end(&run).await;
    mock.push(Reply::sse(anthropic_text("Two.", 200)));
    let run = admin.chat_send(&second, "second prompt").await;
    admin.chat_end(&run).await;

    let mut client = gateway.operator(&["operator.read"], &[]).await;
    let used = client.call_ok("sessions.usage", json!({})).await;
    let today = used["endDate"].as_str().unwrap().to_string();
    assert_eq!(today.len(), 10, "{used}");
    assert_eq!(used["totals"]["input"], 300, "{used}");
    assert_eq!(used["totals"]["output"], 24, "{used}");
    assert_eq!(used["totals"]["totalTokens"], 324, "{used}");
    assert!(
        used["totals"]["totalCost"].as_f64().unwrap() > 0.0,
        "{used}"
    );
    assert_eq!(used["cacheStatus"]["status"], "fresh");
    assert_eq!(used["creatorOptions"], json!([{"key": "[\"unknown\"]"}]));
    let rows = used["sessions"].as_array().unwrap();
    let mut keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    keys.sort();
    let mut made = [first.as_str(), second.as_str()];
    made.sort();
    assert_eq!(keys, made, "{used}");
    assert_eq!(rows[0]["agentId"], "main");
    assert_eq!(rows[0]["model"], "claude-sonnet-4-5");
    assert_eq!(rows[0]["usage"]["messageCounts"]["user"], 1, "{used}");
    assert_eq!(rows[0]["usage"]["activityDates"], json!([today]));
    let aggregates = &used["aggregates"];
    assert_eq!(aggregates["sessionCount"], 2, "{aggregates}");
    assert_eq!(aggregates["messages"]["assistant"], 2);
    assert_eq!(aggregates["byModel"][0]["model"], "claude-sonnet-4-5");
    assert_eq!(aggregates["byModel"][0]["count"], 2);
    assert_eq!(aggregates["daily"][0]["tokens"], 324);
    assert_eq!(aggregates["costDaily"][0]["date"], json!(today));

    // One session by key; the limit cuts rows, not the aggregates.
    let one = client
        .call_ok(
            "sessions.usage",
            json!({"key": first, "includeContextWeight": true}),
        )
        .await;
    assert_eq!(one["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(one["sessions"][0]["contextWeight"], json!(null));
    assert_eq!(one["totals"]["totalTokens"], 112);
    let limited = client.call_ok("sessions.usage", json!({"limit": 1})).await;
    assert_eq!(limited["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(limited["aggregates"]["sessionCount"], 2);
    // A window before the sessions' messages: they are listed, as
    // OpenClaw lists every session changed since the window's start,
    // with nothing used in it.
    let before = client
        .call_ok(
            "sessions.usage",
            json!({"startDate": "2020-01-01", "endDate": "2020-01-31"}),
        )
        .await;
    assert_eq!(before["sessions"].as_array().unwrap().len(), 2, "{before}");
    assert_eq!(before["sessions"][0]["usage"]["messageCounts"]["total"], 0);
    assert_eq!(before["totals"]["totalTokens"], 0);
    assert_eq!(before["aggregates"]["sessionCount"], 0);
    // No creator pincer does not file under, no session the key names.
    for params in [
        json!({"creatorKey": "[\"profile\",\"someone\"]"}),
        json!({"key": "agent:main:never-used"}),
    ] {
        let none = client.call_ok("sessions.usage", params.clone()).await;
        assert_eq!(none["sessions"], json!([]), "{params}: {none}");
        assert_eq!(none["totals"]["totalTokens"], 0, "{params}");
        assert_eq!(none["aggregates"]["sessionCount"], 0, "{params}");
    }

    // One session's detail.
    let series = client
        .call_ok("sessions.usage.timeseries", json!({"key": second}))
        .await;
    assert_eq!(series["points"].as_array().unwrap().len(), 1, "{series}");
    assert_eq!(series["points"][0]["totalTokens"], 212);
    assert_eq!(series["points"][0]["cumulativeTokens"], 212);
    let logs = client
        .call_ok("sessions.usage.logs", json!({"key": second, "limit": 1000}))
        .await;
    let logged: Vec<(&str, &str)> = logs["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["role"].as_str().unwrap(), l["content"].as_str().unwrap()))
        .collect();
    assert_eq!(logged.len(), 2, "{logs}");
    assert_eq!(logged[0].0, "user");
    assert!(logged[0].1.contains("second prompt"), "{logs}");
    assert_eq!(logged[1], ("assistant", "Two."));
    assert_eq!(logs["logs"][1]["tokens"], 212);

    // `openclaw gateway usage-cost`, and providers' quotas (none read).
    let cost = client.call_ok("usage.cost", json!({"days": 7})).await;
    assert_eq!(cost["days"], 7, "{cost}");
    assert_eq!(cost["totals"]["totalTokens"], 324);
    assert_eq!(cost["daily"][0]["date"], json!(today));
    let status = client.call_ok("usage.status", json!({})).await;
    assert_eq!(status["providers"], json!([]), "{status}");

    for (method, params, says) in [
        (
            "sessions.usage",
            json!({"agentScope": "all", "key": first}),
            "agentScope=all cannot be combined with key or agentId",
        ),
        (
            "sessions.usage",
            json!({"startDate": "2026-02-30", "endDate": "2026-03-01"}),
            "invalid startDate: expected a valid YYYY-MM-DD calendar date",
        ),
        (
            "sessions.usage",
            json!({"startDate": "2026-03-01"}),
            "startDate and endDate must be provided together",
        ),
        (
            "sessions.usage",
            json!({"mode": "specific", "timeZone": "Nowhere/Atlantis"}),
            "invalid timeZone",
        ),
        (
            "sessions.usage",
            json!({"agentId": "work"}),
            "unknown agent `work`",
        ),
        (
            "sessions.usage",
            json!({"limit": 0}),
            "`limit` must be 1 or more",
        ),
        (
            "sessions.usage.timeseries",
            json!({"key": "agent:main:never-used"}),
            "No transcript found for session: agent:main:never-used",
        ),
        ("sessions.usage.logs", json!({}), "key is required for logs"),
        (
            "sessions.usage.timeseries",
            json!({"key": "a\u{1b}[31mred"}),
            "`key` holds a control character",
        ),
        (
            "usage.cost",
            json!({"agentScope": "all", "agentId": "main"}),
            "cannot be combined",
        ),
    ] {
        let refused = client.call(method, params.clone()).await;
        assert_eq!(refused["ok"], false, "{method} {params}: {refused}");
        assert_eq!(refused["error"]["code"], "INVALID_REQUEST", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{method} {params}: {refused}");
    }
}

/// What OpenClaw's CLI sends besides the basics is taken: `health`'s
/// `probe`, the `status` summary, `sessions.describe`'s flags (`openclaw
/// mcp serve`), deleting only an archived session (a writer may), and
/// `agent` naming its session by id (`--session-id`).
#[tokio::test]
async fn the_fields_openclaw_s_cli_sends_are_taken() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut writer = gateway
        .operator(&["operator.read", "operator.write"], &[])
        .await;
    let key = new_key();
    mock.push(Reply::sse(anthropic_text("Kept for later.", 10)));
    let run = writer.chat_send(&key, "keep this").await;
    writer.chat_end(&run).await;

    let health = writer.call_ok("health", json!({"probe": true})).await;
    assert_eq!(health["ok"], true);
    let status = writer
        .call_ok("status", json!({"includeChannelSummary": false}))
        .await;
    assert_eq!(status["sessions"]["count"], 1, "{status}");
    assert_eq!(status["sessions"]["recent"][0]["key"], json!(key));
    assert_eq!(status["degradedPlugins"], json!([]));
    let refused = writer
        .call("status", json!({"includeCliProjection": true}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`includeCliProjection` is not supported by pincer"),
        "{refused}"
    );
    let described = writer
        .call_ok(
            "sessions.describe",
            json!({"key": key, "includeDerivedTitles": true, "includeLastMessage": true}),
        )
        .await;
    assert_eq!(
        described["session"]["lastMessagePreview"], "Kept for later.",
        "{described}"
    );

    // `agent` with the id of a session under another key runs in it.
    let session = described["session"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut agent = async |params: Value| {
        let id = writer.request("agent", params).await;
        let accepted = writer.response(&id).await;
        assert_eq!(accepted["ok"], true, "{accepted}");
        writer.response(&id).await["payload"].clone()
    };
    mock.push(Reply::sse(anthropic_text("Same session.", 10)));
    let answered = agent(json!({"message": "again", "sessionId": session,
        "sessionKey": "agent:main:main", "idempotencyKey": "by-id-1"}))
    .await;
    assert_eq!(
        answered["result"]["payloads"][0]["text"], "Same session.",
        "{answered}"
    );
    let roles = mock.requests()[1].body["messages"].to_string();
    assert!(
        roles.contains("keep this") && roles.contains("again"),
        "{roles}"
    );
    // An id pincer does not have: a session of its own, continued.
    for (i, reply) in ["New one.", "Still it."].into_iter().enumerate() {
        mock.push(Reply::sse(anthropic_text(reply, 10)));
        let answered = agent(
            json!({"message": format!("turn {i}"), "sessionId": "my-own-id",
            "idempotencyKey": format!("by-id-new-{i}")}),
        )
        .await;
        assert_eq!(
            answered["result"]["payloads"][0]["text"], reply,
            "{answered}"
        );
    }
    let last = mock.requests()[3].body["messages"].to_string();
    assert!(
        last.contains("turn 0") && last.contains("turn 1") && !last.contains("keep this"),
        "{last}"
    );
    // An id whose key would be longer than a key may be is refused.
    let refused = writer
        .call(
            "agent",
            json!({"message": "x", "sessionId": "i".repeat(500), "idempotencyKey": "by-id-long"}),
        )
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`sessionId` must be 1 to 512 characters"),
        "{refused}"
    );
    assert_eq!(mock.requests().len(), 4);

    // Deleting: only an archived session, and then a writer may.
    let refused = writer
        .call("sessions.delete", json!({"key": key, "archivedOnly": true}))
        .await;
    assert_eq!(
        refused["error"]["message"],
        format!("Session {key} is not archived. Archive it first, then delete it."),
        "{refused}"
    );
    let refused = writer.call("sessions.delete", json!({"key": key})).await;
    assert_eq!(
        refused["error"]["details"]["missingScope"], "operator.admin",
        "{refused}"
    );
    writer
        .call_ok("sessions.patch", json!({"key": key, "archived": true}))
        .await;
    let deleted = writer
        .call_ok("sessions.delete", json!({"key": key, "archivedOnly": true}))
        .await;
    assert_eq!(deleted["deleted"], true, "{deleted}");
    assert!(
        !sandbox
            .home()
            .join("sessions")
            .join(format!("{session}.jsonl"))
            .exists()
    );
}

/// A session whose model calls `bash` with `command` and then answers.
async fn approval_setup(config: &str) -> (Sandbox, MockModel, Gateway, std::path::PathBuf, String) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let marker = sandbox.work().join("ran");
    let command = format!("touch {}", marker.display());
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::sse(anthropic_text("Done.", 30)));
    write_gateway_config(&sandbox, config);
    let gateway = Gateway::start(&sandbox, &mock).await;
    (sandbox, mock, gateway, marker, command)
}

#[tokio::test]
async fn an_approval_allowed_once_runs_the_tool_and_a_second_resolve_is_not_found() {
    let (sandbox, mock, gateway, marker, command) =
        approval_setup("approval_timeout_secs = 120").await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "touch it").await;
    let requested = client.next_event("exec.approval.requested").await["payload"].clone();
    let id = requested["id"].as_str().unwrap().to_string();
    let created = requested["createdAtMs"].as_u64().unwrap();
    let expires = requested["expiresAtMs"].as_u64().unwrap();
    assert!(
        (119_000..=121_000).contains(&(expires - created)),
        "{requested}"
    );
    assert!(
        requested["request"]["commandPreview"].is_string(),
        "{requested}"
    );
    assert_eq!(
        pick(&requested, &["approvalKind", "id", "allowedDecisions"]),
        json!({"approvalKind": "exec", "id": id, "allowedDecisions": ["allow-once", "allow-always", "deny"]})
    );
    assert_eq!(
        pick(
            &requested["request"],
            &["command", "sessionKey", "toolCallId", "toolName", "cwd"]
        ),
        json!({"command": command, "sessionKey": key, "toolCallId": "toolu_b", "toolName": "bash", "cwd": sandbox.work()})
    );
    assert!(!marker.exists(), "the command ran before it was approved");

    let got = client.call_ok("exec.approval.get", json!({"id": id})).await;
    assert_eq!(
        pick(
            &got,
            &[
                "id",
                "commandText",
                "allowedDecisions",
                "sessionKey",
                "toolCallId",
                "expiresAtMs"
            ]
        ),
        json!({"id": id, "commandText": command, "allowedDecisions": ["allow-once", "allow-always", "deny"],
               "sessionKey": key, "toolCallId": "toolu_b", "expiresAtMs": expires})
    );
    let listed = client.call_ok("exec.approval.list", json!({})).await;
    let ids: Vec<Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].clone())
        .collect();
    assert_eq!(ids, vec![json!(id)]);

    let resolved = client
        .call_ok(
            "exec.approval.resolve",
            json!({"id": id, "decision": "allow-once"}),
        )
        .await;
    assert_eq!(resolved, json!({"ok": true}));
    let event = client.next_event("exec.approval.resolved").await;
    assert_eq!(
        pick(
            &event["payload"],
            &["id", "decision", "sessionKey", "toolCallId", "resolvedBy"]
        ),
        json!({"id": id, "decision": "allow-once", "sessionKey": key, "toolCallId": "toolu_b", "resolvedBy": "client"})
    );
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    assert!(marker.exists(), "the approved command did not run");
    assert_eq!(tool_result(&mock.requests()[1].body, "toolu_b").1, false);

    let again = client
        .call(
            "exec.approval.resolve",
            json!({"id": id, "decision": "deny"}),
        )
        .await;
    assert_not_found(&again);
    let again = client.call("exec.approval.get", json!({"id": id})).await;
    assert_not_found(&again);
    let listed = client.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(listed, json!([]));
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// `APPROVAL_NOT_FOUND` as the error's code or its `details.code` (the
/// spec names the code, not where it goes).
fn assert_not_found(res: &Value) {
    assert_eq!(res["ok"], json!(false), "{res}");
    assert!(
        res["error"]["code"] == "APPROVAL_NOT_FOUND"
            || res["error"]["details"]["code"] == "APPROVAL_NOT_FOUND",
        "{res}"
    );
}

#[tokio::test]
async fn the_first_resolve_wins_and_a_denial_is_what_the_model_sees() {
    let (_sandbox, mock, gateway, marker, _command) = approval_setup("").await;
    let mut first = gateway.admin().await;
    let mut second = gateway
        .operator(&["operator.approvals", "operator.read"], &[])
        .await;
    let key = new_key();
    let run = first.chat_send(&key, "touch it").await;
    let id = first.next_event("exec.approval.requested").await["payload"]["id"].clone();
    // Every approver is asked.
    assert_eq!(
        second.next_event("exec.approval.requested").await["payload"]["id"],
        id
    );
    let denied = second
        .call_ok(
            "exec.approval.resolve",
            json!({"id": id, "decision": "deny"}),
        )
        .await;
    assert_eq!(denied, json!({"ok": true}));
    let late = first
        .call(
            "exec.approval.resolve",
            json!({"id": id, "decision": "allow-once"}),
        )
        .await;
    assert_not_found(&late);
    let event = first.next_event("exec.approval.resolved").await;
    assert_eq!(
        pick(&event["payload"], &["id", "decision", "resolvedBy"]),
        json!({"id": id, "decision": "deny", "resolvedBy": "client"})
    );
    let end = first.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    assert!(!marker.exists(), "a denied command ran");
    let (text, is_error) = tool_result(&mock.requests()[1].body, "toolu_b");
    assert!(
        is_error,
        "the model was told the denied call succeeded: {text}"
    );
    // The tool's events say so too.
    let results: Vec<Value> = agent_of(&first, &run, "tool")
        .into_iter()
        .filter(|e| e["data"]["phase"] == "result")
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["data"]["isError"], json!(true));
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn an_unanswered_approval_times_out_as_a_rejection() {
    let (_sandbox, mock, gateway, marker, _command) =
        approval_setup("approval_timeout_secs = 1").await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "touch it").await;
    let requested = client.next_event("exec.approval.requested").await;
    let id = requested["payload"]["id"].clone();
    let event = client.next_event("exec.approval.resolved").await;
    assert_eq!(
        pick(&event["payload"], &["id", "resolvedBy", "sessionKey"]),
        json!({"id": id, "resolvedBy": "timeout", "sessionKey": key})
    );
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    assert!(!marker.exists());
    let (_, is_error) = tool_result(&mock.requests()[1].body, "toolu_b");
    assert!(is_error);
    let late = client
        .call(
            "exec.approval.resolve",
            json!({"id": id, "decision": "allow-once"}),
        )
        .await;
    assert_not_found(&late);
    assert!(!marker.exists());
}

#[tokio::test]
async fn a_reconnecting_client_reads_the_history_and_an_editor_loads_the_session() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let key = new_key();
    let session_id = {
        let mut client = gateway.admin().await;
        let run = client.chat_send(&key, "What does hello.txt say?").await;
        client.chat_end(&run).await;
        client
            .call_ok("sessions.resolve", json!({"key": key}))
            .await["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // A new connection, as after a network drop.
    let mut again = gateway.operator(&["operator.read"], &[]).await;
    let history = again
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    assert_eq!(history["sessionKey"], json!(key));
    assert_eq!(history["sessionId"], json!(session_id));
    assert_eq!(
        messages_shape(&history["messages"]),
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "What does hello.txt say?"}]}),
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "I'll read the file."},
                {"type": "toolCall", "id": "toolu_01", "name": "read", "kind": "read",
                 "title": "Read hello.txt", "arguments": {"path": "hello.txt"}}]}),
            json!({"role": "toolResult", "toolCallId": "toolu_01", "toolName": "read",
                   "content": [{"type": "text", "text": "hello"}], "isError": false}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "The file says hello."}]}),
        ]
    );
    let history_messages = history["messages"].clone();
    drop(again);
    gateway.stop().await;

    // `pincer sessions list` lists it.
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
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        pick(&rows[0], &["sessionId", "title", "cwd"]),
        json!({"sessionId": session_id, "title": "What does hello.txt say?", "cwd": sandbox.work()})
    );

    // An editor loads it and sees the replay, then goes on.
    mock.push(Reply::sse(anthropic_text("Still hello.", 40)));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session_id, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replay: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .map(|u| match u["sessionUpdate"].as_str().unwrap() {
            "user_message_chunk" | "agent_message_chunk" => {
                json!([u["sessionUpdate"], u["content"]["text"]])
            }
            "tool_call" => json!(["tool_call", u["toolCallId"]]),
            "tool_call_update" => json!(["tool_call_update", u["toolCallId"], u["status"]]),
            other => json!([other]),
        })
        .collect();
    assert_eq!(
        replay,
        vec![
            json!(["user_message_chunk", "What does hello.txt say?"]),
            json!(["agent_message_chunk", "I'll read the file."]),
            json!(["tool_call", "toolu_01"]),
            json!(["tool_call_update", "toolu_01", "completed"]),
            json!(["agent_message_chunk", "The file says hello."]),
        ]
    );
    let id = acp
        .send("session/prompt", support::prompt(&session_id, "and now?"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        user_texts(&mock.requests().last().unwrap().body),
        vec!["What does hello.txt say?", "and now?"]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    assert_timestamps(&history_messages);
}

/// A command that runs until `go` appears in the project; its comment
/// names the sandbox, so `process_running` finds only this test's.
fn wait_for_go(sandbox: &Sandbox) -> String {
    json!({"command": format!("while [ ! -f go ]; do sleep 0.02; done; echo went # {}", marker(sandbox))})
        .to_string()
}

fn marker(sandbox: &Sandbox) -> String {
    sandbox
        .dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string()
}

fn go_running(sandbox: &Sandbox) -> bool {
    process_running(&format!("done; echo went # {}", marker(sandbox)))
}

/// Starts "first" on a session whose model runs a waiting `bash` (the
/// user's config says `bypass`, so that these tests need no approvals) and
/// then `read`s a.txt; once the command runs, sends `later` with
/// `mode`. Returns the client, the key, the first run and the later runs.
async fn busy_session(
    gateway: &Gateway,
    sandbox: &Sandbox,
    mode: &str,
    later: &[&str],
) -> (Client, String, String, Vec<String>) {
    let mut client = gateway.admin().await;
    let key = new_key();
    let first = client.chat_send(&key, "first").await;
    wait_until("the waiting command never started", TIMEOUT, || {
        go_running(sandbox)
    })
    .await;
    let mut runs = Vec::new();
    for text in later {
        let run = uuid::Uuid::new_v4().to_string();
        let res = client
            .call_ok(
                "chat.send",
                json!({"sessionKey": key, "message": text, "idempotencyKey": run, "queueMode": mode}),
            )
            .await;
        assert_eq!(res["runId"], json!(run), "{res}");
        runs.push(run);
    }
    (client, key, first, runs)
}

fn busy_mock(sandbox: &Sandbox, mock: &MockModel) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "default_mode = \"bypass\"\n",
    )
    .unwrap();
    sandbox.write("a.txt", "alpha\n");
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("w1", "bash", &wait_for_go(sandbox)),
        ("r1", "read", r#"{"path": "a.txt"}"#),
    ])));
}

#[tokio::test]
async fn steer_skips_the_rest_of_the_batch_and_the_model_reads_the_message_next() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    busy_mock(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text(
        "Understood, the second thing.",
        50,
    )));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut client, _key, first, runs) =
        busy_session(&gateway, &sandbox, "steer", &["second"]).await;
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let end_first = client.chat_end(&first).await;
    let end_second = client.chat_end(&runs[0]).await;
    assert_eq!(end_first["payload"]["state"], "final");
    assert_eq!(end_second["payload"]["state"], "final");
    assert!(message_text(&end_second["payload"]).ends_with("Understood, the second thing."));
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
async fn followup_waits_for_the_run_to_end() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    busy_mock(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text("First done.", 50)));
    mock.push(Reply::sse(anthropic_text("Second done.", 60)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut client, _key, first, runs) =
        busy_session(&gateway, &sandbox, "followup", &["second"]).await;
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    let end_first = client.chat_end(&first).await;
    assert_eq!(end_first["payload"]["state"], "final");
    assert!(message_text(&end_first["payload"]).ends_with("First done."));
    let end_second = client.chat_end(&runs[0]).await;
    assert_eq!(end_second["payload"]["state"], "final");
    assert!(message_text(&end_second["payload"]).ends_with("Second done."));
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        tool_result(&requests[1].body, "r1"),
        ("alpha".to_string(), false)
    );
    assert_eq!(user_texts(&requests[1].body), vec!["first"]);
    assert_eq!(user_texts(&requests[2].body), vec!["first", "second"]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn collect_joins_the_messages_that_came_while_busy_into_one_prompt() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    busy_mock(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text("First done.", 50)));
    mock.push(Reply::sse(anthropic_text("Both done.", 60)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut client, _key, first, runs) =
        busy_session(&gateway, &sandbox, "collect", &["second", "third"]).await;
    std::fs::write(sandbox.work().join("go"), "").unwrap();
    assert_eq!(client.chat_end(&first).await["payload"]["state"], "final");
    for run in &runs {
        let end = client.chat_end(run).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
    }
    mock.wait_for_requests(3, TIMEOUT).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "the collected messages were one prompt");
    assert_eq!(
        tool_result(&requests[1].body, "r1"),
        ("alpha".to_string(), false)
    );
    let texts = user_texts(&requests[2].body);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0], "first");
    let joined = &texts[1];
    let (s, t) = (joined.find("second"), joined.find("third"));
    assert!(s.is_some() && t.is_some() && s < t, "{joined:?}");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn interrupt_aborts_the_run_and_starts_the_new_message() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    busy_mock(&sandbox, &mock);
    mock.push(Reply::sse(anthropic_text("Started over.", 50)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut client, _key, first, runs) =
        busy_session(&gateway, &sandbox, "interrupt", &["second"]).await;
    let end_first = client.chat_end(&first).await;
    assert_eq!(end_first["payload"]["state"], "aborted", "{end_first}");
    let end_second = client.chat_end(&runs[0]).await;
    assert_eq!(end_second["payload"]["state"], "final");
    assert!(message_text(&end_second["payload"]).ends_with("Started over."));
    // The waiting command was killed, never told to go.
    wait_until("the interrupted command still runs", TIMEOUT, || {
        !go_running(&sandbox)
    })
    .await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(user_texts(&requests[1].body).last().unwrap(), "second");
    assert!(
        tool_result(&requests[1].body, "r1").1,
        "the rest of the batch ran"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_gateway_client_follows_and_steers_the_session_an_editor_runs() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let marker = sandbox.work().join("ran");
    let command = format!("touch {}", marker.display());
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_e",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::sse(anthropic_text("Done.", 30)));
    mock.push(Reply::sse(anthropic_text("From the phone.", 40)));
    let token = support::gateway::new_token();
    let (mut acp, addr) = acp_with_gateway(&sandbox, &mock, &token).await;
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let mut phone = Client::open(addr).await;
    phone
        .connect_ok(connect_params(Some(&token), &[], &["tool-events"]))
        .await;
    assert_eq!(
        pick(
            &phone
                .call_ok("chat.subscribe", json!({"sessionKey": session}))
                .await,
            &["ok"]
        ),
        json!({"ok": true})
    );

    // The editor prompts and is asked, as always; the phone follows.
    let id = acp
        .send("session/prompt", support::prompt(&session, "touch it"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| {
            assert_eq!(method, "session/request_permission");
            support::selected("allow_once")
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        support::acp_client::requests_of(&before, "session/request_permission").len(),
        1
    );
    assert!(marker.exists());
    let joined = phone.next_event("session.message").await;
    assert_eq!(joined["payload"]["sessionKey"], json!(session));
    assert_eq!(message_text(&joined["payload"]), "touch it");
    let run = joined["payload"]["runId"].as_str().unwrap().to_string();
    let end = phone.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    assert!(message_text(&end["payload"]).ends_with("Done."), "{end}");
    let resolved = phone.next_event("exec.approval.resolved").await;
    assert_eq!(
        pick(
            &resolved["payload"],
            &["decision", "sessionKey", "toolCallId", "resolvedBy"]
        ),
        json!({"decision": "allow-once", "sessionKey": session, "toolCallId": "toolu_e", "resolvedBy": "editor"})
    );
    let tools: Vec<Value> = agent_of(&phone, &run, "tool")
        .iter()
        .map(|e| pick(&e["data"], &["phase", "toolCallId"]))
        .filter(|d| d["phase"] != "update")
        .collect();
    assert_eq!(
        tools,
        vec![
            json!({"phase": "start", "toolCallId": "toolu_e"}),
            json!({"phase": "result", "toolCallId": "toolu_e"}),
        ]
    );

    // The phone sends; the editor sees the turn in its session.
    let sent = phone.chat_send(&session, "hello from the phone").await;
    let end = phone.chat_end(&sent).await;
    assert!(message_text(&end["payload"]).ends_with("From the phone."));
    let mut shown = String::new();
    while !shown.contains("From the phone.") {
        let message = acp.next().await;
        let update = &message["params"]["update"];
        if message["method"] == "session/update"
            && message["params"]["sessionId"] == json!(session)
            && update["sessionUpdate"] == "agent_message_chunk"
        {
            shown.push_str(update["content"]["text"].as_str().unwrap_or_default());
        }
    }
    assert_eq!(
        user_texts(&mock.requests().last().unwrap().body),
        vec!["touch it", "hello from the phone"]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn session_scoped_clients_get_events_only_for_sessions_they_used() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("For the first.", 20)));
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body: anthropic_text("For the second.", 20),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    mock.push(Reply::sse(anthropic_text("For the third.", 20)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut owner = gateway.admin().await;
    let mut scoped = gateway
        .operator(&[], &["session-scoped-events", "tool-events"])
        .await;
    let (first, second, third) = (new_key(), new_key(), new_key());
    let run = owner.chat_send(&first, "one").await;
    owner.chat_end(&run).await;
    // The scoped client opens the second session while its run waits.
    let other = owner.chat_send(&second, "two").await;
    mock.wait_for_requests(2, TIMEOUT).await;
    let history = scoped
        .call_ok("chat.history", json!({"sessionKey": second}))
        .await;
    assert!(history["sessionId"].is_string(), "{history}");
    gate.notify_one();
    owner.chat_end(&other).await;
    let end = scoped.chat_end(&other).await;
    assert!(message_text(&end["payload"]).ends_with("For the second."));
    let seen: Vec<Value> = scoped
        .events
        .iter()
        .filter(|e| {
            e["event"] == "chat" || e["event"] == "agent" || e["event"] == "session.message"
        })
        .map(|e| e["payload"]["sessionKey"].clone())
        .filter(|k| *k != json!(second))
        .collect();
    assert_eq!(
        seen,
        Vec::<Value>::new(),
        "events of a session it never used"
    );
    // A key it opened before anyone wrote to it (a chat page opened on an
    // empty session) is used too: its first run reaches the client.
    let empty = scoped
        .call_ok("chat.history", json!({"sessionKey": third}))
        .await;
    assert_eq!(empty["messages"], json!([]));
    let later = owner.chat_send(&third, "three").await;
    owner.chat_end(&later).await;
    let end = scoped.chat_end(&later).await;
    assert!(message_text(&end["payload"]).ends_with("For the third."));
}

#[tokio::test]
async fn chat_send_passes_image_attachments_to_the_model() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("A red dot.", 30)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let run = uuid::Uuid::new_v4().to_string();
    let sent = client
        .call_ok(
            "chat.send",
            json!({"sessionKey": key, "message": "what is this?", "idempotencyKey": run,
                   "attachments": [{"type": "image", "mimeType": "image/png", "content": png}]}),
        )
        .await;
    assert_eq!(
        pick(&sent, &["runId", "status"]),
        json!({"runId": run, "status": "started"})
    );
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    let body = support::without_time_lines(&mock.requests()[0].body);
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let images: Vec<Value> = last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "image")
        .map(|b| b["source"].clone())
        .collect();
    assert_eq!(
        images,
        vec![json!({"type": "base64", "media_type": "image/png", "data": png})]
    );
    assert_eq!(user_texts(&mock.requests()[0].body), vec!["what is this?"]);
}

/// A turn through the gateway that writes `file`, its write approved.
async fn writing_turn(client: &mut Client, mock: &MockModel, key: &str, file: &str) {
    mock.push(Reply::sse(anthropic_tool_call(
        &format!("toolu_{file}"),
        "write",
        &json!({"path": file, "content": "written\n"}),
    )));
    mock.push(Reply::sse(anthropic_text("Written.", 30)));
    let run = client.chat_send(key, &format!("write {file}")).await;
    let asked = client.next_event("exec.approval.requested").await["payload"]["id"].clone();
    client
        .call_ok(
            "exec.approval.resolve",
            json!({"id": asked, "decision": "allow-once"}),
        )
        .await;
    client.chat_end(&run).await;
}

#[tokio::test]
async fn sessions_rewind_and_fork_go_back_to_a_turn_with_its_files() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    writing_turn(&mut client, &mock, &key, "one.txt").await;
    writing_turn(&mut client, &mock, &key, "two.txt").await;

    // The history names the turns of its user messages.
    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let users: Vec<Value> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| json!({"turn": m["turn"], "has_id": m["id"].is_string()}))
        .collect();
    assert_eq!(
        users,
        [
            json!({"turn": 1, "has_id": true}),
            json!({"turn": 2, "has_id": true})
        ]
    );
    let second_id = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .nth(1)
        .unwrap()["id"]
        .clone();

    // A fork before turn 2: a new key whose history is turn 1 alone.
    let forked = client
        .call_ok("sessions.fork", json!({"key": key, "messageId": second_id}))
        .await;
    let fork_key = forked["key"].as_str().unwrap().to_string();
    assert!(fork_key.starts_with(&format!("{key}:fork:")), "{forked}");
    assert_eq!(forked["parentKey"], json!(key));
    let fork_history = client
        .call_ok("chat.history", json!({"sessionKey": fork_key}))
        .await;
    let texts = fork_history["messages"].to_string();
    assert!(
        texts.contains("write one.txt") && !texts.contains("write two.txt"),
        "{texts}"
    );
    assert!(
        sandbox.work().join("two.txt").exists(),
        "a fork leaves the files"
    );

    // A rewind to before turn 2, through the session: its question has
    // the session's own words for the choices.
    let id = client
        .request("sessions.rewind", json!({"key": key, "turn": 2}))
        .await;
    let asked = client.next_event("exec.approval.requested").await["payload"].clone();
    assert_eq!(asked["labels"]["allow-once"], "Restore", "{asked}");
    assert_eq!(asked["labels"]["deny"], "Cancel", "{asked}");
    // It says which files change, with their diffs.
    let details = asked["request"]["details"].as_str().unwrap();
    assert!(
        details.contains("Puts back 1 file") && details.contains("two.txt"),
        "{asked}"
    );
    let diffs = asked["request"]["diffs"].as_array().unwrap();
    assert_eq!(diffs.len(), 1, "{asked}");
    assert!(
        diffs[0]["path"].as_str().unwrap().ends_with("two.txt"),
        "{asked}"
    );
    assert!(diffs[0]["oldText"].is_string(), "{asked}");
    // And so does the list of pending approvals.
    let pending = client.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(pending[0]["diffs"], json!(diffs), "{pending}");
    client
        .call_ok(
            "exec.approval.resolve",
            json!({"id": asked["id"], "decision": "allow-once"}),
        )
        .await;
    let answer = client.response(&id).await;
    assert_eq!(answer["ok"], json!(true), "{answer}");
    assert!(!sandbox.work().join("two.txt").exists());
    assert!(sandbox.work().join("one.txt").exists());
    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let texts = history["messages"].to_string();
    assert!(!texts.contains("write two.txt"), "{texts}");

    // Bad params are refused.
    let refused = client
        .call("sessions.rewind", json!({"key": key, "turn": 0}))
        .await;
    assert_eq!(refused["ok"], json!(false), "{refused}");
    let refused = client
        .call("sessions.rewind", json!({"key": key, "messageId": "e999"}))
        .await;
    assert_eq!(refused["ok"], json!(false), "{refused}");
}

#[tokio::test]
async fn a_helper_of_a_gateway_session_is_listed_with_its_parent_key() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "check the docs", "prompt": "JOB-DOCS: read the docs"}),
    )));
    mock.push_for(
        "JOB-DOCS",
        Reply::sse(anthropic_text("The docs are fine.", 10)),
    );
    mock.push(Reply::sse(anthropic_text(
        "Your helper says the docs are fine.",
        10,
    )));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "check the docs with a helper").await;
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let listed = client.call_ok("sessions.list", json!({})).await;
    let rows = listed["sessions"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{listed}");
    let helper = rows
        .iter()
        .find(|r| r.get("parentSessionKey").is_some())
        .expect("no helper row");
    assert_eq!(helper["parentSessionKey"], json!(key));
    assert_eq!(helper["spawnedBy"], json!(key));
    assert_eq!(helper["subagent"], "general-purpose");
    assert_eq!(helper["derivedTitle"], "check the docs");
    assert_eq!(helper["parentToolCallId"], "t1");
    assert_eq!(helper["helperState"], "done", "{helper}");
    assert_eq!(helper["interrupted"], false, "{helper}");
    // Its key is a spawned session's, as OpenClaw names them.
    let helper_key = helper["key"].as_str().unwrap().to_string();
    assert!(
        helper_key.starts_with("agent:main:subagent:"),
        "{helper_key}"
    );
    // The parent's run announced it inside its `task` call, and its end.
    let announced: Vec<Value> = client
        .payloads_of("agent")
        .into_iter()
        .filter(|p| p["stream"] == "subagent")
        .collect();
    assert_eq!(announced.len(), 2, "{announced:?}");
    let start = &announced[0];
    assert_eq!(start["runId"], json!(run), "{start}");
    assert_eq!(start["sessionKey"], json!(key), "{start}");
    assert_eq!(start["data"]["phase"], "start", "{start}");
    assert_eq!(start["data"]["toolCallId"], "t1", "{start}");
    assert_eq!(start["data"]["childSessionKey"], json!(helper_key));
    assert_eq!(start["data"]["title"], "check the docs");
    assert_eq!(start["data"]["agent"], "general-purpose");
    let end = &announced[1];
    assert_eq!(end["data"]["phase"], "end", "{end}");
    assert_eq!(end["data"]["state"], "done", "{end}");
    // The helper's own run streamed under its key, naming its parent,
    // and ended before its parent's.
    let child_run = start["data"]["childRunId"].as_str().unwrap();
    let chats = client.payloads_of("chat");
    let child_final = chats
        .iter()
        .position(|p| p["runId"] == json!(child_run) && p["state"] == "final")
        .expect("no final of the helper's run");
    let final_frame = &chats[child_final];
    assert_eq!(final_frame["sessionKey"], json!(helper_key));
    assert_eq!(final_frame["spawnedBy"], json!(key));
    assert_eq!(
        final_frame["message"]["content"][0]["text"],
        "The docs are fine."
    );
    let parent_final = chats
        .iter()
        .position(|p| p["runId"] == json!(run) && p["state"] == "final")
        .unwrap();
    assert!(child_final < parent_final);
    // Its history is read by its key.
    let history = client
        .call_ok("chat.history", json!({"sessionKey": helper_key}))
        .await;
    let texts = history["messages"].to_string();
    assert!(texts.contains("JOB-DOCS: read the docs"), "{texts}");
    assert!(texts.contains("The docs are fine."), "{texts}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn chat_abort_on_a_helpers_key_stops_that_helper_and_its_parent_goes_on() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "count the stars", "prompt": "JOB-STARS: count them"}),
    )));
    mock.push_for(
        "JOB-STARS",
        Reply::Sse {
            body: anthropic_text("Too many.", 10),
            delay: Duration::ZERO,
            gate: Some(gate.clone()),
        },
    );
    mock.push(Reply::sse(anthropic_text("The helper was stopped.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client
        .chat_send(&key, "count the stars with a helper")
        .await;
    let started = client
        .next_where("the helper's announcement", |f| {
            f["event"] == "agent"
                && f["payload"]["stream"] == "subagent"
                && f["payload"]["data"]["phase"] == "start"
        })
        .await;
    let helper_key = started["payload"]["data"]["childSessionKey"]
        .as_str()
        .unwrap()
        .to_string();
    let child_run = started["payload"]["data"]["childRunId"]
        .as_str()
        .unwrap()
        .to_string();
    // It cannot be prompted while it runs: it is its parent's.
    let refused = client
        .call(
            "chat.send",
            json!({"sessionKey": helper_key, "message": "hurry", "idempotencyKey": "r-hurry"}),
        )
        .await;
    assert_eq!(refused["ok"], json!(false), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is a helper working for its parent's run"),
        "{refused}"
    );
    let aborted = client
        .call_ok("chat.abort", json!({"sessionKey": helper_key}))
        .await;
    assert_eq!(aborted["aborted"], json!(true), "{aborted}");
    let child_end = client.chat_end(&child_run).await;
    assert_eq!(child_end["payload"]["state"], "aborted", "{child_end}");
    let ended = client
        .next_where("the helper's end on its parent's run", |f| {
            f["event"] == "agent"
                && f["payload"]["stream"] == "subagent"
                && f["payload"]["data"]["phase"] == "end"
        })
        .await;
    assert_eq!(ended["payload"]["data"]["state"], "stopped", "{ended}");
    // The parent went on: its call says the helper was stopped.
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let parent_request = mock.requests().last().unwrap().body.to_string();
    assert!(
        parent_request.contains("The user stopped this helper"),
        "{parent_request}"
    );
    gate.notify_one();
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn background_work_that_ends_after_the_run_starts_a_new_run_with_its_result() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "index the wiki", "prompt": "JOB-WIKI: index it", "background": true}),
    )));
    mock.push_for(
        "JOB-WIKI",
        Reply::Sse {
            body: anthropic_text("Indexed 42 pages.", 10),
            delay: Duration::ZERO,
            gate: Some(gate.clone()),
        },
    );
    mock.push(Reply::sse(anthropic_text("A helper is indexing it.", 10)));
    mock.push_for(
        "[Background task t1",
        Reply::sse(anthropic_text("The wiki has 42 pages now indexed.", 10)),
    );
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client
        .chat_send(&key, "index the wiki in the background")
        .await;
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    gate.notify_one();
    // A new run of the session starts with the helper's result.
    let message = client
        .next_where("the background result as the session's message", |f| {
            f["event"] == "session.message"
                && f["payload"]["sessionKey"] == json!(key)
                && f["payload"]["message"]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("[Background task t1"))
        })
        .await;
    let second = message["payload"]["runId"].as_str().unwrap().to_string();
    assert_ne!(second, run);
    let text = message["payload"]["message"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("Indexed 42 pages."), "{text}");
    let end = client.chat_end(&second).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    assert_eq!(
        end["payload"]["message"]["content"][0]["text"],
        "The wiki has 42 pages now indexed."
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn sessions_create_makes_or_adopts_a_key_and_unsupported_fields_are_refused_by_name() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("First.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    // What OpenClaw's TUI sends for `/new`.
    let created = client
        .call_ok(
            "sessions.create",
            json!({"key": "tui-1", "agentId": "main", "parentSessionKey": "agent:main:main", "succeedsParent": true}),
        )
        .await;
    assert_eq!(created["key"], "tui-1", "{created}");
    let session = created["sessionId"].as_str().unwrap().to_string();
    // The key names that session from now on.
    let run = client.chat_send("tui-1", "hello").await;
    client.chat_end(&run).await;
    let resolved = client
        .call_ok("sessions.resolve", json!({"key": "tui-1"}))
        .await;
    assert!(resolved.to_string().contains(&session), "{resolved}");
    // Asked again for the same key, it is adopted, not made anew.
    let again = client
        .call_ok("sessions.create", json!({"key": "tui-1", "label": "Mine"}))
        .await;
    assert_eq!(again["sessionId"], json!(session), "{again}");
    assert_eq!(again["entry"]["label"], "Mine", "{again}");
    // Without a key, a new one.
    let fresh = client.call_ok("sessions.create", json!({})).await;
    assert!(
        fresh["key"].as_str().unwrap().starts_with("web:"),
        "{fresh}"
    );
    assert_ne!(fresh["sessionId"], json!(session));
    // `agent:main:<key>` is the same session as `<key>`, as OpenClaw's
    // clients address it.
    let history = client
        .call_ok("chat.history", json!({"sessionKey": "agent:main:tui-1"}))
        .await;
    assert_eq!(history["sessionId"], json!(session), "{history}");
    assert!(
        history["messages"].to_string().contains("First."),
        "{history}"
    );
    // What pincer does not do is refused, naming the field, never
    // answered "ok" and left undone.
    for (method, params, field) in [
        (
            "sessions.create",
            json!({"key": "x", "worktree": true}),
            "worktree",
        ),
        ("sessions.create", json!({"agentId": "ops"}), "ops"),
        (
            "sessions.patch",
            json!({"key": "tui-1", "fastMode": true}),
            "fastMode",
        ),
        (
            "sessions.patch",
            json!({"key": "tui-1", "verboseLevel": "loud"}),
            "verboseLevel",
        ),
    ] {
        let refused = client.call(method, params).await;
        assert_eq!(refused["ok"], json!(false), "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(field), "{message}");
    }
    // OpenClaw's verbose level (how much of tool calls its TUI shows) is
    // kept for the session's clients: on its row and with its history.
    let row = client
        .call_ok(
            "sessions.patch",
            json!({"key": "tui-1", "verboseLevel": "full"}),
        )
        .await;
    assert_eq!(row["entry"]["verboseLevel"], "full", "{row}");
    let history = client
        .call_ok("chat.history", json!({"sessionKey": "tui-1"}))
        .await;
    assert_eq!(history["verboseLevel"], "full");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// `chat.history` carries OpenClaw's message metadata: each message's
/// entry id and place, and the run it belongs to when the gateway ran it
/// (a user message's `idempotencyKey` is `<run>:user`), which OpenClaw's
/// clients match the copies they showed during the run against.
#[tokio::test]
async fn history_messages_name_their_entry_place_and_run() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("One.", 10)));
    mock.push(Reply::sse(anthropic_text("Two.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let first = client.chat_send(&key, "first").await;
    client.chat_end(&first).await;
    let second = client.chat_send(&key, "second").await;
    client.chat_end(&second).await;
    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let meta: Vec<Value> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            json!([
                m["role"],
                m["__openclaw"]["seq"],
                m["__openclaw"]["runId"],
                m["__openclaw"]["idempotencyKey"],
                m["stopReason"]
            ])
        })
        .collect();
    assert_eq!(
        meta,
        vec![
            json!(["user", 1, first, format!("{first}:user"), null]),
            json!(["assistant", 2, first, null, "stop"]),
            json!(["user", 3, second, format!("{second}:user"), null]),
            json!(["assistant", 4, second, null, "stop"]),
        ]
    );
    for message in history["messages"].as_array().unwrap() {
        assert!(
            message["__openclaw"]["id"]
                .as_str()
                .is_some_and(|id| id.starts_with('e')),
            "{message}"
        );
    }
}

/// The client that sent a message shows it already: its `session.message`
/// goes to the session's other clients only (OpenClaw's TUI would show a
/// second copy of its own message otherwise).
#[tokio::test]
async fn a_message_is_echoed_to_the_other_clients_not_to_its_sender() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Noted.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut sender = gateway.admin().await;
    let mut other = gateway.admin().await;
    let key = new_key();
    let run = sender.chat_send(&key, "remember this").await;
    sender.chat_end(&run).await;
    let echoed = other
        .next_where("the message as the other client sees it", |f| {
            f["event"] == "session.message" && f["payload"]["runId"] == json!(run)
        })
        .await;
    assert_eq!(
        echoed["payload"]["message"]["content"][0]["text"],
        "remember this"
    );
    other.chat_end(&run).await;
    assert!(
        sender
            .payloads_of("session.message")
            .iter()
            .all(|p| p["runId"] != json!(run)),
        "{:?}",
        sender.payloads_of("session.message")
    );
}

/// OpenClaw's archive: `sessions.patch` `archived` keeps the session but
/// lists it only when asked (`archived: "all"` or `"only"`), with when it
/// was archived; `archived: false` brings it back; a patch that names a
/// session the key no longer names changes nothing.
#[tokio::test]
async fn an_archived_session_is_listed_only_when_asked_and_comes_back() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Kept.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "keep this").await;
    client.chat_end(&run).await;
    let keys = |listed: &Value| -> Vec<String> {
        listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect()
    };
    let refused = client
        .call(
            "sessions.patch",
            json!({"key": key, "archived": true, "expectedSessionId": "sess_other"}),
        )
        .await;
    assert_eq!(refused["ok"], json!(false), "{refused}");
    let listed = client.call_ok("sessions.list", json!({})).await;
    assert_eq!(keys(&listed), vec![key.clone()]);
    let session = listed["sessions"][0]["sessionId"].clone();
    let patched = client
        .call_ok(
            "sessions.patch",
            json!({"key": key, "archived": true, "expectedSessionId": session}),
        )
        .await;
    assert_eq!(patched["entry"]["archived"], true, "{patched}");
    assert!(patched["entry"]["archivedAt"].is_u64(), "{patched}");
    let listed = client.call_ok("sessions.list", json!({})).await;
    assert!(keys(&listed).is_empty(), "{listed}");
    let all = client
        .call_ok("sessions.list", json!({"archived": "all"}))
        .await;
    assert_eq!(keys(&all), vec![key.clone()]);
    let only = client
        .call_ok("sessions.list", json!({"archived": "only"}))
        .await;
    assert_eq!(only["sessions"][0]["archived"], true, "{only}");
    client
        .call_ok("sessions.patch", json!({"key": key, "archived": false}))
        .await;
    let listed = client.call_ok("sessions.list", json!({})).await;
    assert_eq!(keys(&listed), vec![key.clone()]);
    assert!(
        listed["sessions"][0].get("archivedAt").is_none(),
        "{listed}"
    );
    let bad = client
        .call("sessions.list", json!({"archived": "sometimes"}))
        .await;
    assert_eq!(bad["ok"], json!(false), "{bad}");
}

/// Every method the gateway announces refuses a field it does not take,
/// naming it, before doing anything; OpenClaw's fields that pincer takes
/// only at one value are refused at another, never answered "ok" and
/// ignored.
#[tokio::test]
async fn every_method_refuses_a_field_it_does_not_support() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let methods: Vec<String> = client.hello["features"]["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect();
    assert!(methods.len() >= 30, "{methods:?}");
    for method in &methods {
        let refused = client.call(method, json!({"notAPincerField": true})).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("`notAPincerField` is not supported by pincer"),
            "{method}: {refused}"
        );
    }
    // No session was made by any of them.
    let listed = client.call_ok("sessions.list", json!({})).await;
    assert_eq!(listed["count"], 0, "{listed}");

    // One value is pincer's; another is refused, saying why.
    let key = new_key();
    mock.push(Reply::sse(anthropic_text("Hi.", 5)));
    let run = client.chat_send(&key, "hello").await;
    client.chat_end(&run).await;
    let session = client
        .call_ok("sessions.resolve", json!({"key": key}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let refusals = [
        (
            "chat.send",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-1", "deliver": true}),
            "deliver: true",
        ),
        (
            "chat.send",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-2", "thinking": "high"}),
            "thinking: high",
        ),
        (
            "chat.send",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-3", "sessionId": "sess_other"}),
            "does not name session sess_other",
        ),
        (
            "agent",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-4", "agentId": "work"}),
            "unknown agent `work`",
        ),
        (
            "chat.send",
            json!({"sessionKey": key, "idempotencyKey": "r-5"}),
            "chat.send: `message` is required",
        ),
        (
            "chat.send",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-6", "deliver": "yes"}),
            "chat.send: `deliver` must be a boolean",
        ),
        (
            "chat.send",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-7", "attachments": [{"type": "image", "content": 5}]}),
            "attachments[0].content must be a string",
        ),
        (
            "chat.send",
            json!({"sessionKey": key, "message": "x", "idempotencyKey": "r-8", "expectedLeafEntryId": "e1"}),
            "`expectedLeafEntryId` (sending on a branch of the transcript) is not supported",
        ),
        (
            "agent",
            json!({"message": "x", "idempotencyKey": "r-9", "model": "openai/gpt-5"}),
            "agent: `model` is not supported by pincer",
        ),
        (
            "agent",
            json!({"message": "x", "idempotencyKey": "r-10", "timeout": "soon"}),
            "agent: `timeout` must be a non-negative integer",
        ),
        (
            "sessions.patch",
            json!({"key": key, "archived": "yes"}),
            "sessions.patch: `archived` must be a boolean",
        ),
        (
            "sessions.patch",
            json!({"key": key, "fastMode": true}),
            "sessions.patch: `fastMode` is not supported by pincer",
        ),
        (
            "sessions.patch",
            json!({"key": key, "permissionMode": 3}),
            "sessions.patch: `permissionMode` must be a string",
        ),
        (
            "sessions.reset",
            json!({"key": key, "expectedSessionId": "sess_other"}),
            "no longer names session sess_other",
        ),
        (
            "sessions.delete",
            json!({"key": key, "deleteTranscript": false}),
            "deleteTranscript: false",
        ),
        ("models.list", json!({"refresh": true}), "`refresh`"),
        (
            "models.list",
            json!({"view": "provider-config"}),
            "provider-config",
        ),
        (
            "sessions.list",
            json!({"includeGlobal": "yes"}),
            "sessions.list: `includeGlobal` must be a boolean, not string \"yes\"",
        ),
        (
            "sessions.list",
            json!({"offset": "2"}),
            "sessions.list: `offset` must be a non-negative integer",
        ),
        (
            "sessions.list",
            json!({"activeMinutes": 0}),
            "positive integer",
        ),
        (
            "sessions.list",
            json!({"archived": "some"}),
            "it takes \"all\"",
        ),
        (
            "sessions.resolve",
            json!({"reference": {"key": key, "path": "/x"}}),
            "sessions.resolve: `reference.path` is not supported by pincer (it takes `key` or `slug`)",
        ),
        (
            "sessions.resolve",
            json!({"key": key, "agentId": "work"}),
            "unknown agent `work`",
        ),
        (
            "sessions.create",
            json!({"key": "fresh-key", "fastMode": true}),
            "sessions.create: `fastMode` is not supported by pincer",
        ),
        (
            "sessions.create",
            json!({"key": "fresh-key", "succeedsParent": "yes"}),
            "sessions.create: `succeedsParent` must be a boolean",
        ),
        // The chat methods' params are types: what they do not name is
        // refused by name, and each field has its type.
        (
            "chat.history",
            json!({"sessionKey": key, "since": 3}),
            "chat.history: `since` is not supported by pincer",
        ),
        (
            "chat.history",
            json!({"sessionKey": key, "agentId": "work"}),
            "unknown agent `work`",
        ),
        (
            "chat.history",
            json!({"sessionKey": key, "maxBytes": "lots"}),
            "chat.history: `maxBytes` must be a non-negative integer",
        ),
        (
            "chat.abort",
            json!({"runId": "r-1"}),
            "chat.abort: `sessionKey` is required",
        ),
        (
            "chat.abort",
            json!({"sessionKey": key, "preserveSideRuns": "yes"}),
            "chat.abort: `preserveSideRuns` must be a boolean",
        ),
        (
            "chat.subscribe",
            json!({"sessionKey": key, "follow": true}),
            "`follow` is not supported by pincer",
        ),
        (
            "sessions.messages.subscribe",
            json!({"key": "bad\u{7}key"}),
            "control character",
        ),
        (
            "sessions.get",
            json!({"key": key, "limit": -1}),
            "sessions.get: `limit` must be a non-negative integer",
        ),
        ("agent.wait", json!({"runId": "r-1", "wait": 1}), "`wait`"),
        (
            "agents.list",
            json!({"agentId": "main"}),
            "agents.list: `agentId` is not supported by pincer (it takes no params)",
        ),
        (
            "exec.approval.resolve",
            json!({"id": "a-1"}),
            "exec.approval.resolve: `decision` is required",
        ),
        (
            "exec.approval.get",
            json!({"id": "a-1", "sessionKey": key}),
            "`sessionKey` is not supported by pincer (it takes `id`)",
        ),
        (
            "sessions.reset",
            json!({"key": key, "reason": "tidy"}),
            "unknown variant `tidy`, expected `new` or `reset`",
        ),
        (
            "sessions.describe",
            json!({"key": key, "includeLastMessage": "yes"}),
            "sessions.describe: `includeLastMessage` must be a boolean",
        ),
        (
            "sessions.rewind",
            json!({"key": key, "newKey": "other"}),
            "sessions.rewind: `newKey` is not supported by pincer",
        ),
        (
            "sessions.fork",
            json!({"key": key, "turn": 0}),
            "`turn` must be a turn number from 1",
        ),
        (
            "sessions.delete",
            json!({"key": key, "agentId": "work"}),
            "unknown agent `work`",
        ),
        (
            "models.list",
            json!({"search": "x"}),
            "models.list: `search` is not supported by pincer",
        ),
        (
            "models.list",
            json!({"sessionKey": "a\u{7}b"}),
            "control character",
        ),
        (
            "health",
            json!({"probe": "yes"}),
            "health: `probe` must be a boolean",
        ),
        (
            "health",
            json!({"deep": true}),
            "health: `deep` is not supported by pincer (it takes `probe`)",
        ),
    ];
    for (method, params, says) in refusals {
        let refused = client.call(method, params.clone()).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{method} {params}: {refused}");
    }
    // Nothing was sent, reset or deleted.
    assert_eq!(mock.requests().len(), 1);
    let still = client
        .call_ok("sessions.resolve", json!({"key": key}))
        .await;
    assert_eq!(still["sessionId"], json!(session));
    // The values that ask for what pincer does are taken.
    let thinking = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await["thinkingLevel"]
        .clone();
    mock.push(Reply::sse(anthropic_text("Again.", 5)));
    let accepted = client
        .call_ok(
            "chat.send",
            json!({"sessionKey": key, "sessionId": session, "message": "again", "idempotencyKey": "r-5",
                   "deliver": false, "thinking": thinking, "agentId": "main"}),
        )
        .await;
    assert_eq!(accepted["status"], "started");
    client.chat_end("r-5").await;
    // OpenClaw's TUI picker: recent sessions with their last message.
    let recent = client
        .call_ok(
            "sessions.list",
            json!({"limit": 50, "activeMinutes": 60, "includeGlobal": false, "includeUnknown": false,
                   "includeDerivedTitles": true, "includeLastMessage": true, "configuredAgentsOnly": true}),
        )
        .await;
    assert_eq!(recent["count"], 1, "{recent}");
    assert_eq!(
        recent["sessions"][0]["lastMessagePreview"], "Again.",
        "{recent}"
    );
    // A session last changed two hours ago is not active in the last hour.
    let two_hours_ago = SystemTime::now() - Duration::from_secs(2 * 3600);
    for entry in walkdir(&sandbox.home()) {
        if entry.extension().is_some_and(|x| x == "jsonl") {
            std::fs::File::options()
                .append(true)
                .open(&entry)
                .unwrap()
                .set_modified(two_hours_ago)
                .unwrap();
        }
    }
    let recent = client
        .call_ok("sessions.list", json!({"activeMinutes": 60}))
        .await;
    assert_eq!(recent["count"], 0, "{recent}");
}

/// Every file under `dir`.
fn walkdir(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walkdir(&path));
        } else {
            found.push(path);
        }
    }
    found
}

/// A run given `timeoutMs` is stopped when it outlives it.
#[tokio::test]
async fn a_run_that_outlives_its_timeout_is_stopped() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    let key = new_key();
    let started = std::time::Instant::now();
    client
        .call_ok(
            "chat.send",
            json!({"sessionKey": key, "message": "take your time", "idempotencyKey": "slow-1", "timeoutMs": 300}),
        )
        .await;
    let end = client.chat_end("slow-1").await;
    assert_eq!(end["payload"]["state"], "aborted", "{end}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// OpenClaw's Control UI shows a session's `permissionMode` by OpenClaw's
/// names (`read-only`, `guarded`, `workspace`, `full`; `null` for the
/// agent's default, named by `agents.list`'s `defaultPermissionMode`) and
/// patches it by them. pincer's rows carry its own mode in `mode`.
#[tokio::test]
async fn openclaw_s_permission_modes_name_pincer_s() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let key = new_key();
    mock.push(Reply::sse(anthropic_text("Noted.", 5)));
    let run = admin
        .chat_send(&key, "a first prompt lists the session")
        .await;
    admin.chat_end(&run).await;
    let agents = admin.call_ok("agents.list", json!({})).await;
    assert_eq!(agents["agents"][0]["defaultPermissionMode"], Value::Null);
    let row = |answer: &Value| {
        (
            answer["entry"]["mode"].clone(),
            answer["entry"]["permissionMode"].clone(),
        )
    };
    for (asked, mode, name) in [
        (json!("read-only"), "plan", json!("read-only")),
        (json!("guarded"), "accept-edits", json!("guarded")),
        (json!("full"), "bypass", json!("full")),
        // OpenClaw's "default": the mode new sessions start in.
        (Value::Null, "default", Value::Null),
        // pincer's own ids are still taken.
        (json!("plan"), "plan", json!("read-only")),
    ] {
        let patched = admin
            .call_ok(
                "sessions.patch",
                json!({"key": key, "permissionMode": asked}),
            )
            .await;
        assert_eq!(row(&patched), (json!(mode), name.clone()), "{patched}");
        let listed = admin.call_ok("sessions.list", json!({"search": key})).await;
        assert_eq!(listed["sessions"][0]["mode"], json!(mode), "{listed}");
        assert_eq!(listed["sessions"][0]["permissionMode"], name, "{listed}");
    }
    // An AI reviewer is not pincer's; nonsense is refused with the names.
    let refused = admin
        .call(
            "sessions.patch",
            json!({"key": key, "permissionMode": "workspace"}),
        )
        .await;
    let message = refused["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("not supported by pincer"), "{refused}");
    let refused = admin
        .call(
            "sessions.patch",
            json!({"key": key, "permissionMode": "yolo"}),
        )
        .await;
    let message = refused["error"]["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("accept-edits") && message.contains("guarded"),
        "{refused}"
    );
    // Still read-only after the refusals.
    let listed = admin.call_ok("sessions.list", json!({"search": key})).await;
    assert_eq!(listed["sessions"][0]["mode"], json!("plan"), "{listed}");

    // With read-only as the default, OpenClaw's default is read-only, and
    // a session in it shows OpenClaw's `null`.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "default_mode = \"plan\"\n",
    )
    .unwrap();
    let agents = admin.call_ok("agents.list", json!({})).await;
    assert_eq!(
        agents["agents"][0]["defaultPermissionMode"],
        json!("read-only")
    );
    let listed = admin.call_ok("sessions.list", json!({"search": key})).await;
    assert_eq!(listed["sessions"][0]["mode"], json!("plan"), "{listed}");
    assert_eq!(listed["sessions"][0]["permissionMode"], Value::Null);
    let patched = admin
        .call_ok(
            "sessions.patch",
            json!({"key": key, "permissionMode": "guarded"}),
        )
        .await;
    assert_eq!(row(&patched), (json!("accept-edits"), json!("guarded")));
    let patched = admin
        .call_ok(
            "sessions.patch",
            json!({"key": key, "permissionMode": null}),
        )
        .await;
    assert_eq!(row(&patched), (json!("plan"), Value::Null));
}

/// What OpenClaw's `gateway probe`, `system presence`, `system heartbeat
/// last`, `channels status` and its Control UI's connection ask of a
/// gateway: who is here, the last heartbeat, the config as OpenClaw's
/// snapshot (never a secret), and the chat channels.
#[tokio::test]
async fn presence_heartbeat_config_and_channels_answer_in_openclaw_s_shapes() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut reader = gateway.operator(&["operator.read"], &[]).await;
    // A Control UI, and a CLI call passing through (not listed).
    let mut ui = Client::open(gateway.addr).await;
    let mut params = connect_params(gateway.token.as_deref(), &["operator.read"], &[]);
    params["client"] = json!({"id": "openclaw-control-ui", "version": "2026.9.6",
        "platform": "Linux x86_64", "mode": "webchat", "instanceId": "ui-1"});
    ui.connect_ok(params).await;
    let mut cli = Client::open(gateway.addr).await;
    let mut params = connect_params(gateway.token.as_deref(), &["operator.read"], &[]);
    params["client"] =
        json!({"id": "cli", "version": "2026.9.6", "platform": "linux", "mode": "cli"});
    cli.connect_ok(params).await;

    let presence = reader.call_ok("system-presence", json!({})).await;
    let entries = presence.as_array().unwrap();
    assert_eq!(entries[0]["mode"], "gateway", "{presence}");
    assert_eq!(entries[0]["reason"], "self");
    assert!(
        entries[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Gateway: "),
        "{presence}"
    );
    assert!(entries[0]["ts"].as_u64().unwrap() > 0);
    let ui_entry = entries
        .iter()
        .find(|e| e["clientId"] == "openclaw-control-ui")
        .expect("the Control UI is listed");
    assert_eq!(
        (
            &ui_entry["host"],
            &ui_entry["mode"],
            &ui_entry["instanceId"],
            &ui_entry["reason"]
        ),
        (
            &json!("openclaw-control-ui"),
            &json!("webchat"),
            &json!("ui-1"),
            &json!("connect")
        ),
        "{ui_entry}"
    );
    assert_eq!(ui_entry["scopes"], json!(["operator.read"]));
    // A loopback client's address is not shown.
    assert!(ui_entry.get("ip").is_none(), "{ui_entry}");
    assert!(
        entries.iter().all(|e| e["mode"] != "cli"),
        "a CLI call is not listed: {presence}"
    );
    // The list holds who is connected now.
    drop(ui);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let presence = reader.call_ok("system-presence", json!({})).await;
        if !presence.to_string().contains("openclaw-control-ui") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{presence}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // No heartbeat is configured: none ran.
    assert_eq!(
        reader.call_ok("last-heartbeat", json!({})).await,
        Value::Null
    );
    let refused = reader
        .call("set-heartbeats", json!({"enabled": false}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not supported by pincer"),
        "{refused}"
    );

    let config = reader.call_ok("config.get", json!({})).await;
    assert_eq!(config["valid"], true, "{config}");
    assert_eq!(config["config"]["gateway"]["auth"]["mode"], "token");
    assert_eq!(config["config"]["gateway"]["bind"], "loopback");
    assert_eq!(config["runtimeConfig"], config["config"]);
    assert!(config["hash"].as_str().is_some_and(|h| !h.is_empty()));
    assert!(config["issues"].as_array().unwrap().is_empty());
    let token = gateway.token.clone().unwrap();
    assert!(
        !config.to_string().contains(&token),
        "the snapshot holds no secret"
    );
    for method in ["config.set", "config.apply"] {
        let refused = reader.call(method, json!({"raw": "{}"})).await;
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("not supported by pincer"),
            "{refused}"
        );
    }
    let refused = reader.call("config.get", json!({"path": "gateway"})).await;
    assert_eq!(refused["ok"], false, "{refused}");

    // No chat channel is configured here; an unknown one is refused.
    let channels = reader
        .call_ok("channels.status", json!({"probe": true, "timeoutMs": 8000}))
        .await;
    assert_eq!(channels["channelOrder"], json!([]), "{channels}");
    for field in [
        "channels",
        "channelAccounts",
        "channelLabels",
        "channelDefaultAccountId",
    ] {
        assert_eq!(channels[field], json!({}), "{channels}");
    }
    let refused = reader
        .call("channels.status", json!({"channel": "carrier-pigeon"}))
        .await;
    assert_eq!(
        refused["error"]["message"], "unknown channel: carrier-pigeon",
        "{refused}"
    );
    drop(cli);
}

/// `commands.list` (OpenClaw's TUI completes from it, its Control UI's
/// `/` menu lists it): a session's slash commands as OpenClaw's entries,
/// its skills among them; and what a client sends of them is run.
#[tokio::test]
async fn commands_list_gives_a_session_s_slash_commands_in_openclaw_s_shape() {
    let sandbox = Sandbox::new();
    sandbox.write(
        ".pincer/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Extract text and tables from PDF files\n---\n\nRun scripts/extract.py on the file.\n",
    );
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut reader = gateway.operator(&["operator.read"], &[]).await;
    // Before any session: the built-in commands. The TUI asks thus.
    let listed = reader
        .call_ok(
            "commands.list",
            json!({"agentId": "main", "scope": "text", "includeArgs": false}),
        )
        .await;
    let commands = listed["commands"].as_array().unwrap();
    let compact = commands
        .iter()
        .find(|c| c["name"] == "compact")
        .expect("compact is listed");
    assert_eq!(
        compact,
        &json!({"name": "compact", "description": "Summarise the older conversation to free context",
                "source": "native", "scope": "text", "acceptsArgs": true, "textAliases": ["/compact"]})
    );
    let undo = commands.iter().find(|c| c["name"] == "undo").unwrap();
    assert_eq!(undo["acceptsArgs"], false);

    // A session's own commands, its skill among them, with their argument.
    let mut writer = gateway
        .operator(&["operator.read", "operator.write"], &[])
        .await;
    let key = new_key();
    mock.push(Reply::sse(anthropic_text("Ready.", 5)));
    let run = writer.chat_send(&key, "hello").await;
    writer.chat_end(&run).await;
    let listed = reader
        .call_ok(
            "commands.list",
            json!({"sessionKey": key, "scope": "text", "includeArgs": true}),
        )
        .await;
    let commands = listed["commands"].as_array().unwrap();
    let pdf = commands
        .iter()
        .find(|c| c["name"] == "skill:pdf")
        .unwrap_or_else(|| panic!("the skill is listed: {listed}"));
    assert_eq!(
        (&pdf["source"], &pdf["textAliases"], &pdf["description"]),
        (
            &json!("skill"),
            &json!(["/skill:pdf"]),
            &json!("Extract text and tables from PDF files")
        )
    );
    let compact = commands.iter().find(|c| c["name"] == "compact").unwrap();
    assert_eq!(compact["args"][0]["type"], "string", "{compact}");

    // What pincer does not have is refused, saying why.
    for (params, why) in [
        (
            json!({"scope": "native"}),
            "scope `native` is not supported by pincer",
        ),
        (
            json!({"provider": "telegram"}),
            "`provider` is not supported by pincer",
        ),
        (json!({"sessionKey": "nobody-here"}), "Session not found."),
        (json!({"agentId": "ops"}), "ops"),
    ] {
        let refused = reader.call("commands.list", params.clone()).await;
        assert!(
            refused["error"]["message"].as_str().unwrap().contains(why),
            "{params}: {refused}"
        );
    }
}

/// `sessions.cleanup` (`openclaw sessions cleanup`, admin only): a key
/// whose session's transcript is gone is reported as missing, and
/// forgotten with `fixMissing`; nothing else is pruned.
#[tokio::test]
async fn sessions_cleanup_forgets_keys_whose_transcript_is_gone() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let (gone, kept) = (new_key(), new_key());
    for key in [&gone, &kept] {
        mock.push(Reply::sse(anthropic_text("Noted.", 5)));
        let run = admin.chat_send(key, "remember this").await;
        admin.chat_end(&run).await;
    }
    let session = admin
        .call_ok("sessions.resolve", json!({"key": gone}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    drop(admin);
    gateway.stop().await;
    // Its transcript deleted by hand while the gateway was down.
    let name = format!("{session}.jsonl");
    let find = |dir: &std::path::Path| -> Option<std::path::PathBuf> {
        let mut dirs = vec![dir.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).ok()?.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.file_name().is_some_and(|n| n == name.as_str()) {
                    return Some(path);
                }
            }
        }
        None
    };
    std::fs::remove_file(find(&sandbox.home()).expect("the transcript")).unwrap();
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;

    let mut writer = gateway
        .operator(&["operator.read", "operator.write"], &[])
        .await;
    let refused = writer.call("sessions.cleanup", json!({})).await;
    assert_eq!(refused["error"]["code"], "FORBIDDEN", "{refused}");

    // As OpenClaw's CLI asks by default: reported, not changed.
    let report = admin
        .call_ok(
            "sessions.cleanup",
            json!({"allAgents": false, "enforce": false, "fixMissing": false, "fixDmScope": false}),
        )
        .await;
    let keys_file = sandbox.home().join("gateway").join("keys.json");
    assert_eq!(
        (
            &report["mode"],
            &report["storePath"],
            &report["missing"],
            &report["wouldMutate"],
            &report["unreferencedArtifacts"]["removedFiles"]
        ),
        (
            &json!("warn"),
            &json!(keys_file),
            &json!(1),
            &json!(true),
            &json!(0)
        ),
        "{report}"
    );
    let before = report["beforeCount"].as_u64().unwrap();
    assert_eq!(report["afterCount"].as_u64(), Some(before), "{report}");
    assert!(std::fs::read_to_string(&keys_file).unwrap().contains(&gone));

    let report = admin
        .call_ok(
            "sessions.cleanup",
            json!({"allAgents": true, "enforce": true, "fixMissing": true, "activeKey": kept}),
        )
        .await;
    let store = &report["stores"][0];
    assert_eq!(
        (&report["allAgents"], &report["mode"], &store["missing"]),
        (&json!(true), &json!("enforce"), &json!(1)),
        "{report}"
    );
    assert_eq!(store["afterCount"].as_u64(), Some(before - 1), "{report}");
    let keys = std::fs::read_to_string(&keys_file).unwrap();
    assert!(!keys.contains(&gone) && keys.contains(&kept), "{keys}");
    // The kept key still names its session.
    mock.push(Reply::sse(anthropic_text("Still here.", 5)));
    let run = admin.chat_send(&kept, "are you there?").await;
    admin.chat_end(&run).await;
    let request = mock.requests().last().unwrap().body.to_string();
    assert!(request.contains("remember this"), "{request}");
    let refused = admin
        .call("sessions.cleanup", json!({"fixDmScope": true}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not supported by pincer"),
        "{refused}"
    );
}

/// `wake` (`openclaw system event --mode now`): the text is a turn of the
/// session it names (the main one by default), marked as a system event;
/// what pincer does not do is refused, and nothing runs then.
#[tokio::test]
async fn wake_now_runs_a_turn_on_the_system_event() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut reader = gateway.operator(&["operator.read"], &[]).await;
    let refused = reader
        .call("wake", json!({"mode": "now", "text": "x"}))
        .await;
    assert_eq!(refused["error"]["code"], "FORBIDDEN", "{refused}");
    let mut writer = gateway
        .operator(&["operator.read", "operator.write"], &[])
        .await;
    for (params, why) in [
        (
            json!({"mode": "next-heartbeat", "text": "later"}),
            "not supported by pincer",
        ),
        (
            json!({"mode": "soon", "text": "later"}),
            "unknown variant `soon`",
        ),
        (json!({"mode": "now", "text": "  "}), "text required"),
        (
            json!({"mode": "now", "text": "x", "sessionKey": "bad\u{7}key"}),
            "sessionKey",
        ),
    ] {
        let refused = writer.call("wake", params.clone()).await;
        assert!(
            refused["error"]["message"].as_str().unwrap().contains(why),
            "{params}: {refused}"
        );
    }
    assert!(mock.requests().is_empty());
    let key = new_key();
    mock.push(Reply::sse(anthropic_text("On it.", 5)));
    let answered = writer
        .call_ok(
            "wake",
            json!({"mode": "now", "text": "the nightly build failed", "sessionKey": key}),
        )
        .await;
    assert_eq!(answered, json!({"ok": true}));
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while mock.requests().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no turn ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let request = mock.requests()[0].body.to_string();
    assert!(
        request.contains("System event: the nightly build failed"),
        "{request}"
    );
    // The session the key names holds it.
    let history = writer
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut history = history;
    while !history.to_string().contains("On it.") {
        assert!(tokio::time::Instant::now() < deadline, "{history}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        history = writer
            .call_ok("chat.history", json!({"sessionKey": key}))
            .await;
    }
}
