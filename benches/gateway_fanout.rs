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
//! Cluster (`PINCER_BENCH_REPLICAS=N`, N > 1): N gateways share a private
//! PostgreSQL store and a private NATS bus (tests/support/services.rs), as
//! a team gateway's replicas do, and 300 clients follow 60 sessions. Client
//! i follows session s = i mod 60 on replica (s + i / 60) mod N, so that
//! every session has followers on its own replica and on the others; the
//! session's first client sends the prompt. Where each session actually
//! ran is read from the store afterwards (a follower on another replica
//! may open the session there first). Reported: p50 / p99 / max of the
//! token → frame latency for the clients on another replica than the run
//! (the bus's cost) and, apart, for those on the same one, the slowest
//! client's p99, each replica's peak RSS and the CPU time of the gateways
//! together and of the clients. Target: p99 ≤ 15 ms on another replica.
//! A run with no client on another replica than its session's panics.
//!
//! Idle (`PINCER_BENCH_IDLE=1`, one gateway only): 10,000 clients connect,
//! authenticate and stay; reported: the gateway's RSS with all of them
//! connected. Target: ≤ 250 MB.
//!
//! A run in which a client misses a frame panics: its figures would mean
//! nothing. `PINCER_BENCH_CLIENTS` (1000; 10000 idle; 300 in a cluster),
//! `PINCER_BENCH_SESSIONS` (100; 60 in a cluster), `PINCER_BENCH_TOKENS`
//! (50) and `PINCER_BENCH_TOKEN_MS` (20, the gap between a session's
//! tokens) change the sizes; `PINCER_BENCH_BY_TOKEN=1` also reports the
//! latency by each token's place in the stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use support::services::{Nats, Postgres};

const TOKEN: &str = "bench-token-0123456789abcdef";
const P99_TARGET_MS: f64 = 5.0;
const RSS_TARGET_MB: f64 = 60.0;
const IDLE_RSS_TARGET_MB: f64 = 250.0;
/// A client on another replica than its session's run: the token crosses
/// the bus once more.
const REMOTE_P99_TARGET_MS: f64 = 15.0;
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

/// One client's figures, as the clients' process reports them: the
/// session it followed, the replica it was connected to (its index in
/// `PINCER_BENCH_URL`) and the latency of each token, in order.
#[derive(serde::Serialize, serde::Deserialize)]
struct ClientReport {
    session: usize,
    replica: usize,
    latencies: Vec<f64>,
}

/// What a streaming run measured, for the report.
struct Run {
    clients: usize,
    sessions: usize,
    tokens: usize,
    in_phase: bool,
    elapsed: Duration,
    connected_in: Duration,
    /// Each gateway's CPU time while streaming, in seconds.
    gateway_cpu: Vec<f64>,
    clients_cpu: f64,
    /// Each gateway's RSS once started, with the clients connected, and
    /// at its peak, in bytes.
    rss_alone: Vec<u64>,
    rss_connected: Vec<u64>,
    rss_peak: Vec<u64>,
    reports: Vec<ClientReport>,
}

