//! The workspace jail: every path argument is resolved against the workspace root
//! before anything touches the filesystem.
//!
//! Resolution walks the path one component at a time, the way the kernel does:
//! each existing component is replaced by its real path (so symlinks at any depth are
//! followed and `link/..` goes to the parent of the link's target), `..` pops the
//! real path built so far, and once a component does not exist the rest is appended
//! lexically. A dangling symlink is resolved through its target text. The result is
//! compared with the canonical workspace root.
//!
//! NUL bytes and device or special files (fifos, sockets, character and block
//! devices) are refused outright; paths outside the root are reported as such so the
//! permission gate can ask (reads) or deny (writes).
//!
//! **Extra roots.** A session may reach folders beside its workspace
//! ([`Roots`], `session.start {additionalRoots}`). A path is resolved the same way
//! whatever root it lands in; the real path decides where it is: in the workspace, in
//! one extra root (`inside`, with [`ResolvedPath::extra`] naming that root), or
//! outside all of them. Paths in an extra root are named by their absolute path (a
//! relative path is always relative to the workspace), and they are displayed
//! absolute. Roots never overlap: none is inside another or inside the workspace, and
//! none holds the workspace ([`extra_roots`] refuses such a list), so a real path is in
//! at most one of them. Writes are allowed in the workspace and in the `write` roots
//! only ([`ResolvedPath::writable`]).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use keel_envelope::{ErrorCode, ErrorPayload};

/// How many symlinks one resolution may follow before giving up (like `ELOOP`).
const MAX_LINK_HOPS: usize = 40;

/// What a path resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// The real absolute path (symlinks followed as far as they exist).
    pub abs: PathBuf,
    /// Workspace-relative, `/`-separated path (`.` for the root) when inside; the
    /// absolute path otherwise.
    pub display: String,
    /// Whether the real path is inside the workspace root, or inside one of the extra
    /// roots it was resolved with (then `extra` names that root).
    pub inside: bool,
    /// Whether the path exists.
    pub exists: bool,
    /// Whether it exists and is a directory.
    pub is_dir: bool,
    /// The extra root the real path is in (`display` is then absolute); `None` in
    /// the workspace or outside every root.
    pub extra: Option<ExtraRoot>,
}

impl ResolvedPath {
    /// Whether a write may go there: inside the workspace, or inside a `write` root.
    pub fn writable(&self) -> bool {
        self.inside && self.extra.as_ref().is_none_or(|r| r.writable)
    }
}

/// A folder a session may reach beside its workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtraRoot {
    /// Its canonical absolute path.
    pub path: PathBuf,
    /// Whether files may be written there (`access: "write"`); otherwise read only.
    pub writable: bool,
}

/// The extra roots of a session: canonical, none inside another or inside the
/// workspace, none holding the workspace (see [`extra_roots`]). Cheap to clone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots(Arc<[ExtraRoot]>);

impl Roots {
    /// No extra roots.
    pub fn none() -> Self {
        Self::default()
    }

    /// These roots, as they are (the caller checked them, e.g. with [`extra_roots`]).
    pub fn new(roots: Vec<ExtraRoot>) -> Self {
        Self(roots.into())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The roots, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = &ExtraRoot> {
        self.0.iter()
    }

    /// The root holding the real path `abs`, if any.
    pub fn holding(&self, abs: &Path) -> Option<&ExtraRoot> {
        self.0.iter().find(|r| abs.starts_with(&r.path))
    }

    /// The `write` roots' paths.
    pub fn writable(&self) -> Vec<PathBuf> {
        self.0
            .iter()
            .filter(|r| r.writable)
            .map(|r| r.path.clone())
            .collect()
    }
}

/// Why a list of extra roots was refused: the index of the first bad entry and what
/// is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootRefused {
    /// The entry's index in the list given.
    pub index: usize,
    /// Why, in one sentence naming the path.
    pub message: String,
}

