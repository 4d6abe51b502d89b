//! End-to-end: what pincer does when a provider's HTTP answer is hostile or
//! strange. A redirect is never followed with the key (a loopback
//! "attacker" server proves nothing reached it); a stream of keep-alives
//! alone times out and is retried; a 200 whose body is an error document or
//! a web page reports what the server said; a rejected key is named by its
//! source; and a provider that echoes the key it was sent never gets it
//! into the log (at `RUST_LOG=trace`), stdout or any file pincer writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, TIMEOUT};
use support::mock_model::{MockModel, Reply, fixture};
use support::prompt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback server that records every connection made to it and every
/// byte sent over one, and answers each request (once its head is in) with
/// fixed bytes. As the "attacker" it answers a 418, so that a client that
/// reached it carries on and the test shows what it got; nothing should
/// ever reach it.
struct Attacker {
    addr: std::net::SocketAddr,
    connections: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<u8>>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Attacker {
    async fn start() -> Self {
        Self::answering(
            "HTTP/1.1 418 I'm a teapot\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                .to_string(),
        )
        .await
    }

    async fn answering(answer: String) -> Self {
        let answer = Arc::new(answer);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (count, bytes) = (connections.clone(), received.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let bytes = bytes.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let mut answered = false;
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let headers_done = {
                            let mut seen = bytes.lock().unwrap();
                            seen.extend_from_slice(&buf[..n]);
                            seen.windows(4).any(|w| w == b"\r\n\r\n")
                        };
                        if headers_done && !answered {
                            answered = true;
                            let _ = socket.write_all(answer.as_bytes()).await;
                        }
                    }
                });
            }
        });
        Self {
            addr,
            connections,
            received,
            _task: task,
        }
    }

    /// Fails showing the connections and the request head (where the
    /// credentials travel) if anything reached the attacker.
    fn assert_untouched(&self) {
        let received = String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned();
        let head = received.split("\r\n\r\n").next().unwrap_or_default();
        assert_eq!(
            (self.connections.load(Ordering::SeqCst), head),
            (0, ""),
            "the attacker was reached"
        );
    }
}

/// Writes the user's config (no title calls, so that only the turn's
/// requests reach the mock).
fn write_config(sandbox: &Sandbox, config: &str) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("title_model = \"none\"\n{config}"),
    )
    .unwrap();
}

/// `pincer acp` with `env`, talking to `mock` for Anthropic and OpenAI.
fn spawn_acp(sandbox: &Sandbox, mock: &MockModel, env: &[(&str, &str)]) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("OPENAI_BASE_URL", mock.openai_url());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Acp::spawn(cmd)
}

/// One prompt in a new session; returns the prompt's response and every
/// message before it.
async fn prompt_once(acp: &mut Acp, sandbox: &Sandbox) -> (Value, Vec<Value>) {
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    acp.until_response(id).await
}

/// `pincer run hi` with `env`; returns (exit code, stdout, stderr).
async fn run(sandbox: &Sandbox, mock: &MockModel, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = sandbox.command(&["run", "hi"]);
    cmd.env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("OPENAI_BASE_URL", mock.openai_url());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(TIMEOUT, cmd.output())
        .await
        .expect("pincer run did not finish")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[tokio::test]
async fn a_redirect_is_not_followed_and_the_user_is_told_where_it_pointed() {
    let attacker = Attacker::start().await;
    let target = format!("http://{}/v1/messages", attacker.addr);

    // Over ACP, Anthropic (`x-api-key`, which reqwest would keep across
    // origins) with a 307 (which would resend the conversation too).
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::redirect(307, &target));
    write_config(&sandbox, "");
    let mut acp = spawn_acp(
        &sandbox,
        &mock,
        &[("ANTHROPIC_API_KEY", "sk-ant-api03-redirected-key-000")],
    );
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    attacker.assert_untouched();
    assert_eq!(
        response["error"]["message"],
        format!(
            "anthropic answered with a redirect (HTTP 307) to {target}; pincer does not follow \
             redirects with credentials: set the provider's base_url to the address that answers"
        ),
        "{response}"
    );
    // Not retried either: asking again gets the same redirect.
    assert_eq!(mock.requests().len(), 1);

    // From the shell, OpenAI (`Authorization`) with a 308.
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let target = format!("http://{}/v1/chat/completions", attacker.addr);
    mock.push(Reply::redirect(308, &target));
    write_config(&sandbox, "model = \"openai/gpt-5-mini\"\n");
    let (code, stdout, stderr) = run(
        &sandbox,
        &mock,
        &[("OPENAI_API_KEY", "sk-proj-redirected-key-0000")],
    )
    .await;
    attacker.assert_untouched();
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            format!(
                "pincer: openai answered with a redirect (HTTP 308) to {target}; pincer does not \
                 follow redirects with credentials: set the provider's base_url to the address \
                 that answers\n"
            )
            .as_str()
        )
    );
}

