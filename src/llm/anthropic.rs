//! Anthropic's Messages API (`POST /v1/messages` with `stream: true`).
//!
//! This file owns everything Anthropic-specific: turning a provider-neutral
//! [`Request`] into the Messages request body (content blocks, tool results
//! merged into one user turn, thinking budgets, prompt-cache breakpoints),
//! turning the named server-sent events of the streaming API back into
//! [`StreamEvent`]s, and classifying Anthropic's JSON error bodies, whether
//! they arrive as an HTTP error answer or as an `error` event mid-stream.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    AssistantContent, AssistantMessage, Content, HttpRequest, LlmError, Message, Model, Request,
    Secret, StopReason, StreamEvent, ToolResultMessage, Usage, WireFormat, sse,
};

/// The API version pincer speaks; Anthropic requires it on every request.
const API_VERSION: &str = "2023-06-01";
/// Output cap when neither the request nor a smaller model limit says less.
const DEFAULT_MAX_TOKENS: u64 = 32_000;
/// Output left for the answer itself once the thinking budget is spent.
const MIN_ANSWER_TOKENS: u64 = 1024;
/// Anthropic rejects smaller `budget_tokens`.
const MIN_THINKING_BUDGET: u64 = 1024;
/// Sent in place of an empty tool result: Anthropic rejects an error result
/// without content, and an empty text block anywhere.
const EMPTY_TOOL_RESULT: &str = "(no output)";
/// How much of a non-JSON error body (an HTML page from a proxy) to keep.
const MAX_ERROR_BODY_CHARS: usize = 500;

/// Builds the streaming Messages request for `model`.
pub fn build_request(model: &Model, key: Option<&Secret>, request: &Request) -> HttpRequest {
    let mut headers = Vec::new();
    if let Some(key) = key {
        headers.push(("x-api-key".to_string(), key.expose().to_string()));
    }
    headers.push(("anthropic-version".to_string(), API_VERSION.to_string()));
    headers.push(("content-type".to_string(), "application/json".to_string()));
    // A configured header replaces the default of the same name instead of
    // being sent twice.
    headers.retain(|(name, _)| {
        !model
            .headers
            .iter()
            .any(|(custom, _)| custom.eq_ignore_ascii_case(name))
    });
    headers.extend(model.headers.iter().cloned());

    let (max_tokens, thinking_budget) = token_limits(model, request);
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system.trim().is_empty() {
        body.insert(
            "system".into(),
            json!([{
                "type": "text",
                "text": request.system,
                "cache_control": {"type": "ephemeral"},
            }]),
        );
    }
    body.insert(
        "messages".into(),
        Value::Array(convert_messages(&request.messages)),
    );
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(budget) = thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }

    HttpRequest {
        url: format!("{}/v1/messages", model.base_url),
        headers,
        body: Value::Object(body),
    }
}

/// `max_tokens` and the thinking budget, if thinking is on. Anthropic counts
/// thinking against `max_tokens` and requires `max_tokens > budget_tokens`,
/// so the budget is added on top of the answer's cap, within the model's
/// limit, and shrunk when that limit leaves too little room for the answer.
fn token_limits(model: &Model, request: &Request) -> (u64, Option<u64>) {
    let base = request
        .max_tokens
        .unwrap_or_else(|| model.max_tokens.min(DEFAULT_MAX_TOKENS));
    let budget = match request.thinking.anthropic_budget() {
        Some(budget) if model.reasoning => budget,
        _ => return (base, None),
    };
    let max_tokens = model.max_tokens.min(base.saturating_add(budget));
    let budget = budget.min(max_tokens.saturating_sub(MIN_ANSWER_TOKENS));
    if budget < MIN_THINKING_BUDGET {
        return (base, None);
    }
    (max_tokens, Some(budget))
}

/// One `messages` entry while it is being assembled.
struct Turn {
    role: &'static str,
    content: Vec<Value>,
}

