//! Tests of the Gemini wire format: request bodies (thought signatures,
//! merged tool results, cleaned schemas), every fixture parsed at every
//! byte split, and error classification.

use super::*;
use crate::llm::{Api, MessageBuilder, Pricing, ToolCall};
use pretty_assertions::assert_eq;

/// The `api` field plays no part in this wire format; any variant does.
fn model(id: &str, reasoning: bool) -> Model {
    Model {
        provider: "google".to_string(),
        id: id.to_string(),
        name: id.to_string(),
        api: Api::GoogleGenerativeAi,
        base_url: "https://generativelanguage.googleapis.com/v1beta".to_string(),
        reasoning,
        image_input: true,
        context_window: 1_048_576,
        max_tokens: 65_536,
        // Zero prices keep the expected messages free of float arithmetic.
        pricing: Pricing::default(),
        headers: Vec::new(),
    }
}

fn image(data: &str) -> Content {
    Content::Image {
        data: data.to_string(),
        mime_type: "image/png".to_string(),
    }
}

fn assistant(provider: &str, model_id: &str, content: Vec<AssistantContent>) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        provider: provider.to_string(),
        api: Api::GoogleGenerativeAi,
        model: model_id.to_string(),
        auth_profile: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
        usage: Usage::default(),
    })
}

fn tool_result(id: &str, content: Vec<Content>, is_error: bool) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.to_string(),
        tool_name: "read".to_string(),
        content,
        is_error,
    })
}

fn thinking_block(thinking: &str, signature: Option<&str>) -> AssistantContent {
    AssistantContent::Thinking {
        thinking: thinking.to_string(),
        signature: signature.map(str::to_string),
        redacted: false,
    }
}

fn text_block(text: &str) -> AssistantContent {
    AssistantContent::Text {
        text: text.to_string(),
    }
}

fn call_block(id: &str, arguments: Value, error: Option<&str>) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.to_string(),
        name: "read".to_string(),
        arguments,
        arguments_error: error.map(str::to_string),
    })
}

/// A schema as schemars and hand-written tools produce them, full of
/// keywords Gemini rejects.
fn read_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ReadArgs",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "path": {"type": "string", "description": "File to read."},
            "offset": {"type": ["integer", "null"], "format": "uint", "minimum": 0},
            "mode": {"$ref": "#/$defs/Mode"},
            "ranges": {"type": "array", "items": {"$ref": "#/$defs/Range"}, "maxItems": 4},
            "when": {"type": "string", "format": "date-time"},
            "email": {"type": "string", "format": "email", "pattern": "^.+@.+$"},
            "encoding": {
                "anyOf": [{"type": "string", "enum": ["utf8", "latin1"]}, {"type": "null"}],
                "default": null,
            },
            "kind": {"oneOf": [{"const": "file"}, {"const": "dir"}]},
            "both": {"allOf": [
                {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]},
                {"properties": {"b": {"type": "number", "format": "double"}}},
            ]},
        },
        "required": ["path", "not_a_property"],
        "$defs": {
            "Mode": {"type": "string", "enum": ["text", "binary"], "description": "How to read."},
            "Range": {
                "type": "object",
                "properties": {
                    "start": {"type": "integer", "format": "int64"},
                    "end": {"type": "integer", "exclusiveMinimum": 0},
                },
                "required": ["start"],
                "additionalProperties": false,
            },
        },
    })
}

