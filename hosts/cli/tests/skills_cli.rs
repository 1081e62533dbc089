//! Skills and custom commands in the REPL as a person uses them (the real `keel`
//! binary in a pseudo-terminal) and in `keel exec`: files in temporary folders, a
//! scripted model that checks the prompt it receives. `HOME` is a temporary folder
//! too, so the user's own `~/.agents/skills` is not read.
#![allow(clippy::unwrap_used)]

#[path = "repl/support.rs"]
mod support;

use std::path::Path;

use support::{dirs, Dirs, Term};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A project with two commands (one named like a built-in), a good skill and a broken
/// one, and a skill of the user's own.
fn project(script: serde_json::Value, trusted: bool) -> (Dirs, std::path::PathBuf) {
    let d = dirs(&script);
    let ws = &d.workspace;
    write(
        &ws.join(".keel/commands/fix-issue.md"),
        "---\ndescription: Fix a numbered issue\nargument-hint: <number>\n---\nFix issue #$ARGUMENTS carefully.\n",
    );
    write(&ws.join(".keel/commands/help.md"), "Shadow the help.\n");
    write(
        &ws.join(".agents/skills/pdf-tools/SKILL.md"),
        "---\nname: pdf-tools\ndescription: Extract text from PDF files.\n---\nRun scripts/extract.py on the file.\n",
    );
    write(
        &ws.join(".agents/skills/pdf-tools/scripts/extract.py"),
        "print('text')\n",
    );
    write(
        &ws.join(".keel/skills/broken/SKILL.md"),
        "---\nname: broken\n",
    );
    write(
        &d.home.join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Keep notes in NOTES.md.\n---\nAppend to NOTES.md.\n",
    );
    if trusted {
        let canon = std::fs::canonicalize(ws).unwrap();
        write(
            &d.home.join("config.toml"),
            &format!("trustedProjects = [{:?}]\n", canon.display().to_string()),
        );
    }
    let user_home = d.home.join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    (d, user_home)
}

