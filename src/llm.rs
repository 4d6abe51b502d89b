//! The model layer: provider-neutral messages, a streaming interface and the
//! wire formats of the providers pincer talks to.
//!
//! Everything above this module (the agent loop, sessions, ACP) sees only the
//! types defined here. A provider is one file that turns a [`Request`] into an
//! HTTP request and turns the provider's server-sent events back into
//! [`StreamEvent`]s; the shared code here does the HTTP round-trip, the
//! incremental SSE decoding with an idle timeout, error classification and the
//! assembly of the final [`AssistantMessage`].

pub mod anthropic;
pub mod bedrock;
pub mod catalog;
mod conversation;
pub mod google;
pub mod openai_completions;
pub mod openai_responses;
mod providers;
pub mod sse;
mod stream;
mod tagged;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use catalog::{Api, Model, Pricing};
pub use stream::{MessageBuilder, StreamConfig, stream};

/// The HTTP client for everything that carries a credential: model calls,
/// title and compaction calls, OAuth token exchange and refresh, AWS
/// STS/SSO. It never follows a redirect: a redirected request would carry
/// the key (reqwest keeps `x-api-key` and `x-goog-api-key` across origins)
/// and the conversation (a 307 resends the body) to wherever the `Location`
/// points. A 3xx is reported instead, naming where it pointed
/// ([`LlmError::Redirect`]).
pub fn http_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// reqwest's message with its causes: its `Display` alone says "error
/// sending request", the source chain says what happened (connection
/// refused, DNS…).
pub(crate) fn describe_reqwest_error(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// A credential that never shows itself in logs, errors or `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Secret)
    }
}

/// Written out redacted: a secret read from a config file never travels
/// back out through a serialised config.
impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("<redacted>")
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Content a user message or a tool result can carry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    /// Base64-encoded image data.
    Image {
        data: String,
        mime_type: String,
    },
}

impl Content {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// One block of an assistant message, in the order the model produced them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantContent {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        /// Anthropic's signature, required to send the block back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// Anthropic's `redacted_thinking`: `thinking` then holds the opaque data.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        redacted: bool,
    },
    ToolCall(ToolCall),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id; results pair with calls by this id only.
    pub id: String,
    pub name: String,
    /// The parsed arguments. When the model sent JSON that does not parse,
    /// this is the raw text as a JSON string and `arguments_error` says why.
    pub arguments: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_error: Option<String>,
}

/// Why the model stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A natural end of the turn.
    #[default]
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model asked for tools.
    ToolUse,
    /// The provider refused (safety filter).
    Refusal,
    /// The request or stream failed; `error_message` says how.
    Error,
    /// The run was cancelled while the model streamed.
    Aborted,
}

/// Token counts and their cost in USD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// Of `cache_write`, the tokens written to a one-hour cache, which
    /// Anthropic prices higher (Anthropic reports the split in
    /// `usage.cache_creation`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_1h: u64,
    #[serde(default)]
    pub cost: Cost,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Everything the request put into the context window.
    pub fn context_tokens(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_write
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    pub content: Vec<AssistantContent>,
    pub provider: String,
    pub api: Api,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_profile: Option<String>,
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    pub usage: Usage,
}

impl AssistantMessage {
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|c| match c {
            AssistantContent::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The visible text of the reply, blocks joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                AssistantContent::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<Content>,
    pub is_error: bool,
}

/// A message of the conversation as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User { content: Vec<Content> },
    Assistant(AssistantMessage),
    ToolResult(ToolResultMessage),
}

// The three tagged enums are read by `tagged` (as serde's derive would
// read them, without its buffering: transcripts are mostly these). Their
// fields are listed again here, in the structs each variant is read as;
// `tagged`'s tests read every variant back.
tagged::deserialize_with_tag!(Message, Content, AssistantContent);

/// The fields of a `text` block, of a user's content or an assistant's.
#[derive(Deserialize)]
struct TextFields {
    text: String,
}

