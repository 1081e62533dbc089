//! Git worktrees kept for isolated sessions, under one folder (the runtime's
//! worktree folder, `KEEL_HOME/worktrees/` by default).
//!
//! Layout: `<folder>/<name>/` is a worktree (`name` is the owner's id: a session's,
//! or a sub-agent's) and `<folder>/records/<name>.json` what Keel knows of it (the
//! repository, branch, base commit, owner, and whether it is made). The record is
//! a journal: it is written with `state: "creating"` *before* git is asked for the
//! worktree, and rewritten `ready` after, both atomically (a temporary file renamed
//! into place). An owner that must record the worktree first (the kernel saves the
//! session that works in it) asks for it [`CreateRequest::held`]: the record is then
//! `made` once git is done, and [`confirm`] makes it `ready` once the owner has it.
//! A process that dies before `ready` leaves a record still `creating` or `made`
//! whose process is gone: [`leftovers`] finds those and [`remove`] takes them away
//! (the folder, git's administrative entry, the branch when it has no commits of its
//! own), which `keel doctor` does. The creating process itself takes back a creation
//! it gives up (its caller was interrupted) with [`discard`]. Nothing half-made is
//! ever taken for a ready worktree.
//!
//! Making, removing and pruning take turns per repository (an `flock` on
//! `keel-worktrees.lock` in its git folder): git is not safe against two of them at
//! once on one repository. Git runs with the `git` tool's safe configuration ([`crate::git::safe_invocation`]).
//! Creating a worktree costs a checkout, not a clone: it shares the repository's
//! objects. Submodules are not populated in a new worktree (as with `git worktree
//! add`). This module knows nothing of sessions; the kernel calls it on its blocking
//! pool.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_envelope::worktree::{WorktreeInfo, WorktreeState};
use keel_envelope::{ErrorCode, ErrorPayload};
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

mod snapshot;

pub use snapshot::{diff_trees, snapshot, Side, TreeChange};

/// The folder of the records, inside the worktree folder.
const RECORDS: &str = "records";

/// How many changed paths a `WORKTREE_DIRTY` error names.
const CHANGES_SHOWN: usize = 20;

/// What Keel records of one worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The worktree's name (its folder's name).
    pub name: String,
    /// The session owning it.
    pub session_id: Option<String>,
    /// The top folder of the repository it was made from.
    pub repository: PathBuf,
    /// Its branch.
    pub branch: String,
    /// The commit it was made at.
    pub base_commit: String,
    /// `creating` until git has made it, then `ready` (`made` in between for a
    /// [`CreateRequest::held`] creation, until [`confirm`]).
    pub state: String,
    /// The process that made it (to tell a creation under way from a leftover).
    pub pid: u32,
    /// When, ms since the epoch.
    pub created_at: u64,
}

/// What to make.
#[derive(Debug, Clone)]
pub struct CreateRequest<'a> {
    /// The worktree's name (a folder name: letters, digits, `_`, `-`).
    pub name: &'a str,
    /// The owner.
    pub session_id: Option<&'a str>,
    /// A folder inside the repository (the session's workspace).
    pub source: &'a Path,
    /// The new branch.
    pub branch: &'a str,
    /// The commit to start at (`None`: the repository's `HEAD`).
    pub base_ref: Option<&'a str>,
    /// Now, ms since the epoch.
    pub now: u64,
    /// Leaves the record `made` rather than `ready`: the owner calls [`confirm`]
    /// once it has recorded the worktree, so that a process dying in between leaves
    /// a leftover (found by [`leftovers`]) rather than a worktree nobody owns.
    pub held: bool,
}

/// A worktree made.
#[derive(Debug, Clone)]
pub struct Created {
    /// Its record.
    pub record: Record,
    /// Its root folder.
    pub path: PathBuf,
    /// The folder in it matching the request's `source` (the session's workspace).
    pub workspace: PathBuf,
}

/// What [`remove`] did.
#[derive(Debug, Clone)]
pub struct Removed {
    /// The worktree as it was.
    pub info: WorktreeInfo,
    /// Whether its branch was kept.
    pub branch_kept: bool,
}

fn unavailable(reason: &str, message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::WorktreeUnavailable, message).with_detail("reason", reason)
}

fn git(dir: &Path, args: &[&str]) -> Command {
    let (cmd, rest) = args.split_first().map_or(("", &[][..]), |(c, r)| (*c, r));
    let rest: Vec<String> = rest.iter().map(|s| (*s).to_owned()).collect();
    let mut c = Command::new("git");
    c.args(crate::git::safe_invocation(cmd, &rest))
        .current_dir(dir)
        .envs(crate::git::safe_env())
        // Worktrees need git's locks; the tool's default turns optional ones off.
        .env_remove("GIT_OPTIONAL_LOCKS")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null());
    c
}

