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

use super::truncate;
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
    let marked = takes_cache_control(model);
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
    let cache_control = request.cache_retention.cache_control();
    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    let conversation = if cached {
        // The system message stays out of the cached conversation.
        if marked && let Some(system) = messages.first_mut().filter(|m| m["role"] == "system") {
            mark_last_part(system, &cache_control);
        }
        let mark = |messages: &mut [Value]| {
            if marked {
                mark_runs(messages, &cache_control)
            } else {
                0
            }
        };
        let format = super::conversation::Format {
            convert: &convert_messages,
            mark: &mark,
            marks: if marked { 2 } else { 0 },
            joins_by: |_| None,
        };
        let array = super::conversation::serialised(model, request, &format);
        body.insert("messages".into(), Value::Null);
        Some(match messages.first() {
            Some(system) => super::conversation::prepend(system, &array),
            None => array,
        })
    } else {
        messages.extend(convert_messages(&request.messages));
        if marked {
            mark_cache_breakpoints(&mut messages, &cache_control);
        }
        body.insert("messages".into(), Value::Array(messages));
        None
    };
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
    // OpenAI routes requests with the same key to the same cache, so a
    // session's calls find its earlier prefix. Compatible servers may
    // reject a field they do not know.
    if is_openai && let Some(key) = &request.cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if model.reasoning && request.thinking != ThinkingLevel::Off {
        body.insert(
            "reasoning_effort".into(),
            json!(reasoning_effort(&model.id, request.thinking)),
        );
    }

    let bytes = conversation.map(|c| super::conversation::body_with(&body, "messages", &c));
    HttpRequest {
        url: format!("{}/chat/completions", model.base_url),
        headers,
        body: Value::Object(body),
        bytes,
    }
}

/// Whether `model` is Claude behind OpenRouter, which passes
/// `cache_control` on content parts through to Anthropic
/// (<https://openrouter.ai/docs/prompt-caching>: Anthropic needs explicit
/// breakpoints, at most four). Other models cache by themselves or not at
/// all, and a strict server may reject a field it does not know.
fn takes_cache_control(model: &Model) -> bool {
    let openrouter =
        model.provider == "openrouter" || model.base_url.starts_with("https://openrouter.ai/");
    openrouter && model.id.starts_with("anthropic/")
}

/// Anthropic's breakpoints in OpenAI's format (see the Anthropic provider
/// for why these): the system prompt (which Anthropic caches after the
/// tools, so they are read with it), and the last message of each of the
/// two newest runs of user and tool messages: the newest writes the whole
/// conversation, the one before is where the previous request ended, so
/// this one reads what that one wrote. Three, within Anthropic's four.
fn mark_cache_breakpoints(messages: &mut [Value], cache_control: &Value) {
    if let Some(system) = messages.first_mut().filter(|m| m["role"] == "system") {
        mark_last_part(system, cache_control);
    }
    mark_runs(messages, cache_control);
}

/// The breakpoints of [`mark_cache_breakpoints`] on the runs of user and
/// tool messages; returns how many it placed.
fn mark_runs(messages: &mut [Value], cache_control: &Value) -> usize {
    let mut marked = 0;
    let mut in_run = false;
    for message in messages.iter_mut().rev() {
        let turn_end = matches!(message["role"].as_str(), Some("user" | "tool"));
        if turn_end && !in_run && marked < 2 {
            mark_last_part(message, cache_control);
            marked += 1;
        }
        in_run = turn_end;
    }
    marked
}

/// Puts `cache_control` on the last content part of `message`, turning
/// text content into one text part first (only parts carry it). Empty
/// text is left alone: Anthropic rejects a breakpoint on an empty block.
fn mark_last_part(message: &mut Value, cache_control: &Value) {
    if let Some(text) = message["content"].as_str() {
        if text.is_empty() {
            return;
        }
        message["content"] = json!([{"type": "text", "text": text}]);
    }
    if let Some(Value::Object(part)) = message["content"]
        .as_array_mut()
        .and_then(|parts| parts.last_mut())
    {
        part.insert("cache_control".into(), cache_control.clone());
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
    /// Tokens written to the prompt cache (OpenRouter, for providers that
    /// charge for writes such as Anthropic).
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

impl WireUsage {
    /// `prompt_tokens` includes the tokens read from and written to the
    /// cache, and `completion_tokens` the reasoning tokens; pincer counts
    /// cached input separately.
    fn into_usage(self) -> Option<Usage> {
        if self.prompt_tokens.is_none() && self.completion_tokens.is_none() {
            return None;
        }
        let prompt = self.prompt_tokens.unwrap_or(0);
        let details = self.prompt_tokens_details.as_ref();
        let cached = details
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .unwrap_or(0);
        let written = details.and_then(|d| d.cache_write_tokens).unwrap_or(0);
        Some(Usage {
            input: prompt.saturating_sub(cached).saturating_sub(written),
            output: self.completion_tokens.unwrap_or(0),
            cache_read: cached,
            cache_write: written,
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

/// The error in a 200 answer whose body is an error document instead of a
/// stream, classified as an error inside a stream is. `None` when the body
/// is no error (a whole completion from a server that ignored `stream`).
pub fn error_in_ok_body(provider: &str, body: &str) -> Option<LlmError> {
    let value = serde_json::from_str::<Value>(body).ok()?;
    ErrorInfo::from_body(&value).map(|info| info.into_stream_error(provider))
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

/// The `reasoning_effort` for a level. Only the GPT-5 family knows
/// `minimal`; the o-series models start at `low`.
fn reasoning_effort(model_id: &str, level: ThinkingLevel) -> &'static str {
    let o_series =
        model_id.starts_with('o') && model_id[1..].starts_with(|c: char| c.is_ascii_digit());
    match level {
        ThinkingLevel::Minimal if o_series => "low",
        other => other.as_str(),
    }
}

#[cfg(test)]
mod tests;
