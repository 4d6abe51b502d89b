//! ACP on the gateway's port (`ws://host:port/acp`), through a plain
//! websocket client: the credential on the upgrade, ACP's lifecycle over
//! text frames, bad frames answered and survived, and the sessions shared
//! with the gateway's own clients.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, new_key};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The upgrade request for `/acp` with `authorization`, if any.
fn request(
    gateway: &Gateway,
    authorization: Option<&str>,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut request = format!("ws://{}/acp", gateway.addr)
        .into_client_request()
        .unwrap();
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert("authorization", value.parse().unwrap());
    }
    request
}

/// An ACP connection with the gateway's token, and its connection id.
async fn open(gateway: &Gateway) -> (Socket, String) {
    let bearer = format!("Bearer {}", gateway.token.as_deref().unwrap());
    let (socket, response) = tokio_tungstenite::connect_async(request(gateway, Some(&bearer)))
        .await
        .expect("the ACP upgrade is accepted");
    let id = response
        .headers()
        .get("acp-connection-id")
        .expect("the upgrade names the connection")
        .to_str()
        .unwrap()
        .to_string();
    (socket, id)
}

/// The HTTP status an upgrade gets when it is refused, and the response.
async fn refused(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
) -> (u16, String, String) {
    match tokio_tungstenite::connect_async(request).await {
        Ok(_) => panic!("the upgrade was accepted"),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let challenge = response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default();
            let body =
                String::from_utf8_lossy(response.body().as_deref().unwrap_or_default()).to_string();
            (response.status().as_u16(), challenge, body)
        }
        Err(other) => panic!("the upgrade failed otherwise: {other}"),
    }
}

async fn send(socket: &mut Socket, message: Value) {
    socket
        .send(Message::text(message.to_string()))
        .await
        .unwrap();
}

/// Reads JSON messages until one satisfies `done`; returns all of them.
async fn until(socket: &mut Socket, mut done: impl FnMut(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let frame = tokio::time::timeout_at(deadline, socket.next())
            .await
            .unwrap_or_else(|_| panic!("no awaited message; got {seen:?}"))
            .expect("the socket ended")
            .unwrap();
        let Message::Text(text) = frame else { continue };
        let message: Value = serde_json::from_str(text.as_str()).unwrap();
        let stop = done(&message);
        seen.push(message);
        if stop {
            return seen;
        }
    }
}

async fn call(socket: &mut Socket, id: u64, method: &str, params: Value) -> Value {
    send(
        socket,
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
    )
    .await;
    until(socket, |m| m["id"] == id && m.get("method").is_none())
        .await
        .pop()
        .unwrap()
}

#[tokio::test]
async fn an_upgrade_without_the_credential_is_refused_before_any_acp() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (status, challenge, body) = refused(request(&gateway, None)).await;
    assert_eq!(status, 401, "{body}");
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    let (status, challenge, _) = refused(request(&gateway, Some("Bearer not-the-token"))).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("invalid_token"), "{challenge}");
    // Another scheme is no credential.
    let basic = format!("Basic {}", gateway.token.as_deref().unwrap());
    assert_eq!(refused(request(&gateway, Some(&basic))).await.0, 401);
    // A credential in the URL is refused whatever else comes with it.
    let mut leaky = format!("ws://{}/acp?token=x", gateway.addr)
        .into_client_request()
        .unwrap();
    let bearer = format!("Bearer {}", gateway.token.as_deref().unwrap());
    leaky
        .headers_mut()
        .insert("authorization", bearer.parse().unwrap());
    assert_eq!(refused(leaky).await.0, 400);
    // Plain HTTP to /acp is told to upgrade.
    let response = reqwest::get(format!("http://{}/acp", gateway.addr))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 426);
    // The wrong token is never echoed or logged.
    let log = gateway.stop().await;
    assert!(!log.contains("not-the-token"), "{log}");
}

