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

#[tokio::test]
async fn read_file_returns_text_and_line_counts() {
    let w = ws();
    put(&w.root, "src/a.rs", "one\ntwo\nthree\n");
    let r: ReadFileResult = serde_json::from_value(
        run("read_file", &w.root, json!({"path": "./src/../src/a.rs"}))
            .await
            .expect("ok"),
    )
    .expect("shape");
    assert_eq!(r.content, "one\ntwo\nthree\n");
    assert_eq!(
        (
            r.start_line,
            r.line_count,
            r.total_lines,
            r.size_bytes,
            r.truncated
        ),
        (1, 3, 3, 14, false)
    );
    assert_eq!(r.path, "src/a.rs");

    let r: ReadFileResult = serde_json::from_value(
        run(
            "read_file",
            &w.root,
            json!({"path": "src/a.rs", "offset": 2, "limit": 1}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert!(r.content.starts_with("two\n"), "{}", r.content);
    assert!(
        r.content.contains("[truncated: showing lines 2-2 of 3"),
        "{}",
        r.content
    );
    assert_eq!(
        (r.start_line, r.line_count, r.total_lines, r.truncated),
        (2, 1, 3, true)
    );
}

#[tokio::test]
async fn read_file_truncates_large_files_with_a_marker() {
    let w = ws();
    let text: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    put(&w.root, "big.txt", &text);
    let r: ReadFileResult = serde_json::from_value(
        run("read_file", &w.root, json!({"path": "big.txt"}))
            .await
            .expect("ok"),
    )
    .expect("shape");
    assert!(r.truncated);
    assert_eq!(r.total_lines, 5000);
    assert_eq!(r.line_count, 2000);
    assert!(r.content.contains("line 2000\n") && !r.content.contains("line 2001\n"));
    assert!(
        r.content
            .ends_with("of 5000; call read_file with offset 2001 to read more]"),
        "{}",
        &r.content[r.content.len() - 120..]
    );

    // The byte cap applies to long lines too.
    let wide: String = (0..100)
        .map(|_| format!("{}\n", "x".repeat(10_000)))
        .collect();
    put(&w.root, "wide.txt", &wide);
    let r: ReadFileResult = serde_json::from_value(
        run("read_file", &w.root, json!({"path": "wide.txt"}))
            .await
            .expect("ok"),
    )
    .expect("shape");
    assert!(r.truncated && r.line_count < 100 && r.total_lines == 100);
    assert!(r.content.contains("output size limit reached"));
}

#[tokio::test]
async fn read_file_refuses_binary_and_bad_input() {
    let w = ws();
    put(&w.root, "img.bin", [0x89u8, b'P', b'N', b'G', 0, 0, 1, 2]);
    put(&w.root, "latin1.txt", [b'c', b'a', b'f', 0xe9, b'\n']);
    put(&w.root, "ok.txt", "ok\n");
    std::fs::create_dir_all(w.root.join("dir")).expect("mkdir");
    let e = run("read_file", &w.root, json!({"path": "img.bin"}))
        .await
        .expect_err("binary");
    assert_eq!(e.code, ErrorCode::ToolExecutionFailed);
    assert!(e.message.contains("binary"), "{}", e.message);
    assert_eq!(e.details["binary"], true);
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": "latin1.txt"})).await),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": 5})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": "ok.txt", "bogus": 1})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": "ok.txt", "offset": 0})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "read_file",
                &w.root,
                json!({"path": "ok.txt", "limit": "ten"})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("read_file", &w.root, json!("ok.txt")).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": "missing.txt"})).await),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": "dir"})).await),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(
            run(
                "read_file",
                &w.root,
                json!({"path": "../outside/secret.txt"})
            )
            .await
        ),
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(
        code(run("read_file", &w.root, json!({"path": "ok.txt\u{0}"})).await),
        ErrorCode::PathOutsideWorkspace
    );
    // With an elevated approval, an outside read works.
    let v = tool("read_file")
        .run(
            json!({"path": w.outside.join("secret.txt")}),
            ctx(&w.root, true),
        )
        .await
        .expect("elevated read");
    assert_eq!(v["content"], "secret\n");
}

