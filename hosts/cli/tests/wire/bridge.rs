//! The real `keel bridge` for wire tests: a workspace, a `KEEL_HOME` and a scripted model.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Starts `keel bridge` in `ws` with `KEEL_HOME=home` on `scripted:script`, its stdin and
/// stdout piped and its stderr discarded.
pub fn spawn_bridge(ws: &Path, home: &Path, script: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["bridge", "--workspace"])
        .arg(ws)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .env("KEEL_HOME", home)
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start keel bridge")
}
