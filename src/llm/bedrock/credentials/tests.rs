//! Tests of the credential chain. Each test has its own temporary home,
//! environment (a closure, never the process's), cache, and mock server on
//! 127.0.0.1 standing in for STS, the SSO portal, the container endpoint
//! and IMDS; nothing reaches the real `~/.aws` or the network.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
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
            .routes
            .entry((method.to_string(), path.to_string()))
            .or_default()
            .push_back((status, body.into()));
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().seen.clone()
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
    let mut state = state.lock();
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

mod chain;
mod files;
mod metadata;
mod process;
mod sso;
mod sts;
