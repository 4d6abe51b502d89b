use std::collections::BTreeMap;

use pretty_assertions::assert_eq;

use super::*;
use crate::checkpoint::fixture::fixture;
use crate::checkpoint::store::Hash;
use crate::checkpoint::turn::TurnChanges;

/// Every file, link and directory under `root` with its mode and content
/// hash (or target), read straight from the file system.
#[cfg(unix)]
fn listing(root: &Path) -> BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {}", Hash::of(&std::fs::read(&path).unwrap()))
            };
            out.insert(name, what);
        }
    }
    out
}

#[cfg(unix)]
#[test]
fn undo_puts_the_tree_back_byte_for_byte_and_redo_forward_again() {
    let f = fixture(1 << 20);
    f.prepare_every_kind_of_change();
    f.write("src/lib.rs", b"pub fn f() {}\n");
    let before = f.scan(None);
    let listed_before = listing(f.root());
    f.make_every_kind_of_change();
    std::fs::remove_file(f.at("src/lib.rs")).unwrap();
    std::fs::remove_dir(f.at("src")).unwrap();
    let after = f.scan(Some(&before));
    let listed_after = listing(f.root());

    let undo = plan(
        f.root(),
        &f.store,
        TurnChanges::between(&before, &after).undo(),
    )
    .unwrap();
    assert!(undo.conflicts.is_empty(), "{:?}", undo.conflicts);
    assert!(undo.not_restorable.is_empty());
    // Nine files and links, and the directory `src`.
    assert_eq!(undo.ready.len(), 9 + 1, "{:?}", undo.ready);
    let report = apply(f.root(), &f.store, &undo, false);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(listing(f.root()), listed_before);

    let now = f.scan(Some(&after));
    let redo = plan(
        f.root(),
        &f.store,
        TurnChanges::between(&after, &now).undo(),
    )
    .unwrap();
    assert!(redo.conflicts.is_empty(), "{:?}", redo.conflicts);
    let report = apply(f.root(), &f.store, &redo, false);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    // Directories too: `src` is gone again.
    assert_eq!(listing(f.root()), listed_after);
}

#[test]
fn a_change_made_since_the_checkpoint_is_left_alone_unless_confirmed() {
    let f = fixture(1 << 20);
    f.write("a.txt", b"before\n");
    f.write("b.txt", b"before\n");
    let before = f.scan(None);
    f.write("a.txt", b"by the turn\n");
    f.write("b.txt", b"by the turn\n");
    let after = f.scan(Some(&before));
    // The user edits a.txt after the turn.
    f.write("a.txt", b"by hand\n");

    let undo = plan(
        f.root(),
        &f.store,
        TurnChanges::between(&before, &after).undo(),
    )
    .unwrap();
    assert_eq!(
        undo.ready
            .iter()
            .map(|s| s.path.clone())
            .collect::<Vec<_>>(),
        [PathBuf::from("b.txt")]
    );
    let (_, conflict) = &undo.conflicts[0];
    assert_eq!(conflict.path, PathBuf::from("a.txt"));
    let report = apply(f.root(), &f.store, &undo, false);
    assert_eq!(report.restored, [PathBuf::from("b.txt")]);
    assert_eq!(std::fs::read(f.at("a.txt")).unwrap(), b"by hand\n");
    assert_eq!(std::fs::read(f.at("b.txt")).unwrap(), b"before\n");

    // Confirmed, it is restored, and the hand edit stays in the store.
    let report = apply(f.root(), &f.store, &undo, true);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(std::fs::read(f.at("a.txt")).unwrap(), b"before\n");
    let kept = conflict.found.clone().unwrap().content.unwrap().unwrap();
    assert_eq!(f.store.read(kept).unwrap(), b"by hand\n");
}

