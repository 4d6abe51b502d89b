//! Authentication as every ACP client and the ACP Registry see it: the
//! methods `initialize` offers (also to a bare client from an empty home,
//! and in Zed's older `_meta["terminal-auth"]` form), `authenticate` per
//! method, and `logout`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox};

fn spawn(sandbox: &Sandbox, env: &[(&str, &str)]) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Acp::spawn(cmd)
}

#[tokio::test]
async fn a_bare_client_from_an_empty_home_gets_usable_methods_in_both_forms() {
    let sandbox = Sandbox::new();
    // What the ACP Registry's validator sends, from a fresh HOME.
    let mut acp = spawn(&sandbox, &[("TERM", "dumb")]);
    let init = acp
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
                   "clientCapabilities": {"terminal": true, "fs": {"readTextFile": true, "writeTextFile": true},
                                          "_meta": {"terminal_output": true, "terminal-auth": true}}}),
        )
        .await;
    assert_eq!(init["agentCapabilities"]["auth"]["logout"], json!({}));
    let methods = init["authMethods"].as_array().unwrap();
    let agent: Vec<&str> = methods
        .iter()
        .filter(|m| m.get("type").is_none() || m["type"] == "agent")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        agent,
        vec![
            "anthropic-oauth",
            "anthropic-api-key",
            "openai-api-key",
            "gemini-api-key",
            "local-model"
        ]
    );
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_pincer"))
        .canonicalize()
        .unwrap();
    let terminal: Vec<Value> = methods
        .iter()
        .filter(|m| m["type"] == "terminal")
        .map(|m| m["_meta"]["terminal-auth"].clone())
        .collect();
    assert_eq!(terminal.len(), 4, "{methods:?}");
    assert_eq!(
        terminal[0],
        json!({"label": "Log in to Anthropic", "command": binary.display().to_string(),
               "args": ["login", "--provider", "anthropic", "--api-key"], "env": {}})
    );
    // A client with neither form gets no terminal methods, and no _meta.
    let mut plain = spawn(&sandbox, &[]);
    let init = plain.initialize().await;
    let methods = init["authMethods"].as_array().unwrap();
    assert!(!methods.is_empty());
    assert!(
        methods
            .iter()
            .all(|m| m["type"] != "terminal" && m.get("_meta").is_none())
    );
}

#[tokio::test]
async fn authenticate_checks_the_methods_provider_and_logout_forgets_stored_logins() {
    let sandbox = Sandbox::new();
    let mut acp = spawn(&sandbox, &[("OPENAI_API_KEY", "sk-env-openai")]);
    acp.initialize().await;
    // The environment has an OpenAI key, not an Anthropic one.
    acp.call("authenticate", json!({"methodId": "openai-api-key"}))
        .await;
    let id = acp
        .send("authenticate", json!({"methodId": "anthropic-api-key"}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32000, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY"),
        "{response}"
    );
    let id = acp
        .send("authenticate", json!({"methodId": "carrier-pigeon"}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");

    // A stored Anthropic login counts; logout forgets it.
    let dir = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("auth-profiles.json"),
        json!({"version": 1, "profiles": {"anthropic:default": {
            "type": "api_key", "provider": "anthropic", "key": "sk-ant-stored-0000"}}})
        .to_string(),
    )
    .unwrap();
    acp.call("authenticate", json!({"methodId": "anthropic-api-key"}))
        .await;
    let result = acp.call("logout", json!({})).await;
    assert_eq!(result, json!({}));
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("auth-profiles.json")).unwrap())
            .unwrap();
    assert_eq!(stored["profiles"], json!({}));
    let id = acp
        .send("authenticate", json!({"methodId": "anthropic-api-key"}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32000, "{response}");
}
