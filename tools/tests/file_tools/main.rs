//! read_file, list_dir, search_files, edit_file and write_file against real files in
//! temporary directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::tools::{FileChangeResult, ListDirResult, ReadFileResult, SearchFilesResult};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::{SandboxConfig, Tool, ToolContext};
use serde_json::{json, Value};

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn ws() -> Ws {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), "secret\n").expect("write");
    Ws {
        _dir: dir,
        root,
        outside,
    }
}

fn put(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(p, content).expect("write");
}

fn ctx(root: &Path, elevated: bool) -> ToolContext {
    ToolContext {
        workspace: root.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated,
        sandbox: SandboxConfig::default(),
        roots: keel_tools::jail::Roots::none(),
    }
}

fn tool(name: &str) -> Arc<dyn Tool> {
    keel_tools::builtin_tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .expect("tool")
}

async fn run(name: &str, root: &Path, args: Value) -> Result<Value, ErrorPayload> {
    tool(name).run(args, ctx(root, false)).await
}

fn code(r: Result<Value, ErrorPayload>) -> ErrorCode {
    match r {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => {
            assert!(!e.message.is_empty());
            e.code
        }
    }
}

// ---------------------------------------------------------------- read_file

mod edit;
mod read;
mod roots;
mod search;
