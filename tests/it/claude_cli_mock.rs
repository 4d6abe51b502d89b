//! The real Claude Code CLI (npm `@anthropic-ai/claude-code`, installed by
//! `.ci/claude-code`) against the mock model, without pincer: proves that
//! the pieces the Claude Code runtime's end-to-end test stands on work.
//! The CLI runs offline in a temp home, calls only the mock and streams the
//! mock's reply back; the mock tells the CLI's side calls from its turns;
//! and over `--input-format stream-json` the CLI tunnels MCP and permission
//! questions to its parent with the model's `tool_use` id.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::claude_code::{StreamJson, claude_command};
use support::mock_model::{CLAUDE_CLI_SIDE_TEXT, MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};

/// Each CLI run's deadline: it starts in about a second, the mock answers
/// at once.
const TIMEOUT: Duration = Duration::from_secs(60);

fn claude(sandbox: &Sandbox, mock: &MockModel, args: &[&str]) -> tokio::process::Command {
    claude_command(
        &mock.anthropic_url(),
        &sandbox.home(),
        &sandbox.work(),
        args,
    )
}

/// Runs `claude -p --output-format stream-json --verbose EXTRA… PROMPT` to
/// its end and returns its `result` line.
async fn print(sandbox: &Sandbox, mock: &MockModel, extra: &[&str], prompt: &str) -> Value {
    let mut args = vec!["-p", "--output-format", "stream-json", "--verbose"];
    args.extend(extra);
    args.push(prompt);
    let run = claude(sandbox, mock, &args).output();
    let out = tokio::time::timeout(TIMEOUT, run)
        .await
        .expect("claude -p timed out")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "claude -p failed ({}): {stdout}\n{stderr}",
        out.status
    );
    let mut lines = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok());
    lines
        .find(|v| v["type"] == "result")
        .unwrap_or_else(|| panic!("no result line:\n{stdout}"))
}

#[tokio::test]
async fn the_real_cli_streams_the_mock_models_answer() {
    let (sandbox, mock) = (Sandbox::new(), MockModel::start().await);
    mock.push(Reply::fixture("anthropic/text.sse"));
    let result = print(&sandbox, &mock, &[], "say hi").await;
    assert_eq!(
        (&result["subtype"], &result["is_error"], &result["result"]),
        (
            &json!("success"),
            &json!(false),
            &json!("Hello from the mock model.")
        ),
        "{result}"
    );
    // With its default tools the CLI adds a `role: "system"` message (the
    // agent types) after the prompt; the mock takes it.
    assert_eq!(mock.violations(), Vec::<String>::new());
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "one model call for the turn");
    let request = &requests[0];
    assert_eq!(
        (request.path.as_str(), request.query.as_deref()),
        ("/v1/messages", Some("beta=true"))
    );
    assert_eq!(request.body["stream"], json!(true));
    assert_eq!(request.header("x-api-key"), Some("pincer-test-dummy-key"));
    // The prompt follows the CLI's own `<system-reminder>` context block.
    let first = &request.body["messages"][0];
    assert_eq!(first["role"], "user");
    assert!(
        first["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("<system-reminder>\n")
    );
    let prompt = json!({"type": "text", "text": "say hi", "cache_control": {"type": "ephemeral"}});
    assert_eq!(first["content"][1], prompt);
}

#[tokio::test]
async fn a_turn_without_tools_is_a_turn_not_a_side_call() {
    let (sandbox, mock) = (Sandbox::new(), MockModel::start().await);
    mock.push(Reply::sse(anthropic_text("no tools here", 20)));
    let result = print(&sandbox, &mock, &["--tools="], "say hi").await;
    assert_eq!(result["result"], "no tools here", "{result}");
    assert_eq!(mock.violations(), Vec::<String>::new());
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["tools"], json!([]));
    assert_eq!(mock.side_requests().len(), 0);
}

/// A CLI call that does not stream is a side call too: 2.1.197 made none
/// in these tests, but its bundled SDK has such calls (`messages.create`
/// with `stream: false`). It gets a plain JSON answer, no queued reply.
#[tokio::test]
async fn a_non_streaming_cli_call_gets_a_plain_json_message() {
    let mock = MockModel::start().await;
    let body = json!({"model": "claude-opus-4-8", "max_tokens": 64, "stream": false,
                      "messages": [{"role": "user", "content": "name this session"}]});
    let url = format!("{}/v1/messages?beta=true", mock.anthropic_url());
    let response = reqwest::Client::new()
        .post(url)
        .header("anthropic-beta", "claude-code-20250219,oauth-2025-04-20");
    let response = response.json(&body).send().await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/json");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["content"],
        json!([{"type": "text", "text": CLAUDE_CLI_SIDE_TEXT}])
    );
    assert_eq!(
        (
            mock.requests().len(),
            mock.side_requests().len(),
            mock.violations().len()
        ),
        (0, 1, 0)
    );
}

