use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;

use super::*;

fn store(dir: &Path, max_size: u64, max_file: u64) -> Store {
    Store::open(dir, Limits { max_size, max_file }).unwrap()
}

#[test]
fn a_hash_reads_back_only_in_its_canonical_spelling() {
    let hash = Hash::of(b"hello\n");
    let text = hash.to_string();
    assert_eq!(
        text,
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    );
    assert_eq!(Hash::parse(&text), Some(hash));
    assert_eq!(Hash::parse(&text.to_uppercase()), None);
    assert_eq!(Hash::parse(&text[1..]), None);
    assert_eq!(Hash::parse(&format!("{}g", &text[1..])), None);
}

#[test]
fn files_and_bytes_are_kept_once_by_content_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 1 << 20, 1 << 20);
    let file = work.path().join("a.bin");
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&file, &bytes).unwrap();
    let hash = store.put_file(&file).unwrap();
    assert_eq!(hash, Hash::of(&bytes));
    assert_eq!(store.put_bytes(&bytes).unwrap(), hash);
    assert_eq!(store.read(hash).unwrap(), bytes);
    assert!(store.contains(hash));
    assert_eq!(store.size().unwrap(), bytes.len() as u64);
    // Nothing left behind in tmp.
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let object = store.object(hash);
        let mode = std::fs::metadata(&object).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(dir.path().join("objects"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}

#[test]
fn a_file_over_the_limit_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 1 << 20, 100);
    let file = work.path().join("big");
    std::fs::write(&file, vec![b'x'; 101]).unwrap();
    match store.put_file(&file) {
        Err(PutError::TooLarge { size, limit }) => assert_eq!((size, limit), (101, 100)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.put_bytes(&[0; 101]),
        Err(PutError::TooLarge { .. })
    ));
    std::fs::write(&file, vec![b'x'; 100]).unwrap();
    store.put_file(&file).unwrap();
    assert_eq!(store.size().unwrap(), 100);
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0
    );
}

#[cfg(unix)]
#[test]
fn a_symlink_is_never_followed_into_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, work.path().join("link")).unwrap();
    let store = store(dir.path(), 1 << 20, 1 << 20);
    assert!(store.put_file(&work.path().join("link")).is_err());
    assert!(store.put_file(work.path()).is_err(), "a directory");
    assert_eq!(store.size().unwrap(), 0);
}

#[test]
fn a_damaged_blob_is_an_error_not_content() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 1 << 20, 1 << 20);
    let hash = store.put_bytes(b"original").unwrap();
    std::fs::write(store.object(hash), b"tampered").unwrap();
    let error = store.read(hash).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(error.to_string().contains(&hash.to_string()), "{error}");
}

#[test]
fn trimming_deletes_the_least_recently_used_blobs_but_keeps_those_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 250, 1 << 20);
    let old = SystemTime::now() - Duration::from_secs(3600);
    let mut hashes = Vec::new();
    for (i, fill) in [b'a', b'b', b'c', b'd'].into_iter().enumerate() {
        let hash = store.put_bytes(&[fill; 100]).unwrap();
        // a is the oldest, d the newest.
        let when = old + Duration::from_secs(60 * i as u64);
        File::options()
            .write(true)
            .open(store.object(hash))
            .unwrap()
            .set_modified(when)
            .unwrap();
        hashes.push(hash);
    }
    // Storing a again makes it the most recently used.
    store.put_bytes(&[b'a'; 100]).unwrap();
    let keep: HashSet<Hash> = [hashes[1]].into_iter().collect();
    let trimmed = store.trim(&keep).unwrap();
    assert_eq!(
        trimmed,
        Trimmed {
            removed: 2,
            freed: 200,
            size: 200
        }
    );
    // b was kept though old; c went, then d (a is newest now).
    let left: Vec<bool> = hashes.iter().map(|h| store.contains(*h)).collect();
    assert_eq!(left, [true, true, false, false]);
    // Under the limit, nothing goes.
    assert_eq!(store.trim(&HashSet::new()).unwrap().removed, 0);
}

