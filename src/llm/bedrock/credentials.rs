//! Where Bedrock credentials and the region come from: the AWS SDKs' default
//! credential provider chain, read the way the SDKs and the AWS CLI read it,
//! so that pincer acts as the same identity `aws` would.
//!
//! In order, the first source that is configured wins:
//! 1. `AWS_BEARER_TOKEN_BEDROCK`, a Bedrock API key. When it is set AWS
//!    credentials are not looked at, as in the AWS SDKs.
//! 2. `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and the optional
//!    `AWS_SESSION_TOKEN`.
//! 3. A web identity token: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`
//!    (EKS, GitHub Actions), exchanged at STS (`sts.rs`).
//! 4. The profile `AWS_PROFILE` (or the older `AWS_DEFAULT_PROFILE`, else
//!    `default`) of `~/.aws/credentials` and `~/.aws/config`: role
//!    assumption, IAM Identity Center (SSO), `credential_process`, or static
//!    keys (`profile.rs`, `sso.rs`, `process.rs`).
//! 5. The ECS/EKS container credentials endpoint, then the EC2 instance
//!    metadata service (`metadata.rs`).
//!
//! The region is `AWS_REGION`, then `AWS_DEFAULT_REGION`, then the profile's
//! `region` in the config file.
//!
//! A source that is configured but fails is an error naming it and the fix;
//! the chain does not fall through to some other identity. Temporary
//! credentials are kept in a process-wide [`Cache`] until five minutes
//! before they expire.
//!
//! Not covered: refreshing an expired SSO token with its refresh token (the
//! user runs `aws sso login`), MFA prompts for role assumption, IMDSv1, and
//! endpoint overrides for STS and the SSO portal.

mod files;
mod metadata;
mod process;
mod profile;
mod sso;
mod sts;
#[cfg(test)]
mod tests;

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::Auth;
use crate::llm::Secret;

/// AWS credentials, for SigV4. `Debug` shows the key id (which AWS treats
/// as an identifier, not a secret) and redacts the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
}

/// Where a set of credentials was found, for messages ("using profile `dev`
/// of ~/.aws/credentials").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Environment,
    WebIdentity {
        role_arn: String,
    },
    /// Static keys of a profile.
    File {
        path: PathBuf,
        profile: String,
    },
    Process {
        profile: String,
    },
    Sso {
        profile: String,
    },
    AssumeRole {
        profile: String,
        role_arn: String,
    },
    Container {
        url: String,
    },
    InstanceMetadata,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Environment => f.write_str("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
            Source::WebIdentity { role_arn } => {
                write!(f, "the web identity token for {role_arn}")
            }
            Source::File { path, profile } => {
                write!(f, "profile `{profile}` of {}", path.display())
            }
            Source::Process { profile } => write!(f, "credential_process of profile `{profile}`"),
            Source::Sso { profile } => write!(f, "IAM Identity Center (SSO) profile `{profile}`"),
            Source::AssumeRole { profile, role_arn } => {
                write!(f, "role {role_arn} of profile `{profile}`")
            }
            Source::Container { url } => write!(f, "the container credentials endpoint {url}"),
            Source::InstanceMetadata => f.write_str("the EC2 instance metadata service"),
        }
    }
}

/// Everything found about Bedrock access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsSettings {
    /// The profile the files were read for.
    pub profile: String,
    /// `AWS_BEARER_TOKEN_BEDROCK`.
    pub bearer_token: Option<Secret>,
    pub credentials: Option<(AwsCredentials, Source)>,
    pub region: Option<String>,
}

impl AwsSettings {
    /// How to authenticate: the Bedrock API key if there is one, else SigV4.
    pub fn auth(&self) -> Option<Auth<'_>> {
        match (&self.bearer_token, &self.credentials) {
            (Some(token), _) => Some(Auth::Bearer(token)),
            (None, Some((credentials, _))) => Some(Auth::SigV4(credentials)),
            (None, None) => None,
        }
    }
}