// ---------------------------------------------------------------- list_dir

#[tokio::test]
async fn list_dir_respects_ignores_depth_and_reports_kinds() {
    let w = ws();
    put(&w.root, "src/a.rs", "abc");
    put(&w.root, "src/deep/b.rs", "b");
    put(&w.root, "src/deep/deeper/c.rs", "c");
    put(&w.root, "target/out.o", "o");
    put(&w.root, "notes.log", "l");
    put(&w.root, ".gitignore", "target/\n");
    put(&w.root, ".ignore", "*.log\n");
    put(&w.root, ".git/HEAD", "ref");
    std::os::unix::fs::symlink("src/a.rs", w.root.join("link")).expect("symlink");
    let r: ListDirResult = serde_json::from_value(
        run("list_dir", &w.root, json!({"path": "."}))
            .await
            .expect("ok"),
    )
    .expect("shape");
    let paths: Vec<&str> = r.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            ".gitignore",
            ".ignore",
            "link",
            "src",
            "src/a.rs",
            "src/deep"
        ],
        "{paths:?}"
    );
    let a = r.entries.iter().find(|e| e.path == "src/a.rs").expect("a");
    assert_eq!((a.size, a.depth), (3, 2));
    assert_eq!(serde_json::to_value(a.kind).expect("kind"), "file");
    assert_eq!(
        serde_json::to_value(
            r.entries
                .iter()
                .find(|e| e.path == "src")
                .expect("src")
                .kind
        )
        .expect("kind"),
        "dir"
    );
    assert_eq!(
        serde_json::to_value(
            r.entries
                .iter()
                .find(|e| e.path == "link")
                .expect("link")
                .kind
        )
        .expect("kind"),
        "symlink"
    );
    assert!(!r.truncated);

    let r: ListDirResult = serde_json::from_value(
        run("list_dir", &w.root, json!({"path": "src", "depth": 5}))
            .await
            .expect("ok"),
    )
    .expect("shape");
    assert!(r.entries.iter().any(|e| e.path == "src/deep/deeper/c.rs"));
    // Default path is the root.
    assert!(run("list_dir", &w.root, json!({})).await.is_ok());
}

#[tokio::test]
async fn list_dir_bounds_entries_and_rejects_bad_input() {
    let w = ws();
    for i in 0..1100 {
        put(&w.root, &format!("many/f{i:04}.txt"), "");
    }
    put(&w.root, "file.txt", "x");
    let r: ListDirResult = serde_json::from_value(
        run("list_dir", &w.root, json!({"path": "many", "depth": 1}))
            .await
            .expect("ok"),
    )
    .expect("shape");
    assert!(r.truncated);
    assert_eq!(r.entries.len(), 1000);
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": "many", "depth": 0})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": "many", "depth": 99})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": "many", "depth": -1})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": "file.txt"})).await),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": "nope"})).await),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": ".."})).await),
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(
        code(run("list_dir", &w.root, json!({"path": ["a"]})).await),
        ErrorCode::ToolArgumentsInvalid
    );
}

// ---------------------------------------------------------------- search_files

