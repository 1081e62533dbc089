//! Tree objects: the state of one directory (its direct children's entries, and for
//! each child directory the hash of its own tree) stored as one object, as git does.
//! A checkpoint is the hash of its root tree. A change to one file makes new trees
//! only along its path, so checkpoints of many sessions of one workspace share every
//! unchanged directory, an unchanged tree costs nothing to record again, and two
//! checkpoints are compared by descending only into directories whose hashes differ.
//!
//! A tree is a JSON array of rows `[name, tag, data, mode, size, mtime, ctime, ino,
//! flags]`: tag `f` (data: the content's SHA-256), `g` (a git blob id), `u` (not saved;
//! data: why), `l` (a link; data: its target), `d` (a directory; data: its tree).

use std::collections::{BTreeMap, HashMap};
use std::io;

use super::manifest::{children, join, Entry, Kind, Manifest, Stamp, Unsaved};
use super::objects::{hash, Objects};

type Row = (String, String, String, u32, u64, i64, i64, u64, u8);

/// Path → (entry in one tree, entry in the other).
pub(crate) type Diff = BTreeMap<String, (Option<Entry>, Option<Entry>)>;

const APPEARED: u8 = 1;
const RACY: u8 = 2;

/// One row of a tree.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub entry: Entry,
    /// A directory's tree.
    pub subtree: Option<String>,
}

fn bad(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("damaged tree: {what}"))
}

fn unsaved_tag(u: Unsaved) -> &'static str {
    match u {
        Unsaved::TooLarge => "tooLarge",
        Unsaved::Binary => "binary",
        Unsaved::Unreadable => "unreadable",
        Unsaved::Special => "special",
        Unsaved::NonUtf8Link => "nonUtf8Link",
        Unsaved::Changing => "changing",
    }
}

fn unsaved_of(s: &str) -> Option<Unsaved> {
    Some(match s {
        "tooLarge" => Unsaved::TooLarge,
        "binary" => Unsaved::Binary,
        "unreadable" => Unsaved::Unreadable,
        "special" => Unsaved::Special,
        "nonUtf8Link" => Unsaved::NonUtf8Link,
        "changing" => Unsaved::Changing,
        _ => return None,
    })
}

fn row(name: &str, e: &Entry, subtree: Option<&str>) -> Row {
    let (tag, data) = match &e.kind {
        Kind::File { hash } => ("f", hash.clone()),
        Kind::Git { oid } => ("g", oid.clone()),
        Kind::Unsaved { reason } => ("u", unsaved_tag(*reason).to_string()),
        Kind::Symlink { target } => ("l", target.clone()),
        Kind::Dir => ("d", subtree.unwrap_or_default().to_string()),
    };
    let flags = (u8::from(e.appeared) * APPEARED) | (u8::from(e.racy) * RACY);
    (
        name.to_string(),
        tag.to_string(),
        data,
        e.mode,
        e.stamp.size,
        e.stamp.mtime,
        e.stamp.ctime,
        e.stamp.ino,
        flags,
    )
}

fn node(r: Row) -> io::Result<Node> {
    let (name, tag, data, mode, size, mtime, ctime, ino, flags) = r;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." || name == ".git" {
        return Err(bad(format!("bad name {name:?}")));
    }
    let mut subtree = None;
    let kind = match tag.as_str() {
        "f" => Kind::File { hash: data },
        "g" => Kind::Git { oid: data },
        "u" => Kind::Unsaved {
            reason: unsaved_of(&data).ok_or_else(|| bad(format!("reason {data:?}")))?,
        },
        "l" => Kind::Symlink { target: data },
        "d" => {
            subtree = Some(data);
            Kind::Dir
        }
        other => return Err(bad(format!("tag {other:?}"))),
    };
    Ok(Node {
        name,
        entry: Entry {
            kind,
            mode,
            stamp: Stamp {
                size,
                mtime,
                ctime,
                ino,
            },
            appeared: flags & APPEARED != 0,
            racy: flags & RACY != 0,
        },
        subtree,
    })
}

/// Encodes the rows of a tree object (the inverse of [`decode`]).
pub(crate) fn encode(nodes: &[Node]) -> io::Result<Vec<u8>> {
    let rows: Vec<Row> = nodes
        .iter()
        .map(|n| row(&n.name, &n.entry, n.subtree.as_deref()))
        .collect();
    serde_json::to_vec(&rows).map_err(io::Error::other)
}

/// Decodes a tree object.
pub(crate) fn decode(bytes: &[u8]) -> io::Result<Vec<Node>> {
    let rows: Vec<Row> = serde_json::from_slice(bytes).map_err(bad)?;
    rows.into_iter().map(node).collect()
}

/// The tree hashes of every directory of one recorded state (`""`: the root).
#[derive(Debug, Default, Clone)]
pub(crate) struct Trees {
    dirs: HashMap<String, String>,
}

impl Trees {
    /// The root tree's hash, once built or loaded.
    pub fn root(&self) -> Option<&str> {
        self.dirs.get("").map(String::as_str)
    }

    /// Whether every tree is still stored.
    pub fn all_present(&self, objects: &Objects) -> bool {
        self.dirs.values().all(|h| objects.contains(h))
    }