#[test]
fn commands_and_skills_are_listed_completed_and_sent() {
    let (d, user_home) = project(
        serde_json::json!({
            "turns": [
                { "expectLastMessageContains": "Fix issue #42 carefully.", "text": "Fixed issue 42." },
                {
                    "expectLastMessageContains": "<skill_content name=\"pdf-tools\">\nRun scripts/extract.py on the file.\n</skill_content>",
                    "text": "Extracted with the skill."
                },
                { "expectLastMessageContains": "The request: summarize report.pdf", "text": "Summarized." }
            ]
        }),
        true,
    );
    let mut t = Term::start_with_env(
        &d.workspace,
        &d.home,
        &d.script,
        &[],
        &[("HOME", &user_home)],
    );
    let start = t.expect("ask › ");
    assert!(
        start.contains("2 skill or command files were skipped; /skills says why"),
        "{start}"
    );

    t.line("/skills");
    let list = t.expect("run a command with /NAME [arguments].");
    assert!(list.contains("notes"), "{list}");
    assert!(list.contains("user ·"), "{list}");
    assert!(list.contains("pdf-tools"), "{list}");
    assert!(
        list.contains("project · .agents/skills/pdf-tools/SKILL.md"),
        "{list}"
    );
    assert!(list.contains("Extract text from PDF files."), "{list}");
    assert!(list.contains("/fix-issue <number>"), "{list}");
    assert!(list.contains("Fix a numbered issue"), "{list}");
    assert!(list.contains("skipped"), "{list}");
    assert!(
        list.contains("commands/help.md: /help is a built-in command; rename the file"),
        "{list}"
    );
    assert!(
        list.contains("skills/broken/SKILL.md: the front matter has no closing"),
        "{list}"
    );
    t.expect("ask › ");

    t.line("/help");
    let help = t.expect("complete a command or its sub-command");
    assert!(help.contains("custom commands"), "{help}");
    assert!(help.contains("/fix-issue <number>"), "{help}");
    assert!(help.contains("/skill:pdf-tools [request]"), "{help}");
    assert!(help.contains("/skills"), "{help}");
    t.expect("ask › ");

    // Tab completes a custom command; its template is expanded and sent.
    t.keys("/fix");
    t.keys("\t");
    t.expect("/fix-issue ");
    t.line("42");
    let sent = t.expect("Fixed issue 42.");
    assert!(sent.contains("/fix-issue → 1 line from"), "{sent}");
    t.expect("ask › ");

    // Tab completes a skill; its instructions are sent.
    t.keys("/skill:pd");
    t.keys("\t");
    t.expect("/skill:pdf-tools ");
    t.keys("\r");
    let sent = t.expect("Extracted with the skill.");
    assert!(sent.contains("skill pdf-tools ("), "{sent}");
    assert!(sent.contains("1 other file)"), "{sent}");
    t.expect("ask › ");
    t.line("/skill:pdf-tools summarize report.pdf");
    t.expect("Summarized.");
    t.expect("ask › ");

    // Unknown names get a clear answer and send nothing.
    t.line("/skill:nope");
    t.expect("unknown skill \"nope\"; /skills lists them");
    t.expect("ask › ");
    t.line("/fix-isue 1");
    let unknown = t.expect("ask › ");
    assert!(unknown.contains("unknown command /fix-isue"), "{unknown}");

    t.keys("\x04");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn an_untrusted_projects_skills_are_not_loaded_and_its_commands_are() {
    let (d, user_home) = project(
        serde_json::json!({
            "turns": [{ "expectLastMessageContains": "Fix issue #7 carefully.", "text": "Fixed issue 7." }]
        }),
        false,
    );
    let mut t = Term::start_with_env(
        &d.workspace,
        &d.home,
        &d.script,
        &[],
        &[("HOME", &user_home)],
    );
    t.expect("ask › ");
    t.line("/skills");
    let list = t.expect("run a command with /NAME [arguments].");
    assert!(list.contains("notes"), "{list}");
    assert!(
        list.contains("this project is not trusted, so its skill \"pdf-tools\" was not loaded"),
        "{list}"
    );
    assert!(list.contains("trustedProjects"), "{list}");
    assert!(!list.contains("Extract text from PDF files."), "{list}");
    t.expect("ask › ");
    t.line("/skill:pdf-tools");
    t.expect("unknown skill \"pdf-tools\"");
    t.line("/fix-issue 7");
    t.expect("Fixed issue 7.");
    t.expect("ask › ");
    t.keys("\x04");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

/// `keel exec PROMPT` in the project: exit code, stdout, stderr.
fn exec(d: &Dirs, user_home: &Path, prompt: &str) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("exec")
        .arg("--workspace")
        .arg(&d.workspace)
        .arg("--model")
        .arg(format!("scripted:{}", d.script.display()))
        .arg(prompt)
        .env("KEEL_HOME", &d.home)
        .env("HOME", user_home)
        .env_remove("KEEL_MODEL")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exec_expands_commands_and_skills_too() {
    let (d, user_home) = project(
        serde_json::json!({
            "turns": [{ "expectLastMessageContains": "Fix issue #9 carefully.", "text": "Fixed issue 9." }]
        }),
        true,
    );
    let (code, stdout, stderr) = exec(&d, &user_home, "/fix-issue 9");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Fixed issue 9."), "{stdout}");
    assert!(stderr.contains("keel exec: /fix-issue from "), "{stderr}");
    assert!(stderr.contains(".keel/commands/fix-issue.md"), "{stderr}");

    let (d, user_home) = project(
        serde_json::json!({
            "turns": [{ "expectLastMessageContains": "<skill_content name=\"notes\">\nAppend to NOTES.md.\n</skill_content>", "text": "Noted." }]
        }),
        true,
    );
    let (code, stdout, stderr) = exec(&d, &user_home, "/skill:notes add a line");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("Noted."), "{stdout}");

    // An unknown skill is a usage error and reaches no model; other slash text is
    // sent as typed.
    let (code, _, stderr) = exec(&d, &user_home, "/skill:nope");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("keel exec: unknown skill \"nope\""),
        "{stderr}"
    );
    let (d, user_home) = project(
        serde_json::json!({
            "turns": [{ "expectLastMessageContains": "/etc/hosts is odd", "text": "As typed." }]
        }),
        true,
    );
    let (code, stdout, stderr) = exec(&d, &user_home, "/etc/hosts is odd");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}
