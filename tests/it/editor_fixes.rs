//! End-to-end: what users of real ACP clients (CodeCompanion, agent-shell,
//! the SDKs, acpx) hit, each driven through the real binary against the
//! mock model (issue 13, "Fix what users of real clients hit").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, spawn_anthropic};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};

/// Every config option's current value, by id.
fn current_values(options: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for option in options.as_array().unwrap() {
        out.insert(
            option["id"].as_str().unwrap().to_string(),
            option["currentValue"].clone(),
        );
    }
    Value::Object(out)
}

/// Every transcript file under the sandbox's sessions directory.
fn transcripts(sandbox: &Sandbox) -> Vec<std::path::PathBuf> {
    let Ok(dirs) = std::fs::read_dir(sandbox.home().join("sessions")) else {
        return Vec::new();
    };
    dirs.flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect()
}

/// Fix 4: "Messages while busy" is kept on load and resume, like the mode,
/// the model and the thinking level.
#[tokio::test]
async fn the_queue_option_survives_load_and_resume() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    for (option, value) in [("queue", "follow-up"), ("mode", "plan")] {
        acp.call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": option, "value": value}),
        )
        .await;
    }
    acp.call("session/prompt", prompt(&session, "hello")).await;
    drop(acp);

    let expected = json!({
        "mode": "plan",
        "model": "anthropic/claude-sonnet-4-5",
        "thought_level": "off",
        "queue": "follow-up",
        "sandbox": "off",
    });
    for method in ["session/load", "session/resume"] {
        let mut acp = spawn_anthropic(&sandbox, &mock);
        acp.initialize().await;
        let result = acp
            .call(
                method,
                json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
            )
            .await;
        assert_eq!(
            current_values(&result["configOptions"]),
            expected,
            "{method}"
        );
    }
}

/// Fix 5: a session that never got a prompt is not listed; loading it
/// while it is open still works, and the settings chosen before its first
/// prompt hold with that prompt. (Since issue 30 its file is written when
/// it is created, so that another process can resume it, and only
/// `session/delete` removes it at once; see `tests/it/sessions.rs`.)
#[tokio::test]
async fn a_session_without_a_prompt_is_not_listed() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let empty = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_config_option",
        json!({"sessionId": empty, "configId": "mode", "value": "accept-edits"}),
    )
    .await;
    let list = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    assert_eq!(list["sessions"], json!([]));
    assert_eq!(transcripts(&sandbox).len(), 1);

    // An editor that reloads the open, empty session gets it back as it is.
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": empty, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(updates_of(&before), Vec::<Value>::new());
    assert_eq!(response["result"]["modes"]["currentModeId"], "accept-edits");

    // Its first prompt lists it, with the mode chosen before.
    mock.push(Reply::fixture("anthropic/text.sse"));
    acp.call("session/prompt", prompt(&empty, "now it counts"))
        .await;
    let list = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    let listed: Vec<Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| json!([s["sessionId"], s["title"]]))
        .collect();
    assert_eq!(listed, vec![json!([empty, "now it counts"])]);

    // Another never-prompted session, closed, stays resumable; one
    // deleted leaves nothing.
    let other = acp.new_session(&sandbox.work()).await;
    acp.call("session/close", json!({"sessionId": other})).await;
    let never = acp.new_session(&sandbox.work()).await;
    acp.call("session/delete", json!({"sessionId": never}))
        .await;
    drop(acp);
    assert_eq!(
        transcripts(&sandbox).len(),
        2,
        "{:?}",
        transcripts(&sandbox)
    );

    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let result = acp
        .call(
            "session/load",
            json!({"sessionId": empty, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    assert_eq!(result["modes"]["currentModeId"], "accept-edits");
    acp.call(
        "session/load",
        json!({"sessionId": other, "cwd": sandbox.work(), "mcpServers": []}),
    )
    .await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": never, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["data"]["sessionId"], json!(never));
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// What the model was sent in request `index`: each message's role and the
/// texts of its blocks (tool blocks as their type), without cache marks or
/// time lines.
fn conversation(mock: &MockModel, index: usize) -> Vec<(String, Vec<String>)> {
    let body = &mock.requests()[index].body;
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let blocks = match &m["content"] {
                Value::String(text) => vec![text.clone()],
                Value::Array(blocks) => blocks
                    .iter()
                    // The time line that closes each user message.
                    .filter(|b| !support::is_time_line(b))
                    .map(|b| match b["text"].as_str() {
                        Some(text) => text.to_string(),
                        None => b["type"].as_str().unwrap().to_string(),
                    })
                    .collect(),
                other => panic!("unexpected content {other}"),
            };
            (m["role"].as_str().unwrap().to_string(), blocks)
        })
        .collect()
}

/// A replayed user message: its `messageId` is its transcript entry's id.
fn user_chunk(id: &str, text: &str) -> Value {
    json!({"sessionUpdate": "user_message_chunk", "messageId": id, "content": {"type": "text", "text": text}})
}

fn agent_chunk(id: &str, text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "messageId": id, "content": {"type": "text", "text": text}})
}

