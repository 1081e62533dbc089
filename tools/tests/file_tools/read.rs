//! read_file and list_dir.

use super::*;

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
    assert_eq!(serde_json::to_value(&a.kind).expect("kind"), "file");
    assert_eq!(
        serde_json::to_value(
            r.entries
                .iter()
                .find(|e| e.path == "src")
                .expect("src")
                .kind
                .clone()
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
                .clone()
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
