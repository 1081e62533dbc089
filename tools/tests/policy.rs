//! The gate's decision: modes, precedence (default-deny > plan > deny rules > auto >
//! allow rules > ask), rules, canonical keys and previews.

use std::collections::BTreeSet;
use std::path::PathBuf;

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionLevel, PermissionMode, RiskLevel};
use keel_envelope::ErrorCode;
use keel_tools::policy::{decide, decide_with_spec, DecisionInput, Rules, ShellPolicy, Verdict};
use keel_tools::{ApprovalRequirement, PlanBehavior, ToolSpec};
use serde_json::{json, Value};

use PermissionMode::{Ask, Auto, AutoEdit, Plan};

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = std::fs::canonicalize(dir.path())
        .expect("canonical")
        .join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::create_dir_all(ws.join("docs")).expect("mkdir");
    std::fs::write(ws.join("src/a.rs"), "fn a() {\n    1\n}\n").expect("write");
    (dir, ws)
}

fn rules(allow: &[&str], deny: &[&str], session: &[&str]) -> Rules {
    Rules {
        allow: allow.iter().map(|s| (*s).to_owned()).collect(),
        deny: deny.iter().map(|s| (*s).to_owned()).collect(),
        session_keys: session
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<BTreeSet<_>>(),
    }
}

fn d(ws: &PathBuf, tool: &str, args: Value, mode: PermissionMode, rules: &Rules) -> Verdict {
    let shell = ShellPolicy::default();
    decide(&DecisionInput {
        tool,
        args: &args,
        mode,
        rules,
        workspace: ws,
        roots: keel_tools::jail::Roots::none(),
        shell: &shell,
    })
}

fn none() -> Rules {
    Rules::default()
}

#[test]
fn reads_and_read_only_git_are_allowed_in_every_mode() {
    let (_t, ws) = workspace();
    for mode in PermissionMode::ALL {
        for (tool, args) in [
            ("read_file", json!({"path": "src/a.rs"})),
            ("list_dir", json!({"path": "src"})),
            ("search_files", json!({"query": "x"})),
            ("git", json!({"command": "status"})),
            ("git", json!({"command": "log", "args": ["--oneline"]})),
            ("git", json!({"command": "diff"})),
        ] {
            let v = d(&ws, tool, args.clone(), mode.clone(), &none());
            assert_eq!(
                v.verdict.decision,
                Decision::Allow,
                "{tool} {args} in {}",
                mode.as_str()
            );
            assert_eq!(v.verdict.risk_level, RiskLevel::Low);
        }
    }
}

#[test]
fn modes_for_edits_writes_shell_and_git() {
    let (_t, ws) = workspace();
    let edit = json!({"path": "src/a.rs", "edits": [{"oldText": "1", "newText": "2"}]});
    let write = json!({"path": "docs/new.md", "content": "x"});
    let shell = json!({"command": "make"});
    let commit = json!({"command": "commit", "args": ["-m", "x"]});
    let table = [
        (
            Ask,
            [Decision::Ask, Decision::Ask, Decision::Ask, Decision::Ask],
        ),
        (
            AutoEdit,
            [
                Decision::Allow,
                Decision::Allow,
                Decision::Ask,
                Decision::Ask,
            ],
        ),
        (
            Auto,
            [
                Decision::Allow,
                Decision::Allow,
                Decision::Allow,
                Decision::Allow,
            ],
        ),
        (
            Plan,
            [
                Decision::Deny,
                Decision::Deny,
                Decision::Deny,
                Decision::Deny,
            ],
        ),
    ];
    for (mode, want) in table {
        let got = [
            d(&ws, "edit_file", edit.clone(), mode.clone(), &none()),
            d(&ws, "write_file", write.clone(), mode.clone(), &none()),
            d(&ws, "run_shell", shell.clone(), mode.clone(), &none()),
            d(&ws, "git", commit.clone(), mode.clone(), &none()),
        ];
        for (g, w) in got.iter().zip(want) {
            assert_eq!(
                g.verdict.decision,
                w,
                "{} in {}: {}",
                g.verdict.action_type,
                mode.as_str(),
                g.verdict.reason
            );
            if mode == Plan {
                assert_eq!(g.deny_code, Some(ErrorCode::PlanApprovalRequired));
                assert!(
                    g.verdict.reason.contains("Propose a plan"),
                    "{}",
                    g.verdict.reason
                );
            }
        }
    }
}