fn cleaned_read_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to read."},
            "offset": {"type": "integer", "minimum": 0, "nullable": true},
            "mode": {"type": "string", "enum": ["text", "binary"], "description": "How to read."},
            "ranges": {
                "type": "array",
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "properties": {
                        "start": {"type": "integer", "format": "int64"},
                        "end": {"type": "integer"},
                    },
                    "required": ["start"],
                },
            },
            "when": {"type": "string", "format": "date-time"},
            "email": {"type": "string", "pattern": "^.+@.+$"},
            "encoding": {"type": "string", "enum": ["utf8", "latin1"], "nullable": true},
            "kind": {"anyOf": [
                {"type": "string", "enum": ["file"]},
                {"type": "string", "enum": ["dir"]},
            ]},
            "both": {
                "type": "object",
                "properties": {
                    "a": {"type": "boolean"},
                    "b": {"type": "number", "format": "double"},
                },
                "required": ["a"],
            },
        },
        "required": ["path"],
    })
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read".to_string(),
            description: "Read a file.".to_string(),
            parameters: read_schema().into(),
        },
        ToolSpec {
            name: "ls".to_string(),
            description: "List the directory.".to_string(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false})
                .into(),
        },
    ]
}

/// A tool round trip with Gemini's own signatures: thinking before two
/// calls, their results (one failed, with an image), a user message, and a
/// text answer whose signature came after its text.
fn conversation() -> Request {
    Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: "You are pincer.".to_string(),
        messages: vec![
            Message::User {
                content: vec![
                    Content::text("What do these say?"),
                    Content::text(" "),
                    image("UE5HMQ=="),
                ],
            },
            assistant(
                "google",
                "gemini-2.5-pro",
                vec![
                    thinking_block("I need both files.", Some("sig-1")),
                    call_block("call_0_x", json!({"path": "a.txt"}), None),
                    call_block(
                        "call_1_x",
                        json!("{\"path\": \"shot"),
                        Some("arguments are not valid JSON: EOF"),
                    ),
                ],
            ),
            tool_result(
                "call_0_x",
                vec![Content::text("alpha"), Content::text("beta")],
                false,
            ),
            tool_result(
                "call_1_x",
                vec![Content::text("No such file."), image("UE5HMg==")],
                true,
            ),
            Message::User {
                content: vec![Content::text("Compare them.")],
            },
            assistant(
                "google",
                "gemini-2.5-pro",
                vec![
                    thinking_block("Comparing.", None),
                    text_block("They differ."),
                    thinking_block("", Some("sig-2")),
                ],
            ),
            // A reply that failed before it produced anything.
            assistant("google", "gemini-2.5-pro", vec![]),
            Message::User {
                content: vec![Content::text("Thanks.")],
            },
        ],
        tools: tools(),
        thinking: ThinkingLevel::High,
        max_tokens: None,
    }
}

