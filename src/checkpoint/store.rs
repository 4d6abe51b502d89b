//! The content-addressed store of one project's checkpoints: every version
//! of a file a checkpoint may have to put back, kept once however many
//! sessions and turns saw it, under `objects/<2 hex>/<62 hex>` (the
//! SHA-256 of the bytes), or in a pack file with others ([`pack`]: what a
//! first snapshot stores). A blob is written to a temporary file and renamed
//! into place, so a reader never sees half of one and two sessions storing
//! the same content at once both succeed. The store is bounded: files over
//! `max_file` are not kept (the checkpoint records them as not restorable),
//! and [`Store::trim`] deletes the least recently used blobs past
//! `max_size`.

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

pub mod pack;

/// The SHA-256 of a blob's bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash([u8; 32]);

impl Hash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Parses 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        if text.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        // Uppercase digits parse too; only the canonical spelling is a name.
        (Self(out).to_string() == text).then_some(Self(out))
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl serde::Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Hash::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not a SHA-256 in lowercase hex"))
        })
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Hash({self})")
    }
}

/// The largest file read whole before it is stored.
const SMALL: u64 = 256 * 1024;

/// How much a project's store may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The store's size past which [`Store::trim`] deletes the oldest blobs.
    pub max_size: u64,
    /// A file larger than this is not kept.
    pub max_file: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_size: 300 * 1024 * 1024,
            max_file: 10 * 1024 * 1024,
        }
    }
}

