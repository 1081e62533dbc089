//! Git for tests: a command isolated from the machine's configuration, with a fixed
//! identity, `main` as the first branch, no signing, and file-protocol submodules
//! allowed.

use std::path::Path;
use std::process::Command;

/// Runs `git ARGS` in `dir`; its trimmed stdout. Panics, with git's stderr, when it
/// fails.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Keel Test",
            "-c",
            "user.email=test@keel.invalid",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(["-c", "protocol.file.allow=always"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap_or_else(|e| panic!("git could not be run: {e}"));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
