use pretty_assertions::assert_eq;

use super::*;
use crate::checkpoint::fixture::fixture;
use std::path::PathBuf;

fn paths(snapshot: &Snapshot) -> Vec<String> {
    snapshot
        .entries
        .keys()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_snapshot_keeps_every_file_but_the_ignored_ones_and_git_s_own() {
    let f = fixture(1 << 20);
    f.write("src/main.rs", b"fn main() {}\n");
    f.write(".env", b"KEY=1\n");
    f.write(".gitignore", b"target/\n*.log\n");
    f.write("target/debug/app", b"\x7fELF");
    f.write("run.log", b"noise");
    f.write(".git/config", b"[core]\n");
    let snapshot = f.scan(None);
    assert_eq!(
        paths(&snapshot),
        [".env", ".gitignore", "src", "src/main.rs"],
        "ignored without a git repository too"
    );
    let main = &snapshot.entries[Path::new("src/main.rs")];
    let hash = main.content.clone().unwrap().unwrap();
    assert_eq!(f.store.read(hash).unwrap(), b"fn main() {}\n");
}

#[cfg(unix)]
#[test]
fn symlinks_are_recorded_as_links_and_never_followed() {
    let f = fixture(1 << 20);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), f.root().join("s")).unwrap();
    std::os::unix::fs::symlink(outside.path(), f.root().join("dir")).unwrap();
    let snapshot = f.scan(None);
    assert_eq!(paths(&snapshot), ["dir", "s"]);
    assert_eq!(
        snapshot.entries[Path::new("s")].kind,
        Kind::Symlink {
            target: outside.path().join("secret")
        }
    );
    assert_eq!(snapshot.entries[Path::new("s")].content, Ok(None));
    assert_eq!(f.store.size().unwrap(), 0, "nothing read through a link");
}

#[cfg(unix)]
#[test]
fn every_kind_of_change_a_command_makes_is_found() {
    let f = fixture(1 << 20);
    f.prepare_every_kind_of_change();
    f.write("touched.txt", b"touched\n");
    let before = f.scan(None);
    f.make_every_kind_of_change();
    // A write that changes no content is no change.
    f.write("touched.txt", b"touched\n");
    let after = f.scan(Some(&before));

    let found: Vec<String> = changes(&before, &after)
        .iter()
        .map(|c| match c {
            Change::Created { path } => format!("+ {}", path.display()),
            Change::Deleted { path, .. } => format!("- {}", path.display()),
            Change::Modified { path, .. } => format!("~ {}", path.display()),
        })
        .collect();
    assert_eq!(
        found,
        [
            "+ alias",
            "+ arrived.txt",
            "~ edited.txt",
            "- gone.txt",
            "+ image.bin",
            "- moved.txt",
            "~ script.sh",
            "~ sed.txt",
        ]
    );
    // The pre-images are in the store.
    let Some(Change::Modified { before: old, .. }) = changes(&before, &after)
        .into_iter()
        .find(|c| c.path() == Path::new("sed.txt"))
    else {
        panic!("sed.txt not modified");
    };
    let hash = old.content.unwrap().unwrap();
    assert_eq!(f.store.read(hash).unwrap(), b"old\n");
}

#[test]
fn an_unchanged_file_is_not_read_again() {
    let f = fixture(1 << 20);
    f.write("a.txt", b"content a\n");
    f.write("b.txt", b"content b\n");
    // Past the file system clock's tick (see `RACY_NS`): settled.
    std::thread::sleep(std::time::Duration::from_nanos(RACY_NS as u64 + 10_000_000));
    let first = f.scan(None);
    // Were the scan to read a.txt again, its blob would be back.
    let a = first.entries[Path::new("a.txt")]
        .content
        .clone()
        .unwrap()
        .unwrap();
    let packs = f.store.dir().join("packs");
    std::fs::remove_dir_all(&packs).unwrap();
    std::fs::create_dir(&packs).unwrap();
    assert!(!f.store.contains(a));
    let second = f.scan(Some(&first));
    assert_eq!(second.entries, first.entries);
    assert!(!f.store.contains(a));
    // A changed file is read.
    f.write("a.txt", b"content A\n");
    let third = f.scan(Some(&second));
    let new = third.entries[Path::new("a.txt")]
        .content
        .clone()
        .unwrap()
        .unwrap();
    assert_eq!(f.store.read(new).unwrap(), b"content A\n");
}

#[test]
fn a_file_too_large_to_keep_is_listed_as_not_kept() {
    let f = fixture(10);
    f.write("small", b"0123456789");
    f.write("large", b"0123456789a");
    let snapshot = f.scan(None);
    assert!(matches!(
        snapshot.entries[Path::new("small")].content,
        Ok(Some(_))
    ));
    assert_eq!(
        snapshot.entries[Path::new("large")].content,
        Err(NotKept::TooLarge { size: 11 })
    );
}

