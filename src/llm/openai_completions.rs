//! OpenAI's Chat Completions API (`POST {base}/chat/completions` with
//! `stream: true`), the lingua franca of hosted and local models.
//!
//! This file owns the whole wire format: turning a [`Request`] into the JSON
//! body, turning the streamed `chat.completion.chunk` events back into
//! [`StreamEvent`]s, and reading error bodies. It speaks the API as OpenAI
//! documents it and tolerates the dialects of the compatible servers (Ollama,
//! llama.cpp, vLLM, LM Studio, OpenRouter, DeepSeek): reasoning arrives as
//! `reasoning_content` or `reasoning`, tool call ids may be missing, usage may
//! ride on the finishing chunk, and errors come as objects, strings or bare
//! messages.
//!
//! The stream is finished only at `data: [DONE]`. A few servers (old
//! llama.cpp builds, some proxies) close the connection without it; such a
//! stream counts as cut off, because a `finish_reason` alone does not say
//! whether the usage chunk that follows it was lost.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{
    AssistantContent, AssistantMessage, Content, HttpRequest, LlmError, Message, Model, Request,
    Secret, StopReason, StreamEvent, ThinkingLevel, ToolResultMessage, Usage, WireFormat, sse,
};

/// The output cap when neither the request nor a small model limit sets one:
/// a model's full limit (128k for GPT-5) would reserve needless context.
const DEFAULT_OUTPUT_CAP: u64 = 32_000;

/// How much of a non-JSON error body ends up in the error message.
const ERROR_BODY_LIMIT: usize = 500;

/// Builds the streaming request for `model`.
pub fn build_request(model: &Model, key: Option<&Secret>, request: &Request) -> HttpRequest {
    let is_openai = model.provider == "openai";

    let mut headers = Vec::new();
    if let Some(key) = key {
        headers.push((
            "authorization".to_string(),
            format!("Bearer {}", key.expose()),
        ));
    }
    headers.push(("content-type".to_string(), "application/json".to_string()));
    headers.extend(model.headers.iter().cloned());

    let mut messages = Vec::new();
    if !request.system.is_empty() {
        // OpenAI's reasoning models take instructions as `developer`; the
        // compatible servers' chat templates mostly know only `system`.
        let role = if is_openai && model.reasoning {
            "developer"
        } else {
            "system"
        };
        messages.push(json!({"role": role, "content": request.system}));
    }
    messages.extend(convert_messages(&request.messages));

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let max_tokens = request
        .max_tokens
        .unwrap_or_else(|| model.max_tokens.min(DEFAULT_OUTPUT_CAP));
    // OpenAI deprecated `max_tokens` (reasoning models reject it); most
    // compatible servers only know `max_tokens`.
    let cap_field = if is_openai {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    body.insert(cap_field.into(), json!(max_tokens));
    if model.reasoning && request.thinking != ThinkingLevel::Off {
        body.insert("reasoning_effort".into(), json!(request.thinking.as_str()));
    }

    HttpRequest {
        url: format!("{}/chat/completions", model.base_url),
        headers,
        body: Value::Object(body),
    }
}

/// Converts the conversation. Images returned by tools cannot go into a
/// `tool` message, so they follow the run of tool messages as one user
/// message: a user message between two tool messages would orphan the
/// second from its call.
fn convert_messages(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut tool_images: Vec<Value> = Vec::new();
    for message in messages {
        if !matches!(message, Message::ToolResult(_)) {
            flush_tool_images(&mut out, &mut tool_images);
        }
        match message {
            Message::User { content } => out.push(user_message(content)),
            Message::Assistant(assistant) => out.extend(assistant_message(assistant)),
            Message::ToolResult(result) => {
                out.push(tool_message(result, &mut tool_images));
            }
        }
    }
    flush_tool_images(&mut out, &mut tool_images);
    out
}

fn user_message(content: &[Content]) -> Value {
    let only_text = content.iter().all(|c| matches!(c, Content::Text { .. }));
    if only_text {
        return json!({"role": "user", "content": joined_text(content)});
    }
    let parts: Vec<Value> = content.iter().map(content_part).collect();
    json!({"role": "user", "content": parts})
}

fn content_part(content: &Content) -> Value {
    match content {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { data, mime_type } => json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{mime_type};base64,{data}")},
        }),
    }
}