/// Converts the history. Anthropic wants user and assistant turns to
/// alternate and all results of one assistant turn in the next user turn, so
/// consecutive messages of the same role (tool results, a user message after
/// them, the neighbours of a dropped empty message) become one turn.
fn convert_messages(messages: &[Message]) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let (role, content) = match message {
            Message::User { content } => {
                ("user", content.iter().filter_map(content_block).collect())
            }
            Message::Assistant(message) => ("assistant", assistant_blocks(message)),
            Message::ToolResult(result) => ("user", vec![tool_result_block(result)]),
        };
        // The API rejects empty turns; this also drops failed or aborted
        // replies that produced nothing.
        if content.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(content),
            _ => turns.push(Turn { role, content }),
        }
    }
    for turn in turns.iter_mut().filter(|turn| turn.role == "user") {
        // Tool results must open their user turn; any text comes after.
        turn.content
            .sort_by_key(|block| block["type"] != "tool_result");
    }
    // The second cache breakpoint (the first is the system prompt): the whole
    // conversation so far, which the next request will start with.
    if let Some(Value::Object(block)) = turns
        .iter_mut()
        .rev()
        .find(|turn| turn.role == "user")
        .and_then(|turn| turn.content.last_mut())
    {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
    turns
        .into_iter()
        .map(|turn| json!({"role": turn.role, "content": turn.content}))
        .collect()
}

/// A text block, or nothing for text the API would reject as empty.
fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn content_block(content: &Content) -> Option<Value> {
    match content {
        Content::Text { text } => text_block(text),
        Content::Image { data, mime_type } => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime_type, "data": data},
        })),
    }
}

fn assistant_blocks(message: &AssistantMessage) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|content| match content {
            AssistantContent::Text { text } => text_block(text),
            AssistantContent::Thinking {
                thinking,
                redacted: true,
                ..
            } => (!thinking.is_empty())
                .then(|| json!({"type": "redacted_thinking", "data": thinking})),
            AssistantContent::Thinking {
                thinking,
                signature: Some(signature),
                ..
            } if !signature.is_empty() => Some(json!({
                "type": "thinking",
                "thinking": thinking,
                "signature": signature,
            })),
            // Thinking without a signature (cut off, or from another
            // provider) cannot be sent back as thinking; keep it as text.
            AssistantContent::Thinking { thinking, .. } => text_block(thinking),
            AssistantContent::ToolCall(call) => {
                // Arguments that did not parse are kept as a JSON string;
                // the API accepts only an object as `input`.
                let input = if call.arguments.is_object() {
                    call.arguments.clone()
                } else {
                    json!({})
                };
                Some(json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": input,
                }))
            }
        })
        .collect()
}

fn tool_result_block(result: &ToolResultMessage) -> Value {
    let mut content: Vec<Value> = result.content.iter().filter_map(content_block).collect();
    if content.is_empty() {
        content.push(json!({"type": "text", "text": EMPTY_TOOL_RESULT}));
    }
    json!({
        "type": "tool_result",
        "tool_use_id": result.tool_call_id,
        "content": content,
        "is_error": result.is_error,
    })
}

/// Event names the parser reads; any other named event (`ping`, or one
/// added to the API later) is skipped without looking at its data.
const HANDLED_EVENTS: &[&str] = &[
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
];

/// The data of one streaming event. Unknown types, blocks and deltas
/// deserialize to their `Other` variant so that API additions pass through.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireMessageStart,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireMessageStart {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// Token counts; `message_delta` repeats them cumulatively, so every field
/// present replaces the previous value.
#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// What the parser remembers about an open content block, by its index.
enum OpenBlock {
    Thinking {
        /// Whether a thinking delta has been emitted for this block.
        started: bool,
    },
    ToolUse {
        id: String,
        /// The `input` of `content_block_start`, when not the usual `{}`.
        initial_input: Option<String>,
        streamed: bool,
    },
}

/// Turns Anthropic's streaming events into [`StreamEvent`]s.
pub struct Parser {
    provider: String,
    usage: Usage,
    blocks: HashMap<u64, OpenBlock>,
    finished: bool,
}

