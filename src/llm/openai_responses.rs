//! OpenAI's Responses API (`POST {base}/responses` with `stream: true`), the
//! API OpenAI builds its reasoning models around.
//!
//! This file owns the whole wire format: turning a [`Request`] into input
//! items, turning the semantic stream events (`response.output_text.delta`,
//! `response.output_item.done`, …) back into [`StreamEvent`]s, and reading
//! error bodies and the errors that arrive inside a stream.
//!
//! pincer keeps no state on OpenAI's side (`store: false`), so reasoning has
//! to travel with the conversation: every request of a reasoning model asks
//! for `reasoning.encrypted_content`, the finished reasoning item is kept
//! whole (as JSON) in the thinking block's signature, and it is sent back in
//! the next request. Item ids (`rs_…`, `fc_…`, `msg_…`) are not sent back,
//! as in OpenAI's own Codex client: under `store: false` they refer to
//! nothing OpenAI kept, and with ids OpenAI checks that a reasoning item
//! comes with the exact items that followed it, whose ids pincer does not
//! keep.
//!
//! The stream is finished at `response.completed`, `response.incomplete` or
//! `response.failed`; there is no `[DONE]`.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::truncate;
use super::{
    AssistantContent, AssistantMessage, Content, HttpRequest, LlmError, Message, Model, Request,
    Secret, StopReason, StreamEvent, ThinkingLevel, ToolResultMessage, Usage, WireFormat, sse,
};

/// The output cap when neither the request nor a smaller model limit sets
/// one: a model's full limit (128k for GPT-5) would reserve needless context.
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
    let mut headers = Vec::new();
    if let Some(key) = key {
        headers.push((
            "authorization".to_string(),
            format!("Bearer {}", key.expose()),
        ));
    }
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

    let mut body = Map::new();
    body.insert("model".into(), json!(model.id));
    if !request.system.trim().is_empty() {
        body.insert("instructions".into(), json!(request.system));
    }
    let conversation = if cached {
        body.insert("input".into(), Value::Null);
        let convert = |messages: &[Message]| convert_messages(model, messages);
        let format = super::conversation::Format {
            convert: &convert,
            mark: &|_: &mut [Value]| 0,
            marks: 0,
            joins_by: |_| None,
        };
        Some(super::conversation::serialised(model, request, &format))
    } else {
        body.insert(
            "input".into(),
            Value::Array(convert_messages(model, &request.messages)),
        );
        None
    };
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    // Strict mode would reject the optional properties and
                    // open objects of ordinary JSON Schemas.
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    // Requests with the same key reach the same prompt cache: a session's
    // calls find its earlier prefix.
    if let Some(key) = &request.cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if model.reasoning {
        // Asked for even when thinking is off: a reasoning model reasons
        // anyway, and without the encrypted content its reasoning items
        // could not be sent back under `store: false`.
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        if request.thinking != ThinkingLevel::Off {
            body.insert(
                "reasoning".into(),
                json!({
                    "effort": reasoning_effort(&model.id, request.thinking),
                    "summary": "auto",
                }),
            );
        }
    }
    let max_tokens = request
        .max_tokens
        .unwrap_or_else(|| model.max_tokens.min(DEFAULT_OUTPUT_CAP));
    body.insert("max_output_tokens".into(), json!(max_tokens));

    let bytes = conversation.map(|c| super::conversation::body_with(&body, "input", &c));
    HttpRequest {
        url: format!("{}/responses", model.base_url),
        headers,
        body: Value::Object(body),
        bytes,
    }
}

/// The `reasoning.effort` for a level. Only the GPT-5 family knows
/// `minimal`; the o-series models start at `low`.
fn reasoning_effort(model_id: &str, level: ThinkingLevel) -> &'static str {
    let o_series = model_id
        .strip_prefix('o')
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    match level {
        ThinkingLevel::Minimal if o_series => "low",
        other => other.as_str(),
    }
}