#[tokio::test]
async fn acp_over_the_gateways_port_runs_a_session_the_gateway_shares() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Hello from pincer.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut watcher = gateway.admin().await;
    let (mut acp, connection) = open(&gateway).await;
    assert!(!connection.is_empty());
    let initialized = call(
        &mut acp,
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    assert_eq!(initialized["result"]["protocolVersion"], 1, "{initialized}");
    assert_eq!(initialized["result"]["agentInfo"]["name"], "pincer");
    // A frame that is not JSON-RPC is answered, and the connection goes on;
    // a binary frame carries nothing.
    acp.send(Message::text("{not json")).await.unwrap();
    let error = until(&mut acp, |m| m.get("error").is_some())
        .await
        .pop()
        .unwrap();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    acp.send(Message::binary(vec![1, 2, 3])).await.unwrap();
    let created = call(
        &mut acp,
        2,
        "session/new",
        json!({"cwd": sandbox.work(), "mcpServers": []}),
    )
    .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    // A pretty-printed request is one message too.
    let prompt = json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Say hello."}]}});
    acp.send(Message::text(
        serde_json::to_string_pretty(&prompt).unwrap(),
    ))
    .await
    .unwrap();
    let messages = until(&mut acp, |m| m["id"] == 3).await;
    assert_eq!(
        messages.last().unwrap()["result"]["stopReason"],
        "end_turn",
        "{messages:?}"
    );
    let text: String = messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Hello from pincer.");
    // The gateway's own clients saw it run and list it.
    let end = watcher
        .next_where("the run of the ACP session", |f| {
            f["event"] == "chat"
                && f["payload"]["sessionKey"] == json!(session)
                && f["payload"]["state"] == "final"
        })
        .await;
    assert_eq!(
        end["payload"]["message"]["content"][0]["text"],
        "Hello from pincer."
    );
    let listed = watcher.call_ok("sessions.list", json!({})).await;
    assert!(listed.to_string().contains(&session), "{listed}");
    // A session the gateway started loads over ACP, with its history.
    mock.push(Reply::sse(anthropic_text("From the gateway.", 10)));
    let key = new_key();
    let run = watcher.chat_send(&key, "hi from a web page").await;
    watcher.chat_end(&run).await;
    let row = watcher
        .call_ok("sessions.resolve", json!({"key": key}))
        .await;
    let other = row["sessionId"]
        .as_str()
        .or_else(|| row["entry"]["sessionId"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no session id for {key}: {row}"));
    send(
        &mut acp,
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/load",
            "params": {"sessionId": other, "cwd": sandbox.work(), "mcpServers": []}}),
    )
    .await;
    let replay = until(&mut acp, |m| m["id"] == 4).await;
    assert!(replay.last().unwrap().get("result").is_some(), "{replay:?}");
    let replayed = replay
        .iter()
        .filter(|m| m["params"]["sessionId"] == json!(other))
        .map(|m| m["params"]["update"].to_string())
        .collect::<String>();
    assert!(replayed.contains("hi from a web page"), "{replayed}");
    assert!(replayed.contains("From the gateway."), "{replayed}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn a_closed_acp_socket_gives_back_its_place_among_the_clients() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[gateway]\nmax_connections = 1\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut first, _) = open(&gateway).await;
    // The one place is taken: another client is refused, over ACP or not.
    let bearer = format!("Bearer {}", gateway.token.as_deref().unwrap());
    let (status, _, _) = refused(request(&gateway, Some(&bearer))).await;
    assert_eq!(status, 503);
    first.close(None).await.unwrap();
    drop(first);
    // Once it has closed, the place is free again.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        match tokio_tungstenite::connect_async(request(&gateway, Some(&bearer))).await {
            Ok((mut socket, _)) => {
                let answer = call(
                    &mut socket,
                    1,
                    "initialize",
                    json!({"protocolVersion": 1, "clientCapabilities": {}}),
                )
                .await;
                assert_eq!(answer["result"]["protocolVersion"], 1);
                break;
            }
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the place was not given back: {e}"),
        }
    }
}

