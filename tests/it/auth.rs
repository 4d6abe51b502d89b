//! End-to-end: auth profiles and failover over ACP, with the real binary
//! and the mock model server — credentials rotate on 401 and 429, a
//! provider that is down hands over to a fallback model, the user sees each
//! switch, and no secret leaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::prompt;

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

/// Writes `profiles` as the main agent's auth-profiles.json.
fn write_profiles_json(sandbox: &Sandbox, profiles: &Value) {
    let dir = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("auth-profiles.json"), profiles.to_string()).unwrap();
}

fn read_profiles(sandbox: &Sandbox) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(sandbox.home().join("agents/main/auth-profiles.json")).unwrap(),
    )
    .unwrap()
}

/// Every transcript of the sandbox, concatenated.
fn all_transcripts(sandbox: &Sandbox) -> String {
    let mut text = String::new();
    for dir in std::fs::read_dir(sandbox.home().join("sessions")).unwrap() {
        for file in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            text.push_str(&std::fs::read_to_string(file.unwrap().path()).unwrap());
        }
    }
    text
}

/// Ends `acp` and checks that none of `secrets` is in its log, on its
/// stdout (`messages`) or in any transcript.
async fn assert_no_secrets(sandbox: &Sandbox, mut acp: Acp, messages: &[Value], secrets: &[&str]) {
    acp.close_stdin();
    acp.wait_exit().await;
    let stderr = acp.stderr.await.unwrap();
    let stdout: String = messages.iter().map(Value::to_string).collect();
    let transcripts = all_transcripts(sandbox);
    for secret in secrets {
        assert!(!stderr.contains(secret), "{secret} in the log:\n{stderr}");
        assert!(!stdout.contains(secret), "{secret} on stdout:\n{stdout}");
        assert!(!transcripts.contains(secret), "{secret} in a transcript");
    }
}

