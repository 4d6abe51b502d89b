//! End-to-end: the `anthropic-oauth` agent auth method, for editors that
//! cannot open a terminal. `authenticate` opens the browser itself (here
//! `BROWSER` is a script standing in for the user's browser), takes the
//! redirect on a loopback listener, exchanges the code with PKCE against a
//! mock authorization server configured as `[oauth.anthropic]`, and stores
//! the tokens as `pincer login --oauth` does. Also: a forged state, a login
//! nobody finishes, junk on the callback port, two logins at once, and no
//! browser at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sha2::Digest;
use support::acp_client::{Acp, Sandbox, TIMEOUT};
use support::mock_model::{MockModel, Reply};
use support::wait_until;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The mock authorization server's record of what it was asked.
#[derive(Default)]
struct AuthServer {
    /// Redirect with a state of its own instead of the one it was given.
    forge_state: bool,
    /// Per issued code: the challenge and redirect address it was issued for.
    codes: HashMap<String, (String, String)>,
    authorizations: usize,
    /// Every token request's fields.
    exchanges: Vec<Value>,
}

type Shared = Arc<Mutex<AuthServer>>;

async fn authorize(
    State(state): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut server = state.lock().unwrap();
    server.authorizations += 1;
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["client_id"], "test-client");
    assert_eq!(q["code_challenge_method"], "S256");
    let code = format!("code-{}", server.authorizations);
    server.codes.insert(
        code.clone(),
        (q["code_challenge"].clone(), q["redirect_uri"].clone()),
    );
    let returned_state = if server.forge_state {
        "forged-by-someone-else".to_string()
    } else {
        q["state"].clone()
    };
    let mut location = url::Url::parse(&q["redirect_uri"]).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &returned_state);
    (
        StatusCode::FOUND,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

async fn token(State(state): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let fields: Value = if headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("application/json"))
    {
        serde_json::from_str(&body).unwrap()
    } else {
        Value::Object(
            url::form_urlencoded::parse(body.as_bytes())
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect(),
        )
    };
    let mut server = state.lock().unwrap();
    server.exchanges.push(fields.clone());
    let n = server.exchanges.len();
    let verifier = fields["code_verifier"].as_str().unwrap_or_default();
    let challenge =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier));
    let issued = fields["code"]
        .as_str()
        .and_then(|code| server.codes.get(code));
    let good = fields["grant_type"] == "authorization_code"
        && fields["client_id"] == "test-client"
        && issued.is_some_and(|(c, redirect)| {
            *c == challenge && fields["redirect_uri"].as_str() == Some(redirect)
        });
    if !good {
        return (
            StatusCode::BAD_REQUEST,
            json!({"error": "invalid_grant"}).to_string(),
        )
            .into_response();
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"access_token": format!("sk-ant-oat01-agent-{n}"), "refresh_token": format!("rt-agent-{n}"),
               "expires_in": 3600, "token_type": "Bearer",
               "account": {"uuid": "0b5c2a9e-4f1d-4e2b-9a77-3c1d2e3f4a5b", "email_address": "ada@example.com"}})
        .to_string(),
    )
        .into_response()
}

async fn start_auth_server() -> (String, Shared) {
    let state = Shared::default();
    let app = axum::Router::new()
        .route("/authorize", axum::routing::get(authorize))
        .route("/token", axum::routing::post(token))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

/// The user's config: Anthropic's OAuth at the mock server, redirecting to
/// pincer's loopback listener (`redirect_uri` empty).
fn write_config(sandbox: &Sandbox, server: &str, redirect: &str) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[oauth.anthropic]\nauthorize_url = \"{server}/authorize\"\ntoken_url = \"{server}/token\"\nclient_id = \"test-client\"\nscopes = [\"user:inference\"]\nredirect_uri = \"{redirect}\"\n"
        ),
    )
    .unwrap();
}

/// A `BROWSER` script: acts as the user's browser (follows the redirects
/// and keeps the last page), and writes noise to stdout and stderr, which
/// must not reach pincer's protocol stream.
fn curl_browser(sandbox: &Sandbox) -> (PathBuf, PathBuf) {
    support::ensure_tool("curl", "curl");
    let page = sandbox.dir.path().join("browser-page.html");
    let script = write_script(
        sandbox,
        "browser",
        &format!(
            "#!/bin/sh\necho BROWSER-NOISE-ON-STDOUT\necho browser-noise-on-stderr >&2\nexec curl -sS -L --max-time 30 -o '{}' \"$1\"\n",
            page.display()
        ),
    );
    (script, page)
}