fn joined_text(content: &[Content]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            Content::Image { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The assistant turn as OpenAI wants it back; `None` when there is nothing
/// to send (thinking is never sent back, and an empty assistant message is
/// rejected by several servers).
fn assistant_message(message: &AssistantMessage) -> Option<Value> {
    let text: String = message
        .content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let tool_calls: Vec<Value> = message
        .tool_calls()
        .map(|call| {
            // Arguments that did not parse are kept as the raw text; sending
            // that text back shows the model what it actually wrote.
            let arguments = match (&call.arguments, &call.arguments_error) {
                (Value::String(raw), Some(_)) => raw.clone(),
                (value, _) => value.to_string(),
            };
            json!({
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            })
        })
        .collect();
    if text.is_empty() && tool_calls.is_empty() {
        return None;
    }
    let mut out = Map::new();
    out.insert("role".into(), json!("assistant"));
    let content = if text.is_empty() {
        Value::Null
    } else {
        Value::String(text)
    };
    out.insert("content".into(), content);
    if !tool_calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(tool_calls));
    }
    Some(Value::Object(out))
}

/// The `tool` message for a result; its images go to `images`, for the user
/// message that follows the tool messages.
fn tool_message(result: &ToolResultMessage, images: &mut Vec<Value>) -> Value {
    let mut text = joined_text(&result.content);
    let result_images: Vec<Value> = result
        .content
        .iter()
        .filter(|c| matches!(c, Content::Image { .. }))
        .map(content_part)
        .collect();
    if !result_images.is_empty() {
        let note = match result_images.len() {
            1 => "(The image is attached in the next user message.)".to_string(),
            n => format!("(The {n} images are attached in the next user message.)"),
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&note);
        images.push(json!({
            "type": "text",
            "text": format!(
                "Image output of the {} tool call {}:",
                result.tool_name, result.tool_call_id
            ),
        }));
        images.extend(result_images);
    }
    json!({"role": "tool", "tool_call_id": result.tool_call_id, "content": text})
}

fn flush_tool_images(out: &mut Vec<Value>, images: &mut Vec<Value>) {
    if !images.is_empty() {
        out.push(json!({"role": "user", "content": std::mem::take(images)}));
    }
}

/// Turns `chat.completion.chunk` events into stream events.
pub struct Parser {
    provider: String,
    done: bool,
    calls: Vec<PendingCall>,
    /// Makes synthesized call ids unique across turns, so that an editor
    /// showing tool calls by id never confuses two of them.
    nonce: String,
}

/// A tool call as the chunks describe it so far.
#[derive(Debug)]
struct PendingCall {
    /// The server's `index`; some servers omit it.
    index: Option<u64>,
    /// The server's id, or the synthesized one once started.
    id: Option<String>,
    name: String,
    /// Whether `ToolCallStart` went out. It waits for the name, and argument
    /// fragments that arrive before it are held in `arguments`.
    started: bool,
    arguments: String,
}

impl Parser {
    pub fn new(provider: &str) -> Self {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Self {
            provider: provider.to_string(),
            done: false,
            calls: Vec::new(),
            nonce: nonce.chars().take(8).collect(),
        }
    }

