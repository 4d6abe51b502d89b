//! `pincer acp --connect`: an editor here, the agent on a gateway there.
//! Each test drives the real bridge over ACP on stdio pipes; the bridge
//! reaches a real `pincer gateway` over a real socket, and the gateway runs
//! its turns against the mock model. The two sides have separate homes and
//! working directories, as two machines would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, coalesce, requests_of, updates_of};
use support::bridge::{
    Proxy, Remote, bridge_command, free_port, gateway_on, initialize, streamed_text,
};
use support::mock_model::Reply;
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};
use support::{prompt, selected, tool_results};

/// Replaces the gateway's working directory so whole values compare.
fn normalize(value: Value, remote: &Remote) -> Value {
    let text = value
        .to_string()
        .replace(&remote.server.work().display().to_string(), "$REMOTE");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn initialize_waits_for_the_gateway_and_says_what_the_bridge_can_do() {
    let r = Remote::start().await;
    let token = r.gateway.token.clone().unwrap();
    let mut acp = Acp::spawn(bridge_command(&r.editor, &r.gateway.url(), &token, &[]));
    let response = initialize(&mut acp).await;
    assert_eq!(
        response["result"],
        json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
                "auth": {}
            },
            "agentInfo": {"name": "pincer", "title": "pincer (remote)", "version": env!("CARGO_PKG_VERSION")},
            "authMethods": []
        })
    );
}

#[tokio::test]
async fn a_new_session_is_a_gateway_key_and_says_where_it_works() {
    let mut r = Remote::start().await;
    let result = r.new_session().await;
    let key = result["sessionId"].as_str().unwrap().to_string();
    let uuid = key.strip_prefix("acp-bridge:").expect("an acp-bridge: key");
    assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{key}");
    assert_eq!(
        normalize(result["_meta"].clone(), &r),
        json!({"pincer/remote": {"gateway": r.gateway.url(), "sessionKey": key, "cwd": "$REMOTE"}})
    );
    let ids: Vec<&str> = result["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mode", "model", "thought_level", "queue"]);
    assert_eq!(result["modes"]["currentModeId"], "default");
}

#[tokio::test]
async fn a_prompt_streams_text_and_a_tool_call_from_the_remote_workspace() {
    let mut r = Remote::start().await;
    // The file exists on the gateway's machine only.
    std::fs::write(r.server.work().join("hello.txt"), "hello\n").unwrap();
    let session = r.session().await;
    r.mock.push(Reply::fixture("anthropic/tool_read.sse"));
    r.mock.push(Reply::fixture("anthropic/after_tool.sse"));

    let id = r
        .acp
        .send(
            "session/prompt",
            prompt(&session, "What does hello.txt say?"),
        )
        .await;
    let (response, before) = r.acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        r.gateway.stderr.text()
    );
    // The editor was never asked for a file or a terminal.
    for m in &before {
        assert_eq!(m["method"], "session/update", "{m}");
        assert_eq!(m["params"]["sessionId"], json!(session));
    }
    let updates: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "session_info_update")
        .collect();
    assert_eq!(
        normalize(Value::Array(updates), &r),
        json!([
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "I'll read the file."}},
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "toolu_01",
                "title": "Read hello.txt",
                "kind": "read",
                "status": "in_progress",
                "rawInput": {"path": "hello.txt"},
                "locations": [{"path": "hello.txt"}]
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "toolu_01",
                "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "hello"}}],
                "rawOutput": {"content": [{"type": "text", "text": "hello"}]}
            },
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "\n\nThe file says hello."}}
        ])
    );
    // The model got the prompt as the editor wrote it: no local path.
    assert_eq!(
        r.user_text(0),
        vec![json!([{"type": "text", "text": "What does hello.txt say?"}])]
    );
    assert_eq!(
        tool_results(&r.mock, 1),
        vec![("toolu_01".to_string(), false, "hello".to_string())]
    );
    r.acp.assert_stdout_was_json_rpc();
}

/// A `bash` call on the gateway: its approval reaches the editor as
/// `session/request_permission`; the answer decides.
async fn bash_answered(answer: &str) -> (Remote, Vec<Value>, std::path::PathBuf) {
    let mut r = Remote::start().await;
    let session = r.session().await;
    let marker = format!("approved-{}", uuid::Uuid::new_v4());
    r.mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b1",
        "bash",
        &json!({"command": format!("echo ran > {marker}")}),
    )));
    r.mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let id = r
        .acp
        .send("session/prompt", prompt(&session, "Make the marker."))
        .await;
    let answer = selected(answer);
    let (response, before) = r
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
        r.gateway.stderr.text()
    );
    let marker = r.server.work().join(marker);
    (r, before, marker)
}

