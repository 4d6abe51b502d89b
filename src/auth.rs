//! Model-provider credentials: auth profiles, their order, and what their
//! failures cost them.
//!
//! Profiles live in `<config dir>/agents/<agent>/auth-profiles.json` (mode
//! 0600), in the format OpenClaw uses:
//!
//! ```json
//! {"version": 1,
//!  "profiles": {"anthropic:work": {"type": "api_key", "provider": "anthropic", "key": "sk-ant-…"}},
//!  "order": {"anthropic": ["anthropic:work", "anthropic:default"]},
//!  "usageStats": {"anthropic:work": {"lastUsed": 1763800000000, "cooldownUntil": 0, "errorCount": 0}}}
//! ```
//!
//! Several pincer processes share the file: every change is a locked
//! read-modify-write (an exclusive lock on `auth-profiles.json.lock`), so
//! cooldowns and round-robin state seen by one process hold for all.
//!
//! For a provider, the credentials to try come in this order: a profile
//! the session is pinned to, then the provider's profiles (the configured
//! order, else OAuth before tokens before API keys, least recently used
//! first, profiles in cooldown last), then the provider's environment
//! variable. Failures put a profile into cooldown: rate limits and auth
//! errors for 1 min × 5^(n−1), at most an hour (or as long as the
//! provider's `retry-after` asks, when that is longer); billing errors
//! disable it for 5 h, doubling up to 24 h; a profile quiet for 24 h starts
//! over. Profiles in cooldown are listed (so a session can still start) but
//! marked [`Unavailable`]; failover passes them by.

pub mod external;
pub mod oauth;
mod source;
mod store;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::llm::Secret;
pub use source::{Attempt, CredentialSource, Excluding, Fixed, Shared};
pub use store::{Store, StoreError};

/// The agent whose profiles are used.
pub const DEFAULT_AGENT: &str = "main";

/// Where an agent's profiles are kept.
pub fn profiles_path(config_dir: &Path, agent: &str) -> PathBuf {
    config_dir
        .join("agents")
        .join(agent)
        .join("auth-profiles.json")
}

/// One stored credential.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Credential {
    ApiKey {
        provider: String,
        key: String,
    },
    /// A long-lived token; never refreshed.
    Token {
        provider: String,
        token: String,
        /// Milliseconds since the epoch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires: Option<u64>,
    },
    Oauth {
        provider: String,
        access: String,
        refresh: String,
        /// Milliseconds since the epoch.
        expires: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        account: Option<String>,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        write!(f, "{}({})", self.kind(), self.provider())
    }
}

impl Credential {
    pub fn provider(&self) -> &str {
        match self {
            Credential::ApiKey { provider, .. }
            | Credential::Token { provider, .. }
            | Credential::Oauth { provider, .. } => provider,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Credential::ApiKey { .. } => "api_key",
            Credential::Token { .. } => "token",
            Credential::Oauth { .. } => "oauth",
        }
    }

    /// Preference between kinds: OAuth, then tokens, then API keys.
    fn rank(&self) -> u8 {
        match self {
            Credential::Oauth { .. } => 0,
            Credential::Token { .. } => 1,
            Credential::ApiKey { .. } => 2,
        }
    }

    /// The secret sent to the provider.
    pub fn secret(&self) -> Secret {
        match self {
            Credential::ApiKey { key, .. } => Secret::new(key.clone()),
            Credential::Token { token, .. } => Secret::new(token.clone()),
            Credential::Oauth { access, .. } => Secret::new(access.clone()),
        }
    }

    /// When it stops working, in milliseconds since the epoch.
    pub fn expires(&self) -> Option<u64> {
        match self {
            Credential::ApiKey { .. } => None,
            Credential::Token { expires, .. } => *expires,
            Credential::Oauth { expires, .. } => Some(*expires),
        }
    }
}

/// What a profile's use has been like.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UsageStats {
    /// Milliseconds since the epoch; 0 = never.
    pub last_used: u64,
    pub cooldown_until: u64,
    pub error_count: u32,
    #[serde(skip_serializing_if = "is_zero")]
    pub disabled_until: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Billing failures in a row (the disable time doubles with each).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub billing_count: u32,
    #[serde(skip_serializing_if = "is_zero")]
    pub last_failure: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Profiles {
    pub version: u32,
    #[serde(default)]
    pub profiles: BTreeMap<String, Credential>,
    #[serde(default)]
    pub order: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub usage_stats: BTreeMap<String, UsageStats>,
}