#[test]
fn a_tree_with_too_many_files_is_refused_rather_than_copied() {
    let f = fixture(1 << 20);
    for i in 0..5 {
        f.write(&format!("f{i}"), b"x");
    }
    let error = scan(f.root(), &f.store, None, 4).unwrap_err();
    assert!(error.to_string().contains("more than 4 files"), "{error}");
    assert_eq!(scan(f.root(), &f.store, None, 5).unwrap().entries.len(), 5);
}

/// Each path with what it holds, whatever its times.
fn held(
    snapshot: &Snapshot,
) -> Vec<(
    PathBuf,
    Kind,
    Result<Option<crate::checkpoint::store::Hash>, NotKept>,
)> {
    snapshot
        .entries
        .iter()
        .map(|(p, e)| (p.clone(), e.kind.clone(), e.content.clone()))
        .collect()
}

#[cfg(unix)]
#[test]
fn an_update_finds_what_a_whole_scan_finds() {
    let f = fixture(1 << 20);
    f.prepare_every_kind_of_change();
    f.write("old/deep/a.txt", b"a\n");
    f.write("old/b.txt", b"b\n");
    f.write("kept/c.txt", b"c\n");
    let mut snapshot = f.scan(None);
    let before = snapshot.clone();
    f.make_every_kind_of_change();
    std::fs::remove_dir_all(f.at("old")).unwrap();
    f.write("new/deep/d.txt", b"d\n");
    f.write("kept/e.txt", b"e\n");
    f.write("kept/c.txt", b"C\n");
    let found = update(f.root(), &f.store, &mut snapshot, 1000).unwrap();
    // The truth: a whole scan from nothing.
    let whole = f.scan(None);
    assert_eq!(held(&snapshot), held(&whole));
    let found: Vec<PathBuf> = found.into_iter().map(|(p, _, _)| p).collect();
    let expected: Vec<PathBuf> = changes(&before, &whole)
        .into_iter()
        .map(|c| c.path().to_path_buf())
        .collect();
    assert_eq!(found, expected);
    // Nothing changed since: nothing found.
    assert_eq!(
        update(f.root(), &f.store, &mut snapshot, 1000).unwrap(),
        Vec::new()
    );
}

#[test]
fn a_second_change_within_the_clock_s_tick_is_not_missed() {
    let f = fixture(1 << 20);
    f.write("a.txt", b"one\n");
    let mut snapshot = f.scan(None);
    // Same size, written at once: the stamp may not move at all.
    f.write("a.txt", b"two\n");
    let found = update(f.root(), &f.store, &mut snapshot, 1000).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    f.write("a.txt", b"six\n");
    f.write("b.txt", b"new\n");
    let found = update(f.root(), &f.store, &mut snapshot, 1000).unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn a_changed_ignore_file_changes_what_is_recorded_below_it() {
    let f = fixture(1 << 20);
    f.write(".gitignore", b"*.log\n");
    f.write("src/run.log", b"noise\n");
    f.write("src/main.rs", b"fn main() {}\n");
    let mut snapshot = f.scan(None);
    assert!(!snapshot.entries.contains_key(Path::new("src/run.log")));
    f.write(".gitignore", b"*.tmp\n");
    let found = update(f.root(), &f.store, &mut snapshot, 1000).unwrap();
    let paths: Vec<&Path> = found.iter().map(|(p, _, _)| p.as_path()).collect();
    assert_eq!(paths, [Path::new(".gitignore"), Path::new("src/run.log")]);
    assert!(snapshot.entries.contains_key(Path::new("src/run.log")));
}

#[test]
fn a_tree_too_large_for_the_store_is_refused_before_anything_is_copied() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        store_dir.path(),
        crate::checkpoint::store::Limits {
            max_size: 1000,
            max_file: 600,
        },
    )
    .unwrap();
    let f = fixture(1 << 20);
    f.write("a.bin", &[0u8; 500]);
    f.write("b.bin", &[1u8; 500]);
    // Too large to copy at all: not counted.
    f.write("huge.bin", &[2u8; 5000]);
    f.write("c.bin", &[3u8; 100]);
    let error = scan(f.root(), &store, None, 1000).unwrap_err();
    assert!(error.to_string().contains("max_size"), "{error}");
    assert_eq!(store.size().unwrap(), 0, "nothing was copied");
    std::fs::remove_file(f.at("b.bin")).unwrap();
    assert_eq!(scan(f.root(), &store, None, 1000).unwrap().entries.len(), 3);
}

#[cfg(unix)]
#[test]
fn a_fifo_or_socket_in_the_tree_is_neither_read_nor_waited_on() {
    let f = fixture(1 << 20);
    f.write("a.txt", b"a\n");
    nix::unistd::mkfifo(&f.at("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(f.at("sock")).unwrap();
    // Were a snapshot to open the pipe as a file, it would wait for a
    // writer forever: the test's time limit would end it.
    let snapshot = f.scan(None);
    assert_eq!(paths(&snapshot), ["a.txt"]);
    // Asked to keep one, the store refuses at once.
    let error = f.store.put_file(&f.at("pipe")).unwrap_err();
    assert!(error.to_string().contains("not a regular file"), "{error}");
}
