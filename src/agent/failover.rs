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
//! Credentials waiting out a cooldown are not tried while anything else
//! can be (see [`call`]).

use std::borrow::Cow;

use tokio_util::sync::CancellationToken;

use super::{AgentConfig, AgentEvent, AgentHost};
use crate::auth::{Attempt, CredentialSource, Failure};
use crate::llm::{AssistantMessage, LlmError, Model, Request, ThinkingLevel, redact};

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
        // Another model may live elsewhere.
        LlmError::Timeout { .. } | LlmError::Network { .. } | LlmError::Unreachable { .. } => {
            Next::Model
        }
        _ => Next::Stop,
    }
}

/// How one attempt went.
enum Outcome {
    /// The call is over: an answer, a partial answer, a cancel, or an error
    /// that no other credential or model would fix.
    Over(AssistantMessage, Option<LlmError>),
    /// The credential could not be made ready; the next one is tried.
    Unusable,
    /// It failed before anything streamed.
    Failed {
        next: Next,
        message: AssistantMessage,
        error: LlmError,
    },
}

/// `anthropic/claude-sonnet-4-5 (anthropic:work)`.
fn label(model: &Model, attempt: &Attempt) -> String {
    match &attempt.id {
        Some(id) => format!("{} ({id})", model.full_id()),
        None => model.full_id(),
    }
}

/// Makes one model call with failover; returns the message (with
/// `StopReason::Error` when everything failed) and the last error.
///
/// Credentials in cooldown (or disabled) are passed by: the model's other
/// credentials are tried, then the next model in `fallbacks`. Only when
/// nothing else is left is the one whose cooldown ends soonest tried
/// anyway, and the notice says so. A user who sent a prompt would rather
/// have it tried than be told to wait: a cooldown is pincer's estimate
/// (the provider's window may well have reset, a bill may have been paid),
/// and one more request costs less than waiting and retrying by hand.
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
    let mut plan: Vec<(&Model, Vec<Attempt>)> = Vec::new();
    // Unavailable credentials of every model, soonest available first.
    let mut waiting: Vec<(&Model, Attempt)> = Vec::new();
    for model in &models {
        let (ready, cooling): (Vec<Attempt>, Vec<Attempt>) = source
            .attempts(model)
            .into_iter()
            .partition(|a| a.unavailable.is_none());
        waiting.extend(cooling.into_iter().map(|a| (model, a)));
        plan.push((model, ready));
    }
    waiting.sort_by_key(|(_, a)| a.unavailable.as_ref().map_or(0, |u| u.until));
    let total: usize = plan.iter().map(|(_, a)| a.len()).sum();
    let mut tried = 0;
    let mut last: Option<(AssistantMessage, Option<LlmError>)> = None;
    // What went wrong since the last notice, told with the next switch.
    let mut reasons: Vec<String> = Vec::new();
    for (model, attempts) in &plan {
        if attempts.is_empty() {
            let cooling: Vec<String> = waiting
                .iter()
                .filter(|(m, _)| std::ptr::eq(*m, *model))
                .filter_map(|(_, a)| {
                    Some(format!("{} {}", a.id.as_deref()?, a.unavailable.as_ref()?))
                })
                .collect();
            if cooling.is_empty() {
                tracing::info!(model = %model.full_id(), "no credentials for this model; skipping it");
            } else {
                tracing::info!(model = %model.full_id(), "every credential of this model is cooling down; skipping it");
                reasons.push(format!(
                    "{} skipped ({})",
                    model.full_id(),
                    cooling.join(", ")
                ));
            }
            continue;
        }
        for attempt in attempts {
            tried += 1;
            let label = label(model, attempt);
            if !reasons.is_empty() {
                host.emit(AgentEvent::Failover {
                    text: format!("{}; trying {label}.", reasons.join("; ")),
                });
                reasons.clear();
            }
            let rotate = tried < total;
            let outcome = try_one(
                client, config, request, host, cancel, &*source, model, attempt, &label, rotate,
            )
            .await;
            match outcome {
                Outcome::Over(message, failure) => return (message, failure),
                Outcome::Unusable => continue,
                Outcome::Failed {
                    next,
                    message,
                    error,
                } => {
                    reasons.push(format!("{label} failed ({error})"));
                    last = Some((message, Some(error)));
                    if matches!(next, Next::Model) {
                        break;
                    }
                }
            }
        }
    }
    // Nothing else is left: the credential whose cooldown ends soonest.
    if let Some((model, attempt)) = waiting.first() {
        let label = label(model, attempt);
        let until = attempt
            .unavailable
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let text = if reasons.is_empty() {
            format!("Every credential is unavailable; trying {label} anyway ({until}).")
        } else {
            format!(
                "{}; nothing else is left to try, so trying {label} anyway.",
                reasons.join("; ")
            )
        };
        host.emit(AgentEvent::Failover { text });
        match try_one(
            client, config, request, host, cancel, &*source, model, attempt, &label, false,
        )
        .await
        {
            Outcome::Over(message, failure) => return (message, failure),
            Outcome::Unusable => {}
            Outcome::Failed { message, error, .. } => last = Some((message, Some(error))),
        }
    }
    match last {
        Some(last) => last,
        // Not one credential anywhere: the plain call reports it.
        None => super::stream_with_retries(client, config, request, host, cancel).await,
    }
}

/// Tries one credential of `model`, recording how it fared.
#[allow(clippy::too_many_arguments)]
async fn try_one(
    client: &reqwest::Client,
    config: &AgentConfig,
    request: &Request,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
    source: &dyn CredentialSource,
    model: &Model,
    attempt: &Attempt,
    label: &str,
    rotate_rate_limits: bool,
) -> Outcome {
    let attempt = match source.prepare(client, model, attempt.clone()).await {
        Ok(ready) => ready,
        Err(reason) => {
            let reason = redact(&reason);
            tracing::warn!(profile = ?attempt.id, %reason, "cannot use this credential");
            if let Some(id) = &attempt.id {
                source.failed(model, id, Failure::Auth, None);
            }
            host.emit(AgentEvent::Failover {
                text: format!("{label} cannot be used ({reason}); trying the next credential."),
            });
            return Outcome::Unusable;
        }
    };
    let mut attempt_config = attempt_config(config, model, &attempt);
    attempt_config.rotate_rate_limits = rotate_rate_limits;
    let request = request_for(request, model);
    let (message, failure) =
        super::stream_with_retries(client, &attempt_config, &request, host, cancel).await;
    let id = attempt.id.as_deref();
    let Some(error) = failure else {
        if let Some(id) = id {
            source.succeeded(model, id);
        }
        return Outcome::Over(message, None);
    };
    if !message.content.is_empty() || cancel.is_cancelled() {
        return Outcome::Over(message, Some(error));
    }
    let next = classify(&error);
    match next {
        Next::Credential(kind) => {
            if let Some(id) = id {
                let retry_after = match &error {
                    LlmError::RateLimit { retry_after, .. } => *retry_after,
                    _ => None,
                };
                source.failed(model, id, kind, retry_after);
            }
        }
        Next::Model => {}
        Next::Stop => return Outcome::Over(message, Some(error)),
    }
    Outcome::Failed {
        next,
        message,
        error,
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

/// The request as `model` can take it: no thinking for models without. A
/// copy (the whole history) only when something changes.
fn request_for<'a>(request: &'a Request, model: &Model) -> Cow<'a, Request> {
    if model.reasoning || request.thinking == ThinkingLevel::Off {
        return Cow::Borrowed(request);
    }
    Cow::Owned(Request {
        thinking: ThinkingLevel::Off,
        ..request.clone()
    })
}
