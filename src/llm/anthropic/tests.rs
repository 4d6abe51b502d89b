//! Tests of the Anthropic Messages wire format: request bodies, every
//! fixture parsed at every byte split, and error classification.

use super::*;
use crate::llm::{
    Api, MessageBuilder, Pricing, ThinkingLevel, ToolCall, ToolSpec, catalog::Catalog,
};
use pretty_assertions::assert_eq;

fn model() -> Model {
    let mut model = Catalog::new(&Default::default(), &|_| None)
        .resolve("anthropic/claude-sonnet-4-5")
        .unwrap();
    model.base_url = "http://127.0.0.1:9".to_string();
    // Zero prices keep the expected messages free of float arithmetic.
    model.pricing = Pricing::default();
    model
}

fn text(text: &str) -> Content {
    Content::text(text)
}

fn assistant(content: Vec<AssistantContent>, stop_reason: StopReason) -> AssistantMessage {
    AssistantMessage {
        content,
        provider: "anthropic".to_string(),
        api: Api::AnthropicMessages,
        model: "claude-sonnet-4-5".to_string(),
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
                        thinking: "opaque".to_string(),
                        signature: None,
                        redacted: true,
                    },
                    AssistantContent::Thinking {
                        thinking: "unsigned thought".to_string(),
                        signature: None,
                        redacted: false,
                    },
                    AssistantContent::Thinking {
                        thinking: String::new(),
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
                        id: "toolu_01".to_string(),
                        name: "read".to_string(),
                        arguments: json!({"path": "a.txt"}),
                        arguments_error: None,
                    }),
                    AssistantContent::ToolCall(ToolCall {
                        id: "toolu_02".to_string(),
                        name: "read".to_string(),
                        arguments: json!("{\"path\": "),
                        arguments_error: Some("arguments are not valid JSON".to_string()),
                    }),
                ],
                StopReason::ToolUse,
            )),
            tool_result("toolu_01", vec![text("hello")], false),
            tool_result("toolu_02", vec![], true),
            Message::User {
                content: vec![text("Summarise them.")],
            },
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
    let http = build_request(&model(), Some(&Secret::new("sk-ant-test")), &request);
    assert_eq!(http.url, "http://127.0.0.1:9/v1/messages");
    assert_eq!(
        http.headers,
        vec![
            ("x-api-key".to_string(), "sk-ant-test".to_string()),
            ("anthropic-version".to_string(), "2023-06-01".to_string()),
            ("content-type".to_string(), "application/json".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 32_000 + 8192,
            "stream": true,
            "system": [{
                "type": "text",
                "text": "You are pincer.",
                "cache_control": {"type": "ephemeral"},
            }],
            "messages": [
                // The previous request ended here: this one reads its cache.
                {"role": "user", "content": [
                    {"type": "text", "text": "What do these say?"},
                    {"type": "image", "source": {
                        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=",
                    }, "cache_control": {"type": "ephemeral"}},
                ]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "Two files to read.", "signature": "sig-1"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "unsigned thought"},
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "toolu_01", "name": "read", "input": {"path": "a.txt"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "read", "input": {}},
                ]},
                {"role": "user", "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": [{"type": "text", "text": "hello"}],
                        "is_error": false,
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "content": [{"type": "text", "text": "(no output)"}],
                        "is_error": true,
                    },
                    {
                        "type": "text",
                        "text": "Summarise them.",
                        "cache_control": {"type": "ephemeral"},
                    },
                ]},
            ],
            "tools": [{
                "name": "read",
                "description": "Read a file.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "cache_control": {"type": "ephemeral"},
            }],
            "thinking": {"type": "enabled", "budget_tokens": 8192},
        })
    );
}

#[test]
fn empty_failed_replies_are_dropped_and_their_neighbours_merged() {
    let mut model = model();
    model.reasoning = false;
    model.headers = vec![("Anthropic-Version".to_string(), "2099-01-01".to_string())];
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
    let http = build_request(&model, None, &request);
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("Anthropic-Version".to_string(), "2099-01-01".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1000,
            "stream": true,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "first"},
                {"type": "text", "text": "second", "cache_control": {"type": "ephemeral"}},
            ]}],
        })
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

/// Decodes `input` fed in two chunks split at `split`, as the stream
/// would: events until the parser fails, the error, and whether the
/// final event was seen.
fn parse_split(input: &[u8], split: usize) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let mut decoder = sse::Decoder::new();
    let mut parser = Parser::new("anthropic");
    let mut events = Vec::new();
    for chunk in [&input[..split], &input[split..]] {
        for event in decoder.feed(chunk) {
            match parser.on_event(&event) {
                Ok(more) => events.extend(more),
                Err(error) => return (events, Some(error), parser.finished()),
            }
        }
    }
    (events, None, parser.finished())
}

/// Parses a fixture, whose events are the same at every split point
/// (and so, then, is what the parser makes of them).
fn parse_fixture(input: &str) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let input = input.as_bytes();
    sse::tests::events_at_every_split(input);
    parse_split(input, input.len())
}