#[test]
fn precedence_default_deny_beats_everything() {
    let (_t, ws) = workspace();
    let all = rules(&["run_shell", "write_file"], &[], &[]);
    for mode in PermissionMode::ALL {
        let v = d(
            &ws,
            "run_shell",
            json!({"command": "rm -rf /"}),
            mode.clone(),
            &all,
        );
        assert_eq!(
            (v.verdict.decision, v.deny_code),
            (Decision::Deny, Some(ErrorCode::ToolPermissionDenied)),
            "{}",
            mode.as_str()
        );
        let v = d(
            &ws,
            "write_file",
            json!({"path": "../x", "content": "x"}),
            mode.clone(),
            &all,
        );
        assert_eq!(
            (v.verdict.decision, v.deny_code),
            (Decision::Deny, Some(ErrorCode::PathOutsideWorkspace))
        );
    }
    // Even the exact session key does not help.
    let key = keel_tools::canonical_key("run_shell", &json!({"command": "rm -rf ~"}), &ws);
    let v = d(
        &ws,
        "run_shell",
        json!({"command": "rm -rf ~"}),
        Auto,
        &rules(&[], &[], &[&key]),
    );
    assert_eq!(v.verdict.decision, Decision::Deny);
}

#[test]
fn precedence_plan_beats_rules_and_session_keys() {
    let (_t, ws) = workspace();
    let args = json!({"command": "cargo test"});
    let key = keel_tools::canonical_key("run_shell", &args, &ws);
    let v = d(
        &ws,
        "run_shell",
        args,
        Plan,
        &rules(&["run_shell"], &[], &[&key]),
    );
    assert_eq!(
        (v.verdict.decision, v.deny_code),
        (Decision::Deny, Some(ErrorCode::PlanApprovalRequired))
    );
    let v = d(
        &ws,
        "git",
        json!({"command": "commit"}),
        Plan,
        &rules(&["git"], &[], &[]),
    );
    assert_eq!(v.deny_code, Some(ErrorCode::PlanApprovalRequired));
}

#[test]
fn precedence_deny_rules_beat_auto_mode_allow_rules_and_low_risk() {
    let (_t, ws) = workspace();
    let r = rules(
        &["run_shell(npm *)"],
        &[
            "run_shell(npm publish*)",
            "read_file(secrets/**)",
            "git(push*)",
        ],
        &[],
    );
    let v = d(
        &ws,
        "run_shell",
        json!({"command": "ls && npm publish --tag x"}),
        Auto,
        &r,
    );
    assert_eq!(
        (v.verdict.decision, v.deny_code),
        (Decision::Deny, Some(ErrorCode::ToolPermissionDenied))
    );
    assert!(
        v.verdict.reason.contains("npm publish*"),
        "{}",
        v.verdict.reason
    );
    // Hidden inside a substitution or a `sh -c` script, still denied.
    for cmd in [
        "echo $(npm publish)",
        "bash -c 'npm publish'",
        "FOO=1 npm publish",
        "find . | xargs npm publish",
    ] {
        let v = d(&ws, "run_shell", json!({ "command": cmd }), Ask, &r);
        assert_eq!(v.verdict.decision, Decision::Deny, "{cmd}");
    }
    let v = d(
        &ws,
        "read_file",
        json!({"path": "secrets/key.pem"}),
        Ask,
        &r,
    );
    assert_eq!(
        v.verdict.decision,
        Decision::Deny,
        "a deny rule beats the read auto-allow"
    );
    let v = d(
        &ws,
        "git",
        json!({"command": "push", "args": ["origin", "main"]}),
        Auto,
        &rules(&["git"], &["git(push*)"], &[]),
    );
    assert_eq!(v.verdict.decision, Decision::Deny);
}