#[tokio::test]
async fn an_approval_on_the_gateway_is_asked_in_the_editor_and_allowing_runs_it() {
    let (r, before, marker) = bash_answered("allow-once").await;
    let asked = requests_of(&before, "session/request_permission");
    assert_eq!(asked.len(), 1, "{before:#?}");
    let params = &asked[0]["params"];
    assert_eq!(params["toolCall"]["toolCallId"], "toolu_b1");
    assert_eq!(params["toolCall"]["kind"], "execute");
    assert_eq!(
        params["options"],
        json!([
            {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "deny", "name": "Deny", "kind": "reject_once"}
        ])
    );
    assert!(marker.exists(), "the approved command did not run");
    let results = tool_results(&r.mock, 1);
    assert_eq!(results.len(), 1);
    assert!(!results[0].1, "{results:?}");
}

#[tokio::test]
async fn an_approval_denied_in_the_editor_runs_nothing() {
    let (r, _, marker) = bash_answered("deny").await;
    assert!(!marker.exists(), "a denied command ran");
    let results = tool_results(&r.mock, 1);
    assert!(
        results[0].1,
        "the model was not told the call was refused: {results:?}"
    );
}

#[tokio::test]
async fn cancel_answers_at_once_and_aborts_the_run_on_the_gateway() {
    let mut r = Remote::start().await;
    let session = r.session().await;
    r.mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    r.mock
        .push(Reply::sse(anthropic_text("Second answer.", 10)));
    let id = r
        .acp
        .send("session/prompt", prompt(&session, "Say something long."))
        .await;
    loop {
        let message = r.acp.next().await;
        assert!(message.get("method").is_some(), "{message}");
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            assert_eq!(
                message["params"]["update"]["content"],
                json!({"type": "text", "text": "Hello"})
            );
            break;
        }
    }
    r.acp
        .notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = r.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    // Only a gateway that aborted the stalled run answers the next prompt.
    let id = r
        .acp
        .send("session/prompt", prompt(&session, "Now something short."))
        .await;
    let (response, before) = r.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&before), "Second answer.");
}

#[tokio::test]
async fn a_second_bridge_lists_and_loads_the_session_with_its_history_and_goes_on() {
    let mut r = Remote::start().await;
    std::fs::write(r.server.work().join("hello.txt"), "hello\n").unwrap();
    let session = r.session().await;
    r.mock.push(Reply::fixture("anthropic/tool_read.sse"));
    r.mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = r
        .acp
        .send(
            "session/prompt",
            prompt(&session, "What does hello.txt say?"),
        )
        .await;
    let (response, _) = r.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));

    let mut second = r.another_bridge(&[]).await;
    let listed = second.call("session/list", json!({})).await;
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["sessionId"] == json!(session))
        .cloned()
        .unwrap_or_else(|| panic!("{session} is not listed: {listed}"));
    assert_eq!(
        row["cwd"],
        json!(r.server.work().display().to_string()),
        "{row}"
    );
    assert_eq!(row["title"], "What does hello.txt say?");

    let id = second
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": r.editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = second.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replay: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "session_info_update")
        .collect();
    assert_eq!(
        replay,
        vec![
            json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "What does hello.txt say?"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "I'll read the file."}}),
            json!({"sessionUpdate": "tool_call", "toolCallId": "toolu_01", "title": "read: path: hello.txt", "kind": "read",
                   "status": "in_progress", "rawInput": {"path": "hello.txt"}, "locations": [{"path": "hello.txt"}]}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "toolu_01", "status": "completed",
                   "content": [{"type": "content", "content": {"type": "text", "text": "hello"}}],
                   "rawOutput": {"content": [{"type": "text", "text": "hello"}]}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "The file says hello."}}),
        ]
    );
    // The loaded session goes on where it was.
    r.mock.push(Reply::sse(anthropic_text("Still hello.", 10)));
    let id = second
        .send("session/prompt", prompt(&session, "And now?"))
        .await;
    let (response, before) = second.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&before), "Still hello.");
    let users = r.user_text(2);
    assert_eq!(
        users.len(),
        3,
        "the model did not get the history: {users:?}"
    );
    assert_eq!(
        users[0],
        json!([{"type": "text", "text": "What does hello.txt say?"}])
    );
}

