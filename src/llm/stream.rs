//! The shared half of every streaming call: send the request, classify HTTP
//! errors (a redirect is one: it is never followed), recognise a 200 whose
//! body is an error document or a web page rather than a stream, decode SSE
//! incrementally with an idle timeout that only progress resets, feed the
//! provider's [`WireFormat`], and insist on the provider's final event.

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt};

use super::providers::{self, Call};
use super::{
    Api, AssistantContent, AssistantMessage, HttpRequest, LlmError, Model, Request, Secret,
    StopReason, StreamEvent, ToolCall, Usage, WireFormat, describe_reqwest_error, sse, truncate,
};

/// Limits of one streaming call.
#[derive(Clone, Copy, Debug)]
pub struct StreamConfig {
    /// Longest wait for progress (an event that carries content, usage or
    /// the stop) before the call fails. Keep-alives (Anthropic's `ping`,
    /// SSE comments, empty chunks) do not count: a peer that only pings for
    /// this long is as stuck as a silent one.
    pub idle_timeout: Duration,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// Streams one model call. Dropping the stream aborts the HTTP request.
///
/// Every error comes back without the key: providers quote the key they
/// were sent ("invalid x-api-key: sk-ant-…"), and these messages reach
/// notices, transcripts and logs.
pub fn stream(
    client: &reqwest::Client,
    model: &Model,
    key: Option<&Secret>,
    request: &Request,
    config: StreamConfig,
) -> BoxStream<'static, Result<StreamEvent, LlmError>> {
    let secrets: Vec<Secret> = key.into_iter().cloned().collect();
    unredacted(client, model, key, request, config)
        .map(move |item| item.map_err(|error| error.without_secrets(&secrets)))
        .boxed()
}

fn unredacted(
    client: &reqwest::Client,
    model: &Model,
    key: Option<&Secret>,
    request: &Request,
    config: StreamConfig,
) -> BoxStream<'static, Result<StreamEvent, LlmError>> {
    match providers::prepare(client, model, key, request) {
        Call::Ready((http, parser)) => send(client, model, http, parser, config),
        Call::Later(prepared) => {
            let (client, model) = (client.clone(), model.clone());
            futures::stream::once(async move {
                match prepared.await {
                    Ok((http, parser)) => send(&client, &model, http, parser, config),
                    Err(error) => futures::stream::once(async move { Err(error) }).boxed(),
                }
            })
            .flatten()
            .boxed()
        }
    }
}

/// Sends a built request and streams its answer through `parser`.
fn send(
    client: &reqwest::Client,
    model: &Model,
    mut http: HttpRequest,
    parser: Box<dyn WireFormat>,
    config: StreamConfig,
) -> BoxStream<'static, Result<StreamEvent, LlmError>> {
    let provider = model.provider.clone();
    let api = model.api;
    let mut builder = client
        .post(&http.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(http.take_body());
    // The content type is set above; reqwest would add a second.
    for (name, value) in http
        .headers
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("content-type"))
    {
        match reqwest::header::HeaderValue::from_str(value) {
            Ok(mut value) => {
                // Keeps keys out of reqwest's and hyper's debug output.
                if is_credential_header(name) {
                    value.set_sensitive(true);
                }
                builder = builder.header(name, value);
            }
            Err(_) => {
                tracing::warn!(header = %name, "skipping a header whose value is not valid HTTP")
            }
        }
    }
    // The header values the request carries as credentials, so that an
    // error quoting one exactly is scrubbed whatever it looks like.
    let secrets: Vec<Secret> = http
        .headers
        .iter()
        .filter(|(name, _)| is_credential_header(name))
        .flat_map(|(_, value)| {
            let bare = value.strip_prefix("Bearer ").map(Secret::new);
            std::iter::once(Secret::new(value.clone())).chain(bare)
        })
        .collect();
    let state = State::Start(Box::new(Start {
        request: builder,
        provider,
        api,
        parser,
        idle: config.idle_timeout,
    }));
    futures::stream::unfold(state, step)
        .map(move |item| item.map_err(|error| error.without_secrets(&secrets)))
        .boxed()
}

/// Whether a header carries a credential (its value is kept out of debug
/// output and scrubbed from errors).
fn is_credential_header(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "authorization"
        || lower.contains("api-key")
        || lower.contains("token")
        || lower.contains("secret")
}

