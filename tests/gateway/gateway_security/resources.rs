//! The gateway's resources under load (issue 30): thousands of sessions
//! under the usual 1,024-descriptor limit, idle sessions unloaded and
//! reloaded on use, read-only clients that cannot make the hub grow, and
//! the soft open-files limit raised at start. Each test drives the real
//! binary and reads what it holds from `/proc` (Linux only). A module of
//! the gateway security tests' binary, which builds `tests/support` once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::acp_client::{Sandbox, TIMEOUT};
use crate::support::gateway::{Client, Gateway, connect_params, new_token, write_gateway_config};
use crate::support::mock_model::{MockModel, Reply};
use crate::support::wait_until;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::process::Command;

/// A model that answers every request with the same short text and keeps
/// nothing: the shared mock records every request, which for thousands of
/// runs would cost the test more memory than the gateway.
struct LeanModel {
    url: String,
    requests: Arc<AtomicUsize>,
}

impl LeanModel {
    async fn start() -> Self {
        let body = crate::support::mock_model::fixture("anthropic/text.sse");
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            counted.fetch_add(1, Ordering::Relaxed);
            async move {
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(body))
                    .unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, requests }
    }
}

/// `pincer gateway` talking to the model at `model_url`, with the hub's
/// idle unloads logged, started under a soft and hard open-files limit
/// (by util-linux's `prlimit`, which sets them and execs the gateway, so
/// the child's pid is the gateway's).
fn gateway_command(sandbox: &Sandbox, model_url: &str, token: &str, nofile: (u64, u64)) -> Command {
    let mut cmd = sandbox.command(&[]);
    let cmd_std = cmd.as_std_mut();
    let (soft, hard) = nofile;
    let pincer = cmd_std.get_program().to_os_string();
    let mut wrapped = Command::new("prlimit");
    wrapped
        .arg(format!("--nofile={soft}:{hard}"))
        .arg("--")
        .arg(pincer)
        .args(["gateway", "--port", "0"]);
    let std = wrapped.as_std_mut();
    std.env_clear();
    for (key, value) in cmd_std.get_envs() {
        if let Some(value) = value {
            std.env(key, value);
        }
    }
    if let Some(dir) = cmd_std.get_current_dir() {
        std.current_dir(dir);
    }
    wrapped
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", model_url)
        .env("PINCER_GATEWAY_TOKEN", token)
        .env("RUST_LOG", "warn,pincer::gateway::hub=debug")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    wrapped
}

fn pid_of(gateway: &Gateway) -> u32 {
    gateway.child.id().unwrap()
}