#[test]
fn request_body_for_a_tool_round_trip() {
    let model = model("gemini-2.5-pro", true);
    let http = build_request(&model, Some(&Secret::new("AIza-test")), &conversation());
    assert_eq!(
        http.url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert_eq!(
        http.headers,
        vec![
            ("x-goog-api-key".to_string(), "AIza-test".to_string()),
            ("content-type".to_string(), "application/json".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "contents": [
                {"role": "user", "parts": [
                    {"text": "What do these say?"},
                    {"inlineData": {"mimeType": "image/png", "data": "UE5HMQ=="}},
                ]},
                {"role": "model", "parts": [
                    {"functionCall": {"name": "read", "args": {"path": "a.txt"}},
                     "thoughtSignature": "sig-1"},
                    {"functionCall": {"name": "read", "args": {}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read", "response": {"output": "alpha\nbeta"}}},
                    {"functionResponse": {"name": "read", "response": {"error": "No such file."}}},
                    {"text": "Image output of the read tool call:"},
                    {"inlineData": {"mimeType": "image/png", "data": "UE5HMg=="}},
                    {"text": "Compare them."},
                ]},
                {"role": "model", "parts": [
                    {"text": "They differ.", "thoughtSignature": "sig-2"},
                ]},
                {"role": "user", "parts": [{"text": "Thanks."}]},
            ],
            "systemInstruction": {"parts": [{"text": "You are pincer."}]},
            "tools": [{"functionDeclarations": [
                {"name": "read", "description": "Read a file.", "parameters": cleaned_read_schema()},
                {"name": "ls", "description": "List the directory."},
            ]}],
            "generationConfig": {
                "maxOutputTokens": 48_384,
                "thinkingConfig": {"thinkingBudget": 16_384, "includeThoughts": true},
            },
        })
    );
}

#[test]
fn gemini_3_gets_levels_and_stand_in_signatures_for_foreign_calls() {
    // The history comes from another provider: its signature is not
    // Gemini's, its thinking stays behind, and Gemini 3 needs the stand-in
    // signature on the first call of the step.
    let mut model = model("gemini-3-pro-preview", true);
    model.headers = vec![("X-Goog-Api-Key".to_string(), "from-config".to_string())];
    let request = Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: String::new(),
        messages: vec![
            Message::User {
                content: vec![Content::text("Read a and b.")],
            },
            assistant(
                "anthropic",
                "claude-sonnet-4-5",
                vec![
                    thinking_block("Two reads.", Some("EqQBCkYIBxgCKkD")),
                    text_block("Reading."),
                    call_block("toolu_1", json!({"path": "a"}), None),
                    call_block("toolu_2", json!({"path": "b"}), None),
                ],
            ),
            tool_result("toolu_1", vec![], false),
            tool_result("toolu_2", vec![image("UE5HMw==")], false),
        ],
        tools: Vec::new(),
        thinking: ThinkingLevel::Minimal,
        max_tokens: Some(1_000),
    };
    let http = build_request(&model, Some(&Secret::new("AIza-test")), &request);
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("X-Goog-Api-Key".to_string(), "from-config".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Read a and b."}]},
                {"role": "model", "parts": [
                    {"text": "Reading."},
                    {"functionCall": {"name": "read", "args": {"path": "a"}},
                     "thoughtSignature": "skip_thought_signature_validator"},
                    {"functionCall": {"name": "read", "args": {"path": "b"}}},
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "read", "response": {"output": ""}}},
                    {"functionResponse": {"name": "read",
                     "response": {"output": "(the output is the image below)"}}},
                    {"text": "Image output of the read tool call:"},
                    {"inlineData": {"mimeType": "image/png", "data": "UE5HMw=="}},
                ]},
            ],
            "generationConfig": {
                "maxOutputTokens": 2_024,
                "thinkingConfig": {"thinkingLevel": "low", "includeThoughts": true},
            },
        })
    );
}

#[test]
fn thinking_off_or_a_plain_model_sends_no_thinking_config() {
    let mut request = conversation();
    request.thinking = ThinkingLevel::Off;
    let body = build_request(&model("gemini-2.5-pro", true), None, &request).body;
    assert_eq!(body["generationConfig"], json!({"maxOutputTokens": 32_000}));
    request.thinking = ThinkingLevel::High;
    let mut small = model("models/gemini-2.0-flash", false);
    small.max_tokens = 8_192;
    let http = build_request(&small, None, &request);
    assert_eq!(
        http.body["generationConfig"],
        json!({"maxOutputTokens": 8_192})
    );
    assert_eq!(
        http.url,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    );
    // Signatures of another Gemini model are not sent either.
    assert_eq!(
        http.body["contents"][1],
        json!({"role": "model", "parts": [
            {"functionCall": {"name": "read", "args": {"path": "a.txt"}}},
            {"functionCall": {"name": "read", "args": {}}},
        ]})
    );
}

#[test]
fn recursive_and_odd_schemas_are_cut_down() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/definitions/Node"},
            "anything": true,
            "choice": {"type": ["string", "integer"]},
            "level": {"type": "integer", "enum": [1, 2]},
        },
        "definitions": {
            "Node": {"type": "object", "properties": {"child": {"$ref": "#/definitions/Node"}}},
        },
    });
    let cleaned = clean_schema(&schema);
    assert_eq!(cleaned["properties"]["anything"], json!({}));
    assert_eq!(
        cleaned["properties"]["choice"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
    );
    assert_eq!(cleaned["properties"]["level"], json!({"type": "integer"}));
    // The cycle ends at the depth limit instead of recursing forever.
    let mut node = &cleaned["properties"]["tree"];
    let mut depth = 0;
    while let Some(child) = node.get("properties").and_then(|p| p.get("child")) {
        node = child;
        depth += 1;
    }
    assert!((4..=MAX_SCHEMA_DEPTH).contains(&depth), "{depth}");
}

