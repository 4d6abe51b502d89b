//! End-to-end: a prompt over ACP answered through each of the newer wire
//! formats — OpenAI Responses, Gemini, Bedrock ConverseStream — by the mock
//! model server with recorded-format fixtures. (Each format's parsing and
//! error mapping is tested next to its code; this checks the wiring: the
//! endpoint, the credentials, the framing.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};

async fn answer(sandbox: &Sandbox, mock: &MockModel, env: &[(&str, &str)], config: &str) -> String {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("title_model = \"none\"\n{config}"),
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut acp = Acp::spawn(cmd);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    updates_of(&before)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| {
            u["content"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn openai_responses_answers_through_the_responses_endpoint() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai_responses/text.sse"));
    let url = mock.openai_url();
    let text = answer(
        &sandbox,
        &mock,
        &[("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &url)],
        "model = \"openai/gpt-5-mini\"\n[providers.openai]\napi = \"openai-responses\"\n",
    )
    .await;
    assert_eq!(text, "Hello from the mock model.");
    let request = &mock.requests()[0];
    assert_eq!(request.path, "/v1/responses");
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.body["model"], "gpt-5-mini");
    assert_eq!(request.body["stream"], true);
    assert_eq!(request.body["store"], false);
}

#[tokio::test]
async fn gemini_answers_through_stream_generate_content() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("google/text.sse"));
    let base = format!("http://{}/v1beta", mock.addr);
    let text = answer(
        &sandbox,
        &mock,
        &[
            ("GEMINI_API_KEY", "gm-test"),
            ("GEMINI_BASE_URL", &base),
            ("PINCER_MODEL", "google/gemini-2.5-flash"),
        ],
        "",
    )
    .await;
    assert_eq!(text, "Hello from the mock model.");
    let request = &mock.requests()[0];
    assert_eq!(
        request.path,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    );
    assert_eq!(request.header("x-goog-api-key"), Some("gm-test"));
    assert!(request.body["contents"].is_array(), "{}", request.body);
}

#[tokio::test]
async fn bedrock_answers_a_sigv4_signed_request_with_an_event_stream() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/bedrock/text.bin"
    ))
    .unwrap();
    mock.push(Reply::Bytes {
        body,
        content_type: "application/vnd.amazon.eventstream".to_string(),
        chunk: 7,
    });
    let endpoint = format!("http://{}", mock.addr);
    let text = answer(
        &sandbox,
        &mock,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint),
            (
                "PINCER_MODEL",
                "amazon-bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0",
            ),
        ],
        "",
    )
    .await;
    assert!(text.starts_with("Hello from Bedrock"), "{text}");
    let request = &mock.requests()[0];
    assert_eq!(
        request.path,
        "/model/global.anthropic.claude-haiku-4-5-20251001-v1%3A0/converse-stream"
    );
    let authorization = request.header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
            && authorization.contains("/eu-west-1/bedrock/aws4_request")
            && authorization.contains("SignedHeaders=host;x-amz-date"),
        "{authorization}"
    );
    assert!(request.header("x-amz-date").is_some());
    let messages: &Value = &request.body["messages"];
    assert_eq!(messages[0]["content"][0]["text"], "hi");
}

#[cfg(unix)]
#[tokio::test]
async fn bedrock_signs_with_credentials_from_a_credential_process() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/bedrock/text.bin"
    ))
    .unwrap();
    mock.push(Reply::Bytes {
        body,
        content_type: "application/vnd.amazon.eventstream".to_string(),
        chunk: 7,
    });
    let aws = sandbox.home().join(".aws");
    std::fs::create_dir_all(&aws).unwrap();
    let script = aws.join("creds.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat <<'JSON'\n{\"Version\": 1, \"AccessKeyId\": \"ASIAPROCESS\", \
         \"SecretAccessKey\": \"process-secret\", \"SessionToken\": \"process-token\", \
         \"Expiration\": \"2999-01-01T00:00:00Z\"}\nJSON\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        aws.join("config"),
        format!(
            "[profile tool]\nregion = ap-northeast-1\ncredential_process = {}\n",
            script.display()
        ),
    )
    .unwrap();
    let endpoint = format!("http://{}", mock.addr);
    let text = answer(
        &sandbox,
        &mock,
        &[
            ("AWS_PROFILE", "tool"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint),
            (
                "PINCER_MODEL",
                "amazon-bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0",
            ),
        ],
        "",
    )
    .await;
    assert!(text.starts_with("Hello from Bedrock"), "{text}");
    let request = &mock.requests()[0];
    let authorization = request.header("authorization").unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=ASIAPROCESS/")
            && authorization.contains("/ap-northeast-1/bedrock/aws4_request")
            && authorization.contains("SignedHeaders=host;x-amz-date;x-amz-security-token"),
        "{authorization}"
    );
    assert_eq!(
        request.header("x-amz-security-token"),
        Some("process-token")
    );
}