enum State {
    Start(Box<Start>),
    Streaming(Box<Streaming>),
    Done,
}

struct Start {
    request: reqwest::RequestBuilder,
    provider: String,
    api: Api,
    parser: Box<dyn WireFormat>,
    idle: Duration,
}

struct Streaming {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: sse::Decoder,
    parser: Box<dyn WireFormat>,
    pending: VecDeque<StreamEvent>,
    provider: String,
    api: Api,
    idle: Duration,
    /// When the call fails unless it makes progress first. Only events
    /// that reach the caller move it: keep-alives do not.
    deadline: tokio::time::Instant,
    /// The body's first bytes, held until they show what the body is;
    /// `None` once it is known to be a stream.
    head: Option<Vec<u8>>,
}

async fn step(state: State) -> Option<(Result<StreamEvent, LlmError>, State)> {
    match state {
        State::Done => None,
        State::Start(start) => {
            let Start {
                request,
                provider,
                api,
                parser,
                idle,
            } = *start;
            match connect(request, &provider, api, idle).await {
                Ok(body) => {
                    let streaming = Streaming {
                        body,
                        decoder: sse::Decoder::new(),
                        parser,
                        pending: VecDeque::new(),
                        provider,
                        api,
                        idle,
                        deadline: tokio::time::Instant::now() + idle,
                        head: Some(Vec::new()),
                    };
                    next_event(Box::new(streaming)).await
                }
                Err(error) => Some((Err(error), State::Done)),
            }
        }
        State::Streaming(streaming) => next_event(streaming).await,
    }
}

async fn connect(
    request: reqwest::RequestBuilder,
    provider: &str,
    api: Api,
    idle: Duration,
) -> Result<BoxStream<'static, reqwest::Result<bytes::Bytes>>, LlmError> {
    let send = request.send();
    let response = match tokio::time::timeout(idle, send).await {
        Err(_) => {
            return Err(LlmError::Timeout {
                provider: provider.to_string(),
                seconds: idle.as_secs(),
            });
        }
        Ok(Err(error)) if cannot_connect(&error) => {
            return Err(LlmError::Unreachable {
                provider: provider.to_string(),
                message: describe_reqwest_error(&error),
            });
        }
        Ok(Err(error)) => {
            return Err(LlmError::Network {
                provider: provider.to_string(),
                message: describe_reqwest_error(&error),
            });
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response.bytes_stream().boxed());
    }
    if status.is_redirection() {
        // The client follows no redirect (see `llm::http_client`); saying
        // where it pointed lets the user fix the base URL.
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .unwrap_or_else(|| "nowhere (no Location header)".to_string());
        return Err(LlmError::Redirect {
            provider: provider.to_string(),
            status: status.as_u16(),
            location: truncate(&location, MAX_QUOTED_CHARS),
        });
    }
    let retry_after = retry_after(response.headers());
    let body = match tokio::time::timeout(idle, response.text()).await {
        Ok(Ok(body)) => body,
        _ => String::new(),
    };
    Err(providers::error_from_response(
        api,
        provider,
        status.as_u16(),
        retry_after,
        &body,
    ))
}

