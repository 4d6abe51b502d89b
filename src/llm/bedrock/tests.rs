//! Tests of the Bedrock ConverseStream wire format: request bodies and
//! signing, every fixture decoded at every byte split, and error
//! classification.
//!
//! Fixtures are JSON lines (`{"event": …, "payload": …}` or
//! `{"exception": …, "payload": …}`) turned into event-stream frames here,
//! plus `text.bin`, checked-in frames decoded without the encoder.

use super::eventstream::{HeaderValue, encode};
use super::*;
use crate::llm::{MessageBuilder, catalog::Api};
use crate::llm::{Pricing, ThinkingLevel, ToolCall, ToolSpec};
use pretty_assertions::assert_eq;

/// The `Api` the test model claims. Bedrock's own variant does not exist
/// until the integrator adds it to the catalog; the parser and the request
/// builder do not look at it, except to tell the history's own reasoning
/// signatures from foreign ones.
const TEST_API: Api = Api::BedrockConverseStream;

const MODEL_ID: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";

fn model() -> Model {
    Model {
        provider: "amazon-bedrock".to_string(),
        id: MODEL_ID.to_string(),
        name: "Claude Sonnet 4.5 (Bedrock)".to_string(),
        api: TEST_API,
        base_url: endpoint("us-east-1"),
        reasoning: true,
        image_input: true,
        context_window: 200_000,
        max_tokens: 64_000,
        // Zero prices keep the expected messages free of float arithmetic.
        pricing: Pricing::default(),
        headers: Vec::new(),
    }
}

fn text(text: &str) -> Content {
    Content::text(text)
}

fn assistant(content: Vec<AssistantContent>, stop_reason: StopReason) -> AssistantMessage {
    AssistantMessage {
        content,
        provider: "amazon-bedrock".to_string(),
        api: TEST_API,
        model: MODEL_ID.to_string(),
        auth_profile: None,
        stop_reason,
        error_message: None,
        usage: Usage::default(),
    }
}

fn tool_result(id: &str, content: Vec<Content>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.to_string(),
        tool_name: "read".to_string(),
        content,
        is_error,
    })
}

/// 2025-10-01T12:00:00Z.
fn signing_time() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_759_320_000)
}

fn credentials(token: Option<&str>) -> AwsCredentials {
    AwsCredentials {
        access_key_id: "AKIDEXAMPLE".to_string(),
        secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        session_token: token.map(Secret::new),
    }
}