/// The descriptors the process holds.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// A line of `/proc/PID/<file>` that starts with `field`, its first
/// number.
fn proc_number(pid: u32, file: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    line[field.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    proc_number(pid, "status", "VmRSS:")
}

/// How many sessions the gateway has unloaded so far, by its log.
fn unloads(gateway: &Gateway) -> usize {
    gateway
        .stderr
        .text()
        .matches("unloaded an idle session")
        .count()
}

/// A client that may write and hears only the sessions it uses.
async fn writer(gateway: &Gateway) -> Client {
    gateway
        .operator(
            &["operator.read", "operator.write"],
            &["session-scoped-events"],
        )
        .await
}

/// Sends one message to `key` and waits for its run to end well.
async fn chat(client: &mut Client, key: &str, text: &str) {
    let run = client.chat_send(key, text).await;
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
}

/// Issue 30: 5,000 sessions through a gateway held to 1,024 descriptors.
/// Before, each session kept its transcript open and stayed loaded for
/// the gateway's life: at about a thousand sessions every connection and
/// every new session was refused, and what the sessions held stayed after
/// their clients left. Now transcripts are not held open and idle sessions
/// are unloaded, so afterwards the gateway still serves, and its
/// descriptors and memory are back near what it held before the load.
///
/// Most sessions are opened by a writer's `chat.subscribe` (a session
/// with its transcript, as a chat tab makes one); one in fifty also gets a
/// message through the model, which in a debug build costs some
/// fifty times as much.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_sessions_under_a_1024_descriptor_limit_leave_the_gateway_as_idle() {
    const SESSIONS: usize = 5_000;
    const PROMPTED_EVERY: usize = 50;
    const CLIENTS: usize = 16;
    const WARM_UP: usize = 16;
    let sandbox = Sandbox::new();
    // Sixteen clients from one address open their websockets at once:
    // more than the default eight that may wait to authenticate.
    write_gateway_config(
        &sandbox,
        "session_idle_secs = 1\nmax_preauth_connections_per_ip = 32",
    );
    let model = LeanModel::start().await;
    let token = new_token();
    let gateway = Gateway::spawn(
        gateway_command(&sandbox, &model.url, &token, (1024, 1024)),
        Some(&token),
    )
    .await;
    let pid = pid_of(&gateway);
    assert_eq!(proc_number(pid, "limits", "Max open files"), 1024);

    // Warm up what a first session loads once (config, catalogs, the
    // model's connection), and let those sessions go idle: the baseline.
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(writer(&gateway).await);
    }
    for (i, client) in clients.iter_mut().enumerate() {
        for j in 0..WARM_UP / CLIENTS {
            chat(client, &format!("warm:{i}:{j}"), "hello").await;
        }
    }
    drop(clients);
    wait_until("the warm-up sessions unload", TIMEOUT, || {
        unloads(&gateway) >= WARM_UP
    })
    .await;
    let fds_before = descriptors(pid);
    let rss_before = rss_kib(pid);

    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let addr = gateway.addr;
            let token = token.clone();
            tokio::spawn(async move {
                let mut client = Client::open(addr).await;
                client
                    .connect_ok(connect_params(
                        Some(&token),
                        &["operator.read", "operator.write"],
                        &["session-scoped-events"],
                    ))
                    .await;
                for j in (i..SESSIONS).step_by(CLIENTS) {
                    let key = format!("load:{j}");
                    if j % PROMPTED_EVERY == 0 {
                        let run = client.chat_send(&key, "hello").await;
                        let end = client.chat_end(&run).await;
                        assert_eq!(end["payload"]["state"], "final", "session {j}: {end}");
                    } else {
                        let answer = client
                            .call_ok("chat.subscribe", json!({"sessionKey": key}))
                            .await;
                        assert_eq!(answer, json!({"ok": true}), "session {j}");
                    }
                    // The client keeps what it received: let it go.
                    client.events.clear();
                    client.received.clear();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let rss_loaded = rss_kib(pid);
    wait_until("every session unloads", Duration::from_secs(60), || {
        unloads(&gateway) >= WARM_UP + SESSIONS
    })
    .await;

    // Still serving: a new connection, a new session, an old one reloaded
    // with its history.
    let mut client = writer(&gateway).await;
    chat(&mut client, "after:the:load", "still there?").await;
    chat(&mut client, "load:100", "and you?").await;
    let history = client
        .call_ok("chat.history", json!({"sessionKey": "load:100"}))
        .await;
    assert_eq!(
        history["messages"].as_array().unwrap().len(),
        4,
        "{history}"
    );
    drop(client);
    wait_until("the last sessions unload", TIMEOUT, || {
        unloads(&gateway) >= WARM_UP + SESSIONS + 2
    })
    .await;

    // The saver wrote keys.json fewer times than keys were made, and lost
    // none of them.
    let stored_keys = || -> usize {
        std::fs::read_to_string(sandbox.home().join("gateway/keys.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|stored| stored["keys"].as_object().map(|keys| keys.len()))
            .unwrap_or(0)
    };
    wait_until("keys.json names every session", TIMEOUT, || {
        stored_keys() == WARM_UP + SESSIONS + 1
    })
    .await;

    let fds_after = descriptors(pid);
    let rss_after = rss_kib(pid);
    eprintln!(
        "descriptors {fds_before} -> {fds_after}; RSS {rss_before} KiB -> {rss_loaded} KiB loaded -> {rss_after} KiB; model requests {}",
        model.requests.load(Ordering::Relaxed)
    );
    assert!(
        fds_after <= fds_before + 8,
        "descriptors {fds_before} before the load, {fds_after} after"
    );
    assert!(
        rss_after <= rss_before + 48 * 1024,
        "resident memory {rss_before} KiB before the load, {rss_after} KiB after"
    );
    gateway.stop().await;
}

/// A session idle for `session_idle_secs` is unloaded; the next message
/// loads it again from its transcript, and the model sees the whole
/// conversation as before.
#[tokio::test]
async fn an_idle_session_is_unloaded_and_reloaded_with_its_history() {
    let sandbox = Sandbox::new();
    write_gateway_config(&sandbox, "session_idle_secs = 1");
    let mock = MockModel::start().await;
    let token = new_token();
    let gateway = Gateway::spawn(
        gateway_command(&sandbox, &mock.anthropic_url(), &token, (1024, 1024)),
        Some(&token),
    )
    .await;
    let mut client = writer(&gateway).await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    chat(&mut client, "main:idle", "first question").await;
    let session = client
        .call_ok("chat.history", json!({"sessionKey": "main:idle"}))
        .await["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let found = gateway
        .stderr
        .wait_line(TIMEOUT, |l| {
            (l.contains("unloaded an idle session") && l.contains(&session)).then_some(())
        })
        .await;
    assert!(found.is_some(), "not unloaded:\n{}", gateway.stderr.text());

    let history = client
        .call_ok("chat.history", json!({"sessionKey": "main:idle"}))
        .await;
    let texts: Vec<(Value, Value)> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].clone(), m["content"][0]["text"].clone()))
        .collect();
    assert_eq!(
        texts,
        vec![
            (json!("user"), json!("first question")),
            (json!("assistant"), json!("Hello from the mock model.")),
        ]
    );

    mock.push(Reply::fixture("anthropic/text.sse"));
    chat(&mut client, "main:idle", "second question").await;
    let requests = mock.requests();
    let messages: Vec<Value> = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].clone())
        .collect();
    assert_eq!(
        messages,
        vec![json!("user"), json!("assistant"), json!("user")]
    );
    let again = client
        .call_ok("chat.history", json!({"sessionKey": "main:idle"}))
        .await;
    assert_eq!(again["sessionId"], json!(session));
    assert_eq!(again["messages"].as_array().unwrap().len(), 4);
    assert_eq!(mock.violations(), Vec::<String>::new());
    gateway.stop().await;
}

