//! The gateway under load, on the release binary, with its clients in a
//! process of their own (this bench run again as `clients`), so that what
//! the clients cost is measured apart from what the gateway costs.
//!
//! Streaming (the default): 1,000 websocket clients on loopback follow 100
//! sessions (ten per session, with the `session-scoped-events` cap), and
//! every session streams an answer at once; each client stays connected
//! until every run has ended. The sessions' streams are independent, as
//! a hundred users' model streams are: each begins at its own point of
//! the gap between tokens (session i at i/100 of it), so their tokens do
//! not all come in the same millisecond. `PINCER_BENCH_IN_PHASE=1` has
//! every stream send its tokens at once instead, the worst case (a
//! thousand frames due together every gap); both are reported in the
//! README. The mock model stamps each
//! text delta with the time it sent it, so each client measures the
//! latency from the model's token to its own `chat` frame. Reported: p50 /
//! p99 / max of that latency over every frame of every client, the slowest
//! client's p99 (no client may starve another), the gateway's peak RSS and
//! the CPU time of the gateway and of the clients. Targets: p99 ≤ 5 ms,
//! RSS ≤ 60 MB.
//!
//! Idle (`PINCER_BENCH_IDLE=1`): 10,000 clients connect, authenticate and
//! stay; reported: the gateway's RSS with all of them connected. Target:
//! ≤ 250 MB.
//!
//! A run in which a client misses a frame panics: its figures would mean
//! nothing. `PINCER_BENCH_CLIENTS` (1000; 10000 idle),
//! `PINCER_BENCH_SESSIONS` (100), `PINCER_BENCH_TOKENS` (50) and
//! `PINCER_BENCH_TOKEN_MS` (20, the gap between a session's tokens) change
//! the sizes; `PINCER_BENCH_BY_TOKEN=1` also reports the latency by each
//! token's place in the stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "bench-token-0123456789abcdef";
const P99_TARGET_MS: f64 = 5.0;
const RSS_TARGET_MB: f64 = 60.0;
const IDLE_RSS_TARGET_MB: f64 = 250.0;
/// Handshakes the clients' process has under way at once.
const CONNECTING: usize = 32;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("clients") {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        return runtime.block_on(clients_process());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let idle = std::env::var("PINCER_BENCH_IDLE").is_ok_and(|v| v == "1");
    let clients = env_count("PINCER_BENCH_CLIENTS", if idle { 10_000 } else { 1000 });
    let sessions = env_count("PINCER_BENCH_SESSIONS", 100).min(clients);
    let tokens = env_count("PINCER_BENCH_TOKENS", 50);
    let gap = Duration::from_millis(env_count("PINCER_BENCH_TOKEN_MS", 20) as u64);
    if idle {
        println!(
            "pincer gateway, idle: {clients} authenticated clients ({})",
            env!("CARGO_BIN_EXE_pincer")
        );
    } else {
        println!(
            "pincer gateway fan-out: {clients} clients, {sessions} sessions, {tokens} tokens each, the streams {} ({})",
            if std::env::var("PINCER_BENCH_IN_PHASE").is_ok_and(|v| v == "1") {
                "in phase"
            } else {
                "independent"
            },
            env!("CARGO_BIN_EXE_pincer")
        );
    }

    let in_phase = std::env::var("PINCER_BENCH_IN_PHASE").is_ok_and(|v| v == "1");
    let model = start_model(tokens, gap, if in_phase { 1 } else { sessions }).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let room = clients + 100;
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\nmax_connections = {room}\nmax_connections_per_ip = {room}\n\
             max_pending_connections = {room}\nmax_pending_connections_per_ip = {room}\n\
             max_preauth_connections = {room}\nmax_preauth_connections_per_ip = {room}\n",
        ),
    )
    .unwrap();
    let mut gateway = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["gateway", "--port", "0"])
        .current_dir(work.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("PINCER_HOME", home.path())
        .env("PINCER_GATEWAY_TOKEN", TOKEN)
        .env("ANTHROPIC_API_KEY", "bench-key")
        .env("ANTHROPIC_BASE_URL", &model)
        .env("RUST_LOG", "warn")
        // Allocator settings to try (`MIMALLOC_PURGE_DELAY=0`, …) pass through.
        .envs(std::env::vars().filter(|(k, _)| k.starts_with("MIMALLOC_")))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = gateway.id();
    let mut stderr = BufReader::new(gateway.stderr.take().unwrap());
    let mut line = String::new();
    let url = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "the gateway did not start"
        );
        if let Some(at) = line.find("ws://") {
            break line[at..].trim().to_string();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::stderr()));
    let rss_alone = rss(pid, "VmRSS:");

    // The clients, in their own process: they connect and follow their
    // sessions, say "ready", and stream on "go".
    let mut process = Command::new(std::env::current_exe().unwrap())
        .arg("clients")
        .env("PINCER_BENCH_URL", &url)
        .env("PINCER_BENCH_CLIENTS", clients.to_string())
        .env("PINCER_BENCH_SESSIONS", sessions.to_string())
        .env("PINCER_BENCH_TOKENS", tokens.to_string())
        .env("PINCER_BENCH_IDLE", if idle { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let client_pid = process.id();
    let mut to_clients = process.stdin.take().unwrap();
    let mut from_clients = BufReader::new(process.stdout.take().unwrap());
    let connecting = std::time::Instant::now();
    line.clear();
    from_clients.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the clients did not connect");
    let connected_in = connecting.elapsed();
    let rss_connected = rss(pid, "VmRSS:");
    let cpu_before = cpu_seconds(pid);
    let clients_cpu_before = cpu_seconds(client_pid);

    if idle {
        // Settled: what the connections hold, not their handshakes.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_idle = rss(pid, "VmRSS:");
        let peak = rss(pid, "VmHWM:");
        writeln!(to_clients, "stop").unwrap();
        let _ = process.wait();
        let _ = gateway.kill();
        let _ = gateway.wait();
        let mb = |b: u64| b as f64 / 1024.0 / 1024.0;
        println!(
            "  connected in {:.2} s; gateway RSS {:.1} MB with {clients} clients (target ≤ {IDLE_RSS_TARGET_MB} MB){}, {:.1} MB alone, peak {:.1} MB; {:.1} KB a client",
            connected_in.as_secs_f64(),
            mb(rss_idle),
            if mb(rss_idle) <= IDLE_RSS_TARGET_MB {
                ""
            } else {
                " MISSED"
            },
            mb(rss_alone),
            mb(peak),
            (rss_idle.saturating_sub(rss_alone)) as f64 / 1024.0 / clients as f64,
        );
        println!(
            "{}",
            json!({
                "bench": "gateway_idle",
                "clients": clients,
                "rss_mb": {"value": mb(rss_idle), "alone": mb(rss_alone), "peak": mb(peak), "target": IDLE_RSS_TARGET_MB, "met": mb(rss_idle) <= IDLE_RSS_TARGET_MB},
            })
        );
        return;
    }

    let began = std::time::Instant::now();
    writeln!(to_clients, "go").unwrap();
    line.clear();
    from_clients.read_line(&mut line).unwrap();
    let elapsed = began.elapsed();
    let gateway_cpu = cpu_seconds(pid) - cpu_before;
    let report: Value = serde_json::from_str(&line).expect("the clients' latencies");
    let clients_cpu = cpu_seconds(client_pid) - clients_cpu_before;
    let _ = process.wait();
    let rss_peak = rss(pid, "VmHWM:");
    let _ = gateway.kill();
    let _ = gateway.wait();

    // Where the tail is: the latency of each token by its place in the
    // stream (the last one comes with the end of every run at once).
    if std::env::var("PINCER_BENCH_BY_TOKEN").is_ok_and(|v| v == "1") {
        for index in 0..tokens {
            let mut at: Vec<f64> = report
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|c| c.as_array().unwrap().get(index).and_then(Value::as_f64))
                .collect();
            at.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "  token {index}: p50 {:.2} ms, p99 {:.2} ms",
                percentile(&at, 0.5),
                percentile(&at, 0.99)
            );
        }
    }
    let mut all: Vec<f64> = Vec::new();
    let mut worst_client_p99: f64 = 0.0;
    for client in report.as_array().unwrap() {
        let mut latencies: Vec<f64> = client
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(latencies.len(), tokens, "a client missed frames");
        latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
        worst_client_p99 = worst_client_p99.max(percentile(&latencies, 0.99));
        all.extend(latencies);
    }
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = percentile(&all, 0.5);
    let p99 = percentile(&all, 0.99);
    let max = all.last().copied().unwrap_or_default();
    let rss_mb = rss_peak as f64 / 1024.0 / 1024.0;
    println!(
        "  frames: {} in {:.2} s ({:.0} frames/s); {clients} clients connected in {:.2} s",
        all.len(),
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64(),
        connected_in.as_secs_f64(),
    );
    println!(
        "  token → client frame: p50 {p50:.2} ms, p99 {p99:.2} ms (target ≤ {P99_TARGET_MS} ms){}, max {max:.2} ms",
        if p99 <= P99_TARGET_MS { "" } else { " MISSED" }
    );
    println!("  slowest client's p99: {worst_client_p99:.2} ms");
    println!(
        "  gateway peak RSS: {rss_mb:.1} MB (target ≤ {RSS_TARGET_MB} MB){}; {:.1} MB alone, {:.1} MB with the clients connected",
        if rss_mb <= RSS_TARGET_MB {
            ""
        } else {
            " MISSED"
        },
        rss_alone as f64 / 1024.0 / 1024.0,
        rss_connected as f64 / 1024.0 / 1024.0,
    );
    println!(
        "  CPU while streaming: gateway {gateway_cpu:.2} s, clients {clients_cpu:.2} s (2 cores: {:.2} s of wall time)",
        elapsed.as_secs_f64()
    );
    println!(
        "{}",
        json!({
            "bench": "gateway_fanout",
            "clients": clients,
            "sessions": sessions,
            "tokens": tokens,
            "in_phase": std::env::var("PINCER_BENCH_IN_PHASE").is_ok_and(|v| v == "1"),
            "frames": all.len(),
            "latency_ms": {"p50": p50, "p99": p99, "max": max, "worst_client_p99": worst_client_p99, "target_p99": P99_TARGET_MS, "met": p99 <= P99_TARGET_MS},
            "peak_rss_mb": {"value": rss_mb, "target": RSS_TARGET_MB, "met": rss_mb <= RSS_TARGET_MB},
            "cpu_s": {"gateway": gateway_cpu, "clients": clients_cpu},
        })
    );
}