/// Runs git in `dir`; its trimmed stdout, or its stderr as the error.
fn run(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = crate::spawn::output_std(git(dir, args))
        .map_err(|e| format!("git could not be run: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        Err(if err.is_empty() {
            format!("git {} failed", args.join(" "))
        } else {
            err
        })
    }
}

/// Takes the repository's worktree lock (`keel-worktrees.lock` in its git folder,
/// `flock`ed): git does not make, remove or prune two worktrees of one repository at
/// once safely (one reads the administrative folder another is still writing, and a
/// prune may delete it), so Keel's processes take turns. Blocks until granted.
fn repository_lock(repository: &Path) -> Result<Flock<File>, ErrorPayload> {
    let lock_err = |e: io::Error| persistence(e, "the repository's worktree lock");
    let common = run(repository, &["rev-parse", "--git-common-dir"])
        .map_err(|e| unavailable("git_failed", format!("git could not name its folder: {e}")))?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(repository.join(common).join("keel-worktrees.lock"))
        .map_err(lock_err)?;
    loop {
        match Flock::lock(file.try_clone().map_err(lock_err)?, FlockArg::LockExclusive) {
            Ok(l) => return Ok(l),
            Err((_, nix::errno::Errno::EINTR)) => continue,
            Err((_, e)) => return Err(lock_err(e.into())),
        }
    }
}

/// Whether `name` may name a worktree (and a branch part): `[A-Za-z0-9_-]`, 1 to
/// 100 characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The short form of an id for a branch: the id without its `prefix_`, its last 10
/// characters, lower case (`sess_01JZ…K7Q2` → `keel/…k7q2`).
pub fn short_id(id: &str) -> String {
    let body = id.split_once('_').map_or(id, |(_, b)| b);
    let start = body.len().saturating_sub(10);
    body.get(start..).unwrap_or(body).to_ascii_lowercase()
}

/// The top folder of the git work tree holding `dir`.
pub fn repository_of(dir: &Path) -> Result<PathBuf, ErrorPayload> {
    match run(dir, &["rev-parse", "--show-toplevel"]) {
        Ok(top) if !top.is_empty() => Ok(PathBuf::from(top)),
        Ok(_) => Err(unavailable(
            "not_a_repository",
            format!("{} is not inside a git work tree", dir.display()),
        )),
        Err(e) if e.contains("could not be run") => Err(unavailable("git_missing", e)),
        Err(e) => Err(unavailable(
            "not_a_repository",
            format!(
                "{} is not in a git repository, so it cannot have a worktree ({})",
                dir.display(),
                e.lines().next().unwrap_or_default()
            ),
        )),
    }
}

fn record_path(folder: &Path, name: &str) -> PathBuf {
    folder.join(RECORDS).join(format!("{name}.json"))
}

fn write_record(folder: &Path, r: &Record) -> io::Result<()> {
    let dir = folder.join(RECORDS);
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!(".{}.{}.tmp", r.name, std::process::id()));
    let bytes = serde_json::to_vec_pretty(r).map_err(io::Error::other)?;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, record_path(folder, &r.name))
}

fn read_record(path: &Path) -> Option<Record> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn persistence(e: io::Error, what: &str) -> ErrorPayload {
    unavailable("io", format!("{what}: {e}"))
}

