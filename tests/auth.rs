//! End-to-end: auth profiles and failover over ACP, with the real binary
//! and the mock model server — credentials rotate on 401 and 429, a
//! provider that is down hands over to a fallback model, the user sees each
//! switch, and no secret leaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};

const KEYS: [&str; 3] = [
    "sk-ant-first-0000000000",
    "sk-ant-second-000000000",
    "sk-ant-third-0000000000",
];

fn write_profiles(sandbox: &Sandbox) {
    let dir = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&dir).unwrap();
    let profiles = json!({
        "version": 1,
        "profiles": {
            "anthropic:first": {"type": "api_key", "provider": "anthropic", "key": KEYS[0]},
            "anthropic:second": {"type": "api_key", "provider": "anthropic", "key": KEYS[1]},
            "anthropic:third": {"type": "api_key", "provider": "anthropic", "key": KEYS[2]},
        },
        "order": {"anthropic": ["anthropic:first", "anthropic:second", "anthropic:third"]},
    });
    std::fs::write(dir.join("auth-profiles.json"), profiles.to_string()).unwrap();
}

fn spawn(sandbox: &Sandbox, mock: &MockModel, config: &str, env: &[(&str, &str)]) -> Acp {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("title_model = \"none\"\nmax_retries = 0\n{config}"),
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("OPENAI_BASE_URL", mock.openai_url())
        .env("RUST_LOG", "debug");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Acp::spawn(cmd)
}

fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

fn thoughts(messages: &[Value]) -> String {
    updates_of(messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_thought_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

fn transcript(sandbox: &Sandbox) -> String {
    let dir = std::fs::read_dir(sandbox.home().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    std::fs::read_to_string(file.path()).unwrap()
}

fn assistant_entries(transcript: &str) -> Vec<Value> {
    transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["message"]["role"] == "assistant")
        .map(|e| e["message"].clone())
        .collect()
}

#[tokio::test]
async fn profiles_rotate_on_401_and_429_and_the_session_stays_on_the_one_that_worked() {
    let sandbox = Sandbox::new();
    write_profiles(&sandbox);
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    mock.push(Reply::status(
        429,
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#,
    ));
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(&sandbox, &mock, "", &[]);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let keys: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.header("x-api-key").unwrap().to_string())
        .collect();
    assert_eq!(keys, KEYS);
    // The user saw both switches.
    let seen = thoughts(&before);
    assert!(
        seen.contains("(anthropic:first) failed")
            && seen.contains("trying anthropic/claude-sonnet-4-5 (anthropic:second)")
            && seen.contains("trying anthropic/claude-sonnet-4-5 (anthropic:third)"),
        "{seen}"
    );
    // The next turn stays on the profile that worked.
    acp.call("session/prompt", prompt(&session, "again")).await;
    assert_eq!(mock.requests()[3].header("x-api-key").unwrap(), KEYS[2]);
    // Cooldowns are in the shared file.
    let profiles: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.home().join("agents/main/auth-profiles.json")).unwrap(),
    )
    .unwrap();
    let stats = &profiles["usageStats"];
    assert!(stats["anthropic:first"]["cooldownUntil"].as_u64().unwrap() > 0);
    assert_eq!(stats["anthropic:second"]["errorCount"], 1);
    assert!(stats["anthropic:third"]["lastUsed"].as_u64().unwrap() > 0);
    // The transcript says who answered.
    let text = transcript(&sandbox);
    let answers = assistant_entries(&text);
    assert_eq!(answers.len(), 2);
    assert!(
        answers
            .iter()
            .all(|a| a["auth_profile"] == "anthropic:third")
    );
    // No key anywhere: not in the transcript, not on stdout, not in logs.
    acp.close_stdin();
    acp.wait_exit().await;
    let stderr = acp.stderr.await.unwrap();
    let stdout: String = before.iter().map(Value::to_string).collect();
    for key in KEYS {
        assert!(!text.contains(key), "{key} in the transcript");
        assert!(!stdout.contains(key), "{key} on stdout");
        assert!(!stderr.contains(key), "{key} in the log");
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn a_provider_that_is_down_hands_over_to_the_fallback_model() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    mock.push(Reply::fixture("openai/text.sse"));
    let mut acp = spawn(
        &sandbox,
        &mock,
        "fallbacks = [\"openai/gpt-5-mini\"]\n",
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-env-key-000000"),
            ("OPENAI_API_KEY", "sk-openai-env-key-0000"),
        ],
    );
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].path, "/v1/chat/completions");
    assert_eq!(requests[1].body["model"], "gpt-5-mini");
    let seen = thoughts(&before);
    assert!(
        seen.contains("anthropic/claude-sonnet-4-5 (env:ANTHROPIC_API_KEY) failed")
            && seen.contains("trying openai/gpt-5-mini (env:OPENAI_API_KEY)"),
        "{seen}"
    );
    let answers = assistant_entries(&transcript(&sandbox));
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["provider"], "openai");
    assert_eq!(answers[0]["model"], "gpt-5-mini");
    assert_eq!(answers[0]["auth_profile"], "env:OPENAI_API_KEY");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// Runs a `pincer` subcommand with `stdin`; returns (exit code, stdout, stderr).
