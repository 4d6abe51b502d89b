//! Tests of the OpenAI Responses wire format: request bodies (reasoning
//! items replayed, images in tool results), every fixture parsed at every
//! byte split, errors inside the stream and error classification.

use super::*;
use crate::llm::{Api, MessageBuilder, Pricing, ToolCall, ToolSpec};
use pretty_assertions::assert_eq;

/// The `api` field plays no part in this wire format; any variant does.
fn model(id: &str, reasoning: bool) -> Model {
    Model {
        provider: "openai".to_string(),
        id: id.to_string(),
        name: id.to_string(),
        api: Api::OpenaiResponses,
        base_url: "https://api.example.com/v1".to_string(),
        reasoning,
        image_input: true,
        context_window: 400_000,
        max_tokens: 128_000,
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

fn assistant(model_id: &str, content: Vec<AssistantContent>) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        provider: "openai".to_string(),
        api: Api::OpenaiResponses,
        model: model_id.to_string(),
        auth_profile: None,
        stop_reason: StopReason::ToolUse,
        error_message: None,
        usage: Usage::default(),
    })
}

fn tool_result(id: &str, content: Vec<Content>) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.to_string(),
        tool_name: "read".to_string(),
        content,
        is_error: false,
    })
}

fn thinking_block(thinking: &str, signature: Option<String>) -> AssistantContent {
    AssistantContent::Thinking {
        thinking: thinking.to_string(),
        signature,
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

/// A reasoning item as `response.output_item.done` delivers it.
fn reasoning_item() -> Value {
    json!({
        "id": "rs_01",
        "type": "reasoning",
        "encrypted_content": "gAAAAABenc==",
        "summary": [{"type": "summary_text", "text": "Two files to read."}],
    })
}

fn read_tool() -> ToolSpec {
    ToolSpec {
        name: "read".to_string(),
        description: "Read a file.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        })
        .into(),
    }
}

/// System prompt, a user message with an image, an assistant turn with
/// reasoning, text and two calls (one with unparsable arguments), their
/// results (one with an image, one empty), and a follow-up.
fn conversation() -> Request {
    Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: "You are pincer.".to_string(),
        messages: vec![
            Message::User {
                content: vec![Content::text("What is in this picture?"), image("UE5HMQ==")],
            },
            assistant(
                "gpt-5",
                vec![
                    thinking_block("Two files to read.", Some(reasoning_item().to_string())),
                    // Another provider's signature and an unsigned summary
                    // cannot be sent back.
                    thinking_block("Anthropic thought", Some("EqQBCkYIBxgCKkD".to_string())),
                    thinking_block("cut off", None),
                    text_block("Reading "),
                    text_block("the files."),
                    call_block("call_01", json!({"path": "hello.txt"}), None),
                    call_block(
                        "call_02",
                        json!("{\"path\": \"shot.png"),
                        Some("arguments are not valid JSON: EOF"),
                    ),
                ],
            ),
            tool_result(
                "call_01",
                vec![Content::text("hello"), Content::text("world")],
            ),
            tool_result(
                "call_02",
                vec![Content::text("Read shot.png"), image("UE5HMg==")],
            ),
            Message::User {
                content: vec![Content::text("Thanks."), Content::text("")],
            },
            assistant("gpt-5", vec![call_block("call_03", json!({}), None)]),
            tool_result("call_03", vec![]),
        ],
        tools: vec![read_tool()],
        thinking: ThinkingLevel::High,
        max_tokens: None,
    }
}

fn expected_input() -> Value {
    json!([
        {"role": "user", "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": "data:image/png;base64,UE5HMQ=="},
        ]},
        {
            "type": "reasoning",
            "encrypted_content": "gAAAAABenc==",
            "summary": [{"type": "summary_text", "text": "Two files to read."}],
        },
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "Reading the files."}]},
        {"type": "function_call", "call_id": "call_01", "name": "read",
         "arguments": "{\"path\":\"hello.txt\"}"},
        {"type": "function_call", "call_id": "call_02", "name": "read",
         "arguments": "{\"path\": \"shot.png"},
        {"type": "function_call_output", "call_id": "call_01", "output": "hello\nworld"},
        {"type": "function_call_output", "call_id": "call_02", "output": [
            {"type": "input_text", "text": "Read shot.png"},
            {"type": "input_image", "image_url": "data:image/png;base64,UE5HMg=="},
        ]},
        {"role": "user", "content": [{"type": "input_text", "text": "Thanks."}]},
        {"type": "function_call", "call_id": "call_03", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_03", "output": ""},
    ])
}

