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

/// How Anthropic's OAuth access tokens begin.
pub const OAUTH_TOKEN_PREFIX: &str = "sk-ant-oat";
/// The beta flag the Messages API wants with an OAuth token.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// Builds the streaming Messages request for `model`.
pub fn build_request(model: &Model, key: Option<&Secret>, request: &Request) -> HttpRequest {
    build(model, key, request, false)
}

/// [`build_request`] with the conversation serialised from the session's
/// earlier calls where they sent the same messages (see
/// [`super::conversation`]): the same bytes, for a fraction of the work.
pub(crate) fn build_request_cached(
    model: &Model,
    key: Option<&Secret>,
    request: &Request,
) -> HttpRequest {
    build(model, key, request, true)
}

fn build(model: &Model, key: Option<&Secret>, request: &Request, cached: bool) -> HttpRequest {
    let mut headers = Vec::new();
    match key {
        // OAuth access tokens (Claude Pro/Max, `sk-ant-oat…`) go as a bearer
        // token with the OAuth beta flag; API keys as `x-api-key`.
        Some(key) if key.expose().starts_with(OAUTH_TOKEN_PREFIX) => {
            headers.push((
                "authorization".to_string(),
                format!("Bearer {}", key.expose()),
            ));
            headers.push(("anthropic-beta".to_string(), OAUTH_BETA.to_string()));
        }
        Some(key) => headers.push(("x-api-key".to_string(), key.expose().to_string())),
        None => {}
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
    let cache_control = request.cache_retention.cache_control();
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
                "cache_control": cache_control,
            }]),
        );
    }
    let convert = |messages: &[Message]| convert_turns(messages);
    let mark = |turns: &mut [Value]| mark_turns(turns, &cache_control);
    let format = super::conversation::Format {
        convert: &convert,
        mark: &mark,
        marks: 2,
        joins_by: |turn| turn["role"].as_str(),
    };
    let conversation = if cached {
        body.insert("messages".into(), Value::Null);
        Some(super::conversation::serialised(model, request, &format))
    } else {
        body.insert(
            "messages".into(),
            Value::Array(convert_messages(&request.messages, &cache_control)),
        );
        None
    };
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
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
        // A breakpoint after the tools (which come first in the cached
        // prefix): a change of the system prompt alone, such as a context
        // file edited on disk, still reads them from the cache.
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), cache_control.clone());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(budget) = thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }

    let bytes = conversation.map(|c| super::conversation::body_with(&body, "messages", &c));
    HttpRequest {
        url: format!("{}/v1/messages", model.base_url),
        headers,
        body: Value::Object(body),
        bytes,
    }
}

/// `max_tokens` and the thinking budget, if thinking is on. Anthropic counts
/// thinking against `max_tokens` and requires `max_tokens > budget_tokens`,
/// so the budget is added on top of the answer's cap, within the model's
/// limit, and shrunk when that limit leaves too little room for the answer.
fn token_limits(model: &Model, request: &Request) -> (u64, Option<u64>) {
    claude_token_limits(model, request, true)
}

/// [`token_limits`] for Claude served elsewhere (Bedrock), where only some
/// models take a thinking budget: `thinking` says whether this one does.
pub(super) fn claude_token_limits(
    model: &Model,
    request: &Request,
    thinking: bool,
) -> (u64, Option<u64>) {
    let base = request
        .max_tokens
        .unwrap_or_else(|| model.max_tokens.min(DEFAULT_MAX_TOKENS));
    let budget = match request.thinking.anthropic_budget() {
        Some(budget) if model.reasoning && thinking => budget,
        _ => return (base, None),
    };
    let max_tokens = model.max_tokens.min(base.saturating_add(budget));
    let budget = budget.min(max_tokens.saturating_sub(MIN_ANSWER_TOKENS));
    if budget < MIN_THINKING_BUDGET {
        return (base, None);
    }
    (max_tokens, Some(budget))
}

/// Converts the history. Anthropic wants user and assistant turns to
/// alternate and all results of one assistant turn in the next user turn,
/// opening it.
fn convert_messages(messages: &[Message], cache_control: &Value) -> Vec<Value> {
    let mut turns = convert_turns(messages);
    mark_turns(&mut turns, cache_control);
    turns
}

/// The turns without breakpoints.
fn convert_turns(messages: &[Message]) -> Vec<Value> {
    let converted = messages.iter().map(|message| match message {
        Message::User { content } => ("user", content.iter().filter_map(content_block).collect()),
        Message::Assistant(message) => ("assistant", assistant_blocks(message)),
        Message::ToolResult(result) => ("user", vec![tool_result_block(result)]),
    });
    super::alternating_turns(converted, |block| block["type"] == "tool_result")
        .into_iter()
        .map(|turn| json!({"role": turn.role, "content": turn.blocks}))
        .collect()
}

/// Breakpoints on the last two user turns (with the tools' and the system
/// prompt's, the four a request may have): the last writes the whole
/// conversation, which the next request starts with; the one before is
/// where the previous request ended, so this one reads what that one wrote
/// even when the turn in between added more blocks than the API looks back
/// over (20) from a breakpoint. Returns how many it placed.
fn mark_turns(turns: &mut [Value], cache_control: &Value) -> usize {
    let mut placed = 0;
    for block in turns
        .iter_mut()
        .rev()
        .filter(|turn| turn["role"] == "user")
        .take(2)
        .filter_map(|turn| turn["content"].as_array_mut()?.last_mut())
    {
        if let Value::Object(block) = block {
            block.insert("cache_control".into(), cache_control.clone());
            placed += 1;
        }
    }
    placed
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
    /// The cache writes by lifetime (`ephemeral_5m_input_tokens`,
    /// `ephemeral_1h_input_tokens`), which are priced differently.
    #[serde(default)]
    cache_creation: Option<WireCacheCreation>,
}

#[derive(Deserialize, Default)]
struct WireCacheCreation {
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<u64>,
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
        if let Some(tokens) = wire
            .cache_creation
            .as_ref()
            .and_then(|c| c.ephemeral_1h_input_tokens)
        {
            usage.cache_write_1h = tokens;
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

/// The error in a 200 answer whose body is an error document instead of a
/// stream (`{"type":"error","error":{…}}`, as a buffering proxy or an
/// overloaded edge sends it), classified as its type says. `None` when the
/// body is no Anthropic error.
pub fn error_in_ok_body(provider: &str, body: &str) -> Option<LlmError> {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: WireError,
    }
    let ErrorBody { error } = serde_json::from_str(body).ok()?;
    if error.kind.is_empty() && error.message.is_empty() {
        return None;
    }
    let kind = (!error.kind.is_empty()).then_some(error.kind.as_str());
    Some(LlmError::from_http(
        provider,
        status_of_error_type(&error.kind),
        kind,
        error_message(error.message, &error.kind),
        None,
    ))
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
mod tests;
