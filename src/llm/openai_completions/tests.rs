//! Tests of the OpenAI Chat Completions wire format: request bodies for
//! OpenAI and compatible servers, every fixture parsed at every byte split,
//! and error classification.

use super::*;
use crate::llm::{Api, MessageBuilder, Pricing, ToolCall, ToolSpec};
use pretty_assertions::assert_eq;

fn model(provider: &str, id: &str, reasoning: bool) -> Model {
    Model {
        provider: provider.to_string(),
        id: id.to_string(),
        name: id.to_string(),
        api: Api::OpenaiCompletions,
        base_url: "https://api.example.com/v1".to_string(),
        reasoning,
        image_input: true,
        context_window: 400_000,
        max_tokens: 128_000,
        pricing: Pricing::default(),
        headers: Vec::new(),
    }
}

fn text_content(text: &str) -> Content {
    Content::text(text)
}

fn image(data: &str) -> Content {
    Content::Image {
        data: data.to_string(),
        mime_type: "image/png".to_string(),
    }
}

fn assistant(content: Vec<AssistantContent>) -> Message {
    Message::Assistant(AssistantMessage {
        content,
        provider: "openai".to_string(),
        api: Api::OpenaiCompletions,
        model: "gpt-5".to_string(),
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

/// System prompt, a user message with an image, an assistant turn with
/// thinking, text and two calls (one with unparsable arguments), their
/// results (one with an image), and a follow-up.
fn conversation() -> Request {
    Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: "You are pincer.".to_string(),
        messages: vec![
            Message::User {
                content: vec![text_content("What is in this picture?"), image("UE5HMQ==")],
            },
            assistant(vec![
                AssistantContent::Thinking {
                    thinking: "I should read both files.".to_string(),
                    signature: None,
                    redacted: false,
                },
                AssistantContent::Text {
                    text: "Reading the files.".to_string(),
                },
                AssistantContent::ToolCall(ToolCall {
                    id: "call_01".to_string(),
                    name: "read".to_string(),
                    arguments: json!({"path": "hello.txt"}),
                    arguments_error: None,
                }),
                AssistantContent::ToolCall(ToolCall {
                    id: "call_02".to_string(),
                    name: "read".to_string(),
                    arguments: json!("{\"path\": \"shot.png"),
                    arguments_error: Some("arguments are not valid JSON: EOF".to_string()),
                }),
            ]),
            tool_result("call_01", vec![text_content("hello")]),
            tool_result(
                "call_02",
                vec![text_content("Read shot.png"), image("UE5HMg==")],
            ),
            Message::User {
                content: vec![text_content("Thanks."), text_content("Now summarise.")],
            },
        ],
        tools: vec![ToolSpec {
            name: "read".to_string(),
            description: "Read a file.".to_string(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            })
            .into(),
        }],
        thinking: ThinkingLevel::High,
        max_tokens: None,
    }
}

fn expected_messages(system_role: &str) -> Value {
    json!([
        {"role": system_role, "content": "You are pincer."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,UE5HMQ=="}},
        ]},
        {"role": "assistant", "content": "Reading the files.", "tool_calls": [
            {"id": "call_01", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\":\"hello.txt\"}"}},
            {"id": "call_02", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\": \"shot.png"}},
        ]},
        {"role": "tool", "tool_call_id": "call_01", "content": "hello"},
        {"role": "tool", "tool_call_id": "call_02",
         "content": "Read shot.png\n(The image is attached in the next user message.)"},
        {"role": "user", "content": [
            {"type": "text", "text": "Image output of the read tool call call_02:"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,UE5HMg=="}},
        ]},
        {"role": "user", "content": "Thanks.\nNow summarise."},
    ])
}

fn expected_tools() -> Value {
    json!([{
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }])
}

#[test]
fn openai_request_uses_developer_role_and_max_completion_tokens() {
    let model = model("openai", "gpt-5", true);
    let http = build_request(&model, Some(&Secret::new("sk-test")), &conversation());
    assert_eq!(http.url, "https://api.example.com/v1/chat/completions");
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
            "messages": expected_messages("developer"),
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": expected_tools(),
            "max_completion_tokens": 32_000,
            "reasoning_effort": "high",
        })
    );
}

