//! Amazon Bedrock's Converse API, streaming
//! (`POST /model/{modelId}/converse-stream`).
//!
//! This file owns the Bedrock-specific parts: turning a [`Request`] into a
//! Converse body (content blocks, tool results merged into one user turn,
//! Claude's thinking budget through `additionalModelRequestFields`),
//! authenticating it (a Bedrock API key as a bearer token, or SigV4 with AWS
//! credentials), turning the response, an AWS event stream of binary frames
//! rather than server-sent events, back into [`StreamEvent`]s, and
//! classifying Bedrock's errors, whether they come as an HTTP answer or as
//! an exception frame mid-stream. The framing, the signer and the
//! credential chain live in the submodules.

pub mod credentials;
mod eventstream;
mod sigv4;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::{Map, Value, json};

pub use credentials::AwsCredentials;

use super::{
    Api, AssistantContent, AssistantMessage, Content, HttpRequest, LlmError, Message, Model,
    Request, Secret, StopReason, StreamEvent, ToolResultMessage, Usage, WireFormat, sse,
};

/// The SigV4 signing name of the Bedrock runtime.
const SERVICE: &str = "bedrock";
/// Sent in place of an empty tool result: Converse rejects blank text and
/// empty result content.
const EMPTY_TOOL_RESULT: &str = "(no output)";
/// How much of a non-JSON error body (an HTML page from a proxy) to keep.
const MAX_ERROR_BODY_CHARS: usize = 500;