/// Decodes `input` fed in two chunks split at `split`, as the stream
/// would: events until the parser fails, the error, and whether the final
/// chunk was seen.
fn parse_split(input: &[u8], split: usize) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let mut decoder = sse::Decoder::new();
    let mut parser = Parser::new("google");
    parser.nonce = "n".to_string();
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

/// A fixture that must finish cleanly: its events and the message they
/// build.
fn parse_complete(input: &str, model: &Model) -> (Vec<StreamEvent>, AssistantMessage) {
    let (events, error, finished) = parse_fixture(input);
    assert_eq!((error, finished), (None, true));
    let mut builder = MessageBuilder::new();
    for event in &events {
        builder.apply(event);
    }
    (events, builder.finish(model, None, None))
}

fn reply(
    model: &Model,
    content: Vec<AssistantContent>,
    stop_reason: StopReason,
    usage: Usage,
) -> AssistantMessage {
    AssistantMessage {
        content,
        provider: "google".to_string(),
        api: model.api,
        model: model.id.clone(),
        auth_profile: None,
        stop_reason,
        error_message: None,
        usage,
    }
}

fn usage(input: u64, output: u64, cache_read: u64) -> Usage {
    Usage {
        input,
        output,
        cache_read,
        ..Usage::default()
    }
}

fn text(s: &str) -> StreamEvent {
    StreamEvent::TextDelta(s.to_string())
}

fn thinking(s: &str) -> StreamEvent {
    StreamEvent::ThinkingDelta(s.to_string())
}

fn signature(s: &str) -> StreamEvent {
    StreamEvent::ThinkingSignature(s.to_string())
}

fn start(id: &str, name: &str) -> StreamEvent {
    StreamEvent::ToolCallStart {
        id: id.to_string(),
        name: name.to_string(),
    }
}

fn args(id: &str, json: &str) -> StreamEvent {
    StreamEvent::ToolCallDelta {
        id: id.to_string(),
        json: json.to_string(),
    }
}

#[test]
fn text_fixture() {
    let model = model("gemini-2.5-flash-lite", false);
    let (events, message) =
        parse_complete(include_str!("../../../fixtures/google/text.sse"), &model);
    assert_eq!(
        events,
        vec![
            text("Hello"),
            StreamEvent::Usage(usage(21, 0, 0)),
            text(" from the mock"),
            text(" model."),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(21, 6, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![text_block("Hello from the mock model.")],
            StopReason::Stop,
            usage(21, 6, 0)
        )
    );
}

const CALL_SIGNATURE: &str = "CiQB0e2Kb3mXz1n4a8Yk5lq2Ubz9pQf0Jm7Kq4Xw2Rj8cV0KcgHR7YprQ2lX+vT3nFq6Zb9oYxw3Lk1pN8rU4eWm5c0A7tXyJ2bQh9LfD1gKs6Vd3Mz5Ra8uOi4Ty7Ep0Hn2Cw==";

#[test]
fn tool_call_fixture_with_two_parallel_calls() {
    let model = model("gemini-2.5-pro", true);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/google/tool_call.sse"),
        &model,
    );
    let summary = "**Reading both files**\n\nThe user wants a comparison, so I need the \
                   contents of a.txt and b.txt.";
    assert_eq!(
        events,
        vec![
            thinking(summary),
            StreamEvent::Usage(usage(816, 96, 1024)),
            thinking(""),
            signature(CALL_SIGNATURE),
            start("call_0_n", "read"),
            args("call_0_n", "{\"path\":\"a.txt\"}"),
            start("call_1_n", "read"),
            args("call_1_n", "{\"path\":\"b.txt\"}"),
            StreamEvent::Stop(StopReason::ToolUse),
            StreamEvent::Usage(usage(816, 130, 1024)),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![
                thinking_block(summary, Some(CALL_SIGNATURE)),
                call_block("call_0_n", json!({"path": "a.txt"}), None),
                call_block("call_1_n", json!({"path": "b.txt"}), None),
            ],
            StopReason::ToolUse,
            usage(816, 130, 1024)
        )
    );

    // Sent back, the signature is on the first call, as it came.
    let request = Request {
        messages: vec![
            Message::Assistant(message),
            tool_result("call_0_n", vec![Content::text("alpha")], false),
            tool_result("call_1_n", vec![Content::text("beta")], false),
        ],
        ..Request::default()
    };
    assert_eq!(
        build_request(&model, None, &request).body["contents"],
        json!([
            {"role": "model", "parts": [
                {"functionCall": {"name": "read", "args": {"path": "a.txt"}},
                 "thoughtSignature": CALL_SIGNATURE},
                {"functionCall": {"name": "read", "args": {"path": "b.txt"}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "alpha"}}},
                {"functionResponse": {"name": "read", "response": {"output": "beta"}}},
            ]},
        ])
    );
}

