//! OAuth 2.0 logins: the authorization code flow with PKCE (S256) and a
//! `state` check, and refreshing tokens before they expire.
//!
//! `pincer login --provider X --oauth` opens the provider's authorization
//! page (or prints its address on a headless machine), then takes the
//! redirect: through a loopback listener on 127.0.0.1 when the provider
//! redirects there, or pasted by the user (the whole redirect URL, or
//! `code#state`, or the bare code). Tokens are stored as an `oauth` profile
//! with their expiry. Refreshing happens under the profiles file's lock,
//! so of several pincer processes only the first refreshes; the others
//! re-read the new token.
//!
//! Endpoints, client id and scopes are per-provider settings
//! (`[oauth.<provider>]` in config.toml); Anthropic's are built in.
//!
//! An editor's `authenticate` has no terminal to paste into, so
//! [`browser_login`] runs the same flow with a loopback redirect only
//! ([`OAuthConfig::loopback`]), opening the browser itself
//! ([`browser`]) and taking the redirect on [`loopback::Listener`].

pub mod browser;
pub mod loopback;

use std::time::Duration;

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::{Credential, Store, StoreError};
use crate::llm::Secret;

/// A token this close to its expiry is refreshed before use.
pub const REFRESH_MARGIN_MS: u64 = 5 * 60_000;

/// A provider's OAuth settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    pub authorize_url: String,
    pub token_url: String,
    pub client_id: String,
    pub scopes: Vec<String>,
    /// Where the provider sends the browser back. Empty: a loopback
    /// listener on 127.0.0.1 (`http://127.0.0.1:<port>/callback`).
    pub redirect_uri: String,
    /// `json` for token endpoints that take JSON (Anthropic's), else the
    /// standard form encoding.
    pub token_format: Option<String>,
    /// A loopback redirect the provider also accepts when `redirect_uri` is
    /// a page that shows a code to paste (`http://localhost/callback`: any
    /// port). Logins without a terminal (an editor's `authenticate`) use
    /// it; without one, such a provider logs in only in a terminal.
    pub loopback_redirect: String,
}

impl OAuthConfig {
    /// Where the browser comes back to in a login without a terminal: the
    /// loopback listener when `redirect_uri` is empty, `redirect_uri`
    /// itself when it is a loopback address, else `loopback_redirect`.
    /// `None`: the provider only redirects to a page to paste from.
    pub fn loopback(&self) -> Option<loopback::LoopbackRedirect> {
        if self.redirect_uri.is_empty() {
            return Some(loopback::LoopbackRedirect::any_port());
        }
        loopback::LoopbackRedirect::parse(&self.redirect_uri)
            .or_else(|| loopback::LoopbackRedirect::parse(&self.loopback_redirect))
    }
}

/// The built-in settings for a provider, if pincer knows them.
pub fn builtin(provider: &str) -> Option<OAuthConfig> {
    match provider {
        // Claude Pro/Max subscriptions; the redirect is Anthropic's page
        // that shows `code#state` to paste.
        "anthropic" => Some(OAuthConfig {
            authorize_url: "https://claude.ai/oauth/authorize".to_string(),
            token_url: "https://console.anthropic.com/v1/oauth/token".to_string(),
            client_id: "9d1c250a-e61b-44d9-88ed-5944d1962f5e".to_string(),
            scopes: vec![
                "org:create_api_key".to_string(),
                "user:profile".to_string(),
                "user:inference".to_string(),
            ],
            redirect_uri: "https://console.anthropic.com/oauth/code/callback".to_string(),
            token_format: Some("json".to_string()),
            // Claude Code's own login sends `http://localhost:<port>/callback`
            // with this client id (its "automatic" flow), the port its
            // listener got; the paste page is its fallback.
            loopback_redirect: "http://localhost/callback".to_string(),
        }),
        _ => None,
    }
}