/// Why a configured source did not yield credentials. Each names the source
/// and, where there is one, the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("{set} is set but {missing} is not; set both, or neither")]
    PartialEnvironment {
        set: &'static str,
        missing: &'static str,
    },
    #[error("could not read {path}: {message}")]
    Unreadable { path: PathBuf, message: String },
    #[error(
        "AWS profile `{profile}` (AWS_PROFILE) is in neither {credentials} nor {config}; \
         check the name or unset AWS_PROFILE"
    )]
    ProfileNotFound {
        profile: String,
        credentials: PathBuf,
        config: PathBuf,
    },
    #[error("AWS profile `{profile}` in {path} has aws_access_key_id but no aws_secret_access_key")]
    IncompleteProfile { profile: String, path: PathBuf },
    /// A profile whose settings do not add up (a role without a source, a
    /// cycle of source profiles, SSO settings missing a field).
    #[error("AWS profile `{profile}`: {problem}")]
    InvalidProfile { profile: String, problem: String },
    #[error(
        "the credential_process of AWS profile `{profile}` failed: {message}; run the command \
         yourself to see why"
    )]
    Process { profile: String, message: String },
    #[error(
        "the IAM Identity Center (SSO) login of AWS profile `{profile}` {problem}; run \
         `aws sso login --profile {profile}`"
    )]
    SsoLogin { profile: String, problem: String },
    #[error("IAM Identity Center (SSO) credentials for AWS profile `{profile}` failed: {message}")]
    Sso { profile: String, message: String },
    #[error("STS {operation} for {role_arn} failed: {message}; {fix}")]
    Sts {
        operation: &'static str,
        role_arn: String,
        message: String,
        fix: String,
    },
    #[error(
        "the container credentials endpoint {url} failed: {message}; check \
         AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / AWS_CONTAINER_CREDENTIALS_FULL_URI and the \
         authorization token"
    )]
    Container { url: String, message: String },
    #[error(
        "the EC2 instance metadata service failed: {message}; attach an instance profile, or set \
         AWS_EC2_METADATA_DISABLED=true if this is not an EC2 instance"
    )]
    InstanceMetadata { message: String },
}

/// Reads the environment (through `env`, so tests can supply their own),
/// the shared files under `home`, and whatever endpoints the configured
/// source needs, through `client`. Files that do not exist are simply
/// absent; files that exist but cannot be read are errors. Nothing found
/// at all is `Ok` with no credentials.
///
/// The environment is read before this returns, so the future borrows
/// only `client`.
pub fn load<'a>(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
    client: &'a reqwest::Client,
) -> impl Future<Output = Result<AwsSettings, CredentialsError>> + Send + 'a {
    static CACHE: Cache = Cache::new();
    let vars = Vars::capture(env);
    let home = home.map(Path::to_path_buf);
    async move {
        let chain = Chain {
            vars: &vars,
            home: home.as_deref(),
            client,
            cache: &CACHE,
            endpoints: &Endpoints::default(),
        };
        chain.resolve().await
    }
}