#[test]
fn auto_mode_denies_unapproved_elevated_calls_unless_a_rule_or_session_allows() {
    let (_t, ws) = workspace();
    for (tool, args) in [
        (
            "run_shell",
            json!({"command": "curl https://example.com/x.sh"}),
        ),
        ("run_shell", json!({"command": "sudo make install"})),
        ("git", json!({"command": "push"})),
        (
            "git",
            json!({"command": "reset", "args": ["--hard", "HEAD~3"]}),
        ),
        ("git", json!({"command": "clean", "args": ["-fdx"]})),
    ] {
        let v = d(&ws, tool, args.clone(), Auto, &none());
        assert_eq!(v.verdict.decision, Decision::Deny, "{args}");
        assert_eq!(v.verdict.level, PermissionLevel::Elevated);
        let v = d(&ws, tool, args.clone(), Ask, &none());
        assert_eq!(v.verdict.decision, Decision::Ask, "{args}");
        assert!(v.elevated);
        let key = keel_tools::canonical_key(tool, &args, &ws);
        let v = d(&ws, tool, args.clone(), Auto, &rules(&[], &[], &[&key]));
        assert_eq!(v.verdict.decision, Decision::Allow, "session key {key}");
        assert!(v.elevated);
    }
    let v = d(
        &ws,
        "git",
        json!({"command": "push", "args": ["origin", "main"]}),
        Auto,
        &rules(&["git(push origin *)"], &[], &[]),
    );
    assert_eq!(v.verdict.decision, Decision::Allow);
    assert!(v.verdict.scope.contains(&"network".to_owned()));
}

#[test]
fn allow_rules_cover_every_part_or_nothing() {
    let (_t, ws) = workspace();
    let r = rules(&["run_shell(npm run deploy*)", "run_shell(make)"], &[], &[]);
    let cases = [
        ("npm run deploy:staging", Decision::Allow),
        ("make", Decision::Allow),
        ("make all", Decision::Ask),
        ("npm run deploy && cat x", Decision::Allow),
        ("npm run deploy && rm -rf build", Decision::Ask),
        ("npm run deploy > out.txt", Decision::Ask),
        ("npm run deploy $(whoami)", Decision::Ask),
        ("(npm run deploy)", Decision::Ask),
        ("npm run deploy; curl x", Decision::Ask),
        ("PATH=/tmp npm run deploy", Decision::Ask),
        ("FOO=1 npm run deploy", Decision::Allow),
    ];
    for (cmd, want) in cases {
        let v = d(&ws, "run_shell", json!({ "command": cmd }), Ask, &r);
        assert_eq!(v.verdict.decision, want, "{cmd}: {}", v.verdict.reason);
    }
    // File rules are globs on the workspace-relative path and never cover outside paths.
    let r = rules(&["edit_file(src/**)", "read_file"], &[], &[]);
    let edit = |p: &str| json!({"path": p, "edits": [{"oldText": "1", "newText": "2"}]});
    assert_eq!(
        d(&ws, "edit_file", edit("./src/a.rs"), Ask, &r)
            .verdict
            .decision,
        Decision::Allow
    );
    assert_eq!(
        d(&ws, "edit_file", edit("docs/a.md"), Ask, &r)
            .verdict
            .decision,
        Decision::Ask
    );
    assert_eq!(
        d(&ws, "read_file", json!({"path": "/etc/hosts"}), Ask, &r)
            .verdict
            .decision,
        Decision::Ask
    );
}

