//! Google's Gemini API (`POST {base}/models/{id}:streamGenerateContent?alt=sse`).
//!
//! This file owns everything Gemini-specific: turning a [`Request`] into
//! `contents` (tool results as `functionResponse` parts of a user turn),
//! cutting tool schemas down to the OpenAPI subset Gemini accepts, turning
//! the streamed `GenerateContentResponse` chunks back into [`StreamEvent`]s,
//! and classifying Google's error bodies.
//!
//! Thought signatures. Gemini may put an opaque `thoughtSignature` on any
//! part it returns (a function call, text, a thought), and requires the
//! signature of a function call back on that call (Gemini 3 rejects the
//! request otherwise). pincer's blocks have no such field, so a signature
//! travels as a signed thinking block placed just before the block of the
//! part that carried it: the parser emits it ahead of the part, and the
//! request builder puts it on the next text or function call part it sends
//! (or, for the trailing signature Gemini sends after the text, on the last
//! part). Thought summaries themselves are not sent back; the signature is
//! what carries the model's reasoning.
//!
//! Gemini sends no final event: the chunk with a `finishReason` is the last
//! one (and carries the final usage), so a stream without it was cut off.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::truncate;
use super::{
    AssistantContent, AssistantMessage, Content, HttpRequest, LlmError, Message, Model, Request,
    Secret, StopReason, StreamEvent, ThinkingLevel, ToolResultMessage, ToolSpec, Usage, WireFormat,
    sse,
};

/// Output cap when neither the request nor a smaller model limit says less.
const DEFAULT_OUTPUT_CAP: u64 = 32_000;
/// How much of a non-JSON error body (an HTML page from a proxy) to keep.
const ERROR_BODY_LIMIT: usize = 500;
/// Google's documented stand-in for a missing signature, for function
/// calls that did not come from this model (another provider, a model
/// switch); Gemini 3 rejects an unsigned call in the current turn.
const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";
/// Deeper schemas (or `$ref` cycles) are cut off here.
const MAX_SCHEMA_DEPTH: usize = 24;

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
        headers.push(("x-goog-api-key".to_string(), key.expose().to_string()));
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
    let conversation = if cached {
        body.insert("contents".into(), Value::Null);
        let convert = |messages: &[Message]| convert_messages(model, messages);
        let format = super::conversation::Format {
            convert: &convert,
            mark: &|_: &mut [Value]| 0,
            marks: 0,
            joins_by: |turn| turn["role"].as_str(),
        };
        Some(super::conversation::serialised(model, request, &format))
    } else {
        body.insert(
            "contents".into(),
            Value::Array(convert_messages(model, &request.messages)),
        );
        None
    };
    if !request.system.trim().is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": request.system}]}),
        );
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request.tools.iter().map(function_declaration).collect();
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }
    body.insert("generationConfig".into(), generation_config(model, request));

    // Model ids are sometimes written the way the API names them.
    let id = model.id.strip_prefix("models/").unwrap_or(&model.id);
    let bytes = conversation.map(|c| super::conversation::body_with(&body, "contents", &c));
    HttpRequest {
        url: format!(
            "{}/models/{id}:streamGenerateContent?alt=sse",
            model.base_url
        ),
        headers,
        body: Value::Object(body),
        bytes,
    }
}

/// `maxOutputTokens` and, when thinking is on, `thinkingConfig`. Gemini
/// counts thoughts against `maxOutputTokens`, so the thinking budget is
/// added to the answer's cap, within the model's limit.
fn generation_config(model: &Model, request: &Request) -> Value {
    let base = request
        .max_tokens
        .unwrap_or_else(|| model.max_tokens.min(DEFAULT_OUTPUT_CAP));
    let mut config = Map::new();
    match request.thinking.anthropic_budget() {
        Some(budget) if model.reasoning => {
            config.insert(
                "maxOutputTokens".into(),
                json!(model.max_tokens.min(base.saturating_add(budget))),
            );
            let thinking = if is_gemini_3(model) {
                // Gemini 3 takes a level; its models know `low` and `high`.
                let level = match request.thinking {
                    ThinkingLevel::Medium | ThinkingLevel::High => "high",
                    _ => "low",
                };
                json!({"thinkingLevel": level, "includeThoughts": true})
            } else {
                json!({"thinkingBudget": budget, "includeThoughts": true})
            };
            config.insert("thinkingConfig".into(), thinking);
        }
        _ => {
            config.insert("maxOutputTokens".into(), json!(base));
        }
    }
    Value::Object(config)
}