#[tokio::test]
async fn search_content_literal_regex_case_context_and_glob() {
    let w = ws();
    put(
        &w.root,
        "src/a.rs",
        "fn main() {\n    let x = foo_bar(1);\n}\n",
    );
    put(&w.root, "src/b.rs", "// Foo_Bar here\nfn other() {}\n");
    put(&w.root, "docs/c.md", "foo_bar(2) in docs\n");
    put(&w.root, "ignored/d.rs", "foo_bar(3)\n");
    put(&w.root, ".gitignore", "ignored/\n");
    put(&w.root, "bin.dat", b"foo_bar(\0\0\0)");
    let s = |v: Value| -> SearchFilesResult { serde_json::from_value(v).expect("shape") };

    let r = s(run("search_files", &w.root, json!({"query": "foo_bar("}))
        .await
        .expect("ok"));
    let hits: Vec<(String, Option<u64>)> =
        r.matches.iter().map(|m| (m.path.clone(), m.line)).collect();
    assert_eq!(
        hits,
        vec![
            ("docs/c.md".to_owned(), Some(1)),
            ("src/a.rs".to_owned(), Some(2))
        ],
        "literal: `(` is not a regex group"
    );
    assert_eq!(r.matches[1].snippet, "    let x = foo_bar(1);");
    assert!(!r.truncated);
    assert!(r.files_searched >= 4);

    // Smart case: lower-case query matches any case.
    let r = s(run(
        "search_files",
        &w.root,
        json!({"query": "foo_bar", "glob": "*.rs"}),
    )
    .await
    .expect("ok"));
    assert_eq!(
        r.matches
            .iter()
            .map(|m| m.path.as_str())
            .collect::<Vec<_>>(),
        vec!["src/a.rs", "src/b.rs"]
    );
    let r = s(run(
        "search_files",
        &w.root,
        json!({"query": "foo_bar", "glob": "*.rs", "caseSensitive": true}),
    )
    .await
    .expect("ok"));
    assert_eq!(r.matches.len(), 1);

    let r = s(run(
        "search_files",
        &w.root,
        json!({"query": r"foo_bar\(\d\)", "regex": true, "path": "src"}),
    )
    .await
    .expect("ok"));
    assert_eq!(r.matches.len(), 1);
    assert_eq!(r.matches[0].path, "src/a.rs");

    let r = s(run(
        "search_files",
        &w.root,
        json!({"query": "let x", "contextLines": 1}),
    )
    .await
    .expect("ok"));
    assert_eq!(
        r.matches[0].snippet,
        "1-fn main() {\n2:    let x = foo_bar(1);\n3-}"
    );
}

