//! Git awareness: in a git work tree, a file whose content equals its index blob is
//! recorded by the blob's id instead of being copied, and read back from the
//! repository when restored.
//!
//! Which files equal their index blob is git's own answer: `git status` (which trusts
//! the index's cached stat data and re-hashes only racily clean files) lists the
//! tracked files that differ; every other index entry is equal. Files marked
//! assume-unchanged or skip-worktree are never trusted. The index is stat-ed before
//! and after asking: if it changed meanwhile, git's answer is not used. Git runs with
//! the `git` tool's safe configuration (no fsmonitor hook, no pager) and
//! `GIT_OPTIONAL_LOCKS=0`, so it never writes to `.git`. Blobs are read by one
//! long-lived `git cat-file --batch` child per restore, and each blob is checked
//! against its id before it is written.

use std::collections::HashMap;
use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::objects::hex;

/// A git work tree holding the workspace.
#[derive(Debug)]
pub(crate) struct Repo {
    /// The workspace root (where git runs).
    root: PathBuf,
    /// The workspace relative to the top of the work tree (`""` or `dir/`).
    prefix: String,
    index: PathBuf,
    sha256: bool,
    cat: Option<Cat>,
}

#[derive(Debug)]
struct Cat {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Cat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn git(root: &Path, args: &[&str]) -> Command {
    let args: Vec<String> = args.iter().map(|s| (*s).to_string()).collect();
    let (cmd, rest) = args
        .split_first()
        .map_or(("version", &[][..]), |(c, r)| (c.as_str(), r));
    let mut c = Command::new("git");
    c.args(crate::git::safe_invocation(cmd, rest))
        .current_dir(root)
        .envs(crate::git::safe_env())
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    c
}

fn run(root: &Path, args: &[&str]) -> io::Result<Vec<u8>> {
    let out = crate::spawn::output_std(git(root, args))?;
    if !out.status.success() {
        return Err(io::Error::other(format!("git {} failed", args.join(" "))));
    }
    Ok(out.stdout)
}

/// The id git gives a blob of these bytes.
pub(crate) fn blob_id(bytes: &[u8], sha256: bool) -> String {
    let header = format!("blob {}\0", bytes.len());
    if sha256 {
        let mut h = Sha256::new();
        h.update(header.as_bytes());
        h.update(bytes);
        hex(&h.finalize())
    } else {
        let mut h = Sha1::new();
        h.update(header.as_bytes());
        h.update(bytes);
        hex(&h.finalize())
    }
}

/// What is known of the index for one refresh: workspace-relative path → blob id of
/// every tracked file whose content equals its index blob.
pub(crate) type Clean = HashMap<String, String>;

/// Whether git could find a work tree from `root`: a `.git` in it or in one of its
/// parents, or `GIT_DIR` set. Without either, git is not asked (starting it costs a
/// few milliseconds of CPU per session, in every workspace that is not a repository).
fn may_be_in_a_repository(root: &Path) -> bool {
    std::env::var_os("GIT_DIR").is_some()
        || root
            .ancestors()
            .any(|dir| fs::symlink_metadata(dir.join(".git")).is_ok())
}

fn index_stamp(path: &Path) -> Option<(u64, i64, i64, u64)> {
    let m = fs::metadata(path).ok()?;
    Some((m.size(), m.mtime(), m.mtime_nsec(), m.ino()))
}

impl Repo {
    /// The work tree holding `root`, if `root` is in one and git runs.
    pub fn discover(root: &Path) -> Option<Repo> {
        if !may_be_in_a_repository(root) {
            return None;
        }
        let out = run(
            root,
            &[
                "rev-parse",
                "--is-inside-work-tree",
                "--show-prefix",
                "--git-path",
                "index",
                "--show-object-format",
            ],
        )
        .ok()?;
        let text = String::from_utf8(out).ok()?;
        let mut lines = text.lines();
        if lines.next()? != "true" {
            return None;
        }
        let prefix = lines.next()?.to_string();
        let index = root.join(lines.next()?);
        let sha256 = lines.next() == Some("sha256");
        Some(Repo {
            root: root.to_path_buf(),
            prefix,
            index,
            sha256,
            cat: None,
        })
    }

    pub fn sha256(&self) -> bool {
        self.sha256
    }