    fn on_chunk(&mut self, chunk: Chunk) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        for choice in chunk.choices.unwrap_or_default() {
            // pincer asks for one choice; ignore any others.
            if choice.index.is_some_and(|i| i != 0) {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.on_delta(delta, &mut out);
            }
            if let Some(reason) = choice.finish_reason {
                self.flush_calls(&mut out);
                out.push(StreamEvent::Stop(map_finish_reason(&reason)));
            }
        }
        if let Some(usage) = chunk.usage.and_then(WireUsage::into_usage) {
            out.push(StreamEvent::Usage(usage));
        }
        out
    }

    fn on_delta(&mut self, delta: Delta, out: &mut Vec<StreamEvent>) {
        // Servers send one of the two names; OpenRouter may send both with
        // the same text, so the first one present wins.
        let reasoning = delta
            .reasoning_content
            .filter(|s| !s.is_empty())
            .or(delta.reasoning.filter(|s| !s.is_empty()));
        if let Some(thinking) = reasoning {
            out.push(StreamEvent::ThinkingDelta(thinking));
        }
        if let Some(text) = delta.content.filter(|s| !s.is_empty()) {
            out.push(StreamEvent::TextDelta(text));
        }
        // A refusal replaces the content; showing it beats an empty reply.
        if let Some(text) = delta.refusal.filter(|s| !s.is_empty()) {
            out.push(StreamEvent::TextDelta(text));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.on_tool_call(call, out);
        }
    }

    fn on_tool_call(&mut self, chunk: ToolCallChunk, out: &mut Vec<StreamEvent>) {
        let id = chunk.id.filter(|s| !s.is_empty());
        let slot = self.slot_for(chunk.index, id.as_deref());
        let function = chunk.function.unwrap_or_default();
        let arguments = match function.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            // A few servers send the arguments as an object, all at once.
            Some(other) => other.to_string(),
        };
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        if !call.started {
            if call.id.is_none() {
                call.id = id;
            }
            if let Some(name) = function.name.filter(|s| !s.is_empty()) {
                call.name = name;
            }
            call.arguments.push_str(&arguments);
            if !call.name.is_empty() {
                self.start_call(slot, out);
            }
        } else if !arguments.is_empty() {
            out.push(StreamEvent::ToolCallDelta {
                id: call.id.clone().unwrap_or_default(),
                json: arguments,
            });
        }
    }

    /// Which call a fragment belongs to. OpenAI keys fragments by `index`
    /// only; servers that omit the index are matched by id, and a fragment
    /// with neither continues the latest call. A new id under a known index
    /// is a new call (some servers number every call 0).
    fn slot_for(&mut self, index: Option<u64>, id: Option<&str>) -> usize {
        if let Some(id) = id
            && let Some(pos) = self.calls.iter().rposition(|c| c.id.as_deref() == Some(id))
        {
            return pos;
        }
        let existing = match index {
            Some(index) => self
                .calls
                .iter()
                .rposition(|c| c.index == Some(index))
                .filter(|&pos| id.is_none() || self.calls[pos].id.is_none()),
            None if id.is_none() => self.calls.len().checked_sub(1),
            None => None,
        };
        if let Some(pos) = existing {
            return pos;
        }
        self.calls.push(PendingCall {
            index,
            id: None,
            name: String::new(),
            started: false,
            arguments: String::new(),
        });
        self.calls.len() - 1
    }

    fn start_call(&mut self, slot: usize, out: &mut Vec<StreamEvent>) {
        let nonce = &self.nonce;
        let Some(call) = self.calls.get_mut(slot) else {
            return;
        };
        let id = call
            .id
            .get_or_insert_with(|| format!("call_{}_{nonce}", call.index.unwrap_or(slot as u64)))
            .clone();
        call.started = true;
        out.push(StreamEvent::ToolCallStart {
            id: id.clone(),
            name: call.name.clone(),
        });
        let arguments = std::mem::take(&mut call.arguments);
        if !arguments.is_empty() {
            out.push(StreamEvent::ToolCallDelta {
                id,
                json: arguments,
            });
        }
    }

    /// Starts calls that never got a name, so their arguments are not lost;
    /// running a nameless call fails visibly, which the model can correct.
    fn flush_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for slot in 0..self.calls.len() {
            let pending = self
                .calls
                .get(slot)
                .is_some_and(|c| !c.started && (c.id.is_some() || !c.arguments.is_empty()));
            if pending {
                self.start_call(slot, out);
            }
        }
    }
}

impl WireFormat for Parser {
    fn on_event(&mut self, event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError> {
        let data = event.data.trim();
        if self.done || data.is_empty() {
            return Ok(Vec::new());
        }
        if data == "[DONE]" {
            self.done = true;
            let mut out = Vec::new();
            self.flush_calls(&mut out);
            return Ok(out);
        }
        let value: Value = serde_json::from_str(data).map_err(|e| self.malformed(&e, data))?;
        if let Some(info) = ErrorInfo::from_body(&value) {
            return Err(info.into_stream_error(&self.provider));
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| self.malformed(&e, data))?;
        Ok(self.on_chunk(chunk))
    }

    fn finished(&self) -> bool {
        self.done
    }
}

impl Parser {
    fn malformed(&self, error: &serde_json::Error, data: &str) -> LlmError {
        LlmError::MalformedStream {
            provider: self.provider.clone(),
            message: format!("bad chunk ({error}): {}", truncate(data, 200)),
        }
    }
}

fn map_finish_reason(reason: &str) -> StopReason {
    match reason {
        "length" => StopReason::Length,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::Refusal,
        // "stop", and the odd names of some servers ("eos", "end_turn").
        _ => StopReason::Stop,
    }
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallChunk>>,
}

#[derive(Debug, Deserialize)]
struct ToolCallChunk {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionChunk>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionChunk {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    /// `prompt_tokens` includes the cached tokens and `completion_tokens`
    /// the reasoning tokens; pincer counts cached input separately.
    fn into_usage(self) -> Option<Usage> {
        if self.prompt_tokens.is_none() && self.completion_tokens.is_none() {
            return None;
        }
        let prompt = self.prompt_tokens.unwrap_or(0);
        let cached = self
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .unwrap_or(0);
        Some(Usage {
            input: prompt.saturating_sub(cached),
            output: self.completion_tokens.unwrap_or(0),
            cache_read: cached,
            ..Usage::default()
        })
    }
}

/// What an error body says, whichever of the dialects it is in.
#[derive(Debug, PartialEq)]
struct ErrorInfo {
    message: String,
    /// `code` when it is a string, else `type`.
    kind: Option<String>,
    /// A numeric `code` (OpenRouter, llama.cpp, vLLM put the HTTP status there).
    status: Option<u16>,
}

impl ErrorInfo {
    /// Reads `{"error": {...}}`, `{"error": "text"}` (Ollama), a bare
    /// `{"message": ...}` / `{"object": "error", ...}` (vLLM) and FastAPI's
    /// `{"detail": "text"}`. `None` when the value is not an error.
    fn from_body(value: &Value) -> Option<Self> {
        match value {
            Value::Array(items) => items.first().and_then(Self::from_body),
            Value::Object(map) => match map.get("error") {
                Some(Value::String(message)) => Some(Self::text(message)),
                Some(error @ Value::Object(_)) => Some(Self::from_object(error)),
                Some(Value::Null) | None => {
                    let is_error = map.get("object").and_then(Value::as_str) == Some("error")
                        || (map.get("message").is_some_and(Value::is_string)
                            && map.get("choices").is_none());
                    if is_error {
                        Some(Self::from_object(value))
                    } else {
                        map.get("detail").and_then(Value::as_str).map(Self::text)
                    }
                }
                Some(other) => Some(Self::text(&other.to_string())),
            },
            _ => None,
        }
    }

