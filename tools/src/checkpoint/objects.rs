//! The content-addressed object store of one workspace: file contents and tree
//! objects keyed by their SHA-256, each stored once per pack. Objects are appended to
//! pack files (`packs/<name>.pack`), one pack per batch and per writer, so that saving
//! many small files costs one file write and one disk sync, not one per file. A pack
//! gets its index (`.idx`, written to a temporary file, synced, renamed) only after the
//! pack itself reached the disk: a pack without an index (a writer that crashed or ran
//! out of space) is never read, and garbage collection removes it.
//!
//! Several processes may write the same store at once: every writer creates packs of
//! its own under a name no other writer can pick (`create_new`), and never changes a
//! finished pack. An object missing from the in-memory index is looked for in packs
//! finished since by other writers. Every object read is checked against its hash.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where one object lives.
#[derive(Debug, Clone, Copy)]
struct Loc {
    pack: usize,
    offset: u64,
    len: u64,
}

/// The index of one finished pack.
#[derive(Serialize, Deserialize)]
pub(crate) struct IndexFile {
    /// The pack's length when it was finished (a shorter pack is damaged).
    #[serde(rename = "packLen", default)]
    pub pack_len: u64,
    /// (hash, offset, length) of every object.
    pub objects: Vec<(String, u64, u64)>,
}

struct Open {
    pack: usize,
    writer: BufWriter<File>,
    offset: u64,
    added: Vec<(String, u64, u64)>,
}

/// Content-addressed storage of file contents and trees.
pub(crate) struct Objects {
    dir: PathBuf,
    /// Pack names (without extension); a [`Loc`] points into this list.
    packs: Vec<String>,
    loaded: HashSet<String>,
    index: HashMap<String, Loc>,
    open: Option<Open>,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("dir", &self.dir)
            .field("objects", &self.index.len())
            .finish_non_exhaustive()
    }
}

/// The hex SHA-256 of some bytes.
pub(crate) fn hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex of some bytes.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// A pack name no other writer (process or thread) picks: the time, the process id
/// and a counter. The file is created with `create_new` anyway.
fn new_pack_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{ns:020}-{:x}-{n}", std::process::id())
}

/// The names (without extension) of the packs in `dir` that have an index.
pub(crate) fn indexed_packs(dir: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(".idx") {
            if !stem.starts_with('.') {
                out.push(stem.to_string());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads the index of pack `stem` in `dir`.
pub(crate) fn read_index(dir: &Path, stem: &str) -> io::Result<IndexFile> {
    let text = fs::read(dir.join(format!("{stem}.idx")))?;
    serde_json::from_slice(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

impl Objects {
    /// Opens (creating) the store in `dir` (the `packs` directory) and loads the index
    /// of every finished pack.
    pub fn open(dir: &Path) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut this = Objects {
            dir: dir.to_path_buf(),
            packs: Vec::new(),
            loaded: HashSet::new(),
            index: HashMap::new(),
            open: None,
        };
        this.rescan()?;
        Ok(this)
    }

    /// Loads the indexes of packs finished since the last look (by other writers).
    /// A damaged index is skipped: its objects count as missing.
    pub fn rescan(&mut self) -> io::Result<()> {
        for stem in indexed_packs(&self.dir)? {
            if self.loaded.contains(&stem) {
                continue;
            }
            let file = match read_index(&self.dir, &stem) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => continue,
                Err(e) => return Err(e),
            };
            let pack = self.packs.len();
            self.packs.push(stem.clone());
            self.loaded.insert(stem);
            for (hash, offset, len) in file.objects {
                self.index.insert(hash, Loc { pack, offset, len });
            }
        }
        Ok(())
    }

    /// Forgets everything loaded and reads the indexes again (after a garbage
    /// collection rewrote or removed packs).
    pub fn reload(&mut self) -> io::Result<()> {
        self.abort();
        self.packs.clear();
        self.loaded.clear();
        self.index.clear();
        self.rescan()
    }

    /// Number of known objects.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the object is known (without looking for new packs).
    pub fn contains(&self, hash: &str) -> bool {
        self.index.contains_key(hash)
    }

    /// Stores `bytes` under `hash` unless already stored.
    pub fn put(&mut self, hash: &str, bytes: &[u8]) -> io::Result<()> {
        if self.index.contains_key(hash) {
            return Ok(());
        }
        if self.open.is_none() {
            let stem = new_pack_name();
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.dir.join(format!("{stem}.pack")))?;
            let pack = self.packs.len();
            self.packs.push(stem);
            self.open = Some(Open {
                pack,
                writer: BufWriter::with_capacity(1 << 20, file),
                offset: 0,
                added: Vec::new(),
            });
        }
        let Some(open) = self.open.as_mut() else {
            return Err(io::Error::other("no open pack"));
        };
        open.writer.write_all(bytes)?;
        let len = bytes.len() as u64;
        let loc = Loc {
            pack: open.pack,
            offset: open.offset,
            len,
        };
        open.added.push((hash.to_string(), open.offset, len));
        open.offset += len;
        self.index.insert(hash.to_string(), loc);
        Ok(())
    }

    /// Finishes the open pack: its content reaches the disk, then its index does.
    /// Until then its objects are not visible to other readers. On failure the pack is
    /// removed and its objects forgotten.
    pub fn commit(&mut self) -> io::Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let stem = self.packs[open.pack].clone();
        let pack_len = open.offset;
        let added = open.added;
        let result = (|| {
            let file = open.writer.into_inner().map_err(|e| e.into_error())?;
            file.sync_data()?;
            let body = serde_json::to_vec(&IndexFile {
                pack_len,
                objects: added.clone(),
            })
            .map_err(io::Error::other)?;
            write_atomic(&self.dir.join(format!("{stem}.idx")), &body)
        })();
        match result {
            Ok(()) => {
                self.loaded.insert(stem);
            }
            Err(_) => {
                for (hash, _, _) in &added {
                    self.index.remove(hash);
                }
                let _ = fs::remove_file(self.dir.join(format!("{stem}.idx")));
                let _ = fs::remove_file(self.dir.join(format!("{stem}.pack")));
            }
        }
        result
    }

    /// Forgets the open pack's objects (after a failure) and removes its file.
    pub fn abort(&mut self) {
        if let Some(open) = self.open.take() {
            for (hash, _, _) in &open.added {
                self.index.remove(hash);
            }
            drop(open.writer);
            let stem = &self.packs[open.pack];
            let _ = fs::remove_file(self.dir.join(format!("{stem}.pack")));
        }
    }

    /// Reads an object and checks its hash; looks in packs finished by other writers
    /// when it is not known yet.
    pub fn get(&mut self, hash: &str) -> io::Result<Vec<u8>> {
        if !self.index.contains_key(hash) {
            self.rescan()?;
        }
        let loc = *self.index.get(hash).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "content missing from the store")
        })?;
        if self.open.as_ref().is_some_and(|o| o.pack == loc.pack) {
            if let Some(open) = self.open.as_mut() {
                open.writer.flush()?;
            }
        }
        let path = self.dir.join(format!("{}.pack", self.packs[loc.pack]));
        let buf = read_at(&path, loc.offset, loc.len)?;
        if self::hash(&buf) != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "stored content does not match its hash",
            ));
        }
        Ok(buf)
    }
}

