//! What one `edit` call costs on a large file: reading it, matching every
//! oldText, building the new text, writing it and diffing for the model, run
//! through the library's `EditTool` on the local disk (target: a median under
//! 100 ms for a 10 MB file).
//!
//! Cases: one edit near the middle; three edits spread over the file; the
//! one edit on a CRLF copy (which is converted to LF and back); and, for
//! information only, one edit found by the tolerant match (typographic
//! quotes), which folds the whole file first.
//!
//! The bench is a report: a missed target is printed, not a failure. An edit
//! that fails or writes the wrong text panics, because its figures would mean
//! nothing. Human-readable lines come first, then one JSON line with the same
//! figures for scripts. `PINCER_BENCH_EDIT_RUNS` (default 10) and
//! `PINCER_BENCH_EDIT_MB` (10) change the sizes.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use pincer::tools::edit::EditTool;
use pincer::tools::{Tool, ToolContext};
use serde_json::{Value, json};

const TARGET: Duration = Duration::from_millis(100);

fn main() {
    let runs = env_count("PINCER_BENCH_EDIT_RUNS", 10);
    let megabytes = env_count("PINCER_BENCH_EDIT_MB", 10);
    let dir = tempfile::tempdir().expect("temporary directory");
    let ctx = ToolContext::local(dir.path().to_path_buf());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");

    let (lf, functions) = source_text(megabytes * 1024 * 1024);
    let crlf = lf.replace('\n', "\r\n");
    let lines = lf.lines().count();
    println!(
        "pincer edit on a {:.1} MB file ({lines} lines), median of {runs} runs",
        lf.len() as f64 / (1024.0 * 1024.0)
    );

    let middle = marker(functions / 2);
    let spread = [
        marker(functions / 10),
        marker(functions / 2),
        marker(functions * 9 / 10),
    ];
    let cases = [
        Case {
            name: "one edit near the middle",
            key: "one_edit",
            text: &lf,
            edits: vec![edit_of(&middle)],
            informational: false,
        },
        Case {
            name: "three edits spread out",
            key: "three_edits",
            text: &lf,
            edits: spread.iter().map(|m| edit_of(m)).collect(),
            informational: false,
        },
        Case {
            name: "one edit, CRLF file",
            key: "crlf_one_edit",
            text: &crlf,
            edits: vec![edit_of(&middle)],
            informational: false,
        },
        Case {
            name: "one tolerant edit (typographic quotes; no target)",
            key: "tolerant_one_edit",
            text: &lf,
            edits: vec![json!({
                "oldText": format!("    let label = “{middle}”;"),
                "newText": format!("    let label = \"{middle} (edited)\";"),
            })],
            informational: true,
        },
    ];

    let mut summary = serde_json::Map::new();
    for case in &cases {
        let samples = runtime.block_on(measure(case, dir.path(), &ctx, runs));
        let median = median(samples.clone());
        let min = samples.iter().copied().min().unwrap_or_default();
        let met = median < TARGET;
        let verdict = if case.informational {
            String::new()
        } else if met {
            format!("  target < {} ms: met", ms(TARGET))
        } else {
            format!("  target < {} ms: MISSED", ms(TARGET))
        };
        println!(
            "  {:<52} median {:>7.2} ms  min {:>7.2} ms{verdict}",
            case.name,
            ms(median),
            ms(min)
        );
        summary.insert(
            case.key.to_string(),
            json!({
                "runs": runs,
                "median": ms(median),
                "min": ms(min),
                "target": if case.informational { Value::Null } else { json!(ms(TARGET)) },
                "met": if case.informational { Value::Null } else { json!(met) },
            }),
        );
    }
    println!(
        "{}",
        json!({"bench": "edit_large_file", "bytes": lf.len(), "edit_ms": summary})
    );
}

struct Case<'a> {
    name: &'static str,
    key: &'static str,
    text: &'a str,
    edits: Vec<Value>,
    informational: bool,
}

/// Runs the case `runs` times on a fresh copy of its file, checking each
/// result.
async fn measure(case: &Case<'_>, dir: &Path, ctx: &ToolContext, runs: usize) -> Vec<Duration> {
    let path = dir.join("big.rs");
    let args = json!({"path": "big.rs", "edits": case.edits});
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        std::fs::write(&path, case.text).expect("write the file");
        let started = Instant::now();
        let output = EditTool.execute(args.clone(), ctx).await;
        samples.push(started.elapsed());
        assert!(!output.is_error, "{}: {}", case.name, output.text());
        let written = std::fs::read_to_string(&path).expect("read the file back");
        assert_eq!(
            written.len(),
            case.text.len() + case.edits.len() * " (edited)".len(),
            "{}: unexpected length after the edit",
            case.name
        );
    }
    samples
}

fn edit_of(marker: &str) -> Value {
    json!({
        "oldText": format!("    let label = \"{marker}\";"),
        "newText": format!("    let label = \"{marker} (edited)\";"),
    })
}

/// A unique string the generated text holds once, in function `n`.
fn marker(n: usize) -> String {
    format!("marker {n:07}")
}

/// About `bytes` of Rust-like text: small functions with comments, loops,
/// strings and some typographic quotes, each with a unique label, and how
/// many functions there are.
fn source_text(bytes: usize) -> (String, usize) {
    let mut text = String::with_capacity(bytes + 1024);
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&format!(
            "/// Computes step {n} of the pipeline; see “Design notes” for why.\n\
             pub fn step_{n}(input: &[u64], scale: u64) -> Result<u64, String> {{\n\
             \x20   let label = \"{marker}\";\n\
             \x20   let mut total = 0u64;\n\
             \x20   for (i, value) in input.iter().enumerate() {{\n\
             \x20       if i % 3 == 0 {{\n\
             \x20           total = total.wrapping_add(value * scale); // weighted\n\
             \x20       }} else {{\n\
             \x20           total ^= value.rotate_left(i as u32);\n\
             \x20       }}\n\
             \x20   }}\n\
             \x20   if total == 0 {{\n\
             \x20       return Err(format!(\"{{label}}: empty input\"));\n\
             \x20   }}\n\
             \x20   Ok(total)\n\
             }}\n\
             \n",
            marker = marker(n)
        ));
        n += 1;
    }
    (text, n)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples
        .get(samples.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}
