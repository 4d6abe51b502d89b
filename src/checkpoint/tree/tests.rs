use pretty_assertions::assert_eq;

use super::*;
use crate::checkpoint::fixture::fixture;

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
    let first = f.scan(None);
    // Were the scan to read a.txt again, its blob would be back.
    let a = first.entries[Path::new("a.txt")]
        .content
        .clone()
        .unwrap()
        .unwrap();
    std::fs::remove_file(f.store.object(a)).unwrap();
    let second = f.scan(Some(&first));
    assert_eq!(second, first);
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
