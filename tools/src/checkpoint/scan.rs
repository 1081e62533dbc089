//! Reading the workspace: the walk (`.gitignore` and `.ignore` rules, hidden files
//! included, `.git` and the checkpoint store excluded, links never followed) and the
//! entry of one path (stat, and for a changed file: read, classify, hash, save; a file
//! that changes while it is read is read again).

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ignore::{Walk, WalkBuilder};

use super::manifest::{Entry, Kind, Stamp, Unsaved};
use super::objects::{hash, Objects};

/// How many leading bytes decide whether a file is binary.
const SNIFF_BYTES: usize = 8192;

/// The walk settings shared by every scan.
#[derive(Debug, Clone)]
pub(crate) struct Walker {
    /// The workspace root (absolute).
    pub root: PathBuf,
    /// The checkpoint store when it lies inside the workspace: never walked.
    pub exclude: Option<PathBuf>,
}

impl Walker {
    /// A walk from `start` (the root or a directory inside it), `depth` levels deep.
    pub fn walk(&self, start: &Path, depth: Option<usize>) -> Walk {
        let exclude = self.exclude.clone();
        let mut b = WalkBuilder::new(start);
        b.hidden(false)
            .parents(true)
            .ignore(true)
            .git_ignore(true)
            .git_global(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .max_depth(depth)
            .filter_entry(move |e| {
                e.file_name() != ".git" && exclude.as_deref().is_none_or(|x| e.path() != x)
            });
        b.build()
    }

    /// The relative, `/`-separated form of a path under the root; `None` outside it or
    /// when it is not UTF-8.
    pub fn rel(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let s = rel.to_str()?;
        Some(s.to_string())
    }

    /// Whether `rel` is a directory reached without going through a link (no component
    /// of it is a link). A walk started on a link would follow it out of the tree.
    pub fn is_real_dir(&self, rel: &str) -> bool {
        let mut p = self.root.clone();
        for c in rel.split('/').filter(|c| !c.is_empty()) {
            p.push(c);
            match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {}
                _ => return false,
            }
        }
        true
    }

    pub fn abs(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }
}

/// Inputs to [`inspect`] and [`read_file`] that do not change during one scan.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScanCtx {
    pub max_file_bytes: u64,
    /// A file modified at or after this instant (ns since the epoch) is racy.
    pub racy_after: i64,
    /// `Some(sha256)` in a git work tree: a file recorded by its blob id keeps it when
    /// its content still matches.
    pub git: Option<bool>,
}

/// How many times a file that changes while it is read is read again.
const READ_TRIES: usize = 3;

fn appeared(prev: Option<&Entry>, ft: &fs::FileType, appeared_if_new: bool) -> bool {
    match prev {
        Some(p) if same_type(p, ft) => p.appeared,
        _ => appeared_if_new,
    }
}

/// The entry of one path given its `lstat`, when it can be known without reading the
/// file: a directory, a link, a special file, a file whose stamp shows no change, or
/// one over the size limit. `None`: the file must be read ([`read_file`]).
pub(crate) fn inspect(
    abs: &Path,
    meta: &Metadata,
    prev: Option<&Entry>,
    appeared_if_new: bool,
    ctx: ScanCtx,
) -> io::Result<Option<Entry>> {
    let stamp = Stamp::of(meta);
    let mode = meta.permissions().mode() & 0o7777;
    let ft = meta.file_type();
    let entry = |kind: Kind| Entry {
        kind,
        mode,
        stamp,
        appeared: appeared(prev, &ft, appeared_if_new),
        racy: false,
    };
    if ft.is_dir() {
        // A directory's times change with its entries, which are looked at one by
        // one: only its mode matters.
        if let Some(p) = prev.filter(|p| p.is_dir() && p.mode == mode) {
            return Ok(Some(p.clone()));
        }
        return Ok(Some(entry(Kind::Dir)));
    }
    if ft.is_symlink() {
        let target = fs::read_link(abs)?;
        return Ok(Some(entry(match target.to_str() {
            Some(t) => Kind::Symlink {
                target: t.to_string(),
            },
            None => Kind::Unsaved {
                reason: Unsaved::NonUtf8Link,
            },
        })));
    }
    if !ft.is_file() {
        return Ok(Some(entry(Kind::Unsaved {
            reason: Unsaved::Special,
        })));
    }
    if let Some(p) = prev {
        if p.stamp == stamp && !p.racy && p.mode == mode && same_type(p, &ft) {
            return Ok(Some(p.clone()));
        }
    }
    if stamp.size > ctx.max_file_bytes {
        return Ok(Some(entry(Kind::Unsaved {
            reason: Unsaved::TooLarge,
        })));
    }
    Ok(None)
}

