//! The last links of the chain, where the machine itself holds a role: the
//! ECS/EKS container credentials endpoint and the EC2 instance metadata
//! service (IMDSv2).
//!
//! The container endpoint is only asked when its variables are set. IMDS is
//! asked whenever nothing else was found, so on a machine that is not an
//! EC2 instance it must fail fast and quietly: each request has a one-second
//! limit, and an endpoint that does not answer, or answers like something
//! other than IMDS, means "no credentials here", not an error.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use jiff::Timestamp;

use super::{AwsCredentials, Chain, CredentialsError, JsonCredentials, Source, excerpt, send};

const CONTAINER_TIMEOUT: Duration = Duration::from_secs(5);
const IMDS_TIMEOUT: Duration = Duration::from_secs(1);
const IMDS_DEFAULT: &str = "http://169.254.169.254";
/// Six hours, the longest IMDS grants; one token serves the three requests.
const IMDS_TOKEN_TTL: &str = "21600";

/// Credentials of `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (relative to the
/// ECS agent) or `AWS_CONTAINER_CREDENTIALS_FULL_URI`, sent with
/// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`'s or
/// `AWS_CONTAINER_AUTHORIZATION_TOKEN`'s token; `None` when neither URI is
/// set.
pub(super) async fn container(
    chain: &Chain<'_>,
) -> Result<Option<(AwsCredentials, Source)>, CredentialsError> {
    let vars = chain.vars;
    let url = match (
        vars.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        vars.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
    ) {
        (Some(relative), _) => format!(
            "{}/{}",
            chain.endpoints.container().trim_end_matches('/'),
            relative.trim_start_matches('/')
        ),
        (None, Some(full)) => {
            check_full_uri(full).map_err(|message| CredentialsError::Container {
                url: full.to_string(),
                message,
            })?;
            full.to_string()
        }
        (None, None) => return Ok(None),
    };
    let error = |message: String| CredentialsError::Container {
        url: url.clone(),
        message,
    };
    let token = match (
        vars.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
        vars.get("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
    ) {
        (Some(file), _) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| {
                    error(format!(
                        "could not read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {file}: {e}"
                    ))
                })?
                .trim()
                .to_string(),
        ),
        (None, Some(token)) => Some(token.to_string()),
        (None, None) => None,
    };
    let fetch = async {
        let mut request = chain.client.get(&url);
        if let Some(token) = &token {
            let mut value = reqwest::header::HeaderValue::from_str(token)
                .map_err(|_| error("the authorization token is not valid header text".into()))?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let (status, body) = send(request, CONTAINER_TIMEOUT).await.map_err(&error)?;
        if !(200..300).contains(&status) {
            return Err(error(format!("HTTP {status}: {}", excerpt(&body, 300))));
        }
        JsonCredentials::parse(&body).map_err(&error)
    };
    let credentials = chain.cached(format!("container\0{url}"), fetch).await?;
    Ok(Some((credentials, Source::Container { url })))
}

/// Plain HTTP only to this host or to the ECS and EKS agents, as in the
/// SDKs: the token and the answer must not cross a network in the clear.
fn check_full_uri(full: &str) -> Result<(), String> {
    let url = url::Url::parse(full).map_err(|e| format!("not a URL ({e})"))?;
    if url.scheme() == "https" {
        return Ok(());
    }
    let allowed = match url.host() {
        Some(url::Host::Domain(domain)) => domain == "localhost",
        Some(url::Host::Ipv4(ip)) => {
            ip.is_loopback()
                || ip == Ipv4Addr::new(169, 254, 170, 2)
                || ip == Ipv4Addr::new(169, 254, 170, 23)
        }
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)
        }
        None => false,
    };
    if url.scheme() == "http" && allowed {
        Ok(())
    } else {
        Err(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback address or \
             the ECS/EKS agent"
                .to_string(),
        )
    }
}

/// The instance profile's credentials from IMDSv2 at
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT` (else `169.254.169.254`); `None` when
/// `AWS_EC2_METADATA_DISABLED=true`, when nothing answers, or when the
/// instance has no role.
pub(super) async fn instance(
    chain: &Chain<'_>,
) -> Result<Option<(AwsCredentials, Source)>, CredentialsError> {
    if chain
        .vars
        .get("AWS_EC2_METADATA_DISABLED")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return Ok(None);
    }
    let base = chain
        .vars
        .get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
        .unwrap_or(IMDS_DEFAULT)
        .trim_end_matches('/')
        .to_string();
    let key = format!("imds\0{base}");
    if let Some(credentials) = chain.cache.get(&key, Timestamp::now()) {
        return Ok(Some((credentials, Source::InstanceMetadata)));
    }
    let error = |message: String| CredentialsError::InstanceMetadata { message };

    let token_request = chain
        .client
        .put(format!("{base}/latest/api/token"))
        .header("x-aws-ec2-metadata-token-ttl-seconds", IMDS_TOKEN_TTL);
    let token = match send(token_request, IMDS_TIMEOUT).await {
        Ok((200, token)) => token.trim().to_string(),
        Ok((status, _)) => {
            tracing::debug!(status, %base, "no IMDSv2 token; not using instance metadata");
            return Ok(None);
        }
        Err(message) => {
            tracing::debug!(%message, %base, "instance metadata unreachable; not an EC2 instance");
            return Ok(None);
        }
    };
    let mut token = reqwest::header::HeaderValue::from_str(&token)
        .map_err(|_| error("the session token is not valid header text".to_string()))?;
    token.set_sensitive(true);
    let get = |path: &str| {
        chain
            .client
            .get(format!(
                "{base}/latest/meta-data/iam/security-credentials/{path}"
            ))
            .header("x-aws-ec2-metadata-token", token.clone())
    };

    let role = match send(get(""), IMDS_TIMEOUT).await.map_err(&error)? {
        (200, body) => body.lines().next().unwrap_or_default().trim().to_string(),
        (404, _) => {
            tracing::debug!("this EC2 instance has no instance profile");
            return Ok(None);
        }
        (status, body) => {
            return Err(error(format!(
                "listing the instance's role: HTTP {status}: {}",
                excerpt(&body, 300)
            )));
        }
    };
    if role.is_empty() {
        return Ok(None);
    }
    let (status, body) = send(get(&role), IMDS_TIMEOUT).await.map_err(&error)?;
    if status != 200 {
        return Err(error(format!(
            "credentials of role {role}: HTTP {status}: {}",
            excerpt(&body, 300)
        )));
    }
    let code: Option<String> = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("Code")?.as_str().map(str::to_string));
    if let Some(code) = code.filter(|code| code != "Success") {
        return Err(error(format!("credentials of role {role}: {code}")));
    }
    let temporary = JsonCredentials::parse(&body)
        .map_err(|message| error(format!("credentials of role {role}: {message}")))?;
    let credentials = temporary.credentials.clone();
    chain.cache.put(key, temporary);
    Ok(Some((credentials, Source::InstanceMetadata)))
}