/// Anthropic's stream opening (its usage is progress), then only pings.
fn anthropic_pings() -> Reply {
    Reply::KeepAlive {
        head: "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n".to_string(),
        keep_alive: "event: ping\ndata: {\"type\": \"ping\"}\n\n: keep-alive\n\n".to_string(),
        every: Duration::from_millis(50),
    }
}

#[tokio::test]
async fn a_stream_of_keep_alives_alone_times_out_and_is_retried() {
    let retries = "stream_idle_timeout = 1\nmax_retries = 2\nretry_base_delay_ms = 10\n";

    // Over ACP, Anthropic: `event: ping` and SSE comments.
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for _ in 0..3 {
        mock.push(anthropic_pings());
    }
    write_config(&sandbox, retries);
    let mut acp = spawn_acp(&sandbox, &mock, &[("ANTHROPIC_API_KEY", "sk-ant-test-000")]);
    let (response, before) = prompt_once(&mut acp, &sandbox).await;
    assert_eq!(
        response["error"]["message"],
        "anthropic made no progress for 1 s (keep-alives do not count); gave up waiting",
        "{response}"
    );
    assert_eq!(mock.requests().len(), 3, "the first call and two retries");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    // The user saw each retry, and no answer.
    let text: String = support::acp_client::updates_of(&before)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        text,
        "anthropic made no progress for 1 s (keep-alives do not count); gave up waiting. \
         Retrying in 0.0 s (attempt 1).\n\
         anthropic made no progress for 1 s (keep-alives do not count); gave up waiting. \
         Retrying in 0.0 s (attempt 2).\n"
    );

    // From the shell, OpenAI Chat Completions: comments and chunks that
    // carry nothing (no choices, an empty delta).
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for _ in 0..3 {
        mock.push(Reply::KeepAlive {
            head: "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n".to_string(),
            keep_alive: ": keep-alive\n\ndata: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[]}\n\ndata: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n".to_string(),
            every: Duration::from_millis(50),
        });
    }
    write_config(
        &sandbox,
        &format!("model = \"openai/gpt-5-mini\"\n{retries}"),
    );
    let (code, _, stderr) = run(&sandbox, &mock, &[("OPENAI_API_KEY", "sk-test")]).await;
    assert_eq!(
        (code, stderr.lines().last().unwrap_or_default()),
        (
            1,
            "pincer: openai made no progress for 1 s (keep-alives do not count); gave up waiting"
        ),
        "{stderr}"
    );
    assert_eq!(mock.requests().len(), 3, "the first call and two retries");
}

/// The error message a prompt answered with over ACP, and how many model
/// requests it took, for a provider given by `env` and `config` that
/// answers every request with `reply`.
async fn acp_error(
    env: &[(&str, &str)],
    config: &str,
    reply: impl Fn() -> Reply,
) -> (String, usize) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for _ in 0..2 {
        mock.push(reply());
    }
    write_config(
        &sandbox,
        &format!("max_retries = 1\nretry_base_delay_ms = 10\n{config}"),
    );
    let mut acp = spawn_acp(&sandbox, &mock, env);
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    let message = response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {response}"))
        .to_string();
    (message, mock.requests().len())
}