    /// The tracked files (workspace-relative) whose content equals their index blob,
    /// with the blob ids; `None` when git could not say (or the index changed while
    /// it was asked).
    pub fn clean(&self) -> Option<Clean> {
        let before = index_stamp(&self.index);
        let listed = run(&self.root, &["ls-files", "-v", "-s", "-z", "--full-name"]).ok()?;
        let status = run(
            &self.root,
            &[
                "-c",
                "status.relativePaths=false",
                "status",
                "--porcelain=v2",
                "-z",
                "--untracked-files=no",
                "--ignore-submodules=all",
                "--no-renames",
                ".",
            ],
        )
        .ok()?;
        if before.is_none() || index_stamp(&self.index) != before {
            return None;
        }
        let mut clean = Clean::new();
        for rec in listed.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            // "<tag> <mode> <oid> <stage>\t<path>"
            let rec = std::str::from_utf8(rec).ok()?;
            let (meta, path) = rec.split_once('\t')?;
            let mut f = meta.split(' ');
            let (tag, mode, oid, stage) = (f.next()?, f.next()?, f.next()?, f.next()?);
            if tag != "H" || stage != "0" || !(mode == "100644" || mode == "100755") {
                continue;
            }
            let Some(rel) = path.strip_prefix(&self.prefix) else {
                continue;
            };
            clean.insert(rel.to_string(), oid.to_string());
        }
        for rec in status.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let Ok(rec) = std::str::from_utf8(rec) else {
                continue;
            };
            let path = match rec.as_bytes().first() {
                // "1 XY sub mH mI mW hH hI path"
                Some(b'1') => rec.splitn(9, ' ').nth(8),
                // "u XY sub m1 m2 m3 mW h1 h2 h3 path"
                Some(b'u') => rec.splitn(11, ' ').nth(10),
                // "2 …" cannot appear with --no-renames; "#" headers are not asked for.
                _ => None,
            };
            if let Some(rel) = path.and_then(|p| p.strip_prefix(&self.prefix)) {
                clean.remove(rel);
            }
        }
        Some(clean)
    }

    /// Reads blob `oid` from the repository and checks it against its id.
    pub fn read_blob(&mut self, oid: &str) -> io::Result<Vec<u8>> {
        if oid.is_empty() || !oid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not a blob id"));
        }
        if self.cat.is_none() {
            let mut cmd = git(&self.root, &["cat-file", "--batch"]);
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
            let mut child = crate::spawn::spawn_std(cmd)?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                return Err(io::Error::other("git cat-file without pipes"));
            };
            self.cat = Some(Cat {
                child,
                stdin,
                stdout: BufReader::new(stdout),
            });
        }
        let result = self.ask(oid);
        if result.is_err() {
            self.cat = None;
        }
        let bytes = result?;
        if blob_id(&bytes, self.sha256) != oid {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the repository's blob does not match its id",
            ));
        }
        Ok(bytes)
    }

    fn ask(&mut self, oid: &str) -> io::Result<Vec<u8>> {
        let cat = self
            .cat
            .as_mut()
            .ok_or_else(|| io::Error::other("no git cat-file"))?;
        cat.stdin.write_all(format!("{oid}\n").as_bytes())?;
        cat.stdin.flush()?;
        let mut header = String::new();
        cat.stdout.read_line(&mut header)?;
        let mut f = header.split_whitespace();
        let (_, kind, size) = (f.next(), f.next(), f.next());
        if kind != Some("blob") {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the blob is no longer in the repository",
            ));
        }
        let size: usize = size
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io::Error::other("bad git cat-file header"))?;
        let mut buf = vec![0; size + 1];
        cat.stdout.read_exact(&mut buf)?;
        buf.pop();
        Ok(buf)
    }

    /// Ends the `git cat-file` child.
    pub fn close(&mut self) {
        self.cat = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// git is asked only where it could find a work tree: below a `.git` (a directory,
    /// or the file of a linked worktree).
    #[test]
    fn git_is_asked_only_below_a_dot_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deep = dir.path().join("a/b");
        fs::create_dir_all(&deep).expect("mkdir");
        let outside = std::env::temp_dir()
            .ancestors()
            .all(|d| !d.join(".git").exists());
        if outside && std::env::var_os("GIT_DIR").is_none() {
            assert!(!may_be_in_a_repository(&deep));
            assert!(Repo::discover(&deep).is_none());
        }
        fs::write(dir.path().join("a/.git"), "gitdir: /nowhere\n").expect("write");
        assert!(may_be_in_a_repository(&deep));
        fs::remove_file(dir.path().join("a/.git")).expect("rm");
        fs::create_dir(dir.path().join(".git")).expect("mkdir");
        assert!(may_be_in_a_repository(&deep));
    }
}
