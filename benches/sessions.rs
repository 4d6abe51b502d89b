//! How fast stored sessions come back: loading and replaying a transcript of
//! 10,000 entries (target: under 100 ms), and listing 1,000 sessions (target:
//! under 100 ms). Both are measured through the library and end to end over
//! ACP with the release binary (`session/load` answered; `session/list`).
//! Issue 31 set `session/load` over ACP a goal of 50 ms (60.7 ms then), and
//! asked that listing a session whose first prompt is 50 MB not read that
//! prompt (each list took 38 ms): its title is kept beside the transcript.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/acp_client.rs"]
mod acp_client;
#[path = "support/transcript.rs"]
mod transcript_fixture;

use std::path::Path;
use std::time::{Duration, Instant};

use acp_client::{Acp, Sandbox};
use pincer::llm::{Content, Message};
use pincer::session::{self, transcript};
use serde_json::json;

const TARGET: Duration = Duration::from_millis(100);
const RUNS: usize = 7;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn verdict(d: Duration) -> &'static str {
    if d < TARGET { "met" } else { "MISSED" }
}

/// Starts `pincer acp`, initialises it, then times `session/load` of
/// `sess_big` until its answer; returns the time and the number of
/// notifications before the answer.
fn timed_load(sandbox: &Sandbox, cwd: &Path, parse: bool) -> (Duration, usize) {
    use std::io::{BufRead, Write};
    let mut cmd = sandbox.command(&["acp"]).into_std();
    cmd.env("ANTHROPIC_API_KEY", "bench-key");
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})).unwrap();
    stdout.read_line(&mut line).unwrap();
    let load = json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": "sess_big", "cwd": cwd, "mcpServers": []}});
    let start = Instant::now();
    writeln!(stdin, "{load}").unwrap();
    let mut updates = 0;
    loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "pincer closed stdout"
        );
        if parse {
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            if value.get("method").is_none() {
                assert!(value.get("error").is_none(), "{value}");
                break;
            }
        } else if !line.starts_with(r#"{"jsonrpc":"2.0","method":"session/update""#) {
            assert!(
                line.contains(r#""id":1"#) && !line.contains(r#""error""#),
                "{line}"
            );
            break;
        }
        updates += 1;
    }
    let elapsed = start.elapsed();
    drop(stdin);
    child.wait().unwrap();
    (elapsed, updates)
}

fn main() {
    let sandbox = Sandbox::new();
    let data_dir = sandbox.home();
    let cwd = sandbox.work();
    transcript_fixture::write_transcript(&data_dir, &cwd, "sess_big", 10_000);
    let path = session::find(&data_dir, "sess_big").unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "pincer sessions: a 10,000-entry transcript ({:.1} MB)",
        size as f64 / 1e6
    );

    let library: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let loaded = transcript::load(&path).unwrap();
            let restored = session::restore(loaded.entries);
            let id = "sess_big".to_string().into();
            let lines = pincer::acp::updates::replay_lines(&id, &restored);
            assert!(
                lines
                    .iter()
                    .map(|block| block.lines().count())
                    .sum::<usize>()
                    >= 10_000
            );
            start.elapsed()
        })
        .collect();
    let library = median(library);
    println!(
        "  load + restore + replay (library)   median {:>8.2} ms  target < 100 ms: {}",
        library.as_secs_f64() * 1e3,
        verdict(library)
    );

    // Over ACP, from the `session/load` request to its answer, with every
    // replayed update read in between. Measured twice: reading the lines
    // (pincer's own cost: load, replay, write), and also parsing each one
    // as JSON the way an editor would (the editor's cost added on top).
    let acp_load = |parse: bool| {
        let samples = (0..RUNS)
            .map(|_| {
                let (elapsed, updates) = timed_load(&sandbox, &cwd, parse);
                assert!(updates >= 10_000, "{updates} updates");
                elapsed
            })
            .collect();
        median(samples)
    };
    let acp_load_raw = acp_load(false);
    println!(
        "  session/load over ACP, lines read   median {:>8.2} ms  target < 100 ms: {}; issue 31: before 60.7 ms, goal <= 50 ms: {}",
        acp_load_raw.as_secs_f64() * 1e3,
        verdict(acp_load_raw),
        if acp_load_raw <= Duration::from_millis(50) {
            "met"
        } else {
            "MISSED"
        }
    );
    let acp_load_parsed = acp_load(true);
    println!(
        "  the same, client parses every line  median {:>8.2} ms",
        acp_load_parsed.as_secs_f64() * 1e3,
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // 1,000 sessions of a few entries each.
    for i in 0..1_000 {
        transcript_fixture::write_transcript(&data_dir, &cwd, &format!("sess_{i:04}"), 3);
    }
    let listing: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let all = session::list(&data_dir, Some(&cwd));
            assert_eq!(all.len(), 1_001);
            start.elapsed()
        })
        .collect();
    let listing = median(listing);
    println!(
        "  list 1,001 sessions (library)       median {:>8.2} ms  target < 100 ms: {}",
        listing.as_secs_f64() * 1e3,
        verdict(listing)
    );
    let acp_list = runtime.block_on(async {
        let mut cmd = sandbox.command(&["acp"]);
        cmd.env("ANTHROPIC_API_KEY", "bench-key");
        let mut acp = Acp::spawn(cmd);
        acp.initialize().await;
        let mut samples = Vec::new();
        for _ in 0..RUNS {
            let start = Instant::now();
            let result = acp.call("session/list", json!({"cwd": cwd})).await;
            samples.push(start.elapsed());
            assert_eq!(result["sessions"].as_array().unwrap().len(), 50);
        }
        median(samples)
    });
    println!(
        "  session/list over ACP (first page)  median {:>8.2} ms  target < 100 ms: {}",
        acp_list.as_secs_f64() * 1e3,
        verdict(acp_list)
    );
    // One session whose first prompt is 50 MB, alone in its directory.
    let huge_cwd = cwd.join("huge");
    let path = session::transcript_path(&data_dir, &huge_cwd, "sess_huge");
    let mut writer = transcript::Writer::create(
        &path,
        &transcript::Header::new("sess_huge", &huge_cwd, None),
    )
    .unwrap();
    let prompt = format!("Summarise this log\n{}", "x".repeat(50_000_000));
    writer
        .append(transcript::Record::Message {
            message: Message::User {
                content: vec![Content::text(prompt)],
            },
            time: None,
        })
        .unwrap();
    let huge: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let all = session::list(&data_dir, Some(&huge_cwd));
            assert_eq!(all[0].title.as_deref(), Some("Summarise this log"));
            start.elapsed()
        })
        .collect();
    let huge = median(huge);
    println!(
        "  list a session with a 50 MB prompt  median {:>8.2} ms  issue 31: before 38 ms, goal: the prompt is not read: {}",
        huge.as_secs_f64() * 1e3,
        if huge < Duration::from_millis(1) {
            "met"
        } else {
            "MISSED"
        }
    );
    println!(
        "{}",
        json!({"bench": "sessions", "list_huge_prompt_ms": huge.as_secs_f64() * 1e3, "load_replay_ms": library.as_secs_f64() * 1e3, "acp_load_ms": acp_load_raw.as_secs_f64() * 1e3, "acp_load_parsed_ms": acp_load_parsed.as_secs_f64() * 1e3,
               "list_ms": listing.as_secs_f64() * 1e3, "acp_list_ms": acp_list.as_secs_f64() * 1e3, "target_ms": 100})
    );
}