    /// Loads the whole state under `root` as a manifest, with its tree hashes.
    pub fn load(objects: &mut Objects, root: &str) -> io::Result<(Manifest, Trees)> {
        let mut m = Manifest::new();
        let mut trees = Trees::default();
        let mut stack = vec![(String::new(), root.to_string())];
        while let Some((dir, h)) = stack.pop() {
            let nodes = decode(&objects.get(&h)?)?;
            trees.dirs.insert(dir.clone(), h);
            for n in nodes {
                let path = join(&dir, &n.name);
                if let Some(sub) = n.subtree {
                    stack.push((path.clone(), sub));
                }
                m.insert(path, n.entry);
            }
        }
        Ok((m, trees))
    }

    /// Stores new trees for the directories that hold `changed` paths (and their
    /// ancestors), from `manifest`; returns the new root.
    pub fn update<'a>(
        &mut self,
        objects: &mut Objects,
        manifest: &Manifest,
        changed: impl IntoIterator<Item = &'a String>,
    ) -> io::Result<String> {
        for p in changed {
            self.dirs.remove(p.as_str());
            let mut rest = p.as_str();
            while let Some((parent, _)) = rest.rsplit_once('/') {
                self.dirs.remove(parent);
                rest = parent;
            }
            self.dirs.remove("");
        }
        self.ensure(objects, manifest, "")
    }

    fn ensure(
        &mut self,
        objects: &mut Objects,
        manifest: &Manifest,
        dir: &str,
    ) -> io::Result<String> {
        if let Some(h) = self.dirs.get(dir) {
            return Ok(h.clone());
        }
        let kids = children(manifest, dir);
        let mut rows = Vec::with_capacity(kids.len());
        for (path, e) in kids {
            let name = path.rsplit_once('/').map_or(path.as_str(), |(_, n)| n);
            if e.is_dir() {
                let sub = self.ensure(objects, manifest, path)?;
                rows.push(row(name, e, Some(&sub)));
            } else {
                rows.push(row(name, e, None));
            }
        }
        let body = serde_json::to_vec(&rows).map_err(io::Error::other)?;
        let h = hash(&body);
        objects.put(&h, &body)?;
        self.dirs.insert(dir.to_string(), h.clone());
        Ok(h)
    }
}

/// The paths whose entries differ between the trees `a` and `b`: path → (entry in
/// `a`, entry in `b`). Descends only into directories whose trees differ.
pub(crate) fn diff(objects: &mut Objects, a: &str, b: &str) -> io::Result<Diff> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(String::new(), Some(a.to_string()), Some(b.to_string()))];
    while let Some((dir, ta, tb)) = stack.pop() {
        if ta == tb {
            continue;
        }
        let load = |objects: &mut Objects, t: &Option<String>| -> io::Result<Vec<Node>> {
            match t {
                Some(h) => decode(&objects.get(h)?),
                None => Ok(Vec::new()),
            }
        };
        let na = load(objects, &ta)?;
        let nb = load(objects, &tb)?;
        let mut pairs: BTreeMap<String, (Option<Node>, Option<Node>)> = BTreeMap::new();
        for n in na {
            let name = n.name.clone();
            pairs.entry(name).or_default().0 = Some(n);
        }
        for n in nb {
            let name = n.name.clone();
            pairs.entry(name).or_default().1 = Some(n);
        }
        for (name, (x, y)) in pairs {
            let path = join(&dir, &name);
            let sa = x.as_ref().and_then(|n| n.subtree.clone());
            let sb = y.as_ref().and_then(|n| n.subtree.clone());
            let ea = x.map(|n| n.entry);
            let eb = y.map(|n| n.entry);
            if ea != eb {
                out.insert(path.clone(), (ea, eb));
            }
            if sa.is_some() || sb.is_some() {
                stack.push((path, sa, sb));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(h: &str) -> Entry {
        Entry {
            kind: Kind::File { hash: h.into() },
            mode: 0o644,
            stamp: Stamp::default(),
            appeared: false,
            racy: false,
        }
    }

    fn dir() -> Entry {
        Entry {
            kind: Kind::Dir,
            mode: 0o755,
            stamp: Stamp::default(),
            appeared: false,
            racy: false,
        }
    }

    #[test]
    fn trees_round_trip_share_unchanged_directories_and_diff_only_what_changed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut o = Objects::open(tmp.path()).expect("objects");
        let mut m = Manifest::new();
        for d in ["a", "a/b", "c", "c0"] {
            m.insert(d.into(), dir());
        }
        for f in ["a/b/x", "a/y", "c/z", "c-d", "top"] {
            m.insert(f.into(), file(f));
        }
        let mut t = Trees::default();
        let r1 = t.update(&mut o, &m, m.keys()).expect("build");
        let (back, t2) = Trees::load(&mut o, &r1).expect("load");
        assert_eq!(back, m);
        assert_eq!(t2.root(), Some(r1.as_str()));
        // One change: new trees for its directory and ancestors only.
        m.insert("a/b/x".into(), file("x2"));
        m.remove("c/z");
        let before = t.dirs.clone();
        let r2 = t
            .update(&mut o, &m, ["a/b/x".to_string(), "c/z".to_string()].iter())
            .expect("update");
        assert_ne!(r1, r2);
        assert_eq!(t.dirs.get("c0"), before.get("c0"));
        assert_ne!(t.dirs.get("a/b"), before.get("a/b"));
        let d = diff(&mut o, &r1, &r2).expect("diff");
        let keys: Vec<&str> = d.keys().map(String::as_str).collect();
        assert_eq!(keys, vec!["a/b/x", "c/z"]);
        assert_eq!(d["c/z"], (Some(file("c/z")), None));
        // The same state gives the same root.
        let mut fresh = Trees::default();
        assert_eq!(fresh.update(&mut o, &m, m.keys()).expect("again"), r2);
    }
}
