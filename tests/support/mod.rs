#![allow(dead_code)]
pub mod acp_client;
pub mod attacker;
pub mod mock_model;
pub mod sse;

use acp_client::{Acp, Sandbox};
use mock_model::MockModel;

/// `pincer acp` in `sandbox` with an Anthropic key, talking to `mock`.
pub fn spawn_anthropic(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

/// The params of a `session/prompt` with one text block.
pub fn prompt(session: &str, text: &str) -> serde_json::Value {
    serde_json::json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// Polls `done` every 20 ms until it holds, failing with `what` after
/// `timeout`: waiting on a condition with a deadline, never a bare sleep.
pub async fn wait_until(what: &str, timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