#[test]
fn session_keys_are_canonical() {
    let (_t, ws) = workspace();
    let key = keel_tools::canonical_key(
        "run_shell",
        &json!({"command": "FOO=1 make 'build all'"}),
        &ws,
    );
    let r = rules(&[], &[], &[&key]);
    for cmd in [
        "make \"build all\"",
        "BAR=2 make 'build all'",
        "bash -lc \"make 'build all'\"",
        "make   build\\ all",
    ] {
        assert_eq!(
            d(&ws, "run_shell", json!({ "command": cmd }), Ask, &r)
                .verdict
                .decision,
            Decision::Allow,
            "{cmd}"
        );
    }
    assert_eq!(
        d(
            &ws,
            "run_shell",
            json!({"command": "make 'build all' && rm x"}),
            Ask,
            &r
        )
        .verdict
        .decision,
        Decision::Ask
    );
    // A different cwd is a different key.
    assert_eq!(
        d(
            &ws,
            "run_shell",
            json!({"command": "make 'build all'", "cwd": "src"}),
            Ask,
            &r
        )
        .verdict
        .decision,
        Decision::Ask
    );

    let k1 = keel_tools::canonical_key(
        "edit_file",
        &json!({"path": "./src/a.rs", "edits": []}),
        &ws,
    );
    let k2 = keel_tools::canonical_key(
        "edit_file",
        &json!({"path": "src/../src/a.rs", "edits": []}),
        &ws,
    );
    let k3 = keel_tools::canonical_key(
        "edit_file",
        &json!({"path": ws.join("src/a.rs"), "edits": []}),
        &ws,
    );
    assert_eq!(k1, k2);
    assert_eq!(k1, k3);
    assert_ne!(
        k1,
        keel_tools::canonical_key(
            "write_file",
            &json!({"path": "src/a.rs", "content": ""}),
            &ws
        )
    );
}

#[test]
fn previews_show_the_command_and_real_diffs() {
    let (_t, ws) = workspace();
    let v = d(
        &ws,
        "edit_file",
        json!({"path": "src/a.rs", "edits": [{"oldText": "    1\n", "newText": "    2\n"}]}),
        Ask,
        &none(),
    );
    assert!(
        v.preview.contains("--- a/src/a.rs") && v.preview.contains("-    1\n+    2\n"),
        "{}",
        v.preview
    );
    assert_eq!(v.verdict.risk_level, RiskLevel::Medium);
    assert_eq!(
        std::fs::read_to_string(ws.join("src/a.rs")).expect("read"),
        "fn a() {\n    1\n}\n",
        "the decision does not write"
    );

    let v = d(
        &ws,
        "write_file",
        json!({"path": "src/a.rs", "content": "fn a() {\n    3\n}\n"}),
        Ask,
        &none(),
    );
    assert_eq!(
        (v.verdict.risk_level, v.verdict.action_type.as_str()),
        (RiskLevel::High, "file.overwrite")
    );
    assert!(v.preview.contains("-    1\n+    3\n"), "{}", v.preview);
    // Over a file too large to show a diff of, the preview says so (the file is not
    // read whole; this one is sparse, 8 GiB long).
    std::fs::File::create(ws.join("huge.bin"))
        .and_then(|f| f.set_len(8 << 30))
        .expect("sparse file");
    let v = d(
        &ws,
        "write_file",
        json!({"path": "huge.bin", "content": "small\n"}),
        Ask,
        &none(),
    );
    assert_eq!(v.verdict.action_type, "file.overwrite");
    assert!(
        v.preview
            .starts_with("(no preview: the existing `huge.bin` was not read: it is larger than"),
        "{}",
        v.preview
    );
    let v = d(
        &ws,
        "write_file",
        json!({"path": "src/new.rs", "content": "x\n"}),
        Ask,
        &none(),
    );
    assert_eq!(v.verdict.risk_level, RiskLevel::Medium);
    assert!(v.preview.contains("+x"));

    let v = d(
        &ws,
        "run_shell",
        json!({"command": "cargo   test"}),
        Ask,
        &none(),
    );
    assert_eq!(v.command.as_deref(), Some("cargo   test"));
    assert_eq!(v.preview, "cargo   test");
    assert_eq!(
        v.verdict.scope,
        vec![
            "process:spawn".to_owned(),
            "filesystem:workspace".to_owned()
        ]
    );
    let v = d(
        &ws,
        "git",
        json!({"command": "commit", "args": ["-m", "a b"]}),
        Ask,
        &none(),
    );
    assert_eq!(v.command.as_deref(), Some("git commit -m 'a b'"));
}

#[test]
fn writes_into_git_metadata_always_ask() {
    let (_t, ws) = workspace();
    std::fs::create_dir_all(ws.join(".git")).expect("mkdir");
    let v = d(
        &ws,
        "write_file",
        json!({"path": ".git/hooks/pre-commit", "content": "x"}),
        AutoEdit,
        &none(),
    );
    assert_eq!(v.verdict.decision, Decision::Ask);
    assert_eq!(v.verdict.risk_level, RiskLevel::High);
}