#[test]
fn thinking_fixture_with_a_trailing_signature() {
    let model = model("gemini-2.5-flash", true);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/google/thinking.sse"),
        &model,
    );
    let sig = "CuQBAdHtim9Qw3R1mZ0sYbJk7XqT2vLp8nF4cH6gD5aE1iU9oK3yW0zV2xS7rB4tN8mC6jL1hG5fP9dQ3eR7uI2oA0sZ4wX8vY1bT6nM3kJ9lH2gF5dS8aP7qE4rW1tU0iO6yC3xV9zB2nM5lK8jH1gF4dS7aQ0wE3rT6yU9iO2pA5sD8fG1hJ4kL7zX0cV3bN6mQ==";
    assert_eq!(
        events,
        vec![
            thinking("**Greeting the user**\n\nA friendly hello"),
            StreamEvent::Usage(usage(9, 61, 0)),
            thinking(" needs no tools."),
            text("Hello! How can I"),
            text(" help you today?"),
            thinking(""),
            signature(sig),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(9, 71, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![
                thinking_block(
                    "**Greeting the user**\n\nA friendly hello needs no tools.",
                    None
                ),
                text_block("Hello! How can I help you today?"),
                thinking_block("", Some(sig)),
            ],
            StopReason::Stop,
            usage(9, 71, 0)
        )
    );
    let request = Request {
        messages: vec![Message::Assistant(message)],
        ..Request::default()
    };
    assert_eq!(
        build_request(&model, None, &request).body["contents"],
        json!([{"role": "model", "parts": [
            {"text": "Hello! How can I help you today?", "thoughtSignature": sig},
        ]}])
    );
}