#[test]
fn two_writers_of_the_same_content_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 1 << 30, 1 << 24);
    let bytes = vec![7u8; 4 << 20];
    let hashes: Vec<Hash> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| store.put_bytes(&bytes).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(hashes.iter().all(|h| *h == Hash::of(&bytes)));
    assert_eq!(store.read(hashes[0]).unwrap(), bytes);
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0
    );
}

#[test]
fn packed_blobs_read_back_from_any_handle_and_a_damaged_pack_is_no_content() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 1 << 30, 1 << 20);
    let packing = store.packing();
    let texts: Vec<Vec<u8>> = (0..50)
        .map(|i| format!("blob {i}\n").into_bytes())
        .collect();
    let hashes: Vec<Hash> = texts
        .iter()
        .map(|t| packing.put_bytes(t).unwrap())
        .collect();
    // The same content twice is kept once.
    packing.put_bytes(&texts[0]).unwrap();
    packing.finish_pack().unwrap();
    let packs: Vec<_> = std::fs::read_dir(dir.path().join("packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(packs.len(), 1, "one pack, not a file each");
    assert_eq!(
        std::fs::read_dir(dir.path().join("objects"))
            .unwrap()
            .count(),
        0
    );
    // Another handle (another session, another process) finds them.
    let other = super::Store::open(dir.path(), Limits::default()).unwrap();
    for (hash, text) in hashes.iter().zip(&texts) {
        assert!(other.contains(*hash));
        assert_eq!(&other.read(*hash).unwrap(), text);
    }
    // Content it has is not stored again, packed or not.
    assert_eq!(other.put_bytes(&texts[3]).unwrap(), hashes[3]);
    assert_eq!(
        std::fs::read_dir(dir.path().join("objects"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        other.size().unwrap(),
        std::fs::metadata(&packs[0]).unwrap().len()
    );
    // A changed byte is an error, not content.
    let mut bytes = std::fs::read(&packs[0]).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&packs[0], &bytes).unwrap();
    let fresh = super::Store::open(dir.path(), Limits::default()).unwrap();
    assert!(fresh.read(hashes[0]).is_err());
    assert_eq!(fresh.read(hashes[1]).unwrap(), texts[1]);
    // A file that is not a pack is ignored.
    std::fs::write(dir.path().join("packs/0000000000000000.pack"), b"junk").unwrap();
    let fresh = super::Store::open(dir.path(), Limits::default()).unwrap();
    assert_eq!(fresh.read(hashes[2]).unwrap(), texts[2]);
    assert!(!fresh.contains(Hash::of(b"never stored")));
}

#[test]
fn trimming_drops_an_old_pack_whole_and_keeps_what_is_asked_for_as_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path(), 1, 1 << 20);
    let packing = store.packing();
    let kept = packing.put_bytes(b"still needed\n").unwrap();
    let dropped = packing.put_bytes(b"not needed\n").unwrap();
    packing.finish_pack().unwrap();
    assert!(store.contains(dropped));
    // A pack all of whose blobs are needed stays as it is.
    let trimmed = store.trim(&HashSet::from([kept, dropped])).unwrap();
    assert_eq!(trimmed.removed, 0);
    assert_eq!(
        std::fs::read_dir(dir.path().join("packs")).unwrap().count(),
        1
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("objects"))
            .unwrap()
            .count(),
        0
    );
    let trimmed = store.trim(&HashSet::from([kept])).unwrap();
    assert_eq!(trimmed.removed, 1);
    assert_eq!(
        std::fs::read_dir(dir.path().join("packs")).unwrap().count(),
        0
    );
    assert_eq!(store.read(kept).unwrap(), b"still needed\n");
    assert!(store.object(kept).is_file());
    assert!(!store.contains(dropped));
    assert_eq!(trimmed.size, b"still needed\n".len() as u64);
}
