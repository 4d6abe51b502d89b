//! The browser OAuth login as an ACP `agent` auth method
//! (`<provider>-oauth`): for editors that cannot open a terminal, pincer
//! opens the provider's login page itself and takes the redirect on a
//! loopback listener, the way Gemini CLI's and Codex's ACP agents do.
//!
//! A provider gets the method when it has OAuth settings (Anthropic's are
//! built in, others come from `[oauth.<provider>]` in the user's
//! config.toml) with a loopback redirect; one that only redirects to a
//! page showing a code to paste keeps its terminal login only.
//! `authenticate` with the method first checks what is already there (the
//! environment, stored profiles, other tools' logins), so a logged-in user
//! sees no browser; otherwise it runs [`crate::auth::oauth::browser_login`]
//! and stores the tokens as the `<provider>:oauth` profile, exactly as
//! `pincer login --provider <provider> --oauth` does.

use std::time::Duration;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{AuthMethod, AuthMethodAgent};

use crate::auth::oauth::{self, OAuthError};
use crate::config::Settings;

/// How long the browser login may take unless `PINCER_OAUTH_TIMEOUT`
/// (a duration such as `90s`) says otherwise.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The environment variable that bounds the wait for the browser.
const TIMEOUT_VAR: &str = "PINCER_OAUTH_TIMEOUT";

/// The method id of `provider`'s browser login.
fn method_id(provider: &str) -> String {
    format!("{provider}-oauth")
}

/// The providers whose OAuth login can run without a terminal: Anthropic's
/// built-in one, and every configured provider whose `[oauth.*]` redirect
/// (or `loopback_redirect`) is a loopback address. Without settings (a
/// config file that does not load), the built-in ones.
fn oauth_providers(settings: Option<&Settings>) -> Vec<String> {
    match settings {
        Some(settings) => {
            let mut providers: Vec<String> = settings
                .catalog
                .provider_names()
                .filter(|p| settings.oauth(p).is_some_and(|c| c.loopback().is_some()))
                .map(str::to_string)
                .collect();
            // Anthropic first: it is the one most people log in to.
            providers.sort_by_key(|p| p != "anthropic");
            providers
        }
        None => ["anthropic"]
            .into_iter()
            .filter(|p| oauth::builtin(p).is_some_and(|c| c.loopback().is_some()))
            .map(str::to_string)
            .collect(),
    }
}

/// The `agent` methods that run the browser login, one per provider that
/// has one.
pub(super) fn oauth_methods(settings: Option<&Settings>) -> Vec<AuthMethod> {
    oauth_providers(settings)
        .into_iter()
        .map(|provider| {
            let (name, description) = if provider == "anthropic" {
                (
                    "Log in with a Claude account (browser)".to_string(),
                    "pincer opens claude.ai in your browser to log in to a Claude Pro or Max account, then keeps the token in its auth profiles (mode 0600) and refreshes it.".to_string(),
                )
            } else {
                (
                    format!("Log in to {provider} in the browser"),
                    format!(
                        "pincer opens {provider}'s login page in your browser, then keeps the token in its auth profiles (mode 0600) and refreshes it."
                    ),
                )
            };
            AuthMethod::Agent(
                AuthMethodAgent::new(method_id(&provider), name).description(description),
            )
        })
        .collect()
}

/// The provider whose browser login `method` names, if it is one.
pub(super) fn oauth_method_provider(settings: &Settings, method: &str) -> Option<String> {
    let provider = method.strip_suffix("-oauth")?;
    oauth_providers(Some(settings))
        .into_iter()
        .find(|p| p == provider)
}

/// `authenticate` with `provider`'s browser login: nothing to do when the
/// provider already has a credential; otherwise the login, its tokens
/// stored as `<provider>:oauth`.
pub(super) async fn authenticate(
    settings: &Settings,
    http: &reqwest::Client,
    provider: &str,
) -> Result<(), Error> {
    let model = settings
        .catalog
        .provider(provider)
        .and_then(|p| p.models.first().cloned());
    if let Some(model) = &model
        && settings.has_credentials(model)
    {
        return Ok(());
    }
    let config = settings
        .oauth(provider)
        .ok_or_else(|| OAuthError::Unconfigured(provider.to_string()))
        .map_err(|e| super::invalid_params(e.to_string()))?;
    let timeout = match settings.env(TIMEOUT_VAR) {
        None => LOGIN_TIMEOUT,
        Some(value) => humantime::parse_duration(value).map_err(|e| {
            super::invalid_params(format!(
                "{TIMEOUT_VAR}={value} is not a duration ({e}); write e.g. 90s or 5m"
            ))
        })?,
    };
    let store = crate::auth::Store::new(crate::auth::profiles_path(
        &settings.paths.config_dir,
        crate::auth::DEFAULT_AGENT,
    ));
    let id = format!("{provider}:oauth");
    tracing::info!(provider, "starting the browser login");
    let tokens = oauth::browser_login(http, &config, provider, &store, &id, timeout, |key| {
        settings.env(key).map(str::to_string)
    })
    .await
    .map_err(|e| match e {
        OAuthError::Store(e) => Error::new(Error::internal_error().code, e.to_string()),
        e => super::auth_required(e.to_string()),
    })?;
    tracing::info!(
        provider,
        profile = %id,
        account = tokens.account.as_deref().unwrap_or("-"),
        "browser login stored"
    );
    Ok(())
}
