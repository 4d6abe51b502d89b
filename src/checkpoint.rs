//! Checkpoints: the files a turn changed, kept as they were before it, so
//! that undo, redo, rewind and fork can put them back. This module owns:
//! - the project's content-addressed store of file versions ([`store`]);
//! - snapshots of the working directory that find what a call changed
//!   ([`tree`]), told by the kernel which paths to look at where it can
//!   ([`watch`]);
//! - a session's [`recorder`], which takes them around each call and
//!   gathers a turn's changes ([`turn`], as the transcript keeps them),
//!   opened by the session's [`recording`] when a run first needs it;
//! - the restore, which puts files back without overwriting what it did
//!   not change ([`restore`]).

#[cfg(test)]
mod fixture;
pub mod presence;
pub mod recorder;
pub mod recording;
pub mod restore;
pub mod store;
pub mod tree;
pub mod turn;
pub mod watch;

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where the checkpoint store of the project at `root` lives under pincer's
/// data directory: one per project, shared by its sessions, named after
/// the project's directory and a hash of its whole path (two projects
/// never share a store, and the name is readable).
pub fn store_dir(data_dir: &Path, root: &Path) -> PathBuf {
    let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    data_dir.join("checkpoints").join(format!("{name}-{hash}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_project_has_a_store_of_its_own() {
        let data = Path::new("/home/me/.local/share/pincer");
        let a = store_dir(data, Path::new("/work/a-b"));
        let b = store_dir(data, Path::new("/work/a/b"));
        assert_ne!(a, b);
        assert_eq!(a, store_dir(data, Path::new("/work/a-b")));
        assert!(a.starts_with(data.join("checkpoints")));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("a-b-"), "{name}");
        assert_eq!(name.len(), "a-b-".len() + 16);
        // Nothing in a directory name escapes the store.
        let odd = store_dir(data, Path::new("/work/..\\x y"));
        assert_eq!(odd.parent().unwrap(), data.join("checkpoints"));
    }
}
