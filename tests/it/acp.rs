//! End-to-end: the real `pincer acp` binary driven as an editor drives it,
//! against the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::prompt;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, coalesce, updates_of};
use support::mock_model::{MockModel, Reply, fixture};
use support::sse::anthropic_tool_call;

fn anthropic(sandbox: &Sandbox, mock: &MockModel) -> tokio::process::Command {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    cmd
}

/// Replaces the sandbox path so whole values compare across runs.
fn normalize(value: Value, sandbox: &Sandbox) -> Value {
    let text = value
        .to_string()
        .replace(&sandbox.work().display().to_string(), "$WORK");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn initialize_reports_honest_capabilities() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    let result = acp.initialize().await;
    let auth_ids: Vec<&str> = result["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        auth_ids,
        vec![
            "anthropic-oauth",
            "anthropic-api-key",
            "openai-api-key",
            "gemini-api-key",
            "local-model"
        ]
    );
    assert_eq!(result["protocolVersion"], json!(1));
    assert_eq!(
        result["agentCapabilities"],
        json!({
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": false},
            "sessionCapabilities": {
                "additionalDirectories": {}, "list": {}, "delete": {}, "resume": {}, "close": {},
                "fork": {}, "systemPrompt": {"mode": {"override": {}}}
            },
            "auth": {"logout": {}}
        })
    );
    assert_eq!(
        result["agentInfo"],
        json!({"name": "pincer", "title": "pincer", "version": env!("CARGO_PKG_VERSION")})
    );
}

#[tokio::test]
async fn prompt_with_a_tool_round_trip_streams_every_step() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "What does hello.txt say?"),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    for m in &before {
        assert_eq!(m["method"], "session/update");
        assert_eq!(m["params"]["sessionId"], json!(session));
    }
    let updates = normalize(Value::Array(coalesce(updates_of(&before))), &sandbox);
    assert_eq!(
        updates,
        json!([
            // Each message goes by the id of its transcript entry: the
            // prompt is e1, the answers e2 and e4, the tool result e3.
            {"sessionUpdate": "agent_message_chunk", "messageId": "e2", "content": {"type": "text", "text": "I'll read the file."}},
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "toolu_01",
                "name": "read",
                "title": "Read hello.txt",
                "kind": "read",
                "status": "in_progress",
                "locations": [{"path": "$WORK/hello.txt"}],
                "rawInput": {"path": "hello.txt"}
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "toolu_01",
                "name": "read",
                "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "hello"}}],
                "rawOutput": {"path": "$WORK/hello.txt", "startLine": 1, "endLine": 1, "totalLines": 1, "truncated": false}
            },
            // The response reported 1,867 tokens; the 5-character result
            // that came after is estimated at 2.
            {"sessionUpdate": "usage_update", "used": 1869, "size": 200000, "cost": {"amount": 0.007647, "currency": "USD"}},
            {"sessionUpdate": "agent_message_chunk", "messageId": "e4", "content": {"type": "text", "text": "The file says hello."}},
            {"sessionUpdate": "usage_update", "used": 1882, "size": 200000, "cost": {"amount": 0.008541, "currency": "USD"}}
        ])
    );
    assert_eq!(mock.violations(), Vec::<String>::new());

    // What the model was sent: the key, the tool, and the tool result
    // answering its call by id.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some("test-key"));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(requests[0].body["stream"], json!(true));
    assert_eq!(requests[0].body["model"], json!("claude-sonnet-4-5"));
    assert_eq!(requests[0].body["tools"][0]["name"], json!("read"));
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01");
    assert_eq!(result["is_error"], json!(false));
    assert_eq!(result["content"][0]["text"], "hello");
}

#[tokio::test]
async fn openai_compatible_servers_work_the_same_way() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai/tool_read.sse"));
    mock.push(Reply::fixture("openai/after_tool.sse"));
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", mock.openai_url());
    let mut acp = Acp::spawn(cmd);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "What does hello.txt say?"),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let kinds: Vec<String> = coalesce(updates_of(&before))
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "tool_call",
            "tool_call_update",
            "usage_update",
            "agent_message_chunk",
            "usage_update"
        ]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    let requests = mock.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(requests[0].body["model"], json!("gpt-5"));
    assert_eq!(
        requests[0].body["stream_options"],
        json!({"include_usage": true})
    );
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "call_01");
    assert_eq!(tool["content"], "hello");
}

