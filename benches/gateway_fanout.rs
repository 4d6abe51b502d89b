//! The gateway under load, on the release binary: 1,000 websocket clients on
//! loopback follow 100 sessions (ten per session, with the
//! `session-scoped-events` cap), and every session streams an answer at
//! once. The mock model stamps each text delta with the time it sent it,
//! so each client measures the latency from the model's token to its own
//! `chat` frame.
//!
//! Reported: p50 / p99 / max of that latency over every frame of every
//! client, the slowest client's p99 (no client may starve another), and the
//! gateway's peak RSS. Targets: p99 ≤ 5 ms, RSS ≤ 60 MB. A run in which a
//! client misses a frame panics: its figures would mean nothing.
//!
//! `PINCER_BENCH_CLIENTS` (1000), `PINCER_BENCH_SESSIONS` (100),
//! `PINCER_BENCH_TOKENS` (50) and `PINCER_BENCH_TOKEN_MS` (20, the gap
//! between a session's tokens) change the sizes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

const TOKEN: &str = "bench-token-0123456789abcdef";
const P99_TARGET_MS: f64 = 5.0;
const RSS_TARGET_MB: f64 = 60.0;

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

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let clients = env_count("PINCER_BENCH_CLIENTS", 1000);
    let sessions = env_count("PINCER_BENCH_SESSIONS", 100).min(clients);
    let tokens = env_count("PINCER_BENCH_TOKENS", 50);
    let gap = Duration::from_millis(env_count("PINCER_BENCH_TOKEN_MS", 20) as u64);
    println!(
        "pincer gateway fan-out: {clients} clients, {sessions} sessions, {tokens} tokens each ({})",
        env!("CARGO_BIN_EXE_pincer")
    );

    let model = start_model(tokens, gap).await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\nmax_connections = {}\nmax_connections_per_ip = {}\n",
            clients + 100,
            clients + 100
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
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let rss_idle = peak_rss(pid);

    // Everyone connects and follows a session before any session streams.
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(clients + 1));
    let start = std::sync::Arc::new(tokio::sync::Notify::new());
    let mut tasks = Vec::new();
    for i in 0..clients {
        let url = url.clone();
        let barrier = barrier.clone();
        let start = start.clone();
        let session = i % sessions;
        let driver = i < sessions;
        tasks.push(tokio::spawn(async move {
            client(&url, session, driver, tokens, barrier, start).await
        }));
    }
    barrier.wait().await;
    let began = std::time::Instant::now();
    start.notify_waiters();
    let mut all: Vec<f64> = Vec::new();
    let mut worst_client_p99: f64 = 0.0;
    for task in tasks {
        let mut latencies = task.await.unwrap();
        assert_eq!(latencies.len(), tokens, "a client missed frames");
        latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
        worst_client_p99 = worst_client_p99.max(percentile(&latencies, 0.99));
        all.extend(latencies);
    }
    let elapsed = began.elapsed();
    let rss = peak_rss(pid);
    let _ = gateway.kill();
    let _ = gateway.wait();
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = percentile(&all, 0.5);
    let p99 = percentile(&all, 0.99);
    let max = all.last().copied().unwrap_or_default();
    let rss_mb = rss as f64 / 1024.0 / 1024.0;
    println!(
        "  frames: {} in {:.2} s ({:.0} frames/s)",
        all.len(),
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  token → client frame: p50 {p50:.2} ms, p99 {p99:.2} ms (target ≤ {P99_TARGET_MS} ms){}, max {max:.2} ms",
        if p99 <= P99_TARGET_MS { "" } else { " MISSED" }
    );
    println!("  slowest client's p99: {worst_client_p99:.2} ms");
    println!(
        "  gateway peak RSS: {rss_mb:.1} MB (target ≤ {RSS_TARGET_MB} MB){}; {:.1} MB before the clients came",
        if rss_mb <= RSS_TARGET_MB {
            ""
        } else {
            " MISSED"
        },
        rss_idle as f64 / 1024.0 / 1024.0
    );
    println!(
        "{}",
        json!({
            "bench": "gateway_fanout",
            "clients": clients,
            "sessions": sessions,
            "tokens": tokens,
            "frames": all.len(),
            "latency_ms": {"p50": p50, "p99": p99, "max": max, "worst_client_p99": worst_client_p99, "target_p99": P99_TARGET_MS, "met": p99 <= P99_TARGET_MS},
            "peak_rss_mb": {"value": rss_mb, "target": RSS_TARGET_MB, "met": rss_mb <= RSS_TARGET_MB},
        })
    );
}

/// One client: connects, follows its session, waits for the start, then
/// (the session's driver) sends the prompt, and measures every delta until
/// the run's `final`.
async fn client(
    url: &str,
    session: usize,
    driver: bool,
    tokens: usize,
    barrier: std::sync::Arc<tokio::sync::Barrier>,
    start: std::sync::Arc<tokio::sync::Notify>,
) -> Vec<f64> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
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
    let started = start.notified();
    barrier.wait().await;
    started.await;
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
        let frame = next_json(&mut ws).await;
        if frame["event"] != "chat" {
            continue;
        }
        let payload = &frame["payload"];
        match payload["state"].as_str() {
            Some("delta") => {
                let received = now_ns();
                let delta = payload["deltaText"].as_str().unwrap_or_default();
                for stamp in delta.split_whitespace() {
                    if let Some(sent) = stamp.strip_prefix('T').and_then(|n| n.parse::<u128>().ok())
                    {
                        latencies.push(received.saturating_sub(sent) as f64 / 1e6);
                    }
                }
            }
            Some("final") => return latencies,
            other => panic!("unexpected chat state {other:?}: {payload}"),
        }
    }
}

async fn next_json(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) -> Value {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(60), ws.next())
            .await
            .expect("a frame within 60 s")
            .expect("the connection is open")
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// An Anthropic Messages endpoint that streams `tokens` text deltas, `gap`
/// apart, each stamped with the time it is sent.
async fn start_model(tokens: usize, gap: Duration) -> String {
    use axum::body::Body;
    use axum::response::Response;
    let app = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || async move {
            let head = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
            let tail = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":50}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(8);
            tokio::spawn(async move {
                let _ = tx.send(Ok(bytes::Bytes::from_static(head.as_bytes()))).await;
                for _ in 0..tokens {
                    tokio::time::sleep(gap).await;
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
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
