//! What checkpoints cost on a generated 20,000-file tree (issue 32's
//! targets): the first snapshot of a session, which reads and stores every
//! file (≤ 1.5 s); the work around a command that changed nothing (the
//! snapshots before and after it, ≤ 15 ms) and around one that changed
//! 100 files (≤ 40 ms); and restoring 100 files (≤ 100 ms).
//!
//! The tree (20,000 files of 1–8 KB in 400 directories, plus an ignored
//! `target/` of 2,000 files the snapshots must skip) is generated in a
//! temporary directory, the store in another. `PINCER_BENCH_FILES` changes
//! the count, `PINCER_BENCH_RUNS` (default 5) the timed runs of each
//! figure, whose median is reported.
//!
//! Before each first snapshot the disk is synced, so that it measures
//! reading a tree that is on disk into a fresh store, not the write-back
//! of the generated tree or of the previous run's store.
//!
//! The bench is a report: a missed target is printed, not a failure. A run
//! whose snapshots or restore go wrong panics. The last line repeats the
//! figures as JSON.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

use pincer::checkpoint::recorder::Recorder;
use pincer::checkpoint::restore::{apply, plan};
use pincer::checkpoint::store::{Limits, Store};
use pincer::checkpoint::tree::{scan, update};
use serde_json::json;

fn main() {
    let files = env_count("PINCER_BENCH_FILES", 20_000);
    let runs = env_count("PINCER_BENCH_RUNS", 5);
    let work = tempfile::tempdir().unwrap();
    generate(work.path(), files);
    println!("pincer checkpoints on {files} files ({runs} runs each, median)");

    let limits = Limits {
        max_size: u64::MAX,
        max_file: 10 << 20,
    };
    let mut first = Vec::new();
    // Every run's store is kept until the end: deleting tens of thousands
    // of blobs right before the next run makes ext4 slow to find free
    // inodes for a while (it skips recently deleted ones), a cost of the
    // bench's own, not of a user's first snapshot.
    let mut kept = Vec::new();
    let mut recorder = None;
    for _ in 0..runs {
        // A fresh store each run: the first snapshot of a project, whose
        // files are on disk already (not dirty pages still being written,
        // the generated tree's or the previous run's store's).
        settle_disk();
        let store_dir = tempfile::tempdir().unwrap();
        let store = Store::open(store_dir.path(), limits).unwrap();
        let started = Instant::now();
        recorder = Some(Recorder::open(work.path(), store, usize::MAX).unwrap());
        first.push(started.elapsed());
        kept.push(store_dir);
    }
    let mut recorder = recorder.unwrap();
    let files_kept = recorder.hashes().count();
    assert_eq!(files_kept, files + 1, "the files and .gitignore");

    // What a call pays: the snapshot before it and the one after, the
    // command's own time left out.
    let around = |recorder: &mut Recorder, command: &mut dyn FnMut()| {
        let started = Instant::now();
        recorder.before_call(false).unwrap();
        let before = started.elapsed();
        command();
        let started = Instant::now();
        recorder.after_call(false).unwrap();
        before + started.elapsed()
    };

    // The first snapshots' writes are not the calls' cost.
    settle_disk();
    let mut unchanged = Vec::new();
    for _ in 0..runs {
        recorder.begin_turn();
        unchanged.push(around(&mut recorder, &mut || {}));
        let turn = recorder.end_turn(false);
        assert!(turn.files.is_empty(), "{:?}", turn.files);
    }

    let mut hundred = Vec::new();
    let mut restored = Vec::new();
    for run in 0..runs {
        recorder.begin_turn();
        hundred.push(around(&mut recorder, &mut || {
            for i in 0..100 {
                let path = work.path().join(file_name(i * (files / 100)));
                std::fs::write(&path, format!("changed in run {run}\n")).unwrap();
            }
        }));
        let turn = recorder.end_turn(false);
        assert_eq!(turn.files.len(), 100);

        let started = Instant::now();
        let undo = plan(work.path(), recorder.store(), turn.undo()).unwrap();
        let report = apply(work.path(), recorder.store(), &undo, false);
        restored.push(started.elapsed());
        assert_eq!(report.restored.len(), 100, "{report:?}");
    }

    // Where inotify is not there (another OS, or past the user's watch
    // limit), each look compares every path's stamp instead.
    let mut by_stamps = Vec::new();
    let mut snapshot = scan(work.path(), recorder.store(), None, usize::MAX).unwrap();
    for _ in 0..runs {
        let started = Instant::now();
        for _ in 0..2 {
            let found = update(work.path(), recorder.store(), &mut snapshot, usize::MAX).unwrap();
            assert!(found.is_empty(), "{found:?}");
        }
        by_stamps.push(started.elapsed());
    }

    let first = median(first);
    let by_stamps = median(by_stamps);
    let unchanged = median(unchanged);
    let hundred = median(hundred);
    let restored = median(restored);
    report("first snapshot (reads every file)", first, 1500.0);
    report("around a command that changed nothing", unchanged, 15.0);
    report("around a command that changed 100 files", hundred, 40.0);
    report("restoring 100 files", restored, 100.0);
    report("around a command, by stamps (no inotify)", by_stamps, 15.0);
    println!(
        "{}",
        json!({
            "bench": "checkpoints",
            "files": files,
            "first_snapshot_ms": ms(first),
            "around_unchanged_ms": ms(unchanged),
            "around_hundred_changed_ms": ms(hundred),
            "restore_hundred_ms": ms(restored),
            "around_unchanged_by_stamps_ms": ms(by_stamps),
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

/// Waits for the file system to write out what is pending.
fn settle_disk() {
    #[cfg(unix)]
    nix::unistd::sync();
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