impl Default for Profiles {
    fn default() -> Self {
        Self {
            version: 1,
            profiles: BTreeMap::new(),
            order: BTreeMap::new(),
            usage_stats: BTreeMap::new(),
        }
    }
}

/// Why a profile failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Auth,
    RateLimit,
    Billing,
}

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;
/// A profile without failures for this long starts its counters over.
const QUIET_RESET_MS: u64 = 24 * HOUR_MS;

/// Milliseconds since the epoch.
pub fn millis(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl UsageStats {
    /// Whether the profile may be tried at `now`.
    pub fn available(&self, now: u64) -> bool {
        now >= self.cooldown_until && now >= self.disabled_until
    }

    /// Records a failure at `now`.
    pub fn fail(&mut self, failure: Failure, now: u64) {
        if self.last_failure > 0 && now.saturating_sub(self.last_failure) >= QUIET_RESET_MS {
            self.error_count = 0;
            self.billing_count = 0;
        }
        self.last_failure = now;
        match failure {
            Failure::Auth | Failure::RateLimit => {
                self.error_count += 1;
                let factor = 5u64.saturating_pow(self.error_count.saturating_sub(1));
                let cooldown = MINUTE_MS.saturating_mul(factor).min(HOUR_MS);
                self.cooldown_until = now + cooldown;
            }
            Failure::Billing => {
                self.billing_count += 1;
                let factor = 2u64.saturating_pow(self.billing_count.saturating_sub(1));
                let disabled = (5 * HOUR_MS).saturating_mul(factor).min(24 * HOUR_MS);
                self.disabled_until = now + disabled;
                self.disabled_reason = Some("billing".to_string());
            }
        }
    }

    /// Records a failure at `now` after which the provider asked to wait
    /// `retry_after`: the cooldown lasts at least that long.
    pub fn fail_for(&mut self, failure: Failure, now: u64, retry_after: Option<Duration>) {
        self.fail(failure, now);
        if let Some(after) = retry_after {
            let after = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
            self.cooldown_until = self.cooldown_until.max(now.saturating_add(after));
        }
    }

    /// Why the profile may not be used at `now`, if it may not.
    pub fn unavailable(&self, now: u64) -> Option<Unavailable> {
        if self.available(now) {
            return None;
        }
        let disabled = self.disabled_until > now;
        Some(Unavailable {
            until: self.cooldown_until.max(self.disabled_until),
            disabled: disabled.then(|| {
                self.disabled_reason
                    .clone()
                    .unwrap_or_else(|| "errors".to_string())
            }),
        })
    }

    /// Records a successful use at `now`.
    pub fn succeed(&mut self, now: u64) {
        self.last_used = now;
        self.error_count = 0;
        self.cooldown_until = 0;
    }
}

impl Profiles {
    /// The provider's profile ids in the order to try them at `now`.
    pub fn ordered(&self, provider: &str, now: u64) -> Vec<String> {
        let stats = |id: &str| self.usage_stats.get(id).cloned().unwrap_or_default();
        let mut ids: Vec<String> = match self.order.get(provider) {
            Some(order) => order
                .iter()
                .filter(|id| {
                    self.profiles
                        .get(id.as_str())
                        .is_some_and(|c| c.provider() == provider)
                })
                .cloned()
                .collect(),
            None => {
                let mut ids: Vec<&String> = self
                    .profiles
                    .iter()
                    .filter(|(_, c)| c.provider() == provider)
                    .map(|(id, _)| id)
                    .collect();
                // Kind first, then least recently used (round-robin).
                ids.sort_by_key(|id| {
                    let rank = self.profiles.get(id.as_str()).map_or(9, Credential::rank);
                    (rank, stats(id).last_used, (*id).clone())
                });
                ids.into_iter().cloned().collect()
            }
        };
        // Profiles in cooldown go last, soonest available first.
        ids.sort_by_key(|id| {
            let s = stats(id);
            if s.available(now) {
                0
            } else {
                s.cooldown_until.max(s.disabled_until)
            }
        });
        ids
    }
}

/// Why a stored profile is passed by for now, and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// Milliseconds since the epoch.
    pub until: u64,
    /// Why it is disabled (`billing`); `None` for a cooldown after rate
    /// limits or auth errors.
    pub disabled: Option<String>,
}

impl std::fmt::Display for Unavailable {
    /// `cooling down until 2100-01-01T00:00:00Z`,
    /// `disabled (billing) until …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let until = humantime::format_rfc3339_seconds(
            SystemTime::UNIX_EPOCH + Duration::from_millis(self.until),
        );
        match &self.disabled {
            Some(reason) => write!(f, "disabled ({reason}) until {until}"),
            None => write!(f, "cooling down until {until}"),
        }
    }
}

