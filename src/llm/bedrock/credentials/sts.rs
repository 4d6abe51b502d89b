//! AWS STS, for temporary credentials of a role: `AssumeRoleWithWebIdentity`
//! (an OIDC token from a file, unsigned) and `AssumeRole` (SigV4-signed with
//! the credentials before it in the profile's walk).
//!
//! Both are form-encoded POSTs to the regional endpoint
//! (`https://sts.{region}.amazonaws.com/`) that answer XML. Four fields of
//! one known document are all that is read, so a small extractor does it
//! rather than an XML crate.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use jiff::Timestamp;

use super::{
    AwsCredentials, Chain, CredentialsError, Source, Temporary, excerpt, expand_home, parse_time,
    send,
};
use crate::llm::Secret;
use crate::llm::bedrock::sigv4;

const VERSION: &str = "2011-06-15";
const FORM: &str = "application/x-www-form-urlencoded; charset=utf-8";
const TIMEOUT: Duration = Duration::from_secs(30);

/// A role to assume with the credentials before it.
pub(super) struct RoleStep {
    pub(super) profile: String,
    pub(super) role_arn: String,
    pub(super) session_name: Option<String>,
    pub(super) external_id: Option<String>,
    pub(super) duration_seconds: Option<String>,
}

impl RoleStep {
    pub(super) fn cache_key(&self) -> String {
        format!("assume-role\0{}\0{}", self.profile, self.role_arn)
    }
}

/// A role assumed with an OIDC token read from a file (which its issuer
/// rotates, so it is read again on every refresh).
pub(super) struct WebIdentity {
    pub(super) token_file: PathBuf,
    pub(super) role_arn: String,
    pub(super) session_name: Option<String>,
}

/// `AWS_WEB_IDENTITY_TOKEN_FILE` with `AWS_ROLE_ARN` (and the optional
/// `AWS_ROLE_SESSION_NAME`), as EKS and CI runners set them.
pub(super) async fn web_identity_from_environment(
    chain: &Chain<'_>,
    region: &str,
) -> Result<Option<(AwsCredentials, Source)>, CredentialsError> {
    let vars = chain.vars;
    let (token_file, role_arn) = match (
        vars.get("AWS_WEB_IDENTITY_TOKEN_FILE"),
        vars.get("AWS_ROLE_ARN"),
    ) {
        (Some(token_file), Some(role_arn)) => (token_file, role_arn),
        (Some(_), None) => {
            return Err(CredentialsError::PartialEnvironment {
                set: "AWS_WEB_IDENTITY_TOKEN_FILE",
                missing: "AWS_ROLE_ARN",
            });
        }
        // AWS_ROLE_ARN alone means nothing to the SDKs either.
        (None, _) => return Ok(None),
    };
    let web_identity = WebIdentity {
        token_file: expand_home(token_file, chain.home),
        role_arn: role_arn.to_string(),
        session_name: vars.get("AWS_ROLE_SESSION_NAME").map(str::to_string),
    };
    let credentials = web_identity_credentials(chain, &web_identity, region).await?;
    let source = Source::WebIdentity {
        role_arn: web_identity.role_arn,
    };
    Ok(Some((credentials, source)))
}

/// The credentials of a web identity role, cached.
pub(super) async fn web_identity_credentials(
    chain: &Chain<'_>,
    web_identity: &WebIdentity,
    region: &str,
) -> Result<AwsCredentials, CredentialsError> {
    let key = format!(
        "web-identity\0{}\0{}",
        web_identity.role_arn,
        web_identity.token_file.display()
    );
    chain
        .cached(
            key,
            assume_role_with_web_identity(chain, web_identity, region),
        )
        .await
}

async fn assume_role_with_web_identity(
    chain: &Chain<'_>,
    web_identity: &WebIdentity,
    region: &str,
) -> Result<Temporary, CredentialsError> {
    const OPERATION: &str = "AssumeRoleWithWebIdentity";
    let error = |message: String| CredentialsError::Sts {
        operation: OPERATION,
        role_arn: web_identity.role_arn.clone(),
        message,
        fix: "check the role ARN (AWS_ROLE_ARN or the profile's role_arn) and that the role \
              trusts the token's identity provider"
            .to_string(),
    };
    let token = std::fs::read_to_string(&web_identity.token_file).map_err(|e| {
        error(format!(
            "could not read the token file {}: {e}",
            web_identity.token_file.display()
        ))
    })?;
    let session_name = session_name(web_identity.session_name.as_deref());
    let body = form(&[
        ("Action", OPERATION),
        ("Version", VERSION),
        ("RoleArn", &web_identity.role_arn),
        ("RoleSessionName", &session_name),
        ("WebIdentityToken", token.trim()),
    ]);
    let url = endpoint(chain, region);
    let request = chain
        .client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, FORM)
        .body(body);
    let (status, body) = send(request, TIMEOUT)
        .await
        .map_err(|message| error(format!("could not reach {url}: {message}")))?;
    parse_response(status, &body).map_err(error)
}

