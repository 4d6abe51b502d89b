//! What checkpoints cost on a generated 20,000-file tree (issue 32's
//! targets): the first snapshot of a session, which reads and stores every
//! file (≤ 1.5 s); the snapshot after a command that changed nothing
//! (≤ 15 ms) and after one that changed 100 files (≤ 40 ms), each compared
//! with the one before; and restoring 100 files (≤ 100 ms).
//!
//! The tree (20,000 files of 1–8 KB in 400 directories, plus an ignored
//! `target/` of 2,000 files the snapshots must skip) is generated in a
//! temporary directory, the store in another. `PINCER_BENCH_FILES` changes
//! the count, `PINCER_BENCH_RUNS` (default 5) the timed runs of each
//! figure, whose median is reported.
//!
//! The bench is a report: a missed target is printed, not a failure. A run
//! whose snapshots or restore go wrong panics. The last line repeats the
//! figures as JSON.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use pincer::checkpoint::restore::{apply, plan};
use pincer::checkpoint::store::{Limits, Store};
use pincer::checkpoint::tree::{Snapshot, changes, scan};
use pincer::checkpoint::turn::TurnChanges;
use serde_json::json;

fn main() {
    let files = env_count("PINCER_BENCH_FILES", 20_000);
    let runs = env_count("PINCER_BENCH_RUNS", 5);
    let work = tempfile::tempdir().unwrap();
    generate(work.path(), files);
    println!("pincer checkpoints on {files} files ({runs} runs each, median)");

    let mut first = Vec::new();
    let mut snapshot = Snapshot::default();
    let mut store_dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_size: u64::MAX,
        max_file: 10 << 20,
    };
    for _ in 0..runs {
        // A fresh store each run: the first snapshot of a project.
        store_dir = tempfile::tempdir().unwrap();
        let store = Store::open(store_dir.path(), limits).unwrap();
        let started = Instant::now();
        snapshot = scan(work.path(), &store, None, usize::MAX).unwrap();
        first.push(started.elapsed());
    }
    assert_eq!(
        snapshot.entries.len(),
        files + 1,
        "the files and .gitignore"
    );
    let store = Store::open(store_dir.path(), limits).unwrap();

    let mut unchanged = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let again = scan(work.path(), &store, Some(&snapshot), usize::MAX).unwrap();
        let found = changes(&snapshot, &again);
        unchanged.push(started.elapsed());
        assert!(found.is_empty(), "{found:?}");
    }

    let mut hundred = Vec::new();
    let mut restored = Vec::new();
    for run in 0..runs {
        let before = snapshot.clone();
        for i in 0..100 {
            let path = work.path().join(file_name(i * (files / 100)));
            std::fs::write(&path, format!("changed in run {run}\n")).unwrap();
        }
        let started = Instant::now();
        let after = scan(work.path(), &store, Some(&before), usize::MAX).unwrap();
        let found = changes(&before, &after);
        hundred.push(started.elapsed());
        assert_eq!(found.len(), 100);

        let started = Instant::now();
        let undo = plan(
            work.path(),
            &store,
            TurnChanges::between(&before, &after).undo(),
        )
        .unwrap();
        let report = apply(work.path(), &store, &undo, false);
        restored.push(started.elapsed());
        assert_eq!(report.restored.len(), 100, "{report:?}");
        snapshot = scan(work.path(), &store, Some(&after), usize::MAX).unwrap();
        assert!(changes(&before, &snapshot).is_empty());
    }

    let first = median(first);
    let unchanged = median(unchanged);
    let hundred = median(hundred);
    let restored = median(restored);
    report("first snapshot (reads every file)", first, 1500.0);
    report("after a command that changed nothing", unchanged, 15.0);
    report("after a command that changed 100 files", hundred, 40.0);
    report("restoring 100 files", restored, 100.0);
    println!(
        "{}",
        json!({
            "bench": "checkpoints",
            "files": files,
            "first_snapshot_ms": ms(first),
            "unchanged_ms": ms(unchanged),
            "hundred_changed_ms": ms(hundred),
            "restore_hundred_ms": ms(restored),
        })
    );
}

fn file_name(i: usize) -> String {
    format!("src/d{:03}/f{i:05}.rs", i % 400)
}

fn generate(root: &Path, files: usize) {
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    for i in 0..files {
        let path = root.join(file_name(i));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let size = 1024 + (i * 7919) % 7168;
        let line = format!("// file {i}: some Rust-like text for the checkpoint bench\n");
        let text: String = line.repeat(size / line.len() + 1);
        std::fs::write(path, &text[..size]).unwrap();
    }
    for i in 0..2000 {
        let path = root.join(format!("target/debug/o{:02}/x{i}.o", i % 20));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, [0u8; 512]).unwrap();
    }
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

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(what: &str, took: Duration, target_ms: f64) {
    let verdict = if ms(took) <= target_ms {
        "met"
    } else {
        "MISSED"
    };
    println!(
        "  {what:<42} {:>9.1} ms   target ≤ {target_ms} ms — {verdict}",
        ms(took)
    );
}
