//! `keel policy check` and `keel tool` through the real binary.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn keel(args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .expect("run keel");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "exactly one JSON line on stdout, got: {stdout:?}"
    );
    let v: Value =
        serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("src")).expect("mkdir");
    std::fs::write(dir.path().join("src/a.rs"), "fn a() {}\n").expect("write");
    dir
}

fn ws(dir: &tempfile::TempDir) -> &str {
    dir.path().to_str().expect("utf-8 temp path")
}

#[test]
fn policy_check_prints_the_verdict() {
    let dir = workspace();
    let (code, v, _) = keel(&[
        "policy",
        "check",
        "run_shell",
        r#"{"command":"npm run test:unit"}"#,
        "--workspace",
        ws(&dir),
    ]);
    assert_eq!(code, 0);
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["level"], "execute");
    assert_eq!(v["riskLevel"], "low");
    assert_eq!(v["actionType"], "shell.execute");
    assert_eq!(
        v["scope"],
        serde_json::json!(["process:spawn", "filesystem:workspace"])
    );
    assert!(v["reason"].as_str().is_some_and(|r| !r.is_empty()));
    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    assert_eq!(keys.len(), 6, "{keys:?}");

    let (code, v, _) = keel(&[
        "policy",
        "check",
        "run_shell",
        r#"{"command":"rm -rf /"}"#,
        "--workspace",
        ws(&dir),
        "--mode",
        "auto",
    ]);
    assert_eq!((code, v["decision"].as_str()), (0, Some("deny")));

    let (code, v, _) = keel(&[
        "policy",
        "check",
        "write_file",
        r#"{"path":"src/b.rs","content":"x"}"#,
        "--workspace",
        ws(&dir),
        "--mode",
        "auto-edit",
    ]);
    assert_eq!((code, v["decision"].as_str()), (0, Some("allow")));
    let (_, v, _) = keel(&[
        "policy",
        "check",
        "write_file",
        r#"{"path":"src/b.rs","content":"x"}"#,
        "--workspace",
        ws(&dir),
        "--mode",
        "plan",
    ]);
    assert_eq!(v["decision"], "deny");
    let (_, v, _) = keel(&[
        "policy",
        "check",
        "read_file",
        r#"{"path":"/etc/hostname"}"#,
        "--workspace",
        ws(&dir),
    ]);
    assert_eq!(
        (
            v["decision"].as_str(),
            v["level"].as_str(),
            v["riskLevel"].as_str()
        ),
        (Some("ask"), Some("elevated"), Some("high"))
    );
}