#[test]
fn compatible_request_uses_system_role_and_max_tokens() {
    let mut model = model("ollama", "qwen3", true);
    model.base_url = "http://127.0.0.1:11434/v1".to_string();
    model.headers = vec![("x-team".to_string(), "a".to_string())];
    let mut request = conversation();
    request.thinking = ThinkingLevel::Minimal;
    request.max_tokens = Some(1_000);
    let http = build_request(&model, None, &request);
    assert_eq!(http.url, "http://127.0.0.1:11434/v1/chat/completions");
    assert_eq!(
        http.headers,
        vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-team".to_string(), "a".to_string()),
        ]
    );
    assert_eq!(
        http.body,
        json!({
            "model": "qwen3",
            "messages": expected_messages("system"),
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": expected_tools(),
            "max_tokens": 1_000,
            "reasoning_effort": "minimal",
        })
    );
}

#[test]
fn plain_models_get_no_effort_and_empty_parts_are_left_out() {
    // A non-reasoning OpenAI model: `system` role, no reasoning_effort.
    // No system prompt, no tools, and an assistant turn that only thought
    // (an aborted one) are all omitted.
    let model = model("openai", "gpt-4.1", false);
    let request = Request {
        cache_key: None,
        cache_retention: Default::default(),
        system: String::new(),
        messages: vec![
            Message::User {
                content: vec![text_content("hi")],
            },
            assistant(vec![AssistantContent::Thinking {
                thinking: "hm".to_string(),
                signature: None,
                redacted: false,
            }]),
            Message::User {
                content: vec![text_content("hello?")],
            },
            assistant(vec![AssistantContent::ToolCall(ToolCall {
                id: "call_9".to_string(),
                name: "ls".to_string(),
                arguments: json!({}),
                arguments_error: None,
            })]),
            tool_result("call_9", vec![]),
        ],
        tools: Vec::new(),
        thinking: ThinkingLevel::High,
        max_tokens: None,
    };
    let mut small = model.clone();
    small.max_tokens = 16_384;
    let http = build_request(&small, None, &request);
    assert_eq!(
        http.body,
        json!({
            "model": "gpt-4.1",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "user", "content": "hello?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_9", "type": "function",
                     "function": {"name": "ls", "arguments": "{}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_9", "content": ""},
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": 16_384,
        })
    );
}

/// Parses `input` split into two chunks at every byte boundary, checks
/// that every split gives the same events and ends finished, and
/// returns those events.
fn parse_every_split(input: &str) -> Vec<StreamEvent> {
    // The parser sees nothing but the decoder's events, which are the same
    // at every split point: so is what it makes of them.
    let mut parser = Parser::new("openai");
    parser.nonce = "n".to_string();
    let mut events = Vec::new();
    for event in sse::tests::events_at_every_split(input.as_bytes()) {
        events.extend(parser.on_event(&event).unwrap());
    }
    assert!(parser.finished(), "not finished");
    events
}

fn build(events: &[StreamEvent], model: &Model) -> AssistantMessage {
    let mut builder = MessageBuilder::new();
    for event in events {
        builder.apply(event);
    }
    builder.finish(model, None, None)
}

fn reply(
    content: Vec<AssistantContent>,
    stop_reason: StopReason,
    usage: Usage,
) -> AssistantMessage {
    AssistantMessage {
        content,
        provider: "openai".to_string(),
        api: Api::OpenaiCompletions,
        model: "gpt-4.1".to_string(),
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

fn call(id: &str, arguments: Value) -> AssistantContent {
    AssistantContent::ToolCall(ToolCall {
        id: id.to_string(),
        name: "read".to_string(),
        arguments,
        arguments_error: None,
    })
}

fn text_block(s: &str) -> AssistantContent {
    AssistantContent::Text {
        text: s.to_string(),
    }
}

#[test]
fn text_fixture() {
    let events = parse_every_split(include_str!("../../../fixtures/openai/text.sse"));
    assert_eq!(
        events,
        vec![
            text("Hello"),
            text(" from"),
            text(" the"),
            text(" mock"),
            text(" model"),
            text("."),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(19, 7, 0)),
        ]
    );
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model),
        reply(
            vec![text_block("Hello from the mock model.")],
            StopReason::Stop,
            usage(19, 7, 0)
        )
    );
}

#[test]
fn tool_read_fixture() {
    let events = parse_every_split(include_str!("../../../fixtures/openai/tool_read.sse"));
    assert_eq!(
        events,
        vec![
            start("call_01", "read"),
            args("call_01", "{\""),
            args("call_01", "path"),
            args("call_01", "\":"),
            args("call_01", " \""),
            args("call_01", "hello"),
            args("call_01", ".txt"),
            args("call_01", "\"}"),
            StreamEvent::Stop(StopReason::ToolUse),
            StreamEvent::Usage(usage(230, 17, 1920)),
        ]
    );
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model),
        reply(
            vec![call("call_01", json!({"path": "hello.txt"}))],
            StopReason::ToolUse,
            usage(230, 17, 1920)
        )
    );
}