fn expected_tools() -> Value {
    json!([{
        "type": "function",
        "name": "read",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
        "strict": false,
    }])
}

#[test]
fn reasoning_request_replays_reasoning_items_without_their_ids() {
    let model = model("gpt-5", true);
    let http = build_request(&model, Some(&Secret::new("sk-test")), &conversation());
    assert_eq!(http.url, "https://api.example.com/v1/responses");
    assert_eq!(
        http.headers,
        vec![
            ("authorization".to_string(), "Bearer sk-test".to_string()),
            ("content-type".to_string(), "application/json".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "model": "gpt-5",
            "instructions": "You are pincer.",
            "input": expected_input(),
            "tools": expected_tools(),
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "reasoning": {"effort": "high", "summary": "auto"},
            "max_output_tokens": 32_000,
        })
    );
}

#[test]
fn thinking_off_still_asks_for_encrypted_reasoning() {
    let model = model("o3", true);
    let mut request = conversation();
    request.thinking = ThinkingLevel::Off;
    let body = build_request(&model, None, &request).body;
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(body.get("reasoning"), None);
    request.thinking = ThinkingLevel::Minimal;
    let body = build_request(&model, None, &request).body;
    assert_eq!(
        body["reasoning"],
        json!({"effort": "low", "summary": "auto"}),
        "o-series models have no minimal effort"
    );
}

#[test]
fn plain_models_get_no_reasoning_and_foreign_reasoning_is_left_out() {
    // A non-reasoning model: no include, no reasoning. The assistant turn
    // came from gpt-5, so its encrypted reasoning stays behind; no system
    // prompt and no tools leave their fields out; a configured header
    // replaces the default.
    let mut model = model("gpt-4.1", false);
    model.headers = vec![(
        "Content-Type".to_string(),
        "application/json; v=2".to_string(),
    )];
    let request = Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: "  ".to_string(),
        messages: vec![
            Message::User {
                content: vec![Content::text("hi")],
            },
            assistant(
                "gpt-5",
                vec![
                    thinking_block("Two files to read.", Some(reasoning_item().to_string())),
                    text_block("Hello."),
                ],
            ),
            // An aborted reply that only thought leaves no items.
            assistant("gpt-4.1", vec![thinking_block("hm", None)]),
        ],
        tools: Vec::new(),
        thinking: ThinkingLevel::High,
        max_tokens: Some(1_000),
    };
    let http = build_request(&model, None, &request);
    assert_eq!(
        http.headers,
        vec![(
            "Content-Type".to_string(),
            "application/json; v=2".to_string()
        )]
    );
    assert_eq!(
        http.body,
        json!({
            "model": "gpt-4.1",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Hello."}]},
            ],
            "stream": true,
            "store": false,
            "max_output_tokens": 1_000,
        })
    );
}

#[test]
fn signatures_without_encrypted_content_are_not_replayed() {
    let mut item = reasoning_item();
    item["encrypted_content"] = Value::Null;
    assert_eq!(replayable_reasoning(&item.to_string()), None);
    assert_eq!(replayable_reasoning("not json"), None);
    assert_eq!(
        replayable_reasoning(&json!({"type": "message", "encrypted_content": "x"}).to_string()),
        None
    );
}

