//! Checkpoints and restore on real files in temporary directories: changes by shell
//! commands, ignore rules, links, modes, binary and large files, a `.git` that stays
//! untouched, reopening, the watcher's cost; the store shared by sessions, pruning,
//! real git repositories, faults (a full disk, unreadable and changing files, no
//! inotify, a crash during garbage collection) and several processes at once.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_tools::checkpoint::{
    ChangeKind, CheckpointConfig, CheckpointError, Checkpoints, Detection, RestoreAction,
};
use serde_json::json;

mod bundle;
mod engine;
mod faults;
mod git_aware;
mod mirror;
mod procs;
mod safety;
mod shared;
mod shell;

/// A workspace and a checkpoint store beside it.
struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    store: PathBuf,
    outside: PathBuf,
}

fn ws() -> Ws {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = fs::canonicalize(dir.path()).expect("canonical");
    let root = base.join("ws");
    let store = base.join("store");
    let outside = base.join("outside");
    fs::create_dir_all(&root).expect("mkdir");
    fs::create_dir_all(&outside).expect("mkdir");
    Ws {
        _dir: dir,
        root,
        store,
        outside,
    }
}

impl Ws {
    fn write(&self, rel: &str, body: &str) {
        let p = self.root.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(p, body).expect("write");
    }

    fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.root.join(rel)).ok()
    }

    fn open(&self, watch: bool) -> Checkpoints {
        let config = CheckpointConfig {
            watch,
            // Watch these small trees too (by default only large ones are watched).
            watch_min_paths: 0,
            ..CheckpointConfig::default()
        };
        Checkpoints::open(&self.root, &self.store, "s1", config).expect("open")
    }

    /// Runs a shell command in the workspace; panics when it fails.
    fn sh(&self, script: &str) {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.root)
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "`{script}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Everything under the root (ignored files and `.git` included): kind, content or
    /// link target, mode.
    fn snapshot(&self) -> BTreeMap<String, (char, Vec<u8>, u32)> {
        snapshot(&self.root)
    }
}

fn snapshot(root: &Path) -> BTreeMap<String, (char, Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("read_dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .expect("prefix")
                .to_string_lossy()
                .into_owned();
            let meta = fs::symlink_metadata(&path).expect("lstat");
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let t = fs::read_link(&path).expect("readlink");
                out.insert(rel, ('l', t.to_string_lossy().as_bytes().to_vec(), 0));
            } else if meta.is_dir() {
                out.insert(rel, ('d', Vec::new(), mode));
                stack.push(path);
            } else {
                out.insert(rel, ('f', fs::read(&path).expect("read"), mode));
            }
        }
    }
    out
}

/// Both detection methods, so every scenario runs with each.
fn modes() -> [bool; 2] {
    [true, false]
}

fn changed(cp: &keel_tools::checkpoint::CheckpointInfo) -> Vec<(String, ChangeKind)> {
    cp.changed
        .iter()
        .map(|c| (c.path.clone(), c.change))
        .collect()
}

/// Runs this test binary again as a child playing `role` (see [`child_role`]).
fn spawn_child(role: &str, envs: &[(&str, &str)]) -> std::process::Child {
    let exe = std::env::current_exe().expect("current exe");
    let mut c = Command::new(exe);
    c.args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env("KEEL_CP_CHILD", role)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in envs {
        c.env(k, v);
    }
    c.spawn().expect("spawn child")
}

/// The entry point of child processes: does nothing in a normal test run.
#[test]
fn child_role() {
    let Ok(role) = std::env::var("KEEL_CP_CHILD") else {
        return;
    };
    procs::run_role(&role);
}
