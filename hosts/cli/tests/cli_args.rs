//! The command line through the real binary: help, errors with suggestions, shared
//! flags, completions.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

fn keel(args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .env("KEEL_HOME", home.path())
        // No daemon of the user running these tests is asked (`keel sessions`).
        .env("KEEL_SOCKET", home.path().join("no-daemon.sock"))
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const COMMANDS: &[&str] = &[
    "bridge",
    "acp",
    "exec",
    "demo",
    "sessions",
    "resume",
    "policy",
    "tool",
    "doctor",
    "completions",
];

#[test]
fn help_lists_every_command_with_a_description() {
    let out = keel(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for c in COMMANDS {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{c} ")))
            .unwrap_or_else(|| panic!("{c} is not listed:\n{help}"));
        assert!(
            line.split_whitespace().count() > 2,
            "{c} has no description: {line:?}"
        );
    }
    for flag in [
        "--workspace",
        "--model",
        "--mode",
        "--resume",
        "--log-stderr",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn each_command_has_detailed_help() {
    for c in COMMANDS {
        let a = keel(&["help", c]);
        let b = keel(&[c, "--help"]);
        assert_eq!(a.status.code(), Some(0), "keel help {c}");
        assert_eq!(b.status.code(), Some(0), "keel {c} --help");
        let (a, b) = (text(&a.stdout), text(&b.stdout));
        assert!(a.contains(&format!("Usage: keel {c}")), "{a}");
        assert_eq!(a, b, "`keel help {c}` and `keel {c} --help` differ");
    }
    let exec = text(&keel(&["exec", "--help"]).stdout);
    for flag in ["--json", "--workspace", "--model", "--mode", "130"] {
        assert!(exec.contains(flag), "{flag} missing from:\n{exec}");
    }
}

#[test]
fn version_names_the_binary() {
    let out = keel(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout).trim(),
        format!("keel {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn unknown_flags_and_commands_get_suggestions_and_exit_2() {
    let out = keel(&["exec", "hi", "--jsn"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("'--jsn'") && err.contains("--json"), "{err}");
    let out = keel(&["--workspce", "."]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--workspace"));
    let out = keel(&["sesions", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("sessions"),
        "{}",
        text(&out.stderr)
    );
    for bad in [
        vec!["sessions"],
        vec!["sessions", "show"],
        vec!["demo", "extra"],
        vec!["bridge", "--max-line-bytes", "many"],
        vec!["acp", "--mode", "yolo"],
        vec!["completions"],
        vec!["completions", "tcsh"],
        vec!["doctor", "--timeout", "-1"],
        // Session flags before a command that does not take them.
        vec!["--model", "scripted:x", "completions", "bash"],
        vec!["--mode", "plan", "doctor"],
        vec!["--resume", "sess_x", "exec", "hi"],
    ] {
        let out = keel(&bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("error"), "{bad:?}");
        assert!(out.stdout.is_empty(), "{bad:?}");
    }
}

#[test]
fn shared_flags_are_spelt_the_same_everywhere() {
    for c in ["exec", "resume", "bridge", "acp"] {
        let help = text(&keel(&[c, "--help"]).stdout);
        for flag in [
            "-w, --workspace <DIR>",
            "-m, --model <PROVIDER:MODEL>",
            "--mode <MODE>",
        ] {
            assert!(help.contains(flag), "keel {c}: {flag} missing:\n{help}");
        }
    }
    for c in [vec!["exec"], vec!["sessions", "list"], vec!["doctor"]] {
        let mut args = c.clone();
        args.push("--help");
        let help = text(&keel(&args).stdout);
        assert!(help.contains("--json"), "{c:?}");
    }
    // The global flag goes anywhere.
    for args in [
        vec!["sessions", "list", "--json", "--log-stderr"],
        vec!["--log-stderr", "sessions", "list", "--json"],
        vec!["sessions", "--log-stderr", "list", "--json"],
    ] {
        let out = keel(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stdout).trim(), "[]");
        assert!(text(&out.stderr).contains("keel started"), "{args:?}");
    }
    // Session flags before a command that does not take them are refused, not ignored.
    let out = keel(&["--model", "scripted:x", "sessions", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--model means nothing for `keel sessions`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let out = keel(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        for word in ["exec", "doctor", "completions", "workspace", "auto-edit"] {
            assert!(script.contains(word), "{shell}: {word} missing");
        }
    }
    // bash loads it and registers the completion of `keel`.
    let script = text(&keel(&["completions", "bash"]).stdout);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keel.bash");
    std::fs::write(&file, script).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p keel", file.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("keel"));
}

#[test]
fn a_malformed_or_missing_model_is_named_with_where_it_came_from() {
    for (model, says) in [
        ("nope:x", "unknown model provider \"nope\""),
        ("gpt4", "is not of the form provider:model"),
        ("openai:", "names no model after \"openai\""),
    ] {
        for command in [&["exec", "hi"][..], &["bridge"][..]] {
            let mut args = command.to_vec();
            args.extend(["--model", model]);
            let out = keel(&args);
            let err = text(&out.stderr);
            assert_ne!(out.status.code(), Some(0), "{args:?}");
            assert!(
                err.contains(says) && err.contains("(from --model)"),
                "{args:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        }
    }
    let out = keel(&["exec", "hi"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no model configured: pass --model provider:model"),
        "{}",
        text(&out.stderr)
    );
}
