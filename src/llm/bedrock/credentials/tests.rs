//! Tests of the credential chain. Each test has its own temporary home,
//! environment (a closure, never the process's), cache, and mock server on
//! 127.0.0.1 standing in for STS, the SSO portal, the container endpoint
//! and IMDS; nothing reaches the real `~/.aws` or the network.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use pretty_assertions::assert_eq;

use super::*;
use crate::llm::bedrock::sigv4;

// ---------------------------------------------------------------- helpers

/// An environment of `pairs`, with IMDS off unless a test turns it back
/// on (an empty value is unset), so no test waits on 169.254.169.254.
fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let mut map: HashMap<String, String> =
        HashMap::from([("AWS_EC2_METADATA_DISABLED".to_string(), "true".to_string())]);
    map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    move |name| map.get(name).cloned()
}

fn home_with(credentials: Option<&str>, config: Option<&str>) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join(".aws")).unwrap();
    if let Some(text) = credentials {
        std::fs::write(home.path().join(".aws/credentials"), text).unwrap();
    }
    if let Some(text) = config {
        std::fs::write(home.path().join(".aws/config"), text).unwrap();
    }
    home
}

fn keys(id: &str, secret: &str, token: Option<&str>) -> AwsCredentials {
    AwsCredentials {
        access_key_id: id.to_string(),
        secret_access_key: Secret::new(secret),
        session_token: token.map(Secret::new),
    }
}

/// Runs the chain as `load` does, with the test's cache and endpoints.
async fn load_with(
    pairs: &[(&str, &str)],
    home: Option<&Path>,
    endpoints: &Endpoints,
    cache: &Cache,
) -> Result<AwsSettings, CredentialsError> {
    let vars = Vars::capture(&env(pairs));
    let client = reqwest::Client::new();
    Chain {
        vars: &vars,
        home,
        client: &client,
        cache,
        endpoints,
    }
    .resolve()
    .await
}

/// The chain with no mock endpoints and a fresh cache.
async fn load(
    pairs: &[(&str, &str)],
    home: Option<&Path>,
) -> Result<AwsSettings, CredentialsError> {
    load_with(pairs, home, &Endpoints::default(), &Cache::new()).await
}

fn in_an_hour() -> Timestamp {
    Timestamp::now() + SignedDuration::from_hours(1)
}

fn sts_fixture(name: &str, expiration: Timestamp) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/bedrock/sts")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .replace("{expiration}", &expiration.to_string())
}

/// A request the mock server saw.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn form(&self) -> Vec<(String, String)> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }
}

#[derive(Default)]
struct MockState {
    /// Replies by method and path; the last one of a queue repeats.
    routes: HashMap<(String, String), VecDeque<(u16, String)>>,
    seen: Vec<Seen>,
}

/// An HTTP server on 127.0.0.1 answering from a route table and recording
/// every request.
struct Mock {
    url: String,
    state: Arc<Mutex<MockState>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl Mock {
    async fn start() -> Self {
        let state = Arc::new(Mutex::new(MockState::default()));
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, state, server }
    }

    fn on(&self, method: &str, path: &str, status: u16, body: impl Into<String>) {
        self.state
            .lock()
            .unwrap()
            .routes
            .entry((method.to_string(), path.to_string()))
            .or_default()
            .push_back((status, body.into()));
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn requests(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|s| format!("{} {}", s.method, s.path))
            .collect()
    }
}