/// `AssumeRole` of `step.role_arn`, signed with `source`.
pub(super) async fn assume_role(
    chain: &Chain<'_>,
    source: &AwsCredentials,
    step: &RoleStep,
    region: &str,
) -> Result<Temporary, CredentialsError> {
    const OPERATION: &str = "AssumeRole";
    let error = |message: String| CredentialsError::Sts {
        operation: OPERATION,
        role_arn: step.role_arn.clone(),
        message,
        fix: format!(
            "check the role_arn of AWS profile `{}` and that its source credentials (key {}) \
             may assume the role",
            step.profile, source.access_key_id
        ),
    };
    let session_name = session_name(step.session_name.as_deref());
    let mut params = vec![
        ("Action", OPERATION),
        ("Version", VERSION),
        ("RoleArn", step.role_arn.as_str()),
        ("RoleSessionName", session_name.as_str()),
    ];
    if let Some(external_id) = &step.external_id {
        params.push(("ExternalId", external_id));
    }
    if let Some(duration) = &step.duration_seconds {
        params.push(("DurationSeconds", duration));
    }
    let body = form(&params);

    let url = endpoint(chain, region);
    let parsed = url::Url::parse(&url)
        .map_err(|e| error(format!("the endpoint {url} is not a URL: {e}")))?;
    let host = sigv4::host(&parsed);
    let signer = sigv4::Signer {
        access_key_id: &source.access_key_id,
        secret_access_key: source.secret_access_key.expose(),
        session_token: source
            .session_token
            .as_ref()
            .map(Secret::expose)
            .filter(|token| !token.is_empty()),
        region,
        service: "sts",
    };
    let signed = signer.sign(
        &sigv4::Request {
            method: "POST",
            host: &host,
            path: parsed.path(),
            query: &[],
            headers: &[("content-type", FORM)],
            payload: body.as_bytes(),
        },
        SystemTime::now(),
    );
    let mut request = chain
        .client
        .post(&url)
        .header(reqwest::header::CONTENT_TYPE, FORM)
        .body(body);
    for (name, value) in signed.headers {
        let mut value = reqwest::header::HeaderValue::from_str(&value)
            .map_err(|_| error("the source credentials are not valid header text".to_string()))?;
        value.set_sensitive(true);
        request = request.header(name, value);
    }
    let (status, body) = send(request, TIMEOUT)
        .await
        .map_err(|message| error(format!("could not reach {url}: {message}")))?;
    parse_response(status, &body).map_err(error)
}

fn endpoint(chain: &Chain<'_>, region: &str) -> String {
    format!("{}/", chain.endpoints.sts(region).trim_end_matches('/'))
}

/// The session name AWS CloudTrail shows; the SDKs use a timestamped
/// default too.
fn session_name(configured: Option<&str>) -> String {
    configured
        .map(str::to_string)
        .unwrap_or_else(|| format!("pincer-{}", Timestamp::now().as_second()))
}

fn form(params: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish()
}

/// The credentials of a successful answer, or the error AWS gave
/// (`<Code>`: `<Message>`).
fn parse_response(status: u16, body: &str) -> Result<Temporary, String> {
    if !(200..300).contains(&status) {
        return Err(match (element(body, "Code"), element(body, "Message")) {
            (Some(code), Some(message)) => format!("HTTP {status}, {code}: {message}"),
            (Some(code), None) => format!("HTTP {status}, {code}"),
            _ => format!("HTTP {status}: {}", excerpt(body, 300)),
        });
    }
    let malformed = || format!("the answer has no credentials: {}", excerpt(body, 300));
    let credentials = element(body, "Credentials").ok_or_else(malformed)?;
    let field = |name| element(&credentials, name).ok_or_else(malformed);
    let expires = parse_time(&field("Expiration")?)?;
    Ok(Temporary {
        credentials: AwsCredentials {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: Secret::new(field("SecretAccessKey")?),
            session_token: Some(Secret::new(field("SessionToken")?)),
        },
        expires: Some(expires),
    })
}

/// The text of the first `<tag>…</tag>` (no attributes, as in STS's
/// answers), with XML's predefined entities decoded.
fn element(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    let text = xml[start..start + len].trim();
    Some(
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}