#[tokio::test]
async fn missing_credentials_answer_auth_required_with_the_fix() {
    let sandbox = Sandbox::new();
    let mut acp = Acp::spawn(sandbox.command(&["acp"]));
    acp.initialize().await;
    let id = acp
        .send(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32000));
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("ANTHROPIC_API_KEY"),
        "the message names the variable: {message}"
    );
}

#[tokio::test]
async fn a_key_the_provider_rejects_answers_auth_required() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32000));
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid x-api-key")
    );
    // The key itself never reaches the editor.
    assert!(!response.to_string().contains("test-key"));
}

#[tokio::test]
async fn cancel_stops_the_stream_and_answers_cancelled() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // Three events of the text reply, then silence until pincer hangs up.
    mock.push(Reply::Stall {
        body: fixture("anthropic/text.sse"),
        events: 4,
    });
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    // Wait for the first streamed words, then cancel.
    let first = loop {
        let message = acp.next().await;
        let kind = &message["params"]["update"]["sessionUpdate"];
        if kind != "session_info_update" && kind != "available_commands_update" {
            break message;
        }
    };
    assert_eq!(
        first["params"]["update"]["sessionUpdate"],
        "agent_message_chunk"
    );
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = tokio::time::timeout(Duration::from_secs(1), acp.until_response(id))
        .await
        .expect("the prompt answers within a second of the cancel");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));

    // The session keeps working, and the model sees the partial answer.
    mock.push(Reply::fixture("anthropic/text.sse"));
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let messages = mock.requests()[1].body["messages"].clone();
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"][0]["text"], "Hello");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn stop_reasons_follow_the_model() {
    for (fixture_name, expected) in [
        ("anthropic/max_tokens.sse", "max_tokens"),
        ("anthropic/refusal.sse", "refusal"),
    ] {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        mock.push(Reply::fixture(fixture_name));
        let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
        acp.initialize().await;
        let session = acp.new_session(&sandbox.work()).await;
        let id = acp.send("session/prompt", prompt(&session, "hi")).await;
        let (response, _) = acp.until_response(id).await;
        assert_eq!(
            response["result"],
            json!({"stopReason": expected}),
            "{fixture_name}"
        );
    }
}

#[tokio::test]
async fn the_turn_limit_ends_the_run_with_max_turn_requests() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.home().join("config.toml"), "max_turns = 1\n").unwrap();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "loop")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "max_turn_requests"})
    );
    // The call that was made still got its result.
    let kinds: Vec<Value> = updates_of(&before)
        .iter()
        .map(|u| u["sessionUpdate"].clone())
        .filter(|k| k != "agent_message_chunk")
        .collect();
    assert_eq!(
        kinds,
        vec![
            json!("tool_call"),
            json!("tool_call_update"),
            json!("usage_update")
        ]
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn malformed_input_gets_json_rpc_errors_and_the_server_keeps_going() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;

    acp.send_raw("this is not json").await;
    let parse = acp.next().await;
    assert_eq!(parse["error"]["code"], json!(-32700));
    assert_eq!(parse["id"], Value::Null);

    acp.send_raw(r#"{"jsonrpc":"2.0","id":"x1","method":"no/such/method","params":{}}"#)
        .await;
    let unknown = acp.next().await;
    assert_eq!(unknown["id"], json!("x1"));
    assert_eq!(unknown["error"]["code"], json!(-32601));

    let id = acp
        .send(
            "session/new",
            json!({"cwd": "relative/dir", "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32602));

    let id = acp.send("session/prompt", json!({"sessionId": 7})).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32602));

    let id = acp
        .send("session/prompt", prompt("sess_unknown", "hi"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], json!(-32002));
    assert_eq!(
        response["error"]["data"]["sessionId"],
        json!("sess_unknown")
    );

    // Unknown notifications are ignored; the server still answers.
    acp.notify("_vendor/whatever", json!({})).await;
    let session = acp.new_session(&sandbox.work()).await;
    assert!(session.starts_with("sess_"));
}

#[tokio::test]
async fn two_sessions_run_at_once() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::Sse {
        body: fixture("anthropic/text.sse"),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    });
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let a = acp.new_session(&sandbox.work()).await;
    let b = acp.new_session(&sandbox.work()).await;
    assert_ne!(a, b);
    let id_a = acp.send("session/prompt", prompt(&a, "first")).await;
    mock.wait_for_requests(1, Duration::from_secs(10)).await;
    let id_b = acp.send("session/prompt", prompt(&b, "second")).await;
    // B finishes while A's model call is still held back.
    let (response_b, before_b) = acp.until_response(id_b).await;
    assert_eq!(response_b["result"], json!({"stopReason": "end_turn"}));
    // Everything but A's title (sent when A's prompt arrived) is B's.
    assert!(
        before_b
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] != "session_info_update")
            .all(|m| m["params"]["sessionId"] == json!(b))
    );
    gate.notify_one();
    let (response_a, before_a) = acp.until_response(id_a).await;
    assert_eq!(response_a["result"], json!({"stopReason": "end_turn"}));
    let text: String = updates_of(&before_a)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "Hello from the mock model.");
}