/// Converts the conversation into input items, in order.
fn convert_messages(model: &Model, messages: &[Message]) -> Vec<Value> {
    let mut items = Vec::new();
    for message in messages {
        match message {
            Message::User { content } => {
                let parts: Vec<Value> = content.iter().filter_map(input_part).collect();
                // The API rejects a message without content.
                if !parts.is_empty() {
                    items.push(json!({"role": "user", "content": parts}));
                }
            }
            Message::Assistant(assistant) => assistant_items(model, assistant, &mut items),
            Message::ToolResult(result) => items.push(tool_output(result)),
        }
    }
    items
}

fn input_part(content: &Content) -> Option<Value> {
    match content {
        Content::Text { text } if text.is_empty() => None,
        Content::Text { text } => Some(json!({"type": "input_text", "text": text})),
        Content::Image { data, mime_type } => Some(json!({
            "type": "input_image",
            "image_url": format!("data:{mime_type};base64,{data}"),
        })),
    }
}

/// The items of an assistant turn: its reasoning items, text as output
/// messages and its function calls, in the order the model produced them.
fn assistant_items(model: &Model, message: &AssistantMessage, items: &mut Vec<Value>) {
    // Encrypted reasoning can only be read by the model that wrote it; after
    // a switch of model it is left out rather than risking a rejected
    // request.
    let same_model = message.provider == model.provider && message.model == model.id;
    let mut text = String::new();
    for content in &message.content {
        if !matches!(content, AssistantContent::Text { .. }) {
            flush_text(&mut text, items);
        }
        match content {
            AssistantContent::Text { text: part } => text.push_str(part),
            AssistantContent::Thinking {
                signature: Some(signature),
                redacted: false,
                ..
            } if same_model => {
                if let Some(item) = replayable_reasoning(signature) {
                    items.push(item);
                }
            }
            // Thinking without a reasoning item (a summary that was cut off,
            // or another provider's thinking) has no form OpenAI accepts.
            AssistantContent::Thinking { .. } => {}
            AssistantContent::ToolCall(call) => {
                // Arguments that did not parse are kept as the raw text;
                // sending that text back shows the model what it wrote.
                let arguments = match (&call.arguments, &call.arguments_error) {
                    (Value::String(raw), Some(_)) => raw.clone(),
                    (value, _) => value.to_string(),
                };
                items.push(json!({
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments,
                }));
            }
        }
    }
    flush_text(&mut text, items);
}

fn flush_text(text: &mut String, items: &mut Vec<Value>) {
    if !text.is_empty() {
        items.push(json!({
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": std::mem::take(text)}],
        }));
    }
}

/// The reasoning item kept in a signature, ready to send back: the item as
/// it arrived, minus its id (see the module documentation). `None` when the
/// signature is not one of ours or carries no encrypted content, which
/// OpenAI could not resolve under `store: false`.
fn replayable_reasoning(signature: &str) -> Option<Value> {
    let Ok(Value::Object(mut item)) = serde_json::from_str::<Value>(signature) else {
        return None;
    };
    let is_reasoning = item.get("type").and_then(Value::as_str) == Some("reasoning");
    let encrypted = item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty());
    if !is_reasoning || !encrypted {
        return None;
    }
    item.remove("id");
    Some(Value::Object(item))
}

/// A `function_call_output`. Text-only results are a plain string; results
/// with images use the list form of `output`, which takes `input_image`
/// parts, so images stay with their call instead of moving to a user message.
fn tool_output(result: &ToolResultMessage) -> Value {
    let has_images = result
        .content
        .iter()
        .any(|c| matches!(c, Content::Image { .. }));
    let output = if has_images {
        Value::Array(result.content.iter().filter_map(input_part).collect())
    } else {
        let text: Vec<&str> = result
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                Content::Image { .. } => None,
            })
            .collect();
        Value::String(text.join("\n"))
    };
    json!({
        "type": "function_call_output",
        "call_id": result.tool_call_id,
        "output": output,
    })
}