fn is_gemini_3(model: &Model) -> bool {
    model.id.contains("gemini-3")
}

/// Converts the history. Consecutive messages of one role (the results of
/// parallel calls, a user message after them) become one turn, because
/// Gemini wants all responses to a turn's calls together; within a user
/// turn the function responses come first.
fn convert_messages(model: &Model, messages: &[Message]) -> Vec<Value> {
    let converted = messages.iter().map(|message| match message {
        Message::User { content } => ("user", content.iter().filter_map(content_part).collect()),
        Message::Assistant(message) => ("model", model_parts(model, message)),
        Message::ToolResult(result) => ("user", function_response(result)),
    });
    super::alternating_turns(converted, |part| part.get("functionResponse").is_some())
        .into_iter()
        .map(|turn| json!({"role": turn.role, "parts": turn.blocks}))
        .collect()
}

/// A user part; Gemini rejects empty text.
fn content_part(content: &Content) -> Option<Value> {
    match content {
        Content::Text { text } if text.trim().is_empty() => None,
        Content::Text { text } => Some(json!({"text": text})),
        Content::Image { data, mime_type } => {
            Some(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
        }
    }
}

/// The parts of a model turn, with each thought signature on the part that
/// follows its thinking block (see the module documentation).
fn model_parts(model: &Model, message: &AssistantMessage) -> Vec<Value> {
    // Signatures are only valid for the model that made them.
    let same_model = message.provider == model.provider && message.model == model.id;
    let mut parts: Vec<Value> = Vec::new();
    let mut pending: Option<&str> = None;
    let mut first_call = true;
    for content in &message.content {
        match content {
            AssistantContent::Thinking {
                signature: Some(signature),
                redacted: false,
                ..
            } if same_model && !signature.is_empty() => pending = Some(signature),
            AssistantContent::Thinking { .. } => {}
            AssistantContent::Text { text } => {
                if text.trim().is_empty() {
                    continue;
                }
                let mut part = json!({"text": text});
                if let Some(signature) = pending.take() {
                    part["thoughtSignature"] = json!(signature);
                }
                parts.push(part);
            }
            AssistantContent::ToolCall(call) => {
                // Arguments that did not parse are kept as a JSON string;
                // Gemini accepts only an object as `args`.
                let args = if call.arguments.is_object() {
                    call.arguments.clone()
                } else {
                    json!({})
                };
                let mut part = json!({"functionCall": {"name": call.name, "args": args}});
                match pending.take() {
                    Some(signature) => part["thoughtSignature"] = json!(signature),
                    // Only the first call of a step carries a signature.
                    None if first_call && is_gemini_3(model) => {
                        part["thoughtSignature"] = json!(SKIP_SIGNATURE);
                    }
                    None => {}
                }
                first_call = false;
                parts.push(part);
            }
        }
    }
    // Gemini sends the signature of a text answer after the text, in a part
    // of its own with no text; it goes back on the last part.
    if let (Some(signature), Some(Value::Object(last))) = (pending, parts.last_mut())
        && !last.contains_key("thoughtSignature")
    {
        last.insert("thoughtSignature".into(), json!(signature));
    }
    parts
}

/// The parts for one tool result: its `functionResponse` and, after it,
/// its images. Gemini 2.x takes no images inside a function response, so
/// they follow as ordinary parts of the same user turn, introduced by a
/// line that names the tool.
fn function_response(result: &ToolResultMessage) -> Vec<Value> {
    let text: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| match c {
            Content::Text { text } => Some(text.as_str()),
            Content::Image { .. } => None,
        })
        .collect();
    let images: Vec<Value> = result
        .content
        .iter()
        .filter(|c| matches!(c, Content::Image { .. }))
        .filter_map(content_part)
        .collect();
    let mut text = text.join("\n");
    if text.is_empty() && !images.is_empty() {
        text = "(the output is the image below)".to_string();
    }
    // The google-genai SDKs' convention: `output` for a result, `error` for
    // a failure.
    let key = if result.is_error { "error" } else { "output" };
    let mut parts = vec![json!({
        "functionResponse": {"name": result.tool_name, "response": {key: text}},
    })];
    if !images.is_empty() {
        parts.push(json!({
            "text": format!("Image output of the {} tool call:", result.tool_name),
        }));
        parts.extend(images);
    }
    parts
}