#[test]
fn bad_arguments_and_unknown_tools() {
    let (_t, ws) = workspace();
    for (tool, args) in [
        ("read_file", json!({})),
        ("run_shell", json!({"command": 1})),
        ("git", json!({"command": "-c"})),
        ("edit_file", json!({"path": "a"})),
    ] {
        let v = d(&ws, tool, args.clone(), Auto, &none());
        assert_eq!(
            (v.verdict.decision, v.deny_code),
            (Decision::Deny, Some(ErrorCode::ToolArgumentsInvalid)),
            "{tool} {args}"
        );
    }
    let v = d(&ws, "browser_click", json!({"x": 1}), Ask, &none());
    assert_eq!(v.verdict.decision, Decision::Ask);
    let v = d(&ws, "browser_click", json!({"x": 1}), Plan, &none());
    assert_eq!(v.verdict.decision, Decision::Deny);

    // A host tool declares the same metadata.
    let spec = ToolSpec::custom(
        "lookup",
        "Look a word up.",
        json!({"type": "object"}),
        PermissionLevel::Read,
        PlanBehavior::Allowed,
        ApprovalRequirement::Never,
    );
    let shell = ShellPolicy::default();
    let r = none();
    let args = json!({"word": "x"});
    for mode in PermissionMode::ALL {
        let v = decide_with_spec(
            &DecisionInput {
                tool: "lookup",
                args: &args,
                mode: mode.clone(),
                rules: &r,
                workspace: &ws,
                roots: keel_tools::jail::Roots::none(),
                shell: &shell,
            },
            Some(&spec),
        );
        assert_eq!(v.verdict.decision, Decision::Allow, "{}", mode.as_str());
    }
    let spec = ToolSpec::custom(
        "deploy",
        "Deploy.",
        json!({"type": "object"}),
        PermissionLevel::Elevated,
        PlanBehavior::Denied,
        ApprovalRequirement::Always,
    );
    let v = decide_with_spec(
        &DecisionInput {
            tool: "deploy",
            args: &args,
            mode: Ask,
            rules: &r,
            workspace: &ws,
            roots: keel_tools::jail::Roots::none(),
            shell: &shell,
        },
        Some(&spec),
    );
    assert_eq!(
        (v.verdict.decision, v.verdict.level),
        (Decision::Ask, PermissionLevel::Elevated)
    );
    let v = decide_with_spec(
        &DecisionInput {
            tool: "deploy",
            args: &args,
            mode: Auto,
            rules: &r,
            workspace: &ws,
            roots: keel_tools::jail::Roots::none(),
            shell: &shell,
        },
        Some(&spec),
    );
    assert_eq!(v.verdict.decision, Decision::Deny);
}

#[test]
fn deeply_nested_or_huge_commands_never_crash_and_are_never_allowed() {
    let (_t, ws) = workspace();
    let shallow = format!("echo {}ls{}", "$(".repeat(30), ")".repeat(30));
    let deep = format!("echo {}ls{}", "$(".repeat(5000), ")".repeat(5000));
    let subshells = format!("{}ls{}", "(".repeat(5000), ")".repeat(5000));
    let backticks = format!("echo {}", "`".repeat(1000));
    let huge = format!("echo {}", "a ".repeat(100_000));
    for cmd in [&shallow, &deep, &subshells, &backticks, &huge] {
        for mode in PermissionMode::ALL {
            let v = d(
                &ws,
                "run_shell",
                json!({ "command": cmd }),
                mode.clone(),
                &none(),
            );
            assert_ne!(
                v.verdict.decision,
                Decision::Allow,
                "{} chars in {}",
                cmd.len(),
                mode.as_str()
            );
        }
    }
    let v = d(&ws, "run_shell", json!({ "command": deep }), Auto, &none());
    assert!(
        v.verdict.reason.contains("could not be parsed"),
        "{}",
        v.verdict.reason
    );
}