async fn answer(
    State(state): State<Arc<Mutex<MockState>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let mut state = state.lock().unwrap();
    state.seen.push(Seen {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let key = (method.to_string(), uri.path().to_string());
    let Some(queue) = state.routes.get_mut(&key) else {
        return (StatusCode::NOT_FOUND, format!("no route for {key:?}"));
    };
    let (status, body) = if queue.len() > 1 {
        queue.pop_front().unwrap()
    } else {
        queue.front().cloned().unwrap()
    };
    (StatusCode::from_u16(status).unwrap(), body)
}

/// Recomputes the SigV4 signature of `seen` with the given keys, over the
/// headers its Authorization says were signed, and compares.
fn assert_signed_by(seen: &Seen, access_key_id: &str, secret: &str, region: &str, service: &str) {
    let authorization = seen.header("authorization").expect("signed");
    let signed_headers = authorization
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .unwrap();
    let extra: Vec<(&str, &str)> = signed_headers
        .split(';')
        .filter(|name| !matches!(*name, "host" | "x-amz-date" | "x-amz-security-token"))
        .map(|name| (name, seen.header(name).unwrap()))
        .collect();
    let date = seen.header("x-amz-date").unwrap();
    let time: SystemTime = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", date)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp()
        .into();
    let signer = sigv4::Signer {
        access_key_id,
        secret_access_key: secret,
        session_token: seen.header("x-amz-security-token"),
        region,
        service,
    };
    let expected = signer.sign(
        &sigv4::Request {
            method: &seen.method,
            host: seen.header("host").unwrap(),
            path: &seen.path,
            query: &[],
            headers: &extra,
            payload: seen.body.as_bytes(),
        },
        time,
    );
    assert_eq!(
        Some(authorization),
        expected.headers.last().map(|(_, v)| v.as_str())
    );
}

// ------------------------------------------------- environment and files

const CREDENTIALS: &str = "\
# a comment
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = default-secret

[dev]
AWS_ACCESS_KEY_ID=AKIDDEV
aws_secret_access_key = dev-secret
aws_session_token = dev-token
";

const CONFIG: &str = "\
[default]
region = eu-west-1

[profile   dev]
region = us-west-2
s3 =
    max_concurrent_requests = 20

; keys may live in the config file too
[profile ops]
aws_access_key_id = AKIDOPS
aws_secret_access_key = ops-secret
region = ap-south-1

[profile lonely-role]
role_arn = arn:aws:iam::1:role/x

[profile loop-a]
role_arn = arn:aws:iam::1:role/a
source_profile = loop-b

[profile loop-b]
role_arn = arn:aws:iam::1:role/b
source_profile = loop-a

[profile half-sso]
sso_session = missing
";

#[tokio::test]
async fn environment_keys_come_first() {
    let home = home_with(Some(CREDENTIALS), Some(CONFIG));
    let settings = load(
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "env-secret"),
            ("AWS_SESSION_TOKEN", "env-token"),
            ("AWS_PROFILE", "dev"),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        settings,
        AwsSettings {
            profile: "dev".to_string(),
            bearer_token: None,
            credentials: Some((
                keys("AKIDENV", "env-secret", Some("env-token")),
                Source::Environment
            )),
            region: Some("us-west-2".to_string()),
        }
    );
    assert!(matches!(settings.auth(), Some(Auth::SigV4(c)) if c.access_key_id == "AKIDENV"));
}

#[tokio::test]
async fn the_bearer_token_wins_and_skips_credentials() {
    let home = home_with(
        None,
        Some("[profile sso]\nsso_session = x\nregion = us-east-2\n"),
    );
    let pairs = [
        ("AWS_BEARER_TOKEN_BEDROCK", "ABSK-key"),
        ("AWS_PROFILE", "sso"),
    ];
    let settings = load(&pairs, Some(home.path())).await.unwrap();
    assert_eq!(settings.credentials, None);
    assert_eq!(settings.region.as_deref(), Some("us-east-2"));
    assert!(matches!(settings.auth(), Some(Auth::Bearer(t)) if t.expose() == "ABSK-key"));
    assert_eq!(
        region(&env(&pairs), Some(home.path())),
        Ok(Some("us-east-2".to_string()))
    );
}

#[tokio::test]
async fn profiles_from_the_shared_files() {
    let home = home_with(Some(CREDENTIALS), Some(CONFIG));
    let path = |name: &str| home.path().join(".aws").join(name);
    let load_profile = async |profile: Option<&str>| {
        let pairs: Vec<(&str, &str)> = profile
            .map(|p| vec![("AWS_PROFILE", p)])
            .unwrap_or_default();
        load(&pairs, Some(home.path())).await
    };

    let default = load_profile(None).await.unwrap();
    assert_eq!(
        default.credentials,
        Some((
            keys("AKIDDEFAULT", "default-secret", None),
            Source::File {
                path: path("credentials"),
                profile: "default".to_string()
            }
        ))
    );
    assert_eq!(default.region.as_deref(), Some("eu-west-1"));

    let dev = load_profile(Some("dev")).await.unwrap();
    assert_eq!(
        dev.credentials.unwrap().0,
        keys("AKIDDEV", "dev-secret", Some("dev-token"))
    );
    assert_eq!(dev.region.as_deref(), Some("us-west-2"));

    let ops = load_profile(Some("ops")).await.unwrap();
    assert_eq!(
        ops.credentials,
        Some((
            keys("AKIDOPS", "ops-secret", None),
            Source::File {
                path: path("config"),
                profile: "ops".to_string()
            }
        ))
    );
    assert_eq!(ops.region.as_deref(), Some("ap-south-1"));

    assert_eq!(
        load_profile(Some("nope")).await,
        Err(CredentialsError::ProfileNotFound {
            profile: "nope".to_string(),
            credentials: path("credentials"),
            config: path("config"),
        })
    );
    let invalid = |profile: &str, problem: String| {
        Err(CredentialsError::InvalidProfile {
            profile: profile.to_string(),
            problem,
        })
    };
    assert_eq!(
        load_profile(Some("lonely-role")).await,
        invalid(
            "lonely-role",
            "it has role_arn but neither source_profile nor credential_source".to_string()
        )
    );
    assert_eq!(
        load_profile(Some("loop-a")).await,
        invalid(
            "loop-a",
            "source_profile links form a cycle: loop-a -> loop-b -> loop-a".to_string()
        )
    );
    assert_eq!(
        load_profile(Some("half-sso")).await,
        invalid(
            "half-sso",
            format!(
                "its sso_session `missing` has no [sso-session missing] section in {}",
                path("config").display()
            )
        )
    );
}

#[tokio::test]
async fn region_order() {
    let home = home_with(None, Some(CONFIG));
    let region_of = async |pairs: &[(&str, &str)]| {
        load(pairs, Some(home.path()))
            .await
            .unwrap()
            .region
            .unwrap_or_default()
    };
    assert_eq!(
        region_of(&[("AWS_REGION", "r1"), ("AWS_DEFAULT_REGION", "r2")]).await,
        "r1"
    );
    assert_eq!(
        region_of(&[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "r2")]).await,
        "r2"
    );
    assert_eq!(region_of(&[("AWS_PROFILE", "dev")]).await, "us-west-2");
    assert_eq!(region_of(&[]).await, "eu-west-1");
    assert_eq!(
        region(&env(&[("AWS_PROFILE", "ops")]), Some(home.path())),
        Ok(Some("ap-south-1".to_string()))
    );
}