/// The clients' process: connects them all (a few handshakes at a time),
/// says "ready", and then either holds them until "stop" (idle) or, on
/// "go", has each session's first client send the prompt and prints every
/// client's latencies as one JSON line.
async fn clients_process() {
    let url = std::env::var("PINCER_BENCH_URL").unwrap();
    let clients = env_count("PINCER_BENCH_CLIENTS", 1000);
    let sessions = env_count("PINCER_BENCH_SESSIONS", 100);
    let tokens = env_count("PINCER_BENCH_TOKENS", 50);
    let idle = std::env::var("PINCER_BENCH_IDLE").is_ok_and(|v| v == "1");
    let connected: Vec<Socket> = futures::stream::iter(0..clients)
        .map(|i| {
            let url = url.clone();
            async move { connect(&url, (!idle).then_some(i % sessions)).await }
        })
        .buffered(CONNECTING)
        .collect()
        .await;
    println!("ready");
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut line = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut stdin, &mut line)
        .await
        .unwrap();
    if idle {
        return;
    }
    assert_eq!(line.trim(), "go");
    let tasks: Vec<_> = connected
        .into_iter()
        .enumerate()
        .map(|(i, ws)| tokio::spawn(stream(ws, i % sessions, i < sessions, tokens)))
        .collect();
    let mut all = Vec::with_capacity(clients);
    // A client whose run ended stays connected until every run has: a
    // thousand clients leaving at once, while other sessions still
    // stream, is no part of following a stream (and made the last tokens
    // of the slower runs wait behind the gateway's closing of the rest).
    let mut open = Vec::with_capacity(clients);
    for task in tasks {
        let (latencies, ws) = task.await.unwrap();
        all.push(latencies);
        open.push(ws);
    }
    println!("{}", json!(all));
    drop(open);
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A client: connected, authenticated and, with a session, following it.
async fn connect(url: &str, session: Option<usize>) -> Socket {
    let mut ws = loop {
        // tungstenite zeroes its whole read buffer before every read
        // (128 KiB by default): a client reading one small frame at a time
        // would spend most of its CPU on that, on the cores the gateway
        // runs on. The gateway reads into 4 KiB; so do these clients.
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(4 * 1024);
        match tokio_tungstenite::connect_async_with_config(url, Some(config), false).await {
            Ok((ws, _)) => break ws,
            // Refused while the gateway is busy: try again, as clients do.
            Err(e) => {
                eprintln!("connect: {e}; again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let challenge = next_json(&mut ws).await;
    assert_eq!(challenge["event"], "connect.challenge");
    let connect = json!({"type": "req", "id": "c", "method": "connect", "params": {
        "minProtocol": 4, "maxProtocol": 4,
        "client": {"id": "test", "version": "bench", "platform": "linux", "mode": "test"},
        "caps": ["session-scoped-events"], "role": "operator", "auth": {"token": TOKEN},
    }});
    ws.send(Message::Text(connect.to_string().into()))
        .await
        .unwrap();
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["ok"], true, "{hello}");
    if let Some(session) = session {
        let key = format!("bench-{session}");
        let subscribe = json!({"type": "req", "id": "s", "method": "chat.subscribe", "params": {"sessionKey": key}});
        ws.send(Message::Text(subscribe.to_string().into()))
            .await
            .unwrap();
        loop {
            let frame = next_json(&mut ws).await;
            if frame["id"] == "s" {
                assert_eq!(frame["ok"], true, "{frame}");
                break;
            }
        }
    }
    ws
}

/// One client's run: the session's driver sends the prompt; every client
/// measures each delta until the run's `final`.
async fn stream(mut ws: Socket, session: usize, driver: bool, tokens: usize) -> (Vec<f64>, Socket) {
    let key = format!("bench-{session}");
    if driver {
        let send = json!({"type": "req", "id": "p", "method": "chat.send", "params": {
            "sessionKey": key, "message": "stream", "idempotencyKey": format!("run-{session}"),
        }});
        ws.send(Message::Text(send.to_string().into()))
            .await
            .unwrap();
    }
    let mut latencies = Vec::with_capacity(tokens);
    loop {
        let text = next_text(&mut ws).await;
        // The load generator reads only what it measures, so that its own
        // cost takes as little as it can of the cores the gateway runs
        // on: `chat` events, and of them the state and the new text.
        if !text.starts_with(r#"{"type":"event","event":"chat""#) {
            continue;
        }
        let frame: ChatFrame<'_> = serde_json::from_str(&text).unwrap();
        match frame.payload.state {
            "delta" => {
                let received = now_ns();
                let delta = frame.payload.delta_text.unwrap_or_default();
                for stamp in delta.split_whitespace() {
                    if let Some(sent) = stamp.strip_prefix('T').and_then(|n| n.parse::<u128>().ok())
                    {
                        latencies.push(received.saturating_sub(sent) as f64 / 1e6);
                    }
                }
            }
            "final" => return (latencies, ws),
            other => panic!("unexpected chat state {other:?}: {text}"),
        }
    }
}

#[derive(serde::Deserialize)]
struct ChatFrame<'a> {
    #[serde(borrow)]
    payload: ChatPayload<'a>,
}

#[derive(serde::Deserialize)]
struct ChatPayload<'a> {
    state: &'a str,
    #[serde(default, borrow, rename = "deltaText")]
    delta_text: Option<std::borrow::Cow<'a, str>>,
}

async fn next_text(ws: &mut Socket) -> tokio_tungstenite::tungstenite::Utf8Bytes {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("a frame within 60 s")
            .expect("the connection is open")
            .unwrap();
        if let Message::Text(text) = message {
            return text;
        }
    }
}

