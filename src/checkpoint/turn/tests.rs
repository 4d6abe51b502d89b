use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;
use crate::checkpoint::restore::{apply, plan};
use crate::checkpoint::store::{Limits, Store};
use crate::checkpoint::tree::scan;

fn store(dir: &Path) -> Store {
    Store::open(dir, Limits::default()).unwrap()
}

#[test]
fn a_turn_s_calls_merge_into_its_first_before_and_last_after() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = store(store_dir.path());
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::write(root.join("kept.txt"), "v1\n").unwrap();
    std::fs::write(root.join("undone.txt"), "same\n").unwrap();
    let s0 = scan(root, &store, None, 100_000).unwrap();

    // Call 1: kept.txt changes, undone.txt changes, temp.txt appears.
    std::fs::write(root.join("kept.txt"), "v2\n").unwrap();
    std::fs::write(root.join("undone.txt"), "different\n").unwrap();
    std::fs::write(root.join("temp.txt"), "scratch\n").unwrap();
    let s1 = scan(root, &store, Some(&s0), 100_000).unwrap();
    // Call 2: kept.txt again, undone.txt back as it was, temp.txt gone.
    std::fs::write(root.join("kept.txt"), "v3\n").unwrap();
    std::fs::write(root.join("undone.txt"), "same\n").unwrap();
    std::fs::remove_file(root.join("temp.txt")).unwrap();
    let s2 = scan(root, &store, Some(&s1), 100_000).unwrap();

    let mut turn = TurnChanges::between(&s0, &s1);
    turn.merge(TurnChanges::between(&s1, &s2));
    let paths: Vec<&Path> = turn.files.iter().map(|c| c.path.as_path()).collect();
    assert_eq!(paths, [Path::new("kept.txt")]);
    assert_eq!(
        turn.files[0].before,
        s0.entries.get(Path::new("kept.txt")).cloned()
    );
    assert_eq!(
        turn.files[0].after,
        s2.entries.get(Path::new("kept.txt")).cloned()
    );

    // Undo gives v1 back, redo v3.
    let undo = plan(root, &store, turn.undo()).unwrap();
    assert!(apply(root, &store, &undo, false).failed.is_empty());
    assert_eq!(
        std::fs::read_to_string(root.join("kept.txt")).unwrap(),
        "v1\n"
    );
    let redo = plan(root, &store, turn.redo()).unwrap();
    assert!(redo.conflicts.is_empty(), "{:?}", redo.conflicts);
    assert!(apply(root, &store, &redo, false).failed.is_empty());
    assert_eq!(
        std::fs::read_to_string(root.join("kept.txt")).unwrap(),
        "v3\n"
    );
}

#[test]
fn a_turn_s_changes_survive_the_transcript_as_json() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = store(store_dir.path());
    let work = tempfile::tempdir().unwrap();
    let root = work.path();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let s0 = scan(root, &store, None, 100_000).unwrap();
    std::fs::write(root.join("a.txt"), "b\n").unwrap();
    std::fs::write(root.join("new.txt"), "new\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    let s1 = scan(root, &store, Some(&s0), 100_000).unwrap();
    let turn = TurnChanges::between(&s0, &s1);
    let text = serde_json::to_string(&turn).unwrap();
    assert!(!text.contains('\n'), "one transcript line");
    let back: TurnChanges = serde_json::from_str(&text).unwrap();
    assert_eq!(back, turn);
    // A blob name that is not one is refused, not taken.
    let hash = s0.entries[Path::new("a.txt")]
        .content
        .clone()
        .unwrap()
        .unwrap();
    let broken = text.replace(&hash.to_string(), "../../etc/passwd");
    assert!(serde_json::from_str::<TurnChanges>(&broken).is_err());
}