#[tokio::test]
async fn file_locations_can_be_moved() {
    let home = home_with(None, None);
    std::fs::write(home.path().join("creds.ini"), CREDENTIALS).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let config = elsewhere.path().join("cfg");
    std::fs::write(&config, "[profile dev]\nregion = ca-central-1\n").unwrap();
    let settings = load(
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", "~/creds.ini"),
            ("AWS_CONFIG_FILE", config.to_str().unwrap()),
            ("AWS_PROFILE", "dev"),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials.unwrap().1,
        Source::File {
            path: home.path().join("creds.ini"),
            profile: "dev".to_string()
        }
    );
    assert_eq!(settings.region.as_deref(), Some("ca-central-1"));
}

#[tokio::test]
async fn nothing_found_is_not_an_error_but_half_a_pair_is() {
    let home = home_with(None, None);
    assert_eq!(
        load(&[], Some(home.path())).await.unwrap(),
        AwsSettings {
            profile: "default".to_string(),
            bearer_token: None,
            credentials: None,
            region: None,
        }
    );
    assert_eq!(load(&[], None).await.unwrap().auth(), None);
    assert_eq!(
        load(&[("AWS_ACCESS_KEY_ID", "AKID")], None).await,
        Err(CredentialsError::PartialEnvironment {
            set: "AWS_ACCESS_KEY_ID",
            missing: "AWS_SECRET_ACCESS_KEY"
        })
    );
    assert_eq!(
        load(&[("AWS_WEB_IDENTITY_TOKEN_FILE", "/token")], None).await,
        Err(CredentialsError::PartialEnvironment {
            set: "AWS_WEB_IDENTITY_TOKEN_FILE",
            missing: "AWS_ROLE_ARN"
        })
    );
    let half = home_with(Some("[default]\naws_access_key_id = AKID\n"), None);
    assert!(matches!(
        load(&[], Some(half.path())).await,
        Err(CredentialsError::IncompleteProfile { .. })
    ));
}