fn function_declaration(tool: &ToolSpec) -> Value {
    let mut declaration = json!({"name": tool.name, "description": tool.description});
    let parameters = clean_schema(&tool.parameters);
    // Gemini rejects an object schema without properties; a tool that takes
    // no arguments declares no parameters at all.
    let has_properties = parameters
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    if has_properties {
        declaration["parameters"] = parameters;
    }
    declaration
}

/// Cuts a JSON Schema down to the OpenAPI 3.0 subset Gemini's function
/// declarations accept: `$ref`s inlined from `$defs`/`definitions`, type
/// lists and `null` variants turned into `nullable`, `oneOf` into `anyOf`,
/// `const` into a one-value `enum`, and every keyword Gemini would reject
/// (`$schema`, `additionalProperties`, `title`, `default`, unknown
/// `format`s, …) dropped.
fn clean_schema(schema: &Value) -> Value {
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    clean_node(schema, defs, 0)
}

fn clean_node(schema: &Value, defs: &Map<String, Value>, depth: usize) -> Value {
    let Value::Object(node) = schema else {
        // `true` (anything) and `false` schemas have no OpenAPI form.
        return json!({});
    };
    if depth > MAX_SCHEMA_DEPTH {
        return json!({});
    }
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let mut merged = defs
            .get(name)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // Keywords next to the `$ref` (a description) win over the target's.
        for (key, value) in node.iter().filter(|(key, _)| *key != "$ref") {
            merged.insert(key.clone(), value.clone());
        }
        return clean_node(&Value::Object(merged), defs, depth + 1);
    }

    let mut out = Map::new();
    let mut nullable = node.get("nullable").and_then(Value::as_bool) == Some(true);

    // `allOf` parts are merged into the node: Gemini has no intersection.
    let mut merged_node = node.clone();
    if let Some(Value::Array(parts)) = node.get("allOf") {
        merged_node.remove("allOf");
        for part in parts {
            if let Value::Object(part) = clean_node(part, defs, depth + 1) {
                merge_schema(&mut merged_node, part);
            }
        }
    }
    let node = &merged_node;

    match node.get("type") {
        Some(Value::String(kind)) if kind == "null" => nullable = true,
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind));
        }
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            nullable |= kinds.contains(&"null");
            let kinds: Vec<&str> = kinds.into_iter().filter(|k| *k != "null").collect();
            match kinds.as_slice() {
                [] => {}
                [kind] => {
                    out.insert("type".into(), json!(kind));
                }
                many => {
                    let variants: Vec<Value> =
                        many.iter().map(|kind| json!({"type": kind})).collect();
                    out.insert("anyOf".into(), Value::Array(variants));
                }
            }
        }
        _ => {}
    }

    let variants = node
        .get("anyOf")
        .or_else(|| node.get("oneOf"))
        .and_then(Value::as_array);
    if let Some(variants) = variants {
        let mut kept = Vec::new();
        for variant in variants {
            if variant.get("type").and_then(Value::as_str) == Some("null") {
                nullable = true;
                continue;
            }
            kept.push(clean_node(variant, defs, depth + 1));
        }
        match kept.len() {
            0 => {}
            // `Option<T>` in most generators: the one real variant is the
            // schema.
            1 => {
                if let Some(Value::Object(only)) = kept.pop() {
                    for (key, value) in only {
                        out.entry(key).or_insert(value);
                    }
                }
            }
            _ => {
                out.insert("anyOf".into(), Value::Array(kept));
            }
        }
    }

    if let Some(description) = node.get("description").and_then(Value::as_str) {
        out.insert("description".into(), json!(description));
    }

    // Gemini's enums are lists of strings.
    let values = match (node.get("enum"), node.get("const")) {
        (Some(Value::Array(values)), _) => Some(values.clone()),
        (None, Some(value)) => Some(vec![value.clone()]),
        _ => None,
    };
    if let Some(values) = values {
        let non_null: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
        nullable |= non_null.len() < values.len();
        let strings: Option<Vec<&str>> = non_null.iter().map(|v| v.as_str()).collect();
        if let Some(strings) = strings.filter(|s| !s.is_empty()) {
            out.insert("enum".into(), json!(strings));
            out.entry("type").or_insert(json!("string"));
        }
    }

    if let Some(Value::Object(properties)) = node.get("properties") {
        let cleaned: Map<String, Value> = properties
            .iter()
            .map(|(name, property)| (name.clone(), clean_node(property, defs, depth + 1)))
            .collect();
        if let Some(Value::Array(required)) = node.get("required") {
            // Gemini rejects required names that are not properties.
            let required: Vec<&Value> = required
                .iter()
                .filter(|name| name.as_str().is_some_and(|n| cleaned.contains_key(n)))
                .collect();
            if !required.is_empty() {
                out.insert("required".into(), json!(required));
            }
        }
        out.insert("properties".into(), Value::Object(cleaned));
        out.entry("type").or_insert(json!("object"));
    }

    let items = match node.get("items") {
        Some(Value::Array(tuple)) => tuple.first(),
        other => other,
    };
    if let Some(items) = items {
        out.insert("items".into(), clean_node(items, defs, depth + 1));
        out.entry("type").or_insert(json!("array"));
    }

    let kind = out.get("type").and_then(Value::as_str).unwrap_or_default();
    if let Some(format) = node.get("format").and_then(Value::as_str) {
        // The Gemini API fails requests with any other format.
        let known = matches!(
            (kind, format),
            ("string", "enum" | "date-time")
                | ("number", "float" | "double")
                | ("integer", "int32" | "int64")
        );
        if known {
            out.insert("format".into(), json!(format));
        }
    }
    for key in ["minimum", "maximum"] {
        if let Some(value) = node.get(key).filter(|v| v.is_number()) {
            out.insert(key.into(), value.clone());
        }
    }
    for key in [
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
    ] {
        if let Some(value) = node.get(key).filter(|v| v.is_u64()) {
            out.insert(key.into(), value.clone());
        }
    }
    if let Some(pattern) = node.get("pattern").and_then(Value::as_str) {
        out.insert("pattern".into(), json!(pattern));
    }
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    Value::Object(out)
}