/// How a request authenticates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Auth<'a> {
    /// A Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`).
    Bearer(&'a Secret),
    /// AWS credentials, signed with SigV4.
    SigV4(&'a AwsCredentials),
}

/// A Bedrock request, authorised: a Bedrock API key when one is given (profile or
/// AWS_BEARER_TOKEN_BEDROCK), else SigV4 with the AWS credential chain of
/// this process's environment and `~/.aws`. Async: the chain may take
/// HTTP calls (SSO, STS, instance metadata).
pub async fn authorised_request(
    client: &reqwest::Client,
    model: &Model,
    key: Option<&Secret>,
    request: &Request,
) -> Result<HttpRequest, LlmError> {
    let env = |name: &str| std::env::var(name).ok();
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let auth_error = |message: String| LlmError::Auth {
        provider: model.provider.clone(),
        message,
    };
    let (region, settings) = match key {
        // A key needs no AWS credentials, only the region.
        Some(_) => (
            credentials::region(&env, home.as_deref()).map_err(|e| auth_error(e.to_string()))?,
            None,
        ),
        None => {
            let settings = credentials::load(&env, home.as_deref(), client)
                .await
                .map_err(|e| auth_error(e.to_string()))?;
            (settings.region.clone(), Some(settings))
        }
    };
    let region = region.unwrap_or_else(|| "us-east-1".to_string());
    let auth = match (key, &settings) {
        (Some(key), _) => Auth::Bearer(key),
        (None, settings) => settings.as_ref().and_then(|s| s.auth()).ok_or_else(|| {
            auth_error(
                "no AWS credentials: set AWS_BEARER_TOKEN_BEDROCK, or AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY, or configure a profile (`aws configure`, \
                 `aws configure sso`; AWS_PROFILE selects it)"
                    .to_string(),
            )
        })?,
    };
    if let Some((_, source)) = settings.as_ref().and_then(|s| s.credentials.as_ref()) {
        tracing::debug!(%source, "using AWS credentials");
    }
    Ok(build_request_cached(
        model,
        auth,
        &region,
        request,
        std::time::SystemTime::now(),
    ))
}

/// A `base_url` whose region is filled in per request, so that a region
/// found only in `~/.aws/config` still reaches the URL.
pub const ENDPOINT_TEMPLATE: &str = "https://bedrock-runtime.{region}.amazonaws.com";

/// The Bedrock runtime endpoint of `region`.
pub fn endpoint(region: &str) -> String {
    ENDPOINT_TEMPLATE.replace("{region}", region)
}

/// Builds the ConverseStream request for `model`. `region` is the SigV4
/// scope, and replaces `{region}` in the model's `base_url` (an empty
/// `base_url` is [`ENDPOINT_TEMPLATE`]); `now` is the signing time.
///
/// The signature covers [`HttpRequest::body_bytes`] (`serde_json::to_vec`
/// of the body), which is exactly what the stream sends; a sender that
/// serialises differently must re-sign.
pub fn build_request(
    model: &Model,
    auth: Auth<'_>,
    region: &str,
    request: &Request,
    now: SystemTime,
) -> HttpRequest {
    build(model, auth, region, request, now, false)
}

/// [`build_request`] with the conversation serialised from the session's
/// earlier calls where they sent the same messages (see
/// [`super::conversation`]): the same bytes, for a fraction of the work,
/// and signed as they are.
pub(crate) fn build_request_cached(
    model: &Model,
    auth: Auth<'_>,
    region: &str,
    request: &Request,
    now: SystemTime,
) -> HttpRequest {
    build(model, auth, region, request, now, true)
}

fn build(
    model: &Model,
    auth: Auth<'_>,
    region: &str,
    request: &Request,
    now: SystemTime,
    cached: bool,
) -> HttpRequest {
    let base = if model.base_url.is_empty() {
        ENDPOINT_TEMPLATE
    } else {
        model.base_url.trim_end_matches('/')
    };
    let base = base.replace("{region}", region);
    // The model id is one path segment: `:` (versions) and `/` (ARNs)
    // must be percent-encoded.
    let url = format!(
        "{base}/model/{}/converse-stream",
        sigv4::uri_encode(&model.id, false)
    );
    let (body, bytes) = request_body(model, request, cached);

    let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
    match auth {
        Auth::Bearer(key) => headers.push((
            "authorization".to_string(),
            format!("Bearer {}", key.expose()),
        )),
        Auth::SigV4(credentials) => {
            let serialised;
            let payload: &[u8] = match &bytes {
                Some(bytes) => bytes,
                None => {
                    // Serialising a `Value` cannot fail (its keys are strings).
                    serialised = serde_json::to_vec(&body).unwrap_or_default();
                    &serialised
                }
            };
            if let Some(signed) = sign(&url, credentials, region, payload, now) {
                headers.extend(signed.headers);
            }
        }
    }
    // A configured header replaces the default of the same name instead of
    // being sent twice. Configured headers are not signed; SigV4 allows
    // unsigned headers.
    headers.retain(|(name, _)| {
        !model
            .headers
            .iter()
            .any(|(custom, _)| custom.eq_ignore_ascii_case(name))
    });
    headers.extend(model.headers.iter().cloned());

    HttpRequest {
        url,
        headers,
        body,
        bytes,
    }
}

/// The SigV4 signature of a POST of `payload` to `url`; `None` for a URL
/// that does not parse, which sending will then reject with a clearer
/// error.
fn sign(
    url: &str,
    credentials: &AwsCredentials,
    region: &str,
    payload: &[u8],
    now: SystemTime,
) -> Option<sigv4::Signed> {
    let parsed = url::Url::parse(url)
        .inspect_err(
            |error| tracing::warn!(%error, "cannot sign a request to an unparsable Bedrock URL"),
        )
        .ok()?;
    let host = sigv4::host(&parsed);
    let signer = sigv4::Signer {
        access_key_id: &credentials.access_key_id,
        secret_access_key: credentials.secret_access_key.expose(),
        session_token: credentials
            .session_token
            .as_ref()
            .map(Secret::expose)
            .filter(|token| !token.is_empty()),
        region,
        service: SERVICE,
    };
    let request = sigv4::Request {
        method: "POST",
        host: &host,
        path: parsed.path(),
        query: &[],
        headers: &[],
        payload,
    };
    let signed = signer.sign(&request, now);
    // AWS's SignatureDoesNotMatch answer quotes the canonical request it
    // computed; ours, to compare it with (the session token left out).
    let canonical_request = match signer.session_token {
        Some(token) => signed.canonical_request.replace(token, "<redacted>"),
        None => signed.canonical_request.clone(),
    };
    tracing::debug!(
        %canonical_request,
        string_to_sign = %signed.string_to_sign,
        "signed a Bedrock request"
    );
    Some(signed)
}

/// The Converse body. Its keys (and a turn's) go in alphabetical order, so
/// the signed bytes of a given request do not depend on whether serde_json
/// preserves insertion order; the signing test vectors rely on that.
/// With `cached`, the conversation is `null` in the body and the body's
/// bytes come with it.
fn request_body(model: &Model, request: &Request, cached: bool) -> (Value, Option<Vec<u8>>) {
    let (max_tokens, thinking_budget) = token_limits(model, request);
    let cache = takes_cache_points(model);
    let mut body = Map::new();
    if let Some(budget) = thinking_budget {
        body.insert(
            "additionalModelRequestFields".into(),
            json!({"thinking": {"budget_tokens": budget, "type": "enabled"}}),
        );
    }
    body.insert("inferenceConfig".into(), json!({"maxTokens": max_tokens}));
    let conversation = if cached {
        body.insert("messages".into(), Value::Null);
        let convert = |messages: &[Message]| convert_turns(model, messages);
        let mark = |turns: &mut [Value]| if cache { mark_turns(turns) } else { 0 };
        let format = super::conversation::Format {
            convert: &convert,
            mark: &mark,
            marks: if cache { 2 } else { 0 },
            joins_by: |turn| turn["role"].as_str(),
        };
        Some(super::conversation::serialised(model, request, &format))
    } else {
        body.insert(
            "messages".into(),
            Value::Array(convert_messages(model, &request.messages, cache)),
        );
        None
    };
    if !request.system.trim().is_empty() {
        let mut system = vec![json!({"text": request.system})];
        system.extend(cache.then(cache_point));
        body.insert("system".into(), Value::Array(system));
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({"toolSpec": {
                    "description": tool.description,
                    "inputSchema": {"json": tool.parameters},
                    "name": tool.name,
                }})
            })
            .collect();
        tools.extend(cache.then(cache_point));
        body.insert("toolConfig".into(), json!({"tools": tools}));
    }
    let bytes = conversation.map(|c| super::conversation::body_with(&body, "messages", &c));
    (Value::Object(body), bytes)
}

