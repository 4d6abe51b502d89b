//! What pincer itself costs an editor, measured on the release binary over
//! real pipes against the mock model server:
//!
//! 1. start-up: the time from spawning `pincer acp` to reading its answer to
//!    an `initialize` written at once (target: median under 10 ms);
//! 2. streaming: the CPU time and peak memory of the pincer process while it
//!    relays one answer of 20,000 text deltas from the model to the editor as
//!    `agent_message_chunk` updates (targets: under 5 µs of CPU per delta,
//!    so under 100 ms for the stream, and a peak RSS under 20 MB).
//!
//! The bench is a report: a missed target is printed, not a failure. A run
//! whose protocol goes wrong (an error answer, a lost or extra delta) panics,
//! because its figures would mean nothing. Human-readable lines come first,
//! then one JSON line with the same figures for scripts.
//!
//! `PINCER_BENCH_SPAWNS` (default 50), `PINCER_BENCH_STREAM_RUNS` (5) and
//! `PINCER_BENCH_DELTAS` (20,000) change the sizes. CPU and memory come from
//! `/proc`, so they are measured on Linux only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/acp_client.rs"]
mod acp_client;
#[path = "../tests/support/mock_model.rs"]
mod mock_model;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use acp_client::{Acp, Sandbox, updates_of};
use mock_model::{MockModel, Reply};
use serde_json::{Value, json};

const SPAWN_TARGET: Duration = Duration::from_millis(10);
const CPU_PER_DELTA_TARGET_US: f64 = 5.0;
const PEAK_RSS_TARGET_MB: f64 = 20.0;

fn main() {
    let spawns = env_count("PINCER_BENCH_SPAWNS", 50);
    let stream_runs = env_count("PINCER_BENCH_STREAM_RUNS", 5);
    let deltas = env_count("PINCER_BENCH_DELTAS", 20_000);
    println!("pincer ACP overhead ({})", env!("CARGO_BIN_EXE_pincer"));

    let spawn = bench_spawn(spawns);
    let stream = bench_stream(stream_runs, deltas);

    let summary = json!({
        "bench": "acp_overhead",
        "spawn_initialize_ms": {
            "runs": spawns,
            "median": ms(spawn.median),
            "p90": ms(spawn.p90),
            "min": ms(spawn.min),
            "target": ms(SPAWN_TARGET),
            "met": spawn.median < SPAWN_TARGET,
        },
        "stream": stream.to_json(deltas, stream_runs),
    });
    println!("{summary}");
}

fn env_count(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => panic!("{name} must be a positive whole number, got {value:?}"),
        },
        Err(_) => default,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

// ---------------------------------------------------------------------------
// 1. Spawn → initialize answer

struct Spread {
    median: Duration,
    p90: Duration,
    min: Duration,
}

/// Nearest-rank percentiles of a non-empty sample.
fn spread(mut samples: Vec<Duration>) -> Spread {
    samples.sort();
    let rank = |p: f64| {
        let index = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[index]
    };
    Spread {
        median: rank(0.5),
        p90: rank(0.9),
        min: samples[0],
    }
}

/// The same clean environment as the tests' `Sandbox::command`, but a
/// blocking `std` command: no async runtime sits between the pipe and the
/// clock.
fn std_command(sandbox: &Sandbox) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pincer"));
    cmd.arg("acp")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sandbox.home())
        .env("PINCER_HOME", sandbox.home())
        .env("RUST_LOG", "warn")
        .env("ANTHROPIC_API_KEY", "test-key")
        .current_dir(sandbox.work())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;

/// One spawn: the time until the `initialize` answer is read.
fn spawn_once(sandbox: &Sandbox) -> Duration {
    let start = Instant::now();
    let mut child = std_command(sandbox).spawn().expect("spawn pincer acp");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(INITIALIZE.as_bytes()).unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let elapsed = start.elapsed();

    drop(stdin);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!("initialize answer is not JSON ({e}): {line:?}\nstderr:\n{stderr}")
    });
    assert!(
        answer["id"] == json!(0) && answer["result"]["protocolVersion"] == json!(1),
        "unexpected initialize answer: {answer}\nstderr:\n{stderr}"
    );
    assert!(
        status.success(),
        "pincer acp exited with {status}\nstderr:\n{stderr}"
    );
    elapsed
}

