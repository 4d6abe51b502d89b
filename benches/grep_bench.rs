//! How pincer's in-process `grep` tool compares with ripgrep on a large tree
//! (target: a median within 1.5× of `rg` for the same search).
//!
//! Both sides search the same tree with the same rules: `.gitignore`/`.ignore`
//! honoured, hidden files searched, `.git` skipped (`rg --hidden -g '!.git'`),
//! binary files left out, line numbers on, and the same number of threads
//! (both take the machine's cores, at most 12). pincer runs through the
//! library exactly as the agent calls it (`GrepTool::execute` on a
//! current-thread runtime, the search on a blocking thread); `rg` is spawned
//! with its output read from a pipe. The queries cover a rare literal (both
//! must find the same number of lines), a common regex with a match limit
//! (`limit` against `rg -m`, which both apply per file; pincer also stops
//! probing files once the first `limit` matches in path order are known), and
//! common patterns with every match collected (pincer's `limit` set beyond
//! any count, `rg` without `-m`).
//!
//! The tree is `PINCER_BENCH_TREE` if set, else the Rust standard library
//! sources (`rustc --print sysroot`/lib/rustlib/src/rust/library, from the
//! rust-src component), else the crate sources cargo has unpacked
//! (`$CARGO_HOME/registry/src`) if they hold 100 MB, else a generated tree of
//! about 200 MB of Rust-like text under the target directory (made once).
//! `PINCER_BENCH_RG` names the `rg` binary (default `rg` on PATH) and
//! `PINCER_BENCH_RUNS` the timed runs per query (default 5, after one
//! warm-up run each).
//!
//! The bench is a report: a missed target is printed, not a failure. A run
//! whose searches fail panics, because its figures would mean nothing.
//! Human-readable lines come first, then one JSON line with the same figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pincer::tools::grep::GrepTool;
use pincer::tools::{Tool, ToolContext};
use serde_json::json;

const RATIO_TARGET: f64 = 1.5;
/// A `limit` no search reaches, for "every match".
const UNLIMITED: u64 = 1_000_000_000;
/// Size of the generated tree, when one is needed.
const GENERATED_BYTES: usize = 200 * 1024 * 1024;

struct Query {
    name: &'static str,
    pattern: &'static str,
    literal: bool,
    ignore_case: bool,
    /// `None` for every match.
    limit: Option<u64>,
}

const QUERIES: &[Query] = &[
    Query {
        name: "rare literal",
        pattern: "from_str_radix",
        literal: true,
        ignore_case: false,
        limit: None,
    },
    Query {
        name: "common regex, limit 100",
        pattern: r"fn \w+\(",
        literal: false,
        ignore_case: false,
        limit: Some(100),
    },
    Query {
        name: "common regex, every match",
        pattern: r"fn \w+\(",
        literal: false,
        ignore_case: false,
        limit: None,
    },
    Query {
        name: "ignore case, every match",
        pattern: "todo",
        literal: false,
        ignore_case: true,
        limit: None,
    },
];

fn main() {
    let runs = env_count("PINCER_BENCH_RUNS", 5);
    let rg = std::env::var("PINCER_BENCH_RG").unwrap_or_else(|_| "rg".to_string());
    let rg_version = Command::new(&rg)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_else(|e| {
            panic!("cannot run {rg} ({e}); install ripgrep or set PINCER_BENCH_RG")
        });
    let (tree, source) = pick_tree();
    let (files, bytes) = tree_size(&tree);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(12));
    println!("pincer grep vs {rg_version}");
    println!(
        "tree: {} ({source}): {files} files, {:.0} MB searched; {threads} threads; median of \
         {runs} runs",
        tree.display(),
        bytes as f64 / 1_048_576.0
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ctx = ToolContext::local(tree.clone());

    let mut results = Vec::new();
    for query in QUERIES {
        let pincer = || run_pincer(&runtime, &ctx, query);
        let ripgrep = || run_rg(&rg, &tree, query);
        // Warm the page cache and both programs once.
        let (_, pincer_lines, pincer_truncated) = pincer();
        let rg_lines = ripgrep().1;
        let pincer_time = median((0..runs).map(|_| pincer().0).collect());
        let rg_time = median((0..runs).map(|_| ripgrep().0).collect());
        let ratio = pincer_time.as_secs_f64() / rg_time.as_secs_f64();
        let met = ratio <= RATIO_TARGET;
        println!(
            "{:<28} pincer {:>8.1} ms  rg {:>8.1} ms  ratio {ratio:.2} ({})  lines: pincer {} \
             shown, rg {}",
            query.name,
            ms(pincer_time),
            ms(rg_time),
            if met { "met" } else { "MISSED" },
            pincer_lines,
            rg_lines,
        );
        // Uncut, both outputs hold every matching line.
        if !pincer_truncated && query.limit.is_none() && pincer_lines != rg_lines {
            println!("  note: the two found different numbers of matching lines");
        }
        results.push(json!({
            "query": query.name,
            "pattern": query.pattern,
            "limit": query.limit,
            "pincer_ms": ms(pincer_time),
            "rg_ms": ms(rg_time),
            "ratio": ratio,
            "met": met,
            "pincer_lines_shown": pincer_lines,
            "rg_lines": rg_lines,
        }));
    }
    let summary = json!({
        "bench": "grep_vs_rg",
        "rg": rg_version,
        "tree": tree.display().to_string(),
        "tree_source": source,
        "files": files,
        "bytes": bytes,
        "threads": threads,
        "runs": runs,
        "ratio_target": RATIO_TARGET,
        "queries": results,
    });
    println!("{summary}");
}