fn spawn(sandbox: &Sandbox, mock: &MockModel, config: &str, env: &[(&str, &str)]) -> Acp {
    // No retries unless the test asks for them.
    let retries = if config.contains("max_retries") {
        ""
    } else {
        "max_retries = 0\n"
    };
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("title_model = \"none\"\n{retries}{config}"),
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
        .flatten()
        .find(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
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
    assert_no_secrets(
        &sandbox,
        acp,
        &before,
        &["sk-ant-env-key-000000", "sk-openai-env-key-0000"],
    )
    .await;
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
    let terminal: Vec<(&Value, &Value)> = methods
        .iter()
        .filter(|m| m["type"] == "terminal")
        .map(|m| (&m["id"], &m["args"]))
        .collect();
    let login = |provider: &str, how: &str| json!(["login", "--provider", provider, how]);
    assert_eq!(
        terminal,
        [
            (&json!("anthropic-login"), &login("anthropic", "--api-key")),
            (
                &json!("anthropic-oauth-login"),
                &login("anthropic", "--oauth")
            ),
            (&json!("openai-login"), &login("openai", "--api-key")),
            (&json!("google-login"), &login("google", "--api-key")),
        ],
        "{methods:?}"
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

/// 2100-01-01T00:00:00Z and a day later, in milliseconds.
const YEAR_2100: u64 = 4_102_444_800_000;
const DAY: u64 = 86_400_000;

fn two_cooling_profiles(sandbox: &Sandbox, first_until: u64, second: Value) {
    write_profiles_json(
        sandbox,
        &json!({
            "version": 1,
            "profiles": {
                "anthropic:first": {"type": "api_key", "provider": "anthropic", "key": KEYS[0]},
                "anthropic:second": {"type": "api_key", "provider": "anthropic", "key": KEYS[1]},
            },
            "usageStats": {
                "anthropic:first": {"lastUsed": 0, "cooldownUntil": first_until, "errorCount": 3},
                "anthropic:second": second,
            },
        }),
    );
}

fn failover_notices(messages: &[Value]) -> String {
    thoughts(messages)
}

#[tokio::test]
async fn profiles_in_cooldown_are_skipped_for_the_fallback_model() {
    let sandbox = Sandbox::new();
    two_cooling_profiles(
        &sandbox,
        YEAR_2100,
        json!({"lastUsed": 0, "cooldownUntil": 0, "errorCount": 0,
               "disabledUntil": YEAR_2100 + DAY, "disabledReason": "billing"}),
    );
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai/text.sse"));
    let openai_key = "sk-openai-fallback-key-0000";
    let mut acp = spawn(
        &sandbox,
        &mock,
        "model = \"anthropic/claude-sonnet-4-5\"\nfallbacks = [\"openai/gpt-5-mini\"]\n",
        &[("OPENAI_API_KEY", openai_key)],
    );
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The cooling keys were never sent; the fallback answered.
    let sent: Vec<(String, Option<String>)> = mock
        .requests()
        .iter()
        .map(|r| (r.path.clone(), r.header("authorization").map(String::from)))
        .collect();
    assert_eq!(
        sent,
        [(
            "/v1/chat/completions".to_string(),
            Some(format!("Bearer {openai_key}"))
        )]
    );
    assert_eq!(
        failover_notices(&before),
        "anthropic/claude-sonnet-4-5 skipped (anthropic:first cooling down until 2100-01-01T00:00:00Z, \
         anthropic:second disabled (billing) until 2100-01-02T00:00:00Z); \
         trying openai/gpt-5-mini (env:OPENAI_API_KEY).\n"
    );
    let answers = assistant_entries(&transcript(&sandbox));
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0]["auth_profile"], "env:OPENAI_API_KEY");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_no_secrets(&sandbox, acp, &before, &[KEYS[0], KEYS[1], openai_key]).await;
}

#[tokio::test]
async fn with_nothing_else_to_try_the_profile_whose_cooldown_ends_first_is_tried() {
    let sandbox = Sandbox::new();
    two_cooling_profiles(
        &sandbox,
        YEAR_2100 + DAY,
        json!({"lastUsed": 0, "cooldownUntil": YEAR_2100, "errorCount": 1}),
    );
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(
        &sandbox,
        &mock,
        "model = \"anthropic/claude-sonnet-4-5\"\n",
        &[],
    );
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
    assert_eq!(keys, [KEYS[1]]);
    assert_eq!(
        failover_notices(&before),
        "anthropic/claude-sonnet-4-5 skipped (anthropic:second cooling down until 2100-01-01T00:00:00Z, \
         anthropic:first cooling down until 2100-01-02T00:00:00Z); \
         nothing else is left to try, so trying anthropic/claude-sonnet-4-5 (anthropic:second) anyway.\n"
    );
    // It worked, so its cooldown is over.
    assert_eq!(
        read_profiles(&sandbox)["usageStats"]["anthropic:second"]["cooldownUntil"],
        0
    );
    assert_no_secrets(&sandbox, acp, &before, &KEYS).await;
}

#[tokio::test]
async fn a_session_stays_on_its_profile_and_a_new_session_rotates() {
    let sandbox = Sandbox::new();
    // Two ready keys and no configured order: least recently used first.
    write_profiles_json(
        &sandbox,
        &json!({
            "version": 1,
            "profiles": {
                "anthropic:alpha": {"type": "api_key", "provider": "anthropic", "key": KEYS[0]},
                "anthropic:beta": {"type": "api_key", "provider": "anthropic", "key": KEYS[1]},
            },
        }),
    );
    let mock = MockModel::start().await;
    for _ in 0..3 {
        mock.push(Reply::fixture("anthropic/text.sse"));
    }
    let mut acp = spawn(&sandbox, &mock, "", &[]);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "one")).await;
    let stats = read_profiles(&sandbox)["usageStats"].clone();
    assert!(
        stats["anthropic:alpha"]["lastUsed"].as_u64().unwrap() > 0,
        "{stats}"
    );
    assert_eq!(stats.get("anthropic:beta"), None, "{stats}");
    // beta is now the least recently used, but the session keeps alpha.
    acp.call("session/prompt", prompt(&session, "two")).await;
    // A new session is not pinned: round-robin gives it beta.
    let other = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&other, "three")).await;
    let keys: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.header("x-api-key").unwrap().to_string())
        .collect();
    assert_eq!(keys, [KEYS[0], KEYS[0], KEYS[1]]);
}