#[tokio::test]
async fn an_unreachable_gateway_fails_initialize_then_session_new_clearly_and_the_bridge_keeps_serving()
 {
    let editor = Sandbox::new();
    let server = Sandbox::new();
    let mock = support::mock_model::MockModel::start().await;
    let token = support::gateway::new_token();
    let port = free_port();
    let url = format!("ws://127.0.0.1:{port}");
    let mut acp = Acp::spawn(bridge_command(&editor, &url, &token, &[]));
    let response = initialize(&mut acp).await;
    assert_eq!(
        response["error"]["message"],
        json!(format!(
            "cannot reach the gateway at ws://127.0.0.1:{port}/: connection refused"
        )),
        "{response}"
    );
    // The editor may try again once the gateway is up.
    let gateway = gateway_on(&server, &mock, &token, port).await;
    let response = initialize(&mut acp).await;
    assert!(response.get("error").is_none(), "{response}");
    let id = acp
        .send(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");

    // Gone again: a new session fails with the reason, and the bridge
    // goes on serving.
    gateway.stop().await;
    let id = acp
        .send(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(
        response["error"]["message"],
        json!(format!(
            "cannot reach the gateway at ws://127.0.0.1:{port}/: connection refused"
        )),
        "{response}"
    );
    assert!(acp.is_running());
    acp.assert_stdout_was_json_rpc();
}

#[tokio::test]
async fn a_refused_token_fails_initialize_with_the_gateways_reason() {
    let r = Remote::start().await;
    let mut acp = Acp::spawn(bridge_command(
        &r.editor,
        &r.gateway.url(),
        "wrong-token-0123456789abcdef",
        &[],
    ));
    let response = initialize(&mut acp).await;
    assert_eq!(
        response["error"]["message"],
        json!(format!(
            "the gateway at {} refused the connection: unauthorized: gateway token mismatch",
            r.gateway.url()
        )),
        "{response}"
    );
    assert!(acp.is_running());
}

#[tokio::test]
async fn a_credential_in_the_url_is_refused_before_anything_is_sent() {
    let editor = Sandbox::new();
    for url in [
        "ws://127.0.0.1:9/?token=abc",
        "ws://user:secret@127.0.0.1:9/",
        "http://127.0.0.1:9/",
    ] {
        let out = editor
            .command(&["acp", "--connect", url, "--token", "x-0123456789abcdef"])
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        assert!(out.stdout.is_empty(), "{url}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("secret") && !stderr.contains("abc"),
            "{stderr}"
        );
    }
    // No credential at all: said before connecting.
    let out = editor
        .command(&["acp", "--connect", "ws://127.0.0.1:9/"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--token-file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn closing_stdin_ends_the_bridge() {
    let r = Remote::start().await;
    let mut acp = r.another_bridge(&[]).await;
    acp.close_stdin();
    let status = acp.wait_exit().await;
    assert!(status.success(), "{status:?}");
}

/// The parts of a long answer streamed one delta every `delay`.
fn long_answer() -> (Vec<String>, String) {
    let parts: Vec<String> = (0..40).map(|i| format!("word{i} ")).collect();
    let whole = parts.concat();
    (parts, whole)
}

/// A bridge that reaches its gateway through `proxy`, with a session.
async fn through_proxy(
    server: &Sandbox,
    editor: &Sandbox,
    gateway: &support::gateway::Gateway,
    proxy: &Proxy,
) -> (Acp, String) {
    let _ = server;
    let token = gateway.token.clone().unwrap();
    let mut acp = Acp::spawn(bridge_command(editor, &proxy.url(), &token, &[]));
    let response = initialize(&mut acp).await;
    assert!(response.get("error").is_none(), "{response}");
    let result = acp
        .call(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let session = result["sessionId"].as_str().unwrap().to_string();
    (acp, session)
}

/// Reads updates until the streamed text contains `marker`; returns them.
async fn until_text(acp: &mut Acp, marker: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = acp.next().await;
        assert!(
            message.get("method").is_some(),
            "the prompt ended early: {message}"
        );
        seen.push(message);
        if streamed_text(&seen).contains(marker) {
            return seen;
        }
    }
}

#[tokio::test]
async fn a_network_drop_mid_turn_reconnects_and_the_text_arrives_exactly_once() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = support::mock_model::MockModel::start().await;
    let gateway = support::gateway::Gateway::start(&server, &mock).await;
    let proxy = Proxy::start(gateway.addr).await;
    let (mut acp, session) = through_proxy(&server, &editor, &gateway, &proxy).await;
    let (parts, whole) = long_answer();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: std::time::Duration::from_millis(40),
        gate: None,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "Say forty words."))
        .await;
    let mut seen = until_text(&mut acp, "word3 ").await;
    assert_eq!(proxy.cut(), 1, "the bridge had one connection to cut");
    let (response, rest) = acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        gateway.stderr.text()
    );
    seen.extend(rest);
    assert_eq!(streamed_text(&seen), whole);
    assert!(
        proxy.accepted.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "the bridge did not reconnect"
    );
    assert_eq!(mock.requests().len(), 1, "the prompt ran twice");
}

#[tokio::test]
async fn a_turn_that_ends_while_the_line_is_down_is_settled_after_the_reconnect() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = support::mock_model::MockModel::start().await;
    let gateway = support::gateway::Gateway::start(&server, &mock).await;
    let proxy = Proxy::start(gateway.addr).await;
    let (mut acp, session) = through_proxy(&server, &editor, &gateway, &proxy).await;
    // A watcher on the gateway sees the run end while the bridge cannot.
    let mut watcher = gateway.admin().await;
    let (parts, whole) = long_answer();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: std::time::Duration::from_millis(20),
        gate: None,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "Say forty words."))
        .await;
    let mut seen = until_text(&mut acp, "word1 ").await;
    proxy.hold(true);
    proxy.cut();
    let end = watcher
        .next_where("the run's final", |e| {
            e["event"] == "chat"
                && e["payload"]["sessionKey"] == json!(session)
                && e["payload"]["state"] == "final"
        })
        .await;
    assert_eq!(end["payload"]["state"], "final");
    proxy.hold(false);
    let (response, rest) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    seen.extend(rest);
    assert_eq!(streamed_text(&seen), whole);
}