/// A clock, injectable for tests.
pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// One credential to try for a provider.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The profile id, or `env:<VAR>` for an environment variable.
    pub id: String,
    pub secret: Secret,
    /// Whether it is a stored profile (its stats are kept).
    pub stored: bool,
    /// Set for stored profiles in cooldown or disabled; they are listed
    /// after all the others.
    pub unavailable: Option<Unavailable>,
}

impl Candidate {
    pub fn available(&self) -> bool {
        self.unavailable.is_none()
    }
}

/// Resolves credentials for providers and records how they fare.
pub struct Resolver {
    store: Store,
    env: BTreeMap<String, String>,
    clock: std::sync::Arc<dyn Clock>,
}

impl Resolver {
    pub fn new(
        store: Store,
        env: BTreeMap<String, String>,
        clock: std::sync::Arc<dyn Clock>,
    ) -> Self {
        Self { store, env, clock }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The credentials to try for `provider`, best first: `pinned` (when it
    /// is available), the provider's profiles, then its environment
    /// variable `env_var`.
    pub fn candidates(
        &self,
        provider: &str,
        env_var: Option<&str>,
        pinned: Option<&str>,
    ) -> Vec<Candidate> {
        self.candidates_with(provider, env_var, None, pinned)
    }

    /// [`Resolver::candidates`] plus a key from the config file, tried
    /// after the environment variable and before other tools' credentials.
    pub fn candidates_with(
        &self,
        provider: &str,
        env_var: Option<&str>,
        config_key: Option<&Secret>,
        pinned: Option<&str>,
    ) -> Vec<Candidate> {
        let now = millis(self.clock.now());
        let profiles = match self.store.read() {
            Ok(profiles) => profiles,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the auth profiles; using environment variables only");
                Profiles::default()
            }
        };
        let mut out: Vec<Candidate> = profiles
            .ordered(provider, now)
            .into_iter()
            .filter_map(|id| {
                let credential = profiles.profiles.get(&id)?;
                let stats = profiles.usage_stats.get(&id).cloned().unwrap_or_default();
                let expired = credential
                    .expires()
                    .is_some_and(|e| e <= now && !matches!(credential, Credential::Oauth { .. }));
                (!expired).then(|| Candidate {
                    secret: credential.secret(),
                    stored: true,
                    unavailable: stats.unavailable(now),
                    id,
                })
            })
            .collect();
        if let Some(pinned) = pinned
            && let Some(at) = out.iter().position(|c| c.id == pinned && c.available())
        {
            let candidate = out.remove(at);
            out.insert(0, candidate);
        }
        // Available profiles first, then the variable, the config key and
        // other tools' credentials, then profiles waiting out a cooldown.
        let mut fallbacks = Vec::new();
        if let Some(var) = env_var
            && let Some(value) = self.env.get(var).filter(|v| !v.is_empty())
        {
            fallbacks.push(Candidate {
                id: format!("env:{var}"),
                secret: Secret::new(value.clone()),
                stored: false,
                unavailable: None,
            });
        }
        if let Some(key) = config_key {
            fallbacks.push(Candidate {
                id: "config".to_string(),
                secret: key.clone(),
                stored: false,
                unavailable: None,
            });
        }
        if let Some(home) = self.env.get("HOME").filter(|h| !h.is_empty()) {
            fallbacks.extend(external::candidates(provider, Path::new(home), now));
        }
        let at = out.iter().position(|c| !c.available()).unwrap_or(out.len());
        out.splice(at..at, fallbacks);
        out
    }

    /// Records that `id` answered.
    pub fn succeeded(&self, id: &str) {
        self.update(id, |stats, now| stats.succeed(now));
    }

    /// Records that `id` failed.
    pub fn failed(&self, id: &str, failure: Failure) {
        self.failed_for(id, failure, None);
    }

    /// Records that `id` failed and the provider asked to wait
    /// `retry_after` before trying again.
    pub fn failed_for(&self, id: &str, failure: Failure, retry_after: Option<Duration>) {
        self.update(id, |stats, now| stats.fail_for(failure, now, retry_after));
    }

    fn update(&self, id: &str, change: impl FnOnce(&mut UsageStats, u64)) {
        if id.starts_with("env:") {
            return;
        }
        let now = millis(self.clock.now());
        let result = self.store.modify(|profiles| {
            if profiles.profiles.contains_key(id) {
                change(profiles.usage_stats.entry(id.to_string()).or_default(), now);
            }
        });
        if let Err(e) = result {
            tracing::warn!(profile = %id, error = %e, "cannot record the profile's use");
        }
    }
}

/// Where a provider's keys may come from besides profiles.
#[derive(Clone, Debug, Default)]
pub struct ProviderKeys {
    pub env_var: Option<String>,
    pub config_key: Option<Secret>,
    pub key_optional: bool,
}

/// A session's credentials: the resolver, which variable holds each
/// provider's key, and the profile the session is pinned to (kept while it
/// works, for prompt-cache hits).
pub struct SessionCredentials {
    resolver: Resolver,
    /// Per provider: its key variable, a key from the config file, and
    /// whether it works without a key.
    providers: BTreeMap<String, ProviderKeys>,
    pinned: parking_lot::Mutex<Option<String>>,
    /// OAuth settings by provider, for refreshing tokens.
    oauth: BTreeMap<String, oauth::OAuthConfig>,
}

impl std::fmt::Debug for SessionCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCredentials")
            .field("store", &self.resolver.store().path())
            .finish_non_exhaustive()
    }
}