/// A fixture that must finish cleanly: its events and the message they build.
fn parse_complete(input: &str) -> (Vec<StreamEvent>, AssistantMessage) {
    let (events, error, finished) = parse_fixture(input);
    assert_eq!((error, finished), (None, true));
    let mut builder = MessageBuilder::new();
    for event in &events {
        builder.apply(event);
    }
    let message = builder.finish(&model(), None, None);
    (events, message)
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

#[test]
fn parses_a_text_reply() {
    let (events, message) = parse_complete(include_str!("../../../fixtures/anthropic/text.sse"));
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(21, 1, 0, 0)),
            StreamEvent::TextDelta("Hello".to_string()),
            StreamEvent::TextDelta(" from the".to_string()),
            StreamEvent::TextDelta(" mock model.".to_string()),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(21, 10, 0, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            vec![text_content("Hello from the mock model.")],
            StopReason::Stop,
            usage(21, 10, 0, 0)
        )
    );
}

#[test]
fn parses_a_tool_call() {
    let (events, message) =
        parse_complete(include_str!("../../../fixtures/anthropic/tool_read.sse"));
    let delta = |json: &str| StreamEvent::ToolCallDelta {
        id: "toolu_01".to_string(),
        json: json.to_string(),
    };
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(9, 1, 0, 1800)),
            StreamEvent::TextDelta("I'll read".to_string()),
            StreamEvent::TextDelta(" the file.".to_string()),
            StreamEvent::ToolCallStart {
                id: "toolu_01".to_string(),
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
                    id: "toolu_01".to_string(),
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
fn parses_the_reply_after_a_tool_result() {
    let (events, message) =
        parse_complete(include_str!("../../../fixtures/anthropic/after_tool.sse"));
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(73, 1, 1800, 0)),
            StreamEvent::TextDelta("The file".to_string()),
            StreamEvent::TextDelta(" says hello.".to_string()),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(73, 9, 1800, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            vec![text_content("The file says hello.")],
            StopReason::Stop,
            usage(73, 9, 1800, 0)
        )
    );
}

#[test]
fn parses_thinking_with_its_signature() {
    let (events, message) =
        parse_complete(include_str!("../../../fixtures/anthropic/thinking.sse"));
    let signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds4ZTrMUTSeQ8vFtwQ6FG";
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(35, 1, 0, 0)),
            StreamEvent::ThinkingDelta("The user says hi.".to_string()),
            StreamEvent::ThinkingDelta(" I should greet them back briefly.".to_string()),
            StreamEvent::ThinkingSignature(signature.to_string()),
            StreamEvent::TextDelta("Hi there!".to_string()),
            StreamEvent::TextDelta(" How can I help?".to_string()),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(35, 64, 0, 0)),
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
                text_content("Hi there! How can I help?"),
            ],
            StopReason::Stop,
            usage(35, 64, 0, 0)
        )
    );
}

#[test]
fn parses_a_reply_cut_by_max_tokens() {
    let (events, message) =
        parse_complete(include_str!("../../../fixtures/anthropic/max_tokens.sse"));
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(14, 1, 0, 0)),
            StreamEvent::TextDelta("Here is a very long".to_string()),
            StreamEvent::TextDelta(" list:\n1. apples".to_string()),
            StreamEvent::Stop(StopReason::Length),
            StreamEvent::Usage(usage(14, 16, 0, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            vec![text_content("Here is a very long list:\n1. apples")],
            StopReason::Length,
            usage(14, 16, 0, 0)
        )
    );
}

