//! End-to-end attacks on `pincer gateway` (docs/gateway.md): credentials
//! that are missing, empty, "undefined" or wrong; credentials in URLs;
//! cross-site pages; brute force; oversized and slow pre-auth frames;
//! requests before `connect`; exposure on all interfaces; a repository
//! that tries to configure the listener; scopes; connection caps; a slow
//! consumer. Each test drives the real binary with a real websocket client
//! and proves that nothing happened (no model request, no session, no
//! frame) where an attacker was refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

#[cfg(target_os = "linux")]
#[path = "gateway_security/resources.rs"]
mod resources;

use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{
    Client, Frame, Gateway, Refused, close_of, connect_params, gateway_command, new_key, new_token,
    parse_listening, spawn_stderr_reader, write_gateway_config,
};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};

/// The `error` of a failed connect, and the close that followed it.
async fn refused_connect(gateway: &Gateway, params: Value) -> (Value, (u16, String)) {
    refused_connect_from(gateway, Ipv4Addr::LOCALHOST, params).await
}

async fn refused_connect_from(
    gateway: &Gateway,
    from: Ipv4Addr,
    params: Value,
) -> (Value, (u16, String)) {
    let mut client = Client::open_with(gateway.addr, from, "/", &[])
        .await
        .unwrap();
    let res = client.connect(params).await;
    assert_eq!(res["ok"], json!(false), "{res}");
    let (close, after) = client.until_closed().await;
    assert_eq!(after, Vec::<Value>::new(), "frames after a refused connect");
    (res["error"].clone(), close_of(&close))
}

/// Checks an error's code, the start of its message (the spec's text; a
/// hint may follow) and `details.code`.
fn assert_error(error: &Value, code: &str, message: &str, details_code: Option<&str>) {
    assert_eq!(error["code"], code, "{error}");
    let text = error["message"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(message),
        "message {text:?} should start with {message:?}: {error}"
    );
    if let Some(details) = details_code {
        assert_eq!(error["details"]["code"], details, "{error}");
    }
}

#[tokio::test]
async fn missing_empty_undefined_null_and_wrong_tokens_are_refused_and_closed() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // Many refusals from one address here; the lockout has its own test.
    write_gateway_config(&sandbox, "auth_failures = 1000");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();

    let missing = [
        connect_params(None, &[], &[]),
        {
            let mut p = connect_params(None, &[], &[]);
            p["auth"] = json!({});
            p
        },
        connect_params(Some(""), &[], &[]),
        connect_params(Some("undefined"), &[], &[]),
        connect_params(Some("null"), &[], &[]),
        {
            let mut p = connect_params(None, &[], &[]);
            p["auth"] = json!({"token": null});
            p
        },
    ];
    for params in missing {
        let (error, close) = refused_connect(&gateway, params.clone()).await;
        assert_error(
            &error,
            "INVALID_REQUEST",
            "unauthorized: gateway token missing",
            Some("AUTH_TOKEN_MISSING"),
        );
        assert_eq!(close.0, 1008, "{params}");
    }
    // Wrong: another token, the token with a character changed, a prefix,
    // the token plus a suffix, the token as a password.
    let mut changed = token.clone();
    changed.pop();
    changed.push('x');
    let wrong = [
        new_token(),
        changed,
        token[..token.len() - 1].to_string(),
        format!("{token}x"),
        format!(" {token}"),
    ];
    for bad in wrong {
        let (error, close) = refused_connect(&gateway, connect_params(Some(&bad), &[], &[])).await;
        assert_error(
            &error,
            "INVALID_REQUEST",
            "unauthorized: gateway token mismatch",
            Some("AUTH_TOKEN_MISMATCH"),
        );
        assert_eq!(close.0, 1008);
    }
    // Tokens that are not strings: refused, and the connection closed.
    for odd in [
        json!(12345),
        json!(["x"]),
        json!({"token": token}),
        json!(true),
    ] {
        let mut params = connect_params(None, &[], &[]);
        params["auth"] = json!({"token": odd});
        let (error, close) = refused_connect(&gateway, params).await;
        assert_eq!(error["code"], "INVALID_REQUEST", "{odd}: {error}");
        assert_eq!(close.0, 1008, "{odd}");
    }
    // The right token as a password is not the token (auth = "token").
    let mut as_password = connect_params(None, &[], &[]);
    as_password["auth"] = json!({"password": token});
    let (error, close) = refused_connect(&gateway, as_password).await;
    assert_eq!(error["code"], "INVALID_REQUEST", "{error}");
    assert_eq!(close.0, 1008);
    let mut client = Client::open(gateway.addr).await;
    client
        .connect_ok(connect_params(Some(&token), &[], &[]))
        .await;
    assert_eq!(mock.requests().len(), 0);
}

#[tokio::test]
async fn a_password_gateway_refuses_missing_and_wrong_passwords() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "auth = \"password\"");
    let password = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, None, &[]);
    cmd.env("PINCER_GATEWAY_PASSWORD", &password);
    let gateway = Gateway::spawn(cmd, None).await;
    let (error, close) = refused_connect(&gateway, connect_params(None, &[], &[])).await;
    assert_error(
        &error,
        "INVALID_REQUEST",
        "unauthorized: gateway password missing",
        Some("AUTH_REQUIRED"),
    );
    assert_eq!(close.0, 1008);
    let mut wrong = connect_params(None, &[], &[]);
    wrong["auth"] = json!({"password": new_token()});
    let (error, close) = refused_connect(&gateway, wrong).await;
    assert_error(
        &error,
        "INVALID_REQUEST",
        "unauthorized: gateway password mismatch",
        Some("AUTH_PASSWORD_MISMATCH"),
    );
    assert_eq!(close.0, 1008);
    let mut right = connect_params(None, &[], &[]);
    right["auth"] = json!({"password": password});
    let mut client = Client::open(gateway.addr).await;
    let hello = client.connect_ok(right).await;
    assert_eq!(hello["auth"]["method"], "password");
    assert_eq!(hello["snapshot"]["authMode"], "password");
}

#[tokio::test]
async fn a_credential_in_the_url_is_refused_before_the_upgrade() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    for name in [
        "token",
        "password",
        "auth",
        "access_token",
        "api_key",
        "key",
    ] {
        for value in [token.as_str(), "anything"] {
            let path = format!("/?{name}={value}");
            let refused =
                Client::upgrade(gateway.addr, Ipv4Addr::LOCALHOST, &path, &[], None).await;
            match refused {
                Err(Refused::Http(400)) => {}
                Err(other) => panic!("{path}: expected HTTP 400, got {other:?}"),
                Ok(_) => panic!("{path}: the websocket was upgraded"),
            }
        }
    }
    // Also on another path, among other parameters, in another case,
    // percent-encoded, or without a value.
    for path in [
        format!("/chat?x=1&token={token}"),
        format!("/?Token={token}"),
        format!("/?PASSWORD={token}"),
        format!("/?%74oken={token}"),
        "/?token".to_string(),
        "/?token=".to_string(),
    ] {
        match Client::upgrade(gateway.addr, Ipv4Addr::LOCALHOST, &path, &[], None).await {
            Err(Refused::Http(400)) => {}
            Err(other) => panic!("{path}: expected HTTP 400, got {other:?}"),
            Ok(_) => panic!("{path}: the websocket was upgraded"),
        }
    }
    // A query without credentials is fine.
    let mut client = Client::open_with(gateway.addr, Ipv4Addr::LOCALHOST, "/?session=main", &[])
        .await
        .unwrap();
    client
        .connect_ok(connect_params(Some(&token), &[], &[]))
        .await;
    let stderr = gateway.stop().await;
    assert!(
        !stderr.contains(&token),
        "the token reached stderr:\n{stderr}"
    );
}