#[tokio::test]
async fn requests_piped_without_waiting_are_handled_in_order_then_pincer_exits() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("notes.txt");
    std::fs::write(&secret, "outside\n").unwrap();
    let mock = MockModel::start().await;
    // The model wants a file outside the project, which needs permission;
    // stdin is already closed, so nobody can grant it.
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_out",
        "read",
        &json!({"path": secret}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    let lines = [
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd": sandbox.work(),"mcpServers":[]}}),
    ];
    for line in &lines {
        acp.send_raw(&line.to_string()).await;
    }
    // The session id is not known yet, so a script would read it first;
    // everything up to here was written without waiting.
    let init = acp.next().await;
    assert_eq!(init["id"], json!(0));
    assert!(init.get("result").is_some(), "{init}");
    let new = acp.next().await;
    assert_eq!(new["id"], json!(1));
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    acp.send_raw(
        &json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params": prompt(&session, "read it")})
            .to_string(),
    )
    .await;
    acp.close_stdin();
    let (response, before) = acp.until_response(2).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    // No permission request can be answered any more: the call is rejected.
    let failed = updates_of(&before)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap();
    assert_eq!(failed["status"], "failed");
    let result = &mock.requests()[1].body["messages"][2]["content"][0];
    assert_eq!(result["is_error"], json!(true));
    assert!(!result.to_string().contains("outside\\n"));
    let status = acp.wait_exit().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn initialize_and_session_new_in_one_write_both_succeed() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    let both = format!(
        "{}\n{}",
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}),
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd": sandbox.work(),"mcpServers":[]}})
    );
    acp.send_raw(&both).await;
    acp.close_stdin();
    let first = acp.next().await;
    let second = acp.next().await;
    assert_eq!(first["id"], json!(0));
    assert_eq!(second["id"], json!(1));
    assert!(second["result"]["sessionId"].is_string(), "{second}");
    assert!(acp.wait_exit().await.success());
}