/// Makes a worktree on a new branch (see the module's documentation for the
/// order of the steps). On a failure nothing is left: the folder, git's entry,
/// the branch and the record are taken away again.
pub fn create(folder: &Path, req: &CreateRequest<'_>) -> Result<Created, ErrorPayload> {
    if !valid_name(req.name) {
        return Err(unavailable(
            "bad_name",
            format!("{:?} cannot name a worktree", req.name),
        ));
    }
    let repository = repository_of(req.source)?;
    let canon_source = std::fs::canonicalize(req.source).unwrap_or_else(|_| req.source.to_owned());
    let canon_repo = std::fs::canonicalize(&repository).unwrap_or_else(|_| repository.clone());
    let sub = canon_source
        .strip_prefix(&canon_repo)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let base = match req.base_ref {
        Some(r) => {
            if r.is_empty() || r.starts_with('-') {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!("{r:?} is not a git revision"),
                )
                .with_detail("field", "payload.baseRef"));
            }
            run(
                &repository,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("{r}^{{commit}}"),
                ],
            )
            .ok()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!("{r:?} names no commit of {}", repository.display()),
                )
                .with_detail("field", "payload.baseRef")
            })?
        }
        None => run(
            &repository,
            &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
        )
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            unavailable(
                "no_commit",
                format!(
                    "{} has no commit yet: a worktree starts at one",
                    repository.display()
                ),
            )
        })?,
    };
    let refname = format!("refs/heads/{}", req.branch);
    if run(&repository, &["check-ref-format", &refname]).is_err() {
        return Err(unavailable(
            "bad_branch",
            format!("{:?} is not a branch name", req.branch),
        ));
    }
    if run(&repository, &["show-ref", "--verify", "--quiet", &refname]).is_ok() {
        return Err(unavailable(
            "branch_exists",
            format!("the branch {} exists already", req.branch),
        ));
    }
    std::fs::create_dir_all(folder)
        .map_err(|e| persistence(e, "the worktree folder cannot be made"))?;
    let folder = std::fs::canonicalize(folder)
        .map_err(|e| persistence(e, "the worktree folder cannot be read"))?;
    let path = folder.join(req.name);
    if path.exists() || record_path(&folder, req.name).exists() {
        return Err(unavailable(
            "exists",
            format!("a worktree {} exists already", path.display()),
        ));
    }
    let mut record = Record {
        name: req.name.to_owned(),
        session_id: req.session_id.map(str::to_owned),
        repository: canon_repo,
        branch: req.branch.to_owned(),
        base_commit: base.clone(),
        state: "creating".to_owned(),
        pid: std::process::id(),
        created_at: req.now,
    };
    write_record(&folder, &record).map_err(|e| persistence(e, "the worktree's record"))?;
    let path_s = path.to_string_lossy().into_owned();
    let lock = match repository_lock(&record.repository) {
        Ok(l) => l,
        Err(e) => {
            let _ = std::fs::remove_file(record_path(&folder, req.name));
            return Err(e);
        }
    };
    // Two steps, each one git process with no children of its own: `worktree add`
    // would check the files out in a child process, which the parent-death signal
    // of `spawn` does not reach (killed mid-way, this process would leave it
    // writing into a folder `keel doctor` is removing), and would run the
    // repository's post-checkout hook.
    let added = run(
        &record.repository,
        &[
            "worktree",
            "add",
            "--quiet",
            "--no-checkout",
            "-b",
            req.branch,
            &path_s,
            &base,
        ],
    )
    .and_then(|_| run(&path, &["reset", "--hard", "--quiet"]));
    if let Err(e) = added {
        undo(&folder, &record);
        drop(lock);
        return Err(unavailable(
            "git_failed",
            format!("git could not make the worktree: {e}"),
        ));
    }
    drop(lock);
    record.state = if req.held { "made" } else { "ready" }.to_owned();
    if let Err(e) = write_record(&folder, &record) {
        let lock = repository_lock(&record.repository);
        undo(&folder, &record);
        drop(lock);
        return Err(persistence(e, "the worktree's record"));
    }
    // `join("")` would end the path with a `/`.
    let workspace = if sub.as_os_str().is_empty() {
        path.clone()
    } else {
        path.join(&sub)
    };
    Ok(Created {
        record,
        path,
        workspace,
    })
}

/// Makes a [`CreateRequest::held`] worktree `ready`: its owner has recorded it.
pub fn confirm(folder: &Path, name: &str) -> Result<(), ErrorPayload> {
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
    let Some(mut r) = record(&folder, name) else {
        return Err(ErrorPayload::new(
            ErrorCode::WorktreeNotFound,
            format!("no worktree {name:?}"),
        )
        .with_detail("name", name));
    };
    if r.state == "ready" {
        return Ok(());
    }
    r.state = "ready".to_owned();
    write_record(&folder, &r).map_err(|e| persistence(e, "the worktree's record"))
}

/// Takes back a creation of this process that its caller gave up before it was
/// confirmed (or a creation that went wrong after): the folder, git's entry, the
/// branch if it has no commits of its own, the record. Not found is not an error.
pub fn discard(folder: &Path, name: &str) {
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
    if let Some(r) = record(&folder, name) {
        let lock = repository_lock(&r.repository).ok();
        undo(&folder, &r);
        drop(lock);
    }
}

/// Takes away what a creation left: the folder, git's entry, the branch if it
/// still points at the base, the record.
fn undo(folder: &Path, r: &Record) {
    let path = folder.join(&r.name);
    let _ = std::fs::remove_dir_all(&path);
    let _ = run(&r.repository, &["worktree", "prune"]);
    delete_branch_if_unused(r);
    let _ = std::fs::remove_file(record_path(folder, &r.name));
}

