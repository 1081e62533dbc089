//! search_files.

use super::*;

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
