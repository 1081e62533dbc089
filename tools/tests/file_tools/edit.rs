//! edit_file, write_file and cancellation.

use super::*;

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