#[tokio::test]
async fn a_gateway_restarted_mid_turn_ends_the_prompt_with_a_reason_and_the_session_goes_on() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = support::mock_model::MockModel::start().await;
    let token = support::gateway::new_token();
    let port = free_port();
    let gateway = gateway_on(&server, &mock, &token, port).await;
    let mut acp = Acp::spawn(bridge_command(
        &editor,
        &format!("ws://127.0.0.1:{port}"),
        &token,
        &[],
    ));
    assert!(initialize(&mut acp).await.get("error").is_none());
    let session = acp
        .call(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "Say something long."))
        .await;
    let seen = until_text(&mut acp, "Hello").await;
    gateway.stop().await;
    let gateway = gateway_on(&server, &mock, &token, port).await;
    let (response, rest) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no longer knows this turn"),
        "{response}\ngateway stderr:\n{}",
        gateway.stderr.text()
    );
    // Nothing was said twice.
    assert_eq!(streamed_text(&seen) + &streamed_text(&rest), "Hello");

    // The same session goes on with the restarted gateway.
    mock.push(Reply::sse(anthropic_text("Back again.", 10)));
    let id = acp
        .send("session/prompt", prompt(&session, "Are you there?"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "gateway stderr:\n{}",
        gateway.stderr.text()
    );
    assert_eq!(streamed_text(&before), "Back again.");
    let body = &mock.requests()[1].body;
    let texts = body.to_string();
    assert!(
        texts.contains("Say something long."),
        "the restarted gateway lost the session's history: {body}"
    );
}

#[tokio::test]
async fn a_line_gone_silent_is_noticed_by_the_tick_watchdog_and_the_turn_completes() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = support::mock_model::MockModel::start().await;
    // Ticks every 200 ms: silence past 400 ms means the line is dead.
    support::gateway::write_gateway_config(&server, "tick_interval_ms = 200");
    let gateway = support::gateway::Gateway::start(&server, &mock).await;
    let proxy = Proxy::start(gateway.addr).await;
    let (mut acp, session) = through_proxy(&server, &editor, &gateway, &proxy).await;
    let (parts, whole) = long_answer();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: std::time::Duration::from_millis(40),
        gate: None,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "Say forty words."))
        .await;
    let mut seen = until_text(&mut acp, "word3 ").await;
    assert_eq!(proxy.freeze(), 1);
    let (response, rest) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    seen.extend(rest);
    assert_eq!(streamed_text(&seen), whole);
    assert!(proxy.accepted.load(std::sync::atomic::Ordering::SeqCst) >= 2);
}