fn bench_spawn(runs: usize) -> Spread {
    let sandbox = Sandbox::new();
    // Warm the page cache and the dynamic loader before timing.
    for _ in 0..3 {
        spawn_once(&sandbox);
    }
    let samples: Vec<Duration> = (0..runs).map(|_| spawn_once(&sandbox)).collect();
    let spread = spread(samples);
    println!();
    println!("spawn → initialize answer ({runs} spawns)");
    println!(
        "  median {:.2} ms   p90 {:.2} ms   min {:.2} ms",
        ms(spread.median),
        ms(spread.p90),
        ms(spread.min)
    );
    println!(
        "  target: median under {} ms — {}",
        SPAWN_TARGET.as_millis(),
        verdict(spread.median < SPAWN_TARGET)
    );
    spread
}

// ---------------------------------------------------------------------------
// 2. Streaming 20,000 text deltas

/// The text of delta `i`.
fn delta_text(i: usize) -> String {
    format!("tok{i} ")
}

/// An Anthropic streaming answer of `deltas` text deltas, ending the turn.
fn sse_body(deltas: usize) -> String {
    fn event(body: &mut String, name: &str, data: &Value) {
        body.push_str("event: ");
        body.push_str(name);
        body.push_str("\ndata: ");
        body.push_str(&data.to_string());
        body.push_str("\n\n");
    }
    let mut body = String::with_capacity(deltas * 120 + 1024);
    event(
        &mut body,
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5-20250929", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 21, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 0, "output_tokens": 1}
        }}),
    );
    event(
        &mut body,
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
    );
    for i in 0..deltas {
        event(
            &mut body,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": delta_text(i)}}),
        );
    }
    event(
        &mut body,
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    event(
        &mut body,
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"input_tokens": 21, "output_tokens": deltas}}),
    );
    event(&mut body, "message_stop", &json!({"type": "message_stop"}));
    body
}

/// What `/proc` says about a process at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct ProcSample {
    /// utime + stime of the whole process, dead threads included, in ns
    /// (clock-tick resolution, usually 10 ms).
    stat_cpu_ns: Option<u64>,
    /// Time on the CPU summed over the live threads, in ns (exact, but a
    /// thread that exits takes its share with it).
    sched_cpu_ns: Option<u64>,
    /// VmHWM: the peak resident set so far, in bytes.
    peak_rss: Option<u64>,
}

#[cfg(target_os = "linux")]
mod procfs {
    use super::ProcSample;

    /// Clock ticks per second, as `getconf CLK_TCK` says (100 nearly
    /// everywhere).
    pub fn clock_ticks() -> u64 {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    }

    pub fn sample(pid: u32, ticks: u64) -> ProcSample {
        ProcSample {
            stat_cpu_ns: stat_cpu(pid).map(|t| t * 1_000_000_000 / ticks),
            sched_cpu_ns: sched_cpu(pid),
            peak_rss: peak_rss(pid),
        }
    }

    /// utime + stime (fields 14 and 15) of `/proc/<pid>/stat`, in ticks.
    fn stat_cpu(pid: u32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses; fields resume
        // after the last `)`, starting with field 3 (state).
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
        let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
        Some(utime + stime)
    }

    /// The first field of every `/proc/<pid>/task/<tid>/schedstat`, summed.
    fn sched_cpu(pid: u32) -> Option<u64> {
        let mut total = 0;
        for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
            let path = task.ok()?.path().join("schedstat");
            // A thread may exit between listing and reading.
            if let Ok(text) = std::fs::read_to_string(path) {
                total += text.split_whitespace().next()?.parse::<u64>().ok()?;
            }
        }
        Some(total)
    }

    fn peak_rss(pid: u32) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
}