async fn bench() {
    let replicas = env_count("PINCER_BENCH_REPLICAS", 1).max(1);
    let cluster = replicas > 1;
    let idle = std::env::var("PINCER_BENCH_IDLE").is_ok_and(|v| v == "1");
    assert!(
        !(idle && cluster),
        "PINCER_BENCH_IDLE measures one gateway; leave PINCER_BENCH_REPLICAS unset for it"
    );
    let clients = env_count(
        "PINCER_BENCH_CLIENTS",
        if idle {
            10_000
        } else if cluster {
            300
        } else {
            1000
        },
    );
    let sessions = env_count("PINCER_BENCH_SESSIONS", if cluster { 60 } else { 100 }).min(clients);
    let tokens = env_count("PINCER_BENCH_TOKENS", 50);
    let gap = Duration::from_millis(env_count("PINCER_BENCH_TOKEN_MS", 20) as u64);
    let in_phase = std::env::var("PINCER_BENCH_IN_PHASE").is_ok_and(|v| v == "1");
    let streams = if in_phase { "in phase" } else { "independent" };
    if idle {
        println!(
            "pincer gateway, idle: {clients} authenticated clients ({})",
            env!("CARGO_BIN_EXE_pincer")
        );
    } else if cluster {
        println!(
            "pincer gateway cluster fan-out: {replicas} replicas, {clients} clients, {sessions} sessions, {tokens} tokens each, the streams {streams} ({})",
            env!("CARGO_BIN_EXE_pincer")
        );
    } else {
        println!(
            "pincer gateway fan-out: {clients} clients, {sessions} sessions, {tokens} tokens each, the streams {streams} ({})",
            env!("CARGO_BIN_EXE_pincer")
        );
    }

    // The replicas' store and bus. Starting them blocks; they stop when
    // dropped, after the gateways (declared later, so dropped first even
    // when the bench panics).
    let services = if cluster {
        let (postgres, nats) = tokio::join!(
            tokio::task::spawn_blocking(Postgres::start),
            tokio::task::spawn_blocking(Nats::start)
        );
        Some((postgres.unwrap(), nats.unwrap()))
    } else {
        None
    };
    let model = start_model(tokens, gap, if in_phase { 1 } else { sessions }).await;
    let room = clients + 100;
    // All of them start at once; then each is waited for.
    let mut gateways: Vec<Gateway> = (1..=replicas)
        .map(|n| {
            let replica = format!("r{n}");
            let cluster = services
                .as_ref()
                .map(|(postgres, nats)| (postgres.url(), nats.url(), replica));
            Gateway::spawn(&model, room, cluster)
        })
        .collect();
    for gateway in &mut gateways {
        gateway.wait_started();
    }
    let pids: Vec<u32> = gateways.iter().map(|g| g.pid).collect();
    let urls: Vec<&str> = gateways.iter().map(|g| g.url.as_str()).collect();
    let rss_alone: Vec<u64> = pids.iter().map(|&pid| rss(pid, "VmRSS:")).collect();

    // The clients, in their own process: they connect and follow their
    // sessions, say "ready", and stream on "go".
    let mut process = Command::new(std::env::current_exe().unwrap())
        .arg("clients")
        .env("PINCER_BENCH_URL", urls.join(","))
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
    let mut line = String::new();
    from_clients.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the clients did not connect");
    let connected_in = connecting.elapsed();
    let rss_connected: Vec<u64> = pids.iter().map(|&pid| rss(pid, "VmRSS:")).collect();
    let cpu_before: Vec<f64> = pids.iter().map(|&pid| cpu_seconds(pid)).collect();
    let clients_cpu_before = cpu_seconds(client_pid);

    if idle {
        let pid = pids[0];
        let rss_alone = rss_alone[0];
        // Settled: what the connections hold, not their handshakes.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss_idle = rss(pid, "VmRSS:");
        let peak = rss(pid, "VmHWM:");
        writeln!(to_clients, "stop").unwrap();
        let _ = process.wait();
        drop(gateways);
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
    let gateway_cpu: Vec<f64> = pids
        .iter()
        .zip(&cpu_before)
        .map(|(&pid, before)| cpu_seconds(pid) - before)
        .collect();
    let reports: Vec<ClientReport> = serde_json::from_str(&line).expect("the clients' latencies");
    let clients_cpu = cpu_seconds(client_pid) - clients_cpu_before;
    let _ = process.wait();
    let rss_peak: Vec<u64> = pids.iter().map(|&pid| rss(pid, "VmHWM:")).collect();
    // Where each session ran, while the replicas are still up.
    let ran_on = services
        .as_ref()
        .map(|(postgres, _)| placement(postgres, replicas));
    // The gateways go first, then the store and the bus they use.
    drop(gateways);
    drop(services);

    let run = Run {
        clients,
        sessions,
        tokens,
        in_phase,
        elapsed,
        connected_in,
        gateway_cpu,
        clients_cpu,
        rss_alone,
        rss_connected,
        rss_peak,
        reports,
    };
    match ran_on {
        None => report_alone(&run),
        Some(ran_on) => report_cluster(&run, &ran_on),
    }
}

/// A `pincer gateway` of the bench, in a home and a work directory of its
/// own. Dropping it kills it (a bench that panics leaves none running)
/// before its directories are removed.
struct Gateway {
    process: Child,
    pid: u32,
    /// Its replica name in a cluster (`r1`, `r2`, …); empty alone.
    replica: String,
    /// `ws://…`, once it listens.
    url: String,
    _home: tempfile::TempDir,
    _work: tempfile::TempDir,
}

impl Gateway {
    /// Starts a gateway streaming from `model` with room for `room`
    /// connections; with `cluster` (the store's URL, the bus's URL and
    /// its replica name), as a replica of a team gateway.
    fn spawn(model: &str, room: usize, cluster: Option<(String, String, String)>) -> Gateway {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let mut config = format!(
            "title_model = \"none\"\n[gateway]\nmax_connections = {room}\nmax_connections_per_ip = {room}\n\
             max_pending_connections = {room}\nmax_pending_connections_per_ip = {room}\n\
             max_preauth_connections = {room}\nmax_preauth_connections_per_ip = {room}\n",
        );
        let mut replica = String::new();
        if let Some((store, bus, name)) = cluster {
            config.push_str(&format!(
                "\n[cluster]\nstore = \"{store}\"\nbus = \"{bus}\"\nreplica = \"{name}\"\n"
            ));
            replica = name;
        }
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let process = Command::new(env!("CARGO_BIN_EXE_pincer"))
            .args(["gateway", "--port", "0"])
            .current_dir(work.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("PINCER_HOME", home.path())
            .env("PINCER_GATEWAY_TOKEN", TOKEN)
            .env("ANTHROPIC_API_KEY", "bench-key")
            .env("ANTHROPIC_BASE_URL", model)
            .env("RUST_LOG", "warn")
            // Allocator settings to try (`MIMALLOC_PURGE_DELAY=0`, …) pass through.
            .envs(std::env::vars().filter(|(k, _)| k.starts_with("MIMALLOC_")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Gateway {
            pid: process.id(),
            process,
            replica,
            url: String::new(),
            _home: home,
            _work: work,
        }
    }

    /// Waits for the gateway's `ws://` URL on its stderr (a replica
    /// prints it after joining the cluster, which it must have said),
    /// then passes the rest of its stderr on, each line marked with the
    /// replica's name in a cluster.
    fn wait_started(&mut self) {
        let mut stderr = BufReader::new(self.process.stderr.take().unwrap());
        let joined = format!("cluster: replica `{}` on store", self.replica);
        let mut said = String::new();
        let mut line = String::new();
        self.url = loop {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "the gateway {} did not start; it said:\n{said}",
                self.replica
            );
            if let Some(at) = line.find("ws://") {
                break line[at..].trim().to_string();
            }
            said.push_str(&line);
        };
        assert!(
            self.replica.is_empty() || said.contains(&joined),
            "replica {} listens without having said {joined:?}; it said:\n{said}",
            self.replica
        );
        let mark = if self.replica.is_empty() {
            String::new()
        } else {
            format!("[{}] ", self.replica)
        };
        std::thread::spawn(move || {
            let mut line = Vec::new();
            while stderr.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                eprint!("{mark}{}", String::from_utf8_lossy(&line));
                line.clear();
            }
        });
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Which replica (its index, from `r1` = 0) each session `bench-<s>` ran
/// on, by `s`, as the store holds it.
fn placement(postgres: &Postgres, replicas: usize) -> HashMap<usize, usize> {
    let rows = postgres.psql("SELECT key, replica FROM pincer_sessions");
    rows.lines()
        .filter(|row| !row.is_empty())
        .map(|row| {
            let (key, replica) = row.split_once('|').unwrap_or_else(|| {
                panic!("a pincer_sessions row that is not key|replica: {row:?}")
            });
            let session = key
                .strip_prefix("bench-")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("a session the bench did not open: {row:?}"));
            let index = replica
                .strip_prefix('r')
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| (1..=replicas).contains(n))
                .unwrap_or_else(|| {
                    panic!("a session on a replica the bench did not start: {row:?}")
                });
            (session, index - 1)
        })
        .collect()
}

/// Panics when a client received another number of tokens than `tokens`,
/// naming each such client (`where_ran` says where its session ran).
fn check_every_frame(run: &Run, where_ran: impl Fn(usize) -> String) {
    let short: Vec<String> = run
        .reports
        .iter()
        .enumerate()
        .filter(|(_, c)| c.latencies.len() != run.tokens)
        .map(|(i, c)| {
            format!(
                "client {i} (session bench-{}, on replica {}, {}): {} of {} tokens",
                c.session,
                c.replica,
                where_ran(c.session),
                c.latencies.len(),
                run.tokens
            )
        })
        .collect();
    assert!(
        short.is_empty(),
        "a client missed frames: {} of {} clients did:\n{}",
        short.len(),
        run.reports.len(),
        short.join("\n")
    );
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values
}

/// The latency of token `index` for each of `clients` that received it.
fn at_token<'a>(clients: impl Iterator<Item = &'a ClientReport>, index: usize) -> Vec<f64> {
    sorted(
        clients
            .filter_map(|c| c.latencies.get(index).copied())
            .collect(),
    )
}

/// The report of one gateway.
fn report_alone(run: &Run) {
    let tokens = run.tokens;
    let clients = run.clients;
    // Where the tail is: the latency of each token by its place in the
    // stream (the last one comes with the end of every run at once).
    if std::env::var("PINCER_BENCH_BY_TOKEN").is_ok_and(|v| v == "1") {
        for index in 0..tokens {
            let at = at_token(run.reports.iter(), index);
            println!(
                "  token {index}: p50 {:.2} ms, p99 {:.2} ms",
                percentile(&at, 0.5),
                percentile(&at, 0.99)
            );
        }
    }
    check_every_frame(run, |_| "alone".to_string());
    let mut all: Vec<f64> = Vec::new();
    let mut worst_client_p99: f64 = 0.0;
    for client in &run.reports {
        let latencies = sorted(client.latencies.clone());
        worst_client_p99 = worst_client_p99.max(percentile(&latencies, 0.99));
        all.extend(latencies);
    }
    let all = sorted(all);
    let p50 = percentile(&all, 0.5);
    let p99 = percentile(&all, 0.99);
    let max = all.last().copied().unwrap_or_default();
    let rss_mb = run.rss_peak[0] as f64 / 1024.0 / 1024.0;
    let gateway_cpu = run.gateway_cpu[0];
    let clients_cpu = run.clients_cpu;
    let elapsed = run.elapsed;
    println!(
        "  frames: {} in {:.2} s ({:.0} frames/s); {clients} clients connected in {:.2} s",
        all.len(),
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64(),
        run.connected_in.as_secs_f64(),
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
        run.rss_alone[0] as f64 / 1024.0 / 1024.0,
        run.rss_connected[0] as f64 / 1024.0 / 1024.0,
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
            "sessions": run.sessions,
            "tokens": tokens,
            "in_phase": run.in_phase,
            "frames": all.len(),
            "latency_ms": {"p50": p50, "p99": p99, "max": max, "worst_client_p99": worst_client_p99, "target_p99": P99_TARGET_MS, "met": p99 <= P99_TARGET_MS},
            "peak_rss_mb": {"value": rss_mb, "target": RSS_TARGET_MB, "met": rss_mb <= RSS_TARGET_MB},
            "cpu_s": {"gateway": gateway_cpu, "clients": clients_cpu},
        })
    );
}