#[tokio::test]
async fn a_gateway_that_redirects_the_upgrade_does_not_get_the_bridge_to_follow() {
    let attacker = support::attacker::Attacker::start().await;
    // A "gateway" that answers the websocket upgrade with a redirect to the
    // attacker's server.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let location = format!("ws://{}/", attacker.addr);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            let answer =
                format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
            let _ = socket.write_all(answer.as_bytes()).await;
        }
    });
    let editor = Sandbox::new();
    let mut acp = Acp::spawn(bridge_command(
        &editor,
        &format!("ws://{addr}"),
        "secret-token-0123456789abcdef",
        &[],
    ));
    let response = initialize(&mut acp).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("HTTP 302"),
        "the refusal does not say what the server answered: {response}"
    );
    attacker.assert_untouched();
}

#[tokio::test]
async fn closing_stdin_after_a_prompt_finishes_the_prompt_then_ends_the_bridge() {
    let mut r = Remote::start().await;
    let session = r.session().await;
    r.mock.push(Reply::Sse {
        body: anthropic_deltas(&["One, ", "two, ", "three."]),
        delay: std::time::Duration::from_millis(30),
        gate: None,
    });
    let id = r
        .acp
        .send("session/prompt", prompt(&session, "Count to three."))
        .await;
    r.acp.close_stdin();
    let (response, before) = r.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&before), "One, two, three.");
    let status = r.acp.wait_exit().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn thinking_streams_as_thought_chunks_and_text_as_message_chunks_each_once() {
    let mut r = Remote::start().await;
    let session = r.session().await;
    r.mock.push(Reply::fixture("anthropic/thinking.sse"));
    let id = r.acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = r.acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let updates: Vec<Value> = coalesce(updates_of(&before))
        .into_iter()
        .filter(|u| u["sessionUpdate"] != "session_info_update")
        .collect();
    assert_eq!(
        updates,
        vec![
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "The user says hi. I should greet them back briefly."}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi there! How can I help?"}}),
        ]
    );
}

#[tokio::test]
async fn the_token_never_reaches_the_log_even_at_trace_level() {
    let mut r = Remote::start().await;
    let token = r.gateway.token.clone().unwrap();
    let mut cmd = bridge_command(&r.editor, &r.gateway.url(), &token, &[]);
    cmd.env("RUST_LOG", "trace");
    let mut acp = Acp::spawn(cmd);
    assert!(initialize(&mut acp).await.get("error").is_none());
    let session = acp
        .call(
            "session/new",
            json!({"cwd": r.editor.work(), "mcpServers": []}),
        )
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    r.mock.push(Reply::sse(anthropic_text("Hi.", 10)));
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    acp.close_stdin();
    acp.wait_exit().await;
    let stderr = (&mut acp.stderr).await.unwrap();
    assert!(!stderr.is_empty(), "nothing was logged at trace level");
    assert!(!stderr.contains(&token), "the token was logged:\n{stderr}");
    let _ = r.new_session().await;
}