#[test]
fn after_tool_fixture() {
    let events = parse_every_split(include_str!("../../../fixtures/openai/after_tool.sse"));
    assert_eq!(
        events,
        vec![
            text("The"),
            text(" file"),
            text(" says"),
            text(" hello"),
            text("."),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(156, 6, 2048)),
        ]
    );
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model),
        reply(
            vec![text_block("The file says hello.")],
            StopReason::Stop,
            usage(156, 6, 2048)
        )
    );
}

#[test]
fn reasoning_fixture() {
    let events = parse_every_split(include_str!("../../../fixtures/openai/reasoning.sse"));
    assert_eq!(
        events,
        vec![
            thinking("The user"),
            thinking(" greets"),
            thinking(" me"),
            thinking(". A short"),
            thinking(" friendly"),
            thinking(" answer"),
            thinking(" will do"),
            thinking("."),
            text("Hello"),
            text("!"),
            text(" How"),
            text(" can I"),
            text(" help"),
            text("?"),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(8, 31, 32)),
        ]
    );
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model),
        reply(
            vec![
                AssistantContent::Thinking {
                    thinking: "The user greets me. A short friendly answer will do.".to_string(),
                    signature: None,
                    redacted: false,
                },
                text_block("Hello! How can I help?"),
            ],
            StopReason::Stop,
            usage(8, 31, 32)
        )
    );
}

#[test]
fn length_fixture() {
    let events = parse_every_split(include_str!("../../../fixtures/openai/length.sse"));
    assert_eq!(
        events,
        vec![
            text("The"),
            text(" answer"),
            text(" is"),
            text(" a"),
            text(" long"),
            StreamEvent::Stop(StopReason::Length),
            StreamEvent::Usage(usage(25, 5, 0)),
        ]
    );
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model),
        reply(
            vec![text_block("The answer is a long")],
            StopReason::Length,
            usage(25, 5, 0)
        )
    );
}

#[test]
fn two_tools_fixture() {
    let events = parse_every_split(include_str!("../../../fixtures/openai/two_tools.sse"));
    let fragments = |id: &str, file: &str| {
        ["{\"", "path", "\":", " \"", file, "\"}"]
            .into_iter()
            .map(|f| args(id, f))
            .collect::<Vec<_>>()
    };
    let mut expected = vec![start("call_01", "read")];
    expected.extend(fragments("call_01", "a.txt"));
    expected.push(start("call_02", "read"));
    expected.extend(fragments("call_02", "b.txt"));
    expected.push(StreamEvent::Stop(StopReason::ToolUse));
    expected.push(StreamEvent::Usage(usage(2160, 34, 0)));
    assert_eq!(events, expected);
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model),
        reply(
            vec![
                call("call_01", json!({"path": "a.txt"})),
                call("call_02", json!({"path": "b.txt"})),
            ],
            StopReason::ToolUse,
            usage(2160, 34, 0)
        )
    );
}

#[test]
fn ollama_style_stream_without_call_ids() {
    // Ollama: `reasoning` instead of `reasoning_content`, a whole tool
    // call in one chunk without an id, finish_reason "stop" despite the
    // call; plus an OpenRouter-style keep-alive comment.
    let input = concat!(
        ": OPENROUTER PROCESSING\n\n",
        "data: {\"id\":\"chatcmpl-42\",\"object\":\"chat.completion.chunk\",\"created\":1761900000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"reasoning\":\"Need the file.\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-42\",\"object\":\"chat.completion.chunk\",\"created\":1761900000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"chatcmpl-42\",\"object\":\"chat.completion.chunk\",\"created\":1761900000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: {\"id\":\"chatcmpl-42\",\"object\":\"chat.completion.chunk\",\"created\":1761900000,\"model\":\"qwen3\",\"system_fingerprint\":\"fp_ollama\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":12,\"total_tokens\":62}}\n\n",
        "data: [DONE]\n\n",
    );
    let events = parse_every_split(input);
    assert_eq!(
        events,
        vec![
            thinking("Need the file."),
            start("call_0_n", "read"),
            args("call_0_n", "{\"path\":\"a.txt\"}"),
            StreamEvent::Stop(StopReason::Stop),
            StreamEvent::Usage(usage(50, 12, 0)),
        ]
    );
    let model = model("openai", "gpt-4.1", false);
    assert_eq!(
        build(&events, &model).stop_reason,
        StopReason::ToolUse,
        "a call under finish_reason stop still asks for tools"
    );
}