/// Checks the extra roots of a session whose workspace is `workspace` (`(path,
/// writable)` pairs, in order) and canonicalises them. Each path must be absolute
/// and name an existing directory (a symlink to one is followed: the root is its
/// target); no root may be the workspace, be inside it or hold it, and no two roots
/// may be the same folder or be inside one another.
pub fn extra_roots(workspace: &Path, given: &[(&str, bool)]) -> Result<Roots, RootRefused> {
    let ws = canonical_root(workspace);
    let mut out: Vec<ExtraRoot> = Vec::with_capacity(given.len());
    for (index, (raw, writable)) in given.iter().enumerate() {
        let refuse = |message: String| RootRefused { index, message };
        if raw.is_empty() {
            return Err(refuse("the path is empty".to_owned()));
        }
        if raw.contains('\0') {
            return Err(refuse("the path contains a NUL byte".to_owned()));
        }
        let p = Path::new(raw);
        if !p.is_absolute() {
            return Err(refuse(format!(
                "`{raw}` is not an absolute path; extra roots are given by absolute path"
            )));
        }
        let canon = std::fs::canonicalize(p)
            .map_err(|e| refuse(format!("`{raw}` cannot be used as a root: {e}")))?;
        if !canon.is_dir() {
            return Err(refuse(format!("`{raw}` is not a directory")));
        }
        if canon == ws {
            return Err(refuse(format!("`{raw}` is the workspace itself")));
        }
        if canon.starts_with(&ws) {
            return Err(refuse(format!(
                "`{raw}` is inside the workspace `{}`, which the session reaches already",
                ws.display()
            )));
        }
        if ws.starts_with(&canon) {
            return Err(refuse(format!(
                "`{raw}` holds the workspace `{}`; an extra root may not contain it",
                ws.display()
            )));
        }
        for other in &out {
            if other.path == canon {
                return Err(refuse(format!(
                    "`{raw}` is given twice (as `{}`)",
                    other.path.display()
                )));
            }
            if canon.starts_with(&other.path) || other.path.starts_with(&canon) {
                return Err(refuse(format!(
                    "`{raw}` overlaps the extra root `{}`; roots may not be inside one another",
                    other.path.display()
                )));
            }
        }
        out.push(ExtraRoot {
            path: canon,
            writable: *writable,
        });
    }
    Ok(Roots::new(out))
}

/// Returns the canonical form of a workspace root (the root itself when it cannot be
/// canonicalised, e.g. because it does not exist).
pub fn canonical_root(workspace: &Path) -> PathBuf {
    std::fs::canonicalize(workspace).unwrap_or_else(|_| lexical_normalize(workspace))
}

/// How many workspace roots [`known_root`] remembers (then it starts again).
const KNOWN_ROOTS: usize = 16;

/// The canonical workspace root, resolved once per root and process: every path a tool
/// names is resolved from it, and resolving the root again each time cost a
/// `readlink` per component of its path. A root that cannot be canonicalised (it does
/// not exist yet) is not remembered. A session keeps working in the real directory its
/// root named when first used, even if a symlink on the way is later pointed elsewhere.
fn known_root(workspace: &Path) -> PathBuf {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ROOTS: OnceLock<Mutex<HashMap<PathBuf, PathBuf>>> = OnceLock::new();
    let roots = ROOTS.get_or_init(Mutex::default);
    let lock = || roots.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(real) = lock().get(workspace) {
        return real.clone();
    }
    let Ok(real) = std::fs::canonicalize(workspace) else {
        return lexical_normalize(workspace);
    };
    let mut known = lock();
    if known.len() >= KNOWN_ROOTS {
        known.clear();
    }
    known.insert(workspace.to_path_buf(), real.clone());
    real
}

/// Normalises `.` and `..` without touching the filesystem. `..` at the root stays
/// at the root.
pub fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() && !path.is_absolute() {
                    out.push("..");
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

fn invalid(message: impl Into<String>, raw: &str) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ToolArgumentsInvalid, message).with_detail("path", raw)
}

fn refused(message: impl Into<String>, raw: &str) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::PathOutsideWorkspace, message).with_detail("path", raw)
}

/// Resolves `raw` (relative to the workspace, or absolute) to its real path.
///
/// Errors: an empty path (`TOOL_ARGUMENTS_INVALID`); a NUL byte, a device or special
/// file, or a symlink loop (`PATH_OUTSIDE_WORKSPACE`). A path outside the workspace
/// is not an error here: the result says `inside: false`.
pub fn resolve(workspace: &Path, raw: &str) -> Result<ResolvedPath, ErrorPayload> {
    resolve_from(workspace, workspace, raw)
}