/// An `/acp` client may hold only so many sessions open at once
/// (`max_sessions_per_client`): the next `session/new` or `session/load`
/// is refused, saying why, and closing one gives its place back. A
/// session it has open already loads again without a new place, and
/// another client has places of its own.
#[tokio::test]
async fn an_acp_client_holds_at_most_its_share_of_open_sessions() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[gateway]\nmax_sessions_per_client = 2\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
    let (mut socket, _) = open(&gateway).await;
    call(&mut socket, 1, "initialize", init.clone()).await;
    let cwd = sandbox.work();
    let new = json!({"cwd": cwd, "mcpServers": []});
    let mut ids = Vec::new();
    for n in 0..2 {
        let made = call(&mut socket, 10 + n, "session/new", new.clone()).await;
        let id = made["result"]["sessionId"].as_str();
        ids.push(id.unwrap_or_else(|| panic!("{made}")).to_string());
    }
    let refused = call(&mut socket, 20, "session/new", new.clone()).await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has 2 sessions open") && message.contains("session/close"),
        "{refused}"
    );
    // Loading one it has open takes no new place.
    let again = call(
        &mut socket,
        21,
        "session/load",
        json!({"sessionId": ids[0], "cwd": cwd, "mcpServers": []}),
    )
    .await;
    assert!(again.get("error").is_none(), "{again}");
    // Another client has places of its own.
    let (mut other, _) = open(&gateway).await;
    call(&mut other, 1, "initialize", init.clone()).await;
    let theirs = call(&mut other, 30, "session/new", new.clone()).await;
    assert!(theirs["result"]["sessionId"].is_string(), "{theirs}");
    // Closing one gives its place back.
    let closed = call(
        &mut socket,
        22,
        "session/close",
        json!({"sessionId": ids[1]}),
    )
    .await;
    assert!(closed.get("error").is_none(), "{closed}");
    let made = call(&mut socket, 23, "session/new", new.clone()).await;
    assert!(made["result"]["sessionId"].is_string(), "{made}");
}

/// A session unloaded while idle gives back its place; opening it again
/// (a prompt to it) takes one, so a client cannot grow past its share by
/// letting sessions idle and opening more.
#[tokio::test]
async fn an_unloaded_session_opened_again_counts_against_the_client_s_share() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[acp]\nsession_idle_secs = 1\n\n[gateway]\nmax_sessions_per_client = 1\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let (mut socket, _) = open(&gateway).await;
    call(
        &mut socket,
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    )
    .await;
    let new = json!({"cwd": sandbox.work(), "mcpServers": []});
    let first = call(&mut socket, 2, "session/new", new.clone()).await;
    let first = first["result"]["sessionId"].as_str().unwrap().to_string();
    // Once the first is unloaded, its place is free for another.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut id = 3;
    let second = loop {
        let made = call(&mut socket, id, "session/new", new.clone()).await;
        id += 1;
        if let Some(second) = made["result"]["sessionId"].as_str() {
            break second.to_string();
        }
        assert!(tokio::time::Instant::now() < deadline, "{made}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_ne!(first, second);
    // The first, prompted, would be opened again: refused while the
    // second holds the one place.
    let refused = call(
        &mut socket,
        100,
        "session/prompt",
        json!({"sessionId": first, "prompt": [{"type": "text", "text": "still there?"}]}),
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("has 1 sessions open"), "{refused}");
    assert!(mock.requests().is_empty());
}

/// The official Python ACP SDK's own websocket client (`acp.ws`) against
/// `/acp`: what it reads of a tool round trip is what it reads of a local
/// `pincer acp` (tests/it/python_client.rs), less nothing.
#[tokio::test]
async fn the_official_python_sdk_runs_a_tool_round_trip_over_acp_on_the_gateway() {
    let python = tokio::task::spawn_blocking(support::python_sdk::ensure_venv)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let agent = ["--ws".to_string(), format!("ws://{}/acp", gateway.addr)];
    let env = [("PINCER_GATEWAY_TOKEN", gateway.token.clone().unwrap())];
    let (result, stderr) = support::python_sdk::run_client(&python, &sandbox, &agent, &env).await;
    assert_eq!(
        result,
        support::python_sdk::direct_tool_round_trip(),
        "--- client stderr ---\n{stderr}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    assert_eq!(mock.requests().len(), 2);
}