impl Parser {
    pub fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            usage: Usage::default(),
            blocks: HashMap::new(),
            finished: false,
        }
    }

    fn merge_usage(&mut self, wire: &WireUsage, out: &mut Vec<StreamEvent>) {
        let mut usage = self.usage;
        if let Some(tokens) = wire.input_tokens {
            usage.input = tokens;
        }
        if let Some(tokens) = wire.output_tokens {
            usage.output = tokens;
        }
        if let Some(tokens) = wire.cache_read_input_tokens {
            usage.cache_read = tokens;
        }
        if let Some(tokens) = wire.cache_creation_input_tokens {
            usage.cache_write = tokens;
        }
        if usage != self.usage {
            self.usage = usage;
            out.push(StreamEvent::Usage(usage));
        }
    }

    fn block_start(&mut self, index: u64, block: WireBlock, out: &mut Vec<StreamEvent>) {
        match block {
            WireBlock::Text { text } => {
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text));
                }
            }
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                let started = !thinking.is_empty();
                if started {
                    out.push(StreamEvent::ThinkingDelta(thinking));
                }
                self.blocks.insert(index, OpenBlock::Thinking { started });
                if !signature.is_empty() {
                    self.signature(index, signature, out);
                }
            }
            WireBlock::RedactedThinking { data } => out.push(StreamEvent::RedactedThinking(data)),
            WireBlock::ToolUse { id, name, input } => {
                out.push(StreamEvent::ToolCallStart {
                    id: id.clone(),
                    name,
                });
                let initial_input = match &input {
                    Value::Object(map) if !map.is_empty() => Some(input.to_string()),
                    _ => None,
                };
                self.blocks.insert(
                    index,
                    OpenBlock::ToolUse {
                        id,
                        initial_input,
                        streamed: false,
                    },
                );
            }
            WireBlock::Other => {}
        }
    }

    fn block_delta(&mut self, index: u64, delta: WireDelta, out: &mut Vec<StreamEvent>) {
        match delta {
            WireDelta::TextDelta { text } => {
                if !text.is_empty() {
                    out.push(StreamEvent::TextDelta(text));
                }
            }
            WireDelta::ThinkingDelta { thinking } => {
                if thinking.is_empty() {
                    return;
                }
                if let Some(OpenBlock::Thinking { started }) = self.blocks.get_mut(&index) {
                    *started = true;
                }
                out.push(StreamEvent::ThinkingDelta(thinking));
            }
            WireDelta::SignatureDelta { signature } => self.signature(index, signature, out),
            WireDelta::InputJsonDelta { partial_json } => {
                // Server tools stream their input too; only our own tool
                // calls are registered, so theirs are skipped here.
                if let Some(OpenBlock::ToolUse { id, streamed, .. }) = self.blocks.get_mut(&index)
                    && !partial_json.is_empty()
                {
                    *streamed = true;
                    out.push(StreamEvent::ToolCallDelta {
                        id: id.clone(),
                        json: partial_json,
                    });
                }
            }
            WireDelta::Other => {}
        }
    }

    fn signature(&mut self, index: u64, signature: String, out: &mut Vec<StreamEvent>) {
        // A signed block whose thinking is empty still has to exist, or the
        // signature would attach to an earlier block.
        if let Some(OpenBlock::Thinking { started }) = self.blocks.get_mut(&index)
            && !*started
        {
            *started = true;
            out.push(StreamEvent::ThinkingDelta(String::new()));
        }
        out.push(StreamEvent::ThinkingSignature(signature));
    }

    fn block_stop(&mut self, index: u64, out: &mut Vec<StreamEvent>) {
        if let Some(OpenBlock::ToolUse {
            id,
            initial_input: Some(json),
            streamed: false,
        }) = self.blocks.remove(&index)
        {
            out.push(StreamEvent::ToolCallDelta { id, json });
        }
    }
}