async fn next_json(ws: &mut Socket) -> Value {
    serde_json::from_str(&next_text(ws).await).unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

/// A `/proc/<pid>/status` figure in bytes (`VmRSS:` now, `VmHWM:` peak).
fn rss(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// A process's user and system CPU time so far, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's `)`: fields 3 on; utime and stime are 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// An Anthropic Messages endpoint that streams `tokens` text deltas, `gap`
/// apart on the stream's own clock, each stamped with the time it is
/// sent. Request n's first token
/// comes (n mod `phases`)/`phases` of a gap later than the others', so
/// that `phases` streams are spread over the gap (`1`: all in phase).
async fn start_model(tokens: usize, gap: Duration, phases: usize) -> String {
    use axum::body::Body;
    use axum::response::Response;
    let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || async move {
            let n = requests.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let offset = gap * (n % phases.max(1)) as u32 / phases.max(1) as u32;
            let head = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
            let tail = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":50}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(8);
            tokio::spawn(async move {
                let _ = tx.send(Ok(bytes::Bytes::from_static(head.as_bytes()))).await;
                // Each token at its own time on the stream's clock, as a
                // model far away sends them: a timer that fires late here
                // (the three processes share two cores) does not move the
                // tokens after it, which would bring the streams into
                // phase over time.
                let first = tokio::time::Instant::now() + offset;
                for k in 0..tokens {
                    tokio::time::sleep_until(first + gap * (k as u32 + 1)).await;
                    let event = format!(
                        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"T{} \"}}}}\n\n",
                        now_ns()
                    );
                    if tx.send(Ok(bytes::Bytes::from(event))).await.is_err() {
                        return;
                    }
                }
                let _ = tx.send(Ok(bytes::Bytes::from_static(tail.as_bytes()))).await;
            });
            let stream = tokio_stream_from(rx);
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    // A streaming server sends each event as it comes (TCP_NODELAY, as
    // the providers' front ends do): with Nagle's algorithm a token could
    // wait for the ACK of the one before it, which the gateway's side may
    // delay by up to 40 ms, and that wait is not the gateway's.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        tcp.set_nodelay(true).unwrap();
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