/// Merges the keywords of an `allOf` part into `target`: properties and
/// required names are joined, other keywords fill gaps.
fn merge_schema(target: &mut Map<String, Value>, part: Map<String, Value>) {
    for (key, value) in part {
        match (key.as_str(), target.get_mut(&key), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(more)) => {
                existing.extend(more);
            }
            ("required", Some(Value::Array(existing)), Value::Array(more)) => {
                existing.extend(more);
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                target.insert(key, value);
            }
        }
    }
}

/// One streamed `GenerateContentResponse`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    content: Option<CandidateContent>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    finish_message: Option<String>,
}

#[derive(Deserialize)]
struct CandidateContent {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
}

impl UsageMetadata {
    /// The prompt count includes the cached tokens, which pincer counts
    /// separately; thoughts are output the model was paid for.
    fn usage(&self) -> Usage {
        Usage {
            input: self
                .prompt_token_count
                .saturating_sub(self.cached_content_token_count),
            output: self.candidates_token_count + self.thoughts_token_count,
            cache_read: self.cached_content_token_count,
            ..Usage::default()
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// Turns Gemini's streamed chunks into [`StreamEvent`]s.
pub struct Parser {
    provider: String,
    finished: bool,
    /// Calls seen so far, for synthesized ids.
    calls: u64,
    usage: Option<Usage>,
    /// Makes synthesized call ids unique across turns, so that an editor
    /// showing tool calls by id never confuses two of them.
    nonce: String,
}

impl Parser {
    pub fn new(provider: &str) -> Self {
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        Self {
            provider: provider.to_string(),
            finished: false,
            calls: 0,
            usage: None,
            nonce: nonce.chars().take(8).collect(),
        }
    }

    fn on_part(&mut self, part: Part, out: &mut Vec<StreamEvent>) {
        if let Some(signature) = part.thought_signature.filter(|s| !s.is_empty()) {
            // A thinking block of its own (or the open one), just before the
            // part the signature belongs to.
            out.push(StreamEvent::ThinkingDelta(String::new()));
            out.push(StreamEvent::ThinkingSignature(signature));
        }
        if let Some(call) = part.function_call {
            // Gemini gives no ids unless asked to; results pair with calls
            // by order there, but pincer pairs them by id.
            let id = match call.id.filter(|id| !id.is_empty()) {
                Some(id) => id,
                None => format!("call_{}_{}", self.calls, self.nonce),
            };
            self.calls += 1;
            out.push(StreamEvent::ToolCallStart {
                id: id.clone(),
                name: call.name,
            });
            let args = call.args.unwrap_or_else(|| json!({}));
            out.push(StreamEvent::ToolCallDelta {
                id,
                json: args.to_string(),
            });
        } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            if part.thought == Some(true) {
                out.push(StreamEvent::ThinkingDelta(text));
            } else {
                out.push(StreamEvent::TextDelta(text));
            }
        }
    }

    fn on_chunk(&mut self, chunk: Chunk) -> Result<Vec<StreamEvent>, LlmError> {
        let mut out = Vec::new();
        // pincer asks for one candidate; ignore any others.
        let candidate = chunk
            .candidates
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0);
        let mut finish = None;
        if let Some(candidate) = candidate {
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                self.on_part(part, &mut out);
            }
            if let Some(reason) = candidate.finish_reason {
                finish = Some((reason, candidate.finish_message));
            }
        }
        if let Some((reason, message)) = finish {
            self.finished = true;
            match finish_reason(&reason, self.calls > 0) {
                Some(stop) => out.push(StreamEvent::Stop(stop)),
                None => {
                    let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
                    return Err(LlmError::MalformedStream {
                        provider: self.provider.clone(),
                        message: format!("the model's turn ended with {reason}{detail}"),
                    });
                }
            }
        } else if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            // The prompt itself was blocked: no candidate will come.
            tracing::debug!(%reason, "Gemini blocked the prompt");
            self.finished = true;
            out.push(StreamEvent::Stop(StopReason::Refusal));
        }
        if let Some(metadata) = chunk.usage_metadata {
            let usage = metadata.usage();
            if self.usage != Some(usage) {
                self.usage = Some(usage);
                out.push(StreamEvent::Usage(usage));
            }
        }
        Ok(out)
    }
}