/// Deletes the record's branch when it has no commit beyond the base; whether it
/// was kept.
fn delete_branch_if_unused(r: &Record) -> bool {
    let refname = format!("refs/heads/{}", r.branch);
    match run(
        &r.repository,
        &["rev-parse", "--verify", "--quiet", &refname],
    ) {
        Ok(tip) if tip == r.base_commit => {
            run(&r.repository, &["update-ref", "-d", &refname, &tip]).is_err()
        }
        Ok(tip) if tip.is_empty() => false,
        Ok(_) => true,
        // No such branch: nothing to keep.
        Err(_) => false,
    }
}

/// Whether the process that wrote a `creating` record is gone (so the record is a
/// leftover, not a creation under way).
fn creator_gone(r: &Record) -> bool {
    r.pid != std::process::id() && !Path::new(&format!("/proc/{}", r.pid)).exists()
}

fn info_of(folder: &Path, r: &Record, dirty: Option<bool>) -> WorktreeInfo {
    let path = folder.join(&r.name);
    let state = if r.state != "ready" {
        WorktreeState::Creating
    } else if path.is_dir() {
        WorktreeState::Ready
    } else {
        WorktreeState::Missing
    };
    WorktreeInfo::new(
        path.display().to_string(),
        r.branch.clone(),
        r.repository.display().to_string(),
        r.base_commit.clone(),
        r.session_id.clone(),
        r.created_at,
    )
    .state(state)
    .dirty(dirty)
}

/// Every record of the folder, newest first (unreadable records are skipped).
pub fn records(folder: &Path) -> Vec<Record> {
    let Ok(entries) = std::fs::read_dir(folder.join(RECORDS)) else {
        return Vec::new();
    };
    let mut out: Vec<Record> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| read_record(&e.path()))
        .collect();
    out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.name.cmp(&b.name)));
    out
}

/// The record named `name`.
pub fn record(folder: &Path, name: &str) -> Option<Record> {
    valid_name(name)
        .then(|| read_record(&record_path(folder, name)))
        .flatten()
}

/// The uncommitted changes of the worktree at `path` (`git status --porcelain`
/// lines, untracked files included).
pub fn changes(path: &Path) -> Result<Vec<String>, ErrorPayload> {
    let out = run(path, &["status", "--porcelain", "--untracked-files=normal"])
        .map_err(|e| unavailable("git_failed", format!("git status failed: {e}")))?;
    Ok(out.lines().map(str::to_owned).collect())
}

/// Every worktree of the folder as the protocol shows it, with `dirty` answered.
pub fn list(folder: &Path) -> Vec<WorktreeInfo> {
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
    records(&folder)
        .iter()
        .map(|r| {
            let path = folder.join(&r.name);
            let dirty = (r.state == "ready" && path.is_dir())
                .then(|| changes(&path).ok().map(|c| !c.is_empty()))
                .flatten();
            info_of(&folder, r, dirty)
        })
        .collect()
}

/// The records left `creating` by a process that is gone.
pub fn leftovers(folder: &Path) -> Vec<Record> {
    records(folder)
        .into_iter()
        .filter(|r| r.state != "ready" && creator_gone(r))
        .collect()
}

/// Removes worktree `name`: refused with `WORKTREE_DIRTY` when it has uncommitted
/// changes, unless `force`. Its branch is deleted unless `keep_branch`, and never
/// when it has commits beyond the base (they would be lost). A leftover of a
/// creation is removed whatever its state.
pub fn remove(
    folder: &Path,
    name: &str,
    force: bool,
    keep_branch: bool,
) -> Result<Removed, ErrorPayload> {
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
    let Some(r) = record(&folder, name) else {
        return Err(ErrorPayload::new(
            ErrorCode::WorktreeNotFound,
            format!("no worktree {name:?}"),
        )
        .with_detail("name", name));
    };
    let path = folder.join(&r.name);
    if r.state != "ready" && !creator_gone(&r) {
        return Err(unavailable(
            "creating",
            format!("the worktree {} is being made", path.display()),
        )
        .retryable(true));
    }
    if r.state == "ready" && path.is_dir() && !force {
        let changed = changes(&path)?;
        if !changed.is_empty() {
            let shown: Vec<String> = changed.iter().take(CHANGES_SHOWN).cloned().collect();
            return Err(ErrorPayload::new(
                ErrorCode::WorktreeDirty,
                format!(
                    "the worktree {} has {} uncommitted change{}; commit them, or remove it with `force`",
                    path.display(),
                    changed.len(),
                    if changed.len() == 1 { "" } else { "s" }
                ),
            )
            .with_detail("path", path.display().to_string())
            .with_detail("changes", shown)
            .with_detail("count", changed.len()));
        }
    }
    let info = info_of(&folder, &r, None);
    // Without the lock (a repository moved away) the folder still goes.
    let lock = repository_lock(&r.repository).ok();
    if path.exists() {
        let path_s = path.to_string_lossy().into_owned();
        // `--force` twice also removes a locked worktree; a failure (a repository
        // moved away, submodules) falls back to removing the folder and pruning.
        let removed = run(
            &r.repository,
            &["worktree", "remove", "--force", "--force", &path_s],
        );
        if removed.is_err() || path.exists() {
            remove_folder(&path)?;
        }
    }
    let _ = run(&r.repository, &["worktree", "prune"]);
    drop(lock);
    let branch_kept = if keep_branch {
        true
    } else {
        delete_branch_if_unused(&r)
    };
    let _ = std::fs::remove_file(record_path(&folder, &r.name));
    Ok(Removed { info, branch_kept })
}