/// A `BROWSER` script that only writes down the address it was given: the
/// test then plays the user (or an attacker) itself.
fn recording_browser(sandbox: &Sandbox) -> (PathBuf, PathBuf) {
    let urls = sandbox.dir.path().join("browser-urls");
    let script = write_script(
        sandbox,
        "recording-browser",
        &format!("#!/bin/sh\necho \"$1\" >> '{}'\n", urls.display()),
    );
    (script, urls)
}

fn write_script(sandbox: &Sandbox, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sandbox.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn spawn(sandbox: &Sandbox, env: &[(&str, &str)]) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Acp::spawn(cmd)
}

fn profiles_path(sandbox: &Sandbox) -> PathBuf {
    sandbox.home().join("agents/main/auth-profiles.json")
}

fn profiles(sandbox: &Sandbox) -> Value {
    serde_json::from_str(&std::fs::read_to_string(profiles_path(sandbox)).unwrap()).unwrap()
}

/// The page the curl browser ended on, once it has written it (the answer
/// to `authenticate` may overtake curl's write).
async fn browser_page(path: &Path) -> String {
    wait_until("the browser showed its last page", TIMEOUT, || {
        std::fs::read_to_string(path).is_ok_and(|page| page.contains("</html>"))
    })
    .await;
    std::fs::read_to_string(path).unwrap()
}

fn recorded_urls(path: &Path) -> Vec<url::Url> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| url::Url::parse(line).unwrap())
        .collect()
}

fn param(url: &url::Url, name: &str) -> String {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .unwrap()
}

/// What the browser gets from the address: the final page after the
/// redirects, as a browser would show it.
async fn browse(url: &url::Url) -> (u16, String) {
    let response = reqwest::get(url.as_str()).await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// The error of an `authenticate` that failed.
async fn authenticate_error(acp: &mut Acp, method: &str) -> Value {
    let id = acp.send("authenticate", json!({"methodId": method})).await;
    let (response, _) = acp.until_response(id).await;
    response
        .get("error")
        .unwrap_or_else(|| panic!("authenticate succeeded: {response}"))
        .clone()
}

#[tokio::test]
async fn an_editor_without_a_terminal_logs_in_through_the_browser() {
    let (server, auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (browser, page) = curl_browser(&sandbox);
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(
        &sandbox,
        &[
            ("BROWSER", browser.to_str().unwrap()),
            ("ANTHROPIC_BASE_URL", &mock.anthropic_url()),
        ],
    );
    // A client without terminal support: the browser login is an agent
    // method, offered first.
    let init = acp.initialize().await;
    let methods = init["authMethods"].as_array().unwrap();
    assert_eq!(
        methods[0],
        json!({"id": "anthropic-oauth", "name": "Log in with a Claude account (browser)",
               "description": "pincer opens claude.ai in your browser to log in to a Claude Pro or Max account, then keeps the token in its auth profiles (mode 0600) and refreshes it."})
    );
    let ids: Vec<&str> = methods.iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "anthropic-oauth",
            "anthropic-api-key",
            "openai-api-key",
            "gemini-api-key",
            "local-model"
        ]
    );
    // No key anywhere: a session cannot start yet.
    let id = acp
        .send(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32000, "{response}");

    let result = acp
        .call("authenticate", json!({"methodId": "anthropic-oauth"}))
        .await;
    assert_eq!(result, json!({}));

    // Stored exactly as `pincer login --oauth` stores it, mode 0600.
    let stored = profiles(&sandbox);
    let expires = stored["profiles"]["anthropic:oauth"]["expires"].clone();
    assert_eq!(
        stored["profiles"],
        json!({"anthropic:oauth": {"type": "oauth", "provider": "anthropic",
               "access": "sk-ant-oat01-agent-1", "refresh": "rt-agent-1",
               "expires": expires, "account": "ada@example.com"}})
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(profiles_path(&sandbox))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    // The redirect went to pincer's listener on 127.0.0.1, and the
    // exchange named the same address (the mock checked the verifier
    // against the challenge).
    let exchange = auth.lock().unwrap().exchanges[0].clone();
    let redirect = exchange["redirect_uri"].as_str().unwrap();
    let port: u16 = redirect
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix("/callback"))
        .unwrap_or_else(|| panic!("{redirect}"))
        .parse()
        .unwrap();
    assert!(port > 0);
    // The browser's tab says it worked.
    let shown = browser_page(&page).await;
    assert!(
        shown.contains("pincer is logged in to anthropic. You can close this tab"),
        "{shown}"
    );

    // A second authenticate finds the login and opens no browser.
    acp.call("authenticate", json!({"methodId": "anthropic-oauth"}))
        .await;
    assert_eq!(auth.lock().unwrap().authorizations, 1);

    // The next prompt uses the token.
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send("session/prompt", support::prompt(&session, "hi"))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-ant-oat01-agent-1")
    );
    assert_eq!(requests[0].header("x-api-key"), None);

    acp.close_stdin();
    acp.wait_exit().await;
    // The browser's stdout noise never reached the protocol stream
    // (wait_exit checked every line), and no token reached the log.
    let stderr = acp.stderr.await.unwrap();
    for secret in ["sk-ant-oat01-agent-1", "rt-agent-1"] {
        assert!(!stderr.contains(secret), "{secret} in:\n{stderr}");
    }
}

