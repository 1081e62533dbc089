//! What changed in a work tree between two moments: [`snapshot`] records its files
//! as a git tree, [`diff_trees`] compares two such trees with both contents (how a
//! sub-agent's changes in its worktree are read).

use std::io;
use std::path::Path;
use std::process::Command;

use keel_envelope::ErrorPayload;

use super::{git, persistence, run, unavailable};

/// Runs `c` (a `git` command); its stdout, or its stderr as the error.
fn output_of(c: Command, what: &str) -> Result<Vec<u8>, ErrorPayload> {
    let out = crate::spawn::output_std(c)
        .map_err(|e| unavailable("git_missing", format!("git could not be run: {e}")))?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    Err(unavailable(
        "git_failed",
        format!("git could not {what}: {err}"),
    ))
}

/// Records the files of the work tree whose top folder is `top` as they are now, as
/// a git tree (tracked and untracked files, ignored ones left out), and names it.
/// The work tree's own index, branch and files are not touched: the files are
/// added to a copy of its index (so unchanged files are not read again), whose tree
/// is written to the repository's objects, where nothing refers to it (git's
/// garbage collection takes it away in time). Two snapshots compared with
/// [`diff_trees`] tell what changed in between.
pub fn snapshot(top: &Path) -> Result<String, ErrorPayload> {
    let index = run(top, &["rev-parse", "--git-path", "index"])
        .map_err(|e| unavailable("git_failed", format!("git could not name its index: {e}")))?;
    // Relative to `top` in a main work tree, absolute in a linked one.
    let index = top.join(index);
    let dir = index
        .parent()
        .map_or_else(|| top.to_owned(), Path::to_path_buf);
    let tmp = tempfile::Builder::new()
        .prefix("keel-snapshot-")
        .suffix(".index")
        .tempfile_in(&dir)
        .map_err(|e| persistence(e, "a temporary index"))?;
    // Git wants to make the file itself when the index is new.
    match std::fs::copy(&index, tmp.path()) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let _ = std::fs::remove_file(tmp.path());
        }
        Err(e) => return Err(persistence(e, "a copy of the index")),
    }
    let with_index = |args: &[&str]| {
        let mut c = git(top, args);
        c.env("GIT_INDEX_FILE", tmp.path());
        c
    };
    output_of(with_index(&["add", "--all", "--", "."]), "record the files")?;
    let tree = output_of(with_index(&["write-tree"]), "record the files")?;
    let tree = String::from_utf8_lossy(&tree).trim().to_owned();
    if tree.is_empty() {
        return Err(unavailable("git_failed", "git wrote no tree"));
    }
    Ok(tree)
}

/// One side of a [`TreeChange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// No file there.
    Absent,
    /// A regular file with this content.
    File(Vec<u8>),
    /// A regular file larger than the limit asked for (its size in bytes).
    TooLarge(u64),
    /// A symbolic link or a submodule.
    Other,
}

/// A path whose file differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    /// `/`-separated, relative to the folder asked about.
    pub path: String,
    /// The file in the first tree.
    pub before: Side,
    /// The file in the second tree.
    pub after: Side,
}

