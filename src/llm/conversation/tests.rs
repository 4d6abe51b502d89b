//! The cached conversation gives the bytes of the uncached one, call after
//! call, while the history grows, after old entries change (a pruned tool
//! result, a compaction) and where segments would join.

use pretty_assertions::assert_eq;
use serde_json::json;

use crate::llm::{
    Api, AssistantContent, AssistantMessage, Content, HttpRequest, Message, Model, Request, Secret,
    StopReason, ToolCall, ToolResultMessage, ToolSpec, anthropic, bedrock, google,
    openai_completions, openai_responses,
};

fn model(api: Api, provider: &str, id: &str) -> Model {
    Model {
        provider: provider.into(),
        id: id.into(),
        name: id.into(),
        api,
        base_url: "http://127.0.0.1:9".into(),
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        pricing: Default::default(),
        headers: Vec::new(),
    }
}

/// A model of each wire format, and of each way of marking the prompt
/// cache within them.
fn models() -> Vec<Model> {
    vec![
        model(Api::AnthropicMessages, "anthropic", "claude-sonnet-4-5"),
        model(Api::OpenaiCompletions, "openai", "gpt-4.1"),
        model(
            Api::OpenaiCompletions,
            "openrouter",
            "anthropic/claude-sonnet-4.5",
        ),
        model(Api::OpenaiResponses, "openai", "gpt-5"),
        model(Api::GoogleGenerativeAi, "google", "gemini-2.5-pro"),
        model(
            Api::BedrockConverseStream,
            "amazon-bedrock",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        ),
        model(
            Api::BedrockConverseStream,
            "amazon-bedrock",
            "amazon.nova-pro-v1:0",
        ),
    ]
}

/// Both builders of `model`'s format: (uncached, cached).
fn build(model: &Model, request: &Request) -> (HttpRequest, HttpRequest) {
    let key = Secret::new("test-key");
    match model.api {
        Api::AnthropicMessages => (
            anthropic::build_request(model, Some(&key), request),
            anthropic::build_request_cached(model, Some(&key), request),
        ),
        Api::OpenaiCompletions => (
            openai_completions::build_request(model, Some(&key), request),
            openai_completions::build_request_cached(model, Some(&key), request),
        ),
        Api::OpenaiResponses => (
            openai_responses::build_request(model, Some(&key), request),
            openai_responses::build_request_cached(model, Some(&key), request),
        ),
        Api::GoogleGenerativeAi => (
            google::build_request(model, Some(&key), request),
            google::build_request_cached(model, Some(&key), request),
        ),
        Api::BedrockConverseStream => {
            // Signed, so that the signature is checked to cover the bytes.
            let credentials = bedrock::AwsCredentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                session_token: None,
            };
            let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
            let auth = || bedrock::Auth::SigV4(&credentials);
            (
                bedrock::build_request(model, auth(), "us-east-1", request, now),
                bedrock::build_request_cached(model, auth(), "us-east-1", request, now),
            )
        }
    }
}

fn user(text: &str) -> Message {
    Message::User {
        content: vec![Content::text(text)],
    }
}

fn assistant(content: Vec<AssistantContent>) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        provider: "anthropic".into(),
        api: Api::AnthropicMessages,
        model: "claude-sonnet-4-5".into(),
        auth_profile: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
        usage: Default::default(),
    })
}

fn call(id: &str) -> Message {
    assistant(vec![
        AssistantContent::Text {
            text: format!("Reading {id}."),
        },
        AssistantContent::ToolCall(ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: json!({"path": format!("{id}.rs"), "n": 1.5}),
            arguments_error: None,
        }),
    ])
}

fn result(id: &str, text: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: "read".into(),
        content: vec![Content::text(text)],
        is_error: false,
    })
}

/// Sends `messages` through both paths of every format and compares what
/// would be sent.
fn check(session: &str, messages: &[Message]) {
    let request = Request {
        system: "You are a coding agent.".into(),
        messages: messages.to_vec(),
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Reads a file.".into(),
            parameters: json!({"type": "object"}).into(),
        }],
        cache_key: Some(session.into()),
        ..Default::default()
    };
    for model in models() {
        let (plain, cached) = build(&model, &request);
        assert!(plain.bytes.is_none() && cached.bytes.is_some());
        let expected = String::from_utf8(serde_json::to_vec(&plain.body).unwrap()).unwrap();
        let got = String::from_utf8(cached.body_bytes()).unwrap();
        assert_eq!(got, expected, "{} {}", model.provider, model.id);
        assert_eq!(plain.headers, cached.headers, "{}", model.id);
        assert_eq!(plain.url, cached.url);
    }
}