    fn text(message: &str) -> Self {
        Self {
            message: message.to_string(),
            kind: None,
            status: None,
        }
    }

    fn from_object(error: &Value) -> Self {
        let field = |name: &str| error.get(name).and_then(Value::as_str).map(str::to_string);
        let kind = field("code").or_else(|| field("type")).map(|kind| {
            // llama.cpp's name for the same condition.
            if kind == "exceed_context_size_error" {
                "context_length_exceeded".to_string()
            } else {
                kind
            }
        });
        let status = error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|code| u16::try_from(code).ok())
            .filter(|code| (400..=599).contains(code));
        Self {
            message: field("message")
                .unwrap_or_else(|| truncate(&error.to_string(), ERROR_BODY_LIMIT)),
            kind,
            status,
        }
    }

    /// An error sent inside a 200 stream: the status comes from the error
    /// itself.
    fn into_stream_error(self, provider: &str) -> LlmError {
        let status = self.status.unwrap_or(match self.kind.as_deref() {
            Some("rate_limit_exceeded" | "insufficient_quota") => 429,
            Some("context_length_exceeded") => 400,
            _ => 500,
        });
        LlmError::from_http(provider, status, self.kind.as_deref(), self.message, None)
    }
}

/// Classifies a non-2xx answer from its status and body.
pub fn error_from_response(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> LlmError {
    let info = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| ErrorInfo::from_body(&value));
    let (kind, message) = match info {
        Some(info) => (info.kind, info.message),
        None if body.trim().is_empty() => (None, format!("HTTP {status} with an empty body")),
        None => (None, truncate(body.trim(), ERROR_BODY_LIMIT)),
    };
    LlmError::from_http(provider, status, kind.as_deref(), message, retry_after)
}

/// The first `max` characters of `text`, marked when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
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
                }),
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
        let bytes = input.as_bytes();
        let mut expected: Option<Vec<StreamEvent>> = None;
        for split in 0..=bytes.len() {
            let mut decoder = sse::Decoder::new();
            let mut parser = Parser::new("openai");
            parser.nonce = "n".to_string();
            let mut events = Vec::new();
            for part in [&bytes[..split], &bytes[split..]] {
                for event in decoder.feed(part) {
                    events.extend(parser.on_event(&event).unwrap());
                }
            }
            assert!(parser.finished(), "not finished when split at {split}");
            match &expected {
                None => expected = Some(events),
                Some(first) => assert_eq!(&events, first, "split at {split}"),
            }
        }
        expected.unwrap()
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
        let events = parse_every_split(include_str!("../../fixtures/openai/text.sse"));
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
        let events = parse_every_split(include_str!("../../fixtures/openai/tool_read.sse"));
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
        let events = parse_every_split(include_str!("../../fixtures/openai/after_tool.sse"));
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
        let events = parse_every_split(include_str!("../../fixtures/openai/reasoning.sse"));
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
                        thinking: "The user greets me. A short friendly answer will do."
                            .to_string(),
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
        let events = parse_every_split(include_str!("../../fixtures/openai/length.sse"));
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
        let events = parse_every_split(include_str!("../../fixtures/openai/two_tools.sse"));
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
        let body = include_str!("../../fixtures/openai/text.sse");
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
                message: "Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again in 2s.".to_string(),
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
                message:
                    "You exceeded your current plan, please check your plan and billing details."
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
}
