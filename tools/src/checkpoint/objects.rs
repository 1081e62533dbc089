//! The content-addressed object store: file contents keyed by their SHA-256, each
//! stored once. Objects are appended to pack files (`packs/NNNNNNNN.pack`), one pack
//! per batch, so that saving many small files costs one file write, not one per file;
//! each finished pack gets an index (`.idx`, written atomically after the pack is
//! flushed to disk). A pack without an index (a crash while writing) is never read.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where one object lives.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Loc {
    pack: u64,
    offset: u64,
    len: u64,
}

#[derive(Serialize, Deserialize)]
struct IndexFile {
    objects: Vec<(String, u64, u64)>,
}

struct Open {
    pack: u64,
    writer: BufWriter<File>,
    offset: u64,
    added: Vec<(String, u64, u64)>,
}

/// Content-addressed storage of file contents.
pub(crate) struct Objects {
    dir: PathBuf,
    index: HashMap<String, Loc>,
    next_pack: u64,
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
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest.iter() {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

impl Objects {
    /// Opens (creating) the store under `dir` and loads the index of every finished pack.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let dir = dir.join("packs");
        fs::create_dir_all(&dir)?;
        let mut index = HashMap::new();
        let mut next_pack = 1;
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((stem, ext)) = name.split_once('.') else {
                continue;
            };
            let Ok(pack) = stem.parse::<u64>() else {
                continue;
            };
            next_pack = next_pack.max(pack + 1);
            if ext != "idx" {
                continue;
            }
            let text = fs::read(entry.path())?;
            let file: IndexFile = serde_json::from_slice(&text)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            for (hash, offset, len) in file.objects {
                index.insert(hash, Loc { pack, offset, len });
            }
        }
        Ok(Objects {
            dir,
            index,
            next_pack,
            open: None,
        })
    }

    /// Number of stored objects.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Stores `bytes` under `hash` unless already stored.
    pub fn put(&mut self, hash: &str, bytes: &[u8]) -> io::Result<()> {
        if self.index.contains_key(hash) {
            return Ok(());
        }
        if self.open.is_none() {
            let pack = self.next_pack;
            self.next_pack += 1;
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.pack_path(pack, "pack"))?;
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
    /// Until then its objects are not visible to a later [`Objects::open`].
    pub fn commit(&mut self) -> io::Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let pack = open.pack;
        let added = open.added;
        let result = (|| {
            let file = open.writer.into_inner().map_err(|e| e.into_error())?;
            file.sync_data()?;
            let body = serde_json::to_vec(&IndexFile {
                objects: added.clone(),
            })
            .map_err(io::Error::other)?;
            write_atomic(&self.pack_path(pack, "idx"), &body)
        })();
        if result.is_err() {
            for (hash, _, _) in &added {
                self.index.remove(hash);
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
            let _ = fs::remove_file(self.pack_path(open.pack, "pack"));
        }
    }

    /// Reads an object and checks its hash.
    pub fn get(&self, hash: &str) -> io::Result<Vec<u8>> {
        let loc = self.index.get(hash).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "content missing from the store")
        })?;
        let mut file = File::open(self.pack_path(loc.pack, "pack"))?;
        file.seek(SeekFrom::Start(loc.offset))?;
        let len = usize::try_from(loc.len).map_err(io::Error::other)?;
        let mut buf = vec![0; len];
        file.read_exact(&mut buf)?;
        if self::hash(&buf) != hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "stored content does not match its hash",
            ));
        }
        Ok(buf)
    }

    fn pack_path(&self, pack: u64, ext: &str) -> PathBuf {
        self.dir.join(format!("{pack:08}.{ext}"))
    }
}

/// Writes a file atomically: a temporary file beside it, flushed, renamed over it.
pub(crate) fn write_atomic(path: &Path, body: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("path without a parent"))?;
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(body)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
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
        // A pack left without its index is not read, and a new pack does not reuse its name.
        let g = hash(b"lost");
        o.put(&g, b"lost").expect("put");
        drop(o);
        let mut o = Objects::open(dir.path()).expect("reopen");
        assert_eq!(o.len(), 1);
        assert!(!o.index.contains_key(&g));
        o.put(&g, b"lost").expect("put again");
        o.commit().expect("commit");
        assert_eq!(o.get(&g).expect("get"), b"lost");
        assert_eq!(Objects::open(dir.path()).expect("reopen").len(), 2);
        // Corrupted content is refused, not returned.
        let pack = dir.path().join("packs/00000001.pack");
        fs::write(&pack, b"jello").expect("corrupt");
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