/// Like [`resolve`], with the session's extra roots: a real path inside one of them
/// is `inside` too, with `extra` naming the root and an absolute `display`.
pub fn resolve_in(
    workspace: &Path,
    roots: &Roots,
    raw: &str,
) -> Result<ResolvedPath, ErrorPayload> {
    let mut r = resolve_from(workspace, workspace, raw)?;
    if !r.inside {
        if let Some(root) = roots.holding(&r.abs) {
            r.inside = true;
            r.extra = Some(root.clone());
        }
    }
    Ok(r)
}

/// Like [`resolve`], but a relative `raw` is taken relative to `base` (an absolute
/// path, e.g. a shell's working directory) rather than the workspace root.
pub fn resolve_from(
    workspace: &Path,
    base: &Path,
    raw: &str,
) -> Result<ResolvedPath, ErrorPayload> {
    if raw.is_empty() {
        return Err(invalid("the path is empty", raw));
    }
    if raw.contains('\0') {
        return Err(refused("the path contains a NUL byte", raw));
    }
    let root = known_root(workspace);
    let expanded;
    let raw_path = if let Some(rest) =
        raw.strip_prefix("~/")
            .or(if raw == "~" { Some("") } else { None })
    {
        // `~` means the home directory to a person and to a shell; never the workspace.
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"));
        expanded = home.join(rest);
        expanded.as_path()
    } else {
        Path::new(raw)
    };
    let start = if raw_path.is_absolute() {
        PathBuf::from("/")
    } else if base == workspace {
        root.clone()
    } else {
        canonical_root(base)
    };
    let mut hops = 0usize;
    let walked = walk(start, raw_path, &mut hops).map_err(|m| refused(m, raw))?;
    let (abs, exists) = (walked.path, walked.exists);
    let mut is_dir = false;
    if exists {
        // The walk's own look at the last component, else a fresh one (after `..`).
        let kind = match walked.kind {
            Some(kind) => Ok(kind),
            None => std::fs::metadata(&abs).map(|md| md.file_type()),
        };
        match kind {
            Ok(ft) => {
                if !ft.is_file() && !ft.is_dir() {
                    return Err(refused(
                        "the path is a device or special file; only regular files and directories can be used",
                        raw,
                    ));
                }
                is_dir = ft.is_dir();
            }
            Err(_) => {
                // Vanished or unreadable between the walk and now: report as missing.
            }
        }
    }
    let inside = abs.starts_with(&root);
    let display = if inside {
        let rel = abs.strip_prefix(&root).unwrap_or(Path::new(""));
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.is_empty() {
            ".".to_owned()
        } else {
            parts.join("/")
        }
    } else {
        abs.to_string_lossy().into_owned()
    };
    Ok(ResolvedPath {
        abs,
        display,
        inside,
        exists,
        is_dir,
        extra: None,
    })
}

/// Where a walk ended: the real path, and whether it exists.
struct Walked {
    path: PathBuf,
    exists: bool,
    /// The type of the last component when the walk read it (no `..` after it).
    kind: Option<std::fs::FileType>,
}

/// Walks `path` from the real directory `start`.
fn walk(start: PathBuf, path: &Path, hops: &mut usize) -> Result<Walked, String> {
    let mut cur = start;
    let mut missing = false;
    let mut kind = None;
    for comp in path.components() {
        match comp {
            Component::Prefix(_) | Component::RootDir => {
                cur = PathBuf::from("/");
                missing = false;
                kind = None;
            }
            Component::CurDir => {}
            Component::ParentDir => {
                cur.pop();
                kind = None;
                if missing {
                    // Popping back into an existing directory makes it real again.
                    missing = std::fs::symlink_metadata(&cur).is_err();
                }
            }
            Component::Normal(name) => {
                let cand = cur.join(name);
                kind = None;
                if missing {
                    cur = cand;
                    continue;
                }
                match std::fs::symlink_metadata(&cand) {
                    Ok(md) if md.file_type().is_symlink() => {
                        *hops += 1;
                        if *hops > MAX_LINK_HOPS {
                            return Err("too many levels of symbolic links".to_owned());
                        }
                        let target = std::fs::read_link(&cand)
                            .map_err(|e| format!("cannot read symbolic link: {e}"))?;
                        let real = walk(cur.clone(), &target, hops)?;
                        cur = real.path;
                        missing = !real.exists;
                        kind = real.kind;
                    }
                    Ok(md) => {
                        cur = cand;
                        kind = Some(md.file_type());
                    }
                    Err(_) => {
                        cur = cand;
                        missing = true;
                    }
                }
            }
        }
    }
    Ok(Walked {
        path: cur,
        exists: !missing,
        kind,
    })
}

