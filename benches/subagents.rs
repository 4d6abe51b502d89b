//! What helpers (the `task` tool) cost in one `pincer acp` process, on the
//! release binary over real pipes against the mock model server: a prompt
//! whose answer is 8 `task` calls, each helper streaming the mock's hello
//! answer, all 8 at once (the mock holds their answers until all 8 have
//! asked, then streams them event by event), against a baseline prompt of
//! the same shape whose one call is `ls`.
//!
//! Per helper: the extra peak RSS over the baseline, and the extra CPU
//! time of the process during the prompt (every thread's, from
//! `/proc/PID/task/*/schedstat`, in nanoseconds), each divided by 8.
//! Goals: 3 MB or less, 5 ms or less. Medians of `PINCER_BENCH_RUNS`
//! (default 5) fresh processes of each kind. A report: a missed goal is
//! printed, not a failure; a protocol error panics. Linux only (`/proc`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/acp_client.rs"]
mod acp_client;
#[path = "../tests/support/mock_model.rs"]
mod mock_model;
#[path = "../tests/support/sse.rs"]
mod sse;

use std::sync::Arc;
use std::time::Duration;

use acp_client::{Acp, Sandbox};
use mock_model::{MockModel, Reply};
use serde_json::json;
use tokio::sync::Notify;

const HELPERS: usize = 8;
const RSS_GOAL_MB: f64 = 3.0;
const CPU_GOAL_MS: f64 = 5.0;

fn main() {
    let runs: usize = std::env::var("PINCER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(5);
    println!("pincer helpers ({})", env!("CARGO_BIN_EXE_pincer"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut base = Vec::new();
    let mut with = Vec::new();
    for _ in 0..runs {
        base.push(runtime.block_on(prompt_once(false)));
        with.push(runtime.block_on(prompt_once(true)));
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let mut base_rss: Vec<f64> = base.iter().map(|m| m.peak_mb).collect();
    let mut with_rss: Vec<f64> = with.iter().map(|m| m.peak_mb).collect();
    let mut base_cpu: Vec<f64> = base.iter().map(|m| m.cpu_ms).collect();
    let mut with_cpu: Vec<f64> = with.iter().map(|m| m.cpu_ms).collect();
    let (base_rss, with_rss) = (median(&mut base_rss), median(&mut with_rss));
    let (base_cpu, with_cpu) = (median(&mut base_cpu), median(&mut with_cpu));
    let rss_per = (with_rss - base_rss) / HELPERS as f64;
    let cpu_per = (with_cpu - base_cpu) / HELPERS as f64;
    println!();
    println!("{runs} fresh processes of each kind, medians");
    println!("  baseline prompt: peak RSS {base_rss:.1} MB, CPU {base_cpu:.1} ms");
    println!("  {HELPERS} helpers at once: peak RSS {with_rss:.1} MB, CPU {with_cpu:.1} ms");
    println!(
        "  per helper: {rss_per:.2} MB (goal {RSS_GOAL_MB} MB or less — {}), {cpu_per:.2} ms CPU (goal {CPU_GOAL_MS} ms or less — {})",
        verdict(rss_per <= RSS_GOAL_MB),
        verdict(cpu_per <= CPU_GOAL_MS)
    );
    println!(
        "{}",
        json!({
            "bench": "subagents",
            "runs": runs,
            "helpers": HELPERS,
            "baseline_peak_rss_mb": base_rss,
            "helpers_peak_rss_mb": with_rss,
            "baseline_cpu_ms": base_cpu,
            "helpers_cpu_ms": with_cpu,
            "rss_mb_per_helper": rss_per,
            "cpu_ms_per_helper": cpu_per,
            "met": rss_per <= RSS_GOAL_MB && cpu_per <= CPU_GOAL_MS,
        })
    );
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

struct Measured {
    peak_mb: f64,
    cpu_ms: f64,
}

/// CPU time the process's threads have used, in ms.
fn cpu_ms(pid: u32) -> f64 {
    let mut total = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            total += stat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total as f64 / 1e6
}

fn peak_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    kb as f64 / 1024.0
}

/// One fresh process and one prompt: with `helpers`, 8 `task` calls whose
/// helpers stream at once; else one `ls` call.
async fn prompt_once(helpers: bool) -> Measured {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    // One gate per helper: a permit waits for a stream not yet polled.
    let gates: Vec<Arc<Notify>> = (0..HELPERS).map(|_| Arc::new(Notify::new())).collect();
    if helpers {
        let calls: Vec<(String, String)> = (0..HELPERS)
            .map(|i| {
                (
                    format!("t{i}"),
                    json!({"description": format!("job {i}"), "prompt": format!("JOB-{i}: say hello")})
                        .to_string(),
                )
            })
            .collect();
        let refs: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|(id, args)| (id.as_str(), "task", args.as_str()))
            .collect();
        mock.push(Reply::sse(sse::anthropic_tool_calls(&refs)));
        for (i, gate) in gates.iter().enumerate() {
            mock.push_for(
                &format!("JOB-{i}:"),
                Reply::Sse {
                    body: mock_model::fixture("anthropic/text.sse"),
                    delay: Duration::from_millis(2),
                    gate: Some(gate.clone()),
                },
            );
        }
    } else {
        mock.push(Reply::sse(sse::anthropic_tool_call("t0", "ls", &json!({}))));
    }
    mock.push(Reply::fixture("anthropic/text.sse"));
    // All 8 at once (the default is 4).
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("[subagents]\nmax_parallel = {HELPERS}\n"),
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let mut acp = Acp::spawn(cmd);
    let pid = acp.child.id().unwrap();
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let before = cpu_ms(pid);
    let id = acp
        .send(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "Go"}]}),
        )
        .await;
    if helpers {
        mock.wait_for_requests(1 + HELPERS, Duration::from_secs(30))
            .await;
        for gate in &gates {
            gate.notify_one();
        }
    }
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let measured = Measured {
        peak_mb: peak_mb(pid),
        cpu_ms: cpu_ms(pid) - before,
    };
    acp.close_stdin();
    acp.wait_exit().await;
    measured
}