/// A "gateway" that speaks the handshake properly and then sends whatever a
/// hostile or broken server might: frames that are not JSON, binary
/// frames, responses without ids, events whose fields have the wrong
/// types, approvals without ids. `script` is what it sends after
/// answering `chat.send`.
async fn hostile_gateway(
    script: fn(&str, &str) -> Vec<tokio_tungstenite::tungstenite::Message>,
) -> String {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(stream).await.unwrap();
                let event = |name: &str, payload: Value| {
                    Message::text(
                        json!({"type": "event", "event": name, "payload": payload}).to_string(),
                    )
                };
                ws.send(event("connect.challenge", json!({"nonce": "n", "ts": 1})))
                    .await
                    .unwrap();
                while let Some(Ok(Message::Text(text))) = ws.next().await {
                    let frame: Value = serde_json::from_str(&text).unwrap();
                    let id = frame["id"].clone();
                    let ok = |payload: Value| {
                        Message::text(
                            json!({"type": "res", "id": id, "ok": true, "payload": payload})
                                .to_string(),
                        )
                    };
                    let reply = match frame["method"].as_str().unwrap_or_default() {
                        "connect" => ok(json!({"type": "hello-ok", "protocol": 4,
                            "server": {"version": "evil"}, "snapshot": {"sessionDefaults": "nope"},
                            "policy": {"tickIntervalMs": "soon"}})),
                        "sessions.list" => {
                            ok(json!({"sessions": "not a list", "hasMore": "maybe"}))
                        }
                        "models.list" => Message::text(
                            json!({"type": "res", "id": id, "ok": false, "error": {}}).to_string(),
                        ),
                        "chat.send" => {
                            let run = frame["params"]["idempotencyKey"]
                                .as_str()
                                .unwrap()
                                .to_string();
                            let key = frame["params"]["sessionKey"].as_str().unwrap().to_string();
                            ws.send(ok(json!({"runId": run, "status": "started"})))
                                .await
                                .unwrap();
                            for message in script(&run, &key) {
                                if ws.send(message).await.is_err() {
                                    return;
                                }
                            }
                            continue;
                        }
                        _ => ok(json!(null)),
                    };
                    if ws.send(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn garbage(run: &str, key: &str) -> Vec<tokio_tungstenite::tungstenite::Message> {
    use tokio_tungstenite::tungstenite::Message;
    let event = |name: &str, payload: Value| {
        Message::text(json!({"type": "event", "event": name, "payload": payload}).to_string())
    };
    vec![
        Message::binary(vec![0xff, 0x00, 0x13]),
        Message::text("not json at all"),
        Message::text("[1, 2, 3]"),
        Message::text(json!({"type": "res"}).to_string()),
        Message::text(json!({"type": "res", "id": "999", "ok": true}).to_string()),
        Message::text(json!({"type": "event"}).to_string()),
        event(
            "chat",
            json!({"runId": 123, "sessionKey": key, "state": "delta"}),
        ),
        event(
            "chat",
            json!({"runId": run, "sessionKey": key, "seq": "x", "state": "delta", "message": {"content": "plain"}}),
        ),
        event(
            "chat",
            json!({"runId": run, "sessionKey": key, "seq": 2, "state": "delta", "message": {"content": [{"type": "text", "text": 5}, {"type": "text"}]}}),
        ),
        event(
            "chat",
            json!({"runId": run, "sessionKey": key, "seq": 3, "state": "delta", "message": "a string"}),
        ),
        event(
            "agent",
            json!({"runId": run, "sessionKey": key, "stream": "tool", "data": null}),
        ),
        event(
            "agent",
            json!({"runId": run, "sessionKey": key, "stream": "tool", "data": {"phase": "start", "toolCallId": 7}}),
        ),
        event(
            "agent",
            json!({"runId": run, "sessionKey": key, "stream": "approval", "data": {"phase": "requested"}}),
        ),
        event(
            "exec.approval.requested",
            json!({"id": "", "request": {"sessionKey": key}}),
        ),
        event(
            "exec.approval.requested",
            json!({"id": "x", "request": null}),
        ),
        event(
            "exec.approval.requested",
            json!({"id": "y", "request": {"sessionKey": "someone-else"}}),
        ),
        event(
            "chat",
            json!({"runId": "other-run", "sessionKey": "someone-else", "seq": 1, "state": "final", "message": {"content": [{"type": "text", "text": "not yours"}]}}),
        ),
        event(
            "session.message",
            json!({"sessionKey": key, "runId": run, "message": 42}),
        ),
        event(
            "chat",
            json!({"runId": run, "sessionKey": key, "seq": 4, "state": "final", "message": {"role": "assistant", "content": [{"type": "text", "text": "Still fine."}]}, "stopReason": "stop"}),
        ),
    ]
}

#[tokio::test]
async fn a_hostile_gateway_cannot_crash_the_bridge_or_make_it_touch_the_editors_machine() {
    let url = hostile_gateway(garbage).await;
    let editor = Sandbox::new();
    let mut acp = Acp::spawn(bridge_command(&editor, &url, "token-0123456789abcdef", &[]));
    assert!(initialize(&mut acp).await.get("error").is_none());
    let result = acp
        .call(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let session = result["sessionId"].as_str().unwrap().to_string();
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "{response}"
    );
    // Only updates of its own session came, the text the one real frame
    // carried; nothing was asked of the editor (no file, no terminal, no
    // permission for approvals without an id or of another session).
    for m in &before {
        assert_eq!(m["method"], "session/update", "{m}");
        assert_eq!(m["params"]["sessionId"], json!(session), "{m}");
    }
    assert_eq!(streamed_text(&before), "Still fine.");
    // It goes on serving.
    let listed = acp.call("session/list", json!({})).await;
    assert_eq!(listed, json!({"sessions": []}));
    assert!(acp.is_running());
    acp.assert_stdout_was_json_rpc();
}

/// The bridge asks the gateway for the events of the sessions it uses
/// only (`session-scoped-events`): another session streaming on the same
/// gateway sends it nothing, and its own session's text still arrives,
/// built from deltas without the cumulative text (`pincer.chat-deltas`).
#[tokio::test]
async fn the_bridge_hears_its_own_sessions_stream_and_not_another_sessions() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = support::mock_model::MockModel::start().await;
    let gateway = support::gateway::Gateway::start(&server, &mock).await;
    let proxy = Proxy::start(gateway.addr).await;
    let (mut acp, session) = through_proxy(&server, &editor, &gateway, &proxy).await;

    // Another client's session streams first.
    let secret: Vec<String> = (0..50).map(|i| format!("elsewhere{i} ")).collect();
    let secret: Vec<&str> = secret.iter().map(String::as_str).collect();
    mock.push(Reply::sse(anthropic_deltas(&secret)));
    let mut other = gateway.admin().await;
    let other_key = support::gateway::new_key();
    let run = other.chat_send(&other_key, "Talk elsewhere.").await;
    other.chat_end(&run).await;

    let (parts, whole) = long_answer();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    // Spaced out, so that the words reach the gateway one by one.
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: std::time::Duration::from_millis(5),
        gate: None,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "Say forty words."))
        .await;
    let (response, seen) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&seen), whole);

    let heard = String::from_utf8_lossy(&proxy.downstream.lock().unwrap()).into_owned();
    // The proxy sees the frames' text: the bridge's own stream is there,
    let own = heard.matches("\"deltaText\":\"word").count();
    assert!(own >= 5, "{own} deltas: {heard}");
    // once: no delta after the first repeats the text so far (the last
    // word is in the chat delta, the agent delta and the final message),
    assert_eq!(heard.matches("word39 ").count(), 3, "{heard}");
    // and nothing of the other session.
    assert!(
        !heard.contains("elsewhere"),
        "another session's stream reached the bridge"
    );
    assert!(!heard.contains(&other_key));
}

