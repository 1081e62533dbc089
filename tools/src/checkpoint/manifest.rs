//! What a checkpoint knows of one path: its kind, content hash or link target, mode,
//! and the stat fingerprint used to notice changes without reading the file.

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use serde::{Deserialize, Serialize};

/// The state of the workspace as a map from relative path (`/`-separated) to entry.
/// Sorted, so that a directory's descendants are one range (`dir/` … `dir0`).
pub(crate) type Manifest = BTreeMap<String, Entry>;

/// Why a file's content was not saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Unsaved {
    /// Larger than [`super::CheckpointConfig::max_file_bytes`].
    TooLarge,
    /// A NUL byte or invalid UTF-8 in its first bytes.
    Binary,
    /// It could not be read (permissions).
    Unreadable,
    /// A FIFO, socket or device.
    Special,
    /// A symbolic link whose target is not UTF-8.
    NonUtf8Link,
    /// It kept changing while the checkpoint read it (the next one reads it again).
    Changing,
}

impl Unsaved {
    /// A short explanation for people.
    pub fn describe(self) -> &'static str {
        match self {
            Unsaved::TooLarge => "larger than the checkpoint size limit",
            Unsaved::Binary => "a binary file (not saved in checkpoints)",
            Unsaved::Unreadable => "could not be read when the checkpoint was taken",
            Unsaved::Special => "a special file (FIFO, socket or device)",
            Unsaved::NonUtf8Link => "a symbolic link whose target is not UTF-8",
            Unsaved::Changing => "it was being written while the checkpoint read it",
        }
    }
}

/// What a path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file whose content is in the object store under `hash`.
    File { hash: String },
    /// A regular file whose content is the git blob `oid` (equal to the index's when
    /// recorded): read back from the repository, never copied.
    Git { oid: String },
    /// A path whose content was not saved.
    Unsaved { reason: Unsaved },
    /// A symbolic link (never followed).
    Symlink { target: String },
    /// A directory.
    Dir,
}

/// The stat fields that change when a file does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stamp {
    pub size: u64,
    pub mtime: i64,
    pub ctime: i64,
    pub ino: u64,
}

impl Stamp {
    pub fn of(meta: &Metadata) -> Self {
        Stamp {
            size: meta.size(),
            mtime: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime: nanos(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }
}

/// Seconds and nanoseconds as one count of nanoseconds (saturating).
pub(crate) fn nanos(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// One path of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: Kind,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub stamp: Stamp,
    /// The path became visible without being created (an ignore rule changed), so a
    /// restore to a checkpoint that did not have it keeps it.
    pub appeared: bool,
    /// Modified so recently when it was read that a later change could keep the same
    /// timestamp: the next scan reads it again even if its stamp is unchanged.
    pub racy: bool,
}

impl Entry {
    /// Same content, kind and mode (the stamp and bookkeeping aside).
    pub fn same_content(&self, other: &Entry) -> bool {
        match (&self.kind, &other.kind) {
            (Kind::Dir, Kind::Dir) => self.mode == other.mode,
            (Kind::Unsaved { .. }, Kind::Unsaved { .. }) => {
                self.stamp == other.stamp && self.mode == other.mode
            }
            (a, b) => a == b && self.mode == other.mode,
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir)
    }

    /// File, directory or link: a change of type means removing before creating.
    pub fn type_tag(&self) -> u8 {
        match self.kind {
            Kind::Dir => 0,
            Kind::Symlink { .. } => 1,
            Kind::File { .. } | Kind::Git { .. } | Kind::Unsaved { .. } => 2,
        }
    }
}

/// The paths under `dir` (not `dir` itself), as a key range of a manifest.
pub(crate) fn descendants<'a, V>(
    map: &'a BTreeMap<String, V>,
    dir: &str,
) -> impl Iterator<Item = (&'a String, &'a V)> + 'a {
    let (lo, hi) = if dir.is_empty() {
        (String::new(), None)
    } else {
        (format!("{dir}/"), Some(format!("{dir}0")))
    };
    let skip_root = dir.is_empty();
    map.range(lo..)
        .take_while(move |(k, _)| hi.as_ref().is_none_or(|h| k.as_str() < h.as_str()))
        .filter(move |(k, _)| !(skip_root && k.is_empty()))
}

/// The direct children of `dir` (`""` for the root), skipping over the contents of
/// child directories: cost grows with the number of children (times the log of the
/// manifest's size), not of descendants.
pub(crate) fn children<'a>(map: &'a Manifest, dir: &str) -> Vec<(&'a String, &'a Entry)> {
    use std::ops::Bound::{Included, Unbounded};
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    let mut out = Vec::new();
    let mut range = map.range::<String, _>((Included(prefix.clone()), Unbounded));
    while let Some((k, e)) = range.next() {
        if !k.starts_with(&prefix) {
            break;
        }
        if k.len() == prefix.len() {
            continue;
        }
        if let Some((child, _)) = k[prefix.len()..].split_once('/') {
            // Inside a child directory: everything under `child/` sorts before
            // `child0` (a sibling such as `child-x` sorts before `child/`).
            range = map.range::<String, _>((Included(format!("{prefix}{child}0")), Unbounded));
            continue;
        }
        out.push((k, e));
    }
    out
}

/// The parent of a relative path (`""` for top-level paths).
pub(crate) fn parent_of(rel: &str) -> &str {
    rel.rsplit_once('/').map(|(p, _)| p).unwrap_or("")
}

/// Joins a relative directory and a name.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_one_range_and_exclude_siblings_with_a_common_prefix() {
        let mut m: BTreeMap<String, ()> = BTreeMap::new();
        for k in ["a", "a-b", "a/b", "a/b/c", "a.txt", "a0", "ab", "b"] {
            m.insert(k.to_string(), ());
        }
        let d: Vec<&str> = descendants(&m, "a").map(|(k, _)| k.as_str()).collect();
        assert_eq!(d, vec!["a/b", "a/b/c"]);
        assert_eq!(descendants(&m, "").count(), 8);
        let mut man = Manifest::new();
        for k in ["a", "a/b", "a/b/c", "a-b", "a.txt", "a0", "a0/x", "ab"] {
            let kind = if k.contains('.') || k.ends_with('c') || k.ends_with('x') {
                Kind::Unsaved {
                    reason: Unsaved::Special,
                }
            } else {
                Kind::Dir
            };
            let e = Entry {
                kind,
                mode: 0,
                stamp: Stamp::default(),
                appeared: false,
                racy: false,
            };
            man.insert(k.to_string(), e);
        }
        let top: Vec<&str> = children(&man, "").iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(top, vec!["a", "a-b", "a.txt", "a0", "ab"]);
        let under: Vec<&str> = children(&man, "a")
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(under, vec!["a/b"]);
        assert_eq!(parent_of("a/b/c"), "a/b");
        assert_eq!(parent_of("a"), "");
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("a", "x"), "a/x");
    }
}
