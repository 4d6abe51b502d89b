//! End-to-end: the real `pincer acp` binary driven as an editor drives it,
//! against the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, coalesce, updates_of};
use support::mock_model::{MockModel, Reply, fixture};

fn anthropic(sandbox: &Sandbox, mock: &MockModel) -> tokio::process::Command {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    cmd
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
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "What does hello.txt say?"}]}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    for m in &before {
        assert_eq!(m["params"]["sessionId"], json!(session));
    }
    let updates = coalesce(updates_of(&before));
    println!("{}", serde_json::to_string_pretty(&updates).unwrap());
    assert_eq!(mock.violations(), Vec::<String>::new());
}