#[test]
fn request_body_for_a_tool_round_trip() {
    let request = Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: "You are pincer.".to_string(),
        messages: vec![
            Message::User {
                content: vec![
                    text("What do these say?"),
                    Content::Image {
                        data: "iVBORw0KGgo=".to_string(),
                        mime_type: "image/png".to_string(),
                    },
                    Content::Image {
                        data: "AAAA".to_string(),
                        mime_type: "image/tiff".to_string(),
                    },
                ],
            },
            Message::Assistant(assistant(
                vec![
                    AssistantContent::Thinking {
                        thinking: "Two files to read.".to_string(),
                        signature: Some("sig-1".to_string()),
                        redacted: false,
                    },
                    AssistantContent::Thinking {
                        thinking: "b3BhcXVl".to_string(),
                        signature: None,
                        redacted: true,
                    },
                    AssistantContent::Thinking {
                        thinking: "unsigned thought".to_string(),
                        signature: None,
                        redacted: false,
                    },
                    AssistantContent::Text {
                        text: "Reading both.".to_string(),
                    },
                    AssistantContent::Text {
                        text: " \n".to_string(),
                    },
                    AssistantContent::ToolCall(ToolCall {
                        id: "tooluse_01".to_string(),
                        name: "read".to_string(),
                        arguments: json!({"path": "a.txt"}),
                        arguments_error: None,
                    }),
                    AssistantContent::ToolCall(ToolCall {
                        id: "tooluse_02".to_string(),
                        name: "read".to_string(),
                        arguments: json!("{\"path\": "),
                        arguments_error: Some("arguments are not valid JSON".to_string()),
                    }),
                ],
                StopReason::ToolUse,
            )),
            tool_result(
                "tooluse_01",
                vec![
                    text("hello"),
                    Content::Image {
                        data: "/9j/4AAQ".to_string(),
                        mime_type: "image/jpeg".to_string(),
                    },
                ],
                false,
            ),
            Message::User {
                content: vec![text("Summarise them.")],
            },
            tool_result("tooluse_02", vec![], true),
        ],
        tools: vec![ToolSpec {
            name: "read".to_string(),
            description: "Read a file.".to_string(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}})
                .into(),
        }],
        thinking: ThinkingLevel::Medium,
        max_tokens: None,
    };
    let key = Secret::new("ABSKbedrock-api-key");
    let http = build_request(
        &model(),
        Auth::Bearer(&key),
        "us-east-1",
        &request,
        signing_time(),
    );
    assert_eq!(
        http.url,
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "authorization".to_string(),
                "Bearer ABSKbedrock-api-key".to_string()
            ),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "additionalModelRequestFields": {
                "thinking": {"type": "enabled", "budget_tokens": 8192},
            },
            "inferenceConfig": {"maxTokens": 32_000 + 8192},
            "messages": [
                {"role": "user", "content": [
                    {"text": "What do these say?"},
                    {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                    {"text": "(an image of type image/tiff, which Bedrock cannot take, was left out)"},
                    // Claude: the two newest user turns end with a
                    // checkpoint, as do the system prompt and the tools.
                    {"cachePoint": {"type": "default"}},
                ]},
                {"role": "assistant", "content": [
                    {"reasoningContent": {"reasoningText": {
                        "text": "Two files to read.", "signature": "sig-1",
                    }}},
                    {"reasoningContent": {"redactedContent": "b3BhcXVl"}},
                    {"text": "unsigned thought"},
                    {"text": "Reading both."},
                    {"toolUse": {"toolUseId": "tooluse_01", "name": "read", "input": {"path": "a.txt"}}},
                    {"toolUse": {"toolUseId": "tooluse_02", "name": "read", "input": {}}},
                ]},
                // Both results open the user turn, the text after them.
                {"role": "user", "content": [
                    {"toolResult": {
                        "toolUseId": "tooluse_01",
                        "content": [
                            {"text": "hello"},
                            {"image": {"format": "jpeg", "source": {"bytes": "/9j/4AAQ"}}},
                        ],
                        "status": "success",
                    }},
                    {"toolResult": {
                        "toolUseId": "tooluse_02",
                        "content": [{"text": "(no output)"}],
                        "status": "error",
                    }},
                    {"text": "Summarise them."},
                    {"cachePoint": {"type": "default"}},
                ]},
            ],
            "system": [{"text": "You are pincer."}, {"cachePoint": {"type": "default"}}],
            "toolConfig": {"tools": [
                {"toolSpec": {
                    "name": "read",
                    "description": "Read a file.",
                    "inputSchema": {"json": {"type": "object", "properties": {"path": {"type": "string"}}}},
                }},
                {"cachePoint": {"type": "default"}},
            ]},
        })
    );
}

#[test]
fn thinking_only_for_claude_region_templated_and_empty_turns_dropped() {
    let request = Request {
        system: "  ".to_string(),
        messages: vec![
            Message::User {
                content: vec![text("first")],
            },
            Message::Assistant(assistant(vec![], StopReason::Aborted)),
            Message::User {
                content: vec![text("second"), text("")],
            },
        ],
        thinking: ThinkingLevel::High,
        max_tokens: Some(1000),
        ..Default::default()
    };
    let mut nova = model();
    nova.id = "us.amazon.nova-pro-v1:0".to_string();
    nova.base_url = ENDPOINT_TEMPLATE.to_string();
    nova.headers = vec![("X-Team".to_string(), "a".to_string())];
    let key = Secret::new("k");
    let http = build_request(
        &nova,
        Auth::Bearer(&key),
        "eu-west-3",
        &request,
        signing_time(),
    );
    assert_eq!(
        http.url,
        "https://bedrock-runtime.eu-west-3.amazonaws.com/model/us.amazon.nova-pro-v1%3A0/converse-stream"
    );
    assert_eq!(
        http.headers.last(),
        Some(&("X-Team".to_string(), "a".to_string()))
    );
    assert_eq!(
        http.body,
        json!({
            "inferenceConfig": {"maxTokens": 1000},
            "messages": [{"role": "user", "content": [{"text": "first"}, {"text": "second"}]}],
        })
    );
}