#[tokio::test]
async fn cross_site_origins_are_refused_same_origin_listed_and_no_origin_accepted() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "allowed_origins = [\"https://chat.example.com\"]");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let port = gateway.addr.port();
    let refused = [
        "https://evil.example".to_string(),
        "null".to_string(),
        format!("http://localhost.evil.example:{port}"),
        format!("http://127.0.0.1:{}", port + 1),
        "https://chat.example.com.evil.example".to_string(),
        "http://chat.example.com".to_string(),
    ];
    for origin in refused {
        let result = Client::upgrade(
            gateway.addr,
            Ipv4Addr::LOCALHOST,
            "/",
            &[("Origin", origin.as_str())],
            None,
        )
        .await;
        match result {
            Err(Refused::Http(403)) => {}
            Err(other) => panic!("Origin {origin}: expected HTTP 403, got {other:?}"),
            Ok(_) => panic!("Origin {origin}: the websocket was upgraded"),
        }
    }
    let same = format!("http://127.0.0.1:{port}");
    for headers in [
        vec![("Origin", same.as_str())],
        vec![("Origin", "https://chat.example.com")],
        vec![],
    ] {
        let mut client = Client::open_with(gateway.addr, Ipv4Addr::LOCALHOST, "/", &headers)
            .await
            .unwrap_or_else(|e| panic!("{headers:?} was refused: {e:?}"));
        client
            .connect_ok(connect_params(gateway.token.as_deref(), &[], &[]))
            .await;
    }
}

#[tokio::test]
async fn failed_connects_lock_out_that_peer_even_with_the_right_token_but_not_others() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "auth_failures = 3\nauth_lockout_secs = 60");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    let attacker = Ipv4Addr::new(127, 0, 0, 2);
    for _ in 0..3 {
        let (error, _) = refused_connect_from(
            &gateway,
            attacker,
            connect_params(Some(&new_token()), &[], &[]),
        )
        .await;
        assert_eq!(error["details"]["code"], "AUTH_TOKEN_MISMATCH", "{error}");
    }
    let (error, close) =
        refused_connect_from(&gateway, attacker, connect_params(Some(&token), &[], &[])).await;
    assert_eq!(error["code"], "UNAVAILABLE", "{error}");
    assert_eq!(error["details"]["code"], "AUTH_RATE_LIMITED", "{error}");
    assert_eq!(error["retryable"], json!(true), "{error}");
    let retry = error["retryAfterMs"].as_u64().unwrap_or(0);
    assert!(retry > 0 && retry <= 60_000, "{error}");
    assert_eq!(close.0, 1008);
    // Another peer is not locked out.
    let mut other = Client::open_with(gateway.addr, Ipv4Addr::new(127, 0, 0, 3), "/", &[])
        .await
        .unwrap();
    other
        .connect_ok(connect_params(Some(&token), &[], &[]))
        .await;
    // Missing tokens count as failures too.
    let prober = Ipv4Addr::new(127, 0, 0, 4);
    for _ in 0..3 {
        refused_connect_from(
            &gateway,
            prober,
            connect_params(Some("undefined"), &[], &[]),
        )
        .await;
    }
    let (error, _) =
        refused_connect_from(&gateway, prober, connect_params(Some(&token), &[], &[])).await;
    assert_eq!(error["details"]["code"], "AUTH_RATE_LIMITED", "{error}");
}

#[tokio::test]
async fn a_preauth_frame_over_64_kib_is_closed_1009_and_one_under_is_read() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = Client::open(gateway.addr).await;
    let mut params = connect_params(gateway.token.as_deref(), &[], &[]);
    params["userAgent"] = json!("x".repeat(70 * 1024));
    client
        .send_json(&json!({"type": "req", "id": "big", "method": "connect", "params": params}))
        .await;
    let (close, before) = client.until_closed().await;
    assert_eq!(before, Vec::<Value>::new());
    assert_eq!(
        close_of(&close),
        (1009, "preauth payload too large".to_string())
    );

    // Just under the cap is an ordinary connect.
    let mut client = Client::open(gateway.addr).await;
    let mut params = connect_params(gateway.token.as_deref(), &[], &[]);
    params["userAgent"] = json!("x".repeat(60 * 1024));
    client.connect_ok(params).await;
}

#[tokio::test]
async fn a_preauth_frame_announcing_megabytes_is_closed_once_it_passes_64_kib() {
    // A frame header that announces 20 MiB, then 70 KiB of it: the
    // gateway must not wait for (and buffer) the rest before refusing.
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "handshake_timeout_ms = 15000");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = Client::open(gateway.addr).await;
    let announced: u64 = 20 * 1024 * 1024;
    let mut frame = vec![0x81u8, 0x80 | 127];
    frame.extend_from_slice(&announced.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]); // a zero mask leaves the bytes as they are
    frame.extend(std::iter::repeat_n(b'x', 70 * 1024));
    client.write_raw(&frame).await;
    let started = tokio::time::Instant::now();
    let (close, before) = client.until_closed().await;
    assert_eq!(before, Vec::<Value>::new());
    assert_eq!(
        close_of(&close),
        (1009, "preauth payload too large".to_string())
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "closed only after {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_client_that_does_not_connect_in_time_is_closed_1008() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "handshake_timeout_ms = 300");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = Client::open(gateway.addr).await;
    let (close, before) = client.until_closed().await;
    assert_eq!(before, Vec::<Value>::new());
    assert_eq!(close_of(&close), (1008, "handshake timeout".to_string()));
    // A client that connects in time stays open past the timeout: it
    // still answers after a tick has come.
    write_gateway_config(
        &sandbox,
        "handshake_timeout_ms = 300\ntick_interval_ms = 400",
    );
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    client.next_event("tick").await;
    let health = client.call_ok("health", json!({})).await;
    assert_eq!(health["ok"], json!(true));
}

#[tokio::test]
async fn a_first_frame_that_is_not_connect_never_reaches_a_method() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("must not be asked", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let key = new_key();
    // A request for a method: answered INVALID_REQUEST with its id, closed.
    let mut client = Client::open(gateway.addr).await;
    let res = client
        .call(
            "chat.send",
            json!({"sessionKey": key, "message": "hi", "idempotencyKey": "r1"}),
        )
        .await;
    assert_eq!(res["ok"], json!(false), "{res}");
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    let (close, after) = client.until_closed().await;
    assert_eq!(after, Vec::<Value>::new());
    assert_eq!(close_of(&close), (1008, "invalid-handshake".to_string()));
    // Garbage, an event, and a binary frame: closed too.
    for first in [
        Frame::Text("not json".to_string()),
        Frame::Json(json!({"type": "event", "event": "tick", "payload": {}})),
        Frame::Binary(b"{\"type\":\"req\"}".to_vec()),
    ] {
        let mut client = Client::open(gateway.addr).await;
        match &first {
            Frame::Text(text) => client.send_text(text).await,
            Frame::Json(value) => client.send_json(value).await,
            Frame::Binary(bytes) => client.send_binary(bytes.clone()).await,
            _ => unreachable!(),
        }
        let (close, _) = client.until_closed().await;
        assert_eq!(close_of(&close).0, 1008, "{first:?}");
    }
    // Nothing ran: no model request, no session.
    let mut admin = gateway.admin().await;
    let listed = admin.call_ok("sessions.list", json!({})).await;
    assert_eq!(listed["sessions"], json!([]));
    assert_eq!(mock.requests().len(), 0);
}