/// Opens a resolved path for reading without blocking on a fifo that replaced the file
/// after resolution, and checks the opened file is a regular file.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    open_regular_sized(path).map(|(file, _)| file)
}

/// [`open_regular`], with the file's length when it was opened.
fn open_regular_sized(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    let md = file.metadata()?;
    if !md.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, md.len()))
}

/// Reads a whole regular file (see [`open_regular`]) of at most `max` bytes: a larger
/// one (also one that grows past `max` while it is read) is an `InvalidData` error
/// that says so, after reading no more than `max + 1` bytes.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, len) = open_regular_sized(path)?;
    let hint = len.min(max);
    let mut buf = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it is larger than {max} bytes"),
        ));
    }
    Ok(buf)
}

/// Converts a path inside the workspace to its `/`-separated relative form.
pub fn relative_display(root: &Path, abs: &Path) -> String {
    match abs.strip_prefix(root) {
        Ok(rel) => {
            let s: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if s.is_empty() {
                ".".to_owned()
            } else {
                s.join("/")
            }
        }
        Err(_) => abs.to_string_lossy().into_owned(),
    }
}

/// Resolves the `cwd` of a shell command: the workspace root when absent, else an
/// existing directory inside the workspace.
pub fn resolve_cwd(workspace: &Path, cwd: Option<&str>) -> Result<PathBuf, ErrorPayload> {
    let root = canonical_root(workspace);
    match cwd {
        None | Some("") => Ok(root),
        Some(c) => {
            let r = resolve(workspace, c)?;
            if !r.inside {
                return Err(ErrorPayload::new(
                    ErrorCode::PathOutsideWorkspace,
                    format!("`cwd` `{c}` is outside the workspace"),
                )
                .with_detail("field", "cwd"));
            }
            if !r.is_dir {
                return Err(ErrorPayload::new(
                    ErrorCode::ToolArgumentsInvalid,
                    format!("`cwd` `{c}` is not an existing directory"),
                )
                .with_detail("field", "cwd"));
            }
            Ok(r.abs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_and_symlinks_are_resolved() {
        let dir = tempfile::tempdir().expect("test");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).expect("test");
        std::fs::write(ws.join("src/a.rs"), "x").expect("test");
        std::os::unix::fs::symlink(dir.path(), ws.join("up")).expect("test");
        let r = resolve(&ws, "src/../src/a.rs").expect("test");
        assert!(r.inside && r.exists);
        assert_eq!(r.display, "src/a.rs");
        let r = resolve(&ws, "up/ws/src/a.rs").expect("test");
        assert!(r.inside, "a link out and back in lands inside");
        let r = resolve(&ws, "up/secret").expect("test");
        assert!(!r.inside);
        let r = resolve(&ws, "../ws/new/file").expect("test");
        assert!(r.inside && !r.exists);
        assert_eq!(r.display, "new/file");
        assert_eq!(
            resolve(&ws, "a\0b").expect_err("test").code,
            ErrorCode::PathOutsideWorkspace
        );
        assert_eq!(
            resolve(&ws, "").expect_err("test").code,
            ErrorCode::ToolArgumentsInvalid
        );
        assert_eq!(
            resolve(&ws, "/dev/null").expect_err("test").code,
            ErrorCode::PathOutsideWorkspace
        );
    }

    #[test]
    fn opening_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().expect("test");
        let fifo = dir.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("test");
        assert!(st.success());
        assert!(open_regular(&fifo).is_err());
        assert!(read_regular(&fifo, 10).is_err());
        std::fs::write(dir.path().join("f"), "x").expect("test");
        assert_eq!(read_regular(&dir.path().join("f"), 1).expect("test"), b"x");
        std::fs::write(dir.path().join("big"), b"xyz").expect("test");
        let err = read_regular(&dir.path().join("big"), 2).expect_err("over the cap");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("larger than 2 bytes"), "{err}");
    }
}