fn pincer(sandbox: &Sandbox, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut cmd = sandbox.command(args).into_std();
    cmd.env("ANTHROPIC_API_KEY", "sk-ant-env-visible-000");
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn login_list_and_logout_keep_keys_private() {
    let sandbox = Sandbox::new();
    let secret = "sk-ant-stored-key-1234567";
    let (code, out, err) = pincer(
        &sandbox,
        &[
            "login",
            "--provider",
            "anthropic",
            "--api-key",
            "--profile",
            "anthropic:work",
        ],
        &format!("{secret}\n"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Saved anthropic:work"), "{out}");
    let path = sandbox.home().join("agents/main/auth-profiles.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(std::fs::read_to_string(&path).unwrap().contains(secret));

    let (code, out, _) = pincer(&sandbox, &["auth", "list", "--json"], "");
    assert_eq!(code, 0);
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["id"], "anthropic:work");
    assert_eq!(rows[0]["kind"], "api_key");
    assert_eq!(rows[0]["state"], "ready");
    assert_eq!(rows[1]["id"], "env:ANTHROPIC_API_KEY");
    let (_, text, _) = pincer(&sandbox, &["auth", "list"], "");
    for output in [&out, &text] {
        assert!(
            !output.contains(secret) && !output.contains("sk-ant-env-visible"),
            "{output}"
        );
    }
    // An unknown provider and an empty stdin are refused.
    let (code, _, err) = pincer(&sandbox, &["login", "--provider", "nope", "--api-key"], "k");
    assert_eq!(code, 1);
    assert!(err.contains("unknown provider `nope`"), "{err}");
    let (code, _, err) = pincer(
        &sandbox,
        &["login", "--provider", "openai", "--api-key"],
        "",
    );
    assert_eq!(code, 1);
    assert!(err.contains("no key on stdin"), "{err}");

    let (code, _, _) = pincer(&sandbox, &["logout", "anthropic:work"], "");
    assert_eq!(code, 0);
    assert!(!std::fs::read_to_string(&path).unwrap().contains(secret));
    let (code, _, err) = pincer(&sandbox, &["logout", "anthropic:work"], "");
    assert_eq!(code, 1);
    assert!(err.contains("no profile anthropic:work"), "{err}");
}

#[tokio::test]
async fn terminal_login_is_offered_to_capable_clients_and_authenticate_rereads_profiles() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock, "", &[]);
    let init = acp
        .call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}),
        )
        .await;
    let methods = init["authMethods"].as_array().unwrap();
    let terminal: Vec<&Value> = methods.iter().filter(|m| m["type"] == "terminal").collect();
    assert_eq!(terminal.len(), 3, "{methods:?}");
    assert_eq!(terminal[0]["id"], "anthropic-login");
    assert_eq!(
        terminal[0]["args"],
        json!(["login", "--provider", "anthropic", "--api-key"])
    );
    // No key yet: authenticate says what to do.
    let id = acp
        .send("authenticate", json!({"methodId": "anthropic-login"}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32000, "{response}");
    // What the terminal login does, then authenticate finds the profile.
    let (code, _, err) = pincer(
        &sandbox,
        &["login", "--provider", "anthropic", "--api-key"],
        "sk-ant-from-terminal-000\n",
    );
    assert_eq!(code, 0, "{err}");
    acp.call("authenticate", json!({"methodId": "anthropic-login"}))
        .await;
    // A client without terminal support gets only the other methods.
    let mut plain = spawn(&sandbox, &mock, "", &[]);
    let init = plain.initialize().await;
    assert!(
        init["authMethods"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["type"] != "terminal")
    );
}

#[tokio::test]
async fn model_at_profile_pins_the_session_to_that_profile() {
    let sandbox = Sandbox::new();
    write_profiles(&sandbox);
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(&sandbox, &mock, "", &[]);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(
                &session,
                "/model anthropic/claude-haiku-4-5@anthropic:second",
            ),
        )
        .await;
    let (_, before) = acp.until_response(id).await;
    let said: String = updates_of(&before)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(said.contains("Using profile anthropic:second"), "{said}");
    acp.call("session/prompt", prompt(&session, "hi")).await;
    let request = &mock.requests()[0];
    assert_eq!(request.header("x-api-key"), Some(KEYS[1]));
    assert_eq!(request.body["model"], "claude-haiku-4-5");
    // A profile that does not exist is refused with a pointer.
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/model anthropic/claude-haiku-4-5@anthropic:nope"),
        )
        .await;
    let (_, before) = acp.until_response(id).await;
    let said: String = updates_of(&before)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect();
    assert!(said.contains("no profile anthropic:nope"), "{said}");
}