#[tokio::test]
async fn a_non_loopback_bind_without_a_credential_refuses_to_start() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut cmd = gateway_command(&sandbox, &mock, None, &["--bind", "0.0.0.0"]);
    cmd.stdout(std::process::Stdio::piped());
    let out = tokio::time::timeout(TIMEOUT, cmd.output())
        .await
        .expect("pincer gateway --bind 0.0.0.0 without a credential kept running")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(
        !stderr.contains("listening on"),
        "it listened on all interfaces:\n{stderr}"
    );
    for needed in ["0.0.0.0", "token"] {
        assert!(
            stderr.contains(needed),
            "the refusal should name {needed:?}:\n{stderr}"
        );
    }
    // No token file was made for it either.
    assert!(!sandbox.home().join("gateway").join("token").exists());

    // The same through the config file.
    write_gateway_config(&sandbox, "bind = \"0.0.0.0\"");
    let mut cmd = gateway_command(&sandbox, &mock, None, &[]);
    cmd.stdout(std::process::Stdio::piped());
    let out = tokio::time::timeout(TIMEOUT, cmd.output())
        .await
        .expect("a config bind of 0.0.0.0 without a credential kept running")
        .unwrap();
    assert!(!out.status.success());
}

#[tokio::test]
async fn a_non_loopback_bind_with_a_credential_warns_about_tls() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let token = new_token();
    let gateway = Gateway::spawn(
        gateway_command(&sandbox, &mock, Some(&token), &["--bind", "0.0.0.0"]),
        Some(&token),
    )
    .await;
    assert!(
        gateway.announced.ip().is_unspecified(),
        "{}",
        gateway.announced
    );
    let mut client = gateway.admin().await;
    client.call_ok("health", json!({})).await;
    let stderr = gateway.stop().await;
    assert!(stderr.contains("TLS"), "no TLS warning:\n{stderr}");
    assert!(
        !stderr.contains(&token),
        "the token reached stderr:\n{stderr}"
    );
}

#[tokio::test]
async fn bad_configured_credentials_are_refused_at_startup() {
    // (where, value): in $PINCER_GATEWAY_TOKEN or in the token file.
    let cases = [
        ("env", ""),
        ("env", "undefined"),
        ("env", "null"),
        ("env", "short-token"),
        ("file", ""),
        ("file", "undefined"),
        ("file", "   \n"),
        ("file", "short-token"),
    ];
    let mut accepted = Vec::new();
    for (place, bad) in cases {
        let sandbox = Sandbox::new();
        let mock = MockModel::start().await;
        let file = sandbox.home().join("gateway").join("token");
        let (token, named) = if place == "env" {
            (Some(bad), "PINCER_GATEWAY_TOKEN".to_string())
        } else {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, bad).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
            (None, file.display().to_string())
        };
        let mut child = gateway_command(&sandbox, &mock, token, &[])
            .spawn()
            .unwrap();
        let stderr = spawn_stderr_reader(&mut child);
        // It either listens (wrong) or exits (stderr ends).
        if stderr.wait_line(TIMEOUT, parse_listening).await.is_some() {
            accepted.push(format!(
                "{place} {bad:?}: listening; stderr: {}",
                stderr.text()
            ));
            continue;
        }
        let status = tokio::time::timeout(TIMEOUT, child.wait())
            .await
            .unwrap()
            .unwrap();
        let text = stderr.text();
        assert!(!status.success(), "{place} {bad:?}: {text}");
        assert!(
            text.contains(&named),
            "{place} {bad:?}: the refusal should name {named}: {text}"
        );
    }
    assert_eq!(
        accepted,
        Vec::<String>::new(),
        "bad credentials the gateway started with"
    );
}

#[tokio::test]
async fn without_a_credential_a_loopback_gateway_makes_a_private_token_file() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut gateway = Gateway::spawn(gateway_command(&sandbox, &mock, None, &[]), None).await;
    let file = sandbox.home().join("gateway").join("token");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", file.display());
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(token.len() >= 32, "a weak token: {token:?}");
    gateway.token = Some(token.clone());
    let mut client = gateway.admin().await;
    client.call_ok("health", json!({})).await;
    let stderr = gateway.stop().await;
    assert!(
        stderr.contains(&file.display().to_string()),
        "stderr should say where the token is:\n{stderr}"
    );
    assert!(
        !stderr.contains(&token),
        "the token reached stderr:\n{stderr}"
    );
}

#[tokio::test]
async fn a_project_gateway_table_is_ignored_even_with_a_token_bind_and_port() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // A port the project wants; held by this test so it is free of others.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let wanted = held.local_addr().unwrap().port();
    drop(held);
    let project_token = new_token();
    sandbox.write("project-token", &project_token);
    sandbox.write(
        ".pincer/config.toml",
        &format!(
            "[gateway]\nbind = \"0.0.0.0\"\nport = {wanted}\nauth = \"password\"\n\
             token_env = \"HOME\"\ntoken_file = \"{}\"\npassword_file = \"{}\"\n\
             allowed_origins = [\"https://evil.example\"]\nhandshake_timeout_ms = 600000\n\
             auth_failures = 1000000\nmax_connections = 1\n",
            sandbox.work().join("project-token").display(),
            sandbox.work().join("project-token").display(),
        ),
    );
    // The user asks for port 0 in their own config: no --port given.
    write_gateway_config(&sandbox, "port = 0");
    let token = new_token();
    let mut cmd = sandbox.command(&["gateway"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("PINCER_GATEWAY_TOKEN", &token)
        .stdin(std::process::Stdio::null());
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    assert_eq!(gateway.announced.ip().to_string(), "127.0.0.1");
    assert_ne!(gateway.announced.port(), wanted);
    // The user's token works; the project's (as token or password) and the
    // value of $HOME do not.
    let mut first = gateway.admin().await;
    let hello = first.call_ok("health", json!({})).await;
    assert_eq!(hello["ok"], json!(true));
    // max_connections = 1 from the project would refuse a second one.
    let mut second = gateway.admin().await;
    second.call_ok("health", json!({})).await;
    let (error, _) =
        refused_connect(&gateway, connect_params(Some(&project_token), &[], &[])).await;
    assert_eq!(error["details"]["code"], "AUTH_TOKEN_MISMATCH", "{error}");
    let home = sandbox.home().display().to_string();
    let (error, _) = refused_connect(&gateway, connect_params(Some(&home), &[], &[])).await;
    assert_eq!(error["details"]["code"], "AUTH_TOKEN_MISMATCH", "{error}");
    // The project's origin is not allowed.
    let result = Client::upgrade(
        gateway.addr,
        Ipv4Addr::LOCALHOST,
        "/",
        &[("Origin", "https://evil.example")],
        None,
    )
    .await;
    assert!(
        matches!(result, Err(Refused::Http(403))),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn gateway_token_writes_a_private_file_and_prints_it_only_when_asked() {
    let sandbox = Sandbox::new();
    let run = |args: &[&str]| {
        let mut cmd = sandbox.command(args);
        cmd.stdin(std::process::Stdio::null());
        async move { cmd.output().await.unwrap() }
    };
    let file = sandbox.home().join("gateway").join("token");
    let out = run(&["gateway", "token"]).await;
    assert!(out.status.success(), "{out:?}");
    let first = std::fs::read_to_string(&file).unwrap().trim().to_string();
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // 256 bits: at least 43 characters of base64 or 64 of hex.
    assert!(first.len() >= 43, "{first:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    // The path is said (on stdout or in stderr's sentence); the token not.
    assert!(
        stdout.contains(&file.display().to_string())
            || stderr.contains(&file.display().to_string()),
        "the file's path was not printed: {stdout:?} {stderr:?}"
    );
    assert!(!stdout.contains(&first) && !stderr.contains(&first));

    let out = run(&["gateway", "token", "--print"]).await;
    assert!(out.status.success(), "{out:?}");
    let second = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert_ne!(first, second, "a new token each time");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.trim(), second);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // The gateway uses it.
    let mock = MockModel::start().await;
    let gateway = Gateway::spawn(gateway_command(&sandbox, &mock, None, &[]), Some(&second)).await;
    let mut client = gateway.admin().await;
    client.call_ok("health", json!({})).await;
}

#[tokio::test]
async fn the_credential_never_appears_in_logs_files_or_frames() {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    cmd.env("RUST_LOG", "trace");
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    // A failed attempt with a near miss, then a whole turn.
    let mut near = token.clone();
    near.push('!');
    refused_connect(&gateway, connect_params(Some(&near), &[], &[])).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "What does hello.txt say?").await;
    client.chat_end(&run).await;
    client.call_ok("sessions.list", json!({})).await;
    client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let frames = serde_json::to_string(&client.received).unwrap();
    assert!(!frames.contains(&token), "the token was in a frame");
    let stderr = gateway.stop().await;
    assert!(!stderr.is_empty(), "trace logging wrote nothing");
    let leaks: Vec<String> = stderr
        .lines()
        .filter(|l| l.contains(&token))
        .map(|l| l.replace(&token, "<TOKEN>").chars().take(300).collect())
        .collect();
    assert_eq!(leaks, Vec::<String>::new(), "the token reached stderr");
    assert!(!stderr.contains(&near), "a tried token reached stderr");
    // Nor any file pincer wrote, nor what the model was sent.
    for entry in walk(&sandbox.dir.path().to_path_buf()) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&token),
            "the token is in {}",
            entry.display()
        );
    }
    for request in mock.requests() {
        assert!(!request.body.to_string().contains(&token));
        assert!(request.headers.iter().all(|(_, v)| !v.contains(&token)));
    }
}