#[test]
fn foreign_reasoning_goes_back_as_text() {
    let mut foreign = assistant(
        vec![
            AssistantContent::Thinking {
                thinking: "Gemini thought".to_string(),
                signature: Some("not-a-claude-signature".to_string()),
                redacted: false,
            },
            AssistantContent::Thinking {
                thinking: "opaque".to_string(),
                signature: None,
                redacted: true,
            },
        ],
        StopReason::Stop,
    );
    foreign.api = Api::OpenaiCompletions;
    let request = Request {
        messages: vec![Message::Assistant(foreign)],
        ..Default::default()
    };
    let mut model = model();
    model.reasoning = false;
    assert_eq!(
        request_body(&model, &request, false).0["messages"],
        json!([{"role": "assistant", "content": [{"text": "Gemini thought"}]}])
    );
}

#[test]
fn thinking_budget_leaves_room_for_the_answer() {
    let mut model = model();
    let request = |thinking, max_tokens| Request {
        thinking,
        max_tokens,
        ..Default::default()
    };
    assert_eq!(
        token_limits(&model, &request(ThinkingLevel::Off, None)),
        (32_000, None)
    );
    assert_eq!(
        token_limits(&model, &request(ThinkingLevel::High, Some(4000))),
        (4000 + 16_384, Some(16_384))
    );
    model.max_tokens = 8000;
    assert_eq!(
        token_limits(&model, &request(ThinkingLevel::High, None)),
        (8000, Some(8000 - 1024))
    );
    model.max_tokens = 1500;
    assert_eq!(
        token_limits(&model, &request(ThinkingLevel::Minimal, None)),
        (1500, None)
    );
}

/// The smallest request; its body bytes are fixed, so its signature can be
/// checked against one computed independently (Python's hashlib and hmac).
/// Claude's request ends its user turn with a cache checkpoint.
fn hi_request() -> Request {
    Request {
        messages: vec![Message::User {
            content: vec![text("hi")],
        }],
        max_tokens: Some(16),
        ..Default::default()
    }
}

const HI_BODY: &str = r#"{"inferenceConfig":{"maxTokens":16},"messages":[{"content":[{"text":"hi"},{"cachePoint":{"type":"default"}}],"role":"user"}]}"#;

