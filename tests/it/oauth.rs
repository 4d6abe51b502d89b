//! End-to-end: `pincer login --oauth` against a local mock authorization
//! server (PKCE verified, state checked, loopback and pasted redirects),
//! and token refresh shared by two processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;
use support::acp_client::{Acp, Sandbox};
use support::mock_model::{MockModel, Reply};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const REFRESH_1: &str = "rt-first-refresh-token-0001";
const REFRESH_2: &str = "rt-second-refresh-token-0002";

#[derive(Default)]
struct AuthState {
    challenge: Option<String>,
    exchanges: Vec<Value>,
    refreshes: usize,
}

type Shared = Arc<Mutex<AuthState>>;

async fn token(State(state): State<Shared>, headers: HeaderMap, body: String) -> impl IntoResponse {
    // Anthropic-style JSON or standard form encoding.
    let fields: Value = if headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"))
    {
        serde_json::from_str(&body).unwrap()
    } else {
        let pairs: serde_json::Map<String, Value> = url::form_urlencoded::parse(body.as_bytes())
            .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
            .collect();
        Value::Object(pairs)
    };
    match fields["grant_type"].as_str() {
        Some("authorization_code") => {
            let verifier = fields["code_verifier"].as_str().unwrap_or_default();
            let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(sha2::Sha256::digest(verifier));
            let mut state = state.lock().unwrap();
            state.exchanges.push(fields.clone());
            if fields["code"] != "good-code" || state.challenge.as_deref() != Some(&challenge) {
                return (
                    StatusCode::BAD_REQUEST,
                    json!({"error": "invalid_grant"}).to_string(),
                );
            }
            (
                StatusCode::OK,
                json!({"access_token": "sk-ant-oat01-first", "refresh_token": REFRESH_1, "expires_in": 3600, "token_type": "Bearer",
                       "account": {"uuid": "0b5c2a9e-4f1d-4e2b-9a77-3c1d2e3f4a5b", "email_address": "ada@example.com"},
                       "organization": {"uuid": "7d8e9f00-1111-2222-3333-444455556666", "name": "Ada's org"}}).to_string(),
            )
        }
        Some("refresh_token") => {
            state.lock().unwrap().refreshes += 1;
            // Slow, so that a second process is waiting meanwhile.
            tokio::time::sleep(Duration::from_millis(400)).await;
            assert_eq!(fields["refresh_token"], REFRESH_1);
            (
                StatusCode::OK,
                json!({"access_token": "sk-ant-oat01-refreshed", "refresh_token": REFRESH_2, "expires_in": 3600}).to_string(),
            )
        }
        _ => (
            StatusCode::BAD_REQUEST,
            json!({"error": "unsupported_grant_type"}).to_string(),
        ),
    }
}

async fn start_auth_server() -> (String, Shared) {
    let state = Shared::default();
    let app = axum::Router::new()
        .route("/token", axum::routing::post(token))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

fn write_config(sandbox: &Sandbox, server: &str, redirect: &str) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[oauth.anthropic]\nauthorize_url = \"{server}/authorize\"\ntoken_url = \"{server}/token\"\nclient_id = \"test-client\"\nscopes = [\"user:inference\"]\nredirect_uri = \"{redirect}\"\ntoken_format = \"json\"\n"
        ),
    )
    .unwrap();
}

/// Starts `pincer login --oauth`, reads the authorization address it
/// prints, and records its challenge with the mock server.
async fn start_login(
    sandbox: &Sandbox,
    auth: &Shared,
) -> (
    tokio::process::Child,
    url::Url,
    tokio::task::JoinHandle<String>,
) {
    let mut child = sandbox
        .command(&["login", "--provider", "anthropic", "--oauth"])
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("pincer login printed no address");
        if line.starts_with("http") {
            break url::Url::parse(&line).unwrap();
        }
    };
    let pairs: std::collections::HashMap<String, String> = url.query_pairs().into_owned().collect();
    assert_eq!(pairs["code_challenge_method"], "S256");
    assert_eq!(pairs["client_id"], "test-client");
    auth.lock().unwrap().challenge = Some(pairs["code_challenge"].clone());
    // Keep reading stderr, so that pincer can still write to it.
    let rest = tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    (child, url, rest)
}

fn param(url: &url::Url, name: &str) -> String {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .unwrap()
}