#[tokio::test]
async fn a_200_with_an_error_document_or_a_web_page_reports_what_the_server_said() {
    let anthropic = [("ANTHROPIC_API_KEY", "sk-ant-test-000")];
    let json = |body: &'static str| move || Reply::ok_body("application/json", body);

    // The provider's own error, classified: an overload is retried...
    assert_eq!(
        acp_error(
            &anthropic,
            "",
            json(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)
        )
        .await,
        ("anthropic is overloaded: Overloaded".to_string(), 2)
    );
    // ...a bad request is not.
    assert_eq!(
        acp_error(
            &anthropic,
            "",
            json(r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 99999999 > 64000"}}"#)
        )
        .await,
        (
            "anthropic rejected the request (HTTP 400): max_tokens: 99999999 > 64000".to_string(),
            1
        )
    );
    // A captive portal's page, named by its title, even when it claims to
    // be an event stream.
    assert_eq!(
        acp_error(&anthropic, "", || Reply::ok_body(
            "text/event-stream",
            fixture("http/captive_portal.html")
        ))
        .await,
        (
            "could not reach anthropic: the server answered with an HTML page, not an event \
             stream: Hotel Wi-Fi — please log in (a proxy or captive portal in the way, or a \
             base_url that is not the API's)"
                .to_string(),
            2
        )
    );
    // OpenAI Chat Completions.
    assert_eq!(
        acp_error(
            &[("OPENAI_API_KEY", "sk-test")],
            "model = \"openai/gpt-5-mini\"\n",
            json(r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#)
        )
        .await,
        (
            "openai server error (HTTP 500): The server had an error while processing your request."
                .to_string(),
            2
        )
    );
    // OpenAI Responses.
    assert_eq!(
        acp_error(
            &[("OPENAI_API_KEY", "sk-test")],
            "model = \"openai/gpt-5-mini\"\n[providers.openai]\napi = \"openai-responses\"\n",
            json(r#"{"error":{"message":"Invalid prompt: we could not read it.","code":"invalid_prompt"}}"#)
        )
        .await,
        (
            "openai rejected the request (HTTP 400): Invalid prompt: we could not read it."
                .to_string(),
            1
        )
    );
}

#[tokio::test]
async fn a_200_error_document_from_gemini_or_bedrock_is_their_own_error() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let base = format!("http://{}/v1beta", mock.addr);
    for _ in 0..2 {
        mock.push(Reply::ok_body(
            "application/json",
            r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#,
        ));
    }
    write_config(&sandbox, "max_retries = 1\nretry_base_delay_ms = 10\n");
    let mut acp = spawn_acp(
        &sandbox,
        &mock,
        &[
            ("GEMINI_API_KEY", "gm-test"),
            ("GEMINI_BASE_URL", &base),
            ("PINCER_MODEL", "google/gemini-2.5-flash"),
        ],
    );
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    assert_eq!(
        (response["error"]["message"].clone(), mock.requests().len()),
        (
            json!("google is overloaded: The model is overloaded. Please try again later."),
            2
        )
    );

    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let endpoint = format!("http://{}", mock.addr);
    mock.push(Reply::ok_body(
        "application/json",
        r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"The model returned the following errors: messages: text content blocks must be non-empty"}"#,
    ));
    write_config(&sandbox, "max_retries = 1\nretry_base_delay_ms = 10\n");
    let mut acp = spawn_acp(
        &sandbox,
        &mock,
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint),
            (
                "PINCER_MODEL",
                "amazon-bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0",
            ),
        ],
    );
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    assert_eq!(
        (response["error"]["message"].clone(), mock.requests().len()),
        (
            json!(
                "amazon-bedrock rejected the request (HTTP 400): The model returned the \
                 following errors: messages: text content blocks must be non-empty"
            ),
            1
        )
    );
}

const REJECTED: &str =
    r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;