/// The report of a cluster: the clients on another replica than their
/// session's run apart from those on the same one.
fn report_cluster(run: &Run, ran_on: &HashMap<usize, usize>) {
    let replicas = run.rss_peak.len();
    let name = |index: usize| format!("r{}", index + 1);
    let ran = |session: usize| {
        *ran_on.get(&session).unwrap_or_else(|| {
            panic!("session bench-{session} is not in the store's pincer_sessions")
        })
    };
    let remote = |c: &&ClientReport| ran(c.session) != c.replica;
    let at_home = (0..run.sessions)
        .filter(|&s| ran(s) == s % replicas)
        .count();
    let remote_clients = run.reports.iter().filter(remote).count();
    println!(
        "  sessions: {at_home} ran on their first client's replica, {} on another; clients: {remote_clients} on another replica than their session's run, {} on the same",
        run.sessions - at_home,
        run.reports.len() - remote_clients,
    );
    if std::env::var("PINCER_BENCH_BY_TOKEN").is_ok_and(|v| v == "1") {
        for index in 0..run.tokens {
            let there = at_token(run.reports.iter().filter(remote), index);
            let here = at_token(run.reports.iter().filter(|c| !remote(c)), index);
            println!(
                "  token {index}: another replica p50 {:.2} ms, p99 {:.2} ms; same replica p50 {:.2} ms, p99 {:.2} ms",
                percentile(&there, 0.5),
                percentile(&there, 0.99),
                percentile(&here, 0.5),
                percentile(&here, 0.99)
            );
        }
    }
    check_every_frame(run, |session| format!("run on {}", name(ran(session))));
    assert!(
        remote_clients > 0,
        "no client was on another replica than its session's run: the bus was not measured"
    );
    let mut there: Vec<f64> = Vec::new();
    let mut here: Vec<f64> = Vec::new();
    let mut worst_client_p99: f64 = 0.0;
    let mut worst_is_remote = false;
    for client in &run.reports {
        let latencies = sorted(client.latencies.clone());
        let p99 = percentile(&latencies, 0.99);
        if p99 > worst_client_p99 {
            worst_client_p99 = p99;
            worst_is_remote = remote(&client);
        }
        if remote(&client) {
            there.extend(latencies);
        } else {
            here.extend(latencies);
        }
    }
    let (there, here) = (sorted(there), sorted(here));
    let figures = |sorted: &[f64]| {
        (
            percentile(sorted, 0.5),
            percentile(sorted, 0.99),
            sorted.last().copied().unwrap_or_default(),
        )
    };
    let (p50, p99, max) = figures(&there);
    let (here_p50, here_p99, here_max) = figures(&here);
    let met = p99 <= REMOTE_P99_TARGET_MS;
    let frames = there.len() + here.len();
    let elapsed = run.elapsed.as_secs_f64();
    let mb = |b: u64| b as f64 / 1024.0 / 1024.0;
    println!(
        "  frames: {frames} in {elapsed:.2} s ({:.0} frames/s); {} clients connected in {:.2} s",
        frames as f64 / elapsed,
        run.clients,
        run.connected_in.as_secs_f64(),
    );
    println!(
        "  token → client frame, another replica than the run: p50 {p50:.2} ms, p99 {p99:.2} ms (target ≤ {REMOTE_P99_TARGET_MS} ms){}, max {max:.2} ms",
        if met { "" } else { " MISSED" }
    );
    println!(
        "  token → client frame, the run's replica: p50 {here_p50:.2} ms, p99 {here_p99:.2} ms, max {here_max:.2} ms"
    );
    println!(
        "  slowest client's p99: {worst_client_p99:.2} ms (on {} replica)",
        if worst_is_remote {
            "another"
        } else {
            "the run's"
        }
    );
    let peaks: Vec<String> = (0..replicas)
        .map(|r| {
            format!(
                "{} {:.1} MB ({:.1} alone, {:.1} with the clients connected)",
                name(r),
                mb(run.rss_peak[r]),
                mb(run.rss_alone[r]),
                mb(run.rss_connected[r])
            )
        })
        .collect();
    println!("  peak RSS: {}", peaks.join(", "));
    let gateways_cpu: f64 = run.gateway_cpu.iter().sum();
    let each: Vec<String> = run
        .gateway_cpu
        .iter()
        .enumerate()
        .map(|(r, cpu)| format!("{} {cpu:.2}", name(r)))
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "  CPU while streaming: gateways {gateways_cpu:.2} s ({}), clients {:.2} s ({cores} cores: {elapsed:.2} s of wall time)",
        each.join(", "),
        run.clients_cpu,
    );
    println!(
        "{}",
        json!({
            "bench": "gateway_cluster_fanout",
            "replicas": replicas,
            "clients": run.clients,
            "sessions": run.sessions,
            "tokens": run.tokens,
            "in_phase": run.in_phase,
            "frames": frames,
            "remote_clients": remote_clients,
            "latency_ms": {
                "remote": {"p50": p50, "p99": p99, "max": max, "target_p99": REMOTE_P99_TARGET_MS, "met": met},
                "same": {"p50": here_p50, "p99": here_p99, "max": here_max},
                "worst_client_p99": worst_client_p99,
            },
            "peak_rss_mb": run.rss_peak.iter().map(|&b| mb(b)).collect::<Vec<_>>(),
            "cpu_s": {"gateways": gateways_cpu, "clients": run.clients_cpu},
        })
    );
}

/// The clients' process: connects them all (a few handshakes at a time),
/// says "ready", and then either holds them until "stop" (idle) or, on
/// "go", has each session's first client send the prompt and prints every
/// client's report as one JSON array. `PINCER_BENCH_URL` holds the
/// gateways' URLs, comma-separated: client i follows session s = i mod
/// sessions on gateway (s + i / sessions) mod their number.
async fn clients_process() {
    let urls: Vec<String> = std::env::var("PINCER_BENCH_URL")
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let clients = env_count("PINCER_BENCH_CLIENTS", 1000);
    let sessions = env_count("PINCER_BENCH_SESSIONS", 100);
    let tokens = env_count("PINCER_BENCH_TOKENS", 50);
    let idle = std::env::var("PINCER_BENCH_IDLE").is_ok_and(|v| v == "1");
    let replica = |i: usize| (i % sessions + i / sessions) % urls.len();
    let connected: Vec<Socket> = futures::stream::iter(0..clients)
        .map(|i| {
            let url = urls[replica(i)].clone();
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
    for (i, task) in tasks.into_iter().enumerate() {
        let (latencies, ws) = task.await.unwrap();
        all.push(ClientReport {
            session: i % sessions,
            replica: replica(i),
            latencies,
        });
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