#[tokio::test]
async fn an_unreadable_file_is_an_error_naming_it() {
    let home = home_with(None, None);
    // A directory where the file should be cannot be read as text.
    std::fs::create_dir(home.path().join(".aws/credentials")).unwrap();
    let Err(CredentialsError::Unreadable { path, .. }) = load(&[], Some(home.path())).await else {
        panic!("a directory is not a credentials file");
    };
    assert_eq!(path, home.path().join(".aws/credentials"));
}

#[tokio::test]
async fn debug_output_has_no_secrets() {
    let home = home_with(Some(CREDENTIALS), None);
    let settings = load(
        &[
            ("AWS_PROFILE", "dev"),
            ("AWS_BEARER_TOKEN_BEDROCK", "bearer-secret"),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    let with_keys = load(&[("AWS_PROFILE", "dev")], Some(home.path()))
        .await
        .unwrap();
    let printed = format!("{settings:?} {with_keys:?} {:#?}", with_keys.auth());
    for secret in ["bearer-secret", "dev-secret", "dev-token"] {
        assert!(!printed.contains(secret), "{secret} leaked: {printed}");
    }
    assert!(printed.contains("AKIDDEV"), "{printed}");
}

// ---------------------------------------------------- credential_process

/// An executable script in `dir` that prints `stdout`, fails with `exit`
/// when not 0, and appends a line to `runs` each time it runs.
#[cfg(unix)]
fn script(dir: &Path, name: &str, stdout: &str, exit: i32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let runs = dir.join(format!("{name}.runs"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho run >> '{}'\ncat <<'JSON'\n{stdout}\nJSON\necho 'to stderr' >&2\nexit {exit}\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[cfg(unix)]
fn runs(dir: &Path, name: &str) -> usize {
    std::fs::read_to_string(dir.join(format!("{name}.runs")))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[cfg(unix)]
#[tokio::test]
async fn credential_process_output_becomes_the_credentials_and_is_cached() {
    let home = home_with(None, None);
    let output = serde_json::json!({
        "Version": 1,
        "AccessKeyId": "AKIDPROCESS",
        "SecretAccessKey": "process-secret",
        "SessionToken": "process-token",
        "Expiration": in_an_hour().to_string(),
    });
    let command = script(home.path(), "creds.sh", &output.to_string(), 0);
    std::fs::write(
        home.path().join(".aws/config"),
        format!(
            "[profile tool]\ncredential_process = {} --profile x\n",
            command.display()
        ),
    )
    .unwrap();
    let cache = Cache::new();
    let pairs = [("AWS_PROFILE", "tool")];
    for _ in 0..2 {
        let settings = load_with(&pairs, Some(home.path()), &Endpoints::default(), &cache)
            .await
            .unwrap();
        assert_eq!(
            settings.credentials,
            Some((
                keys("AKIDPROCESS", "process-secret", Some("process-token")),
                Source::Process {
                    profile: "tool".to_string()
                }
            ))
        );
    }
    assert_eq!(
        runs(home.path(), "creds.sh"),
        1,
        "the second load is cached"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn credential_process_failures_name_the_profile() {
    let home = home_with(None, None);
    let failing = script(home.path(), "fail.sh", "", 3);
    let wrong_version = script(home.path(), "v2.sh", r#"{"Version": 2}"#, 0);
    std::fs::write(
        home.path().join(".aws/config"),
        format!(
            "[profile failing]\ncredential_process = {}\n[profile v2]\ncredential_process = {}\n",
            failing.display(),
            wrong_version.display()
        ),
    )
    .unwrap();
    let error = load(&[("AWS_PROFILE", "failing")], Some(home.path()))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        CredentialsError::Process {
            profile: "failing".to_string(),
            message: format!(
                "`{}` exited with exit status: 3: to stderr",
                failing.display()
            ),
        }
    );
    assert_eq!(
        load(&[("AWS_PROFILE", "v2")], Some(home.path()))
            .await
            .unwrap_err(),
        CredentialsError::Process {
            profile: "v2".to_string(),
            message: format!(
                "`{}` printed Version 2; only Version 1 is defined",
                wrong_version.display()
            ),
        }
    );
}

// ------------------------------------------------------------------ SSO

const SSO_CONFIG: &str = "\
[profile sso]
sso_session = corp
sso_account_id = 111122223333
sso_role_name = Developer
region = eu-central-1

[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1

[profile legacy]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1
sso_account_id = 444455556666
sso_role_name = ReadOnly
";

/// `sha1("corp")` and `sha1("https://corp.awsapps.com/start")`, as the
/// AWS CLI names its cache files.
const SESSION_CACHE_FILE: &str = "ee0bfd2552fbd840c02cc48b6e823320543c450f.json";
const LEGACY_CACHE_FILE: &str = "a51746d4aa793ae07b25e90c3a5db96fc7832bd7.json";

fn cache_sso_token(home: &Path, file: &str, token: &str, expires_at: &str) {
    let dir = home.join(".aws/sso/cache");
    std::fs::create_dir_all(&dir).unwrap();
    let json = serde_json::json!({
        "startUrl": "https://corp.awsapps.com/start",
        "region": "eu-west-1",
        "accessToken": token,
        "expiresAt": expires_at,
    });
    std::fs::write(dir.join(file), json.to_string()).unwrap();
}

fn portal_answer(id: &str) -> String {
    serde_json::json!({"roleCredentials": {
        "accessKeyId": id,
        "secretAccessKey": "sso-secret",
        "sessionToken": "sso-token",
        "expiration": in_an_hour().as_millisecond(),
    }})
    .to_string()
}

#[tokio::test]
async fn sso_tokens_are_exchanged_at_the_portal() {
    let home = home_with(None, Some(SSO_CONFIG));
    let expires_at = in_an_hour().to_string();
    cache_sso_token(
        home.path(),
        SESSION_CACHE_FILE,
        "session-token",
        &expires_at,
    );
    // The AWS CLI v1 wrote `UTC` rather than `Z`.
    let legacy_expiry = in_an_hour().strftime("%Y-%m-%dT%H:%M:%SUTC").to_string();
    cache_sso_token(
        home.path(),
        LEGACY_CACHE_FILE,
        "legacy-token",
        &legacy_expiry,
    );
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/federation/credentials",
        200,
        portal_answer("ASIASSO"),
    );
    let endpoints = Endpoints {
        sso_portal: Some(mock.url.clone()),
        ..Endpoints::default()
    };

    for profile in ["sso", "legacy"] {
        let settings = load_with(
            &[("AWS_PROFILE", profile)],
            Some(home.path()),
            &endpoints,
            &Cache::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            settings.credentials,
            Some((
                keys("ASIASSO", "sso-secret", Some("sso-token")),
                Source::Sso {
                    profile: profile.to_string()
                }
            ))
        );
    }
    let seen = mock.seen();
    let calls: Vec<(&str, Option<&str>)> = seen
        .iter()
        .map(|s| (s.query.as_str(), s.header("x-amz-sso_bearer_token")))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "role_name=Developer&account_id=111122223333",
                Some("session-token")
            ),
            (
                "role_name=ReadOnly&account_id=444455556666",
                Some("legacy-token")
            ),
        ]
    );
}

#[tokio::test]
async fn an_expired_or_missing_sso_login_asks_for_aws_sso_login() {
    let home = home_with(None, Some(SSO_CONFIG));
    cache_sso_token(
        home.path(),
        SESSION_CACHE_FILE,
        "old-token",
        "2020-01-01T00:00:00Z",
    );
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/federation/credentials",
        200,
        portal_answer("ASIASSO"),
    );
    let endpoints = Endpoints {
        sso_portal: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let load_profile = async |profile| {
        load_with(
            &[("AWS_PROFILE", profile)],
            Some(home.path()),
            &endpoints,
            &Cache::new(),
        )
        .await
        .unwrap_err()
    };

    let expired = load_profile("sso").await;
    assert_eq!(
        expired,
        CredentialsError::SsoLogin {
            profile: "sso".to_string(),
            problem: "expired at 2020-01-01T00:00:00Z".to_string(),
        }
    );
    assert_eq!(
        expired.to_string(),
        "the IAM Identity Center (SSO) login of AWS profile `sso` expired at \
         2020-01-01T00:00:00Z; run `aws sso login --profile sso`"
    );
    assert_eq!(
        load_profile("legacy").await,
        CredentialsError::SsoLogin {
            profile: "legacy".to_string(),
            problem: format!(
                "has no cached token ({})",
                home.path()
                    .join(".aws/sso/cache")
                    .join(LEGACY_CACHE_FILE)
                    .display()
            ),
        }
    );
    assert_eq!(mock.requests(), Vec::<String>::new());

    // A token the portal no longer accepts needs a new login too.
    cache_sso_token(
        home.path(),
        SESSION_CACHE_FILE,
        "revoked",
        &in_an_hour().to_string(),
    );
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/federation/credentials",
        401,
        r#"{"message":"Session token not found or invalid"}"#,
    );
    let endpoints = Endpoints {
        sso_portal: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    assert_eq!(
        load_with(
            &[("AWS_PROFILE", "sso")],
            Some(home.path()),
            &endpoints,
            &Cache::new()
        )
        .await,
        Err(CredentialsError::SsoLogin {
            profile: "sso".to_string(),
            problem: "was rejected by the SSO portal".to_string(),
        })
    );
}

// ------------------------------------------------------------------ STS

#[tokio::test]
async fn assume_role_is_signed_with_the_source_profile_and_cached() {
    let home = home_with(
        Some("[base]\naws_access_key_id = AKIDBASE\naws_secret_access_key = base/secret\n"),
        Some(
            "[profile assume]\nrole_arn = arn:aws:iam::123456789012:role/dev\n\
             source_profile = base\nrole_session_name = pincer-test\nexternal_id = ext-1\n\
             region = eu-west-1\n",
        ),
    );
    let mock = Mock::start().await;
    mock.on(
        "POST",
        "/",
        200,
        sts_fixture("assume_role.xml", in_an_hour()),
    );
    let endpoints = Endpoints {
        sts: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let cache = Cache::new();
    for _ in 0..2 {
        let settings = load_with(
            &[("AWS_PROFILE", "assume")],
            Some(home.path()),
            &endpoints,
            &cache,
        )
        .await
        .unwrap();
        assert_eq!(
            settings.credentials,
            Some((
                keys(
                    "ASIAROLEEXAMPLE",
                    "role/secret+EXAMPLE",
                    Some("FwoGZXIvYXdzEROLE&TOKEN")
                ),
                Source::AssumeRole {
                    profile: "assume".to_string(),
                    role_arn: "arn:aws:iam::123456789012:role/dev".to_string(),
                }
            ))
        );
    }
    let seen = mock.seen();
    assert_eq!(seen.len(), 1, "the second load is cached");
    let request = &seen[0];
    assert_eq!(
        request.form(),
        [
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::123456789012:role/dev"),
            ("RoleSessionName", "pincer-test"),
            ("ExternalId", "ext-1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert!(
        request
            .header("authorization")
            .unwrap()
            .contains("Credential=AKIDBASE/"),
        "{request:?}"
    );
    assert_signed_by(request, "AKIDBASE", "base/secret", "eu-west-1", "sts");
}

#[tokio::test]
async fn web_identity_from_the_environment() {
    let home = home_with(None, None);
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "oidc.jwt.token\n").unwrap();
    let mock = Mock::start().await;
    mock.on(
        "POST",
        "/",
        200,
        sts_fixture("web_identity.xml", in_an_hour()),
    );
    let endpoints = Endpoints {
        sts: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let settings = load_with(
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/eks-pod"),
            ("AWS_ROLE_SESSION_NAME", "ci"),
            ("AWS_REGION", "us-west-2"),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials,
        Some((
            keys(
                "ASIAWEBIDEXAMPLE",
                "web/identity+secret",
                Some("IQoJb3JpZ2luX2VjEWEBIDENTITY")
            ),
            Source::WebIdentity {
                role_arn: "arn:aws:iam::123456789012:role/eks-pod".to_string()
            }
        ))
    );
    let seen = mock.seen();
    assert_eq!(
        seen[0].form(),
        [
            ("Action", "AssumeRoleWithWebIdentity"),
            ("Version", "2011-06-15"),
            ("RoleArn", "arn:aws:iam::123456789012:role/eks-pod"),
            ("RoleSessionName", "ci"),
            ("WebIdentityToken", "oidc.jwt.token"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    );
    assert_eq!(seen[0].header("authorization"), None, "unsigned");
}

#[tokio::test]
async fn sts_errors_name_the_operation_and_the_role() {
    let home = home_with(None, None);
    let token_file = home.path().join("token");
    std::fs::write(&token_file, "oidc.jwt.token").unwrap();
    let mock = Mock::start().await;
    mock.on(
        "POST",
        "/",
        403,
        sts_fixture("access_denied.xml", in_an_hour()),
    );
    let endpoints = Endpoints {
        sts: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let error = load_with(
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "STS AssumeRoleWithWebIdentity for arn:aws:iam::1:role/r failed: HTTP 403, AccessDenied: \
         Not authorized to perform sts:AssumeRoleWithWebIdentity; check the role ARN \
         (AWS_ROLE_ARN or the profile's role_arn) and that the role trusts the token's identity \
         provider"
    );
}

// ------------------------------------------------- container and IMDS

fn metadata_answer(id: &str, expiration: Timestamp) -> String {
    serde_json::json!({
        "Code": "Success",
        "Type": "AWS-HMAC",
        "AccessKeyId": id,
        "SecretAccessKey": "machine-secret",
        "Token": "machine-token",
        "Expiration": expiration.to_string(),
    })
    .to_string()
}

#[tokio::test]
async fn container_credentials_with_an_authorization_token() {
    let home = home_with(None, None);
    let token_file = home.path().join("eks-token");
    std::fs::write(&token_file, "token-from-file\n").unwrap();
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/full",
        200,
        metadata_answer("ASIAFULL", in_an_hour()),
    );
    mock.on(
        "GET",
        "/v2/credentials/abc",
        200,
        metadata_answer("ASIAECS", in_an_hour()),
    );
    let endpoints = Endpoints {
        container: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let full = format!("{}/full", mock.url);

    let settings = load_with(
        &[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &full),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                token_file.to_str().unwrap(),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                "ignored-beside-the-file",
            ),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials,
        Some((
            keys("ASIAFULL", "machine-secret", Some("machine-token")),
            Source::Container { url: full.clone() }
        ))
    );
    let settings = load_with(
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/abc",
            ),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "token-from-env"),
        ],
        Some(home.path()),
        &endpoints,
        &Cache::new(),
    )
    .await
    .unwrap();
    assert_eq!(settings.credentials.unwrap().0.access_key_id, "ASIAECS");
    let authorizations: Vec<Option<String>> = mock
        .seen()
        .iter()
        .map(|s| s.header("authorization").map(str::to_string))
        .collect();
    assert_eq!(
        authorizations,
        [
            Some("token-from-file".to_string()),
            Some("token-from-env".to_string())
        ]
    );

    // Plain HTTP to another host would send the token in the clear.
    assert_eq!(
        load(
            &[(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://10.0.0.1/creds"
            )],
            Some(home.path())
        )
        .await,
        Err(CredentialsError::Container {
            url: "http://10.0.0.1/creds".to_string(),
            message: "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback \
                      address or the ECS/EKS agent"
                .to_string(),
        })
    );
}

async fn imds_mock() -> Mock {
    let mock = Mock::start().await;
    mock.on("PUT", "/latest/api/token", 200, "imds-session-token");
    mock.on(
        "GET",
        "/latest/meta-data/iam/security-credentials/",
        200,
        "web-server-role\n",
    );
    mock.on(
        "GET",
        "/latest/meta-data/iam/security-credentials/web-server-role",
        200,
        metadata_answer("ASIAIMDS", in_an_hour()),
    );
    mock
}

#[tokio::test]
async fn imds_v2_takes_a_token_then_the_role_then_its_credentials() {
    let home = home_with(None, None);
    let mock = imds_mock().await;
    let settings = load(
        &[
            ("AWS_EC2_METADATA_DISABLED", ""),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &mock.url),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials,
        Some((
            keys("ASIAIMDS", "machine-secret", Some("machine-token")),
            Source::InstanceMetadata
        ))
    );
    let seen = mock.seen();
    let calls: Vec<(String, Option<&str>, Option<&str>)> = seen
        .iter()
        .map(|s| {
            (
                format!("{} {}", s.method, s.path),
                s.header("x-aws-ec2-metadata-token-ttl-seconds"),
                s.header("x-aws-ec2-metadata-token"),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("PUT /latest/api/token".to_string(), Some("21600"), None),
            (
                "GET /latest/meta-data/iam/security-credentials/".to_string(),
                None,
                Some("imds-session-token")
            ),
            (
                "GET /latest/meta-data/iam/security-credentials/web-server-role".to_string(),
                None,
                Some("imds-session-token")
            ),
        ]
    );
}

#[tokio::test]
async fn imds_can_be_disabled_and_an_absent_one_is_not_an_error() {
    let home = home_with(None, None);
    let mock = imds_mock().await;
    let settings = load(
        &[
            ("AWS_EC2_METADATA_DISABLED", "TRUE"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &mock.url),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(settings.credentials, None);
    assert_eq!(mock.requests(), Vec::<String>::new());

    // Nothing listening: not an EC2 instance, so no credentials here.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let settings = load(
        &[
            ("AWS_EC2_METADATA_DISABLED", ""),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", &closed),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(settings.credentials, None);
}

// ------------------------------------------------------- order and cache

#[tokio::test]
async fn the_profile_beats_the_container_and_the_container_beats_imds() {
    let home = home_with(Some(CREDENTIALS), None);
    let mock = imds_mock().await;
    mock.on(
        "GET",
        "/container",
        200,
        metadata_answer("ASIACONTAINER", in_an_hour()),
    );
    let container = format!("{}/container", mock.url);
    let machine = [
        ("AWS_EC2_METADATA_DISABLED", ""),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", mock.url.as_str()),
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", container.as_str()),
    ];

    let settings = load(&machine, Some(home.path())).await.unwrap();
    assert_eq!(settings.credentials.unwrap().0.access_key_id, "AKIDDEFAULT");
    assert_eq!(mock.requests(), Vec::<String>::new());

    let no_profile = home_with(None, None);
    let settings = load(&machine, Some(no_profile.path())).await.unwrap();
    assert_eq!(
        settings.credentials.unwrap().0.access_key_id,
        "ASIACONTAINER"
    );
    assert_eq!(mock.requests(), ["GET /container"]);

    let settings = load(&machine[..2], Some(no_profile.path())).await.unwrap();
    assert_eq!(settings.credentials.unwrap().0.access_key_id, "ASIAIMDS");
}

#[tokio::test]
async fn cached_credentials_are_refreshed_five_minutes_before_they_expire() {
    let home = home_with(None, None);
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/lasting",
        200,
        metadata_answer("ASIALASTING", in_an_hour()),
    );
    let soon = Timestamp::now() + SignedDuration::from_mins(4);
    mock.on(
        "GET",
        "/expiring",
        200,
        metadata_answer("ASIAEXPIRING", soon),
    );
    let cache = Cache::new();
    let load_from = async |path: &str| {
        let url = format!("{}{path}", mock.url);
        load_with(
            &[("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url)],
            Some(home.path()),
            &Endpoints::default(),
            &cache,
        )
        .await
        .unwrap()
        .credentials
        .unwrap()
        .0
        .access_key_id
    };

    assert_eq!(load_from("/lasting").await, "ASIALASTING");
    assert_eq!(load_from("/lasting").await, "ASIALASTING");
    assert_eq!(mock.requests(), ["GET /lasting"], "cached within validity");

    assert_eq!(load_from("/expiring").await, "ASIAEXPIRING");
    assert_eq!(load_from("/expiring").await, "ASIAEXPIRING");
    assert_eq!(
        mock.requests(),
        ["GET /lasting", "GET /expiring", "GET /expiring"],
        "less than five minutes left: fetched again"
    );
}