#[test]
fn sigv4_signs_the_double_encoded_path_and_the_exact_body() {
    let credentials = credentials(Some("session-token-example"));
    let http = build_request(
        &model(),
        Auth::SigV4(&credentials),
        "us-east-1",
        &hi_request(),
        signing_time(),
    );
    let payload = serde_json::to_vec(&http.body).unwrap();
    assert_eq!(String::from_utf8_lossy(&payload), HI_BODY);

    let signed = sign(
        &http.url,
        &credentials,
        "us-east-1",
        &payload,
        signing_time(),
    )
    .unwrap();
    assert_eq!(
        signed.canonical_request,
        "POST\n\
         /model/anthropic.claude-sonnet-4-5-20250929-v1%253A0/converse-stream\n\
         \n\
         host:bedrock-runtime.us-east-1.amazonaws.com\n\
         x-amz-date:20251001T120000Z\n\
         x-amz-security-token:session-token-example\n\
         \n\
         host;x-amz-date;x-amz-security-token\n\
         c3992667665448f7303efe343b8ee1adefa58f40ee10aeec5cf7e3af10ba2425"
    );
    assert_eq!(
        signed.string_to_sign,
        "AWS4-HMAC-SHA256\n\
         20251001T120000Z\n\
         20251001/us-east-1/bedrock/aws4_request\n\
         c825338e32af248e9201b3fc6e6f07ab9a39e2d05b62ac9cd04f25a54f130357"
    );
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-amz-date".to_string(), "20251001T120000Z".to_string()),
            (
                "x-amz-security-token".to_string(),
                "session-token-example".to_string()
            ),
            (
                "authorization".to_string(),
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251001/us-east-1/bedrock/aws4_request, \
                 SignedHeaders=host;x-amz-date;x-amz-security-token, \
                 Signature=3a9523c592c55f294138b544f43af5b4b555f0b3f780fb351549a321d256abb2"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn sigv4_against_a_mock_server_signs_its_host_and_port() {
    let mut model = model();
    model.base_url = "http://127.0.0.1:8080/".to_string();
    let credentials = credentials(None);
    let http = build_request(
        &model,
        Auth::SigV4(&credentials),
        "us-east-1",
        &hi_request(),
        signing_time(),
    );
    assert_eq!(
        http.url,
        "http://127.0.0.1:8080/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    );
    assert_eq!(
        http.headers.last().map(|(_, v)| v.as_str()),
        Some(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20251001/us-east-1/bedrock/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=84d9decf4f9e129a9b2fed202bf49794fbf76d43df8b8afcd2333bfe493a1e7c"
        )
    );
}

#[test]
fn model_ids_are_one_encoded_path_segment() {
    let mut model = model();
    let key = Secret::new("k");
    for (id, segment) in [
        (
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "us.anthropic.claude-sonnet-4-5-20250929-v1%3A0",
        ),
        (
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123",
        ),
    ] {
        model.id = id.to_string();
        let http = build_request(
            &model,
            Auth::Bearer(&key),
            "us-east-1",
            &hi_request(),
            signing_time(),
        );
        assert_eq!(
            http.url,
            format!(
                "https://bedrock-runtime.us-east-1.amazonaws.com/model/{segment}/converse-stream"
            )
        );
    }
}

/// Encodes a JSON-lines fixture as the event-stream bytes Bedrock sends.
fn frames(jsonl: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in jsonl.lines().filter(|line| !line.trim().is_empty()) {
        let line: Value = serde_json::from_str(line).unwrap();
        let payload = serde_json::to_vec(&line["payload"]).unwrap();
        let string = |s: &str| HeaderValue::String(s.to_string());
        let headers = if let Some(event) = line["event"].as_str() {
            [
                (":event-type", string(event)),
                (":content-type", string("application/json")),
                (":message-type", string("event")),
            ]
        } else if let Some(exception) = line["exception"].as_str() {
            [
                (":exception-type", string(exception)),
                (":content-type", string("application/json")),
                (":message-type", string("exception")),
            ]
        } else {
            panic!("a fixture line is an event or an exception: {line}");
        };
        out.extend(encode(&headers, &payload));
    }
    out
}

/// Decodes `input` fed in two chunks split at `split`, as the stream
/// would: events until the parser fails, the error, and whether the
/// final event was seen.
fn parse_split(input: &[u8], split: usize) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let mut unused = sse::Decoder::new();
    let mut parser = Parser::new("amazon-bedrock");
    let mut events = Vec::new();
    for chunk in [&input[..split], &input[split..]] {
        match parser.on_bytes(&mut unused, chunk) {
            Ok(more) => events.extend(more),
            Err(error) => return (events, Some(error), parser.finished()),
        }
    }
    (events, None, parser.finished())
}

/// Parses a stream at every split point, insists on identical results,
/// and returns them.
fn parse_stream(input: &[u8]) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let whole = parse_split(input, input.len());
    for split in 0..input.len() {
        assert_eq!(parse_split(input, split), whole, "split at byte {split}");
    }
    whole
}

/// A stream that must finish cleanly: its events and the message they build.
fn parse_complete(input: &[u8]) -> (Vec<StreamEvent>, AssistantMessage) {
    let (events, error, finished) = parse_stream(input);
    assert_eq!((error, finished), (None, true));
    let mut builder = MessageBuilder::new();
    for event in &events {
        builder.apply(event);
    }
    (events, builder.finish(&model(), None, None))
}

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        ..Default::default()
    }
}

fn reply(
    content: Vec<AssistantContent>,
    stop_reason: StopReason,
    usage: Usage,
) -> AssistantMessage {
    AssistantMessage {
        usage,
        ..assistant(content, stop_reason)
    }
}

fn text_content(text: &str) -> AssistantContent {
    AssistantContent::Text {
        text: text.to_string(),
    }
}