impl tagged::Tagged for Message {
    const TAG: &'static str = "role";
    const VARIANTS: &'static [&'static str] = &["user", "assistant", "tool_result"];
    const EXPECTING: &'static str = "a message";

    fn variant<'de, D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct User {
            content: Vec<Content>,
        }
        match tag {
            "user" => User::deserialize(rest).map(|u| Message::User { content: u.content }),
            "assistant" => AssistantMessage::deserialize(rest).map(Message::Assistant),
            "tool_result" => ToolResultMessage::deserialize(rest).map(Message::ToolResult),
            other => Err(tagged::unknown::<Self, _>(other)),
        }
    }
}

impl tagged::Tagged for Content {
    const TAG: &'static str = "type";
    const VARIANTS: &'static [&'static str] = &["text", "image"];
    const EXPECTING: &'static str = "a content block";

    fn variant<'de, D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Image {
            data: String,
            mime_type: String,
        }
        match tag {
            "text" => TextFields::deserialize(rest).map(|t| Content::Text { text: t.text }),
            "image" => Image::deserialize(rest).map(|i| Content::Image {
                data: i.data,
                mime_type: i.mime_type,
            }),
            other => Err(tagged::unknown::<Self, _>(other)),
        }
    }
}

impl tagged::Tagged for AssistantContent {
    const TAG: &'static str = "type";
    const VARIANTS: &'static [&'static str] = &["text", "thinking", "tool_call"];
    const EXPECTING: &'static str = "an assistant message's block";

    fn variant<'de, D: serde::Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Thinking {
            thinking: String,
            #[serde(default)]
            signature: Option<String>,
            #[serde(default)]
            redacted: bool,
        }
        match tag {
            "text" => {
                TextFields::deserialize(rest).map(|t| AssistantContent::Text { text: t.text })
            }
            "thinking" => Thinking::deserialize(rest).map(|t| AssistantContent::Thinking {
                thinking: t.thinking,
                signature: t.signature,
                redacted: t.redacted,
            }),
            "tool_call" => ToolCall::deserialize(rest).map(AssistantContent::ToolCall),
            other => Err(tagged::unknown::<Self, _>(other)),
        }
    }
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: std::sync::Arc<serde_json::Value>,
}

/// How hard the model should think before answering.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    #[default]
    Off,
    Minimal,
    Low,
    Medium,
    High,
}

impl ThinkingLevel {
    pub const ALL: [ThinkingLevel; 5] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// Anthropic's extended-thinking budget for this level.
    pub fn anthropic_budget(self) -> Option<u64> {
        match self {
            ThinkingLevel::Off => None,
            ThinkingLevel::Minimal => Some(1024),
            ThinkingLevel::Low => Some(2048),
            ThinkingLevel::Medium => Some(8192),
            ThinkingLevel::High => Some(16384),
        }
    }
}

/// One model call: everything a provider needs besides the model and key.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub thinking: ThinkingLevel,
    /// Output token cap; `None` means the model's default cap.
    pub max_tokens: Option<u64>,
    /// Which prompt cache the call belongs to (the session id), for
    /// providers that route by a key (OpenAI's `prompt_cache_key`).
    pub cache_key: Option<String>,
    /// How long the prompt cache this call writes should live, for
    /// providers that let the caller choose (Anthropic's `ttl`).
    pub cache_retention: CacheRetention,
}

/// How long a prompt cache written by a request lives, where the provider
/// lets the caller choose: Anthropic's `cache_control` takes `"ttl": "5m"`
/// (the default) or `"1h"`, in its stable API without a beta header (the
/// SDKs' non-beta `CacheControlEphemeral` has it), and OpenRouter passes it
/// on to Anthropic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheRetention {
    /// The provider's default (Anthropic: five minutes); no `ttl` is sent.
    #[default]
    Short,
    /// One hour. Anthropic charges 2× the base input price for writing it
    /// (1.25× for five minutes); reads cost the same.
    Long,
}

