//! End-to-end through an independent ACP client: the official Python SDK
//! (`agent-client-protocol` on PyPI, pinned in `tests/clients/requirements.txt`)
//! drives the real `pincer acp` binary against the mock model.
//!
//! Our own harness in `support::acp_client` shares pincer's idea of the wire
//! format; this test checks that another implementation reads it the same
//! way. The SDK lives in a virtualenv under the target directory, created on
//! first use and reused while the requirements file is unchanged, so the test
//! needs only `python3` (with `venv`) and a package index the first time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};
use support::python_sdk::{ensure_venv, run_client};

#[tokio::test]
async fn python_sdk_client_runs_a_tool_round_trip() {
    let python = tokio::task::spawn_blocking(ensure_venv)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));

    let agent = [env!("CARGO_BIN_EXE_pincer").to_string(), "acp".to_string()];
    let env = [
        ("ANTHROPIC_API_KEY", "test-key".to_string()),
        ("ANTHROPIC_BASE_URL", mock.anthropic_url()),
    ];
    let (result, stderr) = run_client(&python, &sandbox, &agent, &env).await;

    assert_eq!(
        result,
        support::python_sdk::direct_tool_round_trip(),
        "--- client stderr ---\n{stderr}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    assert_eq!(mock.requests().len(), 2);
}

/// The same independent client, as an editor on another machine: it runs
/// `pincer acp --connect` against a real `pincer gateway`, whose machine
/// has the file; the SDK must read everything the bridge says.
#[tokio::test]
async fn python_sdk_client_runs_a_tool_round_trip_through_the_bridge() {
    let python = tokio::task::spawn_blocking(ensure_venv)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let (server, editor) = (Sandbox::new(), Sandbox::new());
    server.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let gateway = support::gateway::Gateway::start(&server, &mock).await;
    let token_file = editor.dir.path().join("gateway-token");
    std::fs::write(&token_file, gateway.token.clone().unwrap()).unwrap();
    let agent = [
        env!("CARGO_BIN_EXE_pincer").to_string(),
        "acp".to_string(),
        "--connect".to_string(),
        gateway.url(),
        "--token-file".to_string(),
        token_file.display().to_string(),
        "--protocol".to_string(),
        "openclaw".to_string(),
    ];
    let (result, stderr) = run_client(&python, &editor, &agent, &[]).await;
    assert_eq!(
        result,
        json!({
            "protocolVersion": 1,
            "agentName": "pincer",
            "stopReason": "end_turn",
            "updates": [
                "session_info_update",
                "agent_message_chunk",
                "tool_call",
                "tool_call_update",
                "agent_message_chunk",
                "session_info_update",
            ],
            "toolCalls": [{
                "id": "toolu_01",
                "title": "Read hello.txt",
                "kind": "read",
                "status": "completed",
            }],
            "permissionRequests": [],
            // The bridge's text is the run's: turns joined by a blank line.
            "text": "I'll read the file.\n\nThe file says hello.",
            "sdkComplaints": [],
            "lossyFields": [],
        }),
        "--- client stderr ---\n{stderr}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    assert_eq!(mock.requests().len(), 2);
}
