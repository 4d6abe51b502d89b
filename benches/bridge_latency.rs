//! What `pincer acp --connect` adds between a gateway and an editor,
//! measured on the release binary over real sockets and pipes:
//!
//! 1. latency: a mock gateway (in this process) streams one answer as
//!    `chat` delta events, one every `PINCER_BENCH_INTERVAL_US` (default
//!    1,000 µs), each with the run's cumulative `message` as OpenClaw's
//!    gateway sends it, to two connections at once: the bridge's and a
//!    websocket client in this process. For each delta, the time between
//!    that client reading the frame and the editor reading the bridge's
//!    `agent_message_chunk` from its stdout is what the bridge adds (the
//!    websocket hop, which a direct client pays too, is not counted; p50
//!    and p99 over all deltas; target: p99 under 1 ms on loopback);
//! 2. memory: the bridge's peak resident set (VmHWM) after the stream
//!    (target: under 15 MB).
//!
//! A report, not a test: a missed target is printed. A lost, doubled or
//! reordered chunk panics, since its figures would mean nothing. The last
//! line is JSON with the same figures. `PINCER_BENCH_DELTAS` (default
//! 2,000) and `PINCER_BENCH_RUNS` (3) change the sizes. Linux only (`/proc`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;

const P99_TARGET_US: f64 = 1_000.0;
const RSS_TARGET_MB: f64 = 15.0;
const TOKEN: &str = "bench-token-0123456789abcdef";

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// When each delta arrived, by index.
type Stamps = Arc<Mutex<Vec<Option<Instant>>>>;

/// The mock gateway's open connections, each a frame queue.
type Conns = Arc<Mutex<Vec<tokio::sync::mpsc::UnboundedSender<Message>>>>;

/// The mock gateway: OpenClaw's handshake, the few methods the bridge
/// calls, and on `chat.send` a stream of `deltas` chat deltas sent to every
/// connection.
async fn serve_gateway(listener: TcpListener, deltas: usize, interval: Duration) {
    let conns: Conns = Arc::default();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        // As gateways do (pincer's, and node's `ws` under OpenClaw's).
        stream.set_nodelay(true).unwrap();
        let conns = conns.clone();
        tokio::spawn(async move {
            let ws = tokio_tungstenite::accept_async(stream).await.unwrap();
            let (mut sink, mut source) = ws.split();
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Message>();
            conns.lock().unwrap().push(tx.clone());
            let writer = tokio::spawn(async move {
                while let Some(message) = rx.recv().await {
                    if sink.send(message).await.is_err() {
                        return;
                    }
                }
            });
            tx.send(event("connect.challenge", json!({"nonce": "n", "ts": 1})))
                .unwrap();
            while let Some(Ok(message)) = source.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let frame: Value = serde_json::from_str(&text).unwrap();
                let id = frame["id"].clone();
                let ok = |payload: Value| {
                    Message::text(
                        json!({"type": "res", "id": id, "ok": true, "payload": payload})
                            .to_string(),
                    )
                };
                match frame["method"].as_str().unwrap_or_default() {
                    "connect" => {
                        assert_eq!(frame["params"]["auth"]["token"], TOKEN);
                        let hello = json!({"type": "hello-ok", "protocol": 4,
                            "server": {"version": "bench", "connId": "c"},
                            "features": {"methods": [], "events": []}, "snapshot": {},
                            "auth": {"role": "operator", "scopes": ["operator.admin"]},
                            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 30000}});
                        tx.send(ok(hello)).unwrap();
                    }
                    "chat.send" => {
                        let run = frame["params"]["idempotencyKey"]
                            .as_str()
                            .unwrap()
                            .to_string();
                        let key = frame["params"]["sessionKey"].as_str().unwrap().to_string();
                        tx.send(ok(json!({"runId": run, "status": "started"})))
                            .unwrap();
                        let conns = conns.clone();
                        tokio::spawn(async move {
                            let mut text = String::new();
                            let mut tick = tokio::time::interval(interval);
                            let all = |message: Message| {
                                for conn in conns.lock().unwrap().iter() {
                                    let _ = conn.send(message.clone());
                                }
                            };
                            for i in 0..deltas {
                                tick.tick().await;
                                let word = format!("w{i:05} ");
                                text.push_str(&word);
                                all(event(
                                    "chat",
                                    json!({"runId": run, "sessionKey": key, "seq": i + 1, "state": "delta",
                                    "deltaText": word, "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 0}}),
                                ));
                            }
                            all(event(
                                "chat",
                                json!({"runId": run, "sessionKey": key, "seq": deltas + 1, "state": "final",
                                "message": {"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": 0}, "stopReason": "stop"}),
                            ));
                        });
                    }
                    "sessions.list" => tx.send(ok(json!({"sessions": []}))).unwrap(),
                    "models.list" => tx.send(ok(json!({"models": []}))).unwrap(),
                    _ => tx.send(ok(json!({"ok": true}))).unwrap(),
                }
            }
            writer.abort();
        });
    }
}