#[cfg(not(target_os = "linux"))]
mod procfs {
    use super::ProcSample;

    pub fn clock_ticks() -> u64 {
        100
    }

    pub fn sample(_pid: u32, _ticks: u64) -> ProcSample {
        ProcSample::default()
    }
}

/// The figures of one streaming run.
#[derive(Clone, Copy, Debug)]
struct StreamRun {
    /// `agent_message_chunk` updates received (one per delta unless pincer
    /// joins deltas).
    chunks: usize,
    wall: Duration,
    stat_cpu_ns: Option<u64>,
    sched_cpu_ns: Option<u64>,
    peak_rss: Option<u64>,
}

impl StreamRun {
    /// The CPU figure targets are judged on: the exact per-thread sum when
    /// there is one, else the tick-based total.
    fn cpu_ns(&self) -> Option<u64> {
        self.sched_cpu_ns.or(self.stat_cpu_ns)
    }
}

/// One fresh `pincer acp`: initialize, new session, then one prompt whose
/// answer is `body`. Panics unless every delta arrives, in order, once.
async fn stream_once(body: &str, expected: &str, deltas: usize, ticks: u64) -> StreamRun {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(body));
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let mut acp = Acp::spawn(cmd);
    let pid = acp.child.id().expect("pincer has a pid");
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;

    let before = procfs::sample(pid, ticks);
    let start = Instant::now();
    let id = acp
        .send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "Count for me."}]}),
        )
        .await;
    let (response, messages) = acp.until_response(id).await;
    let wall = start.elapsed();
    // Before stdin closes: the process must still be there to be read.
    let after = procfs::sample(pid, ticks);

    acp.close_stdin();
    let status = acp.wait_exit().await;
    let stderr = acp.stderr.await.unwrap_or_default();
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "session/prompt failed: {response}\nstderr:\n{stderr}"
    );
    let chunks: Vec<Value> = updates_of(&messages)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .collect();
    // The exact text, in order, proves that no delta was lost, repeated or
    // reordered. The count may be lower than `deltas` if pincer ever joins
    // deltas that are ready together; it may never be higher.
    let text: String = chunks
        .iter()
        .map(|c| c["content"]["text"].as_str().expect("a text chunk"))
        .collect();
    assert!(
        text == expected,
        "the streamed text differs from the model's ({} chunks, {} of {} bytes)\nstderr:\n{stderr}",
        chunks.len(),
        text.len(),
        expected.len()
    );
    assert!(
        (1..=deltas).contains(&chunks.len()),
        "{} agent_message_chunk updates for {deltas} deltas\nstderr:\n{stderr}",
        chunks.len()
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    assert_eq!(mock.requests().len(), 1, "expected exactly one model call");
    assert!(
        status.success(),
        "pincer acp exited with {status}\nstderr:\n{stderr}"
    );

    let diff = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
    StreamRun {
        chunks: chunks.len(),
        wall,
        stat_cpu_ns: diff(before.stat_cpu_ns, after.stat_cpu_ns),
        sched_cpu_ns: diff(before.sched_cpu_ns, after.sched_cpu_ns),
        peak_rss: after.peak_rss,
    }
}

/// The medians of several runs, each figure on its own.
struct StreamSummary {
    runs: Vec<StreamRun>,
}

fn median_u64(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    let mut values: Vec<u64> = values.collect::<Option<_>>()?;
    values.sort_unstable();
    values.get(values.len().checked_sub(1)? / 2).copied()
}

impl StreamSummary {
    fn wall(&self) -> Duration {
        spread(self.runs.iter().map(|r| r.wall).collect()).median
    }

    fn cpu_ns(&self) -> Option<u64> {
        median_u64(self.runs.iter().map(StreamRun::cpu_ns))
    }

    fn stat_cpu_ns(&self) -> Option<u64> {
        median_u64(self.runs.iter().map(|r| r.stat_cpu_ns))
    }