fn expected_text_reply() -> (Vec<StreamEvent>, AssistantMessage) {
    (
        vec![
            StreamEvent::TextDelta("Hello".to_string()),
            StreamEvent::TextDelta(" from Bedrock".to_string()),
            StreamEvent::TextDelta(" — café.".to_string()),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(21, 12, 0, 0)),
        ],
        reply(
            vec![text_content("Hello from Bedrock — café.")],
            StopReason::Stop,
            usage(21, 12, 0, 0),
        ),
    )
}

#[test]
fn parses_a_text_reply() {
    let input = frames(include_str!("../../../fixtures/bedrock/text.jsonl"));
    assert_eq!(parse_complete(&input), expected_text_reply());
}

/// `text.bin` holds frames written once by the encoder and checked in;
/// decoding it does not depend on the encoder of this run.
#[test]
fn parses_checked_in_binary_frames() {
    let input = include_bytes!("../../../fixtures/bedrock/text.bin");
    assert_eq!(parse_complete(input), expected_text_reply());
    // It is the same conversation as text.jsonl, frame by frame.
    let messages = eventstream::Decoder::new().feed(input).unwrap();
    let lines: Vec<Value> = include_str!("../../../fixtures/bedrock/text.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(messages.len(), lines.len());
    for (message, line) in messages.iter().zip(&lines) {
        assert_eq!(message.header(":event-type"), line["event"].as_str());
        assert_eq!(message.header(":message-type"), Some("event"));
        let payload: Value = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(payload, line["payload"]);
    }
}

/// Rewrites `fixtures/bedrock/text.bin` from `text.jsonl`:
/// `cargo test --lib llm::bedrock::tests::write_text_bin -- --ignored`.
#[test]
#[ignore = "writes a fixture; run by hand after changing text.jsonl"]
fn write_text_bin() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/bedrock/text.bin");
    std::fs::write(
        path,
        frames(include_str!("../../../fixtures/bedrock/text.jsonl")),
    )
    .unwrap();
}

/// Rewrites `fixtures/bedrock/cached.bin` (for the end-to-end tests)
/// from `cached.jsonl`:
/// `cargo test --lib llm::bedrock::tests::write_cached_bin -- --ignored`.
#[test]
#[ignore = "writes a fixture; run by hand after changing cached.jsonl"]
fn write_cached_bin() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/bedrock/cached.bin");
    std::fs::write(
        path,
        frames(include_str!("../../../fixtures/bedrock/cached.jsonl")),
    )
    .unwrap();
}

/// A Claude answer that read from and wrote to the prompt cache: both
/// counts reach the usage, and `cached.bin` is that answer.
#[test]
fn cache_reads_and_writes_reach_the_usage() {
    let jsonl = include_str!("../../../fixtures/bedrock/cached.jsonl");
    assert_eq!(
        include_bytes!("../../../fixtures/bedrock/cached.bin").as_slice(),
        frames(jsonl).as_slice()
    );
    let (events, _) = parse_complete(&frames(jsonl));
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Usage(usage(500, 10, 40_000, 3_000)))
    );
}

#[test]
fn parses_a_tool_call() {
    let (events, message) = parse_complete(&frames(include_str!(
        "../../../fixtures/bedrock/tool_call.jsonl"
    )));
    let id = "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q";
    let delta = |json: &str| StreamEvent::ToolCallDelta {
        id: id.to_string(),
        json: json.to_string(),
    };
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta("I'll read".to_string()),
            StreamEvent::TextDelta(" the file.".to_string()),
            StreamEvent::ToolCallStart {
                id: id.to_string(),
                name: "read".to_string(),
            },
            delta("{\"path\": "),
            delta("\"hello.t"),
            delta("xt\"}"),
            StreamEvent::Stop(StopReason::ToolUse),
            StreamEvent::Usage(usage(9, 58, 0, 1800)),
        ]
    );
    assert_eq!(
        message,
        reply(
            vec![
                text_content("I'll read the file."),
                AssistantContent::ToolCall(ToolCall {
                    id: id.to_string(),
                    name: "read".to_string(),
                    arguments: json!({"path": "hello.txt"}),
                    arguments_error: None,
                }),
            ],
            StopReason::ToolUse,
            usage(9, 58, 0, 1800)
        )
    );
}