/// The data of one streaming event. Every event names itself in `type`;
/// events the parser does not need deserialize to `Other`.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum WireEvent {
    #[serde(rename = "response.output_item.added")]
    ItemAdded { item: Value },
    #[serde(rename = "response.output_item.done")]
    ItemDone { item: Value },
    #[serde(
        rename = "response.output_text.delta",
        alias = "response.refusal.delta"
    )]
    TextDelta {
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.refusal.done")]
    RefusalDone,
    #[serde(rename = "response.reasoning_summary_part.added")]
    SummaryPartAdded {
        #[serde(default)]
        item_id: Option<String>,
    },
    /// The summary of OpenAI's reasoning, or (from open-weight models behind
    /// compatible servers) the reasoning text itself.
    #[serde(
        rename = "response.reasoning_summary_text.delta",
        alias = "response.reasoning_text.delta"
    )]
    ReasoningDelta {
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.delta")]
    ArgumentsDelta {
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        delta: String,
    },
    #[serde(rename = "response.function_call_arguments.done")]
    ArgumentsDone {
        #[serde(default)]
        item_id: Option<String>,
        #[serde(default)]
        arguments: String,
    },
    #[serde(rename = "response.completed")]
    Completed { response: WireResponse },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: WireResponse },
    #[serde(rename = "response.failed")]
    Failed { response: WireResponse },
    /// OpenAI puts `code` and `message` on the event itself; some
    /// compatible servers nest them in an `error` object.
    #[serde(rename = "error")]
    Error {
        #[serde(default)]
        code: Option<Value>,
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        error: Option<WireError>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
struct WireResponse {
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize, Default)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputTokensDetails>,
}

#[derive(Deserialize, Default)]
struct InputTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    /// `input_tokens` includes the cached tokens and `output_tokens` the
    /// reasoning tokens; pincer counts cached input separately.
    fn into_usage(self) -> Usage {
        let cached = self
            .input_tokens_details
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        Usage {
            input: self.input_tokens.saturating_sub(cached),
            output: self.output_tokens,
            cache_read: cached,
            ..Usage::default()
        }
    }
}

/// An error as the Responses API reports it: `code` names the condition
/// (`context_length_exceeded`, `rate_limit_exceeded`, `server_error`, …).
#[derive(Deserialize, Default, Debug)]
struct WireError {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl WireError {
    /// The condition's name: `code` when it is a string, else `type`.
    fn kind(&self) -> Option<String> {
        // OpenAI's overflow message names the context window, which the
        // shared classifier does not look for, and some servers send it
        // without a code.
        let overflow = self
            .message
            .as_deref()
            .is_some_and(|m| m.to_lowercase().contains("exceeds the context window"));
        if overflow {
            return Some("context_length_exceeded".to_string());
        }
        let code = self.code.as_ref().and_then(Value::as_str);
        code.or(self.kind.as_deref()).map(str::to_string)
    }

    fn message(&self) -> String {
        match (&self.message, self.kind()) {
            (Some(message), _) if !message.is_empty() => message.clone(),
            (_, Some(kind)) => kind,
            _ => "the response failed without an error message".to_string(),
        }
    }

