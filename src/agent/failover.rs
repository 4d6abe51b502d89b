//! Keeping a model call alive through bad credentials and provider outages.
//!
//! A call first goes to the session's model with its best credential. When
//! the provider rejects that credential (auth), throttles it (rate limit)
//! or refuses payment (billing), the credential is put into cooldown and
//! the next one of the same provider is tried; when the provider is down
//! (after the usual retries) or none of its credentials works, the next
//! model in the `fallbacks` list is tried, with its own credentials. Each
//! switch is reported to the user; the answer records which profile and
//! model gave it. Nothing switches once part of an answer has streamed.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{AgentConfig, AgentEvent, AgentHost};
use crate::auth::Failure;
use crate::llm::{AssistantMessage, LlmError, Model, Request, Secret, ThinkingLevel};

/// One credential to try.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The profile id (`anthropic:work`, `env:ANTHROPIC_API_KEY`); `None`
    /// for a provider that needs no key.
    pub id: Option<String>,
    pub secret: Option<Secret>,
}

/// Where a session's credentials come from.
pub trait CredentialSource: Send + Sync + std::fmt::Debug {
    /// The credentials to try for `model`, best first (a session stays on
    /// the profile that last worked).
    fn attempts(&self, model: &Model) -> Vec<Attempt>;
    fn succeeded(&self, model: &Model, id: &str);
    fn failed(&self, model: &Model, id: &str, failure: Failure);
    /// Makes an attempt ready to use (an OAuth token close to expiry is
    /// refreshed first). An error means this credential cannot be used.
    fn prepare<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        _model: &'a Model,
        attempt: Attempt,
    ) -> BoxFuture<'a, Result<Attempt, String>> {
        Box::pin(async move { Ok(attempt) })
    }
}

/// What to do after a failed attempt.
enum Next {
    /// Another credential of the same provider may do better.
    Credential(Failure),
    /// The provider or model cannot answer now; try the next model.
    Model,
    /// Nothing else would help (a bad request, an overflow, a cancel).
    Stop,
}

fn classify(error: &LlmError) -> Next {
    match error {
        LlmError::Auth { .. } => Next::Credential(Failure::Auth),
        LlmError::RateLimit { .. } => Next::Credential(Failure::RateLimit),
        LlmError::Billing { .. } => Next::Credential(Failure::Billing),
        LlmError::ModelNotFound { .. } => Next::Model,
        error if error.is_transient() => Next::Model,
        LlmError::Timeout { .. } | LlmError::Network { .. } => Next::Model,
        _ => Next::Stop,
    }
}

/// Makes one model call with failover; returns the message (with
/// `StopReason::Error` when everything failed) and the last error.
pub async fn call(
    client: &reqwest::Client,
    config: &AgentConfig,
    request: &Request,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
) -> (AssistantMessage, Option<LlmError>) {
    let Some(source) = config.credentials.clone() else {
        return super::stream_with_retries(client, config, request, host, cancel).await;
    };
    let models: Vec<Model> = std::iter::once(config.model.clone())
        .chain(config.fallbacks.iter().cloned())
        .collect();
    let mut last: Option<(AssistantMessage, Option<LlmError>)> = None;
    let mut previous: Option<String> = None;
    let plan: Vec<(&Model, Vec<Attempt>)> =
        models.iter().map(|m| (m, source.attempts(m))).collect();
    let total: usize = plan.iter().map(|(_, a)| a.len()).sum();
    let mut tried = 0;
    for (model, attempts) in plan {
        if attempts.is_empty() {
            tracing::info!(model = %model.full_id(), "no credentials for this model; skipping it");
            continue;
        }
        for attempt in attempts {
            tried += 1;
            let label = match &attempt.id {
                Some(id) => format!("{} ({id})", model.full_id()),
                None => model.full_id(),
            };
            if let (Some(previous), Some((_, Some(error)))) = (&previous, &last) {
                host.emit(AgentEvent::Failover {
                    text: format!("{previous} failed ({error}); trying {label}."),
                });
            }
            let attempt = match source.prepare(client, model, attempt.clone()).await {
                Ok(ready) => ready,
                Err(reason) => {
                    tracing::warn!(profile = ?attempt.id, %reason, "cannot use this credential");
                    if let Some(id) = &attempt.id {
                        source.failed(model, id, Failure::Auth);
                    }
                    host.emit(AgentEvent::Failover {
                        text: format!(
                            "{label} cannot be used ({reason}); trying the next credential."
                        ),
                    });
                    continue;
                }
            };
            let mut attempt_config = attempt_config(config, model, &attempt);
            attempt_config.rotate_rate_limits = tried < total;
            let request = request_for(request, model);
            let (message, failure) =
                super::stream_with_retries(client, &attempt_config, &request, host, cancel).await;
            let id = attempt.id.as_deref();
            let Some(error) = &failure else {
                if let Some(id) = id {
                    source.succeeded(model, id);
                }
                return (message, None);
            };
            if !message.content.is_empty() || cancel.is_cancelled() {
                return (message, failure);
            }
            let next = classify(error);
            previous = Some(label);
            match next {
                Next::Credential(kind) => {
                    if let Some(id) = id {
                        source.failed(model, id, kind);
                    }
                    last = Some((message, failure));
                }
                Next::Model => {
                    last = Some((message, failure));
                    break;
                }
                Next::Stop => return (message, failure),
            }
        }
    }
    match last {
        Some(last) => last,
        // Not one credential anywhere: the plain call reports it.
        None => super::stream_with_retries(client, config, request, host, cancel).await,
    }
}

fn attempt_config(config: &AgentConfig, model: &Model, attempt: &Attempt) -> AgentConfig {
    AgentConfig {
        model: model.clone(),
        key: attempt.secret.clone(),
        auth_profile: attempt.id.clone(),
        credentials: None,
        fallbacks: Vec::new(),
        ..config.clone()
    }
}

/// The request as `model` can take it: no thinking for models without.
fn request_for(request: &Request, model: &Model) -> Request {
    let mut request = request.clone();
    if !model.reasoning {
        request.thinking = ThinkingLevel::Off;
    }
    request
}

/// A fixed list of credentials, for callers without profiles.
#[derive(Debug)]
pub struct Fixed(pub Vec<Attempt>);

impl CredentialSource for Fixed {
    fn attempts(&self, _model: &Model) -> Vec<Attempt> {
        self.0.clone()
    }
    fn succeeded(&self, _model: &Model, _id: &str) {}
    fn failed(&self, _model: &Model, _id: &str, _failure: Failure) {}
}

/// Shares one source between the sessions' turns.
pub type Shared = Arc<dyn CredentialSource>;