#[test]
fn reasoning_effort_levels() {
    assert_eq!(reasoning_effort("gpt-5", ThinkingLevel::Minimal), "minimal");
    assert_eq!(reasoning_effort("o4-mini", ThinkingLevel::Minimal), "low");
    assert_eq!(reasoning_effort("o3", ThinkingLevel::Medium), "medium");
    assert_eq!(reasoning_effort("omni", ThinkingLevel::Minimal), "minimal");
}

/// Decodes `input` fed in two chunks split at `split`, as the stream
/// would: events until the parser fails, the error, and whether the final
/// event was seen.
fn parse_split(input: &[u8], split: usize) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
    let mut decoder = sse::Decoder::new();
    let mut parser = Parser::new("openai");
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
        provider: "openai".to_string(),
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

fn args(id: &str, json: &str) -> StreamEvent {
    StreamEvent::ToolCallDelta {
        id: id.to_string(),
        json: json.to_string(),
    }
}

#[test]
fn text_fixture() {
    let model = model("gpt-4.1", false);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/openai_responses/text.sse"),
        &model,
    );
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text(" from"),
            text(" the"),
            text(" mock"),
            text(" model"),
            text("."),
            StreamEvent::Usage(usage(19, 7, 0)),
            StreamEvent::Stop(StopReason::Stop),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![text_block("Hello from the mock model.")],
            StopReason::Stop,
            usage(19, 7, 0)
        )
    );
}

#[test]
fn tool_call_fixture() {
    let model = model("gpt-5-mini", true);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/openai_responses/tool_call.sse"),
        &model,
    );
    // The reasoning item has no summary; its signature still gets a
    // thinking block of its own.
    let item = json!({
        "id": "rs_68f4a2d15c1c8193b1e0f3a5c7d9e1f2",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAAAABo9KLRx2Tq0mWn4VbZ8cJdE1fKgH3iLjMkN5oPqR6sTuV7wXyZ9aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789-_AbCdEfGhIjKlMnOpQrStUvWxYz==",
    })
    .to_string();
    let id = "call_Qm3vX9tL2pR8sN4kJ7hW1yZc";
    assert_eq!(
        events,
        vec![
            thinking(""),
            StreamEvent::ThinkingSignature(item.clone()),
            StreamEvent::ToolCallStart {
                id: id.to_string(),
                name: "read".to_string(),
            },
            args(id, "{\""),
            args(id, "path"),
            args(id, "\":\""),
            args(id, "hello"),
            args(id, ".txt"),
            args(id, "\"}"),
            StreamEvent::Usage(usage(270, 87, 2048)),
            StreamEvent::Stop(StopReason::ToolUse),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![
                thinking_block("", Some(item)),
                AssistantContent::ToolCall(ToolCall {
                    id: id.to_string(),
                    name: "read".to_string(),
                    arguments: json!({"path": "hello.txt"}),
                    arguments_error: None,
                }),
            ],
            StopReason::ToolUse,
            usage(270, 87, 2048)
        )
    );

    // Sent back, the turn is the reasoning item without its id and the
    // call, so the next request carries the model's reasoning.
    let request = Request {
        messages: vec![Message::Assistant(message)],
        ..Request::default()
    };
    assert_eq!(
        build_request(&model, None, &request).body["input"],
        json!([
            {
                "type": "reasoning",
                "summary": [],
                "encrypted_content": "gAAAAABo9KLRx2Tq0mWn4VbZ8cJdE1fKgH3iLjMkN5oPqR6sTuV7wXyZ9aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789-_AbCdEfGhIjKlMnOpQrStUvWxYz==",
            },
            {"type": "function_call", "call_id": id, "name": "read",
             "arguments": "{\"path\":\"hello.txt\"}"},
        ])
    );
}

