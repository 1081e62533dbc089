//! What the path corpora share: the corpus files, the fixture workspace and a
//! tool context.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::tools::Decision;
use keel_tools::{SandboxConfig, ToolContext};

pub fn data(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub fn rows(text: &str) -> Vec<(usize, Vec<String>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.split('\t').map(str::to_owned).collect()))
        .collect()
}

pub fn decision_str(d: &Decision) -> &str {
    d.as_str()
}

pub struct PathFixture {
    pub _dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub out: PathBuf,
}

pub fn path_fixture() -> PathFixture {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let ws = base.join("ws");
    let out = base.join("outside");
    for d in ["src/deep/nested", "docs", ".git"] {
        std::fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    std::fs::create_dir_all(&out).expect("mkdir");
    for (f, c) in [
        ("src/a.rs", "fn a() {}\n"),
        ("src/lib.rs", "pub mod a;\n"),
        ("src/deep/nested/file.txt", "nested\n"),
        ("docs/readme.md", "# docs\n"),
        ("file with spaces.txt", "spaces\n"),
        ("ünïcödé.txt", "unicode\n"),
        (".hidden", "hidden\n"),
        (".git/config", "[core]\n"),
    ] {
        std::fs::write(ws.join(f), c).expect("write");
    }
    std::fs::write(out.join("secret.txt"), "secret\n").expect("write");
    symlink("src", ws.join("link_in")).expect("symlink");
    symlink("src/a.rs", ws.join("link_in_file")).expect("symlink");
    symlink(&out, ws.join("link_out")).expect("symlink");
    symlink("../outside", ws.join("link_out_rel")).expect("symlink");
    symlink("/etc", ws.join("src/deep/link_etc")).expect("symlink");
    symlink("../../..", ws.join("src/deep/link_up")).expect("symlink");
    symlink("../..", ws.join("src/deep/link_root")).expect("symlink");
    symlink(out.join("missing/x"), ws.join("dangling_out")).expect("symlink");
    symlink("src/new_file.rs", ws.join("dangling_in")).expect("symlink");
    symlink("chain2", ws.join("chain1")).expect("symlink");
    symlink("link_out", ws.join("chain2")).expect("symlink");
    symlink("loop_b", ws.join("loop_a")).expect("symlink");
    symlink("loop_a", ws.join("loop_b")).expect("symlink");
    let status = std::process::Command::new("mkfifo")
        .arg(ws.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(status.success(), "mkfifo failed");
    PathFixture { _dir: dir, ws, out }
}

pub fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        workspace: ws.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: SandboxConfig::default(),
        roots: keel_tools::jail::Roots::none(),
    }
}
