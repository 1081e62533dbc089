//! The path corpus (`tests/data/paths/`) against a session's extra roots: the same
//! escapes (symlinks out, `..`, absolute paths outside, a root given as a symlink)
//! judged by the gate and enforced by the tools, in a `write` root and a `read`
//! root; and the checks of a list of extra roots.

use std::path::Path;

use keel_envelope::tools::Decision;
use keel_envelope::types::PermissionMode;
use keel_envelope::ErrorCode;
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy};
use keel_tools::ToolContext;
use serde_json::json;

#[path = "support/paths.rs"]
mod paths;
use paths::*;

/// How the root under test is given to the session.
#[derive(Debug, Clone, Copy)]
enum RootCase {
    /// A `write` root, by its real path.
    Write,
    /// A `read` root, by its real path.
    Read,
    /// A `write` root given as a symlink to it (the session keeps its target), and
    /// its paths named through the symlink.
    WriteViaSymlink,
}

/// The path corpus against an extra root: the fixture's `ws` is an extra root of a
/// session whose workspace is a sibling `main`. A relative corpus path is named
/// absolutely inside the root (tools name paths in extra roots by absolute path);
/// absolute ones, `~` and the empty path stay as they are. Decisions are the
/// workspace corpus's, except that a `read` root refuses every write with
/// `PATH_OUTSIDE_WORKSPACE` (also a write naming one of its folders). The tools enforce the same: reads outside fail, reads
/// the gate allows never fail with a jail error, writes the gate denies fail, writes
/// it asks for succeed in a `write` root, and nothing outside the root changes.
async fn path_corpus_in_root(case: RootCase) {
    use keel_tools::jail::{extra_roots, Roots};
    let text = data("paths/cases.tsv");
    let fx = path_fixture();
    let base = fx.ws.parent().expect("base").to_path_buf();
    let main = base.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    std::fs::write(main.join("keep.txt"), "keep\n").expect("write");
    let named = match case {
        RootCase::WriteViaSymlink => {
            let link = base.join("root-link");
            std::os::unix::fs::symlink(&fx.ws, &link).expect("symlink");
            link
        }
        _ => fx.ws.clone(),
    };
    let writable = !matches!(case, RootCase::Read);
    let roots: Roots =
        extra_roots(&main, &[(named.to_str().expect("utf-8"), writable)]).expect("a valid root");
    let listed: Vec<_> = roots.iter().map(|r| r.path.clone()).collect();
    assert_eq!(listed, vec![fx.ws.clone()], "the root is kept canonical");
    let prefix = named.to_string_lossy().into_owned();
    let policy = ShellPolicy::default();
    let rules = Rules::default();
    let decide_root = |tool: &str, args: &serde_json::Value, mode: PermissionMode| {
        decide(&DecisionInput {
            tool,
            args,
            mode,
            rules: &rules,
            workspace: &main,
            roots: roots.clone(),
            shell: &policy,
        })
    };
    let ctx = ToolContext {
        roots: roots.clone(),
        ..ctx(&main)
    };
    let tools = keel_tools::builtin_tools();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.spec().name == name)
            .expect("tool")
            .clone()
    };
    let (read_file, write_file) = (tool("read_file"), tool("write_file"));
    let mut mismatches = Vec::new();
    let mut count = 0;
    for (line, cols) in rows(&text) {
        let (op, want, raw) = match cols.as_slice() {
            [op, want, raw] => (op.as_str(), want.as_str(), raw.as_str()),
            [op, want] => (op.as_str(), want.as_str(), ""),
            _ => {
                mismatches.push(format!("line {line}: expected 3 columns"));
                continue;
            }
        };
        count += 1;
        let path = raw
            .replace("{ws}", &prefix)
            .replace("{out}", &fx.out.to_string_lossy())
            .replace("\\0", "\0");
        let path = if path.is_empty() || path.starts_with('/') || path.starts_with('~') {
            path
        } else {
            format!("{prefix}/{path}")
        };
        // A read root refuses a write before looking at what is there (a folder).
        let refused_here =
            want == "ask" || (want == "deny:TOOL_ARGUMENTS_INVALID" && !raw.is_empty());
        let want = if op == "write" && !writable && refused_here {
            "deny:PATH_OUTSIDE_WORKSPACE"
        } else {
            want
        };
        let args = match op {
            "read" => json!({ "path": path }),
            "write" => json!({ "path": path, "content": "x\n" }),
            other => {
                mismatches.push(format!("line {line}: unknown op {other}"));
                continue;
            }
        };
        let tool_name = if op == "read" {
            "read_file"
        } else {
            "write_file"
        };
        let v = decide_root(tool_name, &args, PermissionMode::Ask);
        let got = match &v.verdict.decision {
            Decision::Deny => format!(
                "deny:{}",
                v.deny_code.as_ref().map(|c| c.as_str()).unwrap_or("?")
            ),
            d => decision_str(d).to_owned(),
        };
        if got != want {
            mismatches.push(format!(
                "{case:?} line {line}: {op} `{path:?}`: expected {want}, got {got} ({})",
                v.verdict.reason
            ));
            continue;
        }
        if op == "write" && want == "ask" {
            let auto_edit = decide_root(tool_name, &args, PermissionMode::AutoEdit);
            if auto_edit.verdict.decision != Decision::Allow {
                mismatches.push(format!(
                    "{case:?} line {line}: write `{path}` in a write root should be allowed in auto-edit"
                ));
            }
        }
        if op == "write" && want.starts_with("deny") {
            for mode in PermissionMode::ALL {
                if decide_root(tool_name, &args, mode.clone()).verdict.decision != Decision::Deny {
                    mismatches.push(format!(
                        "{case:?} line {line}: write `{path}` must be denied in {} mode",
                        mode.as_str()
                    ));
                }
            }
        }
        if op == "read" {
            let r = read_file.run(args.clone(), ctx.clone()).await;
            match (want, r) {
                ("allow", Err(e)) if e.code == ErrorCode::PathOutsideWorkspace => {
                    mismatches.push(format!(
                        "{case:?} line {line}: read_file `{path}` refused by the jail: {}",
                        e.message
                    ))
                }
                ("allow", _) => {}
                (_, Ok(v)) => mismatches.push(format!(
                    "{case:?} line {line}: read_file `{path}` succeeded without approval: {v}"
                )),
                (_, Err(e))
                    if matches!(
                        e.code,
                        ErrorCode::PathOutsideWorkspace | ErrorCode::ToolArgumentsInvalid
                    ) => {}
                (_, Err(e)) => mismatches.push(format!(
                    "{case:?} line {line}: read_file `{path}` failed with {} instead of a jail error",
                    e.code
                )),
            }
        }
        if op == "write" {
            // Only writes that would land in the temporary directory are attempted.
            let base_text = base.to_string_lossy();
            let lands_here = (!path.starts_with('/') || path.starts_with(&*base_text))
                && !path.starts_with('~')
                && !path.contains("link_etc");
            if !lands_here {
                continue;
            }
            let r = write_file
                .run(json!({ "path": path, "content": "written\n" }), ctx.clone())
                .await;
            match (want, r) {
                ("ask", Ok(v)) => {
                    // It landed in the root.
                    let shown = v["path"].as_str().unwrap_or_default().to_owned();
                    if !shown.starts_with(&*fx.ws.to_string_lossy()) {
                        mismatches.push(format!(
                            "{case:?} line {line}: write_file `{path}` reported `{shown}`, not an absolute path in the root"
                        ));
                    }
                }
                ("ask", Err(e)) => mismatches.push(format!(
                    "{case:?} line {line}: write_file `{path}` in a write root failed: {} {}",
                    e.code, e.message
                )),
                (_, Ok(v)) => mismatches.push(format!(
                    "{case:?} line {line}: write_file `{path}` succeeded: {v}"
                )),
                (_, Err(e))
                    if matches!(
                        e.code,
                        ErrorCode::PathOutsideWorkspace
                            | ErrorCode::ToolArgumentsInvalid
                            | ErrorCode::ToolExecutionFailed
                    ) =>
                {
                    if !writable
                        && want == "deny:PATH_OUTSIDE_WORKSPACE"
                        && raw_is_plain(raw)
                        && e.code != ErrorCode::PathOutsideWorkspace
                    {
                        mismatches.push(format!(
                            "{case:?} line {line}: write_file `{path}` in a read root failed with {} instead of PATH_OUTSIDE_WORKSPACE",
                            e.code
                        ));
                    }
                }
                (_, Err(e)) => mismatches.push(format!(
                    "{case:?} line {line}: write_file `{path}`: unexpected code {}",
                    e.code
                )),
            }
        }
    }
    let names = |d: &Path| -> Vec<_> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .expect("read dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&fx.out),
        ["secret.txt"],
        "the outside directory changed"
    );
    assert_eq!(
        std::fs::read_to_string(fx.out.join("secret.txt")).expect("secret"),
        "secret\n"
    );
    assert_eq!(
        names(&main),
        ["keep.txt"],
        "the session's workspace changed"
    );
    if !writable {
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("src/a.rs")).expect("a.rs"),
            "fn a() {}\n",
            "a read root was written"
        );
    } else {
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("src/a.rs")).expect("a.rs"),
            "written\n",
            "writes in a write root land there"
        );
    }
    assert!(count >= 100, "the path corpus needs at least 100 cases");
    assert!(
        mismatches.is_empty(),
        "{} path corpus mismatches on an extra root:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// A corpus path with no NUL byte and no special file: a write refused for being in a
/// read root is refused as such, not for another reason first.
fn raw_is_plain(raw: &str) -> bool {
    !raw.contains("\\0") && !raw.contains("fifo") && !raw.contains("loop") && raw != "src"
}

#[tokio::test]
async fn path_corpus_in_a_write_root() {
    path_corpus_in_root(RootCase::Write).await;
}

#[tokio::test]
async fn path_corpus_in_a_read_root() {
    path_corpus_in_root(RootCase::Read).await;
}

#[tokio::test]
async fn path_corpus_in_a_root_given_as_a_symlink() {
    path_corpus_in_root(RootCase::WriteViaSymlink).await;
}

#[test]
fn extra_roots_refuse_bad_lists() {
    use keel_tools::jail::extra_roots;
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let ws = base.join("ws");
    let a = base.join("a");
    for d in [ws.join("inner"), a.join("sub"), base.join("b")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(base.join("file"), "x").expect("write");
    std::os::unix::fs::symlink(&a, base.join("a-link")).expect("symlink");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, usize, &str)> = vec![
        (vec!["relative/dir".into()], 0, "not an absolute path"),
        (vec![String::new()], 0, "empty"),
        (vec![s(&base.join("missing"))], 0, "cannot be used"),
        (vec![s(&base.join("file"))], 0, "not a directory"),
        (vec![s(&a), s(&a)], 1, "given twice"),
        (vec![s(&a), s(&base.join("a-link"))], 1, "given twice"),
        (vec![s(&a), s(&a.join("sub"))], 1, "overlaps"),
        (vec![s(&a.join("sub")), s(&a)], 1, "overlaps"),
        (vec![s(&ws)], 0, "the workspace itself"),
        (vec![s(&ws.join("inner"))], 0, "inside the workspace"),
        (vec![s(&base)], 0, "holds the workspace"),
        (vec!["/".into()], 0, "holds the workspace"),
        (vec![s(&base.join("b")), "a\0b".into()], 1, "NUL"),
    ];
    for (given, index, says) in cases {
        let pairs: Vec<(&str, bool)> = given.iter().map(|p| (p.as_str(), true)).collect();
        let e = extra_roots(&ws, &pairs).expect_err(&format!("{given:?} must be refused"));
        assert_eq!(e.index, index, "{given:?}: {e:?}");
        assert!(e.message.contains(says), "{given:?}: {}", e.message);
    }
    let ok = extra_roots(
        &ws,
        &[
            (&s(&base.join("a-link")), false),
            (&s(&base.join("b")), true),
        ],
    )
    .expect("valid");
    let got: Vec<_> = ok.iter().map(|r| (r.path.clone(), r.writable)).collect();
    assert_eq!(got, vec![(a.clone(), false), (base.join("b"), true)]);
}