impl CacheRetention {
    /// The retention for a configured `cache_ttl`: anything past the
    /// default five minutes asks for the hour, so the cache lives at least
    /// as long as the user said it does (pruning waits that long too).
    pub fn for_ttl(ttl: Duration) -> Self {
        if ttl > Duration::from_secs(5 * 60) {
            Self::Long
        } else {
            Self::Short
        }
    }

    /// Anthropic's `cache_control` for a breakpoint.
    pub fn cache_control(self) -> serde_json::Value {
        match self {
            Self::Short => serde_json::json!({"type": "ephemeral"}),
            Self::Long => serde_json::json!({"type": "ephemeral", "ttl": "1h"}),
        }
    }
}

/// An incremental piece of the model's answer, provider-neutral.
///
/// Providers emit these in stream order; [`MessageBuilder`] turns them into an
/// [`AssistantMessage`].
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
    /// Closes the current thinking block with its signature.
    ThinkingSignature(String),
    /// An opaque, redacted thinking block (Anthropic).
    RedactedThinking(String),
    ToolCallStart {
        id: String,
        name: String,
    },
    /// A piece of the JSON arguments of the call with this id.
    ToolCallDelta {
        id: String,
        json: String,
    },
    /// The usage so far; each event replaces the previous one.
    Usage(Usage),
    /// The provider's stop reason, already mapped.
    Stop(StopReason),
}

/// What went wrong talking to a provider. Failover, retries and compaction
/// branch on the variant, never on the message text.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum LlmError {
    #[error("{provider} rejected the credentials: {message}")]
    Auth { provider: String, message: String },
    #[error("{provider} rate limit: {message}{}", retry_hint(.retry_after))]
    RateLimit {
        provider: String,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("{provider} billing problem: {message}")]
    Billing { provider: String, message: String },
    #[error("{provider} is overloaded: {message}")]
    Overloaded { provider: String, message: String },
    #[error("the conversation is too long for the model's context window: {message}")]
    ContextOverflow { provider: String, message: String },
    #[error("{provider} does not know this model: {message}")]
    ModelNotFound { provider: String, message: String },
    #[error("{provider} rejected the request (HTTP {status}): {message}")]
    BadRequest {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider} server error (HTTP {status}): {message}")]
    Server {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("could not reach {provider}: {message}")]
    Network { provider: String, message: String },
    /// The connection could not even be made (no such host, nothing
    /// listening, an address that is not a URL): retrying in a few seconds
    /// finds the same, so it is not retried.
    #[error(
        "cannot connect to {provider}: {message}. Waiting will not fix this: check the \
         provider's base_url (or its *_BASE_URL variable) and that the server there is running"
    )]
    Unreachable { provider: String, message: String },
    #[error(
        "{provider} made no progress for {seconds} s (keep-alives do not count); gave up waiting"
    )]
    Timeout { provider: String, seconds: u64 },
    #[error("{provider} sent a malformed stream: {message}")]
    MalformedStream { provider: String, message: String },
    #[error(
        "{provider} answered with a redirect (HTTP {status}) to {location}; pincer does not \
         follow redirects with credentials: set the provider's base_url to the address that \
         answers"
    )]
    Redirect {
        provider: String,
        status: u16,
        location: String,
    },
    /// The stream failed (`cause`) after part of the answer had reached
    /// the user: it is not retried (the user would see the answer start
    /// over, or two answers glued together), and the partial answer stays
    /// in the history with this error.
    #[error(
        "{provider}'s answer was cut off after part of it was shown ({}); the partial \
         answer is kept: ask again for the rest",
        cut_off_cause(cause)
    )]
    CutOff {
        provider: String,
        cause: Box<LlmError>,
    },
}

/// What cut an answer off, as the user reads it: a network error in the
/// middle of a body is a broken connection, not a provider out of reach.
fn cut_off_cause(cause: &LlmError) -> String {
    match cause {
        LlmError::Network { message, .. } => format!("the connection broke: {message}"),
        other => other.to_string(),
    }
}