#[tokio::test]
async fn search_bounds_results_and_names() {
    let w = ws();
    for i in 0..50 {
        put(&w.root, &format!("f{i:02}.txt"), "needle\nneedle\n");
    }
    put(&w.root, "src/Widget.tsx", "");
    put(&w.root, "src/widget_test.rs", "");
    let r: SearchFilesResult = serde_json::from_value(
        run(
            "search_files",
            &w.root,
            json!({"query": "needle", "maxResults": 7}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert!(r.truncated);
    assert_eq!(r.matches.len(), 7);

    let r: SearchFilesResult = serde_json::from_value(
        run(
            "search_files",
            &w.root,
            json!({"query": "*.tsx", "mode": "name"}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert_eq!(
        r.matches
            .iter()
            .map(|m| m.path.as_str())
            .collect::<Vec<_>>(),
        vec!["src/Widget.tsx"]
    );
    assert_eq!(r.matches[0].line, None);
    let r: SearchFilesResult = serde_json::from_value(
        run(
            "search_files",
            &w.root,
            json!({"query": "widget", "mode": "name"}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert_eq!(r.matches.len(), 2);
    let r: SearchFilesResult = serde_json::from_value(
        run(
            "search_files",
            &w.root,
            json!({"query": "f0", "mode": "name", "maxResults": 3}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert!(r.truncated && r.matches.len() == 3);
}

#[tokio::test]
async fn search_rejects_bad_input() {
    let w = ws();
    put(&w.root, "a.txt", "x");
    assert_eq!(
        code(run("search_files", &w.root, json!({"query": ""})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("search_files", &w.root, json!({})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "search_files",
                &w.root,
                json!({"query": "(", "regex": true})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "search_files",
                &w.root,
                json!({"query": "x", "mode": "fuzzy"})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "search_files",
                &w.root,
                json!({"query": "x", "maxResults": 0})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "search_files",
                &w.root,
                json!({"query": "x", "contextLines": 1000})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("search_files", &w.root, json!({"query": "x", "glob": "a{"})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "search_files",
                &w.root,
                json!({"query": "x", "path": "../outside"})
            )
            .await
        ),
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(
        code(
            run(
                "search_files",
                &w.root,
                json!({"query": "x", "path": "nope"})
            )
            .await
        ),
        ErrorCode::ToolExecutionFailed
    );
}

// ---------------------------------------------------------------- edit_file

#[tokio::test]
async fn edit_file_replaces_exactly_and_reports_a_real_diff() {
    let w = ws();
    put(&w.root, "a.rs", "fn a() {\n    1\n}\nfn b() {\n    2\n}\n");
    std::fs::set_permissions(w.root.join("a.rs"), std::fs::Permissions::from_mode(0o751))
        .expect("chmod");
    let r: FileChangeResult = serde_json::from_value(
        run("edit_file", &w.root, json!({"path": "a.rs", "edits": [{"oldText": "    1\n", "newText": "    10\n    11\n"}, {"oldText": "fn b", "newText": "fn bee"}]})).await.expect("ok"),
    )
    .expect("shape");
    assert_eq!(
        std::fs::read_to_string(w.root.join("a.rs")).expect("read"),
        "fn a() {\n    10\n    11\n}\nfn bee() {\n    2\n}\n"
    );
    assert_eq!(
        (r.stats.added, r.stats.removed, r.replacements, r.created),
        (3, 2, 2, false)
    );
    assert!(r.diff.starts_with("--- a/a.rs\n+++ b/a.rs\n"), "{}", r.diff);
    assert!(r.diff.contains("-    1\n+    10\n+    11\n"), "{}", r.diff);
    let mode = std::fs::metadata(w.root.join("a.rs"))
        .expect("meta")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o751, "permissions are kept");
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(&w.root)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[tokio::test]
async fn edit_file_keeps_crlf_and_supports_replace_all() {
    let w = ws();
    put(&w.root, "win.txt", "a\r\nb\r\na\r\n");
    run(
        "edit_file",
        &w.root,
        json!({"path": "win.txt", "edits": [{"oldText": "b\n", "newText": "c\nd\n"}]}),
    )
    .await
    .expect("ok");
    assert_eq!(
        std::fs::read(w.root.join("win.txt")).expect("read"),
        b"a\r\nc\r\nd\r\na\r\n"
    );
    let r: FileChangeResult = serde_json::from_value(run("edit_file", &w.root, json!({"path": "win.txt", "edits": [{"oldText": "a", "newText": "z", "replaceAll": true}]})).await.expect("ok")).expect("shape");
    assert_eq!(r.replacements, 2);
    assert_eq!(
        std::fs::read(w.root.join("win.txt")).expect("read"),
        b"z\r\nc\r\nd\r\nz\r\n"
    );
}

#[tokio::test]
async fn edit_file_is_all_or_nothing_and_rejects_bad_input() {
    let w = ws();
    let original = "x\nx\ny\n";
    put(&w.root, "f.txt", original);
    put(&w.root, "bin", b"a\0b");
    let e = run(
        "edit_file",
        &w.root,
        json!({"path": "f.txt", "edits": [{"oldText": "x", "newText": "z"}]}),
    )
    .await
    .expect_err("ambiguous");
    assert!(e.message.contains("matches 2 times"), "{}", e.message);
    let e = run("edit_file", &w.root, json!({"path": "f.txt", "edits": [{"oldText": "y", "newText": "Y"}, {"oldText": "nope", "newText": "z"}]})).await.expect_err("second fails");
    assert_eq!(e.details["edit"], 1);
    assert_eq!(
        std::fs::read_to_string(w.root.join("f.txt")).expect("read"),
        original,
        "nothing applied"
    );
    assert_eq!(
        code(run("edit_file", &w.root, json!({"path": "f.txt", "edits": []})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "edit_file",
                &w.root,
                json!({"path": "f.txt", "edits": [{"oldText": "", "newText": "z"}]})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("edit_file", &w.root, json!({"path": "f.txt"})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "edit_file",
                &w.root,
                json!({"path": "f.txt", "edits": [{"oldText": "y"}]})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("edit_file", &w.root, json!({"path": "f.txt", "edits": "y"})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "edit_file",
                &w.root,
                json!({"path": "missing", "edits": [{"oldText": "y", "newText": "z"}]})
            )
            .await
        ),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(
            run(
                "edit_file",
                &w.root,
                json!({"path": "bin", "edits": [{"oldText": "a", "newText": "z"}]})
            )
            .await
        ),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(code(run("edit_file", &w.root, json!({"path": "../outside/secret.txt", "edits": [{"oldText": "secret", "newText": "pwned"}]})).await), ErrorCode::PathOutsideWorkspace);
    std::os::unix::fs::symlink(w.outside.join("secret.txt"), w.root.join("sneaky"))
        .expect("symlink");
    assert_eq!(
        code(
            run(
                "edit_file",
                &w.root,
                json!({"path": "sneaky", "edits": [{"oldText": "secret", "newText": "pwned"}]})
            )
            .await
        ),
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(
        std::fs::read_to_string(w.outside.join("secret.txt")).expect("read"),
        "secret\n"
    );
    // Even an elevated context never writes outside.
    let e = tool("edit_file")
        .run(
            json!({"path": "sneaky", "edits": [{"oldText": "secret", "newText": "pwned"}]}),
            ctx(&w.root, true),
        )
        .await
        .expect_err("outside");
    assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
}

// ---------------------------------------------------------------- write_file

#[tokio::test]
async fn write_file_creates_and_overwrites_atomically() {
    let w = ws();
    let r: FileChangeResult = serde_json::from_value(
        run(
            "write_file",
            &w.root,
            json!({"path": "docs/plans/new.md", "content": "# title\nbody\n"}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert!(r.created);
    assert_eq!((r.stats.added, r.stats.removed), (2, 0));
    assert_eq!(
        std::fs::read_to_string(w.root.join("docs/plans/new.md")).expect("read"),
        "# title\nbody\n"
    );
    std::fs::set_permissions(
        w.root.join("docs/plans/new.md"),
        std::fs::Permissions::from_mode(0o640),
    )
    .expect("chmod");
    let r: FileChangeResult = serde_json::from_value(
        run(
            "write_file",
            &w.root,
            json!({"path": "docs/plans/new.md", "content": "# title\nnew body\n"}),
        )
        .await
        .expect("ok"),
    )
    .expect("shape");
    assert!(!r.created);
    assert!(r.diff.contains("-body\n+new body\n"), "{}", r.diff);
    assert_eq!(
        std::fs::metadata(w.root.join("docs/plans/new.md"))
            .expect("meta")
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
}

#[tokio::test]
async fn write_file_never_leaves_the_workspace() {
    let w = ws();
    std::os::unix::fs::symlink(&w.outside, w.root.join("out")).expect("symlink");
    std::os::unix::fs::symlink(w.outside.join("new.txt"), w.root.join("dangling"))
        .expect("symlink");
    for p in [
        "../evil.txt",
        "out/evil.txt",
        "out/secret.txt",
        "dangling",
        "out/sub/dir/evil.txt",
    ] {
        let e = run(
            "write_file",
            &w.root,
            json!({"path": p, "content": "pwned"}),
        )
        .await
        .expect_err(p);
        assert_eq!(e.code, ErrorCode::PathOutsideWorkspace, "{p}");
    }
    let names: Vec<_> = std::fs::read_dir(&w.outside)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "nothing created outside: {names:?}");
    std::fs::create_dir_all(w.root.join("adir")).expect("mkdir");
    assert_eq!(
        code(
            run(
                "write_file",
                &w.root,
                json!({"path": "adir", "content": "x"})
            )
            .await
        ),
        ErrorCode::ToolExecutionFailed
    );
    assert_eq!(
        code(run("write_file", &w.root, json!({"path": "a.txt"})).await),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(
            run(
                "write_file",
                &w.root,
                json!({"path": "a.txt", "content": 3})
            )
            .await
        ),
        ErrorCode::ToolArgumentsInvalid
    );
    assert_eq!(
        code(run("write_file", &w.root, json!({"path": "", "content": "x"})).await),
        ErrorCode::ToolArgumentsInvalid
    );
}

#[tokio::test]
async fn a_cancelled_read_returns_interrupted() {
    let w = ws();
    put(&w.root, "a.txt", "x\n");
    let c = ctx(&w.root, false);
    c.cancel.cancel();
    let e = tool("search_files")
        .run(json!({"query": "x"}), c.clone())
        .await
        .expect_err("cancelled");
    assert_eq!(e.code, ErrorCode::Interrupted);
}