#[test]
fn reasoning_fixture() {
    let model = model("gpt-5", true);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/openai_responses/reasoning.sse"),
        &model,
    );
    let item = json!({
        "id": "rs_68f4a3ea0f6c8195b9a8c7d6e5f40312",
        "type": "reasoning",
        "encrypted_content": "gAAAAABo9KPqEnCrYpTeDrEaSoNiNgBlObFoRgPt5ThIsIsOnLyAfIxTuRe0123456789abcdefABCDEF-_ghijklmnopqrstuvwxyz==",
        "summary": [
            {"type": "summary_text",
             "text": "**Answering a greeting**\n\nThe user says hello. A short reply fits."},
            {"type": "summary_text", "text": "**Offering help**\n\nI will ask what they need."},
        ],
    })
    .to_string();
    assert_eq!(
        events,
        vec![
            thinking("**Answering a greeting**"),
            thinking("\n\nThe user says hello."),
            thinking(" A short reply fits."),
            thinking("\n\n"),
            thinking("**Offering help**"),
            thinking("\n\nI will ask what they need."),
            StreamEvent::ThinkingSignature(item.clone()),
            text("Hello"),
            text("!"),
            text(" How"),
            text(" can I"),
            text(" help"),
            text("?"),
            StreamEvent::Usage(usage(226, 180, 1024)),
            StreamEvent::Stop(StopReason::Stop),
        ]
    );
    assert_eq!(
        message,
        reply(
            &model,
            vec![
                thinking_block(
                    "**Answering a greeting**\n\nThe user says hello. A short reply fits.\n\n\
                     **Offering help**\n\nI will ask what they need.",
                    Some(item)
                ),
                text_block("Hello! How can I help?"),
            ],
            StopReason::Stop,
            usage(226, 180, 1024)
        )
    );
}

#[test]
fn incomplete_fixture() {
    let model = model("gpt-4.1", false);
    let (events, message) = parse_complete(
        include_str!("../../../fixtures/openai_responses/incomplete.sse"),
        &model,
    );
    assert_eq!(
        events,
        vec![
            text("The"),
            text(" answer"),
            text(" is"),
            text(" a"),
            text(" long"),
            StreamEvent::Usage(usage(25, 5, 0)),
            StreamEvent::Stop(StopReason::Length),
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
fn failed_fixture_is_a_context_overflow() {
    let (events, error, finished) = parse_fixture(include_str!(
        "../../../fixtures/openai_responses/failed.sse"
    ));
    assert_eq!(
        (events, error, finished),
        (
            vec![],
            Some(LlmError::ContextOverflow {
                provider: "openai".to_string(),
                message: "Your input exceeds the context window of this model. Please adjust \
                          your input and try again."
                    .to_string(),
            }),
            true,
        )
    );
}

#[test]
fn a_stream_cut_before_its_final_event_is_not_finished() {
    let body = include_str!("../../../fixtures/openai_responses/text.sse");
    let cut = &body[..body.find("event: response.completed").unwrap()];
    let (events, error, finished) = parse_split(cut.as_bytes(), cut.len());
    assert_eq!(error, None);
    assert_eq!(events.len(), 6, "{events:?}");
    assert!(!finished);
}

fn event(data: Value) -> sse::Event {
    sse::Event {
        event: data["type"].as_str().unwrap_or_default().to_string(),
        data: data.to_string(),
        id: None,
    }
}

fn feed(parser: &mut Parser, data: Value) -> Result<Vec<StreamEvent>, LlmError> {
    parser.on_event(&event(data))
}

#[test]
fn whole_items_without_deltas_are_still_delivered() {
    // Some compatible servers send finished items only.
    let mut parser = Parser::new("compat");
    let mut events = Vec::new();
    for data in [
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
            "id": "rs_1", "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "B"}],
        }}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {
            "id": "msg_1", "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi."}],
        }}),
        json!({"type": "response.output_item.added", "output_index": 2, "item": {
            "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "",
        }}),
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_1",
               "output_index": 2, "arguments": "{}"}),
        json!({"type": "response.output_item.done", "output_index": 3, "item": {
            "id": "fc_2", "type": "function_call", "call_id": "call_2", "name": "read",
            "arguments": "{\"path\":\"a\"}",
        }}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}}),
    ] {
        events.extend(feed(&mut parser, data).unwrap());
    }
    assert_eq!(
        events,
        vec![
            thinking("A\n\nB"),
            text("Hi."),
            StreamEvent::ToolCallStart {
                id: "call_1".to_string(),
                name: "ls".to_string(),
            },
            args("call_1", "{}"),
            StreamEvent::ToolCallStart {
                id: "call_2".to_string(),
                name: "read".to_string(),
            },
            args("call_2", "{\"path\":\"a\"}"),
            StreamEvent::Stop(StopReason::ToolUse),
        ]
    );
    assert!(parser.finished());
    // Nothing after the final event counts.
    assert_eq!(feed(&mut parser, json!({"type": "error"})), Ok(vec![]));
}

