//! The file tools in a session's extra roots: named by absolute path, listed and
//! searched with absolute paths, edited in a `write` root, refused in a `read` root.

use keel_tools::jail::{extra_roots, Roots};

use super::*;

struct Rooted {
    w: Ws,
    write: PathBuf,
    read: PathBuf,
    roots: Roots,
}

fn rooted() -> Rooted {
    let w = ws();
    let base = w.root.parent().expect("base").to_path_buf();
    let (write, read) = (base.join("lib"), base.join("ref"));
    put(&write, "src/lib.rs", "pub fn shared() {}\n");
    put(&read, "docs/guide.md", "the shared guide\n");
    put(&w.root, "main.rs", "fn main() { shared() }\n");
    let roots = extra_roots(
        &w.root,
        &[
            (write.to_str().expect("utf-8"), true),
            (read.to_str().expect("utf-8"), false),
        ],
    )
    .expect("roots");
    Rooted {
        w,
        write,
        read,
        roots,
    }
}

impl Rooted {
    async fn run(&self, name: &str, args: Value) -> Result<Value, ErrorPayload> {
        let mut c = ctx(&self.w.root, false);
        c.roots = self.roots.clone();
        tool(name).run(args, c).await
    }
}

fn abs(p: &Path, rel: &str) -> String {
    p.join(rel).to_string_lossy().into_owned()
}

#[tokio::test]
async fn reads_lists_and_searches_reach_both_roots_by_absolute_path() {
    let r = rooted();
    let read: ReadFileResult = serde_json::from_value(
        r.run("read_file", json!({"path": abs(&r.read, "docs/guide.md")}))
            .await
            .expect("read"),
    )
    .expect("shape");
    assert_eq!(read.content, "the shared guide\n");
    assert_eq!(read.path, abs(&r.read, "docs/guide.md"), "shown absolute");
    let list: ListDirResult = serde_json::from_value(
        r.run("list_dir", json!({"path": r.write.to_string_lossy()}))
            .await
            .expect("list"),
    )
    .expect("shape");
    let paths: Vec<&str> = list.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, [abs(&r.write, "src"), abs(&r.write, "src/lib.rs")]);
    let found: SearchFilesResult = serde_json::from_value(
        r.run(
            "search_files",
            json!({"query": "shared", "path": r.read.to_string_lossy()}),
        )
        .await
        .expect("search"),
    )
    .expect("shape");
    let hits: Vec<&str> = found.matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(hits, [abs(&r.read, "docs/guide.md")]);
    // The workspace is searched as before, relative paths and all.
    let found: SearchFilesResult = serde_json::from_value(
        r.run("search_files", json!({"query": "shared"}))
            .await
            .expect("search"),
    )
    .expect("shape");
    let hits: Vec<&str> = found.matches.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(hits, ["main.rs"], "a search of the workspace stays in it");
    // A relative path is the workspace's, never a root's.
    let e = r
        .run("read_file", json!({"path": "src/lib.rs"}))
        .await
        .expect_err("not in the workspace");
    assert_eq!(e.code, ErrorCode::ToolExecutionFailed, "{}", e.message);
}

#[tokio::test]
async fn a_write_root_is_edited_and_a_read_root_refuses_every_write() {
    let r = rooted();
    let lib = abs(&r.write, "src/lib.rs");
    let edited: FileChangeResult = serde_json::from_value(
        r.run(
            "edit_file",
            json!({"path": lib, "edits": [{"oldText": "shared()", "newText": "shared_v2()"}]}),
        )
        .await
        .expect("edit in a write root"),
    )
    .expect("shape");
    assert_eq!(edited.path, lib);
    assert_eq!(
        std::fs::read_to_string(r.write.join("src/lib.rs")).expect("read"),
        "pub fn shared_v2() {}\n"
    );
    let made = abs(&r.write, "new/dir/file.txt");
    r.run("write_file", json!({"path": made, "content": "new\n"}))
        .await
        .expect("create in a write root");
    assert_eq!(
        std::fs::read_to_string(r.write.join("new/dir/file.txt")).expect("read"),
        "new\n"
    );
    let guide = abs(&r.read, "docs/guide.md");
    for (name, args) in [
        (
            "edit_file",
            json!({"path": guide, "edits": [{"oldText": "shared", "newText": "x"}]}),
        ),
        ("write_file", json!({"path": guide, "content": "x"})),
        (
            "write_file",
            json!({"path": abs(&r.read, "docs/new.md"), "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": abs(&r.read, "deep/new/file.md"), "content": "x"}),
        ),
    ] {
        let e = r.run(name, args.clone()).await.expect_err("a read root");
        assert_eq!(e.code, ErrorCode::PathOutsideWorkspace, "{name} {args}");
        assert!(e.message.contains("may only read"), "{}", e.message);
        assert_eq!(e.details["access"], "read");
        assert_eq!(e.details["root"], r.read.to_string_lossy().as_ref());
    }
    assert_eq!(
        std::fs::read_to_string(r.read.join("docs/guide.md")).expect("read"),
        "the shared guide\n"
    );
    assert!(!r.read.join("docs/new.md").exists());
    assert!(
        !r.read.join("deep").exists(),
        "no folder was made in a read root"
    );
    // A link in the write root that points into the read root does not make it
    // writable; one that points back into the workspace writes the workspace.
    std::os::unix::fs::symlink(&r.read, r.write.join("to-read")).expect("symlink");
    let e = r
        .run(
            "write_file",
            json!({"path": abs(&r.write, "to-read/docs/guide.md"), "content": "x"}),
        )
        .await
        .expect_err("through a link into the read root");
    assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
    std::os::unix::fs::symlink(&r.w.root, r.write.join("to-ws")).expect("symlink");
    let v: FileChangeResult = serde_json::from_value(
        r.run(
            "write_file",
            json!({"path": abs(&r.write, "to-ws/via-link.txt"), "content": "ws\n"}),
        )
        .await
        .expect("through a link into the workspace"),
    )
    .expect("shape");
    assert_eq!(v.path, "via-link.txt", "shown relative to the workspace");
    assert!(r.w.root.join("via-link.txt").exists());
    // Outside every root stays outside.
    let e = r
        .run(
            "write_file",
            json!({"path": abs(&r.w.outside, "x.txt"), "content": "x"}),
        )
        .await
        .expect_err("outside");
    assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
    assert!(e.message.contains("extra roots"), "{}", e.message);
}