#[tokio::test]
async fn the_real_cli_tunnels_mcp_and_permissions_with_the_tool_use_id() {
    let (sandbox, mock) = (Sandbox::new(), MockModel::start().await);
    let id = format!("toolu_{}", uuid::Uuid::new_v4().simple());
    let call = anthropic_tool_call(&id, "mcp__pincer__echo", &json!({"text": "ping"}));
    mock.push(Reply::sse(call));
    mock.push(Reply::sse(anthropic_text("echoed", 30)));
    let mcp = r#"--mcp-config={"mcpServers":{"pincer":{"type":"sdk","name":"pincer"}}}"#;
    let flags = "-p --input-format stream-json --output-format stream-json --verbose \
                 --permission-prompt-tool stdio --tools= --strict-mcp-config";
    let args: Vec<&str> = flags.split_whitespace().chain([mcp]).collect();
    let mut cli = StreamJson::spawn(claude(&sandbox, &mock, &args), TIMEOUT);
    let control = |id: &str, request: Value| json!({"type": "control_request", "request_id": id, "request": request});
    let initialize = json!({"subtype": "initialize", "hooks": null});
    cli.send(control("req_1", initialize)).await;

    let (mut title, mut permission, mut call, mut result) = (None, None, None, None);
    while result.is_none() {
        let message = cli.next().await;
        let request = &message["request"];
        let answer = |response: Value| {
            json!({"type": "control_response", "response": {"subtype": "success",
                   "request_id": message["request_id"], "response": response}})
        };
        match (message["type"].as_str(), request["subtype"].as_str()) {
            // A title first: the CLI's side call, which must not take the
            // turn's queued replies.
            (Some("control_response"), _) if message["response"]["request_id"] == "req_1" => {
                let ask = json!({"subtype": "generate_session_title", "persist": false,
                                 "description": "Echo a word through pincer's MCP tool"});
                cli.send(control("req_title", ask)).await;
            }
            (Some("control_response"), _) if message["response"]["request_id"] == "req_title" => {
                title = Some(message["response"]["response"]["title"].clone());
                let prompt = json!({"type": "user", "message": {"role": "user",
                    "content": [{"type": "text", "text": "call echo"}]}, "parent_tool_use_id": null});
                cli.send(prompt).await;
            }
            (Some("control_request"), Some("can_use_tool")) => {
                permission = Some(request.clone());
                let allow = json!({"behavior": "allow", "updatedInput": request["input"]});
                cli.send(answer(allow)).await;
            }
            (Some("control_request"), Some("mcp_message")) => {
                let rpc = &request["message"];
                if rpc["method"] == "tools/call" {
                    call = Some(rpc["params"].clone());
                }
                let reply = json!({"jsonrpc": "2.0", "id": rpc["id"], "result": echo_server(rpc)});
                cli.send(answer(json!({"mcp_response": reply}))).await;
            }
            (Some("result"), _) => result = Some(message.clone()),
            _ => {}
        }
    }
    let (status, stderr) = cli.finish().await;
    let result = result.unwrap();
    assert!(
        status.success(),
        "the CLI failed ({status}): {result}\n{stderr}"
    );
    let outcome = (&result["is_error"], &result["result"]);
    assert_eq!(outcome, (&json!(false), &json!("echoed")), "{result}");

    // The title came from the mock's side answer, in a call of its own.
    let side_title: Value = serde_json::from_str(CLAUDE_CLI_SIDE_TEXT).unwrap();
    assert_eq!(title, Some(side_title["title"].clone()));
    let side = mock.side_requests();
    assert_eq!(side.len(), 1, "the title call");
    assert!(side[0].body["output_config"]["format"]["schema"]["properties"]["title"].is_object());

    // The tool_use id the mock sent reaches the parent with the permission
    // question and with the MCP call: what pairs pincer's tool executions.
    let permission = permission.expect("no can_use_tool request");
    assert_eq!(
        (&permission["tool_name"], &permission["tool_use_id"]),
        (&json!("mcp__pincer__echo"), &json!(id))
    );
    let call = call.expect("no tools/call");
    assert_eq!(
        (&call["name"], &call["arguments"]),
        (&json!("echo"), &json!({"text": "ping"}))
    );
    assert_eq!(call["_meta"]["claudecode/toolUseId"], json!(id));

    assert_eq!(mock.violations(), Vec::<String>::new());
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "the tool call's turn and the answer's");
    let tools: Vec<&Value> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(
        tools,
        [&json!("mcp__pincer__echo")],
        "--tools= leaves only pincer's tools"
    );
    assert_eq!(
        support::tool_results(&mock, 1),
        [(id, false, "echo:ping".to_string())]
    );
}

/// The result of an MCP server with one tool, `echo`, for the JSON-RPC
/// request `rpc` (notifications get a dummy answer, as the SDK does).
fn echo_server(rpc: &Value) -> Value {
    match rpc["method"].as_str().unwrap() {
        "initialize" => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "pincer", "version": "0"}}),
        "tools/list" => json!({"tools": [{"name": "echo", "description": "Echoes text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
        "tools/call" => {
            let text = rpc["params"]["arguments"]["text"].as_str().unwrap();
            json!({"content": [{"type": "text", "text": format!("echo:{text}")}]})
        }
        _ => json!({}),
    }
}
