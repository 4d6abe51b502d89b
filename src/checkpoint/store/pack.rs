//! Pack files: many small blobs in one file. A project's first snapshot
//! stores every file of the tree; one file per blob meant tens of thousands
//! of new inodes, which ext4 is slow to hand out after many were deleted (a
//! `cargo clean`, a removed `node_modules`), and the first snapshot took
//! seconds. It writes packs instead, a few MiB each.
//!
//! A pack is `packs/<16 hex>.pack`: the blobs' bytes one after another,
//! then an index entry for each (its SHA-256, offset and length), then the
//! number of entries and a magic word. It is written to `tmp/` and renamed
//! into place whole, never changed afterwards, and deleted whole by a trim
//! (which first stores the blobs still needed as loose files). A pack that
//! does not read as one is ignored; a blob's bytes are checked against its
//! hash when read, as a loose one's are.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use super::Hash;

const MAGIC: &[u8; 8] = b"PINCPAK1";
const ENTRY: u64 = 32 + 8 + 8;
const FOOTER: u64 = 8 + 8;

/// The size at which a pack being written is closed and a new one begun.
pub const PACK_SIZE: usize = 8 * 1024 * 1024;

/// Where a packed blob is.
#[derive(Clone, Debug)]
pub struct Location {
    pub pack: Arc<PathBuf>,
    pub offset: u64,
    pub len: u64,
}

/// The packs a store handle knows of.
#[derive(Debug, Default)]
pub struct Packs {
    loaded: HashSet<OsString>,
    blobs: HashMap<Hash, Location>,
    /// The `packs/` directory's stamp when last listed: listed again only
    /// when it moved (another handle or process added or removed one).
    listed: Option<SystemTime>,
}

/// One pack on disk, for sizing and trimming.
pub struct PackInfo {
    pub path: PathBuf,
    pub size: u64,
    pub used: SystemTime,
    pub blobs: Vec<(Hash, u64, u64)>,
}

impl Packs {
    pub fn get(&self, hash: &Hash) -> Option<Location> {
        self.blobs.get(hash).cloned()
    }

    /// A pack this handle wrote.
    pub fn insert(&mut self, hash: Hash, location: Location) {
        if let Some(name) = location.pack.file_name() {
            self.loaded.insert(name.to_os_string());
        }
        self.blobs.entry(hash).or_insert(location);
    }

    /// Loads the packs in `dir` not loaded yet, unless (without `force`)
    /// the directory is as it was at the last look: its stamp may not move
    /// for a pack added within the clock's tick, so a blob that must be
    /// there is looked for with `force`.
    pub fn refresh(&mut self, dir: &Path, force: bool) {
        let stamp = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
        if !force && stamp.is_some() && stamp == self.listed {
            return;
        }
        self.listed = stamp;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut present = HashSet::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_string_lossy().ends_with(".pack") {
                continue;
            }
            present.insert(name.clone());
            if self.loaded.contains(&name) {
                continue;
            }
            let path = Arc::new(entry.path());
            match read_index(&path) {
                Ok(index) => {
                    for (hash, offset, len) in index {
                        self.blobs.entry(hash).or_insert(Location {
                            pack: path.clone(),
                            offset,
                            len,
                        });
                    }
                    self.loaded.insert(name);
                }
                Err(error) => {
                    tracing::debug!(%error, "ignoring the checkpoint pack {}", path.display());
                }
            }
        }
        // Packs a trim removed: their blobs are elsewhere now, or gone.
        if self.loaded.iter().any(|n| !present.contains(n)) {
            self.loaded.retain(|n| present.contains(n));
            self.blobs
                .retain(|_, loc| loc.pack.file_name().is_some_and(|n| present.contains(n)));
        }
    }
}

/// The blob's bytes, checked against its hash.
pub fn read_blob(location: &Location, hash: Hash) -> io::Result<Vec<u8>> {
    let mut file = File::open(location.pack.as_path())?;
    file.seek(SeekFrom::Start(location.offset))?;
    let mut bytes = Vec::with_capacity(usize::try_from(location.len).unwrap_or(0));
    file.take(location.len).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != location.len || Hash::of(&bytes) != hash {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("checkpoint blob {hash} is damaged (its pack holds other bytes)"),
        ));
    }
    Ok(bytes)
}

/// The index of the pack at `path`.
pub fn read_index(path: &Path) -> io::Result<Vec<(Hash, u64, u64)>> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    if size < FOOTER {
        return Err(bad("shorter than a pack's footer"));
    }
    file.seek(SeekFrom::Start(size - FOOTER))?;
    let mut footer = [0u8; FOOTER as usize];
    file.read_exact(&mut footer)?;
    if &footer[8..] != MAGIC {
        return Err(bad("not a pincer checkpoint pack"));
    }
    let count = u64::from_le_bytes(footer[..8].try_into().unwrap_or_default());
    let index_len = count
        .checked_mul(ENTRY)
        .filter(|len| *len <= size - FOOTER)
        .ok_or_else(|| bad("its index is longer than the pack"))?;
    let data_len = size - FOOTER - index_len;
    file.seek(SeekFrom::Start(data_len))?;
    let mut index = vec![0u8; usize::try_from(index_len).map_err(|_| bad("too large"))?];
    file.read_exact(&mut index)?;
    let mut out = Vec::with_capacity(index.len() / ENTRY as usize);
    for entry in index.chunks_exact(ENTRY as usize) {
        let hash = Hash(entry[..32].try_into().unwrap_or_default());
        let offset = u64::from_le_bytes(entry[32..40].try_into().unwrap_or_default());
        let len = u64::from_le_bytes(entry[40..48].try_into().unwrap_or_default());
        if offset.checked_add(len).is_none_or(|end| end > data_len) {
            return Err(bad("an entry points past the pack's data"));
        }
        out.push((hash, offset, len));
    }
    Ok(out)
}

/// Every pack in `dir` with its size, last use and blobs (a pack that
/// does not read as one is left out).
pub fn list(dir: &Path) -> io::Result<Vec<PackInfo>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().ends_with(".pack") {
            continue;
        }
        let (Ok(meta), Ok(blobs)) = (entry.metadata(), read_index(&entry.path())) else {
            continue;
        };
        out.push(PackInfo {
            path: entry.path(),
            size: meta.len(),
            used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            blobs,
        });
    }
    Ok(out)
}

/// Blobs gathered for the next pack.
#[derive(Debug, Default)]
pub struct Pending {
    pub bytes: Vec<u8>,
    pub index: Vec<(Hash, u64, u64)>,
    pub hashes: HashSet<Hash>,
}

impl Pending {
    pub fn add(&mut self, hash: Hash, bytes: &[u8]) {
        if self.hashes.insert(hash) {
            self.index
                .push((hash, self.bytes.len() as u64, bytes.len() as u64));
            self.bytes.extend_from_slice(bytes);
        }
    }

    /// Writes the pack to `temp` (a new file); the caller renames it.
    pub fn write(&self, temp: &mut File) -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(256 * 1024, temp);
        out.write_all(&self.bytes)?;
        for (hash, offset, len) in &self.index {
            out.write_all(&hash.0)?;
            out.write_all(&offset.to_le_bytes())?;
            out.write_all(&len.to_le_bytes())?;
        }
        out.write_all(&(self.index.len() as u64).to_le_bytes())?;
        out.write_all(MAGIC)?;
        out.flush()
    }
}