fn walk(dir: &std::path::PathBuf) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn a_protocol_mismatch_is_refused_with_the_protocols_error_and_1002() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    for (min, max) in [(3, 3), (5, 6), (1, 3)] {
        let mut params = connect_params(gateway.token.as_deref(), &[], &[]);
        params["minProtocol"] = json!(min);
        params["maxProtocol"] = json!(max);
        let (error, close) = refused_connect(&gateway, params).await;
        assert_error(
            &error,
            "INVALID_REQUEST",
            "protocol mismatch",
            Some("PROTOCOL_MISMATCH"),
        );
        assert_eq!(error["details"]["expectedProtocol"], json!(4), "{error}");
        assert_eq!(error["details"]["clientMinProtocol"], json!(min), "{error}");
        assert_eq!(error["details"]["clientMaxProtocol"], json!(max), "{error}");
        assert_eq!(close.0, 1002);
    }
    // A range that holds 4 is served as 4.
    let mut client = Client::open(gateway.addr).await;
    let mut params = connect_params(gateway.token.as_deref(), &[], &[]);
    params["minProtocol"] = json!(3);
    params["maxProtocol"] = json!(5);
    let hello = client.connect_ok(params).await;
    assert_eq!(hello["protocol"], json!(4));
}

#[tokio::test]
async fn only_the_operator_role_is_served() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    for role in ["node", "admin", ""] {
        let mut params = connect_params(gateway.token.as_deref(), &[], &[]);
        params["role"] = json!(role);
        params["client"]["mode"] = json!("node");
        let (error, close) = refused_connect(&gateway, params).await;
        assert_error(&error, "INVALID_REQUEST", "invalid role", None);
        assert_eq!(close.0, 1008, "{role}");
    }
}

/// Starts a turn that stops at an approval (a `bash` call in the default
/// mode) and returns the run id and the approval id.
async fn run_to_approval(admin: &mut Client, key: &str, command: &str) -> (String, String) {
    let run = admin.chat_send(key, "run it").await;
    let requested = admin.next_event("exec.approval.requested").await;
    let id = requested["payload"]["id"].as_str().unwrap().to_string();
    assert_eq!(requested["payload"]["request"]["command"], command);
    (run, id)
}

#[tokio::test]
async fn a_read_only_client_cannot_send_abort_approve_or_delete_but_can_read() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let marker = sandbox.work().join("ran");
    let command = format!("touch {}", marker.display());
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::sse(anthropic_text("Denied, fine.", 30)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let mut reader = gateway.operator(&["operator.read"], &["tool-events"]).await;
    assert_eq!(reader.hello["auth"]["scopes"], json!(["operator.read"]));
    let key = new_key();
    let (run, approval) = run_to_approval(&mut admin, &key, &command).await;

    let forbidden = [
        (
            "chat.send",
            json!({"sessionKey": key, "message": "rm -rf", "idempotencyKey": "evil-1"}),
            "operator.write",
        ),
        (
            "chat.abort",
            json!({"sessionKey": key, "runId": run}),
            "operator.write",
        ),
        (
            "exec.approval.resolve",
            json!({"id": approval, "decision": "allow-once"}),
            "operator.approvals",
        ),
        ("sessions.delete", json!({"key": key}), "operator.admin"),
        ("sessions.reset", json!({"key": key}), "operator.write"),
        (
            "sessions.patch",
            json!({"key": key, "permissionMode": "bypass"}),
            "operator.write",
        ),
        (
            "agent",
            json!({"message": "x", "idempotencyKey": "evil-2", "sessionKey": key}),
            "operator.write",
        ),
    ];
    for (method, params, scope) in forbidden {
        let res = reader.call(method, params).await;
        assert_eq!(res["ok"], json!(false), "{method}: {res}");
        assert_eq!(res["error"]["code"], "FORBIDDEN", "{method}: {res}");
        assert_eq!(
            res["error"]["details"]["code"], "MISSING_SCOPE",
            "{method}: {res}"
        );
        assert_eq!(
            res["error"]["details"]["missingScope"], scope,
            "{method}: {res}"
        );
        assert!(
            res["error"]["details"]["requiredScopes"]
                .as_array()
                .is_some_and(|s| s.contains(&json!(scope))),
            "{method}: {res}"
        );
    }
    // Reading works.
    let listed = reader.call_ok("sessions.list", json!({})).await;
    assert_eq!(listed["sessions"][0]["key"], json!(key));
    let history = reader
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    assert_eq!(history["sessionKey"], json!(key));
    // The approval is still pending: the admin settles it, with a deny.
    let approvals = admin.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(approvals[0]["id"], json!(approval));
    admin
        .call_ok(
            "exec.approval.resolve",
            json!({"id": approval, "decision": "deny"}),
        )
        .await;
    // The run was not aborted, and the reader follows it to its end.
    let end = admin.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let end = reader.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    // The reader was never offered the approval.
    assert_eq!(
        reader.payloads_of("exec.approval.requested"),
        Vec::<Value>::new()
    );
    assert!(!marker.exists(), "the denied command ran");
    // Only the admin's prompt reached the model (twice: call, then result).
    assert_eq!(mock.requests().len(), 2);
    let listed = admin.call_ok("sessions.list", json!({})).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn malformed_and_binary_frames_after_connect_get_errors_and_the_connection_stays() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    client.send_text("{not json").await;
    let res = client.next_where("an error", |f| f["type"] == "res").await;
    assert_eq!(res["id"], "invalid");
    assert_eq!(res["ok"], json!(false));
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    client.send_binary(b"\x00\x01binary".to_vec()).await;
    let res = client.next_where("an error", |f| f["type"] == "res").await;
    assert_eq!(
        (res["id"].clone(), res["error"]["code"].clone()),
        (json!("invalid"), json!("INVALID_REQUEST"))
    );
    // A frame with an id but no method: answered with its id.
    client.send_json(&json!({"type": "req", "id": "m1"})).await;
    let res = client.response("m1").await;
    assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    client
        .send_json(&json!({"type": "res", "id": "m2", "ok": true}))
        .await;
    client.send_json(&json!([1, 2, 3])).await;
    // Unknown method; a second connect.
    let res = client.call("no.such.method", json!({})).await;
    assert_eq!(
        res["error"],
        json!({"code": "INVALID_REQUEST", "message": "unknown method: no.such.method"})
    );
    let res = client
        .call(
            "connect",
            connect_params(gateway.token.as_deref(), &[], &[]),
        )
        .await;
    assert_eq!(res["ok"], json!(false));
    assert_eq!(res["error"]["code"], "INVALID_REQUEST");
    assert_eq!(res["error"]["message"], "already connected");
    // Still usable.
    let health = client.call_ok("health", json!({})).await;
    assert_eq!(health["ok"], json!(true));
    assert!(client.closed.is_none());
}