#[cfg(unix)]
#[test]
fn a_directory_that_became_a_symlink_is_never_written_through() {
    let f = fixture(1 << 20);
    let outside = tempfile::tempdir().unwrap();
    f.write("dir/file.txt", b"mine\n");
    let before = f.scan(None);
    std::fs::remove_file(f.at("dir/file.txt")).unwrap();
    std::fs::remove_dir(f.at("dir")).unwrap();
    let after = f.scan(Some(&before));
    // Something puts a link where the directory was.
    std::os::unix::fs::symlink(outside.path(), f.at("dir")).unwrap();

    let undo = plan(
        f.root(),
        &f.store,
        TurnChanges::between(&before, &after).undo(),
    )
    .unwrap();
    let report = apply(f.root(), &f.store, &undo, true);
    assert!(report.restored.is_empty(), "{report:?}");
    // Neither the directory (a link is there) nor its file.
    assert_eq!(report.failed.len(), 2, "{report:?}");
    assert!(
        report.failed[1].1.contains("no longer a directory"),
        "{report:?}"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}

#[test]
fn a_file_too_large_to_keep_is_reported_not_restored() {
    let f = fixture(8);
    f.write("big.txt", b"0123456789");
    f.write("small.txt", b"0123");
    let before = f.scan(None);
    std::fs::remove_file(f.at("big.txt")).unwrap();
    std::fs::remove_file(f.at("small.txt")).unwrap();
    let after = f.scan(Some(&before));
    let undo = plan(
        f.root(),
        &f.store,
        TurnChanges::between(&before, &after).undo(),
    )
    .unwrap();
    assert_eq!(undo.not_restorable.len(), 1);
    assert_eq!(undo.not_restorable[0].0, PathBuf::from("big.txt"));
    assert!(undo.not_restorable[0].1.contains("too large"), "{undo:?}");
    apply(f.root(), &f.store, &undo, false);
    assert!(!f.at("big.txt").exists());
    assert_eq!(std::fs::read(f.at("small.txt")).unwrap(), b"0123");
}

/// A checkpoint whose copies are elsewhere (another replica's store, or
/// dropped for the size) restores nothing, and says why.
#[test]
fn a_copy_not_in_this_store_is_not_restorable_and_says_where_it_may_be() {
    let f = fixture(1 << 20);
    let elsewhere = fixture(1 << 20);
    f.write("notes.txt", b"first");
    let before = f.scan(None);
    f.write("notes.txt", b"second");
    let after = f.scan(Some(&before));
    let turn = TurnChanges::between(&before, &after);
    let undo = plan(f.root(), &elsewhere.store, turn.undo()).unwrap();
    assert!(undo.ready.is_empty(), "{undo:?}");
    assert_eq!(undo.not_restorable.len(), 1, "{undo:?}");
    assert!(
        undo.not_restorable[0]
            .1
            .contains("the machine that recorded it"),
        "{undo:?}"
    );
    // Nothing was touched.
    assert_eq!(
        std::fs::read(f.root().join("notes.txt")).unwrap(),
        b"second"
    );
}

#[test]
fn a_step_outside_the_root_is_refused() {
    let f = fixture(1 << 20);
    let step = Step {
        path: PathBuf::from("../escape.txt"),
        expected: None,
        target: None,
        shared: false,
    };
    let undo = plan(f.root(), &f.store, vec![step]).unwrap();
    assert!(undo.ready.is_empty());
    assert_eq!(undo.not_restorable.len(), 1);
}

#[test]
fn a_change_that_may_be_another_session_s_is_asked_about_though_it_is_as_left() {
    let f = fixture(1 << 20);
    f.write("mine.txt", b"1");
    f.write("theirs.txt", b"1");
    let before = f.scan(None);
    f.write("mine.txt", b"2");
    f.write("theirs.txt", b"2");
    let after = f.scan(Some(&before));
    let mut turn = TurnChanges::between(&before, &after);
    for change in &mut turn.files {
        change.shared = change.path == Path::new("theirs.txt");
    }
    let undo = plan(f.root(), &f.store, turn.undo()).unwrap();
    let ready: Vec<&Path> = undo.ready.iter().map(|s| s.path.as_path()).collect();
    assert_eq!(ready, [Path::new("mine.txt")]);
    assert_eq!(undo.conflicts.len(), 1);
    let (step, conflict) = &undo.conflicts[0];
    assert_eq!(step.path, Path::new("theirs.txt"));
    assert!(conflict.shared, "{conflict:?}");
    apply(f.root(), &f.store, &undo, false);
    assert_eq!(std::fs::read(f.at("mine.txt")).unwrap(), b"1");
    assert_eq!(std::fs::read(f.at("theirs.txt")).unwrap(), b"2");
    // Told to overwrite, it is put back too.
    apply(f.root(), &f.store, &undo, true);
    assert_eq!(std::fs::read(f.at("theirs.txt")).unwrap(), b"1");
}
