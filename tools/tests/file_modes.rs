//! The mode of files that `write_file` creates: `0666 & !umask`, as a shell's `>`
//! gives, under several umasks; an existing file keeps its mode. This test binary has
//! one test, so it may change the process's umask (shared by every thread) freely.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use keel_tools::{SandboxConfig, Tool, ToolContext};
use rustix::fs::Mode;
use serde_json::json;

fn ctx(root: &Path) -> ToolContext {
    ToolContext {
        workspace: root.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: SandboxConfig::off(),
        roots: keel_tools::jail::Roots::none(),
    }
}

fn tool(name: &str) -> Arc<dyn Tool> {
    keel_tools::builtin_tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .expect("tool")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
}

#[tokio::test]
async fn new_files_get_0666_less_the_umask_and_existing_files_keep_their_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let write = tool("write_file");
    for (umask, want) in [
        (0o022, 0o644),
        (0o002, 0o664),
        (0o077, 0o600),
        (0o027, 0o640),
    ] {
        rustix::process::umask(Mode::from_raw_mode(umask));
        assert_eq!(keel_tools::edit::process_umask(), umask);
        let name = format!("new-{umask:03o}.txt");
        write
            .run(json!({"path": name, "content": "x\n"}), ctx(&root))
            .await
            .expect("write_file");
        assert_eq!(
            mode(&root.join(&name)),
            want,
            "a new file under umask {umask:03o}"
        );
        // A file in a new directory too.
        let nested = format!("sub-{umask:03o}/deeper/new.txt");
        write
            .run(json!({"path": nested, "content": "x\n"}), ctx(&root))
            .await
            .expect("write_file");
        assert_eq!(mode(&root.join(&nested)), want, "{nested}");
    }
    // An existing file keeps its mode, whatever the umask.
    rustix::process::umask(Mode::from_raw_mode(0o077));
    let script = root.join("run.sh");
    std::fs::write(&script, "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    write
        .run(
            json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
            ctx(&root),
        )
        .await
        .expect("write_file");
    assert_eq!(mode(&script), 0o755);
    // So does a file `edit_file` rewrites.
    tool("edit_file")
        .run(
            json!({"path": "run.sh", "edits": [{"oldText": "hi", "newText": "there"}]}),
            ctx(&root),
        )
        .await
        .expect("edit_file");
    assert_eq!(mode(&script), 0o755);
    assert_eq!(
        std::fs::read_to_string(&script).expect("read"),
        "#!/bin/sh\necho there\n"
    );
    rustix::process::umask(Mode::from_raw_mode(0o022));
}