/// The stop reason for a `finishReason`; `None` for the reasons that mean
/// the model's output was unusable.
fn finish_reason(reason: &str, called: bool) -> Option<StopReason> {
    match reason {
        "MAX_TOKENS" => Some(StopReason::Length),
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "LANGUAGE" => Some(StopReason::Refusal),
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => None,
        _ if called => Some(StopReason::ToolUse),
        // STOP, and reasons added later: the turn is over.
        _ => Some(StopReason::Stop),
    }
}

impl WireFormat for Parser {
    fn on_event(&mut self, event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError> {
        let data = event.data.trim();
        if self.finished || data.is_empty() {
            return Ok(Vec::new());
        }
        let value: Value = serde_json::from_str(data).map_err(|e| self.malformed(&e, data))?;
        if let Some(error) = GoogleError::from_body(&value) {
            let status = error.http_status();
            return Err(error.classify(&self.provider, status, None));
        }
        let chunk: Chunk = serde_json::from_value(value).map_err(|e| self.malformed(&e, data))?;
        self.on_chunk(chunk)
    }

    fn finished(&self) -> bool {
        self.finished
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

/// Google's error object: `{"error": {"code", "message", "status",
/// "details"}}`.
#[derive(Debug, Default, Deserialize)]
struct GoogleError {
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    message: String,
    /// The gRPC status name (`RESOURCE_EXHAUSTED`, `INVALID_ARGUMENT`, …).
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    details: Vec<Value>,
}

impl GoogleError {
    /// Reads `{"error": {...}}`, or the same inside a one-element array
    /// (the form of the non-SSE stream). `None` when `value` is no error.
    fn from_body(value: &Value) -> Option<Self> {
        let error = match value {
            Value::Array(items) => items.first()?.get("error")?,
            other => other.get("error")?,
        };
        match error {
            // Proxies in front of Gemini sometimes answer in their own words.
            Value::String(message) => Some(Self {
                message: message.clone(),
                ..Self::default()
            }),
            Value::Null => None,
            other => Some(
                serde_json::from_value(other.clone()).unwrap_or_else(|_| Self {
                    message: truncate(&other.to_string(), ERROR_BODY_LIMIT),
                    ..Self::default()
                }),
            ),
        }
    }

    /// The HTTP status an error inside a 200 stream stands for.
    fn http_status(&self) -> u16 {
        if let Some(code) = self.code.filter(|c| (400..=599).contains(c)) {
            return code;
        }
        match self.status.as_deref() {
            Some("INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE") => 400,
            Some("UNAUTHENTICATED") => 401,
            Some("PERMISSION_DENIED") => 403,
            Some("NOT_FOUND") => 404,
            Some("RESOURCE_EXHAUSTED") => 429,
            Some("UNAVAILABLE") => 503,
            Some("DEADLINE_EXCEEDED") => 504,
            _ => 500,
        }
    }

    /// The reason of the `google.rpc.ErrorInfo` detail, if any.
    fn reason(&self) -> Option<&str> {
        self.details
            .iter()
            .find_map(|detail| detail.get("reason").and_then(Value::as_str))
    }

    /// The wait a `google.rpc.RetryInfo` detail asks for (`"37s"`).
    fn retry_delay(&self) -> Option<Duration> {
        self.details.iter().find_map(|detail| {
            let kind = detail.get("@type").and_then(Value::as_str)?;
            if !kind.ends_with("google.rpc.RetryInfo") {
                return None;
            }
            let delay = detail.get("retryDelay").and_then(Value::as_str)?;
            let seconds: f64 = delay.strip_suffix('s')?.parse().ok()?;
            (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
        })
    }

    fn classify(self, provider: &str, status: u16, retry_after: Option<Duration>) -> LlmError {
        let provider_name = provider.to_string();
        let lower = self.message.to_lowercase();
        let message = if self.message.is_empty() {
            self.status
                .clone()
                .unwrap_or_else(|| format!("HTTP {status}"))
        } else {
            self.message.clone()
        };
        let grpc = self.status.as_deref().unwrap_or_default();
        // A bad key is a 400 INVALID_ARGUMENT at Gemini, not a 401.
        if self.reason() == Some("API_KEY_INVALID") || lower.contains("api key not valid") {
            return LlmError::Auth {
                provider: provider_name,
                message,
            };
        }
        // Gemini's rate limits speak of "quota" even per minute, so a 429 is
        // never read as a billing problem here.
        if grpc == "RESOURCE_EXHAUSTED" || status == 429 {
            return LlmError::RateLimit {
                provider: provider_name,
                message,
                retry_after: retry_after.or_else(|| self.retry_delay()),
            };
        }
        let overflow = lower.contains("exceeds the maximum number of tokens")
            || (lower.contains("input token count") && lower.contains("exceed"));
        if overflow {
            return LlmError::ContextOverflow {
                provider: provider_name,
                message,
            };
        }
        let kind = (!grpc.is_empty()).then_some(grpc);
        LlmError::from_http(provider, status, kind, message, retry_after)
    }
}

/// Classifies a non-2xx answer from its status and body.
/// The error in a 200 answer whose body is an error document instead of a
/// stream, classified by its code or gRPC status as an error inside a
/// stream is. `None` when the body is no error.
pub fn error_in_ok_body(provider: &str, body: &str) -> Option<LlmError> {
    let value = serde_json::from_str::<Value>(body).ok()?;
    let error = GoogleError::from_body(&value)?;
    let status = error.http_status();
    Some(error.classify(provider, status, None))
}

pub fn error_from_response(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> LlmError {
    let error = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|value| GoogleError::from_body(&value));
    match error {
        Some(error) => error.classify(provider, status, retry_after),
        None => {
            let message = match body.trim() {
                "" => format!("HTTP {status} with an empty body"),
                text => truncate(text, ERROR_BODY_LIMIT),
            };
            LlmError::from_http(provider, status, None, message, retry_after)
        }
    }
}

#[cfg(test)]
#[path = "google/tests.rs"]
mod tests;