/// Fix 2: a prompt whose model call failed before any answer is not sent
/// again with the next prompt, and a replay shows both prompts apart, the
/// first with the error that ended it.
#[tokio::test]
async fn a_failed_prompt_is_not_glued_to_the_next_one() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"mock: this request is refused"}}"#,
    ));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", prompt(&session, "What model are you?"))
        .await;
    let (failed, _) = acp.until_response(id).await;
    let error = failed["error"]["message"].as_str().unwrap().to_string();
    assert!(error.contains("mock: this request is refused"), "{failed}");
    acp.call(
        "session/prompt",
        prompt(&session, "What model are you now?"),
    )
    .await;
    assert_eq!(
        conversation(&mock, 1),
        vec![(
            "user".to_string(),
            vec!["What model are you now?".to_string()]
        )]
    );
    drop(acp);

    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(
        support::acp_client::coalesce(updates_of(&before)),
        vec![
            // The error is a message of its own, after the failed (empty)
            // answer e2 (e3 is the turn's checkpoint).
            user_chunk("e1", "What model are you?"),
            agent_chunk("e2-error", &format!("The prompt failed: {error}\n\n")),
            user_chunk("e4", "What model are you now?"),
            agent_chunk("e5", "Hello from the mock model."),
        ]
    );
    // The loaded session goes on without the failed prompt too.
    mock.push(Reply::fixture("anthropic/text.sse"));
    acp.call("session/prompt", prompt(&session, "And now?"))
        .await;
    assert_eq!(
        conversation(&mock, 2),
        vec![
            (
                "user".to_string(),
                vec!["What model are you now?".to_string()]
            ),
            (
                "assistant".to_string(),
                vec!["Hello from the mock model.".to_string()]
            ),
            ("user".to_string(), vec!["And now?".to_string()]),
        ]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// Fix 2, cancelled: a prompt the user stopped before the model said
/// anything is not sent again with the next prompt either (the model would
/// read both as one), and a replay shows the two prompts apart.
#[tokio::test]
async fn a_prompt_cancelled_before_any_answer_is_not_glued_to_the_next_one() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // The stream opens (message_start) and then says nothing.
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 1,
    });
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn_quiet(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", prompt(&session, "Rename the crate"))
        .await;
    mock.wait_for_requests(1, std::time::Duration::from_secs(10))
        .await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (cancelled, _) = acp.until_response(id).await;
    assert_eq!(cancelled["result"], json!({"stopReason": "cancelled"}));
    acp.call("session/prompt", prompt(&session, "No, explain it first"))
        .await;
    assert_eq!(
        conversation(&mock, 1),
        vec![("user".to_string(), vec!["No, explain it first".to_string()])]
    );
    drop(acp);

    let mut acp = spawn_quiet(&sandbox, &mock);
    acp.initialize().await;
    let replayed = load_updates(&mut acp, &session, &sandbox.work()).await;
    assert_eq!(
        support::acp_client::coalesce(replayed),
        vec![
            // e2 is the turn's checkpoint, e3 its cancelled end.
            user_chunk("e1", "Rename the crate"),
            user_chunk("e4", "No, explain it first"),
            agent_chunk("e5", "Hello from the mock model."),
        ]
    );
    mock.push(Reply::fixture("anthropic/text.sse"));
    acp.call("session/prompt", prompt(&session, "Thanks")).await;
    assert_eq!(
        conversation(&mock, 2),
        vec![
            ("user".to_string(), vec!["No, explain it first".to_string()]),
            (
                "assistant".to_string(),
                vec!["Hello from the mock model.".to_string()]
            ),
            ("user".to_string(), vec!["Thanks".to_string()]),
        ]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// `pincer acp` with `config` in its config.toml (title calls off, so the
/// side requests are only the compactions').
fn spawn_quiet(sandbox: &Sandbox, mock: &MockModel) -> support::acp_client::Acp {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    spawn_anthropic(sandbox, mock)
}

async fn load_updates(
    acp: &mut support::acp_client::Acp,
    session: &str,
    cwd: &std::path::Path,
) -> Vec<Value> {
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    support::acp_client::coalesce(updates_of(&before))
}

/// Fix 3: on load, a `/compact` is replayed as the user's message and its
/// result as a message of its own: a `compaction_update` for clients that
/// show them (with an id the live ones after it do not reuse), else the
/// "Context compacted" text.
#[tokio::test]
async fn a_compaction_replays_as_its_own_message_after_the_compact_request() {
    use support::sse::anthropic_text;
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("first answer", 1_000)));
    mock.push(Reply::sse(anthropic_text("second answer", 2_000)));
    mock.push_side(Reply::sse(anthropic_text("## Goal\nAnswer questions", 300)));
    let compaction = json!({"session": {"compaction": {}}});
    let mut acp = spawn_quiet(&sandbox, &mock);
    acp.initialize_with(compaction.clone()).await;
    let session = acp.new_session(&sandbox.work()).await;
    for text in ["first question", "second question"] {
        acp.call("session/prompt", prompt(&session, text)).await;
    }
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/compact keep the names"),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let live: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "compaction_update")
        .collect();
    assert_eq!(live.len(), 2, "{live:?}");
    let summary = live[1]["summary"].clone();
    drop(acp);

    // Each turn ends with its checkpoint (e3, e6).
    let before_compaction = vec![
        user_chunk("e1", "first question"),
        agent_chunk("e2", "first answer"),
        user_chunk("e4", "second question"),
        agent_chunk("e5", "second answer"),
        user_chunk("e7", "/compact keep the names"),
    ];
    // A client that shows compactions.
    let mut acp = spawn_quiet(&sandbox, &mock);
    acp.initialize_with(compaction.clone()).await;
    let mut expected = before_compaction.clone();
    expected.push(json!({
        "sessionUpdate": "compaction_update",
        "compactionId": "compaction-0",
        "status": "completed",
        "summary": summary,
    }));
    assert_eq!(
        load_updates(&mut acp, &session, &sandbox.work()).await,
        expected
    );
    // A later compaction in the loaded session gets a new id.
    mock.push(Reply::sse(anthropic_text("third answer", 3_000)));
    acp.call("session/prompt", prompt(&session, "third question"))
        .await;
    mock.push_side(Reply::sse(anthropic_text("## Goal\nStill answering", 300)));
    let id = acp
        .send("session/prompt", prompt(&session, "/compact"))
        .await;
    let (_, before) = acp.until_response(id).await;
    let ids: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "compaction_update")
        .map(|u| u["compactionId"].clone())
        .collect();
    assert_eq!(ids, vec![json!("compaction-1"), json!("compaction-1")]);
    drop(acp);

    // A client without them: the marker follows the request, on its own.
    let mut acp = spawn_quiet(&sandbox, &mock);
    acp.initialize().await;
    let replayed = load_updates(&mut acp, &session, &sandbox.work()).await;
    let mut expected = before_compaction;
    // Each marker is a message of its own, with the compaction's id.
    let marker = |update: &Value, id: &str| {
        let text = update["content"]["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("Context compacted: "), "{update}");
        agent_chunk(id, text)
    };
    expected.push(marker(&replayed[5], "compaction-0"));
    expected.push(user_chunk("e9", "third question"));
    expected.push(agent_chunk("e10", "third answer"));
    expected.push(user_chunk("e12", "/compact"));
    expected.push(marker(&replayed[9], "compaction-1"));
    assert_eq!(replayed, expected);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// The values the `model` option offers.
fn offered_models(options: &Value) -> Vec<String> {
    let model = options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .unwrap();
    model["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap().to_string())
        .collect()
}

const ANTHROPIC: [&str; 5] = [
    "anthropic/claude-sonnet-4-5",
    "anthropic/claude-opus-4-5",
    "anthropic/claude-haiku-4-5",
    "anthropic/claude-opus-4-1",
    "anthropic/claude-sonnet-4-0",
];

const BEDROCK: [&str; 4] = [
    "amazon-bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "amazon-bedrock/global.anthropic.claude-opus-4-5-20251101-v1:0",
    "amazon-bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0",
    "amazon-bedrock/us.anthropic.claude-sonnet-4-20250514-v1:0",
];

/// The model option of a new session in `sandbox`, pincer started with
/// `env` besides an Anthropic key.
async fn models_with(sandbox: &Sandbox, env: &[(&str, &str)]) -> Vec<String> {
    let mock = MockModel::start().await;
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    for (name, value) in env {
        cmd.env(name, value);
    }
    let mut acp = support::acp_client::Acp::spawn(cmd);
    acp.initialize().await;
    let result = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    offered_models(&result["configOptions"])
}

fn sorted(models: impl IntoIterator<Item = impl Into<String>>) -> Vec<String> {
    let mut models: Vec<String> = models.into_iter().map(Into::into).collect();
    models.sort();
    models
}

/// Fix 1: with only an Anthropic key, no Bedrock model is offered; AWS
/// credentials in the environment or a usable profile in the AWS files
/// (SSO, credential_process) bring them in. Choosing one anyway is refused
/// with what to do, in the editor's terms.
#[tokio::test]
async fn the_model_option_offers_only_models_with_credentials_at_hand() {
    let anthropic_only = sorted(ANTHROPIC);
    let with_bedrock = sorted(ANTHROPIC.iter().chain(BEDROCK.iter()).copied());

    let sandbox = Sandbox::new();
    assert_eq!(sorted(models_with(&sandbox, &[]).await), anthropic_only);
    // A config file with only a region is no credential.
    std::fs::create_dir_all(sandbox.home().join(".aws")).unwrap();
    std::fs::write(
        sandbox.home().join(".aws/config"),
        "[default]\nregion = eu-west-1\n",
    )
    .unwrap();
    assert_eq!(sorted(models_with(&sandbox, &[]).await), anthropic_only);
    // Half a key pair is none either.
    assert_eq!(
        sorted(models_with(&sandbox, &[("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")]).await),
        anthropic_only
    );
    assert_eq!(
        sorted(
            models_with(
                &sandbox,
                &[
                    ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
                    ("AWS_SECRET_ACCESS_KEY", "secret")
                ]
            )
            .await
        ),
        with_bedrock
    );
    assert_eq!(
        sorted(models_with(&sandbox, &[("AWS_BEARER_TOKEN_BEDROCK", "token")]).await),
        with_bedrock
    );
    // Profiles that lead to credentials, found without running or asking
    // anything (the marker would show a credential_process that ran).
    let marker = sandbox.dir.path().join(format!(
        "process-ran-{}",
        sandbox.dir.path().file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(
        sandbox.home().join(".aws/config"),
        format!(
            "[profile sso]\nsso_session = corp\nsso_account_id = 111122223333\nsso_role_name = Dev\n\
             [sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\nsso_region = eu-west-1\n\
             [profile tool]\ncredential_process = touch {}\n",
            marker.display()
        ),
    )
    .unwrap();
    for profile in ["sso", "tool"] {
        assert_eq!(
            sorted(models_with(&sandbox, &[("AWS_PROFILE", profile)]).await),
            with_bedrock,
            "{profile}"
        );
    }
    assert_eq!(
        sorted(models_with(&sandbox, &[("AWS_PROFILE", "missing")]).await),
        anthropic_only
    );
    assert!(!marker.exists());

    // Choosing a Bedrock model by hand is refused with the way out.
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": BEDROCK[0]}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    let message = "No AWS credentials for amazon-bedrock were found. To go on, choose another \
                   model in this session's Model option; or give pincer AWS credentials where the \
                   editor starts it: AWS_BEARER_TOKEN_BEDROCK, AWS_ACCESS_KEY_ID and \
                   AWS_SECRET_ACCESS_KEY, or AWS_PROFILE naming a profile in ~/.aws/config with \
                   keys, SSO or credential_process.";
    assert_eq!(
        response["error"],
        json!({"code": -32602, "message": "Invalid params", "data": {"message": message}})
    );
}

/// Fix 1: a rejected key, inside an editor, points at the session's Model
/// option, not at `--model`, `PINCER_MODEL` or a restart.
#[tokio::test]
async fn an_auth_error_in_an_editor_names_the_model_option() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(
        401,
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, _) = acp.until_response(id).await;
    let message = "anthropic rejected the credentials: invalid x-api-key. anthropic rejected the \
                   key in the ANTHROPIC_API_KEY environment variable (credential \
                   env:ANTHROPIC_API_KEY). To go on, choose another model in this session's Model \
                   option; or put a valid key in ANTHROPIC_API_KEY where the editor starts pincer \
                   (for Zed, under \"env\" in the agent_servers entry).";
    assert_eq!(
        response["error"],
        json!({"code": -32000, "message": message, "data": {"message": message}})
    );
}