#[tokio::test]
async fn a_frame_over_max_payload_closes_1009() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "max_payload = 100000");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    assert_eq!(client.hello["policy"]["maxPayload"], json!(100000));
    // Under the limit: an ordinary request (a long provider filter).
    let res = client
        .call("models.list", json!({"provider": "x".repeat(90_000)}))
        .await;
    assert_eq!(res["ok"], json!(true), "{res}");
    client
        .send_json(&json!({"type": "req", "id": "big", "method": "chat.send",
            "params": {"sessionKey": new_key(), "message": "x".repeat(150_000), "idempotencyKey": "big"}}))
        .await;
    let (close, _) = client.until_closed().await;
    assert_eq!(close_of(&close).0, 1009);
    assert_eq!(mock.requests().len(), 0);
}

#[tokio::test]
async fn authenticated_connection_caps_refuse_connect_globally_and_per_address() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "max_connections = 3\nmax_connections_per_ip = 2");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone();
    let a = Ipv4Addr::new(127, 0, 0, 2);
    let b = Ipv4Addr::new(127, 0, 0, 3);
    let c = Ipv4Addr::new(127, 0, 0, 4);
    let authenticated = |from| {
        let token = token.clone();
        let addr = gateway.addr;
        async move {
            let mut client = Client::open_with(addr, from, "/", &[]).await.unwrap();
            client
                .connect_ok(connect_params(token.as_deref(), &[], &[]))
                .await;
            client
        }
    };
    let a1 = authenticated(a).await;
    let a2 = authenticated(a).await;
    // The third from one address upgrades (it is a stranger until it
    // authenticates) and is refused at `connect`.
    let (error, close) =
        refused_connect_from(&gateway, a, connect_params(token.as_deref(), &[], &[])).await;
    assert_eq!(error["code"], "UNAVAILABLE", "{error}");
    assert_eq!(error["details"]["code"], "TOO_MANY_CONNECTIONS", "{error}");
    assert_eq!(close.0, 1013);
    let _b1 = authenticated(b).await;
    let (error, _) =
        refused_connect_from(&gateway, c, connect_params(token.as_deref(), &[], &[])).await;
    assert_eq!(error["details"]["code"], "TOO_MANY_CONNECTIONS", "{error}");
    // A closed connection frees its place.
    drop(a1);
    drop(a2);
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let mut client = Client::open_with(gateway.addr, c, "/", &[]).await.unwrap();
        let res = client
            .connect(connect_params(token.as_deref(), &[], &[]))
            .await;
        if res["ok"] == json!(true) {
            break;
        }
        assert_eq!(
            res["error"]["details"]["code"], "TOO_MANY_CONNECTIONS",
            "{res}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "places were not freed after closing two connections"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An SSE body with `n` text deltas of `size` characters each.
fn long_stream(n: usize, size: usize) -> String {
    let mut body = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_l\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    for i in 0..n {
        let piece = format!("{:0>width$}", i, width = size);
        body.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{piece}\"}}}}\n\n"
        ));
    }
    body.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":500}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    body
}

#[tokio::test]
async fn a_slow_consumer_is_dropped_and_the_others_get_every_frame() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // 3,000 deltas of 16 characters: each `chat` delta carries the
    // cumulative text (for a client without `pincer.chat-deltas`), so one
    // client is sent about 36 MB, in frames of at most 48 KB.
    let (n, size) = (3000, 16);
    // A millisecond between events, so that they come as separate deltas
    // rather than a few coalesced reads.
    mock.push(Reply::Sse {
        body: long_stream(n, size),
        delay: Duration::from_millis(1),
        gate: None,
    });
    write_gateway_config(&sandbox, "max_buffered_bytes = 262144");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone();
    // The slow one: a small receive buffer, and it stops reading after
    // hello-ok.
    let mut slow = Client::upgrade(gateway.addr, Ipv4Addr::LOCALHOST, "/", &[], Some(4096))
        .await
        .unwrap();
    let challenge = slow.next_frame().await;
    assert!(matches!(challenge, Frame::Json(_)));
    slow.connect_ok(connect_params(token.as_deref(), &[], &[]))
        .await;
    let mut fast = gateway.admin().await;
    let key = new_key();
    let run = fast.chat_send(&key, "talk a lot").await;
    let end = fast.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");
    let deltas: Vec<Value> = fast
        .payloads_of("chat")
        .into_iter()
        .filter(|p| p["runId"] == json!(run) && p["state"] == "delta")
        .collect();
    // Every delta, in order, none lost (the server may coalesce deltas, so
    // the joined text is what must be whole).
    let joined: String = deltas
        .iter()
        .map(|d| d["deltaText"].as_str().unwrap())
        .collect();
    let expected: String = (0..n).map(|i| format!("{:0>size$}", i)).collect();
    assert_eq!(joined.len(), expected.len());
    assert!(joined == expected, "the fast client's text is not whole");
    let seqs: Vec<u64> = deltas.iter().map(|d| d["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // The slow one was dropped: what it has ends in a close (1008 slow
    // consumer) or a cut connection, before the final.
    let mut got_final = false;
    let ended = loop {
        match slow.next_frame().await {
            Frame::Json(f) if f["event"] == "chat" && f["payload"]["state"] == "final" => {
                got_final = true;
                break None;
            }
            frame @ (Frame::Close(_) | Frame::Ended(_)) => break Some(frame),
            _ => {}
        }
    };
    assert!(
        !got_final,
        "the slow consumer was never dropped: it got the whole stream ({} deltas, {} bytes of text)",
        deltas.len(),
        joined.len()
    );
    if let Some(Frame::Close(Some((code, reason)))) = &ended {
        assert_eq!((*code, reason.as_str()), (1008, "slow consumer"));
    }
    // The gateway goes on.
    fast.call_ok("health", json!({})).await;
}

#[tokio::test]
async fn a_peer_that_never_finishes_its_http_request_is_closed() {
    // Slowloris: half an upgrade request, then silence. The connection
    // holds no websocket slot, so only a timeout frees it.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "handshake_timeout_ms = 300");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut stream = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(TIMEOUT, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "a half-sent HTTP request was kept open for {TIMEOUT:?}"
    );
}