#[test]
fn max_tokens_fixture() {
    let model = model("gemini-2.5-flash-lite", false);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/google/max_tokens.sse"),
        &model,
    );
    assert_eq!(
        events,
        vec![
            text("The answer is"),
            StreamEvent::Usage(usage(25, 0, 0)),
            text(" a long"),
            StreamEvent::Stop(StopReason::Length),
            StreamEvent::Usage(usage(25, 5, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![text_block("The answer is a long")],
            StopReason::Length,
            usage(25, 5, 0)
        )
    );
}

#[test]
fn safety_fixture_is_a_refusal() {
    let model = model("gemini-2.5-flash", true);
    let (events, message) =
        parse_complete(include_str!("../../../fixtures/google/safety.sse"), &model);
    assert_eq!(
        events,
        vec![
            text("Here is how"),
            StreamEvent::Usage(usage(14, 0, 0)),
            StreamEvent::Stop(StopReason::Refusal),
            StreamEvent::Usage(usage(14, 3, 0)),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![text_block("Here is how")],
            StopReason::Refusal,
            usage(14, 3, 0)
        )
    );
}

#[test]
fn a_stream_without_a_finish_reason_is_not_finished() {
    let body = include_str!("../../../fixtures/google/text.sse");
    let cut = &body[..body.rfind("data: ").unwrap()];
    let (events, error, finished) = parse_split(cut.as_bytes(), cut.len());
    assert_eq!(error, None);
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(!finished);
}

fn feed(parser: &mut Parser, data: Value) -> Result<Vec<StreamEvent>, LlmError> {
    parser.on_event(&sse::Event {
        data: data.to_string(),
        ..sse::Event::default()
    })
}

#[test]
fn call_ids_from_gemini_are_kept() {
    let mut parser = Parser::new("google");
    let events = feed(
        &mut parser,
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": "fc-7", "name": "ls"}},
        ]}, "finishReason": "STOP", "index": 0}]}),
    )
    .unwrap();
    assert_eq!(
        events,
        vec![
            start("fc-7", "ls"),
            args("fc-7", "{}"),
            StreamEvent::Stop(StopReason::ToolUse),
        ]
    );
    assert!(parser.finished());
    // Nothing after the final chunk counts.
    assert_eq!(
        feed(&mut parser, json!({"error": {"code": 500}})),
        Ok(vec![])
    );
}

#[test]
fn a_blocked_prompt_is_a_refusal() {
    let mut parser = Parser::new("google");
    let events = feed(
        &mut parser,
        json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
               "usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 40},
               "modelVersion": "gemini-2.5-flash"}),
    )
    .unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::Stop(StopReason::Refusal),
            StreamEvent::Usage(usage(40, 0, 0)),
        ]
    );
    assert!(parser.finished());
}

#[test]
fn a_malformed_function_call_fails_the_stream() {
    let mut parser = Parser::new("google");
    let error = feed(
        &mut parser,
        json!({"candidates": [{"content": {"role": "model", "parts": []},
               "finishReason": "MALFORMED_FUNCTION_CALL",
               "finishMessage": "Malformed function call: print(read(path=))", "index": 0}]}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        LlmError::MalformedStream {
            provider: "google".to_string(),
            message: "the model's turn ended with MALFORMED_FUNCTION_CALL: Malformed function \
                      call: print(read(path=))"
                .to_string(),
        }
    );
    assert!(parser.finished());
}

#[test]
fn errors_inside_the_stream_are_classified() {
    let error = |data: Value| feed(&mut Parser::new("google"), data).unwrap_err();
    assert_eq!(
        error(
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}})
        ),
        LlmError::RateLimit {
            provider: "google".to_string(),
            message: "You exceeded your current quota, please check your plan and billing details."
                .to_string(),
            retry_after: Some(Duration::from_secs(37)),
        }
    );
    assert_eq!(
        error(json!({"error": {"code": 500, "status": "INTERNAL",
            "message": "An internal error has occurred."}})),
        LlmError::Server {
            provider: "google".to_string(),
            status: 500,
            message: "An internal error has occurred.".to_string(),
        }
    );
    assert_eq!(
        error(json!({"error": {"status": "UNAVAILABLE",
            "message": "The model is overloaded. Please try again later."}})),
        LlmError::Overloaded {
            provider: "google".to_string(),
            message: "The model is overloaded. Please try again later.".to_string(),
        }
    );
    assert_eq!(
        error(json!({"error": "upstream connect error"})),
        LlmError::Server {
            provider: "google".to_string(),
            status: 500,
            message: "upstream connect error".to_string(),
        }
    );
    let error = feed(&mut Parser::new("google"), json!({"candidates": 7})).unwrap_err();
    assert!(
        matches!(&error, LlmError::MalformedStream { provider, .. } if provider == "google"),
        "{error:?}"
    );
}