/// Whether requests to `model` get prompt-cache checkpoints: Claude on
/// Bedrock caches like Anthropic's own API, but only where a request marks
/// it with `cachePoint` blocks, which Converse takes in `system`,
/// `messages[].content` and `toolConfig.tools`
/// (<https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html>).
/// Other models may reject the block.
fn takes_cache_points(model: &Model) -> bool {
    is_claude(&model.id)
}

/// A cache checkpoint: everything before it is cached (five minutes).
fn cache_point() -> Value {
    json!({"cachePoint": {"type": "default"}})
}

/// Claude on Bedrock, by model id, inference profile (`us.anthropic…`) or
/// either inside an ARN. Only Claude takes Anthropic's `thinking` field.
fn is_claude(model_id: &str) -> bool {
    model_id.contains("anthropic.claude")
}

/// `maxTokens` and Claude's thinking budget, if thinking is on: the same
/// arithmetic as Anthropic's own API, for Claude models only.
fn token_limits(model: &Model, request: &Request) -> (u64, Option<u64>) {
    super::anthropic::claude_token_limits(model, request, is_claude(&model.id))
}

/// Converts the history. Converse wants user and assistant turns to
/// alternate, and Claude wants a turn's tool results before its text. With
/// `cache`, the two newest user turns end with a checkpoint, as Anthropic's
/// breakpoints do (with the tools' and the system prompt's, the four a
/// request may have): the newest writes the whole conversation, the one
/// before is where the previous request ended, so this one reads it.
fn convert_messages(model: &Model, messages: &[Message], cache: bool) -> Vec<Value> {
    let mut turns = convert_turns(model, messages);
    if cache {
        mark_turns(&mut turns);
    }
    turns
}

