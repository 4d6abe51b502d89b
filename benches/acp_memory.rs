//! What `pincer acp` keeps resident, measured on the release binary over
//! real pipes against the mock model server:
//!
//! 1. one hello turn: a fresh process, `initialize`, `session/new` and one
//!    prompt answered with a short text (goal: a peak RSS of 12 MB or
//!    less), as the median of fresh processes, with the resident memory
//!    split into the binary's and libraries' pages (file-backed) and the
//!    process's own (anonymous) after `initialize` and after the turn;
//! 2. 100 concurrent sessions: one process, 100 `session/new`, then a
//!    prompt in each, all 100 in flight at once (goal: a peak RSS of 40 MB
//!    or less).
//!
//! The bench is a report: a missed goal is printed, not a failure. A run
//! whose protocol goes wrong (an error answer, a turn that does not end)
//! panics, because its figures would mean nothing. The last line repeats
//! the figures as JSON. `PINCER_BENCH_HELLO_RUNS` (default 5) and
//! `PINCER_BENCH_SESSIONS` (100) change the sizes. Memory comes from
//! `/proc`, so it is measured on Linux only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/acp_client.rs"]
mod acp_client;
#[path = "../tests/support/mock_model.rs"]
mod mock_model;

use std::collections::HashSet;

use acp_client::{Acp, Sandbox};
use mock_model::{MockModel, Reply};
use serde_json::{Value, json};

const HELLO_GOAL_MB: f64 = 12.0;
const SESSIONS_GOAL_MB: f64 = 40.0;

fn main() {
    let runs = env_count("PINCER_BENCH_HELLO_RUNS", 5);
    let sessions = env_count("PINCER_BENCH_SESSIONS", 100);
    println!("pincer ACP memory ({})", env!("CARGO_BIN_EXE_pincer"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let hello: Vec<Hello> = (0..runs).map(|_| runtime.block_on(hello_once())).collect();
    let concurrent = runtime.block_on(concurrent_sessions(sessions));

    let mut peaks: Vec<f64> = hello.iter().map(|h| mb(h.peak)).collect();
    peaks.sort_by(f64::total_cmp);
    let median = peaks[peaks.len() / 2];
    let typical = hello
        .iter()
        .find(|h| mb(h.peak) == median)
        .copied()
        .unwrap();
    println!();
    println!("one hello turn ({runs} fresh processes)");
    println!(
        "  peak RSS median {median:.1} MB (min {:.1}, max {:.1})",
        peaks[0],
        peaks[peaks.len() - 1]
    );
    println!(
        "  after initialize: {:.1} MB file-backed + {:.1} MB anonymous",
        mb(typical.idle.file),
        mb(typical.idle.anon)
    );
    println!(
        "  after the turn:   {:.1} MB file-backed + {:.1} MB anonymous",
        mb(typical.after.file),
        mb(typical.after.anon)
    );
    println!(
        "  goal: {HELLO_GOAL_MB} MB or less — {}",
        verdict(median <= HELLO_GOAL_MB)
    );
    println!();
    println!("{sessions} concurrent sessions, one prompt each");
    println!(
        "  peak RSS {:.1} MB; after: {:.1} MB file-backed + {:.1} MB anonymous, {} threads",
        mb(concurrent.peak),
        mb(concurrent.after.file),
        mb(concurrent.after.anon),
        concurrent.threads
    );
    println!(
        "  goal: {SESSIONS_GOAL_MB} MB or less — {}",
        verdict(mb(concurrent.peak) <= SESSIONS_GOAL_MB)
    );

    let summary = json!({
        "bench": "acp_memory",
        "hello_turn": {
            "runs": runs,
            "peak_rss_mb_median": median,
            "peak_rss_mb": peaks,
            "idle_file_mb": mb(typical.idle.file),
            "idle_anon_mb": mb(typical.idle.anon),
            "after_file_mb": mb(typical.after.file),
            "after_anon_mb": mb(typical.after.anon),
            "goal_mb": HELLO_GOAL_MB,
            "met": median <= HELLO_GOAL_MB,
        },
        "concurrent_sessions": {
            "sessions": sessions,
            "peak_rss_mb": mb(concurrent.peak),
            "after_file_mb": mb(concurrent.after.file),
            "after_anon_mb": mb(concurrent.after.anon),
            "threads": concurrent.threads,
            "goal_mb": SESSIONS_GOAL_MB,
            "met": mb(concurrent.peak) <= SESSIONS_GOAL_MB,
        },
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

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// The resident set now, split by what backs it (`RssFile` + `RssShmem`
/// against `RssAnon` in `/proc/PID/status`).
#[derive(Clone, Copy, Debug, Default)]
struct Resident {
    file: u64,
    anon: u64,
}

fn status_kb(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
        * 1024
}

fn resident(pid: u32) -> Resident {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    Resident {
        file: status_kb(&status, "RssFile:") + status_kb(&status, "RssShmem:"),
        anon: status_kb(&status, "RssAnon:"),
    }
}

fn peak(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status_kb(&status, "VmHWM:")
}

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

async fn finish(mut acp: Acp) {
    acp.close_stdin();
    let status = acp.wait_exit().await;
    let stderr = acp.stderr.await.unwrap_or_default();
    assert!(
        status.success(),
        "pincer acp exited with {status}\n{stderr}"
    );
}

#[derive(Clone, Copy, Debug)]
struct Hello {
    peak: u64,
    idle: Resident,
    after: Resident,
}

/// One fresh process, one hello turn.
async fn hello_once() -> Hello {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(&sandbox, &mock);
    let pid = acp.child.id().expect("pincer has a pid");
    acp.initialize().await;
    let idle = resident(pid);
    let session = acp.new_session(&sandbox.work()).await;
    let result = acp
        .call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "Hello!"}]}),
        )
        .await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    let hello = Hello {
        peak: peak(pid),
        idle,
        after: resident(pid),
    };
    finish(acp).await;
    hello
}

struct Concurrent {
    peak: u64,
    after: Resident,
    /// The process's threads after the turns (each has a stack and an
    /// allocator heap of its own).
    threads: u64,
}

/// `sessions` sessions in one process, a prompt in each, all in flight at
/// once.
async fn concurrent_sessions(sessions: usize) -> Concurrent {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for _ in 0..sessions {
        mock.push(Reply::fixture("anthropic/text.sse"));
    }
    let mut acp = spawn(&sandbox, &mock);
    let pid = acp.child.id().expect("pincer has a pid");
    acp.initialize().await;
    let mut ids = Vec::new();
    for _ in 0..sessions {
        ids.push(acp.new_session(&sandbox.work()).await);
    }
    let mut pending = HashSet::new();
    for session in &ids {
        let id = acp
            .send(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "Hello!"}]}),
            )
            .await;
        pending.insert(id);
    }
    while !pending.is_empty() {
        let message: Value = acp.next().await;
        if message.get("method").is_some() {
            continue;
        }
        let id = message["id"].as_i64().expect("a response id");
        assert!(pending.remove(&id), "an unexpected response: {message}");
        assert_eq!(
            message["result"],
            json!({"stopReason": "end_turn"}),
            "a prompt failed: {message}"
        );
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let concurrent = Concurrent {
        peak: peak(pid),
        after: resident(pid),
        threads: status_kb(&status, "Threads:") / 1024,
    };
    finish(acp).await;
    concurrent
}