#[test]
fn error_responses_are_classified() {
    let google = |status, retry_after, body: Value| {
        error_from_response("google", status, retry_after, &body.to_string())
    };
    assert_eq!(
        google(
            400,
            None,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "API key not valid. Please pass a valid API key.",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}})
        ),
        LlmError::Auth {
            provider: "google".to_string(),
            message: "API key not valid. Please pass a valid API key.".to_string(),
        }
    );
    assert_eq!(
        google(
            403,
            None,
            json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}})
        ),
        LlmError::Auth {
            provider: "google".to_string(),
            message: "Method doesn't allow unregistered callers (callers without established \
                      identity). Please use API Key or other form of API consumer identity to \
                      call this API."
                .to_string(),
        }
    );
    // The header wins over the body's RetryInfo.
    assert_eq!(
        google(
            429,
            Some(Duration::from_secs(5)),
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}})
        ),
        LlmError::RateLimit {
            provider: "google".to_string(),
            message: "You exceeded your current quota, please check your plan and billing details."
                .to_string(),
            retry_after: Some(Duration::from_secs(5)),
        }
    );
    assert_eq!(
        google(
            400,
            None,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "The input token count (1207323) exceeds the maximum number of tokens allowed (1048576)."}})
        ),
        LlmError::ContextOverflow {
            provider: "google".to_string(),
            message: "The input token count (1207323) exceeds the maximum number of tokens \
                      allowed (1048576)."
                .to_string(),
        }
    );
    assert_eq!(
        google(
            400,
            None,
            json!({"error": {"code": 400, "status": "FAILED_PRECONDITION",
                "message": "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio."}})
        ),
        LlmError::Billing {
            provider: "google".to_string(),
            message: "Gemini API free tier is not available in your country. Please enable \
                      billing on your project in Google AI Studio."
                .to_string(),
        }
    );
    assert_eq!(
        google(
            400,
            None,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "Request contains an invalid argument."}})
        ),
        LlmError::BadRequest {
            provider: "google".to_string(),
            status: 400,
            message: "Request contains an invalid argument.".to_string(),
        }
    );
    assert_eq!(
        google(
            404,
            None,
            json!([{"error": {"code": 404, "status": "NOT_FOUND",
                "message": "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent."}}])
        ),
        LlmError::ModelNotFound {
            provider: "google".to_string(),
            message: "models/gemini-9 is not found for API version v1beta, or is not supported \
                      for generateContent."
                .to_string(),
        }
    );
    assert_eq!(
        google(
            500,
            None,
            json!({"error": {"code": 500, "status": "INTERNAL",
                "message": "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"}})
        ),
        LlmError::Server {
            provider: "google".to_string(),
            status: 500,
            message: "An internal error has occurred. Please retry or report in \
                      https://developers.generativeai.google/guide/troubleshooting"
                .to_string(),
        }
    );
    assert_eq!(
        google(
            503,
            None,
            json!({"error": {"code": 503, "status": "UNAVAILABLE",
                "message": "The model is overloaded. Please try again later."}})
        ),
        LlmError::Overloaded {
            provider: "google".to_string(),
            message: "The model is overloaded. Please try again later.".to_string(),
        }
    );
    let page = format!("<html>{}</html>", "x".repeat(1_000));
    assert_eq!(
        error_from_response("google", 502, None, &page),
        LlmError::Server {
            provider: "google".to_string(),
            status: 502,
            message: format!("<html>{}…", "x".repeat(494)),
        }
    );
}

#[test]
fn cached_content_tokens_count_as_cache_reads() {
    let wire: UsageMetadata = serde_json::from_value(json!({
        "promptTokenCount": 12_000,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 10,
        "cachedContentTokenCount": 11_000,
    }))
    .unwrap();
    let usage = wire.usage();
    assert_eq!(
        (
            usage.input,
            usage.output,
            usage.cache_read,
            usage.cache_write
        ),
        (1_000, 40, 11_000, 0)
    );
}