impl SessionCredentials {
    pub fn new(
        resolver: Resolver,
        providers: BTreeMap<String, ProviderKeys>,
        oauth: BTreeMap<String, oauth::OAuthConfig>,
    ) -> Self {
        Self {
            resolver,
            providers,
            pinned: parking_lot::Mutex::new(None),
            oauth,
        }
    }

    /// Pins the session to a profile (`/model provider/model@profile`).
    pub fn pin(&self, id: Option<String>) {
        *self.pinned.lock() = id;
    }

    pub fn pinned(&self) -> Option<String> {
        self.pinned.lock().clone()
    }
}

impl CredentialSource for SessionCredentials {
    fn attempts(&self, model: &crate::llm::Model) -> Vec<Attempt> {
        let keys = self
            .providers
            .get(&model.provider)
            .cloned()
            .unwrap_or_default();
        let pinned = self.pinned();
        let mut attempts: Vec<Attempt> = self
            .resolver
            .candidates_with(
                &model.provider,
                keys.env_var.as_deref(),
                keys.config_key.as_ref(),
                pinned.as_deref(),
            )
            .into_iter()
            .map(|c| Attempt {
                id: Some(c.id),
                secret: Some(c.secret),
                unavailable: c.unavailable,
            })
            .collect();
        if attempts.is_empty() && keys.key_optional {
            attempts.push(Attempt {
                id: None,
                secret: None,
                unavailable: None,
            });
        }
        attempts
    }

    fn succeeded(&self, _model: &crate::llm::Model, id: &str) {
        self.resolver.succeeded(id);
        self.pin(Some(id.to_string()));
    }

    fn prepare<'a>(
        &'a self,
        http: &'a reqwest::Client,
        model: &'a crate::llm::Model,
        attempt: Attempt,
    ) -> futures::future::BoxFuture<'a, Result<Attempt, String>> {
        Box::pin(async move {
            let Some(id) = attempt.id.clone() else {
                return Ok(attempt);
            };
            let now = millis(self.resolver.clock.now());
            let expiring =
                self.resolver
                    .store
                    .read()
                    .ok()
                    .and_then(|p| match p.profiles.get(&id) {
                        Some(Credential::Oauth { expires, .. }) => {
                            Some(*expires <= now + oauth::REFRESH_MARGIN_MS)
                        }
                        _ => None,
                    });
            if expiring != Some(true) {
                return Ok(attempt);
            }
            let Some(config) = self.oauth.get(&model.provider) else {
                return Err(format!(
                    "its OAuth token expired and there are no OAuth settings for {} to refresh it",
                    model.provider
                ));
            };
            let secret = oauth::fresh_access(http, &self.resolver.store, config, &id, now)
                .await
                .map_err(|e| format!("refreshing its token failed: {e}"))?;
            Ok(Attempt {
                secret: Some(secret),
                ..attempt
            })
        })
    }

    fn failed(
        &self,
        _model: &crate::llm::Model,
        id: &str,
        failure: Failure,
        retry_after: Option<Duration>,
    ) {
        self.resolver.failed_for(id, failure, retry_after);
        let mut pinned = self.pinned.lock();
        if pinned.as_deref() == Some(id) {
            *pinned = None;
        }
    }
}

/// How long until `stats` is usable again, for `pincer auth list`.
pub fn cooldown_left(stats: &UsageStats, now: SystemTime) -> Option<Duration> {
    let now = millis(now);
    let until = stats.cooldown_until.max(stats.disabled_until);
    (until > now).then(|| Duration::from_millis(until - now))
}

#[cfg(test)]
#[path = "auth/tests.rs"]
mod tests;