#[test]
fn parses_thinking_with_its_signature_and_redacted_reasoning() {
    let (events, message) = parse_complete(&frames(include_str!(
        "../../../fixtures/bedrock/thinking.jsonl"
    )));
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds4ZTrMUTSeQ8vFtwQ6FG";
    assert_eq!(
        events,
        vec![
            StreamEvent::ThinkingDelta("The user says hi.".to_string()),
            StreamEvent::ThinkingDelta(" I should greet them back briefly.".to_string()),
            StreamEvent::ThinkingSignature(signature.to_string()),
            StreamEvent::RedactedThinking("RW5jcnlwdGVkIHJlYXNvbmluZw==".to_string()),
            StreamEvent::TextDelta("Hi there!".to_string()),
            StreamEvent::TextDelta(" How can I help?".to_string()),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(35, 64, 1200, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            vec![
                AssistantContent::Thinking {
                    thinking: "The user says hi. I should greet them back briefly.".to_string(),
                    signature: Some(signature.to_string()),
                    redacted: false,
                },
                AssistantContent::Thinking {
                    thinking: "RW5jcnlwdGVkIHJlYXNvbmluZw==".to_string(),
                    signature: None,
                    redacted: true,
                },
                text_content("Hi there! How can I help?"),
            ],
            StopReason::Stop,
            usage(35, 64, 1200, 0)
        )
    );
}

#[test]
fn a_throttling_exception_mid_stream_is_a_rate_limit() {
    let fixture = include_str!("../../../fixtures/bedrock/throttled.jsonl");
    let input = frames(fixture);
    let expected_error = LlmError::RateLimit {
        provider: "amazon-bedrock".to_string(),
        message: "Too many tokens, please wait before trying again.".to_string(),
        retry_after: None,
    };
    let streamed = vec![StreamEvent::TextDelta("Let me".to_string())];
    // Fed frame by frame, the text arrives before the error.
    let exception_at = input.len() - frames(fixture.lines().last().unwrap()).len();
    assert_eq!(
        parse_split(&input, exception_at),
        (streamed.clone(), Some(expected_error.clone()), false)
    );
    // At every other split the error is the same; events that share the
    // exception's chunk are dropped with it (a `WireFormat` returns events
    // or an error).
    for split in 0..=input.len() {
        let (events, error, finished) = parse_split(&input, split);
        assert_eq!(
            (&error, finished),
            (&Some(expected_error.clone()), false),
            "split at byte {split}"
        );
        assert!(
            streamed.starts_with(&events),
            "split at byte {split}: {events:?}"
        );
    }
}

/// Feeds one fixture-style stream written inline and returns what the
/// parser made of it.
fn parse_lines(lines: &[Value]) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let jsonl: String = lines.iter().map(|line| format!("{line}\n")).collect();
    parse_split(&frames(&jsonl), 0)
}

#[test]
fn exceptions_mid_stream_are_classified() {
    let provider = || "amazon-bedrock".to_string();
    let cases = [
        (
            "validationException",
            "Input is too long for requested model.",
            LlmError::ContextOverflow {
                provider: provider(),
                message: "Input is too long for requested model.".to_string(),
            },
        ),
        (
            "validationException",
            "messages.1.content: toolUse ids must be unique",
            LlmError::BadRequest {
                provider: provider(),
                status: 400,
                message: "messages.1.content: toolUse ids must be unique".to_string(),
            },
        ),
        (
            "serviceUnavailableException",
            "Bedrock is unable to process your request.",
            LlmError::Overloaded {
                provider: provider(),
                message: "Bedrock is unable to process your request.".to_string(),
            },
        ),
        (
            "modelStreamErrorException",
            "",
            LlmError::Server {
                provider: provider(),
                status: 424,
                message: "modelStreamErrorException".to_string(),
            },
        ),
        (
            "internalServerException",
            "oops",
            LlmError::Server {
                provider: provider(),
                status: 500,
                message: "oops".to_string(),
            },
        ),
    ];
    for (kind, message, expected) in cases {
        let (_, error, finished) = parse_lines(&[
            json!({"event": "messageStart", "payload": {"role": "assistant"}}),
            json!({"exception": kind, "payload": {"message": message}}),
        ]);
        assert_eq!((error, finished), (Some(expected), false), "{kind}");
    }
}