/// Removes a worktree's folder, trying again a few times when a file appears
/// meanwhile (a process of a creation that died, itself being killed, may still
/// be writing).
fn remove_folder(path: &Path) -> Result<(), ErrorPayload> {
    let mut tries = 0;
    loop {
        match std::fs::remove_dir_all(path) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty && tries < 5 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20 << tries));
            }
            Err(e) => {
                return Err(unavailable(
                    "io",
                    format!("the worktree {} cannot be removed: {e}", path.display()),
                ))
            }
        }
    }
}

/// The worktree folder's name for a worktree path inside it, if it is one.
pub fn name_of(folder: &Path, path: &Path) -> Option<String> {
    let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_owned());
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| crate::jail::lexical_normalize(path));
    let rest = path.strip_prefix(&folder).ok()?;
    let mut comps = rest.components();
    let first = comps.next()?.as_os_str().to_str()?.to_owned();
    (comps.next().is_none() && valid_name(&first) && first != RECORDS).then_some(first)
}

/// A file changed in a worktree against its base commit: its path relative to the
/// worktree's root and its content now (`None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    /// `/`-separated, relative to the worktree's root.
    pub path: String,
    /// The content now, `None` when deleted.
    pub content: Option<Vec<u8>>,
}

/// Every file of the work tree whose top folder is `path` that differs from `base`
/// (committed or not, untracked files included, ignored ones not), in path order,
/// relative to `path`.
pub fn diff_files(path: &Path, base: &str) -> Result<Vec<FileChange>, ErrorPayload> {
    let fail =
        |e: String| unavailable("git_failed", format!("git could not list the changes: {e}"));
    let tracked = run(
        path,
        &["diff", "--name-only", "--no-renames", "-z", base, "--"],
    )
    .map_err(fail)?;
    let untracked =
        run(path, &["ls-files", "--others", "--exclude-standard", "-z"]).map_err(fail)?;
    let mut names: Vec<String> = tracked
        .split('\0')
        .chain(untracked.split('\0'))
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let file = path.join(&name);
        let content = match std::fs::symlink_metadata(&file) {
            Ok(m) if m.is_file() => Some(std::fs::read(&file).map_err(|e| {
                unavailable("io", format!("{} cannot be read: {e}", file.display()))
            })?),
            Ok(_) => continue,
            Err(_) => None,
        };
        out.push(FileChange {
            path: name,
            content,
        });
    }
    Ok(out)
}

/// Makes the tree at `to` hold what the tree at `from` holds beyond their shared
/// commit: every file of `from` changed against its `HEAD` (uncommitted edits,
/// untracked files, deletions) is copied over (with its permissions) or deleted in
/// `to`. Both are work trees of one repository at the same commit (a fork's new
/// worktree and its parent's tree). Returns how many paths it wrote or deleted.
pub fn overlay(from: &Path, to: &Path) -> Result<usize, ErrorPayload> {
    let from_top = repository_of(from)?;
    let to_top = repository_of(to)?;
    let changed = diff_files(&from_top, "HEAD")?;
    let io = |e: io::Error, p: &Path| unavailable("io", format!("{}: {e}", p.display()));
    for c in &changed {
        let src = from_top.join(&c.path);
        let dst = to_top.join(&c.path);
        match &c.content {
            Some(_) => {
                if let Some(parent) = dst.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io(e, parent))?;
                }
                std::fs::copy(&src, &dst).map_err(|e| io(e, &dst))?;
            }
            None => match std::fs::remove_file(&dst) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(e, &dst)),
            },
        }
    }
    Ok(changed.len())
}