/// Why a file's content was not kept.
#[derive(Debug, thiserror::Error)]
pub enum PutError {
    #[error("{size} bytes, over the {limit}-byte limit for a checkpointed file")]
    TooLarge { size: u64, limit: u64 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What [`Store::trim`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trimmed {
    pub removed: usize,
    pub freed: u64,
    /// The store's size afterwards.
    pub size: u64,
}

/// One project's blobs.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
    limits: Limits,
    /// The shard directories (`objects/ab`) known to exist, one bit each:
    /// a first snapshot stores thousands of blobs, and asking the file
    /// system again for each was a tenth of its system calls.
    shards: std::sync::Arc<[std::sync::atomic::AtomicU64; 4]>,
    /// This process's id, for temporary names (a system call each time).
    pid: u32,
    /// The packs this handle has read the index of.
    packs: std::sync::Arc<parking_lot::Mutex<pack::Packs>>,
    /// New small blobs go into a pack rather than a file each (see
    /// [`Store::packing`]).
    packing: Option<std::sync::Arc<parking_lot::Mutex<pack::Pending>>>,
}

impl Store {
    /// The store in `dir`, created (readable by the user only) if missing.
    pub fn open(dir: &Path, limits: Limits) -> io::Result<Self> {
        create_private_dir(&dir.join("objects"))?;
        create_private_dir(&dir.join("tmp"))?;
        create_private_dir(&dir.join("packs"))?;
        Ok(Self::at(dir, limits))
    }

    /// The store in `dir` to read from: not created when there is none
    /// (checkpoints were off), so that reading what it holds finds nothing.
    pub fn existing(dir: &Path, limits: Limits) -> io::Result<Self> {
        if dir.is_dir() {
            Self::open(dir, limits)
        } else {
            Ok(Self::at(dir, limits))
        }
    }

    /// This store, with new small blobs gathered into packs until
    /// [`Store::finish_pack`] (for a first snapshot: thousands of blobs).
    pub fn packing(&self) -> Self {
        Self {
            packing: Some(Default::default()),
            ..self.clone()
        }
    }

    /// Writes what is gathered for a pack.
    pub fn finish_pack(&self) -> io::Result<()> {
        let Some(packing) = &self.packing else {
            return Ok(());
        };
        let pending = std::mem::take(&mut *packing.lock());
        self.write_pack(&pending)
    }

    fn write_pack(&self, pending: &pack::Pending) -> io::Result<()> {
        if pending.index.is_empty() {
            return Ok(());
        }
        let (mut temp, temp_path) = self.temp_file()?;
        let path = self
            .dir
            .join("packs")
            .join(format!("{:016x}.pack", fastrand::u64(..)));
        let written = pending
            .write(&mut temp)
            .and_then(|()| std::fs::rename(&temp_path, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp_path);
            return Err(e);
        }
        let path = std::sync::Arc::new(path);
        let mut packs = self.packs.lock();
        for (hash, offset, len) in &pending.index {
            packs.insert(
                *hash,
                pack::Location {
                    pack: path.clone(),
                    offset: *offset,
                    len: *len,
                },
            );
        }
        Ok(())
    }

    /// Where the blob is packed. With `sure` (it must be right: a restore
    /// depends on it), a known pack is checked to be still there (a trim
    /// elsewhere may have removed it), and the packs are listed again even
    /// if their directory's stamp did not move.
    fn packed(&self, hash: Hash, sure: bool) -> Option<pack::Location> {
        let mut packs = self.packs.lock();
        if let Some(found) = packs.get(&hash)
            && (!sure || found.pack.is_file())
        {
            return Some(found);
        }
        packs.refresh(&self.dir.join("packs"), sure);
        packs.get(&hash)
    }

    fn at(dir: &Path, limits: Limits) -> Self {
        Self {
            dir: dir.to_path_buf(),
            limits,
            shards: std::sync::Arc::new(Default::default()),
            pid: std::process::id(),
            packs: Default::default(),
            packing: None,
        }
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Where the blob lives.
    pub(super) fn object(&self, hash: Hash) -> PathBuf {
        let name = hash.to_string();
        self.dir.join("objects").join(&name[..2]).join(&name[2..])
    }

    /// Whether the blob is there.
    pub fn contains(&self, hash: Hash) -> bool {
        self.object(hash).is_file() || self.packed(hash, true).is_some()
    }

    /// Keeps the bytes of the file at `path` (read once, hashed while they
    /// are copied), never following a symlink; their hash.
    pub fn put_file(&self, path: &Path) -> Result<Hash, PutError> {
        let (file, meta) = open_no_follow(path)?;
        let size = meta.len();
        if size > self.limits.max_file {
            return Err(PutError::TooLarge {
                size,
                limit: self.limits.max_file,
            });
        }
        if size <= SMALL {
            // Read whole first: content the store has already (a file put
            // back by a restore, a revert) costs no new file, whose
            // inode the file system may be slow to find after many were
            // deleted (a `cargo clean`, a trimmed store).
            let mut bytes = Vec::with_capacity(size as usize);
            file.take(size).read_to_end(&mut bytes)?;
            return self.put_bytes(&bytes);
        }
        // The file may grow while it is read: no more than its size when
        // opened (within the limit) is taken.
        let mut reader = file.take(self.limits.max_file + 1);
        let (mut temp, temp_path) = self.temp_file()?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let mut copied = 0u64;
        let result = (|| -> Result<(), PutError> {
            // Up to the size it had when opened (one read less than
            // reading to the end): a file that grows meanwhile is taken
            // as it was, and its stamp has moved for the next look.
            while copied < size {
                let n = match reader.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e.into()),
                };
                copied += n as u64;
                if copied > self.limits.max_file {
                    return Err(PutError::TooLarge {
                        size: copied,
                        limit: self.limits.max_file,
                    });
                }
                hasher.update(&buffer[..n]);
                temp.write_all(&buffer[..n])?;
            }
            Ok(())
        })();
        drop(temp);
        if let Err(e) = result {
            let _ = std::fs::remove_file(&temp_path);
            return Err(e);
        }
        let hash = Hash(hasher.finalize().into());
        self.settle(&temp_path, hash)?;
        Ok(hash)
    }

    /// Keeps `bytes`; their hash.
    pub fn put_bytes(&self, bytes: &[u8]) -> Result<Hash, PutError> {
        let size = bytes.len() as u64;
        if size > self.limits.max_file {
            return Err(PutError::TooLarge {
                size,
                limit: self.limits.max_file,
            });
        }
        let hash = Hash::of(bytes);
        if self.touch(hash) {
            return Ok(hash);
        }
        if let Some(packing) = &self.packing
            && size <= SMALL
        {
            let mut pending = packing.lock();
            pending.add(hash, bytes);
            if pending.bytes.len() >= pack::PACK_SIZE {
                let full = std::mem::take(&mut *pending);
                drop(pending);
                self.write_pack(&full)?;
            }
            return Ok(hash);
        }
        self.write_loose(hash, bytes)?;
        Ok(hash)
    }

    /// Keeps `bytes` as a file of its own.
    fn write_loose(&self, hash: Hash, bytes: &[u8]) -> io::Result<()> {
        let (mut temp, temp_path) = self.temp_file()?;
        if let Err(e) = temp.write_all(bytes) {
            let _ = std::fs::remove_file(&temp_path);
            return Err(e);
        }
        drop(temp);
        self.settle(&temp_path, hash)
    }

    /// The blob's bytes.
    pub fn read(&self, hash: Hash) -> io::Result<Vec<u8>> {
        let bytes = match std::fs::read(self.object(hash)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return match self.packed(hash, true) {
                    Some(location) => match pack::read_blob(&location, hash) {
                        // Its pack was trimmed meanwhile (by another
                        // session): the blob is a file now, or gone.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            self.packs.lock().refresh(&self.dir.join("packs"), true);
                            std::fs::read(self.object(hash)).and_then(|bytes| {
                                if Hash::of(&bytes) == hash {
                                    Ok(bytes)
                                } else {
                                    Err(damaged(hash))
                                }
                            })
                        }
                        other => other,
                    },
                    None => Err(e),
                };
            }
            other => other?,
        };
        if Hash::of(&bytes) != hash {
            return Err(damaged(hash));
        }
        Ok(bytes)
    }

    /// The bytes the store holds, in blobs and packs.
    pub fn size(&self) -> io::Result<u64> {
        Ok(self.units()?.iter().map(Unit::size).sum())
    }

    /// The bytes the store in `dir` holds, without creating it (0 when
    /// there is none).
    pub fn size_at(dir: &Path) -> io::Result<u64> {
        let store = Self::at(dir, Limits::default());
        match store.units() {
            Ok(units) => Ok(units.iter().map(Unit::size).sum()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Deletes the least recently stored or used blobs, except `keep`, until
    /// the store holds no more than its `max_size`.
    /// A pack goes whole, its blobs in `keep` stored as files first.
    pub fn trim(&self, keep: &HashSet<Hash>) -> io::Result<Trimmed> {
        let mut units = self.units()?;
        let mut size: u64 = units.iter().map(Unit::size).sum();
        let mut trimmed = Trimmed::default();
        units.sort_by_key(|u| match u {
            Unit::Blob(b) => (b.used, Some(b.hash)),
            Unit::Pack(p) => (p.used, None),
        });
        for unit in units {
            if size <= self.limits.max_size {
                break;
            }
            let blob = match unit {
                Unit::Blob(blob) => blob,
                Unit::Pack(pack) => {
                    let location = |offset, len| pack::Location {
                        pack: std::sync::Arc::new(pack.path.clone()),
                        offset,
                        len,
                    };
                    let needed: Vec<&(Hash, u64, u64)> = pack
                        .blobs
                        .iter()
                        .filter(|(h, _, _)| keep.contains(h))
                        .collect();
                    if needed.len() == pack.blobs.len() {
                        // All of it is needed: nothing to gain.
                        continue;
                    }
                    for (hash, offset, len) in &needed {
                        if !self.object(*hash).is_file() {
                            let bytes = pack::read_blob(&location(*offset, *len), *hash)?;
                            self.write_loose(*hash, &bytes)?;
                            size += len;
                        }
                    }
                    match std::fs::remove_file(&pack.path) {
                        Ok(()) => {
                            trimmed.removed += pack.blobs.len() - needed.len();
                            trimmed.freed += pack.size;
                        }
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                    size -= pack.size;
                    continue;
                }
            };
            if keep.contains(&blob.hash) {
                continue;
            }
            match std::fs::remove_file(self.object(blob.hash)) {
                Ok(()) => {
                    size -= blob.size;
                    trimmed.removed += 1;
                    trimmed.freed += blob.size;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => size -= blob.size,
                Err(e) => return Err(e),
            }
        }
        trimmed.size = size;
        // What this handle knew of the packs removed goes.
        self.packs.lock().refresh(&self.dir.join("packs"), true);
        Ok(trimmed)
    }

    /// Every loose blob and every pack, with its size and when it was last
    /// stored or used.
    fn units(&self) -> io::Result<Vec<Unit>> {
        let mut out: Vec<Unit> = self.blobs()?.into_iter().map(Unit::Blob).collect();
        out.extend(
            pack::list(&self.dir.join("packs"))?
                .into_iter()
                .map(Unit::Pack),
        );
        Ok(out)
    }

    /// Every loose blob with its size and when it was last stored or used.
    fn blobs(&self) -> io::Result<Vec<BlobInfo>> {
        let mut out = Vec::new();
        for shard in std::fs::read_dir(self.dir.join("objects"))? {
            let shard = shard?;
            let prefix = shard.file_name().to_string_lossy().into_owned();
            if !shard.file_type()?.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(shard.path())? {
                let entry = entry?;
                let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
                let (Some(hash), Ok(meta)) = (Hash::parse(&name), entry.metadata()) else {
                    continue;
                };
                out.push(BlobInfo {
                    hash,
                    size: meta.len(),
                    used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
        Ok(out)
    }

    /// A new file in the store's `tmp`, on the same file system as the
    /// objects so that a rename moves it.
    fn temp_file(&self) -> io::Result<(File, PathBuf)> {
        let tmp = self.dir.join("tmp");
        loop {
            let path = tmp.join(format!("{}-{:016x}", self.pid, fastrand::u64(..)));
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            match options.open(&path) {
                Ok(file) => return Ok((file, path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves a written temporary file to its blob's place.
    fn settle(&self, temp: &Path, hash: Hash) -> io::Result<()> {
        // No look first: renaming over a blob already there replaces
        // equal bytes with equal bytes, and stamps it as just used.
        let object = self.object(hash);
        let (word, bit) = ((hash.0[0] >> 6) as usize, 1u64 << (hash.0[0] & 63));
        let known = self.shards[word].load(std::sync::atomic::Ordering::Relaxed) & bit != 0;
        if !known && let Some(shard) = object.parent() {
            create_private_dir(shard)?;
            self.shards[word].fetch_or(bit, std::sync::atomic::Ordering::Relaxed);
        }
        std::fs::rename(temp, &object).inspect_err(|_| {
            let _ = std::fs::remove_file(temp);
        })
    }

    /// Marks the blob (or its pack) as used now, for [`Store::trim`];
    /// whether it exists.
    fn touch(&self, hash: Hash) -> bool {
        let object = self.object(hash);
        let found =
            File::options()
                .write(true)
                .open(&object)
                .or_else(|e| match self.packed(hash, false) {
                    Some(location) => File::options().write(true).open(location.pack.as_path()),
                    None => Err(e),
                });
        match found {
            Ok(file) => {
                let _ = file.set_modified(SystemTime::now());
                true
            }
            Err(_) => false,
        }
    }
}

fn damaged(hash: Hash) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("checkpoint blob {hash} is damaged (its content has another hash)"),
    )
}

enum Unit {
    Blob(BlobInfo),
    Pack(pack::PackInfo),
}

impl Unit {
    fn size(&self) -> u64 {
        match self {
            Unit::Blob(b) => b.size,
            Unit::Pack(p) => p.size,
        }
    }
}

struct BlobInfo {
    hash: Hash,
    size: u64,
    used: SystemTime,
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Opens a regular file for reading without following a symlink at its
/// last component (a workspace may swap a file for a link to a secret).
/// A FIFO put in a file's place is opened without waiting for a writer
/// (`O_NONBLOCK`), and then refused as not a regular file.
fn open_no_follow(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits(),
    );
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok((file, meta))
}

#[cfg(test)]
#[path = "store/tests.rs"]
mod tests;