/// Reads a changed regular file, classifies, hashes and stores it. A file that changes
/// while it is read (its stamp before and after differ) is read again, up to
/// [`READ_TRIES`] times, then noted as changing (the next scan reads it again).
pub(crate) fn read_file(
    abs: &Path,
    meta: &Metadata,
    prev: Option<&Entry>,
    appeared_if_new: bool,
    ctx: ScanCtx,
    objects: &mut Objects,
) -> io::Result<Entry> {
    let mode = meta.permissions().mode() & 0o7777;
    let appeared = appeared(prev, &meta.file_type(), appeared_if_new);
    let entry = |kind: Kind, stamp: Stamp, racy: bool| Entry {
        kind,
        mode,
        stamp,
        appeared,
        racy,
    };
    let unsaved = |reason| Kind::Unsaved { reason };
    let mut stamp = Stamp::of(meta);
    let mut read = None;
    for _ in 0..READ_TRIES {
        match read_stable(abs, ctx.max_file_bytes) {
            Ok(Got::Stable(s, bytes)) => {
                stamp = s;
                read = Some(bytes);
                break;
            }
            Ok(Got::TooLarge(s)) => return Ok(entry(unsaved(Unsaved::TooLarge), s, false)),
            Ok(Got::Changed(s)) => stamp = s,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(e),
            Err(_) => return Ok(entry(unsaved(Unsaved::Unreadable), stamp, false)),
        }
    }
    let Some(bytes) = read else {
        return Ok(entry(unsaved(Unsaved::Changing), stamp, true));
    };
    let racy = stamp.mtime >= ctx.racy_after;
    if is_binary(&bytes) {
        return Ok(entry(unsaved(Unsaved::Binary), stamp, racy));
    }
    if let (Some(sha256), Some(Kind::Git { oid })) = (ctx.git, prev.map(|p| &p.kind)) {
        if super::git::blob_id(&bytes, sha256) == *oid {
            return Ok(entry(Kind::Git { oid: oid.clone() }, stamp, racy));
        }
    }
    let h = hash(&bytes);
    objects.put(&h, &bytes)?;
    Ok(entry(Kind::File { hash: h }, stamp, racy))
}

enum Got {
    Stable(Stamp, Vec<u8>),
    TooLarge(Stamp),
    Changed(Stamp),
}

/// Reads a whole file, comparing the open file's stamp before and after.
fn read_stable(path: &Path, limit: u64) -> io::Result<Got> {
    let file = File::open(path)?;
    let before = Stamp::of(&file.metadata()?);
    if before.size > limit {
        return Ok(Got::TooLarge(before));
    }
    let mut buf = Vec::new();
    (&file)
        .take(limit.saturating_add(1))
        .read_to_end(&mut buf)?;
    let after = Stamp::of(&file.metadata()?);
    if after != before || buf.len() as u64 != after.size {
        return Ok(Got::Changed(after));
    }
    Ok(Got::Stable(after, buf))
}

fn same_type(e: &Entry, ft: &fs::FileType) -> bool {
    match e.kind {
        Kind::Dir => ft.is_dir(),
        Kind::Symlink { .. } => ft.is_symlink(),
        Kind::Unsaved {
            reason: Unsaved::NonUtf8Link,
        } => ft.is_symlink(),
        Kind::Unsaved {
            reason: Unsaved::Special,
        } => !ft.is_dir() && !ft.is_symlink() && !ft.is_file(),
        Kind::File { .. } | Kind::Git { .. } | Kind::Unsaved { .. } => ft.is_file(),
    }
}

/// A NUL byte, or bytes that are not UTF-8 (apart from a character cut at the end of
/// the sniffed prefix), in the first [`SNIFF_BYTES`].
pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES)];
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some() || head.len() == bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_sniffing() {
        assert!(!is_binary(b"plain text\n"));
        assert!(!is_binary("héllo".as_bytes()));
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe, b'a']));
        // A multi-byte character cut by the sniff window is text...
        let mut long = vec![b'a'; SNIFF_BYTES - 1];
        long.extend_from_slice("é".as_bytes());
        assert!(!is_binary(&long));
        // ...but a file that ends in the middle of one is not.
        assert!(is_binary(&"é".as_bytes()[..1]));
    }
}