/// Why a login or refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error(
        "the redirect's state does not match this login (expected the one pincer sent); start the login again"
    )]
    StateMismatch,
    #[error("the redirect carries no authorization code")]
    NoCode,
    #[error("the provider refused the login: {0}")]
    Denied(String),
    #[error("the token endpoint answered {status}: {message}")]
    Token { status: u16, message: String },
    #[error("cannot reach the token endpoint: {0}")]
    Network(String),
    #[error("profile {0} is not an OAuth profile")]
    NotOAuth(String),
    #[error("no OAuth settings for provider {0}; add [oauth.{0}] to config.toml")]
    Unconfigured(String),
    #[error(
        "the {0} login redirects to a page that shows a code to paste, which an editor cannot take; log in in a terminal: `pincer login --provider {0} --oauth`"
    )]
    NoLoopback(String),
    #[error("cannot listen on 127.0.0.1:{port} for the login redirect: {message}")]
    Listener { port: u16, message: String },
    #[error(
        "the {provider} login in the browser did not finish within {}; start it again, or log in in a terminal: `pincer login --provider {provider} --oauth`",
        humantime::format_duration(*after)
    )]
    TimedOut { provider: String, after: Duration },
    #[error(
        "pincer could not open a browser for the {provider} login ({}); set BROWSER to your browser's command in the environment the editor starts pincer with, or log in in a terminal: `pincer login --provider {provider} --oauth`",
        if tried.is_empty() { "no BROWSER and no display".to_string() } else { tried.join("; ") }
    )]
    NoBrowser {
        provider: String,
        tried: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A PKCE verifier and its S256 challenge.
#[derive(Clone)]
pub struct Pkce {
    pub verifier: Secret,
    pub challenge: String,
}

fn random_token() -> String {
    // Two v4 UUIDs: 244 random bits in the unreserved alphabet.
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The S256 challenge of a verifier.
pub fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

impl Pkce {
    pub fn new() -> Self {
        let verifier = random_token();
        Self {
            challenge: challenge(&verifier),
            verifier: Secret::new(verifier),
        }
    }
}

impl Default for Pkce {
    fn default() -> Self {
        Self::new()
    }
}

/// A fresh random `state`.
pub fn new_state() -> String {
    random_token()
}

/// The address the browser opens.
pub fn authorize_url(config: &OAuthConfig, redirect_uri: &str, pkce: &Pkce, state: &str) -> String {
    let mut url = match url::Url::parse(&config.authorize_url) {
        Ok(url) => url,
        Err(_) => return config.authorize_url.clone(),
    };
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &config.client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", &config.scopes.join(" "))
        .append_pair("code_challenge", &pkce.challenge)
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", state);
    url.to_string()
}

/// The code from what the user pasted (a redirect URL, `code#state`, or a
/// bare code), checking `state` whenever the input carries one.
pub fn code_from(input: &str, state: &str) -> Result<String, OAuthError> {
    let input = input.trim();
    if let Ok(url) = url::Url::parse(input)
        && url.scheme().starts_with("http")
    {
        let pairs: std::collections::HashMap<String, String> =
            url.query_pairs().into_owned().collect();
        if let Some(error) = pairs.get("error") {
            return Err(OAuthError::Denied(error.clone()));
        }
        if pairs.get("state").map(String::as_str) != Some(state) {
            return Err(OAuthError::StateMismatch);
        }
        return pairs.get("code").cloned().ok_or(OAuthError::NoCode);
    }
    let (code, given_state) = match input.split_once('#') {
        Some((code, given)) => (code, Some(given)),
        None => (input, None),
    };
    if given_state.is_some_and(|g| g != state) {
        return Err(OAuthError::StateMismatch);
    }
    if code.is_empty() {
        return Err(OAuthError::NoCode);
    }
    Ok(code.to_string())
}

/// Tokens from the token endpoint.
#[derive(Clone)]
pub struct Tokens {
    pub access: Secret,
    pub refresh: Secret,
    /// Milliseconds since the epoch.
    pub expires: u64,
    /// Who logged in (an email address, else the account's id), when the
    /// token endpoint says.
    pub account: Option<String>,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
    /// Anthropic's: `"account": {"uuid": "…", "email_address": "…"}`.
    #[serde(default)]
    account: Option<TokenAccount>,
}

#[derive(Deserialize)]
struct TokenAccount {
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    email_address: Option<String>,
}

impl TokenAccount {
    /// The email address when there is one: that is what a person
    /// recognises in `pincer auth list`.
    fn name(self) -> Option<String> {
        self.email_address
            .filter(|e| !e.is_empty())
            .or(self.uuid.filter(|u| !u.is_empty()))
    }
}

async fn token_request(
    http: &reqwest::Client,
    config: &OAuthConfig,
    fields: &[(&str, &str)],
    old_refresh: Option<&str>,
    now: u64,
) -> Result<Tokens, OAuthError> {
    let request = http
        .post(&config.token_url)
        .timeout(Duration::from_secs(30));
    let request = if config.token_format.as_deref() == Some("json") {
        let body: serde_json::Map<String, serde_json::Value> = fields
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_string(),
                    serde_json::Value::String((*v).to_string()),
                )
            })
            .collect();
        request.json(&body)
    } else {
        request.form(fields)
    };
    let response = request
        .send()
        .await
        .map_err(|e| OAuthError::Network(e.to_string()))?;
    let status = response.status().as_u16();
    if response.status().is_redirection() {
        // The client follows no redirect (`llm::http_client`): the request
        // carries the code or refresh token, and a 307 would resend it to
        // wherever `Location` points.
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .unwrap_or_default();
        return Err(OAuthError::Token {
            status,
            message: format!(
                "a redirect to {}; pincer does not follow redirects with credentials: set \
                 token_url to the address that answers",
                crate::llm::redact(&location.chars().take(300).collect::<String>())
            ),
        });
    }
    let text = response
        .text()
        .await
        .map_err(|e| OAuthError::Network(e.to_string()))?;
    if !(200..300).contains(&status) {
        // Error bodies carry an error code and description, not tokens.
        let message = crate::llm::redact(&text.chars().take(300).collect::<String>());
        return Err(OAuthError::Token { status, message });
    }
    let tokens: TokenResponse = serde_json::from_str(&text).map_err(|e| OAuthError::Token {
        status,
        message: format!("unreadable token response ({e})"),
    })?;
    let refresh = tokens
        .refresh_token
        .or_else(|| old_refresh.map(str::to_string))
        .unwrap_or_default();
    Ok(Tokens {
        access: Secret::new(tokens.access_token),
        refresh: Secret::new(refresh),
        expires: now + tokens.expires_in.unwrap_or(3600) * 1000,
        account: tokens.account.and_then(TokenAccount::name),
    })
}