#[tokio::test]
async fn session_keys_cannot_reach_transcripts_outside_the_sessions_directory() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("A secret answer.", 20)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "the secret").await;
    client.chat_end(&run).await;
    // A copy of a real transcript outside the sessions directory, where a
    // key such as `../../stolen` would point if it were joined to a path.
    let id = client
        .call_ok("sessions.resolve", json!({"key": key}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let transcript = walk(&sandbox.home().join("sessions"))
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with(&format!("{id}.jsonl")))
        .unwrap();
    std::fs::copy(&transcript, sandbox.home().join("stolen.jsonl")).unwrap();
    std::fs::copy(
        &transcript,
        sandbox.home().join("sessions").join("stolen.jsonl"),
    )
    .unwrap();
    for hostile in [
        "../../stolen",
        "../stolen",
        "/../../stolen",
        "..\\..\\stolen",
        &format!("{}/../../stolen", sandbox.home().display()),
    ] {
        let history = client
            .call("chat.history", json!({"sessionKey": hostile}))
            .await;
        if history["ok"] == json!(true) {
            assert_eq!(
                pick_messages(&history["payload"]),
                json!([]),
                "{hostile} read a transcript"
            );
        }
        let got = client.call("sessions.get", json!({"key": hostile})).await;
        if got["ok"] == json!(true) {
            assert_eq!(pick_messages(&got["payload"]), json!([]), "{hostile}");
        }
    }
    // Keys outside 1..=512 characters are refused and reach no model.
    for bad in [String::new(), "k".repeat(513)] {
        let res = client
            .call(
                "chat.send",
                json!({"sessionKey": bad, "message": "hi", "idempotencyKey": uuid::Uuid::new_v4().to_string()}),
            )
            .await;
        assert_eq!(res["ok"], json!(false), "{res}");
        assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{res}");
    }
    assert_eq!(mock.requests().len(), 1);
}

fn pick_messages(payload: &Value) -> Value {
    payload["messages"].clone()
}

#[tokio::test]
async fn a_lockout_ends_after_its_time() {
    // A lockout that never ended would let anyone lock the owner out for
    // good with a few wrong tokens.
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "auth_failures = 2\nauth_lockout_secs = 1");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    let peer = Ipv4Addr::new(127, 0, 0, 5);
    for _ in 0..2 {
        refused_connect_from(&gateway, peer, connect_params(Some(&new_token()), &[], &[])).await;
    }
    let (error, _) =
        refused_connect_from(&gateway, peer, connect_params(Some(&token), &[], &[])).await;
    assert_eq!(error["details"]["code"], "AUTH_RATE_LIMITED", "{error}");
    let retry = error["retryAfterMs"].as_u64().unwrap();
    assert!(retry <= 1000, "{error}");
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let mut client = Client::open_with(gateway.addr, peer, "/", &[])
            .await
            .unwrap();
        let res = client.connect(connect_params(Some(&token), &[], &[])).await;
        if res["ok"] == json!(true) {
            break;
        }
        assert_eq!(
            res["error"]["details"]["code"], "AUTH_RATE_LIMITED",
            "{res}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "still locked out after {TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_unknown_decision_settles_nothing() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let marker = sandbox.work().join("ran");
    let command = format!("touch {}", marker.display());
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_x",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::sse(anthropic_text("Denied.", 30)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let key = new_key();
    let (run, approval) = run_to_approval(&mut admin, &key, &command).await;
    for decision in [
        json!("allow-everything"),
        json!("ALLOW-ONCE"),
        json!(null),
        json!(1),
    ] {
        let res = admin
            .call(
                "exec.approval.resolve",
                json!({"id": approval, "decision": decision}),
            )
            .await;
        assert_eq!(res["ok"], json!(false), "{decision}: {res}");
        assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{decision}: {res}");
    }
    assert!(!marker.exists());
    let listed = admin.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(listed[0]["id"], json!(approval));
    admin
        .call_ok(
            "exec.approval.resolve",
            json!({"id": approval, "decision": "deny"}),
        )
        .await;
    admin.chat_end(&run).await;
    assert!(!marker.exists());
}

/// A TCP connection to the gateway from `from` (a loopback address).
async fn tcp_from(addr: std::net::SocketAddr, from: Ipv4Addr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::new(from.into(), 0))
        .unwrap();
    tokio::time::timeout(TIMEOUT, socket.connect(addr))
        .await
        .expect("TCP connect timed out")
        .unwrap()
}