/// Issue 30: a read-only client's `chat.subscribe` on keys that name no
/// session created a session for each (3,000 keys took the gateway from
/// 18 to 277 MB). A reader now watches only sessions that exist: its keys
/// leave no session, no transcript and no key behind; a writer's
/// subscribe still opens the session.
#[tokio::test]
async fn a_reader_subscribing_to_unknown_keys_creates_nothing() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut reader = gateway
        .operator(&["operator.read"], &["session-scoped-events"])
        .await;
    for i in 0..200 {
        let answer = reader
            .call_ok(
                "chat.subscribe",
                json!({"sessionKey": format!("ghost:{i}")}),
            )
            .await;
        assert_eq!(answer, json!({"ok": true}));
    }
    let transcripts = || -> usize {
        let Ok(dirs) = std::fs::read_dir(sandbox.home().join("sessions")) else {
            return 0;
        };
        dirs.flatten()
            .map(|d| {
                std::fs::read_dir(d.path())
                    .unwrap()
                    .flatten()
                    .filter(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
                    .count()
            })
            .sum()
    };
    let keys = || -> Value {
        std::fs::read_to_string(sandbox.home().join("gateway/keys.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .map(|stored| stored["keys"].clone())
            .unwrap_or(json!({}))
    };
    assert_eq!((transcripts(), keys()), (0, json!({})));

    let mut writer = writer(&gateway).await;
    writer
        .call_ok("chat.subscribe", json!({"sessionKey": "ghost:0"}))
        .await;
    // keys.json is written by the gateway's saver task, just after.
    wait_until("keys.json names the subscribed key", TIMEOUT, || {
        keys() != json!({})
    })
    .await;
    let stored = keys();
    assert_eq!(
        stored.as_object().unwrap().keys().collect::<Vec<_>>(),
        vec!["ghost:0"]
    );
    assert_eq!(transcripts(), 1);
    gateway.stop().await;
}

/// Every pincer raises its soft open-files limit to the hard one at start:
/// the usual soft limit of 1,024 is what ran the gateway out.
#[tokio::test]
async fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let token = new_token();
    let gateway = Gateway::spawn(
        gateway_command(&sandbox, &mock.anthropic_url(), &token, (256, 2048)),
        Some(&token),
    )
    .await;
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", pid_of(&gateway))).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers, vec!["2048", "2048"], "{line}");
    gateway.stop().await;
}

/// What an idle authenticated client costs the gateway: a few buffers and
/// its tasks, not what its handshake built. (`hello-ok`'s tree, about
/// 9 KB, was held for the connection's life by the connection's own
/// state: 30 KB a client in all. `benches/gateway_fanout.rs` measures
/// 10,000 on the release binary.)
#[tokio::test]
async fn an_idle_client_costs_the_gateway_little_memory() {
    let sandbox = Sandbox::new();
    write_gateway_config(
        &sandbox,
        "max_connections_per_ip = 2000\nmax_pending_connections_per_ip = 2000\nmax_preauth_connections_per_ip = 2000\n",
    );
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let pid = pid_of(&gateway);
    // A few first: the runtime's and the allocator's own start-up is not
    // the clients'.
    let mut clients = Vec::new();
    for _ in 0..20 {
        clients.push(gateway.operator(&["operator.read"], &[]).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = rss_kib(pid);
    const CLIENTS: u64 = 600;
    for _ in 0..CLIENTS {
        clients.push(gateway.operator(&["operator.read"], &[]).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss_kib(pid);
    let each = after.saturating_sub(before) as f64 / CLIENTS as f64;
    assert!(
        each <= 20.0,
        "{each:.1} KiB a client ({before} KiB -> {after} KiB for {CLIENTS})"
    );
    // They are all still served.
    let last = clients.last_mut().unwrap();
    last.call_ok("health", json!({})).await;
}