fn feed(parser: &mut Parser, data: &str) -> Result<Vec<StreamEvent>, LlmError> {
    parser.on_event(&sse::Event {
        data: data.to_string(),
        ..sse::Event::default()
    })
}

#[test]
fn tool_calls_without_index_or_with_a_reused_index() {
    let mut parser = Parser::new("gemini");
    // Whole calls without an index, then a server that numbers every
    // call 0 and tells them apart by id only.
    let events = feed(
        &mut parser,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[
            {"id":"a","type":"function","function":{"name":"read","arguments":"{}"}},
            {"id":"b","type":"function","function":{"name":"ls","arguments":{"path":"."}}}
        ]}}]}"#,
    )
    .unwrap();
    assert_eq!(
        events,
        vec![
            start("a", "read"),
            args("a", "{}"),
            start("b", "ls"),
            args("b", "{\"path\":\".\"}"),
        ]
    );
    let mut parser = Parser::new("compat");
    let mut events = Vec::new();
    for data in [
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":"{\"p"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c2","function":{"name":"ls","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ] {
        events.extend(feed(&mut parser, data).unwrap());
    }
    assert_eq!(
        events,
        vec![
            start("c1", "read"),
            args("c1", "{\"p"),
            args("c1", "\":1}"),
            start("c2", "ls"),
            args("c2", "{}"),
            StreamEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn arguments_before_the_name_are_held_back() {
    let mut parser = Parser::new("compat");
    parser.nonce = "n".to_string();
    let mut events = Vec::new();
    for data in [
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"read","arguments":":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"function_call"}]}"#,
    ] {
        events.extend(feed(&mut parser, data).unwrap());
    }
    assert_eq!(
        events,
        vec![
            start("call_0_n", "read"),
            args("call_0_n", "{\"a\":1}"),
            // Never named: started at the finish so the model sees it fail.
            start("call_1_n", ""),
            args("call_1_n", "{}"),
            StreamEvent::Stop(StopReason::ToolUse),
        ]
    );
}

#[test]
fn finish_reasons_map_to_stop_reasons() {
    assert_eq!(
        [
            "stop",
            "length",
            "tool_calls",
            "function_call",
            "content_filter",
            "eos"
        ]
        .map(map_finish_reason),
        [
            StopReason::Stop,
            StopReason::Length,
            StopReason::ToolUse,
            StopReason::ToolUse,
            StopReason::Refusal,
            StopReason::Stop,
        ]
    );
}

#[test]
fn error_chunks_become_typed_errors() {
    let error = |data: &str| feed(&mut Parser::new("openai"), data).unwrap_err();
    assert_eq!(
        error(
            r#"{"error":{"message":"Rate limit reached for gpt-4.1","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#
        ),
        LlmError::RateLimit {
            provider: "openai".to_string(),
            message: "Rate limit reached for gpt-4.1".to_string(),
            retry_after: None,
        }
    );
    assert_eq!(
        error(
            r#"{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#
        ),
        LlmError::Billing {
            provider: "openai".to_string(),
            message: "You exceeded your current quota.".to_string(),
        }
    );
    assert_eq!(
        error(
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#
        ),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 500,
            message: "The server had an error while processing your request.".to_string(),
        }
    );
    // OpenRouter puts the HTTP status in `code`, next to the chunk fields.
    assert_eq!(
        error(
            r#"{"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider returned error"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#
        ),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 502,
            message: "Provider returned error".to_string(),
        }
    );
    // llama.cpp's context overflow.
    assert_eq!(
        error(
            r#"{"error":{"code":400,"message":"request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9412,"n_ctx":8192}}"#
        ),
        LlmError::ContextOverflow {
            provider: "openai".to_string(),
            message: "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it".to_string(),
        }
    );
    // Ollama's plain string.
    assert_eq!(
        error(r#"{"error":"unexpected EOF"}"#),
        LlmError::Server {
            provider: "openai".to_string(),
            status: 500,
            message: "unexpected EOF".to_string(),
        }
    );
}

#[test]
fn invalid_json_is_a_malformed_stream() {
    let error = feed(&mut Parser::new("vllm"), "{\"choices\": [").unwrap_err();
    assert!(
        matches!(&error, LlmError::MalformedStream { provider, .. } if provider == "vllm"),
        "{error:?}"
    );
    let error = feed(
        &mut Parser::new("vllm"),
        r#"{"choices":[{"delta":{"content":7}}]}"#,
    )
    .unwrap_err();
    assert!(
        matches!(error, LlmError::MalformedStream { .. }),
        "{error:?}"
    );
}

#[test]
fn only_done_finishes_the_stream() {
    let body = include_str!("../../../fixtures/openai/text.sse");
    let cut = body.replace("data: [DONE]\n\n", "");
    let mut decoder = sse::Decoder::new();
    let mut parser = Parser::new("llamacpp");
    for event in decoder.feed(cut.as_bytes()) {
        parser.on_event(&event).unwrap();
    }
    assert!(!parser.finished());
    assert_eq!(feed(&mut parser, "[DONE]").unwrap(), vec![]);
    assert!(parser.finished());
    assert_eq!(feed(&mut parser, "{not json").unwrap(), vec![]);
}

#[test]
fn error_responses_are_classified() {
    let openai =
        |status, retry_after, body| error_from_response("openai", status, retry_after, body);
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
            Some(Duration::from_secs(2)),
            r#"{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again in 2s.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#
        ),
        LlmError::RateLimit {
            provider: "openai".to_string(),
            message:
                "Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again in 2s."
                    .to_string(),
            retry_after: Some(Duration::from_secs(2)),
        }
    );
    assert_eq!(
        openai(
            429,
            None,
            r#"{"error":{"message":"You exceeded your current plan, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#
        ),
        LlmError::Billing {
            provider: "openai".to_string(),
            message: "You exceeded your current plan, please check your plan and billing details."
                .to_string(),
        }
    );
    assert_eq!(
        openai(
            400,
            None,
            r#"{"error":{"message":"Your input exceeds the limit of this model.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#
        ),
        LlmError::ContextOverflow {
            provider: "openai".to_string(),
            message: "Your input exceeds the limit of this model.".to_string(),
        }
    );
    assert_eq!(
        error_from_response("ollama", 404, None, r#"{"error":"model \"x\" not found"}"#),
        LlmError::ModelNotFound {
            provider: "ollama".to_string(),
            message: "model \"x\" not found".to_string(),
        }
    );
    // vLLM's bare error object.
    assert_eq!(
        error_from_response(
            "vllm",
            404,
            None,
            r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#
        ),
        LlmError::ModelNotFound {
            provider: "vllm".to_string(),
            message: "The model `x` does not exist.".to_string(),
        }
    );
}

#[test]
fn non_json_error_bodies_are_truncated() {
    let page = format!("<html>{}</html>", "x".repeat(1_000));
    assert_eq!(
        error_from_response("proxy", 502, None, &page),
        LlmError::Server {
            provider: "proxy".to_string(),
            status: 502,
            message: format!("<html>{}…", "x".repeat(494)),
        }
    );
    assert_eq!(
        error_from_response("proxy", 500, None, "  "),
        LlmError::Server {
            provider: "proxy".to_string(),
            status: 500,
            message: "HTTP 500 with an empty body".to_string(),
        }
    );
}

#[test]
fn minimal_effort_becomes_low_for_o_series_models() {
    assert_eq!(super::reasoning_effort("o3", ThinkingLevel::Minimal), "low");
    assert_eq!(
        super::reasoning_effort("o4-mini", ThinkingLevel::Minimal),
        "low"
    );
    assert_eq!(
        super::reasoning_effort("gpt-5", ThinkingLevel::Minimal),
        "minimal"
    );
    assert_eq!(super::reasoning_effort("o3", ThinkingLevel::High), "high");
    assert_eq!(
        super::reasoning_effort("ollama-model", ThinkingLevel::Minimal),
        "minimal"
    );
}

#[test]
fn cached_prompt_tokens_count_as_cache_reads() {
    let wire: WireUsage = serde_json::from_value(json!({
        "prompt_tokens": 12_000,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 11_264},
    }))
    .unwrap();
    let usage = wire.into_usage().unwrap();
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
fn openai_gets_the_session_as_prompt_cache_key_and_compatible_servers_do_not() {
    let request = Request {
        cache_key: Some("sess-1".into()),
        cache_retention: Default::default(),
        ..conversation()
    };
    let openai = build_request(&model("openai", "gpt-4.1", false), None, &request);
    assert_eq!(openai.body["prompt_cache_key"], json!("sess-1"));
    let other = build_request(&model("ollama", "llama3", false), None, &request);
    assert_eq!(other.body.get("prompt_cache_key"), None);
}