#[test]
fn error_messages_use_their_headers() {
    let frame = encode(
        &[
            (":message-type", HeaderValue::String("error".to_string())),
            (
                ":error-code",
                HeaderValue::String("throttlingException".to_string()),
            ),
            (
                ":error-message",
                HeaderValue::String("Rate exceeded".to_string()),
            ),
        ],
        b"",
    );
    assert_eq!(
        parse_split(&frame, 3).1,
        Some(LlmError::RateLimit {
            provider: "amazon-bedrock".to_string(),
            message: "Rate exceeded".to_string(),
            retry_after: None,
        })
    );
}

#[test]
fn stop_reasons_and_unknown_events() {
    for (reason, expected) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("max_tokens", StopReason::Length),
        ("model_context_window_exceeded", StopReason::Length),
        ("tool_use", StopReason::ToolUse),
        ("guardrail_intervened", StopReason::Refusal),
        ("content_filtered", StopReason::Refusal),
    ] {
        let (events, error, finished) = parse_lines(&[
            json!({"event": "messageStart", "payload": {"role": "assistant"}}),
            json!({"event": "futureEvent", "payload": {"whatever": [1, 2]}}),
            json!({"event": "contentBlockStart", "payload": {
                "contentBlockIndex": 0, "start": {"image": {"format": "png"}}}}),
            json!({"event": "contentBlockDelta", "payload": {
                "contentBlockIndex": 0, "delta": {"citation": {"title": "x"}}}}),
            json!({"event": "messageStop", "payload": {"stopReason": reason}}),
            json!({"event": "metadata", "payload": {"usage": {"inputTokens": 1, "outputTokens": 2}}}),
        ]);
        assert_eq!(
            (events, error, finished),
            (
                vec![
                    StreamEvent::Stop(expected),
                    StreamEvent::Usage(usage(1, 2, 0, 0))
                ],
                None,
                true
            ),
            "{reason}"
        );
    }
}