/// A session the editor closes stops streaming to the bridge: another
/// client's run in it sends the bridge nothing.
#[tokio::test]
async fn a_session_the_editor_closed_no_longer_streams_to_the_bridge() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = support::mock_model::MockModel::start().await;
    let gateway = support::gateway::Gateway::start(&server, &mock).await;
    let proxy = Proxy::start(gateway.addr).await;
    let (mut acp, closed) = through_proxy(&server, &editor, &gateway, &proxy).await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let open = result["sessionId"].as_str().unwrap().to_string();
    let answer = acp
        .call("session/close", json!({"sessionId": closed}))
        .await;
    assert_eq!(answer, json!({}));

    // Another client runs the closed session's key.
    let secret: Vec<String> = (0..20).map(|i| format!("elsewhere{i} ")).collect();
    let secret: Vec<&str> = secret.iter().map(String::as_str).collect();
    mock.push(Reply::sse(anthropic_deltas(&secret)));
    let mut other = gateway.admin().await;
    let run = other.chat_send(&closed, "Talk here.").await;
    other.chat_end(&run).await;

    // The open session's turn: what the gateway sent before has passed
    // the proxy once this has.
    mock.push(Reply::sse(anthropic_deltas(&["Still ", "here."])));
    let id = acp.send("session/prompt", prompt(&open, "Hello.")).await;
    let (response, seen) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(streamed_text(&seen), "Still here.");
    let heard = String::from_utf8_lossy(&proxy.downstream.lock().unwrap()).into_owned();
    assert!(heard.contains("here."), "{heard}");
    assert!(
        !heard.contains("elsewhere"),
        "the closed session's stream reached the bridge"
    );
}