fn profiles(sandbox: &Sandbox) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(sandbox.home().join("agents/main/auth-profiles.json")).unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn oauth_login_checks_pkce_and_state_by_paste_or_loopback() {
    let (server, auth) = start_auth_server().await;

    // Pasted redirect, with the provider's own redirect page.
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "https://example.invalid/callback");
    let (mut child, url, stderr) = start_login(&sandbox, &auth).await;
    assert_eq!(
        param(&url, "redirect_uri"),
        "https://example.invalid/callback"
    );
    let state = param(&url, "state");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            format!("https://example.invalid/callback?code=good-code&state={state}\n").as_bytes(),
        )
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", stderr.await.unwrap());
    let stored = profiles(&sandbox);
    let profile = &stored["profiles"]["anthropic:oauth"];
    assert_eq!(profile["type"], "oauth");
    assert_eq!(profile["access"], "sk-ant-oat01-first");
    assert_eq!(profile["refresh"], REFRESH_1);
    // Who logged in, from the token response; `auth list` shows it.
    assert_eq!(profile["account"], "ada@example.com");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or_default(),
        format!(
            "Saved anthropic:oauth for ada@example.com (token expires {}) in {}.",
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + Duration::from_millis(profile["expires"].as_u64().unwrap())
            ),
            sandbox
                .home()
                .join("agents/main/auth-profiles.json")
                .display()
        )
    );
    let list = sandbox
        .command(&["auth", "list", "--json"])
        .output()
        .await
        .unwrap();
    let row: Value = serde_json::from_str(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (&row["id"], &row["kind"], &row["account"], &row["state"]),
        (
            &json!("anthropic:oauth"),
            &json!("oauth"),
            &json!("ada@example.com"),
            &json!("ready")
        )
    );
    let in_an_hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3_600_000;
    assert!(profile["expires"].as_u64().unwrap().abs_diff(in_an_hour) < 60_000);
    // The exchange sent the verifier; the mock checked it against the
    // challenge (a wrong one gets invalid_grant).
    let exchange = auth.lock().unwrap().exchanges.last().unwrap().clone();
    assert_eq!(exchange["redirect_uri"], "https://example.invalid/callback");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sk-ant-oat01-first"));

    // A redirect with another state is refused, and nothing is stored.
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "https://example.invalid/callback");
    let (mut child, _, stderr) = start_login(&sandbox, &auth).await;
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"https://example.invalid/callback?code=good-code&state=forged\n")
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = stderr.await.unwrap();
    assert!(stderr.contains("state does not match"), "{stderr}");
    assert!(
        !sandbox
            .home()
            .join("agents/main/auth-profiles.json")
            .exists()
    );

    // Loopback: the browser comes back to pincer's own listener.
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (child, url, stderr) = start_login(&sandbox, &auth).await;
    let redirect = param(&url, "redirect_uri");
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");
    let state = param(&url, "state");
    let page = reqwest::get(format!("{redirect}?code=good-code&state={state}"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("logged in"), "{page}");
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", stderr.await.unwrap());
    assert_eq!(
        profiles(&sandbox)["profiles"]["anthropic:oauth"]["access"],
        "sk-ant-oat01-first"
    );
}

#[tokio::test]
async fn two_processes_with_an_expired_token_refresh_it_once() {
    let (server, auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let dir = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("auth-profiles.json"),
        json!({"version": 1, "profiles": {"anthropic:oauth": {
            "type": "oauth", "provider": "anthropic", "access": "sk-ant-oat01-old",
            "refresh": REFRESH_1, "expires": 1000, "account": "ada@example.com"}}})
        .to_string(),
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let spawn = || {
        let mut cmd = sandbox.command(&["acp"]);
        cmd.env("ANTHROPIC_BASE_URL", mock.anthropic_url())
            .env("RUST_LOG", "debug");
        Acp::spawn(cmd)
    };
    let (mut a, mut b) = (spawn(), spawn());
    a.initialize().await;
    b.initialize().await;
    let sa = a.new_session(&sandbox.work()).await;
    let sb = b.new_session(&sandbox.work()).await;
    let prompt = |s: &str| json!({"sessionId": s, "prompt": [{"type": "text", "text": "hi"}]});
    let ida = a.send("session/prompt", prompt(&sa)).await;
    let idb = b.send("session/prompt", prompt(&sb)).await;
    let (ra, seen_a) = a.until_response(ida).await;
    let (rb, seen_b) = b.until_response(idb).await;
    assert_eq!(ra["result"]["stopReason"], "end_turn", "{ra}");
    assert_eq!(rb["result"]["stopReason"], "end_turn", "{rb}");
    assert_eq!(auth.lock().unwrap().refreshes, 1);
    for request in mock.requests() {
        assert_eq!(
            request.header("authorization"),
            Some("Bearer sk-ant-oat01-refreshed")
        );
        assert_eq!(request.header("x-api-key"), None);
    }
    let stored = profiles(&sandbox);
    assert_eq!(stored["profiles"]["anthropic:oauth"]["refresh"], REFRESH_2);
    // The refresh did not name the account; the login's is kept.
    assert_eq!(
        stored["profiles"]["anthropic:oauth"]["account"],
        "ada@example.com"
    );
    // No token, old or new, access or refresh, in logs, on stdout or in
    // the transcripts.
    let mut transcripts = String::new();
    for dir in std::fs::read_dir(sandbox.home().join("sessions")).unwrap() {
        for file in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            transcripts.push_str(&std::fs::read_to_string(file.unwrap().path()).unwrap());
        }
    }
    let mut outputs = vec![transcripts];
    for (mut acp, seen) in [(a, seen_a), (b, seen_b)] {
        acp.close_stdin();
        acp.wait_exit().await;
        outputs.push(acp.stderr.await.unwrap());
        outputs.push(seen.iter().map(Value::to_string).collect());
    }
    for secret in [
        "sk-ant-oat01-old",
        "sk-ant-oat01-refreshed",
        REFRESH_1,
        REFRESH_2,
    ] {
        for output in &outputs {
            assert!(!output.contains(secret), "{secret} in:\n{output}");
        }
    }
}

#[tokio::test]
async fn a_silent_connection_to_the_login_listener_does_not_hold_up_the_redirect() {
    let (server, auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (child, url, stderr) = start_login(&sandbox, &auth).await;
    let redirect = param(&url, "redirect_uri");
    let port = url::Url::parse(&redirect).unwrap().port().unwrap();
    // Something on the machine connects first and never sends a byte.
    let _silent = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let state = param(&url, "state");
    let page = tokio::time::timeout(
        Duration::from_secs(20),
        reqwest::get(format!("{redirect}?code=good-code&state={state}")),
    )
    .await
    .expect("the redirect waited behind the silent connection")
    .unwrap()
    .text()
    .await
    .unwrap();
    assert!(page.contains("logged in"), "{page}");
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", stderr.await.unwrap());
    assert_eq!(
        profiles(&sandbox)["profiles"]["anthropic:oauth"]["access"],
        "sk-ant-oat01-first"
    );
}
