//! IAM Identity Center (SSO) profiles: the token `aws sso login` cached is
//! exchanged at the SSO portal for the role's credentials.
//!
//! The token lives in `~/.aws/sso/cache/<sha1>.json`, named by the SHA-1 of
//! the `sso_session` name, or of the start URL for legacy profiles that set
//! `sso_start_url` themselves. pincer only reads it: an expired token is an
//! error asking for `aws sso login`, where the SDKs would refresh it with
//! its refresh token.

use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;
use sha1::{Digest, Sha1};

use super::files::{Files, Profile};
use super::{AwsCredentials, Chain, CredentialsError, Temporary, excerpt, parse_time, send};
use crate::llm::Secret;

const TIMEOUT: Duration = Duration::from_secs(30);

/// An SSO profile's settings, its own and its `[sso-session]`'s.
pub(super) struct Settings {
    /// The `sso_session` name; `None` for a legacy profile.
    session: Option<String>,
    start_url: String,
    region: String,
    account_id: String,
    role_name: String,
}

impl Settings {
    /// `None` when the profile is not an SSO profile.
    pub(super) fn of(
        files: &Files,
        profile: &Profile<'_>,
    ) -> Result<Option<Self>, CredentialsError> {
        let session = profile.get("sso_session");
        let legacy_start_url = profile.get("sso_start_url");
        if session.is_none() && legacy_start_url.is_none() {
            return Ok(None);
        }
        let missing = |key: &str, place: &str| {
            profile.invalid(format!(
                "IAM Identity Center (SSO) needs {key} {place}; run `aws configure sso --profile {}`",
                profile.name
            ))
        };
        let (start_url, region) = match session {
            Some(name) => {
                let place = format!(
                    "in [sso-session {name}] of {}",
                    files.config_path().display()
                );
                let Some(section) = files.sso_session(name) else {
                    return Err(profile.invalid(format!(
                        "its sso_session `{name}` has no [sso-session {name}] section in {}",
                        files.config_path().display()
                    )));
                };
                let get = |key: &str| {
                    section
                        .get(key)
                        .filter(|value| !value.is_empty())
                        .cloned()
                        .ok_or_else(|| missing(key, &place))
                };
                (get("sso_start_url")?, get("sso_region")?)
            }
            None => (
                legacy_start_url.unwrap_or_default().to_string(),
                profile
                    .get("sso_region")
                    .ok_or_else(|| missing("sso_region", "in the profile"))?
                    .to_string(),
            ),
        };
        let get = |key: &str| {
            profile
                .get(key)
                .map(str::to_string)
                .ok_or_else(|| missing(key, "in the profile"))
        };
        Ok(Some(Self {
            session: session.map(str::to_string),
            start_url,
            region,
            account_id: get("sso_account_id")?,
            role_name: get("sso_role_name")?,
        }))
    }

    /// The cache file's name: the SHA-1 of the session name, or of the
    /// start URL for a legacy profile, in hex.
    fn cache_file_name(&self) -> String {
        let id = self.session.as_deref().unwrap_or(&self.start_url);
        let digest = Sha1::digest(id.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.json")
    }
}

/// The role credentials of an SSO profile, cached.
pub(super) async fn credentials(
    chain: &Chain<'_>,
    profile: &str,
    settings: &Settings,
) -> Result<AwsCredentials, CredentialsError> {
    let key = format!(
        "sso\0{}\0{}\0{}",
        settings.start_url, settings.account_id, settings.role_name
    );
    chain.cached(key, fetch(chain, profile, settings)).await
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedToken {
    access_token: Secret,
    expires_at: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PortalAnswer {
    role_credentials: RoleCredentials,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RoleCredentials {
    access_key_id: String,
    secret_access_key: Secret,
    session_token: Option<Secret>,
    /// Milliseconds since the epoch.
    expiration: i64,
}

async fn fetch(
    chain: &Chain<'_>,
    profile: &str,
    settings: &Settings,
) -> Result<Temporary, CredentialsError> {
    let login = |problem: String| CredentialsError::SsoLogin {
        profile: profile.to_string(),
        problem,
    };
    let portal_error = |message: String| CredentialsError::Sso {
        profile: profile.to_string(),
        message,
    };
    let Some(home) = chain.home else {
        return Err(login(
            "cannot be found: there is no home directory for ~/.aws/sso/cache".to_string(),
        ));
    };
    let path = home
        .join(".aws")
        .join("sso")
        .join("cache")
        .join(settings.cache_file_name());
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(login(format!("has no cached token ({})", path.display())));
        }
        Err(error) => {
            return Err(CredentialsError::Unreadable {
                path,
                message: error.to_string(),
            });
        }
    };
    let token: CachedToken = serde_json::from_str(&text).map_err(|_| {
        login(format!(
            "has an unreadable cached token ({})",
            path.display()
        ))
    })?;
    let expires = parse_time(&token.expires_at)
        .map_err(|message| login(format!("has a cached token with a bad expiry: {message}")))?;
    if expires <= Timestamp::now() {
        return Err(login(format!("expired at {expires}")));
    }

    let base = chain.endpoints.sso_portal(&settings.region);
    let url = url::Url::parse_with_params(
        &format!("{}/federation/credentials", base.trim_end_matches('/')),
        [
            ("role_name", settings.role_name.as_str()),
            ("account_id", settings.account_id.as_str()),
        ],
    )
    .map_err(|e| portal_error(format!("the portal URL {base} is not a URL: {e}")))?;
    let mut bearer = reqwest::header::HeaderValue::from_str(token.access_token.expose())
        .map_err(|_| login("has a cached token that is not valid header text".to_string()))?;
    bearer.set_sensitive(true);
    let request = chain
        .client
        .get(url)
        .header("x-amz-sso_bearer_token", bearer);
    let (status, body) = send(request, TIMEOUT)
        .await
        .map_err(|message| portal_error(format!("could not reach {base}: {message}")))?;
    match status {
        200..300 => {}
        // The portal's UnauthorizedException: the token was revoked or
        // belongs to a session that ended.
        401 => return Err(login("was rejected by the SSO portal".to_string())),
        _ => {
            return Err(portal_error(format!(
                "the portal answered HTTP {status} for role {} of account {}: {}",
                settings.role_name,
                settings.account_id,
                excerpt(&body, 300)
            )));
        }
    }
    let answer: PortalAnswer = serde_json::from_str(&body)
        .map_err(|e| portal_error(format!("the portal's answer has no credentials ({e})")))?;
    let role = answer.role_credentials;
    let expires = Timestamp::from_millisecond(role.expiration)
        .map_err(|_| portal_error(format!("the expiry {} is not a time", role.expiration)))?;
    Ok(Temporary {
        credentials: AwsCredentials {
            access_key_id: role.access_key_id,
            secret_access_key: role.secret_access_key,
            session_token: role.session_token.filter(|t| !t.expose().is_empty()),
        },
        expires: Some(expires),
    })
}