#[tokio::test]
async fn permission_is_asked_for_reads_outside_the_project() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("notes.txt");
    std::fs::write(&file, "outside\n").unwrap();
    let mock = MockModel::start().await;
    for _ in 0..2 {
        mock.push(Reply::sse(anthropic_tool_call(
            "toolu_p",
            "read",
            &json!({"path": file}),
        )));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
    }
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;

    for (answer, expect_error) in [("reject_once", true), ("allow_once", false)] {
        let id = acp
            .send("session/prompt", prompt(&session, "read it"))
            .await;
        let request = loop {
            let m = acp.next().await;
            if m["method"] == "session/request_permission" {
                break m;
            }
        };
        let kinds: Vec<&str> = request["params"]["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            vec!["allow_once", "allow_always", "reject_once", "reject_always"]
        );
        assert_eq!(request["params"]["toolCall"]["toolCallId"], "toolu_p");
        acp.respond(
            &request["id"],
            json!({"outcome": {"outcome": "selected", "optionId": answer}}),
        )
        .await;
        let (response, _) = acp.until_response(id).await;
        assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
        let requests = mock.requests();
        let last = requests.last().unwrap();
        let messages = last.body["messages"].as_array().unwrap();
        let result = &messages[messages.len() - 1]["content"][0];
        assert_eq!(
            result["is_error"],
            json!(expect_error),
            "{answer}: {result}"
        );
    }
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn config_options_switch_model_and_thinking() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/thinking.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let session = result["sessionId"].as_str().unwrap().to_string();
    let options = result["configOptions"].as_array().unwrap();
    assert_eq!(options[0]["id"], "mode");
    assert_eq!(options[0]["category"], "mode");
    assert_eq!(options[0]["currentValue"], "default");
    assert_eq!(options[1]["id"], "model");
    assert_eq!(options[1]["category"], "model");
    assert_eq!(options[1]["currentValue"], "anthropic/claude-sonnet-4-5");
    assert_eq!(options[2]["id"], "thought_level");
    assert_eq!(options[2]["category"], "thought_level");
    assert_eq!(options[2]["currentValue"], "off");

    let id = acp
        .send(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "anthropic/claude-haiku-4-5"}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    let options = response["result"]["configOptions"].clone();
    assert_eq!(options[1]["currentValue"], "anthropic/claude-haiku-4-5");
    assert_eq!(options.as_array().unwrap().len(), 5);
    assert_eq!(options[3]["id"], "queue");
    assert_eq!(options[3]["currentValue"], "steer");
    // The tests' pincer runs with `PINCER_SANDBOX=off`.
    assert_eq!(options[4]["id"], "sandbox");
    assert_eq!(options[4]["currentValue"], "off");
    let update = updates_of(&before);
    assert_eq!(
        update,
        vec![json!({"sessionUpdate": "config_option_update", "configOptions": options})]
    );

    acp.call(
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thought_level", "value": "high"}),
    )
    .await;
    let id = acp
        .send(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "thought_level", "value": "ludicrous"}),
        )
        .await;
    let (bad, _) = acp.until_response(id).await;
    assert_eq!(bad["error"]["code"], json!(-32602));

    let id = acp.send("session/prompt", prompt(&session, "think")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let body = &mock.requests()[0].body;
    assert_eq!(body["model"], "claude-haiku-4-5");
    assert_eq!(body["thinking"]["type"], "enabled");
    assert_eq!(body["thinking"]["budget_tokens"], json!(16384));
    let kinds: Vec<Value> = coalesce(updates_of(&before))
        .iter()
        .map(|u| u["sessionUpdate"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![
            json!("agent_thought_chunk"),
            json!("agent_message_chunk"),
            json!("usage_update")
        ]
    );
}

#[tokio::test]
async fn images_links_and_embedded_resources_reach_the_model() {
    let sandbox = Sandbox::new();
    let linked = sandbox.write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let uri = format!("file://{}", linked.display());
    let id = acp
        .send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "Explain"},
                {"type": "resource_link", "uri": uri, "name": "lib.rs"},
                {"type": "resource", "resource": {"uri": "file:///tmp/x.md", "text": "# Notes", "mimeType": "text/markdown"}},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
            ]}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let content = &mock.requests()[0].body["messages"][0]["content"];
    let content = normalize(support::without_time_lines(content), &sandbox);
    assert_eq!(
        content,
        json!([
            {"type": "text", "text": "Explain"},
            {"type": "text", "text": "<file uri=\"file://$WORK/src/lib.rs\">\npub fn answer() -> u32 { 42 }\n\n</file>"},
            {"type": "text", "text": "<file uri=\"file:///tmp/x.md\">\n# Notes\n</file>"},
            // The cache breakpoint sits on the time line that closes the message.
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        ])
    );
}

#[tokio::test]
async fn transient_provider_failures_are_retried_and_reported() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "retry_base_delay_ms = 10\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let updates = coalesce(updates_of(&before));
    assert_eq!(updates[0]["sessionUpdate"], "agent_thought_chunk");
    assert!(
        updates[0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("overloaded"),
        "{}",
        updates[0]
    );
    assert_eq!(mock.requests().len(), 2);
    // The transcript keeps the notice, apart from what the model sees.
    let sessions = sandbox.home().join("sessions");
    let dir = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    // The transcript, not the title sidecar beside it.
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .find(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(file.path()).unwrap();
    let notice = text
        .lines()
        .find(|l| l.contains(r#""type":"notice""#))
        .unwrap_or_else(|| panic!("no notice in {text}"));
    assert!(notice.contains("Retrying in"), "{notice}");
}

#[tokio::test]
async fn a_custom_provider_from_the_project_config_needs_no_key() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai/text.sse"));
    sandbox.write(
        ".pincer/config.toml",
        &format!(
            "model = \"local/qwen3-coder\"\n[providers.local]\napi = \"openai-completions\"\nbase_url = \"{}\"\nheaders = {{ \"X-Team\" = \"tools\" }}\n[[providers.local.models]]\nid = \"qwen3-coder\"\ncontext_window = 32768\n",
            mock.openai_url()
        ),
    );
    // No key of any provider in the environment. The project's provider
    // needs the user's trust, which the first prompt asks for.
    let mut acp = Acp::spawn(sandbox.command(&["acp"]));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            assert_eq!(
                params["toolCall"]["title"],
                "Trust this project's configuration"
            );
            json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let usage = updates_of(&before).pop().unwrap();
    assert_eq!(usage["sessionUpdate"], "usage_update");
    assert_eq!(usage["size"], json!(32768));
    let request = &mock.requests()[0];
    assert_eq!(request.body["model"], "qwen3-coder");
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.header("x-team"), Some("tools"));
    assert_eq!(request.body["messages"][0]["role"], "system");
    assert!(request.body.get("max_tokens").is_some());
}

#[tokio::test]
async fn the_model_flag_and_pincer_model_choose_the_model() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    for (flag, env, expected) in [
        (
            Some("anthropic/claude-opus-4-5"),
            Some("anthropic/claude-haiku-4-5"),
            "claude-opus-4-5",
        ),
        (None, Some("anthropic/claude-haiku-4-5"), "claude-haiku-4-5"),
    ] {
        let mut args = vec!["acp"];
        if let Some(flag) = flag {
            args.extend(["--model", flag]);
        }
        let mut cmd = sandbox.command(&args);
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
        if let Some(env) = env {
            cmd.env("PINCER_MODEL", env);
        }
        let mut acp = Acp::spawn(cmd);
        acp.initialize().await;
        let session = acp.new_session(&sandbox.work()).await;
        let id = acp.send("session/prompt", prompt(&session, "hi")).await;
        acp.until_response(id).await;
        assert_eq!(mock.requests().last().unwrap().body["model"], expected);
    }
}