    /// The error of a stream that had started (HTTP 200): the status comes
    /// from the documented code.
    fn into_stream_error(self, provider: &str) -> LlmError {
        let kind = self.kind();
        let status = match kind.as_deref() {
            Some("rate_limit_exceeded" | "insufficient_quota") => 429,
            Some("vector_store_timeout") => 504,
            Some(
                "context_length_exceeded"
                | "invalid_prompt"
                | "invalid_request_error"
                | "empty_image_file"
                | "failed_to_download_image",
            ) => 400,
            Some(code)
                if code.starts_with("invalid_")
                    || code.starts_with("image_")
                    || code.starts_with("unsupported_") =>
            {
                400
            }
            // `server_error`, no code, and codes added later.
            _ => 500,
        };
        let message = self.message();
        LlmError::from_http(provider, status, kind.as_deref(), message, None)
    }
}

/// What the parser remembers about one output item.
#[derive(Debug)]
struct Item {
    /// The item's id (`rs_…`, `fc_…`, `msg_…`); deltas refer to it.
    id: Option<String>,
    kind: ItemKind,
}

#[derive(Debug)]
enum ItemKind {
    Reasoning {
        /// Whether a thinking delta went out for this item.
        started: bool,
    },
    Call {
        call_id: String,
        /// Whether any of the arguments went out.
        streamed: bool,
    },
    Message {
        /// Whether any of the text went out.
        streamed: bool,
    },
}

/// Turns the Responses API's streaming events into [`StreamEvent`]s.
pub struct Parser {
    provider: String,
    items: Vec<Item>,
    finished: bool,
    saw_call: bool,
    refused: bool,
}

impl Parser {
    pub fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            items: Vec::new(),
            finished: false,
            saw_call: false,
            refused: false,
        }
    }

    /// The item a delta refers to: by id, or the latest one when a server
    /// leaves the id out.
    fn item_mut(&mut self, id: Option<&str>) -> Option<&mut Item> {
        match id {
            Some(id) => self
                .items
                .iter_mut()
                .rev()
                .find(|item| item.id.as_deref() == Some(id)),
            None => self.items.last_mut(),
        }
    }

    fn item_added(&mut self, item: &Value, out: &mut Vec<StreamEvent>) {
        let id = item.get("id").and_then(Value::as_str).map(str::to_string);
        let kind = match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => ItemKind::Reasoning { started: false },
            Some("message") => ItemKind::Message { streamed: false },
            Some("function_call") => {
                let (call_id, name, arguments) = call_fields(item, id.as_deref());
                self.saw_call = true;
                out.push(StreamEvent::ToolCallStart {
                    id: call_id.clone(),
                    name,
                });
                let streamed = !arguments.is_empty();
                if streamed {
                    out.push(StreamEvent::ToolCallDelta {
                        id: call_id.clone(),
                        json: arguments,
                    });
                }
                ItemKind::Call { call_id, streamed }
            }
            // Built-in tools (web search, …) pincer does not request.
            _ => return,
        };
        self.items.push(Item { id, kind });
    }

    fn item_done(&mut self, item: &Value, out: &mut Vec<StreamEvent>) {
        let id = item.get("id").and_then(Value::as_str).map(str::to_string);
        match item.get("type").and_then(Value::as_str) {
            Some("reasoning") => self.reasoning_done(id, item, out),
            Some("function_call") => {
                let (call_id, name, arguments) = call_fields(item, id.as_deref());
                // `None` when the call was never announced by an
                // `output_item.added`.
                let streamed = match self.item_mut(id.as_deref()) {
                    Some(Item {
                        kind: ItemKind::Call { streamed, .. },
                        ..
                    }) => Some(std::mem::replace(streamed, true)),
                    _ => None,
                };
                if streamed.is_none() {
                    self.saw_call = true;
                    out.push(StreamEvent::ToolCallStart {
                        id: call_id.clone(),
                        name,
                    });
                }
                if streamed != Some(true) && !arguments.is_empty() {
                    out.push(StreamEvent::ToolCallDelta {
                        id: call_id,
                        json: arguments,
                    });
                }
            }
            Some("message") => {
                let streamed = match self.item_mut(id.as_deref()) {
                    Some(Item {
                        kind: ItemKind::Message { streamed },
                        ..
                    }) => std::mem::replace(streamed, true),
                    _ => false,
                };
                // Servers that send only the finished item still get their
                // text shown.
                if !streamed {
                    let text = message_text(item);
                    if !text.is_empty() {
                        out.push(StreamEvent::TextDelta(text));
                    }
                }
            }
            _ => {}
        }
    }

    fn reasoning_done(&mut self, id: Option<String>, item: &Value, out: &mut Vec<StreamEvent>) {
        let started = match self.item_mut(id.as_deref()) {
            Some(Item {
                kind: ItemKind::Reasoning { started },
                ..
            }) => std::mem::replace(started, true),
            _ => false,
        };
        let encrypted = item
            .get("encrypted_content")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty());
        if !started {
            // The summary was not streamed (a server that sends only whole
            // items); a signed item with no summary still needs its own
            // thinking block, or the signature would land on an earlier one.
            let summary = summary_text(item);
            if !summary.is_empty() || encrypted {
                out.push(StreamEvent::ThinkingDelta(summary));
            }
        }
        if encrypted {
            out.push(StreamEvent::ThinkingSignature(item.to_string()));
        }
    }

    fn on_wire_event(&mut self, event: WireEvent) -> Result<Vec<StreamEvent>, LlmError> {
        let mut out = Vec::new();
        match event {
            WireEvent::ItemAdded { item } => self.item_added(&item, &mut out),
            WireEvent::ItemDone { item } => self.item_done(&item, &mut out),
            WireEvent::TextDelta { item_id, delta } => {
                if let Some(Item {
                    kind: ItemKind::Message { streamed },
                    ..
                }) = self.item_mut(item_id.as_deref())
                {
                    *streamed = true;
                }
                if !delta.is_empty() {
                    out.push(StreamEvent::TextDelta(delta));
                }
            }
            WireEvent::RefusalDone => self.refused = true,
            WireEvent::SummaryPartAdded { item_id } => {
                // Summary parts are separate paragraphs; keep them apart.
                if let Some(Item {
                    kind: ItemKind::Reasoning { started: true },
                    ..
                }) = self.item_mut(item_id.as_deref())
                {
                    out.push(StreamEvent::ThinkingDelta("\n\n".to_string()));
                }
            }
            WireEvent::ReasoningDelta { item_id, delta } => {
                if delta.is_empty() {
                    return Ok(out);
                }
                if let Some(Item {
                    kind: ItemKind::Reasoning { started },
                    ..
                }) = self.item_mut(item_id.as_deref())
                {
                    *started = true;
                }
                out.push(StreamEvent::ThinkingDelta(delta));
            }
            WireEvent::ArgumentsDelta { item_id, delta } => {
                if let Some(Item {
                    kind:
                        ItemKind::Call {
                            call_id, streamed, ..
                        },
                    ..
                }) = self.item_mut(item_id.as_deref())
                    && !delta.is_empty()
                {
                    *streamed = true;
                    out.push(StreamEvent::ToolCallDelta {
                        id: call_id.clone(),
                        json: delta,
                    });
                }
            }
            WireEvent::ArgumentsDone { item_id, arguments } => {
                if let Some(Item {
                    kind:
                        ItemKind::Call {
                            call_id, streamed, ..
                        },
                    ..
                }) = self.item_mut(item_id.as_deref())
                    && !*streamed
                    && !arguments.is_empty()
                {
                    *streamed = true;
                    out.push(StreamEvent::ToolCallDelta {
                        id: call_id.clone(),
                        json: arguments,
                    });
                }
            }
            WireEvent::Completed { response } => {
                self.finished = true;
                if let Some(usage) = response.usage {
                    out.push(StreamEvent::Usage(usage.into_usage()));
                }
                out.push(StreamEvent::Stop(self.stop_reason(None)));
            }
            WireEvent::Incomplete { response } => {
                self.finished = true;
                if let Some(usage) = response.usage {
                    out.push(StreamEvent::Usage(usage.into_usage()));
                }
                let reason = response.incomplete_details.and_then(|d| d.reason);
                out.push(StreamEvent::Stop(self.stop_reason(reason.as_deref())));
            }
            WireEvent::Failed { response } => {
                self.finished = true;
                let error = response.error.unwrap_or_default();
                return Err(error.into_stream_error(&self.provider));
            }
            WireEvent::Error {
                code,
                message,
                error,
            } => {
                let error = error.unwrap_or(WireError {
                    code,
                    kind: None,
                    message,
                });
                return Err(error.into_stream_error(&self.provider));
            }
            WireEvent::Other => {}
        }
        Ok(out)
    }

    /// The stop reason at the end; `incomplete` is the reason of a
    /// `response.incomplete`.
    fn stop_reason(&self, incomplete: Option<&str>) -> StopReason {
        match incomplete {
            Some("content_filter") => StopReason::Refusal,
            // `max_output_tokens`, and reasons added later: the answer was
            // cut short.
            Some(_) => StopReason::Length,
            None if self.saw_call => StopReason::ToolUse,
            None if self.refused => StopReason::Refusal,
            None => StopReason::Stop,
        }
    }
}