#[test]
fn a_signature_without_thinking_text_still_opens_a_block() {
    let (events, _, _) = parse_lines(&[json!({"event": "contentBlockDelta", "payload": {
        "contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}}})]);
    assert_eq!(
        events,
        vec![
            StreamEvent::ThinkingDelta(String::new()),
            StreamEvent::ThinkingSignature("sig".to_string()),
        ]
    );
}

#[test]
fn malformed_streams_fail() {
    let malformed = |error: Option<LlmError>| match error {
        Some(LlmError::MalformedStream { provider, message }) => {
            assert_eq!(provider, "amazon-bedrock");
            message
        }
        other => panic!("expected a malformed stream, got {other:?}"),
    };

    let (_, error, _) = parse_lines(&[json!({"event": "contentBlockDelta", "payload": {
        "contentBlockIndex": 3, "delta": {"toolUse": {"input": "{}"}}}})]);
    assert_eq!(
        malformed(error),
        "tool input arrived for content block 3, which no tool call started"
    );

    let (_, error, _) = parse_lines(&[json!({"event": "messageStop", "payload": {"nope": 1}})]);
    assert!(
        malformed(error).starts_with("the payload of a `messageStop` event is not valid"),
        "bad payloads name their event"
    );

    let mut corrupt = frames(include_str!("../../../fixtures/bedrock/text.jsonl"));
    let at = corrupt.len() / 2;
    corrupt[at] ^= 0xff;
    let (_, error, finished) = parse_split(&corrupt, 0);
    assert!(malformed(error).starts_with("the event stream is corrupt"));
    assert!(!finished);

    let mut parser = Parser::new("amazon-bedrock");
    let sse_event = sse::Event::default();
    assert!(matches!(
        parser.on_event(&sse_event),
        Err(LlmError::MalformedStream { .. })
    ));
}

#[test]
fn bytes_after_the_metadata_event_are_ignored() {
    let mut input = frames(include_str!("../../../fixtures/bedrock/text.jsonl"));
    input.extend_from_slice(b"garbage that is not a frame at all");
    let (events, error, finished) = parse_split(&input, input.len());
    assert_eq!((events, error, finished), {
        let (events, _) = expected_text_reply();
        (events, None, true)
    });
}

#[test]
fn http_errors_are_classified() {
    let body = |message: &str| json!({"message": message}).to_string();
    let provider = || "amazon-bedrock".to_string();
    assert_eq!(
        error_from_response(
            "amazon-bedrock",
            403,
            None,
            &body("The security token included in the request is invalid.")
        ),
        LlmError::Auth {
            provider: provider(),
            message: "The security token included in the request is invalid.".to_string(),
        }
    );
    assert_eq!(
        error_from_response(
            "amazon-bedrock",
            429,
            Some(Duration::from_secs(3)),
            &body("Too many requests, please wait before trying again. You have sent too many requests. Wait before trying again. Your quota resets soon.")
        ),
        LlmError::RateLimit {
            provider: provider(),
            message: "Too many requests, please wait before trying again. You have sent too many requests. Wait before trying again. Your quota resets soon.".to_string(),
            retry_after: Some(Duration::from_secs(3)),
        }
    );
    assert_eq!(
        error_from_response(
            "amazon-bedrock",
            400,
            None,
            r#"{"Message":"The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum"}"#
        ),
        LlmError::ContextOverflow {
            provider: provider(),
            message: "The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum".to_string(),
        }
    );
    assert_eq!(
        error_from_response(
            "amazon-bedrock",
            400,
            None,
            &body("The provided model identifier is invalid.")
        ),
        LlmError::ModelNotFound {
            provider: provider(),
            message: "The provided model identifier is invalid.".to_string(),
        }
    );
    assert_eq!(
        error_from_response(
            "amazon-bedrock",
            400,
            None,
            &body("Invocation of model ID anthropic.claude-sonnet-4-5-20250929-v1:0 with on-demand throughput isn't supported.")
        ),
        LlmError::BadRequest {
            provider: provider(),
            status: 400,
            message: "Invocation of model ID anthropic.claude-sonnet-4-5-20250929-v1:0 with on-demand throughput isn't supported.".to_string(),
        }
    );
    assert_eq!(
        error_from_response("amazon-bedrock", 404, None, &body("Model not found.")),
        LlmError::ModelNotFound {
            provider: provider(),
            message: "Model not found.".to_string(),
        }
    );
    assert_eq!(
        error_from_response("amazon-bedrock", 503, None, &body("Service unavailable")),
        LlmError::Overloaded {
            provider: provider(),
            message: "Service unavailable".to_string(),
        }
    );
    assert_eq!(
        error_from_response("amazon-bedrock", 502, None, "<html>Bad Gateway</html>\n"),
        LlmError::Server {
            provider: provider(),
            status: 502,
            message: "<html>Bad Gateway</html>".to_string(),
        }
    );
    assert_eq!(
        error_from_response("amazon-bedrock", 500, None, ""),
        LlmError::Server {
            provider: provider(),
            status: 500,
            message: "HTTP 500".to_string(),
        }
    );
    let LlmError::BadRequest { message, .. } =
        error_from_response("amazon-bedrock", 418, None, &"x".repeat(2000))
    else {
        panic!("418 is a bad request");
    };
    assert_eq!(message, format!("{}…", "x".repeat(500)));
}

#[test]
fn auth_debug_output_has_no_secrets() {
    let key = Secret::new("ABSK-very-secret");
    let credentials = credentials(Some("token-very-secret"));
    let printed = format!(
        "{:?} {:?} {credentials:?}",
        Auth::Bearer(&key),
        Auth::SigV4(&credentials)
    );
    for secret in [
        "ABSK-very-secret",
        "token-very-secret",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ] {
        assert!(!printed.contains(secret), "{secret} leaked: {printed}");
    }
}

#[test]
fn cache_reads_and_writes_come_from_the_metadata_usage() {
    let wire: WireUsage = serde_json::from_value(json!({
        "inputTokens": 1_000,
        "outputTokens": 40,
        "cacheReadInputTokens": 11_000,
        "cacheWriteInputTokens": 500,
    }))
    .unwrap();
    assert_eq!(
        (
            wire.input_tokens,
            wire.output_tokens,
            wire.cache_read_input_tokens,
            wire.cache_write_input_tokens
        ),
        (1_000, 40, 11_000, 500)
    );
}