async fn next_event(mut s: Box<Streaming>) -> Option<(Result<StreamEvent, LlmError>, State)> {
    loop {
        if let Some(event) = s.pending.pop_front() {
            return Some((Ok(event), State::Streaming(s)));
        }
        if s.parser.finished() {
            return None;
        }
        let chunk = match tokio::time::timeout_at(s.deadline, s.body.next()).await {
            Err(_) => {
                let error = LlmError::Timeout {
                    provider: s.provider.clone(),
                    seconds: s.idle.as_secs(),
                };
                return Some((Err(error), State::Done));
            }
            Ok(None) => {
                if let Some(head) = s.head.take() {
                    // The whole body was blank or a few bytes: still say
                    // what it was.
                    let error = not_a_stream(&s.provider, s.api, &head).unwrap_or_else(|| {
                        LlmError::MalformedStream {
                            provider: s.provider.clone(),
                            message: "the answer ended before the stream began".to_string(),
                        }
                    });
                    return Some((Err(error), State::Done));
                }
                s.decoder.finish();
                let error = LlmError::MalformedStream {
                    provider: s.provider.clone(),
                    message: "the stream ended before the final event".to_string(),
                };
                return Some((Err(error), State::Done));
            }
            Ok(Some(Err(error))) => {
                let error = LlmError::Network {
                    provider: s.provider.clone(),
                    message: describe_reqwest_error(&error),
                };
                return Some((Err(error), State::Done));
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        let chunk = match s.head.take() {
            None => chunk,
            Some(mut head) => {
                head.extend_from_slice(&chunk);
                match first_significant_byte(&head) {
                    // Only blanks so far: nothing tells yet.
                    None if head.len() < MAX_BLANK_HEAD => {
                        s.head = Some(head);
                        continue;
                    }
                    Some(b'{' | b'[' | b'<') => {
                        // No event stream starts like this; the body is a
                        // document. Read it (bounded) to say what it said.
                        let body = read_rest(&mut s, head).await;
                        let error = not_a_stream(&s.provider, s.api, &body).unwrap_or_else(|| {
                            LlmError::MalformedStream {
                                provider: s.provider.clone(),
                                message: "the answer is not an event stream".to_string(),
                            }
                        });
                        return Some((Err(error), State::Done));
                    }
                    _ => bytes::Bytes::from(head),
                }
            }
        };
        match s.parser.on_bytes(&mut s.decoder, &chunk) {
            Ok(events) => {
                if !events.is_empty() {
                    s.deadline = tokio::time::Instant::now() + s.idle;
                }
                s.pending.extend(events);
            }
            Err(error) => return Some((Err(error), State::Done)),
        }
    }
}

/// How many blank bytes (whitespace, a BOM) may open a body before the
/// decision what it is is made on them alone.
const MAX_BLANK_HEAD: usize = 4096;

/// How much of a body that is not a stream is read to report it.
const MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// How much of a server's text (a page title, a `Location`) an error
/// quotes.
const MAX_QUOTED_CHARS: usize = 300;

/// The first byte that is not whitespace or part of a UTF-8 BOM.
fn first_significant_byte(bytes: &[u8]) -> Option<u8> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    bytes.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// The rest of a body that is a document, up to [`MAX_DOCUMENT_BYTES`],
/// read before the call's deadline.
async fn read_rest(s: &mut Streaming, mut body: Vec<u8>) -> Vec<u8> {
    while body.len() < MAX_DOCUMENT_BYTES {
        match tokio::time::timeout_at(s.deadline, s.body.next()).await {
            Ok(Some(Ok(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_DOCUMENT_BYTES);
    body
}

/// What a 200 answer whose body is a document rather than a stream means:
/// the provider's own error when it is one (classified as that provider
/// classifies errors inside a stream, so an overload is retried), a web
/// page (a proxy, captive portal or wrong base URL) by its title, or other
/// JSON. `None` when the body is none of these.
fn not_a_stream(provider: &str, api: Api, body: &[u8]) -> Option<LlmError> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim_start_matches('\u{feff}').trim();
    match text.bytes().next()? {
        b'{' | b'[' => {
            let error = providers::error_in_ok_body(api, provider, text);
            Some(error.unwrap_or_else(|| LlmError::MalformedStream {
                provider: provider.to_string(),
                message: format!(
                    "the server answered with a JSON document, not an event stream (does it \
                     support streaming?): {}",
                    truncate(text, MAX_QUOTED_CHARS)
                ),
            }))
        }
        b'<' => Some(LlmError::Network {
            provider: provider.to_string(),
            message: format!(
                "the server answered with an HTML page, not an event stream: {} (a proxy or \
                 captive portal in the way, or a base_url that is not the API's)",
                page_title(text)
                    .map(|title| truncate(&title, MAX_QUOTED_CHARS))
                    .unwrap_or_else(|| "(untitled)".to_string())
            ),
        }),
        _ => None,
    }
}

/// The `<title>` of an HTML page, whitespace collapsed.
fn page_title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = html[start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!title.is_empty()).then_some(title)
}

/// Whether the request failed before a connection existed, for a reason
/// that a retry seconds later meets again: the host name does not resolve,
/// nothing listens on the port (connection refused), or the address is not
/// a URL at all (a `base_url` without `http://`). A connect that timed out
/// is not one of these: a slow network may recover.
fn cannot_connect(error: &reqwest::Error) -> bool {
    error.is_builder() || (error.is_connect() && !error.is_timeout())
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    if let Some(ms) = get("retry-after-ms").filter(|v| v.is_finite() && *v >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    get("retry-after")
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Assembles an [`AssistantMessage`] from stream events, in the order the
/// model produced its blocks.
#[derive(Debug)]
pub struct MessageBuilder {
    content: Vec<AssistantContent>,
    /// Raw argument JSON per call, by index into `content`.
    arguments: Vec<(usize, String)>,
    usage: Usage,
    stop: Option<StopReason>,
}

impl Default for MessageBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageBuilder {
    pub fn new() -> Self {
        Self {
            content: Vec::new(),
            arguments: Vec::new(),
            usage: Usage::default(),
            stop: None,
        }
    }

    pub fn apply(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::TextDelta(text) => match self.content.last_mut() {
                Some(AssistantContent::Text { text: current }) => current.push_str(text),
                _ => self
                    .content
                    .push(AssistantContent::Text { text: text.clone() }),
            },
            StreamEvent::ThinkingDelta(text) => match self.content.last_mut() {
                Some(AssistantContent::Thinking {
                    thinking,
                    signature: None,
                    redacted: false,
                }) => thinking.push_str(text),
                _ => self.content.push(AssistantContent::Thinking {
                    thinking: text.clone(),
                    signature: None,
                    redacted: false,
                }),
            },
            StreamEvent::ThinkingSignature(sig) => {
                if let Some(AssistantContent::Thinking { signature, .. }) =
                    self.content.iter_mut().rev().find(|c| {
                        matches!(
                            c,
                            AssistantContent::Thinking {
                                redacted: false,
                                ..
                            }
                        )
                    })
                {
                    signature.get_or_insert_with(String::new).push_str(sig);
                }
            }
            StreamEvent::RedactedThinking(data) => self.content.push(AssistantContent::Thinking {
                thinking: data.clone(),
                signature: None,
                redacted: true,
            }),
            StreamEvent::ToolCallStart { id, name } => {
                self.arguments.push((self.content.len(), String::new()));
                self.content.push(AssistantContent::ToolCall(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: serde_json::Value::Object(Default::default()),
                    arguments_error: None,
                }));
            }
            StreamEvent::ToolCallDelta { id, json } => {
                let content = &self.content;
                if let Some((_, raw)) = self.arguments.iter_mut().rev().find(|(index, _)| {
                    matches!(&content[*index], AssistantContent::ToolCall(call) if call.id == *id)
                }) {
                    raw.push_str(json);
                }
            }
            StreamEvent::Usage(usage) => self.usage = *usage,
            StreamEvent::Stop(reason) => self.stop = Some(*reason),
        }
    }

    /// The text streamed so far, for partial results.
    pub fn has_content(&self) -> bool {
        !self.content.is_empty()
    }

    /// Finishes the message. `error` marks a failed or aborted stream: the
    /// message keeps what arrived, but unfinished tool calls are dropped so
    /// that no call without a result reaches the history.
    pub fn finish(
        mut self,
        model: &Model,
        auth_profile: Option<String>,
        error: Option<(StopReason, String)>,
    ) -> AssistantMessage {
        for (index, raw) in std::mem::take(&mut self.arguments) {
            if let Some(AssistantContent::ToolCall(call)) = self.content.get_mut(index) {
                if raw.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<serde_json::Value>(&raw) {
                    Ok(value) => call.arguments = value,
                    Err(e) => {
                        call.arguments = serde_json::Value::String(raw);
                        call.arguments_error = Some(format!("arguments are not valid JSON: {e}"));
                    }
                }
            }
        }
        let (stop_reason, error_message) = match error {
            Some((reason, message)) => {
                self.content
                    .retain(|c| !matches!(c, AssistantContent::ToolCall(_)));
                (reason, Some(message))
            }
            None => {
                let has_calls = self
                    .content
                    .iter()
                    .any(|c| matches!(c, AssistantContent::ToolCall(_)));
                match self.stop.unwrap_or(StopReason::Stop) {
                    StopReason::Stop if has_calls => (StopReason::ToolUse, None),
                    other => (other, None),
                }
            }
        };
        let mut usage = self.usage;
        usage.cost = price(model, &usage);
        AssistantMessage {
            content: self.content,
            provider: model.provider.clone(),
            api: model.api,
            model: model.id.clone(),
            auth_profile,
            stop_reason,
            error_message,
            usage,
        }
    }
}

fn price(model: &Model, usage: &Usage) -> super::Cost {
    let per = |tokens: u64, usd_per_million: f64| tokens as f64 * usd_per_million / 1_000_000.0;
    let p = &model.pricing;
    let input = per(usage.input, p.input);
    let output = per(usage.output, p.output);
    let cache_read = per(usage.cache_read, p.cache_read);
    let long = usage.cache_write_1h.min(usage.cache_write);
    let cache_write = per(usage.cache_write - long, p.cache_write) + per(long, p.cache_write_1h());
    super::Cost {
        input,
        output,
        cache_read,
        cache_write,
        total: input + output + cache_read + cache_write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Pricing, catalog::Catalog};
    use pretty_assertions::assert_eq;

    fn model() -> Model {
        let mut m = Catalog::new(&Default::default(), &|_| None)
            .resolve("anthropic/claude-sonnet-4-5")
            .unwrap();
        m.pricing = Pricing {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        m
    }

    #[test]
    fn builds_interleaved_blocks_and_prices_usage() {
        let mut b = MessageBuilder::new();
        for e in [
            StreamEvent::ThinkingDelta("let me ".into()),
            StreamEvent::ThinkingDelta("look".into()),
            StreamEvent::ThinkingSignature("sig".into()),
            StreamEvent::TextDelta("Reading".into()),
            StreamEvent::TextDelta(" it.".into()),
            StreamEvent::ToolCallStart {
                id: "call_1".into(),
                name: "read".into(),
            },
            StreamEvent::ToolCallDelta {
                id: "call_1".into(),
                json: "{\"path\":".into(),
            },
            StreamEvent::ToolCallDelta {
                id: "call_1".into(),
                json: "\"a.txt\"}".into(),
            },
            StreamEvent::ToolCallStart {
                id: "call_2".into(),
                name: "read".into(),
            },
            StreamEvent::Usage(Usage {
                input: 1_000_000,
                output: 100_000,
                ..Default::default()
            }),
            StreamEvent::Stop(StopReason::ToolUse),
        ] {
            b.apply(&e);
        }
        let message = b.finish(&model(), None, None);
        assert_eq!(
            message.content,
            vec![
                AssistantContent::Thinking {
                    thinking: "let me look".into(),
                    signature: Some("sig".into()),
                    redacted: false
                },
                AssistantContent::Text {
                    text: "Reading it.".into()
                },
                AssistantContent::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "read".into(),
                    arguments: serde_json::json!({"path": "a.txt"}),
                    arguments_error: None,
                }),
                AssistantContent::ToolCall(ToolCall {
                    id: "call_2".into(),
                    name: "read".into(),
                    arguments: serde_json::json!({}),
                    arguments_error: None,
                }),
            ]
        );
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        assert_eq!(message.usage.cost.input, 3.0);
        assert_eq!(message.usage.cost.output, 1.5);
        assert_eq!(message.usage.cost.total, 4.5);
    }

    #[test]
    fn broken_argument_json_is_kept_with_an_error() {
        let mut b = MessageBuilder::new();
        b.apply(&StreamEvent::ToolCallStart {
            id: "c".into(),
            name: "read".into(),
        });
        b.apply(&StreamEvent::ToolCallDelta {
            id: "c".into(),
            json: "{\"path\": ".into(),
        });
        let message = b.finish(&model(), None, None);
        let call = message.tool_calls().next().unwrap();
        assert_eq!(call.arguments, serde_json::json!("{\"path\": "));
        assert!(call.arguments_error.is_some());
    }

    #[test]
    fn a_failed_stream_keeps_text_but_drops_unfinished_calls() {
        let mut b = MessageBuilder::new();
        b.apply(&StreamEvent::TextDelta("partial".into()));
        b.apply(&StreamEvent::ToolCallStart {
            id: "c".into(),
            name: "read".into(),
        });
        let message = b.finish(
            &model(),
            None,
            Some((StopReason::Aborted, "cancelled".into())),
        );
        assert_eq!(
            message.content,
            vec![AssistantContent::Text {
                text: "partial".into()
            }]
        );
        assert_eq!(message.stop_reason, StopReason::Aborted);
    }

    #[test]
    fn a_200_error_document_is_the_providers_error_classified_by_its_type() {
        let cases: Vec<(Api, &str, LlmError)> = vec![
            (
                Api::AnthropicMessages,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                LlmError::Overloaded {
                    provider: "p".into(),
                    message: "Overloaded".into(),
                },
            ),
            (
                Api::AnthropicMessages,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#,
                LlmError::BadRequest {
                    provider: "p".into(),
                    status: 400,
                    message: "max_tokens: too big".into(),
                },
            ),
            (
                Api::OpenaiCompletions,
                r#"{"error":{"message":"The server is overloaded","type":"server_error"}}"#,
                LlmError::Server {
                    provider: "p".into(),
                    status: 500,
                    message: "The server is overloaded".into(),
                },
            ),
            (
                Api::OpenaiCompletions,
                r#"{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}"#,
                LlmError::RateLimit {
                    provider: "p".into(),
                    message: "Rate limit reached".into(),
                    retry_after: None,
                },
            ),
            (
                Api::OpenaiResponses,
                r#"{"error":{"message":"Your input exceeds the context window of this model.","code":"context_length_exceeded"}}"#,
                LlmError::ContextOverflow {
                    provider: "p".into(),
                    message: "Your input exceeds the context window of this model.".into(),
                },
            ),
            (
                Api::GoogleGenerativeAi,
                r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
                LlmError::Overloaded {
                    provider: "p".into(),
                    message: "The model is overloaded.".into(),
                },
            ),
            (
                Api::GoogleGenerativeAi,
                r#"[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]"#,
                LlmError::RateLimit {
                    provider: "p".into(),
                    message: "Quota exceeded".into(),
                    retry_after: None,
                },
            ),
            (
                Api::BedrockConverseStream,
                r#"{"__type":"com.amazon.coral.service#ThrottlingException","message":"Too many requests"}"#,
                LlmError::RateLimit {
                    provider: "p".into(),
                    message: "Too many requests".into(),
                    retry_after: None,
                },
            ),
        ];
        for (api, body, expected) in cases {
            // A BOM and blank lines before the document change nothing.
            let padded = format!("\u{feff}\n  {body}\n");
            assert_eq!(
                not_a_stream("p", api, padded.as_bytes()),
                Some(expected),
                "{api:?} {body}"
            );
        }
    }

    #[test]
    fn a_200_page_or_other_json_says_what_came_instead_of_a_stream() {
        let page = "<!DOCTYPE html>\n<html><head><TITLE>\n  Hotel Wi-Fi   login\n</TITLE></head><body>…</body></html>";
        assert_eq!(
            not_a_stream("anthropic", Api::AnthropicMessages, page.as_bytes()),
            Some(LlmError::Network {
                provider: "anthropic".into(),
                message: "the server answered with an HTML page, not an event stream: Hotel \
                          Wi-Fi login (a proxy or captive portal in the way, or a base_url that \
                          is not the API's)"
                    .into(),
            })
        );
        // A whole completion from a server that ignored `stream`.
        let completion = r#"{"id":"c","choices":[{"message":{"content":"hi"}}]}"#;
        assert_eq!(
            not_a_stream("openai", Api::OpenaiCompletions, completion.as_bytes()),
            Some(LlmError::MalformedStream {
                provider: "openai".into(),
                message: format!(
                    "the server answered with a JSON document, not an event stream (does it \
                     support streaming?): {completion}"
                ),
            })
        );
        // An event stream is none of these.
        for stream in [
            "event: ping\ndata: {}\n\n",
            ": keep-alive\n\n",
            "data: [DONE]\n\n",
            "",
        ] {
            assert_eq!(
                not_a_stream("p", Api::OpenaiCompletions, stream.as_bytes()),
                None
            );
        }
        assert_eq!(first_significant_byte(b"\xEF\xBB\xBF \r\n{"), Some(b'{'));
        assert_eq!(first_significant_byte(b" \n"), None);
    }

    #[test]
    fn retry_after_headers() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", "1500".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
    }
}
