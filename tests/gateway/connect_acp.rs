//! `pincer acp --connect` to a pincer gateway: the editor's ACP goes over
//! the gateway's `/acp` as it is (`--protocol auto` finds it there), so
//! that what the agent says arrives untranslated, while the session runs
//! on the gateway's machine as the OpenClaw-protocol bridge's do. The
//! editor is the test, on the pipe's stdio; the gateway is a real `pincer
//! gateway` against the mock model; the two have separate sandboxes, as
//! two machines would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, requests_of, updates_of};
use support::bridge::{connect_command, initialize, streamed_text};
use support::gateway::Gateway;
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};
use support::{prompt, selected, tool_results};

/// A gateway on `server` and `pincer acp --connect` to it from `editor`
/// (with `extra` arguments), initialized as an editor that offers its
/// files and terminal; the `initialize` answer.
async fn connected(
    server: &Sandbox,
    editor: &Sandbox,
    mock: &MockModel,
    extra: &[&str],
) -> (Gateway, Acp, Value) {
    let gateway = Gateway::start(server, mock).await;
    let token = gateway.token.clone().unwrap();
    let mut acp = Acp::spawn(connect_command(editor, &gateway.url(), &token, extra));
    let response = initialize(&mut acp).await;
    assert!(response.get("error").is_none(), "{response}");
    (gateway, acp, response)
}

/// Reads until the agent's first streamed text.
async fn first_chunk(acp: &mut Acp) {
    loop {
        let message = acp.next().await;
        if message["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
            return;
        }
    }
}

async fn new_session(acp: &mut Acp, editor: &Sandbox) -> Value {
    let id = acp
        .send(
            "session/new",
            json!({"cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    response["result"].clone()
}

/// The session works in the gateway's directory, on its files; the
/// editor's files and terminal are never asked for; what only ACP says
/// (usage, the command menu) arrives; a command's permission question
/// reaches the editor and its answer decides.
#[tokio::test]
async fn acp_reaches_a_pincer_gateway_as_it_is_and_the_session_keeps_to_the_gateways_machine() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    server.write("hello.txt", "hello from the server\n");
    editor.write("hello.txt", "the editor's own file\n");
    let mock = MockModel::start().await;
    let (gateway, mut acp, initialized) = connected(&server, &editor, &mock, &[]).await;
    let result = &initialized["result"];
    assert_eq!(result["agentInfo"]["name"], "pincer");
    assert_eq!(
        result["_meta"]["pincer/gateway"]["cwd"],
        json!(server.work()),
        "{initialized}"
    );
    // The ACP server's own capabilities come through untranslated.
    assert_eq!(result["agentCapabilities"]["loadSession"], true);
    assert!(
        result["agentCapabilities"]["sessionCapabilities"]["fork"].is_object(),
        "{initialized}"
    );

    let created = new_session(&mut acp, &editor).await;
    let session = created["sessionId"].as_str().unwrap().to_string();
    assert_eq!(
        created["_meta"]["pincer/remote"],
        json!({"gateway": gateway.url(), "cwd": server.work(), "protocol": "acp"})
    );
    assert!(created["configOptions"].is_array(), "{created}");

    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = acp
        .send("session/prompt", prompt(&session, "Read hello.txt."))
        .await;
    let (response, before) = acp
        .drive(id, |method, params| {
            panic!("the editor was asked {method}: {params}")
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let updates = updates_of(&before);
    let kinds: Vec<&str> = updates
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .map(|k| match k {
            "agent_message_chunk" => "text",
            other => other,
        })
        .collect();
    for kind in ["tool_call", "tool_call_update", "usage_update", "text"] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let read = tool_results(&mock, 1);
    assert!(
        read[0].2.contains("hello from the server"),
        "the tool did not read the gateway's file: {read:?}"
    );

    // A command asks the editor; allowed, it runs on the gateway's machine.
    let marker = format!("approved-{}", uuid::Uuid::new_v4());
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b1",
        "bash",
        &json!({"command": format!("echo ran > {marker}")}),
    )));
    mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let id = acp
        .send("session/prompt", prompt(&session, "Make the marker."))
        .await;
    let (response, before) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            let once = params["options"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["kind"] == "allow_once")
                .unwrap();
            selected(once["optionId"].as_str().unwrap())
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);
    assert!(
        server.work().join(&marker).exists(),
        "{:?}",
        tool_results(&mock, 3)
    );
    assert!(!editor.work().join(&marker).exists());

    // The end of the editor's input ends the pipe cleanly.
    acp.close_stdin();
    let status = acp.wait_exit().await;
    assert!(status.success(), "{status:?}");
    acp.assert_stdout_was_json_rpc();
    let log = gateway.stop().await;
    assert!(!log.contains(&initialized.to_string()), "{log}");
}