/// Exchanges an authorization code for tokens.
pub async fn exchange(
    http: &reqwest::Client,
    config: &OAuthConfig,
    code: &str,
    pkce: &Pkce,
    redirect_uri: &str,
    state: &str,
    now: u64,
) -> Result<Tokens, OAuthError> {
    token_request(
        http,
        config,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("client_id", &config.client_id),
            ("code_verifier", pkce.verifier.expose()),
            ("state", state),
        ],
        None,
        now,
    )
    .await
}

/// Stores tokens as the `oauth` profile `id`, replacing what it held (and
/// its failure history), the way `pincer login --oauth` does.
pub fn save(store: &Store, id: &str, provider: &str, tokens: &Tokens) -> Result<(), StoreError> {
    store.modify(|profiles| {
        profiles.profiles.insert(
            id.to_string(),
            Credential::Oauth {
                provider: provider.to_string(),
                access: tokens.access.expose().to_string(),
                refresh: tokens.refresh.expose().to_string(),
                expires: tokens.expires,
                account: tokens.account.clone(),
            },
        );
        profiles.usage_stats.remove(id);
    })
}

/// A login without a terminal: opens the provider's authorization page in
/// the user's browser, takes the redirect on a loopback listener (for at
/// most `timeout`), exchanges the code and stores the tokens as profile
/// `id`. The browser's tab is told how it ended. `env` gives `BROWSER` and
/// the display variables.
pub async fn browser_login(
    http: &reqwest::Client,
    config: &OAuthConfig,
    provider: &str,
    store: &Store,
    id: &str,
    timeout: Duration,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Tokens, OAuthError> {
    let redirect = config
        .loopback()
        .ok_or_else(|| OAuthError::NoLoopback(provider.to_string()))?;
    let listener = loopback::Listener::bind(provider, &redirect).await?;
    let redirect_uri = listener.redirect_uri().to_string();
    let pkce = Pkce::new();
    let state = new_state();
    let url = authorize_url(config, &redirect_uri, &pkce, &state);
    let waiting = listener.wait(&state, timeout);
    tokio::pin!(waiting);
    // The redirect may come back while the browser command still runs (a
    // browser that only returns when its window closes).
    let callback = tokio::select! {
        callback = &mut waiting => callback,
        opened = browser::open(&url, env) => match opened {
            Ok(program) => {
                tracing::info!(provider, browser = %program, "waiting for the OAuth redirect");
                waiting.await
            }
            Err(tried) => {
                return Err(OAuthError::NoBrowser { provider: provider.to_string(), tried });
            }
        },
    };
    let callback = callback?;
    let now = super::millis(std::time::SystemTime::now());
    let result = async {
        let tokens = exchange(
            http,
            config,
            &callback.code,
            &pkce,
            &redirect_uri,
            &state,
            now,
        )
        .await?;
        let (store, id, provider_owned, saved) = (
            store.clone(),
            id.to_string(),
            provider.to_string(),
            tokens.clone(),
        );
        let path = store.path().to_path_buf();
        // The profiles lock is a blocking file lock.
        tokio::task::spawn_blocking(move || save(&store, &id, &provider_owned, &saved))
            .await
            .map_err(|e| StoreError::Io {
                path,
                source: std::io::Error::other(e.to_string()),
            })??;
        Ok(tokens)
    }
    .await;
    callback.finish(result.as_ref().map(|_| provider)).await;
    result
}

/// Makes sure profile `id` holds an access token valid for at least
/// [`REFRESH_MARGIN_MS`], refreshing it under the profiles lock. A process
/// that waited for the lock finds the token another one refreshed and
/// uses it as it is.
pub async fn fresh_access(
    http: &reqwest::Client,
    store: &Store,
    config: &OAuthConfig,
    id: &str,
    now: u64,
) -> Result<Secret, OAuthError> {
    // The lock is a blocking file lock; hold it on a blocking thread and
    // do the HTTP call from here while it is held.
    let (locked_tx, locked_rx) = tokio::sync::oneshot::channel::<Result<Credential, OAuthError>>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Option<Credential>>();
    let store_for_lock = store.clone();
    let id_owned = id.to_string();
    let holder = tokio::task::spawn_blocking(move || {
        store_for_lock.locked(|| -> Result<(), StoreError> {
            let profiles = match store_for_lock.read() {
                Ok(p) => p,
                Err(e) => {
                    let _ = locked_tx.send(Err(e.into()));
                    return Ok(());
                }
            };
            let credential = match profiles.profiles.get(&id_owned) {
                Some(c) => c.clone(),
                None => {
                    let _ = locked_tx.send(Err(OAuthError::NotOAuth(id_owned.clone())));
                    return Ok(());
                }
            };
            if locked_tx.send(Ok(credential)).is_err() {
                return Ok(());
            }
            // Wait for the refreshed credential (or none) and write it while
            // still holding the lock.
            if let Ok(Some(updated)) = done_rx.recv() {
                let mut profiles = store_for_lock.read()?;
                profiles.profiles.insert(id_owned.clone(), updated);
                store_for_lock.write_locked(&profiles)?;
            }
            Ok(())
        })
    });
    let credential = match locked_rx.await {
        Ok(result) => result?,
        Err(_) => {
            return Err(match holder.await {
                Ok(Err(e)) | Ok(Ok(Err(e))) => e.into(),
                _ => OAuthError::NotOAuth(id.to_string()),
            });
        }
    };
    let Credential::Oauth {
        provider,
        access,
        refresh,
        expires,
        account,
    } = credential
    else {
        let _ = done_tx.send(None);
        return Err(OAuthError::NotOAuth(id.to_string()));
    };
    if expires > now + REFRESH_MARGIN_MS {
        let _ = done_tx.send(None);
        let _ = holder.await;
        return Ok(Secret::new(access));
    }
    let result = token_request(
        http,
        config,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", &config.client_id),
        ],
        Some(&refresh),
        now,
    )
    .await;
    let tokens = match result {
        Ok(tokens) => tokens,
        Err(e) => {
            let _ = done_tx.send(None);
            let _ = holder.await;
            return Err(e);
        }
    };
    let _ = done_tx.send(Some(Credential::Oauth {
        provider,
        access: tokens.access.expose().to_string(),
        refresh: tokens.refresh.expose().to_string(),
        expires: tokens.expires,
        // A refresh rarely says who it is for; the login did.
        account: tokens.account.clone().or(account),
    }));
    match holder.await {
        Ok(Ok(Ok(()))) => Ok(tokens.access),
        Ok(Ok(Err(e))) | Ok(Err(e)) => Err(e.into()),
        Err(e) => Err(OAuthError::Network(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_uses_s256_of_the_verifier() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let pkce = Pkce::new();
        assert!(pkce.verifier.expose().len() >= 43);
        assert_eq!(pkce.challenge, challenge(pkce.verifier.expose()));
    }

    #[test]
    fn the_authorization_url_carries_the_challenge_and_state() {
        let config = builtin("anthropic").unwrap();
        let pkce = Pkce::new();
        let url = authorize_url(&config, &config.redirect_uri, &pkce, "st4te");
        let parsed = url::Url::parse(&url).unwrap();
        let pairs: std::collections::HashMap<String, String> =
            parsed.query_pairs().into_owned().collect();
        assert_eq!(pairs["code_challenge"], pkce.challenge);
        assert_eq!(pairs["code_challenge_method"], "S256");
        assert_eq!(pairs["state"], "st4te");
        assert_eq!(pairs["response_type"], "code");
        assert_eq!(
            pairs["scope"],
            "org:create_api_key user:profile user:inference"
        );
        assert!(!url.contains(pkce.verifier.expose()));
    }

    #[tokio::test]
    async fn anthropic_logs_in_without_a_terminal_through_localhost() {
        // Claude Code's automatic flow: `http://localhost:<port>/callback`,
        // the listener on the loopback interface.
        let config = builtin("anthropic").unwrap();
        let redirect = config.loopback().unwrap();
        assert_eq!(
            redirect,
            loopback::LoopbackRedirect {
                host: "localhost".to_string(),
                port: 0,
                path: "/callback".to_string()
            }
        );
        let listener = loopback::Listener::bind("anthropic", &redirect)
            .await
            .unwrap();
        let port: u16 = listener
            .redirect_uri()
            .strip_prefix("http://localhost:")
            .and_then(|rest| rest.strip_suffix("/callback"))
            .unwrap()
            .parse()
            .unwrap();
        assert!(port > 0);
        assert!(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        );
        // A configured provider: empty means loopback on 127.0.0.1, a
        // loopback address is used as it is, a paste page alone is none.
        let mut config = OAuthConfig::default();
        assert_eq!(
            config.loopback(),
            Some(loopback::LoopbackRedirect::any_port())
        );
        config.redirect_uri = "http://127.0.0.1:8085/cb".to_string();
        assert_eq!(config.loopback().unwrap().port, 8085);
        config.redirect_uri = "https://example.com/code".to_string();
        assert_eq!(config.loopback(), None);
    }

    #[test]
    fn pasted_redirects_give_the_code_and_a_wrong_state_is_refused() {
        assert_eq!(
            code_from("http://127.0.0.1:5555/callback?code=abc&state=s1", "s1").unwrap(),
            "abc"
        );
        assert_eq!(code_from("abc#s1", "s1").unwrap(), "abc");
        assert_eq!(code_from("  abc \n", "s1").unwrap(), "abc");
        assert!(matches!(
            code_from("http://127.0.0.1/callback?code=abc&state=evil", "s1"),
            Err(OAuthError::StateMismatch)
        ));
        assert!(matches!(
            code_from("abc#evil", "s1"),
            Err(OAuthError::StateMismatch)
        ));
        assert!(matches!(
            code_from(
                "http://127.0.0.1/callback?error=access_denied&state=s1",
                "s1"
            ),
            Err(OAuthError::Denied(_))
        ));
        assert!(matches!(
            code_from("http://127.0.0.1/callback?state=s1", "s1"),
            Err(OAuthError::NoCode)
        ));
    }
}