#[test]
fn outside_reads_need_an_approval_even_in_auto_mode() {
    let (_t, ws) = workspace();
    let args = json!({"path": "/etc/hostname"});
    let v = d(&ws, "read_file", args.clone(), Auto, &none());
    assert_eq!(v.verdict.decision, Decision::Deny);
    let key = keel_tools::canonical_key("read_file", &args, &ws);
    let v = d(&ws, "read_file", args, Auto, &rules(&[], &[], &[&key]));
    assert_eq!(v.verdict.decision, Decision::Allow);
    assert!(
        v.elevated,
        "an approved outside read runs with the elevated context"
    );
}

#[test]
fn deny_rules_match_the_canonical_form_wherever_the_command_hides() {
    let (_t, ws) = workspace();
    let key = keel_tools::canonical_key("run_shell", &json!({"command": "rm x"}), &ws);
    // Deny beats an allow rule for the same command, a bare `run_shell` allow rule and
    // the session key of the very same command.
    let r = rules(
        &["run_shell(rm *)", "run_shell"],
        &["run_shell(rm x)"],
        &[&key],
    );
    let hits = [
        "rm x",
        "rm  x",
        "rm 'x'",
        "FOO=1 rm x",
        "env rm x",
        "env FOO=1 rm x",
        "LD_PRELOAD=/tmp/x.so rm x",
        "timeout 5 rm x",
        "nohup rm x",
        "setsid rm x",
        "sudo rm x",
        "xargs rm x",
        "ls && rm x",
        "ls | rm x",
        "(rm x)",
        "echo $(rm x)",
        "bash -c 'rm x'",
        "sh -c \"FOO=1 rm x\"",
        "watch rm x",
        "at now <<< 'rm x'",
        "echo 'rm x' | sh",
        "find . -exec rm x \\;",
        "python3 -c \"import os; os.system('rm x')\"",
    ];
    for cmd in hits {
        for mode in [Ask, AutoEdit, Auto] {
            let v = d(
                &ws,
                "run_shell",
                json!({ "command": cmd }),
                mode.clone(),
                &r,
            );
            assert_eq!(
                (v.verdict.decision, v.deny_code),
                (Decision::Deny, Some(ErrorCode::ToolPermissionDenied)),
                "`{cmd}` in {}: {}",
                mode.as_str(),
                v.verdict.reason
            );
            assert!(
                v.verdict.reason.contains("run_shell(rm x)"),
                "`{cmd}`: {}",
                v.verdict.reason
            );
        }
    }
    // Plan mode refuses first, with its own code.
    let v = d(&ws, "run_shell", json!({"command": "rm x"}), Plan, &r);
    assert_eq!(v.deny_code, Some(ErrorCode::PlanApprovalRequired));
    // Other commands are not caught by the rule and follow the allow rules.
    for cmd in ["rm y", "rm x y", "echo rm x", "ls", "grep 'rm x' a.txt"] {
        let v = d(&ws, "run_shell", json!({ "command": cmd }), Ask, &r);
        assert_eq!(
            v.verdict.decision,
            Decision::Allow,
            "`{cmd}`: {}",
            v.verdict.reason
        );
    }
}

#[test]
fn deny_rules_assume_the_worst_of_computed_words() {
    let (_t, ws) = workspace();
    let r = rules(
        &["run_shell"],
        &["run_shell(rm *)", "run_shell(git push*)"],
        &[],
    );
    for cmd in [
        "rm \"$f\"",
        "rm $(cat list)",
        "$RM x",
        "git $(echo push)",
        "git push $REMOTE",
    ] {
        let v = d(&ws, "run_shell", json!({ "command": cmd }), Auto, &r);
        assert_eq!(
            v.verdict.decision,
            Decision::Deny,
            "`{cmd}`: {}",
            v.verdict.reason
        );
    }
    for cmd in ["git status $X", "ls $HOME", "cat \"$f\""] {
        let v = d(&ws, "run_shell", json!({ "command": cmd }), Auto, &r);
        assert_ne!(
            v.verdict.decision,
            Decision::Deny,
            "`{cmd}`: {}",
            v.verdict.reason
        );
    }
}