/// Whether the gateway closes `stream` (an end or a reset) within
/// `TIMEOUT`; what it sends before is read and dropped.
async fn closed_by_the_gateway(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    tokio::time::timeout(TIMEOUT, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// An HTTP response's head, read within `TIMEOUT` (panics without one).
async fn response_head(stream: &mut (impl tokio::io::AsyncRead + Unpin), what: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(TIMEOUT, async {
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "{what}: no answer within {TIMEOUT:?}");
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn silent_tcp_connections_over_the_pending_caps_are_closed_at_accept_and_the_owner_gets_in() {
    use tokio::io::AsyncWriteExt;
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // The head's own deadline is far beyond the test's: only the caps can
    // close these connections in time.
    write_gateway_config(
        &sandbox,
        "handshake_timeout_ms = 600000\nmax_pending_connections = 8\nmax_pending_connections_per_ip = 4",
    );
    let gateway = Gateway::start(&sandbox, &mock).await;
    let a = Ipv4Addr::new(127, 0, 0, 2);
    let mut silent = Vec::new();
    for _ in 0..6 {
        silent.push(tcp_from(gateway.addr, a).await);
    }
    for (i, stream) in silent.iter_mut().enumerate().skip(4) {
        assert!(
            closed_by_the_gateway(stream).await,
            "silent connection {i} from one address was kept open"
        );
    }
    // The first four hold their places and are served.
    let mut kept = silent.remove(0);
    kept.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let head = response_head(&mut kept, "a kept connection").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    silent.insert(0, kept);
    // The owner, from another address, connects and authenticates.
    let mut owner = gateway.admin().await;
    owner.call_ok("health", json!({})).await;
    // The global cap: four more from a second address fill it; a third
    // address is closed at once.
    let b = Ipv4Addr::new(127, 0, 0, 3);
    for _ in 0..4 {
        silent.push(tcp_from(gateway.addr, b).await);
    }
    let mut over = tcp_from(gateway.addr, Ipv4Addr::new(127, 0, 0, 4)).await;
    assert!(
        closed_by_the_gateway(&mut over).await,
        "a connection over the global cap was kept open"
    );
    owner.call_ok("health", json!({})).await;
}

/// A gateway with the Telegram channel in webhook mode and `gateway` lines
/// in `[gateway]`; returns it, its webhook secret and the Bot API mock.
async fn telegram_webhook_gateway(
    sandbox: &Sandbox,
    mock: &MockModel,
    gateway: &str,
) -> (Gateway, String, support::telegram_api::TelegramApi) {
    let api = support::telegram_api::TelegramApi::start().await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n{gateway}\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [\"111\"]\nmode = \"webhook\"\nwebhook_secret_env = \"TG_HOOK_SECRET\"\nwebhook_url = \"https://bot.example.com/channels/telegram\"\n",
            api.url
        ),
    )
    .unwrap();
    let secret = format!("s_{}", uuid::Uuid::new_v4().simple());
    let token = new_token();
    let mut cmd = gateway_command(sandbox, mock, Some(&token), &[]);
    cmd.env("TELEGRAM_BOT_TOKEN", &api.token)
        .env("TG_HOOK_SECRET", &secret);
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    gateway
        .stderr
        .wait_line(TIMEOUT, |l| {
            l.contains("channel telegram started").then_some(())
        })
        .await
        .expect("the Telegram channel starts");
    (gateway, secret, api)
}

#[tokio::test]
async fn a_dribbling_webhook_body_is_cut_at_its_deadline() {
    use tokio::io::AsyncWriteExt;
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let (gateway, secret, _api) =
        telegram_webhook_gateway(&sandbox, &mock, "request_timeout_ms = 500").await;
    let stream = tcp_from(gateway.addr, Ipv4Addr::LOCALHOST).await;
    let (mut read, mut write) = stream.into_split();
    write
        .write_all(
            format!(
                "POST /channels/telegram HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                 Content-Length: 100000\r\nX-Telegram-Bot-Api-Secret-Token: {secret}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // A byte every 20 ms: the whole body would take over half an hour.
    let dribbler = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            tick.tick().await;
            if write.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let head = response_head(&mut read, "a dribbling webhook body").await;
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(
        closed_by_the_gateway(&mut read).await,
        "the connection stayed open"
    );
    dribbler.abort();
    assert!(mock.requests().is_empty());
}

#[tokio::test]
async fn a_webhook_with_a_wrong_telegram_secret_is_refused_before_its_body_is_sent() {
    use tokio::io::AsyncWriteExt;
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // The body's deadline is beyond the test's: only a check of the head
    // can answer in time.
    let (gateway, _secret, _api) =
        telegram_webhook_gateway(&sandbox, &mock, "request_timeout_ms = 600000").await;
    for header in ["X-Telegram-Bot-Api-Secret-Token: wrong\r\n", ""] {
        let mut stream = tcp_from(gateway.addr, Ipv4Addr::LOCALHOST).await;
        stream
            .write_all(
                format!(
                    "POST /channels/telegram HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                     Content-Length: 1000\r\n{header}\r\n"
                )
                .as_bytes(),
            )
            .await
            .unwrap();
        // No body byte is ever sent.
        let head = response_head(&mut stream, "a webhook with a wrong secret").await;
        assert!(head.starts_with("HTTP/1.1 401"), "{header:?}: {head}");
    }
    assert!(mock.requests().is_empty());
}

/// A refused connect from `from` with request `headers` on the upgrade.
async fn refused_connect_with(
    gateway: &Gateway,
    from: Ipv4Addr,
    headers: &[(&str, &str)],
    params: Value,
) -> Value {
    let mut client = Client::open_with(gateway.addr, from, "/", headers)
        .await
        .unwrap();
    let res = client.connect(params).await;
    assert_eq!(res["ok"], json!(false), "{res}");
    res["error"].clone()
}

#[tokio::test]
async fn behind_a_trusted_proxy_failures_count_per_forwarded_client_and_the_owner_gets_in() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(
        &sandbox,
        "auth_failures = 2\nauth_lockout_secs = 600\ntrusted_proxies = [\"127.0.0.9\", \"10.0.0.0/8\"]",
    );
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    let proxy = Ipv4Addr::new(127, 0, 0, 9);
    // Three guessers behind the proxy, two failures each: six from the
    // proxy's address, each guesser at its own limit.
    for client in 1..=3 {
        for _ in 0..2 {
            let xff = format!("198.51.100.{client}");
            let error = refused_connect_with(
                &gateway,
                proxy,
                &[("X-Forwarded-For", &xff)],
                connect_params(Some(&new_token()), &[], &[]),
            )
            .await;
            assert_eq!(error["details"]["code"], "AUTH_TOKEN_MISMATCH", "{error}");
        }
    }
    // The owner, behind the same proxy (and through a second one), is in.
    let mut owner = Client::open_with(
        gateway.addr,
        proxy,
        "/",
        &[("X-Forwarded-For", "203.0.113.5, 10.1.2.3")],
    )
    .await
    .unwrap();
    owner
        .connect_ok(connect_params(Some(&token), &[], &[]))
        .await;
    // A guesser stays locked out, also when it writes the owner's address
    // to the left of the hop the proxy added, or uses `Forwarded`.
    for headers in [
        vec![("X-Forwarded-For", "203.0.113.5, 198.51.100.1")],
        vec![("Forwarded", "for=203.0.113.5, for=198.51.100.2")],
    ] {
        let error = refused_connect_with(
            &gateway,
            proxy,
            &headers,
            connect_params(Some(&token), &[], &[]),
        )
        .await;
        assert_eq!(
            error["details"]["code"], "AUTH_RATE_LIMITED",
            "{headers:?}: {error}"
        );
    }
    // A peer that is no trusted proxy cannot choose its address.
    let stranger = Ipv4Addr::new(127, 0, 0, 2);
    for i in 0..2 {
        let xff = format!("192.0.2.{i}");
        refused_connect_with(
            &gateway,
            stranger,
            &[("X-Forwarded-For", &xff)],
            connect_params(Some(&new_token()), &[], &[]),
        )
        .await;
    }
    let error = refused_connect_with(
        &gateway,
        stranger,
        &[("X-Forwarded-For", "203.0.113.5")],
        connect_params(Some(&token), &[], &[]),
    )
    .await;
    assert_eq!(error["details"]["code"], "AUTH_RATE_LIMITED", "{error}");
}

#[tokio::test]
async fn without_trusted_proxies_forwarding_headers_change_no_address() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "auth_failures = 2\nauth_lockout_secs = 600");
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    let peer = Ipv4Addr::new(127, 0, 0, 2);
    for (i, header) in ["X-Forwarded-For", "Forwarded"].into_iter().enumerate() {
        let value = if header == "Forwarded" {
            format!("for=192.0.2.{i}")
        } else {
            format!("192.0.2.{i}")
        };
        refused_connect_with(
            &gateway,
            peer,
            &[(header, &value)],
            connect_params(Some(&new_token()), &[], &[]),
        )
        .await;
    }
    let error = refused_connect_with(
        &gateway,
        peer,
        &[("X-Forwarded-For", "203.0.113.77")],
        connect_params(Some(&token), &[], &[]),
    )
    .await;
    assert_eq!(error["details"]["code"], "AUTH_RATE_LIMITED", "{error}");
}

#[tokio::test]
async fn the_global_failure_budget_stops_new_addresses_but_not_the_owner_s() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(
        &sandbox,
        "auth_failures = 5\nauth_failures_global = 3\nauth_lockout_secs = 600",
    );
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    // The owner has connected from its address before.
    drop(gateway.admin().await);
    for last in 2..=4 {
        let (error, _) = refused_connect_from(
            &gateway,
            Ipv4Addr::new(127, 0, 0, last),
            connect_params(Some(&new_token()), &[], &[]),
        )
        .await;
        assert_eq!(error["details"]["code"], "AUTH_TOKEN_MISMATCH", "{error}");
    }
    // A new address is not even checked, the right token or not.
    let (error, close) = refused_connect_from(
        &gateway,
        Ipv4Addr::new(127, 0, 0, 5),
        connect_params(Some(&token), &[], &[]),
    )
    .await;
    assert_eq!(error["details"]["code"], "AUTH_RATE_LIMITED", "{error}");
    assert_eq!(close.0, 1008);
    // The owner's known address still gets in.
    let mut owner = gateway.admin().await;
    owner.call_ok("health", json!({})).await;
}

#[tokio::test]
async fn idle_unauthenticated_websockets_hold_no_authenticated_place() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(
        &sandbox,
        "max_connections = 2\nmax_connections_per_ip = 2\n\
         max_preauth_connections = 4\nmax_preauth_connections_per_ip = 3",
    );
    let gateway = Gateway::start(&sandbox, &mock).await;
    let idler = Ipv4Addr::new(127, 0, 0, 2);
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(
            Client::open_with(gateway.addr, idler, "/", &[])
                .await
                .unwrap(),
        );
    }
    match Client::upgrade(gateway.addr, idler, "/", &[], None).await {
        Err(Refused::Http(503)) => {}
        other => panic!(
            "a fourth idle websocket from one address: {:?}",
            other.err()
        ),
    }
    // The owner's two clients take the two authenticated places.
    let mut first = gateway.admin().await;
    let mut second = gateway.admin().await;
    first.call_ok("health", json!({})).await;
    second.call_ok("health", json!({})).await;
    // The unauthenticated cap in all: one more stranger fills it.
    idle.push(
        Client::open_with(gateway.addr, Ipv4Addr::new(127, 0, 0, 3), "/", &[])
            .await
            .unwrap(),
    );
    match Client::upgrade(gateway.addr, Ipv4Addr::new(127, 0, 0, 4), "/", &[], None).await {
        Err(Refused::Http(503)) => {}
        other => panic!(
            "a websocket over the unauthenticated cap: {:?}",
            other.err()
        ),
    }
}