/// Times one `grep` call; returns the time, the matching lines shown, and
/// whether the output was cut.
fn run_pincer(
    runtime: &tokio::runtime::Runtime,
    ctx: &ToolContext,
    query: &Query,
) -> (Duration, u64, bool) {
    let args = json!({
        "pattern": query.pattern,
        "literal": query.literal,
        "ignoreCase": query.ignore_case,
        "limit": query.limit.unwrap_or(UNLIMITED),
    });
    let start = Instant::now();
    let output = runtime.block_on(GrepTool.execute(args, ctx));
    let elapsed = start.elapsed();
    assert!(!output.is_error, "pincer grep failed: {}", output.text());
    let lines = output.details["matches"].as_u64().unwrap();
    let truncated = output.details["truncated"].as_bool().unwrap();
    (elapsed, lines, truncated)
}

/// Times one `rg` run with the same rules; returns the time and the lines
/// it printed.
fn run_rg(rg: &str, tree: &Path, query: &Query) -> (Duration, u64) {
    let mut cmd = Command::new(rg);
    cmd.args([
        "--no-config",
        "--hidden",
        "--glob",
        "!.git",
        "--line-number",
        "--no-heading",
        "--color",
        "never",
    ]);
    if query.literal {
        cmd.arg("--fixed-strings");
    }
    if query.ignore_case {
        cmd.arg("--ignore-case");
    }
    if let Some(limit) = query.limit {
        cmd.arg("--max-count").arg(limit.to_string());
    }
    cmd.arg("--regexp")
        .arg(query.pattern)
        .current_dir(tree)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let start = Instant::now();
    let output = cmd.output().unwrap();
    let elapsed = start.elapsed();
    // 1 means no match, 2 an error (rg also says 2 for unreadable files).
    assert!(
        output.status.code().is_some_and(|c| c <= 2),
        "rg failed: {}",
        output.status
    );
    let lines = output.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
    (elapsed, lines)
}

fn pick_tree() -> (PathBuf, &'static str) {
    if let Ok(tree) = std::env::var("PINCER_BENCH_TREE") {
        return (PathBuf::from(tree), "PINCER_BENCH_TREE");
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    if let Ok(output) = Command::new(rustc).args(["--print", "sysroot"]).output() {
        let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
        let library = Path::new(&sysroot).join("lib/rustlib/src/rust/library");
        if library.is_dir() {
            return (library, "rust-src");
        }
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    if let Some(registry) = cargo_home.map(|home| home.join("registry/src"))
        && registry.is_dir()
        && tree_size(&registry).1 >= 100 * 1024 * 1024
    {
        return (registry, "cargo registry sources");
    }
    (generated_tree(), "generated")
}

/// Files and bytes under `tree` that a search reads (the same ignore rules).
fn tree_size(tree: &Path) -> (u64, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let walk = ignore::WalkBuilder::new(tree)
        .hidden(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walk.flatten() {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            files += 1;
            bytes += entry.metadata().map_or(0, |m| m.len());
        }
    }
    (files, bytes)
}

/// About 200 MB of Rust-like text in 20,000 files, made once under the
/// target directory.
fn generated_tree() -> PathBuf {
    let tree = Path::new(env!("CARGO_TARGET_TMPDIR")).join("grep-bench-tree");
    let stamp = tree.join(".complete-v2");
    if stamp.exists() {
        return tree;
    }
    println!("generating {} ...", tree.display());
    let _ = std::fs::remove_dir_all(&tree);
    let words = [
        "buffer", "parser", "token", "stream", "config", "session", "request", "handle", "value",
        "index", "cursor", "state", "result", "reader", "writer", "frame", "layout", "span",
    ];
    let types = [
        "Vec<u8>",
        "String",
        "Option<usize>",
        "Result<(), Error>",
        "Self",
        "bool",
    ];
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        // xorshift64: fixed, so every generated tree is the same.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let files = 20_000;
    let per_file = GENERATED_BYTES / files;
    for i in 0..files {
        let dir = tree.join(format!("crate{:02}/src/mod{:02}", i % 40, (i / 40) % 50));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = String::with_capacity(per_file + 100);
        while text.len() < per_file {
            let a = words[next() as usize % words.len()];
            let b = words[next() as usize % words.len()];
            let t = types[next() as usize % types.len()];
            let line = match next() % 100 {
                0..=7 => format!("pub fn {a}_{b}(input: &{t}) -> {t} {{\n"),
                8..=11 => format!("impl {a}{b} for {t} {{\n"),
                12 => format!("    // TODO: {a} the {b} before returning\n"),
                13..=40 => format!("    let {a} = self.{b}.{a}_{b}()?;\n"),
                41..=60 => format!("    if {a}.is_empty() {{ return Err({b}); }}\n"),
                61..=75 => "    }\n".to_string(),
                76..=85 => format!("    /// Returns the {a} of the {b}.\n"),
                _ if next() % 20_000 == 0 => {
                    "    let n = u64::from_str_radix(s, 16)?;\n".to_string()
                }
                _ => format!("    {a}.push({b}.len() + {});\n", next() % 1000),
            };
            text.push_str(&line);
        }
        let mut file = std::fs::File::create(dir.join(format!("file{i:05}.rs"))).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }
    std::fs::write(&stamp, "").unwrap();
    tree
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
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