/// What a rate limit's `retry-after` asked for, as the user reads it.
fn retry_hint(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(after) => format!(
            " (the provider asks to retry in {})",
            humantime::format_duration(Duration::from_secs(after.as_secs().max(1)))
        ),
        None => String::new(),
    }
}

impl LlmError {
    /// The error with anything that looks like a key or token in the
    /// provider's text replaced (see [`redact`]). Providers quote keys in
    /// their messages ("Incorrect API key provided: sk-proj-abc…wxyz"), and
    /// these messages reach notices, transcripts and logs.
    pub fn redacted(self) -> Self {
        self.map_text(redact)
    }

    /// The error with `secrets` (the credentials the request carried)
    /// replaced wherever the provider's text quotes them, then redacted as
    /// [`LlmError::redacted`] does. The exact values catch keys that look
    /// like nothing in particular (a custom provider's key); the patterns
    /// catch masked and partial quotes.
    pub fn without_secrets(self, secrets: &[Secret]) -> Self {
        self.map_text(|text| {
            let scrubbed = secrets
                .iter()
                .map(Secret::expose)
                // A very short value would match ordinary words.
                .filter(|value| value.len() >= MIN_SCRUBBED_SECRET)
                .fold(text.to_string(), |text, value| {
                    text.replace(value, REDACTED)
                });
            redact(&scrubbed)
        })
    }