#[test]
fn parses_a_refusal() {
    let (events, message) = parse_complete(include_str!("../../../fixtures/anthropic/refusal.sse"));
    assert_eq!(
        events,
        vec![
            StreamEvent::Usage(usage(18, 1, 0, 0)),
            StreamEvent::TextDelta("I can".to_string()),
            StreamEvent::Stop(StopReason::Refusal),
            StreamEvent::Usage(usage(18, 3, 0, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            vec![text_content("I can")],
            StopReason::Refusal,
            usage(18, 3, 0, 0)
        )
    );
}

#[test]
fn an_error_event_mid_stream_is_classified() {
    let (events, error, finished) = parse_fixture(include_str!(
        "../../../fixtures/anthropic/overloaded_midstream.sse"
    ));
    assert_eq!(
        (events, error, finished),
        (
            vec![
                StreamEvent::Usage(usage(21, 1, 0, 0)),
                StreamEvent::TextDelta("Let me".to_string()),
            ],
            Some(LlmError::Overloaded {
                provider: "anthropic".to_string(),
                message: "Overloaded".to_string(),
            }),
            false,
        )
    );
}

fn event(name: &str, data: Value) -> sse::Event {
    sse::Event {
        event: name.to_string(),
        data: data.to_string(),
        id: None,
    }
}

#[test]
fn rarer_blocks_unknown_events_and_bad_json() {
    let mut parser = Parser::new("anthropic");
    let mut events = Vec::new();
    for e in [
        event("ping", json!({"type": "ping"})),
        event("future_event", json!({"type": "future_event", "x": 1})),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "redacted_thinking", "data": "EmwKAhgB"}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
                   "delta": {"type": "signature_delta", "signature": "sig"}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2,
                   "delta": {"type": "input_json_delta", "partial_json": "{\"query\":\"x\"}"}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 3,
                   "content_block": {"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {"path": "."}}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 3}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "pause_turn"},
                   "usage": {"output_tokens": 5}}),
        ),
    ] {
        events.extend(parser.on_event(&e).unwrap());
    }
    assert_eq!(
        events,
        vec![
            StreamEvent::RedactedThinking("EmwKAhgB".to_string()),
            StreamEvent::ThinkingDelta(String::new()),
            StreamEvent::ThinkingSignature("sig".to_string()),
            StreamEvent::ToolCallStart {
                id: "toolu_9".to_string(),
                name: "ls".to_string(),
            },
            StreamEvent::ToolCallDelta {
                id: "toolu_9".to_string(),
                json: "{\"path\":\".\"}".to_string(),
            },
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(0, 5, 0, 0)),
        ]
    );
    assert!(!parser.finished());
    let bad = sse::Event {
        event: "content_block_delta".to_string(),
        data: "{\"type\":".to_string(),
        id: None,
    };
    let Err(LlmError::MalformedStream { provider, message }) = parser.on_event(&bad) else {
        panic!("bad JSON must fail the stream");
    };
    assert_eq!(provider, "anthropic");
    assert!(
        message.starts_with("the data of a `content_block_delta` event is not valid"),
        "{message}"
    );
}

#[test]
fn http_errors_are_classified() {
    let body = |kind: &str, message: &str| {
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
    };
    assert_eq!(
        error_from_response(
            "anthropic",
            401,
            None,
            &body("authentication_error", "invalid x-api-key")
        ),
        LlmError::Auth {
            provider: "anthropic".to_string(),
            message: "invalid x-api-key".to_string(),
        }
    );
    assert_eq!(
        error_from_response(
            "anthropic",
            429,
            Some(Duration::from_secs(20)),
            &body(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit"
            )
        ),
        LlmError::RateLimit {
            provider: "anthropic".to_string(),
            message: "Number of request tokens has exceeded your per-minute rate limit".to_string(),
            retry_after: Some(Duration::from_secs(20)),
        }
    );
    assert_eq!(
        error_from_response(
            "anthropic",
            529,
            None,
            &body("overloaded_error", "Overloaded")
        ),
        LlmError::Overloaded {
            provider: "anthropic".to_string(),
            message: "Overloaded".to_string(),
        }
    );
    assert_eq!(
        error_from_response(
            "anthropic",
            400,
            None,
            &body(
                "invalid_request_error",
                "prompt is too long: 208310 tokens > 200000 maximum"
            )
        ),
        LlmError::ContextOverflow {
            provider: "anthropic".to_string(),
            message: "prompt is too long: 208310 tokens > 200000 maximum".to_string(),
        }
    );
}

#[test]
fn non_json_error_bodies_keep_their_text() {
    assert_eq!(
        error_from_response("anthropic", 502, None, "<html>Bad Gateway</html>\n"),
        LlmError::Server {
            provider: "anthropic".to_string(),
            status: 502,
            message: "<html>Bad Gateway</html>".to_string(),
        }
    );
    assert_eq!(
        error_from_response("anthropic", 500, None, ""),
        LlmError::Server {
            provider: "anthropic".to_string(),
            status: 500,
            message: "HTTP 500".to_string(),
        }
    );
    let LlmError::BadRequest { message, .. } =
        error_from_response("anthropic", 418, None, &"x".repeat(2000))
    else {
        panic!("418 is a bad request");
    };
    assert_eq!(message, format!("{}…", "x".repeat(500)));
}

#[test]
fn oauth_tokens_go_as_bearer_with_the_beta_flag_and_keys_as_x_api_key() {
    let request = Request {
        messages: vec![Message::User {
            content: vec![text("hi")],
        }],
        ..Request::default()
    };
    let header = |http: &HttpRequest, name: &str| {
        http.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let oauth = build_request(&model(), Some(&Secret::new("sk-ant-oat01-abc")), &request);
    assert_eq!(
        header(&oauth, "authorization").as_deref(),
        Some("Bearer sk-ant-oat01-abc")
    );
    assert_eq!(
        header(&oauth, "anthropic-beta").as_deref(),
        Some("oauth-2025-04-20")
    );
    assert_eq!(header(&oauth, "x-api-key"), None);
    let key = build_request(&model(), Some(&Secret::new("sk-ant-api03-xyz")), &request);
    assert_eq!(
        header(&key, "x-api-key").as_deref(),
        Some("sk-ant-api03-xyz")
    );
    assert_eq!(header(&key, "authorization"), None);
}