/// The turns without checkpoints.
fn convert_turns(model: &Model, messages: &[Message]) -> Vec<Value> {
    let converted = messages.iter().map(|message| match message {
        Message::User { content } => ("user", content.iter().filter_map(content_block).collect()),
        Message::Assistant(message) => ("assistant", assistant_blocks(model, message)),
        Message::ToolResult(result) => ("user", vec![tool_result_block(result)]),
    });
    super::alternating_turns(converted, |block| block.get("toolResult").is_some())
        .into_iter()
        .map(|turn| json!({"content": turn.blocks, "role": turn.role}))
        .collect()
}

/// A checkpoint closing each of the two newest user turns; returns how
/// many it placed.
fn mark_turns(turns: &mut [Value]) -> usize {
    let mut placed = 0;
    for blocks in turns
        .iter_mut()
        .rev()
        .filter(|turn| turn["role"] == "user")
        .filter_map(|turn| turn["content"].as_array_mut())
        .filter(|blocks| !blocks.is_empty())
        .take(2)
    {
        blocks.push(cache_point());
        placed += 1;
    }
    placed
}

/// A text block, or nothing for text Converse would reject as blank.
fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"text": text}))
}

/// Converse's image formats, by MIME type.
fn image_format(mime_type: &str) -> Option<&'static str> {
    match mime_type.to_ascii_lowercase().as_str() {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

fn content_block(content: &Content) -> Option<Value> {
    match content {
        Content::Text { text } => text_block(text),
        Content::Image { data, mime_type } => Some(match image_format(mime_type) {
            // Blobs travel as base64 in Converse's JSON, which is what
            // `data` already is.
            Some(format) => json!({"image": {"format": format, "source": {"bytes": data}}}),
            None => {
                json!({"text": format!("(an image of type {mime_type}, which Bedrock cannot take, was left out)")})
            }
        }),
    }
}

fn assistant_blocks(model: &Model, message: &AssistantMessage) -> Vec<Value> {
    // Reasoning signatures are Claude's; Anthropic documents them as valid
    // across its API and Bedrock, and no other provider's would verify.
    let signatures_valid = message.api == model.api || message.api == Api::AnthropicMessages;
    message
        .content
        .iter()
        .filter_map(|content| match content {
            AssistantContent::Text { text } => text_block(text),
            AssistantContent::Thinking {
                thinking,
                redacted: true,
                ..
            } => (signatures_valid && !thinking.is_empty())
                .then(|| json!({"reasoningContent": {"redactedContent": thinking}})),
            AssistantContent::Thinking {
                thinking,
                signature: Some(signature),
                ..
            } if signatures_valid && !signature.is_empty() => Some(json!({
                "reasoningContent": {"reasoningText": {"text": thinking, "signature": signature}},
            })),
            // Thinking that cannot be sent back as reasoning (cut off, or
            // from another provider) is kept as text.
            AssistantContent::Thinking { thinking, .. } => text_block(thinking),
            AssistantContent::ToolCall(call) => {
                // Arguments that did not parse are kept as a JSON string;
                // Converse accepts only an object as `input`.
                let input = if call.arguments.is_object() {
                    call.arguments.clone()
                } else {
                    json!({})
                };
                Some(json!({"toolUse": {
                    "toolUseId": call.id,
                    "name": call.name,
                    "input": input,
                }}))
            }
        })
        .collect()
}

fn tool_result_block(result: &ToolResultMessage) -> Value {
    let mut content: Vec<Value> = result.content.iter().filter_map(content_block).collect();
    if content.is_empty() {
        content.push(json!({"text": EMPTY_TOOL_RESULT}));
    }
    json!({"toolResult": {
        "toolUseId": result.tool_call_id,
        "content": content,
        "status": if result.is_error { "error" } else { "success" },
    }})
}

/// `contentBlockStart`. Text and reasoning blocks have no start event;
/// only tool calls (and kinds pincer does not use) do.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlockStart {
    content_block_index: u64,
    #[serde(default)]
    start: WireStart,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireStart {
    #[serde(default)]
    tool_use: Option<WireToolUseStart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolUseStart {
    tool_use_id: String,
    name: String,
}

/// `contentBlockDelta`: a union; members pincer does not use (citations,
/// images) are ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlockDelta {
    content_block_index: u64,
    #[serde(default)]
    delta: WireDelta,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<WireToolUseDelta>,
    #[serde(default)]
    reasoning_content: Option<WireReasoningDelta>,
}

#[derive(Deserialize)]
struct WireToolUseDelta {
    #[serde(default)]
    input: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReasoningDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    /// Base64, kept as such: it goes back verbatim.
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlockStop {
    content_block_index: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMessageStop {
    stop_reason: String,
}

#[derive(Deserialize)]
struct WireMetadata {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    cache_write_input_tokens: u64,
}

/// The body of an exception frame or an HTTP error answer. AWS spells the
/// field `message` or, from some layers, `Message`.
#[derive(Deserialize, Default)]
struct WireError {
    #[serde(default, alias = "Message")]
    message: String,
    /// `aws.protocol#Shape` names the error in some answers.
    #[serde(default, rename = "__type")]
    kind: String,
}

/// What the parser remembers about an open content block, by its index.
enum OpenBlock {
    Reasoning {
        /// Whether a thinking delta has been emitted for this block.
        started: bool,
    },
    ToolUse {
        id: String,
    },
}

/// Turns Bedrock's event-stream frames into [`StreamEvent`]s.
pub struct Parser {
    provider: String,
    decoder: eventstream::Decoder,
    blocks: HashMap<u64, OpenBlock>,
    finished: bool,
}

impl Parser {
    pub fn new(provider: &str) -> Self {
        Self {
            provider: provider.to_string(),
            decoder: eventstream::Decoder::new(),
            blocks: HashMap::new(),
            finished: false,
        }
    }

    fn malformed(&self, message: String) -> LlmError {
        LlmError::MalformedStream {
            provider: self.provider.clone(),
            message,
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        event: &str,
        payload: &[u8],
    ) -> Result<T, LlmError> {
        serde_json::from_slice(payload).map_err(|e| {
            self.malformed(format!(
                "the payload of a `{event}` event is not valid: {e}"
            ))
        })
    }

    fn on_message(
        &mut self,
        message: &eventstream::Message,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), LlmError> {
        match message.header(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = message.header(":exception-type").unwrap_or_default();
                let body: WireError = serde_json::from_slice(&message.payload).unwrap_or_default();
                return Err(exception_error(&self.provider, kind, body.message));
            }
            Some("error") => {
                let kind = message.header(":error-code").unwrap_or_default();
                let text = message.header(":error-message").unwrap_or_default();
                return Err(exception_error(&self.provider, kind, text.to_string()));
            }
            other => {
                tracing::debug!(message_type = ?other, "skipping an event-stream message of unknown type");
                return Ok(());
            }
        }
        let event = message.header(":event-type").unwrap_or_default();
        let payload = &message.payload;
        match event {
            "contentBlockStart" => {
                let start: WireBlockStart = self.parse(event, payload)?;
                if let Some(tool) = start.start.tool_use {
                    out.push(StreamEvent::ToolCallStart {
                        id: tool.tool_use_id.clone(),
                        name: tool.name,
                    });
                    self.blocks.insert(
                        start.content_block_index,
                        OpenBlock::ToolUse {
                            id: tool.tool_use_id,
                        },
                    );
                }
            }
            "contentBlockDelta" => {
                let delta: WireBlockDelta = self.parse(event, payload)?;
                self.block_delta(delta, out)?;
            }
            "contentBlockStop" => {
                let stop: WireBlockStop = self.parse(event, payload)?;
                self.blocks.remove(&stop.content_block_index);
            }
            "messageStop" => {
                let stop: WireMessageStop = self.parse(event, payload)?;
                out.push(StreamEvent::Stop(stop_reason(&stop.stop_reason)));
            }
            "metadata" => {
                let metadata: WireMetadata = self.parse(event, payload)?;
                if let Some(usage) = metadata.usage {
                    out.push(StreamEvent::Usage(Usage {
                        input: usage.input_tokens,
                        output: usage.output_tokens,
                        cache_read: usage.cache_read_input_tokens,
                        cache_write: usage.cache_write_input_tokens,
                        ..Usage::default()
                    }));
                }
                // Metadata follows messageStop and closes the stream.
                self.finished = true;
            }
            // messageStart carries only the role; later additions to the
            // API pass through.
            _ => {}
        }
        Ok(())
    }

    fn block_delta(
        &mut self,
        delta: WireBlockDelta,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), LlmError> {
        let index = delta.content_block_index;
        let delta = delta.delta;
        if let Some(text) = delta.text.filter(|t| !t.is_empty()) {
            out.push(StreamEvent::TextDelta(text));
        }
        if let Some(tool) = delta.tool_use {
            let Some(OpenBlock::ToolUse { id }) = self.blocks.get(&index) else {
                return Err(self.malformed(format!(
                    "tool input arrived for content block {index}, which no tool call started"
                )));
            };
            if !tool.input.is_empty() {
                out.push(StreamEvent::ToolCallDelta {
                    id: id.clone(),
                    json: tool.input,
                });
            }
        }
        if let Some(reasoning) = delta.reasoning_content {
            if let Some(text) = reasoning.text.filter(|t| !t.is_empty()) {
                self.blocks
                    .insert(index, OpenBlock::Reasoning { started: true });
                out.push(StreamEvent::ThinkingDelta(text));
            }
            if let Some(signature) = reasoning.signature.filter(|s| !s.is_empty()) {
                // A signed block whose thinking is empty still has to
                // exist, or the signature would attach to an earlier one.
                let started = matches!(
                    self.blocks.get(&index),
                    Some(OpenBlock::Reasoning { started: true })
                );
                if !started {
                    self.blocks
                        .insert(index, OpenBlock::Reasoning { started: true });
                    out.push(StreamEvent::ThinkingDelta(String::new()));
                }
                out.push(StreamEvent::ThinkingSignature(signature));
            }
            if let Some(data) = reasoning.redacted_content.filter(|d| !d.is_empty()) {
                out.push(StreamEvent::RedactedThinking(data));
            }
        }
        Ok(())
    }
}

impl WireFormat for Parser {
    fn on_event(&mut self, _event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError> {
        Err(self.malformed(
            "Bedrock streams AWS event-stream frames, not server-sent events".to_string(),
        ))
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn on_bytes(
        &mut self,
        _decoder: &mut sse::Decoder,
        chunk: &[u8],
    ) -> Result<Vec<StreamEvent>, LlmError> {
        let mut out = Vec::new();
        if self.finished {
            return Ok(out);
        }
        self.decoder.push(chunk);
        // Nothing after the final event is read: a proxy's trailing bytes
        // must not fail a finished answer.
        while !self.finished {
            let message = self
                .decoder
                .next_message()
                .map_err(|e| self.malformed(format!("the event stream is corrupt: {e}")))?;
            let Some(message) = message else { break };
            // An error drops the events decoded before it in this chunk:
            // the trait returns events or an error, and the error (a
            // throttle, an overflow) is what the caller must act on.
            self.on_message(&message, &mut out)?;
        }
        Ok(out)
    }
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        "guardrail_intervened" | "content_filtered" => StopReason::Refusal,
        // end_turn, stop_sequence, and reasons added later: the turn is
        // over and nothing in it asks for more. (malformed_tool_use and
        // malformed_model_output also land here; a tool call whose JSON is
        // broken is already marked by `arguments_error`.)
        _ => StopReason::Stop,
    }
}

/// The HTTP status Bedrock documents for each exception, for exceptions
/// that arrive inside a successful (200) stream.
fn status_of_exception(kind: &str) -> u16 {
    match kind {
        "validationException" => 400,
        "accessDeniedException" | "unrecognizedClientException" => 403,
        "resourceNotFoundException" => 404,
        "modelTimeoutException" => 408,
        "modelStreamErrorException" | "modelErrorException" => 424,
        // A service quota is a rate of use, like throttling; another
        // credential may still have room.
        "throttlingException" | "serviceQuotaExceededException" => 429,
        // Not ready yet is an overload that passes.
        "serviceUnavailableException" | "modelNotReadyException" => 503,
        // internalServerException and anything unknown: the server's fault.
        _ => 500,
    }
}

/// Whether a validation message says the input does not fit the model.
fn is_overflow(message: &str) -> bool {
    let lower = message.to_lowercase();
    [
        "too long",
        "context window",
        "context length",
        "context limit",
        "maximum context",
        "too many input tokens",
    ]
    .iter()
    .any(|phrase| lower.contains(phrase))
}

/// Classifies an error by HTTP status and Bedrock's message. Bedrock's
/// statuses are precise enough that the shared classifier's heuristics
/// (which read "quota" in a 429 as billing) would only mislead.
fn classify(
    provider: &str,
    status: u16,
    message: String,
    retry_after: Option<Duration>,
) -> LlmError {
    let provider = provider.to_string();
    match status {
        401 | 403 => LlmError::Auth { provider, message },
        404 => LlmError::ModelNotFound { provider, message },
        429 => LlmError::RateLimit {
            provider,
            message,
            retry_after,
        },
        400 | 413 if is_overflow(&message) => LlmError::ContextOverflow { provider, message },
        400 if message
            .to_lowercase()
            .contains("model identifier is invalid") =>
        {
            LlmError::ModelNotFound { provider, message }
        }
        503 | 529 => LlmError::Overloaded { provider, message },
        408 | 424 | 500..=599 => LlmError::Server {
            provider,
            status,
            message,
        },
        _ => LlmError::BadRequest {
            provider,
            status,
            message,
        },
    }
}

/// The error in a 200 answer whose body is a JSON error document instead
/// of an event stream, classified by its `__type`
/// (`com.amazon…#ThrottlingException`) as an exception frame is. `None`
/// when the body is no error.
pub fn error_in_ok_body(provider: &str, body: &str) -> Option<LlmError> {
    let error = serde_json::from_str::<WireError>(body).ok()?;
    if error.message.is_empty() && error.kind.is_empty() {
        return None;
    }
    // The shape name after `#`, spelled as the event stream spells it.
    let shape = error.kind.rsplit('#').next().unwrap_or_default();
    let mut chars = shape.chars();
    let kind: String = chars
        .next()
        .map(|first| first.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    Some(exception_error(provider, &kind, error.message))
}

fn exception_error(provider: &str, kind: &str, message: String) -> LlmError {
    let message = if message.is_empty() {
        kind.to_string()
    } else {
        message
    };
    classify(provider, status_of_exception(kind), message, None)
}

/// Classifies an HTTP error answer of the Converse API. The error type
/// travels in the `x-amzn-ErrorType` header, which is not available here,
/// so the status and the message decide.
pub fn error_from_response(
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> LlmError {
    let message = match serde_json::from_str::<WireError>(body) {
        Ok(error) if !error.message.is_empty() => error.message,
        Ok(error) if !error.kind.is_empty() => error.kind,
        _ => {
            let text = body.trim();
            if text.is_empty() {
                format!("HTTP {status}")
            } else if text.chars().count() > MAX_ERROR_BODY_CHARS {
                let cut: String = text.chars().take(MAX_ERROR_BODY_CHARS).collect();
                format!("{cut}…")
            } else {
                text.to_string()
            }
        }
    };
    classify(provider, status, message, retry_after)
}

#[cfg(test)]
mod tests;