    /// The error with every text a provider or server wrote passed through
    /// `f`.
    fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            LlmError::Auth { provider, message } => LlmError::Auth {
                provider,
                message: f(&message),
            },
            LlmError::RateLimit {
                provider,
                message,
                retry_after,
            } => LlmError::RateLimit {
                provider,
                message: f(&message),
                retry_after,
            },
            LlmError::Billing { provider, message } => LlmError::Billing {
                provider,
                message: f(&message),
            },
            LlmError::Overloaded { provider, message } => LlmError::Overloaded {
                provider,
                message: f(&message),
            },
            LlmError::ContextOverflow { provider, message } => LlmError::ContextOverflow {
                provider,
                message: f(&message),
            },
            LlmError::ModelNotFound { provider, message } => LlmError::ModelNotFound {
                provider,
                message: f(&message),
            },
            LlmError::BadRequest {
                provider,
                status,
                message,
            } => LlmError::BadRequest {
                provider,
                status,
                message: f(&message),
            },
            LlmError::Server {
                provider,
                status,
                message,
            } => LlmError::Server {
                provider,
                status,
                message: f(&message),
            },
            LlmError::Network { provider, message } => LlmError::Network {
                provider,
                message: f(&message),
            },
            LlmError::Unreachable { provider, message } => LlmError::Unreachable {
                provider,
                message: f(&message),
            },
            LlmError::MalformedStream { provider, message } => LlmError::MalformedStream {
                provider,
                message: f(&message),
            },
            LlmError::Redirect {
                provider,
                status,
                location,
            } => LlmError::Redirect {
                provider,
                status,
                location: f(&location),
            },
            error @ LlmError::Timeout { .. } => error,
            LlmError::CutOff { provider, cause } => LlmError::CutOff {
                provider,
                cause: Box::new(cause.map_text(f)),
            },
        }
    }

    /// The provider the error came from.
    pub fn provider(&self) -> &str {
        match self {
            LlmError::Auth { provider, .. }
            | LlmError::RateLimit { provider, .. }
            | LlmError::Billing { provider, .. }
            | LlmError::Overloaded { provider, .. }
            | LlmError::ContextOverflow { provider, .. }
            | LlmError::ModelNotFound { provider, .. }
            | LlmError::BadRequest { provider, .. }
            | LlmError::Server { provider, .. }
            | LlmError::Network { provider, .. }
            | LlmError::Unreachable { provider, .. }
            | LlmError::Timeout { provider, .. }
            | LlmError::MalformedStream { provider, .. }
            | LlmError::Redirect { provider, .. }
            | LlmError::CutOff { provider, .. } => provider,
        }
    }

    /// The error for a stream that failed after part of the answer was
    /// shown (see [`LlmError::CutOff`]).
    pub fn cut_off(self) -> Self {
        match self {
            error @ LlmError::CutOff { .. } => error,
            cause => LlmError::CutOff {
                provider: cause.provider().to_string(),
                cause: Box::new(cause),
            },
        }
    }

    /// Whether a stream that failed this way before anything of the answer
    /// arrived is worth asking again: a transient failure, or a stream
    /// that broke (closed before its final event, a line that is not an
    /// event), which a new connection usually does not repeat.
    pub fn retry_before_output(&self) -> bool {
        self.is_transient() || matches!(self, LlmError::MalformedStream { .. })
    }

    /// Whether trying the same request again may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimit { .. }
                | LlmError::Overloaded { .. }
                | LlmError::Server { .. }
                | LlmError::Network { .. }
                | LlmError::Timeout { .. }
        )
    }

    /// Classifies an HTTP error answer. `message` is the provider's own error
    /// text (already extracted from its JSON body when there was one) and
    /// `kind` the provider's error type string, if any.
    pub fn from_http(
        provider: &str,
        status: u16,
        kind: Option<&str>,
        message: String,
        retry_after: Option<Duration>,
    ) -> Self {
        let provider = provider.to_string();
        let lower = message.to_lowercase();
        let kind = kind.unwrap_or_default();
        let overflow = lower.contains("context length")
            || lower.contains("context_length")
            || lower.contains("prompt is too long")
            || lower.contains("maximum context")
            || lower.contains("too many tokens")
            || kind == "context_length_exceeded";
        match status {
            401 | 403 => LlmError::Auth { provider, message },
            402 => LlmError::Billing { provider, message },
            429 if kind == "insufficient_quota" || lower.contains("quota") => {
                LlmError::Billing { provider, message }
            }
            429 => LlmError::RateLimit {
                provider,
                message,
                retry_after,
            },
            404 => LlmError::ModelNotFound { provider, message },
            413 => LlmError::ContextOverflow { provider, message },
            400 if overflow => LlmError::ContextOverflow { provider, message },
            400 if lower.contains("credit balance") || lower.contains("billing") => {
                LlmError::Billing { provider, message }
            }
            408 | 504 => LlmError::Timeout {
                provider,
                seconds: 0,
            },
            529 | 503 => LlmError::Overloaded { provider, message },
            500..=599 if kind == "overloaded_error" => LlmError::Overloaded { provider, message },
            500..=599 => LlmError::Server {
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
}

/// What replaces a key or token in text a person reads.
pub const REDACTED: &str = "<redacted>";

/// The shortest credential value replaced by its exact text in provider
/// errors (see [`LlmError::without_secrets`]).
const MIN_SCRUBBED_SECRET: usize = 8;

/// Prefixes of provider keys and tokens: Anthropic, OpenAI (`sk-`,
/// `sk-proj-`, `rk-`), Google (`AIza`, `ya29.`), AWS access key ids,
/// GitHub, GitLab and Slack tokens, and JWTs (`eyJ`).
const KEY_PREFIXES: [&str; 15] = [
    "sk-",
    "sk_",
    "rk-",
    "rk_",
    "pk_",
    "AIza",
    "ya29.",
    "AKIA",
    "ASIA",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "glpat-",
    "eyJ",
];

/// Replaces whatever looks like a key or token in `text` with
/// [`REDACTED`]: a word that starts like a known key, a masked key (`abc…`,
/// `***`), or a long run of letters and digits in both cases. Meant for
/// text a provider or token endpoint wrote, before it is shown or logged;
/// ordinary words, model ids and addresses stay as they are.
pub fn redact(text: &str) -> String {
    fn word_char(c: char) -> bool {
        c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '*' | '…' | '+')
    }
    fn secret_like(word: &str) -> bool {
        let alnum = word.chars().filter(char::is_ascii_alphanumeric).count();
        let prefixed = KEY_PREFIXES
            .iter()
            .any(|p| word.starts_with(p) && word.len() >= p.len() + 6);
        let masked = (word.contains("***") || word.contains('…')) && alnum >= 4;
        let long_mixed = alnum >= 32
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_lowercase())
            && word.chars().any(|c| c.is_ascii_uppercase());
        prefixed || masked || long_mixed
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(word_char) {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let len = after.find(|c| !word_char(c)).unwrap_or(after.len());
        // A sentence's full stop is not part of the word.
        let word = after[..len].trim_end_matches('.');
        if secret_like(word) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        rest = &after[word.len()..];
        if word.is_empty() {
            // Only dots: keep them.
            out.push_str(&after[..len]);
            rest = &after[len..];
        }
    }
    out.push_str(rest);
    out
}

/// An HTTP request a provider wants sent. Header values may hold secrets;
/// this type is never logged.
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
    /// The body as sent, when it was serialised from a session's cached
    /// conversation ([`conversation`]); `body` then holds `null` in place
    /// of the conversation. `None`: `body` is sent as it is.
    pub bytes: Option<Vec<u8>>,
}