/// Whether Bedrock credentials are configured where they can be found
/// without a network call: a Bedrock API key, the AWS key variables, a web
/// identity or container credentials named in the environment, or a
/// profile in the shared files that leads to credentials (keys, SSO,
/// `credential_process`, a role). The instance metadata service alone does
/// not count: only asking it tells whether it answers. Used to offer only
/// Bedrock models that can work; the call itself still resolves the chain.
pub fn configured(env: &dyn Fn(&str) -> Option<String>, home: Option<&Path>) -> bool {
    let vars = Vars::capture(env);
    let set = |name| vars.get(name).is_some();
    if set("AWS_BEARER_TOKEN_BEDROCK")
        || (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
        || (set("AWS_WEB_IDENTITY_TOKEN_FILE") && set("AWS_ROLE_ARN"))
        || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
    {
        return true;
    }
    files::Files::read(&vars, home)
        .is_ok_and(|files| profile::has_plan(&files, vars.profile().unwrap_or("default")))
}

/// The region alone, for a request authenticated with a Bedrock API key:
/// no credential source is consulted.
pub fn region(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<Option<String>, CredentialsError> {
    let vars = Vars::capture(env);
    let files = files::Files::read(&vars, home)?;
    Ok(vars.region(&files))
}

/// The variables the chain reads, read once: unset and empty are the same
/// thing, as in the SDKs.
struct Vars(HashMap<&'static str, String>);

impl Vars {
    const NAMES: &[&str] = &[
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
        "AWS_ROLE_SESSION_NAME",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "AWS_EC2_METADATA_DISABLED",
    ];

    fn capture(env: &dyn Fn(&str) -> Option<String>) -> Self {
        Self(
            Self::NAMES
                .iter()
                .filter_map(|&name| {
                    let value = env(name).filter(|value| !value.trim().is_empty())?;
                    Some((name, value))
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&str> {
        debug_assert!(Self::NAMES.contains(&name), "{name} is not captured");
        self.0.get(name).map(String::as_str)
    }

    fn profile(&self) -> Option<&str> {
        self.get("AWS_PROFILE")
            .or_else(|| self.get("AWS_DEFAULT_PROFILE"))
    }

    fn region(&self, files: &files::Files) -> Option<String> {
        self.get("AWS_REGION")
            .or_else(|| self.get("AWS_DEFAULT_REGION"))
            .map(str::to_string)
            .or_else(|| {
                files
                    .profile(self.profile().unwrap_or("default"))
                    .and_then(|p| p.config("region").map(str::to_string))
            })
    }
}

/// Where AWS's fixed endpoints are. Only tests move them (to a mock
/// server); nothing in the environment or the config files can, so a
/// stray setting cannot send an SSO token or signed STS request elsewhere.
#[derive(Clone, Debug, Default)]
struct Endpoints {
    /// In place of `https://sts.{region}.amazonaws.com`.
    sts: Option<String>,
    /// In place of `https://portal.sso.{region}.amazonaws.com`.
    sso_portal: Option<String>,
    /// In place of `http://169.254.170.2`, the ECS container endpoint that
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` is relative to.
    container: Option<String>,
}

impl Endpoints {
    fn sts(&self, region: &str) -> String {
        self.sts
            .clone()
            .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"))
    }

    fn sso_portal(&self, region: &str) -> String {
        self.sso_portal
            .clone()
            .unwrap_or_else(|| format!("https://portal.sso.{region}.amazonaws.com"))
    }

    fn container(&self) -> String {
        self.container
            .clone()
            .unwrap_or_else(|| "http://169.254.170.2".to_string())
    }
}

/// Credentials with the time they stop working, if they do.
#[derive(Clone, Debug)]
struct Temporary {
    credentials: AwsCredentials,
    expires: Option<Timestamp>,
}

/// Temporary credentials by source, so that a session does not run
/// `credential_process` or call STS on every model call. An entry is used
/// until [`Cache::REFRESH_BEFORE`] its expiry, like the SDKs' buffer, so a
/// request never leaves with credentials that die in flight.
struct Cache {
    entries: Mutex<BTreeMap<String, Temporary>>,
}

impl Cache {
    const REFRESH_BEFORE: SignedDuration = SignedDuration::from_mins(5);

    const fn new() -> Self {
        Self {
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    fn get(&self, key: &str, now: Timestamp) -> Option<AwsCredentials> {
        let entries = self.entries.lock();
        let entry = entries.get(key)?;
        let fresh = entry
            .expires
            .is_none_or(|expires| expires.duration_since(now) > Self::REFRESH_BEFORE);
        fresh.then(|| entry.credentials.clone())
    }

    fn put(&self, key: String, temporary: Temporary) {
        self.entries.lock().insert(key, temporary);
    }
}

/// One resolution of the chain: what it reads and talks to.
struct Chain<'a> {
    vars: &'a Vars,
    home: Option<&'a Path>,
    client: &'a reqwest::Client,
    cache: &'a Cache,
    endpoints: &'a Endpoints,
}

impl Chain<'_> {
    async fn resolve(&self) -> Result<AwsSettings, CredentialsError> {
        let explicit_profile = self.vars.profile();
        let profile = explicit_profile.unwrap_or("default").to_string();
        let files = files::Files::read(self.vars, self.home)?;
        let region = self.vars.region(&files);
        let settings = |credentials| AwsSettings {
            profile: profile.clone(),
            bearer_token: None,
            credentials,
            region: region.clone(),
        };

        if let Some(token) = self.vars.get("AWS_BEARER_TOKEN_BEDROCK") {
            return Ok(AwsSettings {
                bearer_token: Some(Secret::new(token)),
                ..settings(None)
            });
        }
        if let Some(credentials) = self.environment_keys()? {
            return Ok(settings(Some((credentials, Source::Environment))));
        }
        let sts_region = region.as_deref().unwrap_or("us-east-1");
        if let Some(found) = sts::web_identity_from_environment(self, sts_region).await? {
            return Ok(settings(Some(found)));
        }
        match files.profile(&profile) {
            None if explicit_profile.is_some() => {
                return Err(CredentialsError::ProfileNotFound {
                    profile,
                    credentials: files.credentials_path(),
                    config: files.config_path(),
                });
            }
            None => {}
            Some(_) => {
                if let Some(found) = profile::resolve(self, &files, &profile, sts_region).await? {
                    return Ok(settings(Some(found)));
                }
            }
        }
        if let Some(found) = metadata::container(self).await? {
            return Ok(settings(Some(found)));
        }
        if let Some(found) = metadata::instance(self).await? {
            return Ok(settings(Some(found)));
        }
        Ok(settings(None))
    }

    fn environment_keys(&self) -> Result<Option<AwsCredentials>, CredentialsError> {
        let var = |name| self.vars.get(name);
        match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret)) => Ok(Some(AwsCredentials {
                access_key_id: access_key_id.to_string(),
                secret_access_key: Secret::new(secret),
                session_token: var("AWS_SESSION_TOKEN").map(Secret::new),
            })),
            (Some(_), None) => Err(CredentialsError::PartialEnvironment {
                set: "AWS_ACCESS_KEY_ID",
                missing: "AWS_SECRET_ACCESS_KEY",
            }),
            (None, Some(_)) => Err(CredentialsError::PartialEnvironment {
                set: "AWS_SECRET_ACCESS_KEY",
                missing: "AWS_ACCESS_KEY_ID",
            }),
            (None, None) => Ok(None),
        }
    }

    /// The cached credentials under `key`, else those `fetch` gets, which
    /// are then cached. `fetch` is not polled on a hit.
    async fn cached<E>(
        &self,
        key: String,
        fetch: impl Future<Output = Result<Temporary, E>>,
    ) -> Result<AwsCredentials, E> {
        if let Some(credentials) = self.cache.get(&key, Timestamp::now()) {
            tracing::debug!(source = %key, "using cached AWS credentials");
            return Ok(credentials);
        }
        let temporary = fetch.await?;
        let credentials = temporary.credentials.clone();
        self.cache.put(key, temporary);
        Ok(credentials)
    }
}

/// The JSON shape shared by `credential_process` (PascalCase, `SessionToken`)
/// and the container and instance metadata endpoints (`Token`).
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct JsonCredentials {
    access_key_id: String,
    secret_access_key: Secret,
    #[serde(alias = "Token")]
    session_token: Option<Secret>,
    expiration: Option<String>,
}

impl JsonCredentials {
    fn parse(body: &str) -> Result<Temporary, String> {
        let parsed: JsonCredentials = serde_json::from_str(body)
            .map_err(|error| format!("the answer is not AWS credentials JSON ({error})"))?;
        parsed.into_temporary()
    }

    fn into_temporary(self) -> Result<Temporary, String> {
        let expires = self.expiration.as_deref().map(parse_time).transpose()?;
        Ok(Temporary {
            credentials: AwsCredentials {
                access_key_id: self.access_key_id,
                secret_access_key: self.secret_access_key,
                session_token: self.session_token.filter(|t| !t.expose().is_empty()),
            },
            expires,
        })
    }
}

/// An RFC 3339 time as AWS writes it (`2024-01-01T00:00:00Z`, also with
/// fractional seconds); the AWS CLI v1 wrote `…UTC` in the SSO cache.
fn parse_time(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    let normalized = match text.strip_suffix("UTC") {
        Some(rest) => format!("{rest}Z"),
        None => text.to_string(),
    };
    normalized
        .parse::<Timestamp>()
        .map_err(|_| format!("`{text}` is not a time"))
}

/// Sends `request` with `timeout`, and answers the status and body text,
/// or why nothing came back.
async fn send(
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<(u16, String), String> {
    let response = request.timeout(timeout).send().await.map_err(|error| {
        if error.is_timeout() {
            format!("no answer within {} s", timeout.as_secs_f32())
        } else {
            describe(&error)
        }
    })?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|error| describe(&error))?;
    Ok((status, body))
}

/// reqwest's message with its causes ("error sending request" alone says
/// nothing).
fn describe(error: &reqwest::Error) -> String {
    crate::llm::describe_reqwest_error(error)
}

/// At most `max` characters of an error body, for messages.
fn excerpt(body: &str, max: usize) -> String {
    let body = body.trim();
    match body.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None => body.to_string(),
    }
}

fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}