#[tokio::test]
async fn a_redirect_with_another_state_is_refused_and_nothing_is_stored() {
    let (server, auth) = start_auth_server().await;
    auth.lock().unwrap().forge_state = true;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (browser, page) = curl_browser(&sandbox);
    let mut acp = spawn(&sandbox, &[("BROWSER", browser.to_str().unwrap())]);
    acp.initialize().await;
    let error = authenticate_error(&mut acp, "anthropic-oauth").await;
    assert_eq!(
        error,
        json!({"code": -32000,
               "message": "the redirect's state does not match this login (expected the one pincer sent); start the login again",
               "data": {"message": "the redirect's state does not match this login (expected the one pincer sent); start the login again"}})
    );
    // The code that came with the wrong state was never exchanged, and
    // nothing was stored.
    assert_eq!(auth.lock().unwrap().authorizations, 1);
    assert!(auth.lock().unwrap().exchanges.is_empty());
    assert!(!profiles_path(&sandbox).exists());
    let shown = browser_page(&page).await;
    assert!(
        shown.contains("pincer could not log in: the redirect&#39;s state does not match"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_login_nobody_finishes_times_out_and_closes_its_port() {
    let (server, auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (browser, urls) = recording_browser(&sandbox);
    let mut acp = spawn(
        &sandbox,
        &[
            ("BROWSER", browser.to_str().unwrap()),
            ("PINCER_OAUTH_TIMEOUT", "1s"),
        ],
    );
    acp.initialize().await;
    let error = authenticate_error(&mut acp, "anthropic-oauth").await;
    let message = "the anthropic login in the browser did not finish within 1s; start it again, or log in in a terminal: `pincer login --provider anthropic --oauth`";
    assert_eq!(
        error,
        json!({"code": -32000, "message": message, "data": {"message": message}})
    );
    // The browser was given the address, and the listener is gone.
    let url = recorded_urls(&urls).pop().unwrap();
    let redirect = url::Url::parse(&param(&url, "redirect_uri")).unwrap();
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", redirect.port().unwrap()))
            .await
            .is_err()
    );
    assert_eq!(auth.lock().unwrap().authorizations, 0);
    assert!(!profiles_path(&sandbox).exists());
}

/// Sends `request` to the callback port and returns what came back (empty
/// when the connection was closed without an answer).
async fn poke(port: u16, request: &[u8]) -> String {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // A peer that stops reading early may reset the connection; what was
    // answered before is what counts.
    let _ = socket.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(TIMEOUT, socket.read_to_end(&mut answer))
        .await
        .expect("the listener neither answered nor closed");
    String::from_utf8_lossy(&answer).into_owned()
}

fn status_line(answer: &str) -> &str {
    answer.lines().next().unwrap_or_default()
}

#[tokio::test]
async fn junk_on_the_callback_port_does_not_stop_the_login() {
    let (server, _auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (browser, urls) = recording_browser(&sandbox);
    let mut acp = spawn(&sandbox, &[("BROWSER", browser.to_str().unwrap())]);
    acp.initialize().await;
    let id = acp
        .send("authenticate", json!({"methodId": "anthropic-oauth"}))
        .await;
    wait_until("the browser was opened", TIMEOUT, || {
        !recorded_urls(&urls).is_empty()
    })
    .await;
    let url = recorded_urls(&urls).pop().unwrap();
    let port = url::Url::parse(&param(&url, "redirect_uri"))
        .unwrap()
        .port()
        .unwrap();

    // A client that connects and says nothing, and keeps the connection.
    let _silent = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // Binary garbage, another path, a callback without a state, a method
    // that is not GET, and a request head far too large.
    let garbage = poke(port, b"\x00\xff\xfe\x16\x03\x01 hello\r\n\r\n").await;
    assert_eq!(status_line(&garbage), "HTTP/1.1 400 Bad Request");
    let favicon = poke(
        port,
        b"GET /favicon.ico HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await;
    assert_eq!(status_line(&favicon), "HTTP/1.1 404 Not Found");
    let bare = poke(
        port,
        b"GET /callback?code=stolen HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await;
    assert_eq!(status_line(&bare), "HTTP/1.1 400 Bad Request");
    let post = poke(
        port,
        b"POST /callback HTTP/1.1\r\nHost: localhost\r\ncontent-length: 0\r\n\r\n",
    )
    .await;
    assert_eq!(status_line(&post), "HTTP/1.1 400 Bad Request");
    let mut flood = b"GET /callback HTTP/1.1\r\n".to_vec();
    for n in 0..4000 {
        flood.extend_from_slice(format!("x-junk-{n}: {}\r\n", "a".repeat(20)).as_bytes());
    }
    let flood = poke(port, &flood).await;
    assert!(
        flood.is_empty() || status_line(&flood) == "HTTP/1.1 400 Bad Request",
        "{flood}"
    );

    // The user's browser still completes the login.
    let (status, shown) = browse(&url).await;
    assert_eq!(status, 200, "{shown}");
    assert!(
        shown.contains("pincer is logged in to anthropic"),
        "{shown}"
    );
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({}), "{response}");
    assert_eq!(
        profiles(&sandbox)["profiles"]["anthropic:oauth"]["access"],
        "sk-ant-oat01-agent-1"
    );
}

#[tokio::test]
async fn two_logins_at_once_each_finish() {
    let (server, auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let (browser, urls) = recording_browser(&sandbox);
    let mut acp = spawn(&sandbox, &[("BROWSER", browser.to_str().unwrap())]);
    acp.initialize().await;
    let first = acp
        .send("authenticate", json!({"methodId": "anthropic-oauth"}))
        .await;
    wait_until("the first browser was opened", TIMEOUT, || {
        recorded_urls(&urls).len() == 1
    })
    .await;
    let second = acp
        .send("authenticate", json!({"methodId": "anthropic-oauth"}))
        .await;
    wait_until("the second browser was opened", TIMEOUT, || {
        recorded_urls(&urls).len() == 2
    })
    .await;
    let opened = recorded_urls(&urls);
    // Each login has its own listener and state.
    assert_ne!(
        param(&opened[0], "redirect_uri"),
        param(&opened[1], "redirect_uri")
    );
    assert_ne!(param(&opened[0], "state"), param(&opened[1], "state"));
    // The second finishes first; the first is not disturbed by it.
    let (status, _) = browse(&opened[1]).await;
    assert_eq!(status, 200);
    let (response, _) = acp.until_response(second).await;
    assert_eq!(response["result"], json!({}), "{response}");
    let (status, _) = browse(&opened[0]).await;
    assert_eq!(status, 200);
    let (response, _) = acp.until_response(first).await;
    assert_eq!(response["result"], json!({}), "{response}");
    assert_eq!(auth.lock().unwrap().exchanges.len(), 2);
    // The login that finished last is the one stored.
    assert_eq!(
        profiles(&sandbox)["profiles"]["anthropic:oauth"]["access"],
        "sk-ant-oat01-agent-2"
    );
}

#[tokio::test]
async fn without_a_browser_the_error_says_how_to_log_in() {
    let (server, auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(&sandbox, &server, "");
    let missing = sandbox.dir.path().join("no-such-browser");
    let mut acp = spawn(&sandbox, &[("BROWSER", missing.to_str().unwrap())]);
    acp.initialize().await;
    let error = authenticate_error(&mut acp, "anthropic-oauth").await;
    let message = format!(
        "pincer could not open a browser for the anthropic login ({}: No such file or directory (os error 2)); set BROWSER to your browser's command in the environment the editor starts pincer with, or log in in a terminal: `pincer login --provider anthropic --oauth`",
        missing.display()
    );
    assert_eq!(
        error,
        json!({"code": -32000, "message": message, "data": {"message": message}})
    );
    assert_eq!(auth.lock().unwrap().authorizations, 0);
    assert!(!profiles_path(&sandbox).exists());
}

#[tokio::test]
async fn a_provider_that_only_redirects_to_a_paste_page_has_no_browser_method() {
    let (server, _auth) = start_auth_server().await;
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        &server,
        "https://example.invalid/oauth/code/callback",
    );
    let mut acp = spawn(&sandbox, &[]);
    let init = acp.initialize().await;
    let ids: Vec<&str> = init["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "anthropic-api-key",
            "openai-api-key",
            "gemini-api-key",
            "local-model"
        ]
    );
}