#[tokio::test]
async fn a_rejected_key_is_named_by_its_source_and_never_shown() {
    // An environment variable, over ACP.
    let key = "sk-ant-api03-env-rejected-0000000";
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(401, REJECTED));
    write_config(&sandbox, "");
    let mut acp = spawn_acp(&sandbox, &mock, &[("ANTHROPIC_API_KEY", key)]);
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    // In an editor the way out is the session's Model option.
    let editor_message = "anthropic rejected the credentials: invalid x-api-key. anthropic \
                          rejected the key in the ANTHROPIC_API_KEY environment variable \
                          (credential env:ANTHROPIC_API_KEY). To go on, choose another model in \
                          this session's Model option; or put a valid key in ANTHROPIC_API_KEY \
                          where the editor starts pincer (for Zed, under \"env\" in the \
                          agent_servers entry).";
    assert_eq!(
        response["error"],
        json!({"code": -32000, "message": editor_message, "data": {"message": editor_message}})
    );
    let env_message = "anthropic rejected the credentials: invalid x-api-key. anthropic rejected \
                       the key in the ANTHROPIC_API_KEY environment variable (credential \
                       env:ANTHROPIC_API_KEY); set a valid key there (for Zed, under \"env\" in \
                       the agent_servers entry) and restart pincer, or choose another model \
                       with --model or PINCER_MODEL.";
    assert_eq!(mock.requests()[0].header("x-api-key"), Some(key));

    // The same from the shell.
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(401, REJECTED));
    write_config(&sandbox, "");
    let (code, stdout, stderr) = run(&sandbox, &mock, &[("ANTHROPIC_API_KEY", key)]).await;
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        // 8: the credentials (`pincer run --help` lists the exit codes).
        (8, "", format!("pincer: {env_message}\n").as_str())
    );

    // An auth profile, over ACP.
    let key = "sk-ant-api03-profile-rejected-000";
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::status(401, REJECTED));
    write_config(&sandbox, "");
    let agent = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("auth-profiles.json"),
        json!({
            "version": 1,
            "profiles": {"anthropic:default": {"type": "api_key", "provider": "anthropic", "key": key}},
        })
        .to_string(),
    )
    .unwrap();
    let mut acp = spawn_acp(&sandbox, &mock, &[]);
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    assert_eq!(
        response["error"]["message"],
        "anthropic rejected the credentials: invalid x-api-key. anthropic rejected the auth \
         profile anthropic:default. To go on, choose another model in this session's Model \
         option; or replace it with `pincer login --provider anthropic --profile \
         anthropic:default` or remove it with `pincer logout anthropic:default`."
    );
    assert_eq!(mock.requests()[0].header("x-api-key"), Some(key));
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Every file under `dir`, so that a test can show it looked somewhere.
fn file_count(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        file_count(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_provider_echoing_the_key_never_gets_it_into_logs_output_or_files() {
    // Nothing in this key looks like a key: only its exact value can find
    // it.
    let key = format!("plain{}", uuid::Uuid::new_v4().simple());
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let echo = |status: u16, kind: &str| Reply::Echo {
        status,
        header: "x-api-key".to_string(),
        template: format!(
            r#"{{"type":"error","error":{{"type":"{kind}","message":"the key {{header}} is no good (x-api-key: {{header}})"}}}}"#
        ),
    };
    mock.push(echo(401, "authentication_error"));
    mock.push(echo(400, "invalid_request_error"));
    mock.push(echo(500, "api_error"));
    write_config(&sandbox, "max_retries = 0\n");
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("ANTHROPIC_API_KEY", &key)
        .env("RUST_LOG", "trace");
    let mut acp = Acp::spawn(cmd);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let mut stdout = Vec::new();
    let mut errors = Vec::new();
    for _ in 0..3 {
        let id = acp.send("session/prompt", prompt(&session, "hi")).await;
        let (response, before) = acp.until_response(id).await;
        errors.push(response["error"]["message"].clone());
        stdout.extend(before);
        stdout.push(response);
    }
    // Each provider really quoted the key, and each error still says what
    // went wrong.
    let sent: Vec<Option<String>> = mock
        .requests()
        .iter()
        .map(|r| r.header("x-api-key").map(str::to_string))
        .collect();
    assert_eq!(sent, vec![Some(key.clone()); 3]);
    acp.close_stdin();
    acp.wait_exit().await;
    let stderr = acp.stderr.await.unwrap();
    assert!(
        stderr.contains("TRACE") && stderr.contains("hyper"),
        "the log is at trace level, HTTP client included:\n{stderr}"
    );
    assert!(
        file_count(&sandbox.home().join("sessions")) > 0,
        "no transcript was written"
    );
    // Every place the key could have gone: the log, what the editor got
    // (errors, notices, agent text), and every file under the sandbox
    // (PINCER_HOME and HOME: transcripts, the session index, logs; and
    // the project).
    let stdout: Vec<String> = stdout.iter().map(Value::to_string).collect();
    let mut leaks: Vec<String> = files_containing(sandbox.dir.path(), key.as_bytes());
    for (stream, lines) in [
        (
            "stderr",
            stderr.lines().map(str::to_string).collect::<Vec<_>>(),
        ),
        ("stdout", stdout),
    ] {
        leaks.extend(
            lines
                .iter()
                .filter(|line| line.contains(&key))
                .map(|line| format!("{stream}: {}", line.chars().take(400).collect::<String>())),
        );
    }
    assert_eq!(leaks, Vec::<String>::new(), "the key leaked");
    // And each error still says what went wrong.
    assert_eq!(
        errors[1..],
        [
            json!(
                "anthropic rejected the request (HTTP 400): the key <redacted> is no good (x-api-key: <redacted>)"
            ),
            json!(
                "anthropic server error (HTTP 500): the key <redacted> is no good (x-api-key: <redacted>)"
            ),
        ]
    );
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .starts_with("anthropic rejected the credentials: the key <redacted> is no good"),
        "{}",
        errors[0]
    );
}

#[tokio::test]
async fn an_oauth_refresh_is_not_redirected_with_the_refresh_token() {
    let attacker = Attacker::start().await;
    // The configured token endpoint answers every request with a 307 to
    // the attacker (which would resend the refresh token in the body).
    let redirector = Attacker::answering(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{}/token\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        attacker.addr
    ))
    .await;
    let refresh = format!("rt-{}", uuid::Uuid::new_v4().simple());
    let sandbox = Sandbox::new();
    write_config(
        &sandbox,
        &format!(
            "max_retries = 0\n[oauth.anthropic]\nauthorize_url = \"http://{0}/authorize\"\ntoken_url = \"http://{0}/token\"\nclient_id = \"test-client\"\nscopes = [\"user:inference\"]\nredirect_uri = \"\"\ntoken_format = \"json\"\n",
            redirector.addr
        ),
    );
    let agent = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("auth-profiles.json"),
        json!({"version": 1, "profiles": {"anthropic:oauth": {
            "type": "oauth", "provider": "anthropic", "access": "sk-ant-oat01-expired",
            "refresh": refresh, "expires": 1000}}})
        .to_string(),
    )
    .unwrap();
    let mock = MockModel::start().await;
    // Whether the stale token is tried anyway is failover's business; it
    // is turned down.
    mock.push(Reply::status(401, REJECTED));
    let mut acp = spawn_acp(&sandbox, &mock, &[]);
    let (response, _) = prompt_once(&mut acp, &sandbox).await;
    attacker.assert_untouched();
    // The token endpoint was asked, and said where it pointed.
    assert_eq!(redirector.connections.load(Ordering::SeqCst), 1);
    assert!(
        String::from_utf8_lossy(&redirector.received.lock().unwrap()).contains(&refresh),
        "the refresh went to the configured endpoint"
    );
    assert!(response.get("error").is_some(), "{response}");
    acp.close_stdin();
    acp.wait_exit().await;
    let stderr = acp.stderr.await.unwrap();
    assert!(
        stderr.contains(&format!(
            "the token endpoint answered 307: a redirect to http://{}/token; pincer does not \
             follow redirects with credentials: set token_url to the address that answers",
            attacker.addr
        )),
        "{stderr}"
    );
}