/// Every file under `under` (a folder relative to the top `top`, `""` for all) that
/// differs between the trees `from` and `to` of its repository (from
/// [`snapshot`]), in path order, its path relative to `under`, with both contents
/// (a file larger than `max_bytes` is [`Side::TooLarge`]). A change of mode alone
/// is left out.
pub fn diff_trees(
    top: &Path,
    from: &str,
    to: &str,
    under: &str,
    max_bytes: u64,
) -> Result<Vec<TreeChange>, ErrorPayload> {
    let mut args = vec![
        "diff-tree",
        "-r",
        "--no-renames",
        "--no-abbrev",
        "-z",
        "--raw",
        from,
        to,
        "--",
    ];
    if !under.is_empty() {
        args.push(under);
    }
    let raw = output_of(git(top, &args), "list the changes")?;
    // `:<mode> <mode> <blob> <blob> <status>\0<path>\0`, once per path.
    let mut fields = raw.split(|b| *b == 0).filter(|f| !f.is_empty());
    let mut entries = Vec::new();
    while let (Some(head), Some(path)) = (fields.next(), fields.next()) {
        let head = String::from_utf8_lossy(head);
        let parts: Vec<&str> = head.trim_start_matches(':').split(' ').collect();
        let [mode_a, mode_b, blob_a, blob_b, ..] = parts[..] else {
            return Err(unavailable("git_failed", format!("git said {head:?}")));
        };
        let path = String::from_utf8_lossy(path).into_owned();
        let rel = match under.trim_end_matches('/') {
            "" => path.clone(),
            u => path
                .strip_prefix(u)
                .and_then(|r| r.strip_prefix('/'))
                .unwrap_or(&path)
                .to_owned(),
        };
        entries.push((
            rel,
            [
                (mode_a.to_owned(), blob_a.to_owned()),
                (mode_b.to_owned(), blob_b.to_owned()),
            ],
        ));
    }
    let mut wanted: Vec<String> = Vec::new();
    for (_, sides) in &entries {
        for (mode, blob) in sides {
            if mode.starts_with("100") && !wanted.contains(blob) {
                wanted.push(blob.clone());
            }
        }
    }
    let blobs = read_blobs(top, &wanted, max_bytes)?;
    let side = |(mode, blob): &(String, String)| {
        if mode.chars().all(|c| c == '0') {
            Side::Absent
        } else if mode.starts_with("100") {
            blobs.get(blob).cloned().unwrap_or(Side::Absent)
        } else {
            Side::Other
        }
    };
    let mut out = Vec::with_capacity(entries.len());
    for (path, sides) in &entries {
        let (before, after) = (side(&sides[0]), side(&sides[1]));
        // Only the mode changed: no content to propose.
        if before == after {
            continue;
        }
        out.push(TreeChange {
            path: path.clone(),
            before,
            after,
        });
    }
    Ok(out)
}

/// The contents of `blobs` (by id) through one `git cat-file --batch`.
fn read_blobs(
    top: &Path,
    blobs: &[String],
    max_bytes: u64,
) -> Result<std::collections::HashMap<String, Side>, ErrorPayload> {
    use std::io::{BufRead, Read, Write};
    let mut found = std::collections::HashMap::new();
    if blobs.is_empty() {
        return Ok(found);
    }
    let fail = |e: io::Error| unavailable("git_failed", format!("git could not read a file: {e}"));
    let mut cmd = git(top, &["cat-file", "--batch"]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = crate::spawn::spawn_std(cmd).map_err(fail)?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| fail(io::ErrorKind::BrokenPipe.into()))?;
    let ids = blobs.to_vec();
    // Written beside the reading, so neither side waits on a full pipe.
    let writer = std::thread::spawn(move || -> io::Result<()> {
        for id in ids {
            writeln!(stdin, "{id}")?;
        }
        Ok(())
    });
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| fail(io::ErrorKind::BrokenPipe.into()))?;
    let mut r = io::BufReader::new(stdout);
    let mut line = String::new();
    let mut result = Ok(());
    for id in blobs {
        line.clear();
        if let Err(e) = r.read_line(&mut line) {
            result = Err(fail(e));
            break;
        }
        // `<id> blob <size>`, or `<id> missing`.
        let parts: Vec<&str> = line.split_whitespace().collect();
        let size = match parts[..] {
            [_, "blob", size] => size.parse::<u64>().unwrap_or(0),
            _ => {
                result = Err(unavailable(
                    "git_failed",
                    format!("git could not read blob {id}: {}", line.trim()),
                ));
                break;
            }
        };
        let side = if size > max_bytes {
            match io::copy(&mut (&mut r).take(size), &mut io::sink()) {
                Ok(_) => Side::TooLarge(size),
                Err(e) => {
                    result = Err(fail(e));
                    break;
                }
            }
        } else {
            let mut buf = Vec::with_capacity(size as usize);
            if let Err(e) = (&mut r).take(size).read_to_end(&mut buf) {
                result = Err(fail(e));
                break;
            }
            Side::File(buf)
        };
        // The newline after the content.
        let mut nl = [0u8; 1];
        let _ = r.read_exact(&mut nl);
        found.insert(id.clone(), side);
    }
    drop(r);
    let _ = writer.join();
    let _ = child.kill();
    let _ = child.wait();
    result.map(|()| found)
}