impl WireFormat for Parser {
    fn on_event(&mut self, event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError> {
        let name = if event.event.is_empty() {
            "message"
        } else {
            event.event.as_str()
        };
        if self.finished || (!event.event.is_empty() && !HANDLED_EVENTS.contains(&name)) {
            return Ok(Vec::new());
        }
        let wire: WireEvent =
            serde_json::from_str(&event.data).map_err(|e| LlmError::MalformedStream {
                provider: self.provider.clone(),
                message: format!("the data of a `{name}` event is not valid: {e}"),
            })?;
        let mut out = Vec::new();
        match wire {
            WireEvent::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.merge_usage(&usage, &mut out);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(index, content_block, &mut out),
            WireEvent::ContentBlockDelta { index, delta } => {
                self.block_delta(index, delta, &mut out)
            }
            WireEvent::ContentBlockStop { index } => self.block_stop(index, &mut out),
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    out.push(StreamEvent::Stop(stop_reason(&reason)));
                }
                if let Some(usage) = usage {
                    self.merge_usage(&usage, &mut out);
                }
            }
            WireEvent::MessageStop => self.finished = true,
            WireEvent::Error { error } => {
                return Err(LlmError::from_http(
                    &self.provider,
                    status_of_error_type(&error.kind),
                    Some(&error.kind),
                    error_message(error.message, &error.kind),
                    None,
                ));
            }
            WireEvent::Other => {}
        }
        Ok(out)
    }

    fn finished(&self) -> bool {
        self.finished
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::Refusal,
        // end_turn, stop_sequence, pause_turn, and reasons added later: the
        // turn is over and nothing in it asks for more.
        _ => StopReason::Stop,
    }
}

/// The HTTP status Anthropic documents for each error type, for errors that
/// arrive inside a successful (200) stream.
fn status_of_error_type(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        // api_error and anything unknown: the server's fault.
        _ => 500,
    }
}

fn error_message(message: String, kind: &str) -> String {
    if message.is_empty() {
        kind.to_string()
    } else {
        message
    }
}

/// Classifies an HTTP error answer of the Messages API.
pub fn error_from_response(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> LlmError {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: WireError,
    }
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(ErrorBody { error }) if !error.kind.is_empty() || !error.message.is_empty() => {
            let message = error_message(error.message, &error.kind);
            let kind = (!error.kind.is_empty()).then_some(error.kind.as_str());
            LlmError::from_http(provider, status, kind, message, retry_after)
        }
        _ => {
            let text = body.trim();
            let message = if text.is_empty() {
                format!("HTTP {status}")
            } else if text.chars().count() > MAX_ERROR_BODY_CHARS {
                let cut: String = text.chars().take(MAX_ERROR_BODY_CHARS).collect();
                format!("{cut}…")
            } else {
                text.to_string()
            };
            LlmError::from_http(provider, status, None, message, retry_after)
        }
    }
}

#[cfg(test)]
mod tests {
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
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
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
                    {"role": "user", "content": [
                        {"type": "text", "text": "What do these say?"},
                        {"type": "image", "source": {
                            "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=",
                        }},
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

    /// Parses a fixture at every split point, insists on identical results,
    /// and returns them.
    fn parse_fixture(input: &str) -> (Vec<StreamEvent>, Option<LlmError>, bool) {
        let input = input.as_bytes();
        let whole = parse_split(input, input.len());
        for split in 0..input.len() {
            assert_eq!(parse_split(input, split), whole, "split at byte {split}");
        }
        whole
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
        let (events, message) = parse_complete(include_str!("../../fixtures/anthropic/text.sse"));
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
            parse_complete(include_str!("../../fixtures/anthropic/tool_read.sse"));
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
            parse_complete(include_str!("../../fixtures/anthropic/after_tool.sse"));
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
            parse_complete(include_str!("../../fixtures/anthropic/thinking.sse"));
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
            parse_complete(include_str!("../../fixtures/anthropic/max_tokens.sse"));
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
        let (events, message) =
            parse_complete(include_str!("../../fixtures/anthropic/refusal.sse"));
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
            "../../fixtures/anthropic/overloaded_midstream.sse"
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
                message: "Number of request tokens has exceeded your per-minute rate limit"
                    .to_string(),
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
}