/// `call_id`, `name` and `arguments` of a function call item. The call id
/// is what results pair with; a server that leaves it out gets the item id.
fn call_fields(item: &Value, item_id: Option<&str>) -> (String, String, String) {
    let field = |name: &str| item.get(name).and_then(Value::as_str).unwrap_or_default();
    let call_id = match field("call_id") {
        "" => item_id.unwrap_or_default().to_string(),
        id => id.to_string(),
    };
    (
        call_id,
        field("name").to_string(),
        field("arguments").to_string(),
    )
}

/// The text of a finished message item (output text and refusals).
fn message_text(item: &Value) -> String {
    let Some(parts) = item.get("content").and_then(Value::as_array) else {
        return String::new();
    };
    parts
        .iter()
        .filter_map(|part| {
            part.get("text")
                .or_else(|| part.get("refusal"))
                .and_then(Value::as_str)
        })
        .collect()
}

/// The summary paragraphs of a finished reasoning item, as the stream
/// would have delivered them.
fn summary_text(item: &Value) -> String {
    let Some(parts) = item.get("summary").and_then(Value::as_array) else {
        return String::new();
    };
    parts
        .iter()
        .filter_map(|part| part.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n\n")
}

impl WireFormat for Parser {
    fn on_event(&mut self, event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError> {
        let data = event.data.trim();
        if self.finished || data.is_empty() {
            return Ok(Vec::new());
        }
        let wire: WireEvent =
            serde_json::from_str(data).map_err(|e| LlmError::MalformedStream {
                provider: self.provider.clone(),
                message: format!(
                    "the data of a `{}` event is not valid ({e}): {}",
                    if event.event.is_empty() {
                        "message"
                    } else {
                        event.event.as_str()
                    },
                    truncate(data, 200)
                ),
            })?;
        self.on_wire_event(wire)
    }

    fn finished(&self) -> bool {
        self.finished
    }
}

/// Classifies a non-2xx answer from its status and body.
/// The error in a 200 answer whose body is an error document
/// (`{"error":{…}}`) instead of a stream, classified by its code as an
/// error inside a stream is. `None` when the body is no error (a whole
/// response object has `"error": null`).
pub fn error_in_ok_body(provider: &str, body: &str) -> Option<LlmError> {
    #[derive(Deserialize)]
    struct ErrorBody {
        error: Option<WireError>,
    }
    let error = serde_json::from_str::<ErrorBody>(body).ok()?.error?;
    Some(error.into_stream_error(provider))
}

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
        Ok(ErrorBody { error }) => {
            let kind = error.kind();
            LlmError::from_http(
                provider,
                status,
                kind.as_deref(),
                error.message(),
                retry_after,
            )
        }
        Err(_) => {
            let message = match body.trim() {
                "" => format!("HTTP {status} with an empty body"),
                text => truncate(text, ERROR_BODY_LIMIT),
            };
            LlmError::from_http(provider, status, None, message, retry_after)
        }
    }
}

#[cfg(test)]
#[path = "openai_responses/tests.rs"]
mod tests;