#[test]
fn refusals_are_shown_and_stop_as_refusals() {
    let mut parser = Parser::new("openai");
    let mut events = Vec::new();
    for data in [
        json!({"type": "response.output_item.added", "item": {"id": "msg_1", "type": "message"}}),
        json!({"type": "response.refusal.delta", "item_id": "msg_1", "delta": "I can't help."}),
        json!({"type": "response.refusal.done", "item_id": "msg_1", "refusal": "I can't help."}),
        json!({"type": "response.output_item.done", "item": {"id": "msg_1", "type": "message",
               "content": [{"type": "refusal", "refusal": "I can't help."}]}}),
        json!({"type": "response.completed", "response": {}}),
    ] {
        events.extend(feed(&mut parser, data).unwrap());
    }
    assert_eq!(
        events,
        vec![
            text("I can't help."),
            StreamEvent::Stop(StopReason::Refusal)
        ]
    );
}

#[test]
fn errors_inside_the_stream_are_classified() {
    let error = |data: Value| feed(&mut Parser::new("openai"), data).unwrap_err();
    assert_eq!(
        error(
            json!({"type": "error", "sequence_number": 3, "code": "rate_limit_exceeded",
                     "message": "Rate limit reached for gpt-5.", "param": null})
        ),
        LlmError::RateLimit {
            provider: "openai".to_string(),
            message: "Rate limit reached for gpt-5.".to_string(),
            retry_after: None,
        }
    );
    assert_eq!(
        error(
            json!({"type": "error", "error": {"type": "invalid_request_error",
                     "code": "insufficient_quota", "message": "You exceeded your current quota."}})
        ),
        LlmError::Billing {
            provider: "openai".to_string(),
            message: "You exceeded your current quota.".to_string(),
        }
    );
    assert_eq!(
        error(
            json!({"type": "response.failed", "response": {"status": "failed",
                     "error": {"code": "server_error", "message": "The server had an error."}}})
        ),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 500,
            message: "The server had an error.".to_string(),
        }
    );
    assert_eq!(
        error(
            json!({"type": "response.failed", "response": {"status": "failed",
                     "error": {"code": "invalid_image_url", "message": "Bad image."}}})
        ),
        LlmError::BadRequest {
            provider: "openai".to_string(),
            status: 400,
            message: "Bad image.".to_string(),
        }
    );
    assert_eq!(
        error(json!({"type": "response.failed", "response": {"status": "failed", "error": null}})),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 500,
            message: "the response failed without an error message".to_string(),
        }
    );
}

#[test]
fn invalid_json_is_a_malformed_stream() {
    let mut parser = Parser::new("openai");
    let bad = sse::Event {
        event: "response.output_text.delta".to_string(),
        data: "{\"type\":\"response.output_text.delta\",".to_string(),
        id: None,
    };
    let Err(LlmError::MalformedStream { provider, message }) = parser.on_event(&bad) else {
        panic!("bad JSON must fail the stream");
    };
    assert_eq!(provider, "openai");
    assert!(
        message.starts_with("the data of a `response.output_text.delta` event is not valid"),
        "{message}"
    );
    // Unknown event types pass.
    assert_eq!(
        feed(
            &mut parser,
            json!({"type": "response.web_search_call.searching"})
        ),
        Ok(vec![])
    );
}