/// The sections of a request's system prompt, by heading.
fn system_sections(body: &Value) -> Vec<String> {
    let system = body["system"][0]["text"].as_str().unwrap();
    system
        .trim_end()
        .split("\n\n# ")
        .map(|s| s.trim_start_matches("# ").to_string())
        .collect()
}

fn section<'a>(sections: &'a [String], heading: &str) -> Option<&'a str> {
    sections
        .iter()
        .find(|s| s.starts_with(&format!("{heading}\n")))
        .map(String::as_str)
}

#[tokio::test]
async fn the_system_prompt_is_assembled_fresh_with_the_project_context_every_prompt() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let agents = sandbox.write("AGENTS.md", "Run `make check` before you finish.\n");
    mock.push(Reply::sse(support::sse::anthropic_text("ok", 100)));
    mock.push(Reply::sse(support::sse::anthropic_text("ok again", 200)));
    let mut acp = Acp::spawn(anthropic(&sandbox, &mock));
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "hi")).await;

    let first = system_sections(&mock.requests()[0].body);
    assert_eq!(
        section(&first, "Project Context"),
        Some(
            format!(
                "Project Context\nThe following project context files have been loaded:\n\n## {}\nRun `make check` before you finish.",
                agents.display()
            )
            .as_str()
        )
    );
    let environment = section(&first, "Environment").unwrap();
    assert!(
        environment.contains(&format!(
            "\n- Current working directory: {}\n",
            sandbox.work().display()
        )),
        "{environment}"
    );
    assert!(
        environment.ends_with("\n- Model: anthropic/claude-sonnet-4-5"),
        "{environment}"
    );
    assert_eq!(section(&first, "Skills"), None);

    // Between prompts the project changes: the next request sees it, and
    // nothing of the old text.
    std::fs::write(&agents, "Use `cargo nextest` for tests.\n").unwrap();
    let skill = sandbox.write(
        ".pincer/skills/release/SKILL.md",
        "---\nname: release\ndescription: Cut a release\n---\nTag and push.\n",
    );
    acp.call("session/prompt", prompt(&session, "again")).await;
    let second = system_sections(&mock.requests()[1].body);
    assert_eq!(
        section(&second, "Project Context"),
        Some(
            format!(
                "Project Context\nThe following project context files have been loaded:\n\n## {}\nUse `cargo nextest` for tests.",
                agents.display()
            )
            .as_str()
        )
    );
    assert_eq!(
        section(&second, "Skills"),
        Some(
            format!(
                "Skills\nUse the read tool to load a skill's file when the task matches its description.\n\n<available_skills>\n  <skill>\n    <name>release</name>\n    <description>Cut a release</description>\n    <location>{}</location>\n  </skill>\n</available_skills>",
                skill.display()
            )
            .as_str()
        )
    );
    let system = mock.requests()[1].body["system"][0]["text"].to_string();
    assert!(!system.contains("make check"), "{system}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}
