//! What the sandbox costs a command: `bash -c true` started and waited for
//! outside the sandbox, and as pincer starts it in the sandbox (the command
//! line comes from pincer's own `Sandbox`): through `pincer-sandbox`, with
//! the policy a command gets by default (`workspace-write`, the loopback
//! network pincer's commands share: user and mount namespaces, the shared
//! network namespace joined, secrets covered, Landlock, seccomp, limits)
//! and with `network = "off"`.
//! For comparison, the same through `pincer sandbox exec` (the launcher
//! pincer falls back to when `pincer-sandbox` is not beside it). Runs
//! alternate, so that a drift of the machine's speed touches all sides
//! alike. Goal: the default sandbox adds 3 ms or less at the median.
//!
//! The bench is a report: a missed goal is printed, not a failure. A
//! sandboxed run that fails panics, since its time would mean nothing.
//! `PINCER_BENCH_SANDBOX_RUNS` (default 200) sets the runs per kind. Linux
//! only: elsewhere it says so and ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GOAL_MS: f64 = 3.0;

fn main() {
    if !cfg!(target_os = "linux") {
        println!("the sandbox bench runs on Linux only");
        return;
    }
    let runs: usize = std::env::var("PINCER_BENCH_SANDBOX_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
    std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
    let pincer_home = home.join(".config/pincer");
    std::fs::create_dir_all(&pincer_home).unwrap();
    // The command lines pincer itself would start, from its own sandbox
    // object: the small launcher, and the network namespace its commands
    // share.
    pincer::tools::sandbox::set_launcher(env!("CARGO_BIN_EXE_pincer").into());
    let command = |network: &str| {
        use pincer::tools::sandbox::{Sandbox, SandboxConfig, Settings};
        let config: SandboxConfig = toml::from_str(&format!("network = \"{network}\"\n")).unwrap();
        let settings = Settings::from_config(&config, Some(&home));
        let sandbox = Sandbox::new(
            settings,
            None,
            Some(home.clone()),
            vec![pincer_home.clone()],
        );
        let confinement = sandbox.confinement(&work).unwrap().unwrap();
        confinement.command("bash", &["-c".to_string(), "true".to_string()])
    };
    let default = command("loopback");
    let off = command("off");
    assert!(default.0.ends_with("pincer-sandbox"), "{default:?}");
    assert!(default.1[1].contains("shared_network"), "{default:?}");
    println!("pincer sandbox ({})", env!("CARGO_BIN_EXE_pincer"));
    println!("{runs} runs of each, alternating, in {}", work.display());

    let mut outside = Vec::with_capacity(runs);
    let mut inside = Vec::with_capacity(runs);
    let mut inside_off = Vec::with_capacity(runs);
    let mut through_pincer = Vec::with_capacity(runs);
    for _ in 0..runs {
        outside.push(time(&work, "bash", &["-c", "true"]));
        inside.push(time(&work, &default.0, &strs(&default.1)));
        inside_off.push(time(&work, &off.0, &strs(&off.1)));
        let mut args = vec!["sandbox", "exec"];
        args.extend(strs(&default.1));
        through_pincer.push(time(&work, env!("CARGO_BIN_EXE_pincer"), &args));
    }
    let out = Stats::of(&mut outside);
    let def = Stats::of(&mut inside);
    let net_off = Stats::of(&mut inside_off);
    let big = Stats::of(&mut through_pincer);
    println!();
    println!("  outside                                 {out}");
    println!("  pincer-sandbox, network loopback (default) {def}");
    println!("  pincer-sandbox, network off             {net_off}");
    println!("  pincer sandbox exec, default            {big}");
    let added = def.median - out.median;
    let added_off = net_off.median - out.median;
    println!();
    println!(
        "added at the median: {added:.2} ms by default (goal ≤ {GOAL_MS} ms: {}), {added_off:.2} ms with the network off",
        if added <= GOAL_MS { "met" } else { "MISSED" }
    );
    println!(
        "{}",
        serde_json::json!({
            "outside_median_ms": out.median,
            "sandbox_median_ms": def.median,
            "sandbox_network_off_median_ms": net_off.median,
            "pincer_sandbox_exec_median_ms": big.median,
            "added_ms": added,
            "added_network_off_ms": added_off,
            "goal_ms": GOAL_MS,
        })
    );
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Starts `program` and waits for it; its wall time. A failure panics.
fn time(cwd: &Path, program: &str, args: &[&str]) -> Duration {
    let started = Instant::now();
    let output = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        output.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    took
}

struct Stats {
    median: f64,
    p10: f64,
    p90: f64,
}

impl Stats {
    fn of(times: &mut [Duration]) -> Self {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let at = |q: f64| ms(times[((times.len() - 1) as f64 * q).round() as usize]);
        Self {
            median: at(0.5),
            p10: at(0.1),
            p90: at(0.9),
        }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median {:.2} ms (p10 {:.2}, p90 {:.2})",
            self.median, self.p10, self.p90
        )
    }
}