fn rate_limited_for_two_hours() -> Reply {
    Reply::Status {
        status: 429,
        body: r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}"#.to_string(),
        headers: vec![("retry-after".to_string(), "7200".to_string())],
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_wait_cap_cools_the_profile_that_long_and_moves_on() {
    // Two profiles: the throttled one cools down for the two hours the
    // provider asked for, and the other answers at once.
    let sandbox = Sandbox::new();
    write_profiles(&sandbox);
    let mock = MockModel::start().await;
    mock.push(rate_limited_for_two_hours());
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(&sandbox, &mock, "max_retries = 3\n", &[]);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        failover_notices(&before),
        "anthropic/claude-sonnet-4-5 (anthropic:first) failed (anthropic rate limit: Number of requests \
         has exceeded your rate limit (the provider asks to retry in 2h)); \
         trying anthropic/claude-sonnet-4-5 (anthropic:second).\n"
    );
    let stats = read_profiles(&sandbox)["usageStats"]["anthropic:first"].clone();
    let cooldown =
        stats["cooldownUntil"].as_u64().unwrap() - stats["lastFailure"].as_u64().unwrap();
    assert_eq!(cooldown, 7_200_000);

    // One profile and no fallback: no retry in a minute, no two-hour
    // wait; the user is told when to try again.
    let sandbox = Sandbox::new();
    write_profiles_json(
        &sandbox,
        &json!({"version": 1, "profiles": {
            "anthropic:only": {"type": "api_key", "provider": "anthropic", "key": KEYS[0]}}}),
    );
    let mock = MockModel::start().await;
    mock.push(rate_limited_for_two_hours());
    let mut acp = spawn(&sandbox, &mock, "max_retries = 3\n", &[]);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(mock.requests().len(), 1);
    let answers = assistant_entries(&transcript(&sandbox));
    assert_eq!(
        answers[0]["error_message"],
        "anthropic rate limit: Number of requests has exceeded your rate limit (the provider asks to retry in 2h)",
        "{response}"
    );
}

#[tokio::test]
async fn provider_errors_quoting_a_key_are_redacted_in_notices_logs_and_transcripts() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-proj-abc*****************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    ));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let openai_key = "sk-proj-abcdefghijklmnopqrstuvwxyz";
    let anthropic_key = "sk-ant-fallback-key-0000";
    let mut acp = spawn(
        &sandbox,
        &mock,
        "model = \"openai/gpt-5-mini\"\nfallbacks = [\"anthropic/claude-sonnet-4-5\"]\n",
        &[
            ("OPENAI_API_KEY", openai_key),
            ("ANTHROPIC_API_KEY", anthropic_key),
        ],
    );
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        failover_notices(&before),
        "openai/gpt-5-mini (env:OPENAI_API_KEY) failed (openai rejected the credentials: Incorrect API key \
         provided: <redacted>. You can find your API key at https://platform.openai.com/account/api-keys.); \
         trying anthropic/claude-sonnet-4-5 (env:ANTHROPIC_API_KEY).\n"
    );
    assert_no_secrets(
        &sandbox,
        acp,
        &before,
        &[openai_key, anthropic_key, "sk-proj-abc", "*wxyz"],
    )
    .await;
}

#[test]
fn login_without_enough_flags_and_no_terminal_explains_the_flags() {
    let sandbox = Sandbox::new();
    for args in [
        &["login"][..],
        &["login", "--provider", "anthropic"],
        &["login", "--oauth"],
    ] {
        let (code, out, err) = pincer(&sandbox, args, "");
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(
            err,
            "pincer: pincer login needs to know what to store, and stdin is not a terminal to ask on. Use:\n  \
             pincer login --provider <name> --api-key    a key read from stdin (profile <provider>:default)\n  \
             pincer login --provider <name> --oauth      the provider's login page (profile <provider>:oauth)\n  \
             --profile <id>                              another profile id\n\
             Providers: amazon-bedrock, anthropic, google, ollama, openai, openrouter\n",
            "{args:?}"
        );
    }
    // The help says what the code does.
    let (_, help, _) = pincer(&sandbox, &["login", "--help"], "");
    assert!(
        help.contains(
            "default `<provider>:default` for an API key, `<provider>:oauth` for an OAuth login"
        ),
        "{help}"
    );
}