impl HttpRequest {
    /// The bytes to send: those of `body` as `serde_json::to_vec` writes
    /// them.
    pub fn body_bytes(&self) -> Vec<u8> {
        match &self.bytes {
            Some(bytes) => bytes.clone(),
            // Serialising a `Value` cannot fail (its keys are strings).
            None => serde_json::to_vec(&self.body).unwrap_or_default(),
        }
    }

    /// [`HttpRequest::body_bytes`], taking the serialised body instead of
    /// copying it.
    pub fn take_body(&mut self) -> Vec<u8> {
        match self.bytes.take() {
            Some(bytes) => bytes,
            None => self.body_bytes(),
        }
    }
}

/// The per-provider part of a streaming call.
pub trait WireFormat: Send {
    /// Turns one decoded server-sent event into stream events.
    fn on_event(&mut self, event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError>;
    /// Whether the provider's final event has been seen. A stream that ends
    /// without it is cut off, not finished.
    fn finished(&self) -> bool;
    /// Turns a chunk of the response body into stream events. Most
    /// providers stream server-sent events, decoded by `decoder` and handed
    /// to [`WireFormat::on_event`]; a provider with another framing (AWS
    /// event streams) overrides this and ignores `decoder`.
    fn on_bytes(
        &mut self,
        decoder: &mut sse::Decoder,
        chunk: &[u8],
    ) -> Result<Vec<StreamEvent>, LlmError> {
        let mut out = Vec::new();
        for event in decoder.feed(chunk) {
            out.extend(self.on_event(&event)?);
            if self.finished() {
                break;
            }
        }
        Ok(out)
    }
}

/// One provider turn (a `messages` or `contents` entry) while it is being
/// assembled.
pub(crate) struct Turn {
    pub role: &'static str,
    pub blocks: Vec<serde_json::Value>,
}

/// Groups converted messages into the alternating turns providers want:
/// consecutive messages of one role (tool results, a user message after
/// them, the neighbours of a dropped message) join one turn, messages left
/// empty (failed or aborted replies) are dropped, since the APIs reject
/// empty turns, and within a user turn the tool results (`is_result`) come
/// before any text.
pub(crate) fn alternating_turns(
    messages: impl IntoIterator<Item = (&'static str, Vec<serde_json::Value>)>,
    is_result: impl Fn(&serde_json::Value) -> bool,
) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for (role, blocks) in messages {
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.blocks.extend(blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    for turn in turns.iter_mut().filter(|turn| turn.role == "user") {
        turn.blocks.sort_by_key(|block| !is_result(block));
    }
    turns
}

/// The first `max` characters of `text`, marked when cut.
pub(crate) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_secret_shows_itself_only_through_expose() {
        let secret = Secret::new("sk-ant-api03-do-not-print-me");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{secret:#?}"), "Secret(<redacted>)");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(secret.to_string(), "<redacted>");
        assert_eq!(serde_json::to_string(&secret).unwrap(), r#""<redacted>""#);
        // Inside a larger value too.
        #[derive(Serialize, Debug)]
        struct Holder {
            key: Secret,
        }
        let holder = Holder {
            key: secret.clone(),
        };
        assert_eq!(
            serde_json::to_string(&holder).unwrap(),
            r#"{"key":"<redacted>"}"#
        );
        assert_eq!(format!("{holder:?}"), "Holder { key: Secret(<redacted>) }");
        assert_eq!(toml::to_string(&holder).unwrap(), "key = \"<redacted>\"\n");
        assert_eq!(secret.expose(), "sk-ant-api03-do-not-print-me");
        // Reading one in keeps the value.
        let read: Secret = serde_json::from_str(r#""abc-123""#).unwrap();
        assert_eq!(read.expose(), "abc-123");
    }

    #[test]
    fn errors_lose_the_exact_credentials_whatever_they_look_like() {
        let key = Secret::new("plainlowercasekeywithoutanyprefix0123");
        let error = LlmError::Auth {
            provider: "custom".into(),
            message: format!(
                "invalid key {}; key sk-ant-api03-abcdefgh also bad",
                key.expose()
            ),
        };
        assert_eq!(
            error
                .without_secrets(std::slice::from_ref(&key))
                .to_string(),
            "custom rejected the credentials: invalid key <redacted>; key <redacted> also bad"
        );
        // A value this short would match ordinary words; it is left to the
        // patterns.
        let short = LlmError::BadRequest {
            provider: "custom".into(),
            status: 400,
            message: "bad request".into(),
        };
        assert_eq!(short.clone().without_secrets(&[Secret::new("bad")]), short);
        let redirect = LlmError::Redirect {
            provider: "anthropic".into(),
            status: 307,
            location: format!("http://127.0.0.1:9/steal?k={}", key.expose()),
        };
        assert_eq!(
            redirect.without_secrets(&[key]).to_string(),
            "anthropic answered with a redirect (HTTP 307) to http://127.0.0.1:9/steal?k=<redacted>; \
             pincer does not follow redirects with credentials: set the provider's base_url to the \
             address that answers"
        );
    }

    #[test]
    fn http_408_and_504_are_timeouts() {
        for status in [408, 504] {
            assert_eq!(
                LlmError::from_http("openai", status, None, "upstream timed out".into(), None),
                LlmError::Timeout {
                    provider: "openai".into(),
                    seconds: 0,
                },
                "HTTP {status}"
            );
        }
    }

    #[test]
    fn keys_and_tokens_are_redacted_and_ordinary_text_is_kept() {
        let cases = [
            (
                "Incorrect API key provided: sk-proj-abc*****************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.",
                "Incorrect API key provided: <redacted>. You can find your API key at https://platform.openai.com/account/api-keys.",
            ),
            (
                "invalid x-api-key sk-ant-api03-AbCdEf0123456789",
                "invalid x-api-key <redacted>",
            ),
            ("key abcd…wxyz is not valid", "key <redacted> is not valid"),
            (
                "https://example.com/v1?key=AIzaSyA1b2C3d4E5f6G7h8&alt=sse failed",
                "https://example.com/v1?key=<redacted>&alt=sse failed",
            ),
            (
                "Authorization: Bearer Xy7kP2mQ9rT4vW8zA1bC3dE5fG6hJ0kLmN",
                "Authorization: Bearer <redacted>",
            ),
            (
                "claude-sonnet-4-5-20250929 is overloaded (request req_011CUabc). Try again...",
                "claude-sonnet-4-5-20250929 is overloaded (request req_011CUabc). Try again...",
            ),
            ("", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(redact(input), expected, "{input}");
        }
    }

    #[test]
    fn errors_come_back_redacted_and_say_when_to_retry() {
        let error = LlmError::RateLimit {
            provider: "openai".into(),
            message: "limit for sk-proj-0123456789abcdef reached".into(),
            retry_after: Some(Duration::from_secs(7200)),
        };
        assert_eq!(
            error.redacted().to_string(),
            "openai rate limit: limit for <redacted> reached (the provider asks to retry in 2h)"
        );
    }
}