#[tokio::test]
async fn a_password_under_twelve_characters_is_refused_at_start() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    write_gateway_config(&sandbox, "auth = \"password\"");
    let mut cmd = gateway_command(&sandbox, &mock, None, &[]);
    cmd.env("PINCER_GATEWAY_PASSWORD", "elevenchars");
    let mut child = cmd.spawn().unwrap();
    let stderr = spawn_stderr_reader(&mut child);
    assert_eq!(
        stderr.wait_line(TIMEOUT, parse_listening).await,
        None,
        "listening with an 11-character password: {}",
        stderr.text()
    );
    let status = tokio::time::timeout(TIMEOUT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!status.success());
    let text = stderr.text();
    assert!(
        text.contains(
            "the gateway password in $PINCER_GATEWAY_PASSWORD is shorter than 12 characters"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn scopes_that_are_not_an_array_of_names_are_refused_not_made_admin() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let token = gateway.token.clone().unwrap();
    for scopes in [
        json!("operator.read"),
        json!({"operator.read": true}),
        json!(1),
        json!(true),
        json!([1]),
        json!(["operator.read", null]),
    ] {
        let mut params = connect_params(Some(&token), &[], &[]);
        params["scopes"] = scopes.clone();
        let (error, close) = refused_connect(&gateway, params).await;
        assert_eq!(error["code"], "INVALID_REQUEST", "{scopes}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains("`scopes`"),
            "{scopes}: {error}"
        );
        assert_eq!(close.0, 1008, "{scopes}");
    }
}

#[tokio::test]
async fn bypass_takes_the_approvals_scope() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let key = new_key();
    let mut writer = gateway.operator(&["operator.write"], &[]).await;
    // pincer's id, and OpenClaw's name for the same mode.
    for mode in ["bypass", "full"] {
        let res = writer
            .call(
                "sessions.patch",
                json!({"key": key, "permissionMode": mode}),
            )
            .await;
        assert_eq!(res["ok"], json!(false), "{res}");
        assert_eq!(res["error"]["code"], "FORBIDDEN", "{res}");
        assert_eq!(
            res["error"]["details"]["missingScope"], "operator.approvals",
            "{res}"
        );
    }
    // Other modes need write only.
    for mode in ["plan", "read-only", "guarded"] {
        writer
            .call_ok(
                "sessions.patch",
                json!({"key": key, "permissionMode": mode}),
            )
            .await;
    }
    let mut approver = gateway
        .operator(&["operator.write", "operator.approvals"], &[])
        .await;
    approver
        .call_ok(
            "sessions.patch",
            json!({"key": key, "permissionMode": "bypass"}),
        )
        .await;
}

#[tokio::test]
async fn sessions_patch_refuses_a_model_the_catalog_does_not_know() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let key = new_key();
    for model in [
        "anthropic/no-such-model-9",
        "no-such-provider/x",
        "nonsense",
    ] {
        let res = admin
            .call("sessions.patch", json!({"key": key, "model": model}))
            .await;
        assert_eq!(res["ok"], json!(false), "{model}: {res}");
        assert_eq!(res["error"]["code"], "INVALID_REQUEST", "{model}: {res}");
        assert!(
            res["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("model:"),
            "{model}: {res}"
        );
    }
    let res = admin
        .call(
            "sessions.patch",
            json!({"key": key, "model": "anthropic/no-such-model-9"}),
        )
        .await;
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown model `anthropic/no-such-model-9`"),
        "{res}"
    );
    // A model models.list offers is taken.
    let models = admin.call_ok("models.list", json!({})).await;
    let listed = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["provider"] == "anthropic")
        .unwrap_or_else(|| panic!("no anthropic model in {models}"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    admin
        .call_ok("sessions.patch", json!({"key": key, "model": listed}))
        .await;
    // A harness to run it in is OpenClaw's: only null (pincer's own loop)
    // is taken.
    let res = admin
        .call(
            "sessions.patch",
            json!({"key": key, "model": listed, "agentRuntime": "codex"}),
        )
        .await;
    assert!(
        res["error"]["message"]
            .as_str()
            .unwrap()
            .contains("agentRuntime `codex` is not supported by pincer"),
        "{res}"
    );
    admin
        .call_ok(
            "sessions.patch",
            json!({"key": key, "model": null, "agentRuntime": null}),
        )
        .await;
}

/// A key that names a new session is on disk when the session is made:
/// keys made back to back (closer than the saver spaces its writes) are
/// each there at once, so that a gateway killed right after finds them.
#[tokio::test]
async fn a_new_session_s_key_is_written_before_it_is_answered() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    let file = sandbox.home().join("gateway").join("keys.json");
    for n in 0..3 {
        let key = format!("web:made-{n}");
        let created = admin.call_ok("sessions.create", json!({"key": key})).await;
        let session = created["sessionId"].as_str().unwrap();
        let written = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            written.contains(&key) && written.contains(session),
            "{key} is not on disk yet: {written}"
        );
    }
}

#[tokio::test]
async fn the_gateway_s_session_keys_file_is_readable_by_the_user_alone() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut admin = gateway.admin().await;
    mock.push(Reply::sse(anthropic_text("Hi.", 5)));
    let run = admin.chat_send(&new_key(), "hello").await;
    admin.chat_end(&run).await;
    let file = sandbox.home().join("gateway").join("keys.json");
    // Written by the gateway's saver task, as soon as the key is made.
    support::wait_until("keys.json is written", TIMEOUT, || file.is_file()).await;
    let mode = std::fs::metadata(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
}