#[test]
fn error_responses_are_classified() {
    let openai =
        |status, retry_after, body: &str| error_from_response("openai", status, retry_after, body);
    assert_eq!(
        openai(
            401,
            None,
            r#"{"error":{"message":"Incorrect API key provided: sk-abc.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#
        ),
        LlmError::Auth {
            provider: "openai".to_string(),
            message: "Incorrect API key provided: sk-abc.".to_string(),
        }
    );
    assert_eq!(
        openai(
            429,
            Some(Duration::from_millis(1500)),
            r#"{"error":{"message":"Rate limit reached for gpt-5 on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#
        ),
        LlmError::RateLimit {
            provider: "openai".to_string(),
            message: "Rate limit reached for gpt-5 on tokens per min (TPM).".to_string(),
            retry_after: Some(Duration::from_millis(1500)),
        }
    );
    assert_eq!(
        openai(
            429,
            None,
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#
        ),
        LlmError::Billing {
            provider: "openai".to_string(),
            message: "You exceeded your current quota, please check your plan and billing details."
                .to_string(),
        }
    );
    assert_eq!(
        openai(
            400,
            None,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":null}}"#
        ),
        LlmError::ContextOverflow {
            provider: "openai".to_string(),
            message: "Your input exceeds the context window of this model. Please adjust your \
                      input and try again."
                .to_string(),
        }
    );
    assert_eq!(
        openai(
            400,
            None,
            r#"{"error":{"message":"Item 'rs_1' of type 'reasoning' was provided without its required following item.","type":"invalid_request_error","param":"input","code":null}}"#
        ),
        LlmError::BadRequest {
            provider: "openai".to_string(),
            status: 400,
            message: "Item 'rs_1' of type 'reasoning' was provided without its required \
                      following item."
                .to_string(),
        }
    );
    assert_eq!(
        openai(
            404,
            None,
            r#"{"error":{"message":"The model `gpt-9` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#
        ),
        LlmError::ModelNotFound {
            provider: "openai".to_string(),
            message: "The model `gpt-9` does not exist or you do not have access to it."
                .to_string(),
        }
    );
    assert_eq!(
        openai(
            500,
            None,
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#
        ),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 500,
            message: "The server had an error while processing your request.".to_string(),
        }
    );
    assert_eq!(
        openai(503, None, ""),
        LlmError::Overloaded {
            provider: "openai".to_string(),
            message: "HTTP 503 with an empty body".to_string(),
        }
    );
    let page = format!("<html>{}</html>", "x".repeat(1_000));
    assert_eq!(
        openai(502, None, &page),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 502,
            message: format!("<html>{}…", "x".repeat(494)),
        }
    );
}

#[test]
fn cached_input_tokens_count_as_cache_reads() {
    let wire: WireUsage = serde_json::from_value(json!({
        "input_tokens": 12_000,
        "output_tokens": 40,
        "input_tokens_details": {"cached_tokens": 11_264},
    }))
    .unwrap();
    let usage = wire.into_usage();
    assert_eq!(
        (
            usage.input,
            usage.output,
            usage.cache_read,
            usage.cache_write
        ),
        (736, 40, 11_264, 0)
    );
}

#[test]
fn the_session_goes_as_prompt_cache_key() {
    let request = Request {
        cache_key: Some("sess-1".into()),
        cache_retention: Default::default(),
        ..conversation()
    };
    let http = build_request(&model("gpt-5", false), None, &request);
    assert_eq!(http.body["prompt_cache_key"], json!("sess-1"));
    let without = build_request(&model("gpt-5", false), None, &conversation());
    assert_eq!(without.body.get("prompt_cache_key"), None);
}