#[test]
fn cached_bodies_equal_uncached_ones_as_the_history_grows_and_changes() {
    let session = "sess_conversation_test";
    let mut history = vec![user("Fix the bug in a.rs")];
    check(session, &history);
    for round in 0..12 {
        let id = format!("toolu_{round}");
        history.push(call(&id));
        check(session, &history);
        history.push(result(&id, &"fn main() {}\n".repeat(round + 1)));
        check(session, &history);
        if round % 3 == 2 {
            history.push(assistant(vec![AssistantContent::Text {
                text: "Done.".into(),
            }]));
            history.push(user(&format!("Now round {round}")));
            check(session, &history);
        }
    }
    // An old tool result is trimmed (pruning after the cache expired).
    history[2] = result("toolu_0", "[trimmed]");
    check(session, &history);
    // A failed, empty reply between two prompts: the prompts join.
    history.push(assistant(Vec::new()));
    history.push(user("again"));
    history.push(call("toolu_x"));
    history.push(result("toolu_x", "x"));
    history.push(user("and once more"));
    check(session, &history);
    // A blank prompt, which the API would reject, is dropped: its
    // neighbours join.
    history.push(assistant(vec![AssistantContent::Text {
        text: "ok".into(),
    }]));
    history.push(user("   "));
    history.push(assistant(vec![AssistantContent::Text { text: "?".into() }]));
    history.push(user("go on"));
    check(session, &history);
    // A compaction: the history starts again from a summary.
    let compacted: Vec<Message> = std::iter::once(user("<summary>work so far</summary>"))
        .chain(history[history.len() - 6..].iter().cloned())
        .collect();
    check(session, &compacted);
    let mut grown = compacted.clone();
    grown.push(call("toolu_y"));
    grown.push(result("toolu_y", "y"));
    check(session, &grown);
    // Another session with another history shares nothing with this one.
    check("sess_other", &history[..5]);
    check(session, &grown);
}

/// The cached path reuses what the previous call serialised instead of
/// converting everything again.
#[test]
fn a_call_converts_only_the_newest_segments() {
    let converted = std::cell::Cell::new(0usize);
    let convert = |messages: &[Message]| {
        converted.set(converted.get() + messages.len());
        messages
            .iter()
            .map(|m| serde_json::to_value(m).unwrap())
            .collect()
    };
    let mark = |_: &mut [serde_json::Value]| 0;
    let format = super::Format {
        convert: &convert,
        mark: &mark,
        marks: 0,
        joins_by: |_| None,
    };
    let mut history = Vec::new();
    for round in 0..100 {
        history.push(user(&format!("prompt {round}")));
        history.push(call("c"));
        history.push(result("c", "r"));
    }
    let mut kept = Vec::new();
    let first = super::build(&history, &format, &mut kept);
    assert_eq!(first, super::fresh(&history, &format));
    converted.set(0);
    history.push(call("d"));
    let second = super::build(&history, &format, &mut kept);
    assert_eq!(second, super::fresh(&history, &format));
    converted.set(0);
    history.push(result("d", "r"));
    super::build(&history, &format, &mut kept);
    // The last two segments (3 + 5 messages), not all 302.
    assert_eq!(converted.get(), 8);
}

#[test]
fn the_table_drops_its_oldest_sessions_past_its_byte_limit_but_never_the_newest() {
    let entry = |name: &str, bytes: usize| {
        (
            (name.to_string(), String::new()),
            std::sync::Arc::new(parking_lot::Mutex::new(Vec::new())),
            bytes,
        )
    };
    let mut table: super::Table = vec![entry("old", 30), entry("mid", 30), entry("new", 30)];
    super::evict(&mut table, 70);
    let left: Vec<&str> = table.iter().map(|(k, _, _)| k.0.as_str()).collect();
    assert_eq!(left, ["mid", "new"]);
    let mut table: super::Table = vec![entry("huge", 500)];
    super::evict(&mut table, 70);
    assert_eq!(table.len(), 1);
}