#[test]
fn policy_check_rejects_bad_input_with_exit_2() {
    let dir = workspace();
    let w = ws(&dir);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["policy", "check", "frobnicate", "{}", "--workspace", w],
            "TOOL_NOT_REGISTERED",
        ),
        (
            vec![
                "policy",
                "check",
                "read_file",
                "{not json",
                "--workspace",
                w,
            ],
            "REQUEST_INVALID",
        ),
        (
            vec!["policy", "check", "read_file", "[1]", "--workspace", w],
            "REQUEST_INVALID",
        ),
        (
            vec![
                "policy",
                "check",
                "read_file",
                r#"{"path":"a"}"#,
                "--workspace",
                w,
                "--mode",
                "yolo",
            ],
            "REQUEST_INVALID",
        ),
        (
            vec!["policy", "check", "read_file", r#"{"path":"a"}"#],
            "REQUEST_INVALID",
        ),
        (
            vec![
                "policy",
                "check",
                "read_file",
                r#"{"path":"a"}"#,
                "--workspace",
                "/nonexistent/keel/ws",
            ],
            "REQUEST_INVALID",
        ),
        (
            vec![
                "policy",
                "check",
                "read_file",
                r#"{"path":"a"}"#,
                "--workspace",
            ],
            "REQUEST_INVALID",
        ),
        (vec!["policy", "check", "read_file"], "REQUEST_INVALID"),
        (vec!["policy", "explain"], "REQUEST_INVALID"),
        (
            vec![
                "policy",
                "check",
                "read_file",
                "{}",
                "--workspace",
                w,
                "--bogus",
            ],
            "REQUEST_INVALID",
        ),
    ];
    for (args, want) in cases {
        let (code, v, _) = keel(&args);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(v["ok"], false, "{args:?}");
        assert_eq!(v["error"]["code"], want, "{args:?}: {v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
}

/// The workspace (and `policy check`'s mode) may come before the command's name; the
/// errors stay one JSON object on stdout, naming the field.
#[test]
fn the_workspace_may_come_before_the_command() {
    let dir = workspace();
    let w = ws(&dir);
    let (code, v, _) = keel(&["-w", w, "tool", "read_file", r#"{"path":"src/a.rs"}"#]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["result"]["content"], "fn a() {}\n");
    let (code, v, _) = keel(&[
        "--workspace",
        w,
        "--mode",
        "plan",
        "policy",
        "check",
        "write_file",
        r#"{"path":"src/a.rs","content":"x"}"#,
    ]);
    assert_eq!((code, v["decision"].as_str()), (0, Some("deny")), "{v}");
    for (args, field) in [
        (vec!["tool", "read_file", "{}"], Some("workspace")),
        (
            vec!["--mode", "plan", "-w", w, "tool", "read_file", "{}"],
            None,
        ),
        (
            vec!["-w", "/elsewhere", "tool", "read_file", "{}", "-w", w],
            None,
        ),
    ] {
        let (code, v, _) = keel(&args);
        assert_eq!(code, 2, "{args:?}");
        assert_eq!(v["error"]["code"], "REQUEST_INVALID", "{args:?}: {v}");
        assert_eq!(
            v["error"]["details"]["field"].as_str(),
            field,
            "{args:?}: {v}"
        );
    }
}

#[test]
fn tool_runs_allowed_calls_and_refuses_what_needs_approval() {
    let dir = workspace();
    let w = ws(&dir);
    let (code, v, _) = keel(&[
        "tool",
        "read_file",
        r#"{"path":"src/a.rs"}"#,
        "--workspace",
        w,
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ok"], true);
    assert_eq!(v["result"]["content"], "fn a() {}\n");

    let (code, v, _) = keel(&[
        "tool",
        "search_files",
        r#"{"query":"fn a"}"#,
        "--workspace",
        w,
    ]);
    assert_eq!(code, 0);
    assert_eq!(v["result"]["matches"][0]["path"], "src/a.rs");

    let (code, v, _) = keel(&[
        "tool",
        "run_shell",
        r#"{"command":"ls src"}"#,
        "--workspace",
        w,
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["result"]["stdout"], "a.rs\n");
    assert_eq!(v["result"]["exitCode"], 0);

    // Needs approval: refused, nothing happens.
    let (code, v, _) = keel(&[
        "tool",
        "write_file",
        r#"{"path":"src/b.rs","content":"x"}"#,
        "--workspace",
        w,
    ]);
    assert_ne!(code, 0);
    assert_eq!(
        (v["ok"].as_bool(), v["error"]["code"].as_str()),
        (Some(false), Some("TOOL_PERMISSION_DENIED"))
    );
    assert!(!Path::new(w).join("src/b.rs").exists());
    let (code, v, _) = keel(&[
        "tool",
        "run_shell",
        r#"{"command":"touch made.txt"}"#,
        "--workspace",
        w,
    ]);
    assert_ne!(code, 0);
    assert_eq!(v["error"]["code"], "TOOL_PERMISSION_DENIED");
    assert!(!Path::new(w).join("made.txt").exists());
    let (_, v, _) = keel(&["tool", "read_file", r#"{"path":"../x"}"#, "--workspace", w]);
    assert_eq!(v["error"]["code"], "TOOL_PERMISSION_DENIED");
    let (_, v, _) = keel(&[
        "tool",
        "write_file",
        r#"{"path":"../x","content":"x"}"#,
        "--workspace",
        w,
    ]);
    assert_eq!(v["error"]["code"], "PATH_OUTSIDE_WORKSPACE");

    // The tool's own errors come back structured.
    let (code, v, _) = keel(&[
        "tool",
        "read_file",
        r#"{"path":"missing.rs"}"#,
        "--workspace",
        w,
    ]);
    assert_ne!(code, 0);
    assert_eq!(v["error"]["code"], "TOOL_EXECUTION_FAILED");
    let (code, v, _) = keel(&["tool", "read_file", r#"{"nope":1}"#, "--workspace", w]);
    assert_ne!(code, 0);
    assert_eq!(v["error"]["code"], "TOOL_ARGUMENTS_INVALID");
    let (code, v, _) = keel(&["tool", "nope", "{}", "--workspace", w]);
    assert_eq!(code, 2);
    assert_eq!(v["error"]["code"], "TOOL_NOT_REGISTERED");
}
