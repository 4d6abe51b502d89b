//! Where a session's credentials come from, as the failover sees them:
//! the [`CredentialSource`] trait and the [`Attempt`]s it hands out.
//!
//! The trait lives with the credentials (auth), which implement it
//! ([`super::SessionCredentials`]); the agent's failover
//! (`crate::agent::failover`) only calls it, so the agent depends on auth
//! and never the other way round.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{Failure, Unavailable};
use crate::llm::{Model, Secret};

/// One credential to try.
#[derive(Clone, Debug)]
pub struct Attempt {
    /// The profile id (`anthropic:work`, `env:ANTHROPIC_API_KEY`); `None`
    /// for a provider that needs no key.
    pub id: Option<String>,
    pub secret: Option<Secret>,
    /// Set when the profile is waiting out a cooldown or is disabled: it is
    /// passed by while anything else can be tried.
    pub unavailable: Option<Unavailable>,
}

/// Where a session's credentials come from.
pub trait CredentialSource: Send + Sync + std::fmt::Debug {
    /// The credentials to try for `model`, best first (a session stays on
    /// the profile that last worked); unavailable ones last, soonest
    /// available first.
    fn attempts(&self, model: &Model) -> Vec<Attempt>;
    fn succeeded(&self, model: &Model, id: &str);
    /// `retry_after`: how long the provider asked to wait, if it said.
    fn failed(&self, model: &Model, id: &str, failure: Failure, retry_after: Option<Duration>);
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

/// A fixed list of credentials, for callers without profiles.
#[derive(Debug)]
pub struct Fixed(pub Vec<Attempt>);

impl CredentialSource for Fixed {
    fn attempts(&self, _model: &Model) -> Vec<Attempt> {
        self.0.clone()
    }
    fn succeeded(&self, _model: &Model, _id: &str) {}
    fn failed(&self, _model: &Model, _id: &str, _failure: Failure, _retry_after: Option<Duration>) {
    }
}

/// A source without some of its credentials (by id): a session whose
/// turns run through Claude Code never calls a model with the CLI's own
/// login ([`crate::auth::external::CLAUDE_CODE_ID`]), not even when pincer's
/// own loop answers for it.
#[derive(Debug)]
pub struct Excluding {
    pub inner: Shared,
    pub ids: Vec<String>,
}

impl Excluding {
    fn excluded(&self, id: Option<&str>) -> bool {
        id.is_some_and(|id| self.ids.iter().any(|x| x == id))
    }
}

impl CredentialSource for Excluding {
    fn attempts(&self, model: &Model) -> Vec<Attempt> {
        self.inner
            .attempts(model)
            .into_iter()
            .filter(|a| !self.excluded(a.id.as_deref()))
            .collect()
    }
    fn succeeded(&self, model: &Model, id: &str) {
        self.inner.succeeded(model, id);
    }
    fn failed(&self, model: &Model, id: &str, failure: Failure, retry_after: Option<Duration>) {
        self.inner.failed(model, id, failure, retry_after);
    }
    fn prepare<'a>(
        &'a self,
        http: &'a reqwest::Client,
        model: &'a Model,
        attempt: Attempt,
    ) -> BoxFuture<'a, Result<Attempt, String>> {
        self.inner.prepare(http, model, attempt)
    }
}

/// Shares one source between the sessions' turns.
pub type Shared = Arc<dyn CredentialSource>;