/// A cancelled turn answers `cancelled`; another connection lists the
/// session and loads it with its history.
#[tokio::test]
async fn a_turn_is_cancelled_and_the_session_loads_over_another_connection() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = MockModel::start().await;
    let (gateway, mut acp, _) = connected(&server, &editor, &mock, &["--protocol", "acp"]).await;
    let session = new_session(&mut acp, &editor).await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    mock.push(Reply::sse(anthropic_text("The first answer.", 10)));
    let id = acp
        .send("session/prompt", prompt(&session, "First question."))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(streamed_text(&before), "The first answer.");

    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 4,
    });
    let id = acp
        .send("session/prompt", prompt(&session, "Say something long."))
        .await;
    first_chunk(&mut acp).await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());

    let token = gateway.token.clone().unwrap();
    let mut again = Acp::spawn(connect_command(&editor, &gateway.url(), &token, &[]));
    initialize(&mut again).await;
    let listed = again
        .call("session/list", json!({"cwd": editor.work()}))
        .await;
    let sessions = listed["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        sessions
            .iter()
            .any(|s| s["sessionId"] == session && s["cwd"] == json!(server.work())),
        "{listed}"
    );
    let id = again
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": editor.work(), "mcpServers": []}),
        )
        .await;
    let (response, replay) = again.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replayed = updates_of(&replay);
    let users: Vec<&str> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(users, ["First question.", "Say something long."]);
    assert!(streamed_text(&replay).starts_with("The first answer."));
}

/// The connection is the session's: when the gateway goes away, the
/// waiting prompt fails with the reason and the pipe ends with an error.
#[tokio::test]
async fn a_lost_gateway_fails_the_waiting_prompt_and_ends_the_pipe() {
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    let mock = MockModel::start().await;
    let (gateway, mut acp, _) = connected(&server, &editor, &mock, &[]).await;
    let session = new_session(&mut acp, &editor).await["sessionId"]
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
    first_chunk(&mut acp).await;
    gateway.stop().await;
    let (response, _) = acp.until_response(id).await;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("gateway") && message.contains("the session ended with it"),
        "{response}"
    );
    let status = acp.wait_exit().await;
    assert_eq!(status.code(), Some(1));
    acp.assert_stdout_was_json_rpc();
}

/// `--protocol acp` where there is no pincer gateway says so; `--session`
/// keys are the gateway protocol's and are refused with it.
#[tokio::test]
async fn protocol_acp_without_a_pincer_gateway_or_with_a_session_key_is_refused() {
    let editor = Sandbox::new();
    let port = support::bridge::free_port();
    let out = connect_command(
        &editor,
        &format!("ws://127.0.0.1:{port}"),
        "token-0123456789abcdef",
        &["--protocol", "acp"],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot reach ACP at ws://127.0.0.1:{port}/"))
            && stderr.contains("connection refused"),
        "{stderr}"
    );
    assert!(!stderr.contains("token-0123456789abcdef"), "{stderr}");

    let out = connect_command(
        &editor,
        &format!("ws://127.0.0.1:{port}"),
        "token-0123456789abcdef",
        &["--protocol", "acp", "--session", "telegram:dm:1"],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--protocol openclaw"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A wrong token in `auto` mode: the gateway's `/acp` refuses it, and the
/// pipe stops there, saying so, rather than offer it again over
/// OpenClaw's protocol. Each try counts once towards the address's
/// lockout (5 failures): after three, the right token still gets in.
#[tokio::test]
async fn auto_stops_at_a_refused_token_and_counts_one_failure() {
    let server = Sandbox::new();
    let editor = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&server, &mock).await;
    for _ in 0..3 {
        let out = connect_command(&editor, &gateway.url(), "wrong-token-0123456789abcdef", &[])
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("cannot reach ACP at") && stderr.contains("401"),
            "{stderr}"
        );
        assert!(!stderr.contains("wrong-token-0123456789abcdef"), "{stderr}");
    }
    let token = gateway.token.clone().unwrap();
    let mut acp = Acp::spawn(connect_command(&editor, &gateway.url(), &token, &[]));
    let response = initialize(&mut acp).await;
    assert!(response.get("error").is_none(), "{response}");
    new_session(&mut acp, &editor).await;
}