    fn sched_cpu_ns(&self) -> Option<u64> {
        median_u64(self.runs.iter().map(|r| r.sched_cpu_ns))
    }

    fn peak_rss(&self) -> Option<u64> {
        median_u64(self.runs.iter().map(|r| r.peak_rss))
    }

    fn to_json(&self, deltas: usize, runs: usize) -> Value {
        let cpu_ms = self.cpu_ns().map(|ns| ns as f64 / 1e6);
        let per_delta = self.cpu_ns().map(|ns| ns as f64 / 1e3 / deltas as f64);
        let rss_mb = self.peak_rss().map(mb);
        json!({
            "deltas": deltas,
            "runs": runs,
            "chunks": self.runs.iter().map(|r| r.chunks).min(),
            "wall_ms": ms(self.wall()),
            "cpu_ms": cpu_ms,
            "cpu_ms_stat": self.stat_cpu_ns().map(|ns| ns as f64 / 1e6),
            "cpu_ms_schedstat": self.sched_cpu_ns().map(|ns| ns as f64 / 1e6),
            "cpu_us_per_delta": per_delta,
            "cpu_us_per_delta_target": CPU_PER_DELTA_TARGET_US,
            "cpu_met": per_delta.map(|us| us < CPU_PER_DELTA_TARGET_US),
            "peak_rss_mb": rss_mb,
            "peak_rss_mb_target": PEAK_RSS_TARGET_MB,
            "peak_rss_met": rss_mb.map(|m| m < PEAK_RSS_TARGET_MB),
        })
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn show_ms(ns: Option<u64>) -> String {
    ns.map_or_else(
        || "not measured".to_string(),
        |ns| format!("{:.1} ms", ns as f64 / 1e6),
    )
}

fn show_mb(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "not measured".to_string(),
        |b| format!("{:.1} MB", mb(b)),
    )
}

fn bench_stream(runs: usize, deltas: usize) -> StreamSummary {
    let body = sse_body(deltas);
    let expected: String = (0..deltas).map(delta_text).collect();
    let ticks = procfs::clock_ticks();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    println!();
    println!(
        "streaming {deltas} text deltas ({runs} runs, a fresh process each; {:.1} MB of SSE)",
        mb(body.len() as u64)
    );
    let mut summary = StreamSummary { runs: Vec::new() };
    for i in 0..runs {
        let run = runtime.block_on(stream_once(&body, &expected, deltas, ticks));
        println!(
            "  run {}: {} chunks   wall {:.1} ms   cpu {} (stat {}, schedstat {})   peak RSS {}",
            i + 1,
            run.chunks,
            ms(run.wall),
            show_ms(run.cpu_ns()),
            show_ms(run.stat_cpu_ns),
            show_ms(run.sched_cpu_ns),
            show_mb(run.peak_rss),
        );
        summary.runs.push(run);
    }

    println!("  median wall time      {:.1} ms", ms(summary.wall()));
    match summary.cpu_ns() {
        Some(ns) => {
            let per_delta = ns as f64 / 1e3 / deltas as f64;
            println!(
                "  median agent CPU      {} for the stream (stat {}, schedstat {})",
                show_ms(Some(ns)),
                show_ms(summary.stat_cpu_ns()),
                show_ms(summary.sched_cpu_ns()),
            );
            println!(
                "  CPU per delta         {per_delta:.2} µs   target under {CPU_PER_DELTA_TARGET_US} µs — {}",
                verdict(per_delta < CPU_PER_DELTA_TARGET_US)
            );
        }
        None => println!("  agent CPU             not measured (needs Linux /proc)"),
    }
    match summary.peak_rss() {
        Some(bytes) => println!(
            "  median peak RSS       {}   target under {PEAK_RSS_TARGET_MB} MB — {}",
            show_mb(Some(bytes)),
            verdict(mb(bytes) < PEAK_RSS_TARGET_MB)
        ),
        None => println!("  peak RSS              not measured (needs Linux /proc)"),
    }
    summary
}