/// The head of the Anthropic text answer up to (`with_delta`: and
/// including) its first text delta, as separate events.
fn anthropic_head(with_delta: bool) -> String {
    let full = support::mock_model::fixture("anthropic/text.sse");
    let first_delta = full.find("event: content_block_delta").unwrap();
    let end = if with_delta {
        first_delta + full[first_delta..].find("\n\n").unwrap() + 2
    } else {
        first_delta
    };
    full[..end].to_string()
}

/// The four ways a stream breaks in the middle, after `head`: (what it
/// is, the reply, what the error names).
fn broken_streams(head: &str) -> Vec<(&'static str, Reply, &'static str)> {
    let events = head.matches("\n\n").count();
    vec![
        (
            "a connection reset",
            Reply::Reset {
                body: head.to_string(),
                events,
            },
            "error decoding response body",
        ),
        (
            "a clean close before the final event",
            Reply::sse(head),
            "the stream ended before the final event",
        ),
        (
            "a malformed event line",
            Reply::sse(format!(
                "{head}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\n\n"
            )),
            "anthropic sent a malformed stream",
        ),
        (
            "an overloaded error event",
            Reply::sse(format!(
                "{head}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n"
            )),
            "anthropic is overloaded: Overloaded",
        ),
    ]
}

/// Runs one prompt against `mock` over ACP; the prompt's response, the
/// agent's text and the thought chunks (notices) it showed.
async fn prompt_once(sandbox: &Sandbox, mock: &MockModel) -> (Value, String, String) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\nretry_base_delay_ms = 1\n",
    )
    .unwrap();
    let mut acp = support::spawn_anthropic(sandbox, mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", support::prompt(&session, "hi"))
        .await;
    let (response, before) = acp.until_response(id).await;
    let updates = updates_of(&before);
    let chunks = |kind: &str| -> String {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .filter_map(|u| u["content"]["text"].as_str())
            .collect()
    };
    let text = chunks("agent_message_chunk");
    let thoughts = chunks("agent_thought_chunk");
    (response, text, thoughts)
}

#[tokio::test]
async fn a_stream_that_breaks_before_anything_was_shown_is_retried() {
    for (what, reply, cause) in broken_streams(&anthropic_head(false)) {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        mock.push(reply);
        mock.push(Reply::fixture("anthropic/text.sse"));
        let (response, text, thoughts) = prompt_once(&sandbox, &mock).await;
        assert_eq!(
            response["result"]["stopReason"], "end_turn",
            "{what}: {response}"
        );
        assert_eq!(text, "Hello from the mock model.", "{what}");
        assert_eq!(mock.requests().len(), 2, "{what}");
        assert!(
            thoughts.contains(cause) && thoughts.contains("Retrying in"),
            "{what}: the retry notice names the failure: {thoughts:?}"
        );
    }
}

#[tokio::test]
async fn a_stream_that_breaks_after_text_was_shown_ends_saying_it_was_cut_off() {
    for (what, reply, cause) in broken_streams(&anthropic_head(true)) {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        mock.push(reply);
        // Never asked for: a cut-off answer is not retried.
        mock.push(Reply::fixture("anthropic/text.sse"));
        let (response, text, thoughts) = prompt_once(&sandbox, &mock).await;
        let message = response["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("anthropic's answer was cut off after part of it was shown (")
                && message.contains(cause)
                && message.ends_with("the partial answer is kept: ask again for the rest"),
            "{what}: {response}"
        );
        assert_eq!(text, "Hello", "{what}");
        if what == "a connection reset" {
            assert!(message.contains("(the connection broke: "), "{message}");
        }
        assert_eq!(mock.requests().len(), 1, "{what}");
        assert!(!thoughts.contains("Retrying"), "{what}: {thoughts:?}");
        // The transcript keeps the partial answer with the error that cut
        // it off.
        let transcript = session_files(&sandbox.home())
            .into_iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect::<String>();
        let partial: Value = transcript
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|entry| entry.to_string().contains("\"Hello\""))
            .unwrap_or_else(|| panic!("{what}: no partial answer in {transcript}"));
        assert!(
            partial
                .to_string()
                .contains("was cut off after part of it was shown"),
            "{what}: {partial}"
        );
    }
}

/// Every `.jsonl` file under `dir`.
fn session_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(session_files(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}