/// Writes a whole pack of `items` and its index (garbage collection's copy of the live
/// objects); returns its name.
pub(crate) fn write_pack(dir: &Path, items: &[(String, Vec<u8>)]) -> io::Result<String> {
    let stem = new_pack_name();
    let path = dir.join(format!("{stem}.pack"));
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let mut objects = Vec::with_capacity(items.len());
        let mut offset = 0;
        for (h, bytes) in items {
            w.write_all(bytes)?;
            objects.push((h.clone(), offset, bytes.len() as u64));
            offset += bytes.len() as u64;
        }
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_data()?;
        let body = serde_json::to_vec(&IndexFile {
            pack_len: offset,
            objects,
        })
        .map_err(io::Error::other)?;
        write_atomic(&dir.join(format!("{stem}.idx")), &body)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&path);
        return Err(e);
    }
    Ok(stem)
}

/// Reads `len` bytes at `offset` of a file.
pub(crate) fn read_at(path: &Path, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let mut buf = vec![0; len];
    file.read_exact(&mut buf)?;
    Ok(buf)
}

/// Writes a file atomically: a temporary file beside it, flushed, renamed over it, and
/// the directory synced so the rename survives a crash.
pub(crate) fn write_atomic(path: &Path, body: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("path without a parent"))?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(body)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir);
    Ok(())
}

/// Syncs a directory's entries (best effort: some filesystems refuse it).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_deduplicated_survive_reopen_and_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut o = Objects::open(dir.path()).expect("open");
        let h = hash(b"hello");
        o.put(&h, b"hello").expect("put");
        o.put(&h, b"hello").expect("put twice");
        o.commit().expect("commit");
        assert_eq!(o.get(&h).expect("get"), b"hello");
        // A pack left without its index is not read.
        let g = hash(b"lost");
        o.put(&g, b"lost").expect("put");
        drop(o);
        let mut o = Objects::open(dir.path()).expect("reopen");
        assert_eq!(o.len(), 1);
        assert!(!o.contains(&g));
        o.put(&g, b"lost").expect("put again");
        o.commit().expect("commit");
        assert_eq!(o.get(&g).expect("get"), b"lost");
        assert_eq!(Objects::open(dir.path()).expect("reopen").len(), 2);
        // Another writer's pack is found when an object is missing.
        let mut other = Objects::open(dir.path()).expect("other");
        let k = hash(b"theirs");
        other.put(&k, b"theirs").expect("put");
        other.commit().expect("commit");
        assert_eq!(o.get(&k).expect("found by rescan"), b"theirs");
        // Corrupted content is refused, not returned.
        let first = indexed_packs(dir.path()).expect("packs")[0].clone();
        fs::write(dir.path().join(format!("{first}.pack")), b"jello").expect("corrupt");
        assert_eq!(
            o.get(&h).expect_err("corrupt").kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(
            o.get("0000").expect_err("missing").kind(),
            io::ErrorKind::NotFound
        );
    }
}
