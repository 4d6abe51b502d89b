#![allow(dead_code)]
pub mod acp_client;
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