fn event(name: &str, payload: Value) -> Message {
    Message::text(json!({"type": "event", "event": name, "payload": payload}).to_string())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// One answer through the bridge: when the editor read each chunk, and the
/// bridge's peak RSS in MB.
fn through_bridge(url: &str, deltas: usize) -> (Vec<Instant>, f64) {
    let home = tempfile::tempdir().unwrap();
    let token_file = home.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pincer"))
        .args(["acp", "--connect", url, "--token-file"])
        .arg(&token_file)
        .env_clear()
        .env("HOME", home.path())
        .env("PINCER_HOME", home.path())
        .current_dir(home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let call = |stdin: &mut std::process::ChildStdin, id: u64, method: &str, params: Value| {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
    };
    call(
        &mut stdin,
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    let mut read_result = |stdout: &mut BufReader<std::process::ChildStdout>, id: u64| loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the bridge ended");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            assert!(message.get("error").is_none(), "{message}");
            return message["result"].clone();
        }
    };
    read_result(&mut stdout, 1);
    call(
        &mut stdin,
        2,
        "session/new",
        json!({"cwd": home.path(), "mcpServers": []}),
    );
    let session = read_result(&mut stdout, 2)["sessionId"].clone();
    call(
        &mut stdin,
        3,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
    );
    let mut read = Vec::with_capacity(deltas);
    let mut next = 0;
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the bridge ended");
        let now = Instant::now();
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 3 {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        }
        let update = &message["params"]["update"];
        if update["sessionUpdate"] != "agent_message_chunk" {
            continue;
        }
        let text = update["content"]["text"].as_str().unwrap();
        assert_eq!(
            text,
            format!("w{next:05} "),
            "a chunk was lost, doubled or reordered"
        );
        read.push(now);
        next += 1;
    }
    assert_eq!(next, deltas);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let hwm_kb: f64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    drop(stdin);
    child.wait().unwrap();
    (read, hwm_kb / 1024.0)
}

/// A websocket client in this process that records when each delta of
/// the next run reaches it.
async fn observe(url: String, deltas: usize, seen: Stamps) {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let _challenge = ws.next().await;
    let connect = json!({"type": "req", "id": "1", "method": "connect", "params": {"auth": {"token": TOKEN}}});
    ws.send(Message::text(connect.to_string())).await.unwrap();
    let _hello = ws.next().await;
    while let Some(Ok(Message::Text(text))) = ws.next().await {
        let now = Instant::now();
        let frame: Value = serde_json::from_str(&text).unwrap();
        if frame["event"] != "chat" || frame["payload"]["state"] != "delta" {
            continue;
        }
        let index = frame["payload"]["seq"].as_u64().unwrap() as usize - 1;
        if index < deltas {
            seen.lock().unwrap()[index] = Some(now);
        }
    }
}

fn main() {
    let deltas = env_count("PINCER_BENCH_DELTAS", 2_000);
    let runs = env_count("PINCER_BENCH_RUNS", 3);
    let interval = Duration::from_micros(env_count("PINCER_BENCH_INTERVAL_US", 1_000) as u64);
    println!(
        "pincer acp --connect: added latency per chunk and memory ({})",
        env!("CARGO_BIN_EXE_pincer")
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    runtime.spawn(serve_gateway(listener, deltas, interval));

    let mut rows = Vec::new();
    for run in 1..=runs {
        let seen: Stamps = Arc::new(Mutex::new(vec![None; deltas]));
        let observer = runtime.spawn(observe(url.clone(), deltas, seen.clone()));
        // The observer is connected before the bridge asks for the run.
        std::thread::sleep(Duration::from_millis(200));
        let (read, rss) = through_bridge(&url, deltas);
        observer.abort();
        let seen = seen.lock().unwrap();
        let mut added: Vec<f64> = read
            .iter()
            .zip(seen.iter())
            .map(|(editor, client)| {
                let client = client.expect("the observer missed a delta");
                editor.saturating_duration_since(client).as_secs_f64() * 1e6
                    - client.saturating_duration_since(*editor).as_secs_f64() * 1e6
            })
            .collect();
        added.sort_by(f64::total_cmp);
        let row = json!({
            "run": run,
            "added_p50_us": percentile(&added, 0.5),
            "added_p99_us": percentile(&added, 0.99),
            "added_max_us": added[added.len() - 1],
            "peak_rss_mb": rss,
        });
        println!(
            "run {run}: {deltas} deltas every {} µs; the bridge adds p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs; its peak RSS {:.1} MB",
            interval.as_micros(),
            row["added_p50_us"].as_f64().unwrap(),
            row["added_p99_us"].as_f64().unwrap(),
            row["added_max_us"].as_f64().unwrap(),
            rss,
        );
        rows.push(row);
    }
    let median = |field: &str| {
        let mut values: Vec<f64> = rows.iter().map(|r| r[field].as_f64().unwrap()).collect();
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let added_p99 = median("added_p99_us");
    let rss = median("peak_rss_mb");
    println!(
        "median of {runs} runs: added p99 {added_p99:.0} µs (target {P99_TARGET_US:.0} µs: {}), peak RSS {rss:.1} MB (target {RSS_TARGET_MB:.0} MB: {})",
        if added_p99 <= P99_TARGET_US {
            "met"
        } else {
            "MISSED"
        },
        if rss <= RSS_TARGET_MB {
            "met"
        } else {
            "MISSED"
        },
    );
    println!(
        "{}",
        json!({"bench": "bridge_latency", "deltas": deltas, "interval_us": interval.as_micros() as u64, "runs": rows,
               "added_p99_us": added_p99, "added_p99_target_us": P99_TARGET_US, "peak_rss_mb": rss, "peak_rss_target_mb": RSS_TARGET_MB})
    );
}
