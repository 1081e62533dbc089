//! The interactive REPL as a person uses it: the real `keel` binary in a
//! pseudo-terminal, driven by keystrokes, with a scripted model. The screen is read
//! with ANSI sequences stripped; every wait has a generous hang guard and nothing
//! asserts on timing.
#![allow(clippy::unwrap_used)]

#[path = "repl/support.rs"]
mod support;

use std::io::Write;

use support::{dirs, strip_ansi, Term};

#[test]
fn a_session_as_a_person_uses_it() {
    let d = dirs(&serde_json::json!({
        "chunkDelayMs": 5,
        "turns": [
            {
                "thought": "A greeting deserves a short answer.",
                "text": "Hello! I am the scripted model, streaming this answer in pieces.",
                "usage": { "inputTokens": 120, "outputTokens": 18 }
            },
            {
                "text": "I will write the notes file.",
                "toolCalls": [{
                    "name": "write_file",
                    "arguments": { "path": "NOTES.md", "content": "# Notes\n\n- written from the REPL\n" }
                }]
            },
            { "text": "Done: NOTES.md holds the notes." },
            { "delayMs": 60000, "text": "This only arrives after a minute." },
            { "text": "Still here after the interrupt." }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");

    // A prompt; the answer streams in, the thought is shown too.
    t.line("hello");
    let shown = t.expect("streaming this answer in pieces.");
    assert!(
        shown.contains("thinking: A greeting deserves a short answer."),
        "{shown}"
    );
    t.expect("ask › ");

    // A turn that writes a file asks first, showing the tool, the risk and the diff.
    t.line("please write the notes");
    let approval = t.expect("allow? [y/s/a/n]");
    assert!(
        approval.contains("I will write the notes file."),
        "{approval}"
    );
    assert!(
        approval.contains("approval needed: write_file NOTES.md"),
        "{approval}"
    );
    assert!(approval.contains("risk medium"), "{approval}");
    assert!(approval.contains("+++ b/NOTES.md"), "{approval}");
    assert!(approval.contains("+- written from the REPL"), "{approval}");
    assert!(
        approval.contains("[s] allow for this session"),
        "{approval}"
    );
    assert!(!d.workspace.join("NOTES.md").exists());
    t.line("y");
    let done = t.expect("Done: NOTES.md holds the notes.");
    assert!(done.contains("✓ write_file NOTES.md"), "{done}");
    assert!(done.contains("created NOTES.md (+3 -0)"), "{done}");
    t.expect("ask › ");
    assert_eq!(
        std::fs::read_to_string(d.workspace.join("NOTES.md")).unwrap(),
        "# Notes\n\n- written from the REPL\n"
    );

    // A slow turn: Ctrl-C interrupts it and the prompt comes back.
    t.line("take your time");
    t.expect("waiting for the model");
    t.keys("\x03");
    t.expect("interrupted");
    t.expect("ask › ");

    // The session survived: the next prompt works.
    t.line("are you there?");
    t.expect("Still here after the interrupt.");
    t.expect("ask › ");

    // Slash commands: switch to plan mode, then check the status.
    t.line("/mode plan");
    t.expect("mode: ask → plan");
    t.expect("plan › ");
    t.line("/status");
    let status = t.expect("plan › ");
    assert!(status.contains("sess_"), "{status}");
    let mode_row = status
        .lines()
        .find(|l| l.trim_start().starts_with("mode"))
        .unwrap_or_default();
    assert!(mode_row.contains("plan"), "{status}");
    assert!(status.contains("state      idle"), "{status}");

    // An unknown command gets a helpful answer.
    t.line("/stauts");
    let unknown = t.expect("plan › ");
    assert!(unknown.contains("unknown command /stauts"), "{unknown}");
    assert!(unknown.contains("Did you mean /status?"), "{unknown}");
    assert!(unknown.contains("/help"), "{unknown}");

    // Ctrl-D on an empty prompt closes the session and exits cleanly.
    t.keys("\x04");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());

    // The session was stored and closed; the history was kept.
    let history = std::fs::read_to_string(d.home.join("history")).unwrap();
    assert!(history.contains("please write the notes"), "{history}");
    assert!(history.contains("/mode plan"), "{history}");
}

#[test]
fn plans_and_questions_are_answered_inline() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "text": "Here is my plan.",
                "toolCalls": [{
                    "name": "propose_plan",
                    "arguments": {
                        "summary": "Pick a database, then write the notes.",
                        "steps": [
                            { "id": "s1", "title": "Choose the database" },
                            { "id": "s2", "title": "Write the notes" }
                        ]
                    }
                }]
            },
            {
                "toolCalls": [
                    { "name": "update_plan", "arguments": { "steps": [{ "id": "s1", "status": "in_progress" }] } },
                    {
                        "name": "ask_user",
                        "arguments": { "question": "Which database?", "candidates": ["postgres", "sqlite"] }
                    }
                ]
            },
            {
                "expectLastMessageContains": "sqlite",
                "toolCalls": [
                    { "name": "update_plan", "arguments": { "steps": [
                        { "id": "s1", "status": "completed" },
                        { "id": "s2", "status": "in_progress" }
                    ] } }
                ]
            },
            { "text": "You chose sqlite; noted." }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &["--mode", "plan"]);
    t.expect("plan › ");
    t.line("set up storage");
    let proposed = t.expect("approve the plan? [y/e/a/n]");
    assert!(proposed.contains("plan proposed"), "{proposed}");
    assert!(
        proposed.contains("Pick a database, then write the notes."),
        "{proposed}"
    );
    assert!(proposed.contains("[ ] Choose the database"), "{proposed}");
    assert!(proposed.contains("[ ] Write the notes"), "{proposed}");
    t.line("y");
    t.expect("plan approved; continuing in ask mode");
    let asked = t.expect("answer (1-2 or text)>");
    assert!(asked.contains("[~] Choose the database"), "{asked}");
    assert!(asked.contains("? Which database?"), "{asked}");
    assert!(asked.contains("1. postgres"), "{asked}");
    assert!(asked.contains("2. sqlite"), "{asked}");
    t.line("2");
    let after = t.expect("You chose sqlite; noted.");
    assert!(after.contains("[x] Choose the database"), "{after}");
    assert!(after.contains("[~] Write the notes"), "{after}");
    t.expect("ask › ");

    t.line("/plan");
    let plan = t.expect("ask › ");
    assert!(plan.contains("[x] Choose the database"), "{plan}");
    assert!(plan.contains("[~] Write the notes"), "{plan}");

    // Ctrl-C twice on an empty prompt exits too.
    t.keys("\x03");
    t.expect("Ctrl-C again or Ctrl-D to exit");
    t.keys("\x03");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn a_denied_write_leaves_the_workspace_alone() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "expectLastMessageContains": "write\nsomething",
                "toolCalls": [{
                    "name": "write_file",
                    "arguments": { "path": "NOTES.md", "content": "nope\n" }
                }]
            },
            { "whenLastToolResultContains": "did not approve", "text": "Understood, I left it alone." },
            { "text": "(unexpected turn)" }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    // A line ending with `\` continues the message on the next line.
    t.line("write\\");
    t.line("something");
    t.expect("allow? [y/s/a/n]");
    t.line("maybe");
    t.expect("answer one of y/s/a/n");
    t.line("n");
    let after = t.expect("Understood, I left it alone.");
    assert!(after.contains("write_file"), "{after}");
    t.expect("ask › ");
    assert!(!d.workspace.join("NOTES.md").exists());
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn titles_are_set_and_background_exits_show_while_idle() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "text": "Starting the watcher.",
                "toolCalls": [{
                    "name": "run_shell",
                    "arguments": {
                        "command": "while [ ! -e go ]; do sleep 0.05; done; echo finished",
                        "background": true
                    }
                }]
            },
            { "text": "It runs in the background." }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("/title");
    t.expect("no title yet");
    t.expect("ask › ");

    t.line("Watch for the go file\\");
    t.line("and say when");
    t.expect("allow? [y/s/a/n]");
    t.line("y");
    t.expect("It runs in the background.");
    t.expect("ask › ");
    // The task is still waiting for `go`; it ends while the REPL waits at its prompt,
    // and the line shows up there without a key pressed.
    std::fs::write(d.workspace.join("go"), "").unwrap();
    let shown = t.expect("exited with code 0");
    assert!(shown.contains("background task bg_"), "{shown}");

    // The first line of the first message became the title; /title renames it.
    t.line("/title");
    t.expect("title: Watch for the go file");
    t.line("/title   Release checks  ");
    let renamed = t.expect("(was Watch for the go file)");
    assert!(renamed.contains("title: Release checks"), "{renamed}");
    t.line(&format!("/title {}", "x".repeat(201)));
    t.expect("title not changed: the title has 201 characters");
    t.expect("ask › ");
    t.line("/status");
    t.expect("Release checks");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
    let sessions = std::fs::read_dir(d.home.join("sessions")).unwrap();
    let titles: Vec<String> = sessions
        .flatten()
        .map(|e| {
            let state: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.path().join("state.json")).unwrap())
                    .unwrap();
            state["title"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(titles, ["Release checks"]);
}

#[test]
fn always_allow_is_kept_for_the_project() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "toolCalls": [{
                    "name": "write_file",
                    "arguments": { "path": "A.md", "content": "a\n" }
                }]
            },
            { "text": "Wrote A." }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("write A");
    t.expect("allow? [y/s/a/n]");
    t.line("a");
    let shown = t.expect("Wrote A.");
    assert!(shown.contains("always allowed now: write_file"), "{shown}");
    t.expect("ask › ");
    t.line("/status");
    let status = t.expect("ask › ");
    let first_id = status
        .split_whitespace()
        .find(|w| w.starts_with("sess_"))
        .unwrap()
        .to_owned();
    t.keys("\x04");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
    assert!(d.workspace.join("A.md").exists());

    // A new run in the same project (with a new script): the rule holds, nothing is
    // asked.
    let script = serde_json::json!({
        "turns": [
            {
                "toolCalls": [{
                    "name": "write_file",
                    "arguments": { "path": "B.md", "content": "b\n" }
                }]
            },
            { "text": "Wrote B." }
        ]
    });
    std::fs::write(&d.script, script.to_string()).unwrap();
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("write B");
    let shown = t.expect("Wrote B.");
    assert!(!shown.contains("approval needed"), "{shown}");
    assert!(shown.contains("✓ write_file B.md"), "{shown}");
    t.expect("ask › ");
    assert!(d.workspace.join("B.md").exists());

    // Both sessions are stored; the first can be resumed by a prefix of its id.
    t.line("/sessions");
    let list = t.expect("resume one with /resume <id>");
    assert!(list.contains(&first_id), "{list}");
    assert_eq!(list.matches("sess_").count(), 2, "{list}");
    t.expect("ask › ");
    t.line(&format!("/resume {}", &first_id[..first_id.len() - 3]));
    let resumed = t.expect("ask › ");
    assert!(
        resumed.contains(&format!("resumed {first_id}")),
        "{resumed}"
    );
    assert!(resumed.contains("started with: write A"), "{resumed}");
    t.line("/status");
    let status = t.expect("ask › ");
    assert!(status.contains(&first_id), "{status}");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

/// `/new` starts a fresh session in the same workspace with the same mode and model;
/// the one left stays stored and `/resume` goes back to it.
#[test]
fn new_starts_a_fresh_session_and_keeps_the_old_one() {
    let d = dirs(&serde_json::json!({
        "turns": [{ "text": "First answer." }]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &["--mode", "auto-edit"]);
    t.expect("auto-edit › ");
    t.line("hello");
    t.expect("First answer.");
    t.expect("auto-edit › ");
    t.line("/status");
    let status = t.expect("auto-edit › ");
    let id_of = |status: &str| {
        status
            .split_whitespace()
            .find(|w| w.starts_with("sess_"))
            .unwrap()
            .to_owned()
    };
    let first = id_of(&status);
    assert!(status.contains("messages   2"), "{status}");
    t.line("/new");
    let switched = t.expect(&format!("/resume {first}"));
    assert!(switched.contains("new session sess_"), "{switched}");
    assert!(switched.contains("auto-edit mode"), "{switched}");
    t.expect("auto-edit › ");
    t.line("/status");
    let status = t.expect("auto-edit › ");
    let second = id_of(&status);
    assert_ne!(second, first, "{status}");
    assert!(status.contains("messages   0"), "{status}");
    assert!(
        status.contains(&d.workspace.display().to_string()),
        "{status}"
    );
    t.line(&format!("/resume {first}"));
    let resumed = t.expect("auto-edit › ");
    assert!(resumed.contains(&format!("resumed {first}")), "{resumed}");
    // The first session is now the workspace's most recently active one (a session
    // opened in a new process plays the script from its start).
    t.line("once more");
    t.expect("First answer.");
    t.expect("auto-edit › ");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());

    // `keel resume` without an id opens the workspace's most recent session; a start
    // of an id that fits two sessions is refused, naming them.
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &["resume"]);
    t.expect("auto-edit › ");
    t.line("/status");
    let status = t.expect("auto-edit › ");
    assert_eq!(id_of(&status), first, "{status}");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &["resume", "sess_"]);
    assert_eq!(t.exit_code(), 1, "screen:\n{}", t.screen());
    let screen = t.screen();
    assert!(screen.contains("starts 2 sessions"), "{screen}");
    assert!(
        screen.contains(&first) && screen.contains(&second),
        "{screen}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let mut t = Term::start(elsewhere.path(), &d.home, &d.script, &["resume"]);
    assert_eq!(t.exit_code(), 1, "screen:\n{}", t.screen());
    assert!(
        t.screen().contains("no stored session in"),
        "{}",
        t.screen()
    );
}

#[test]
fn lines_typed_during_a_request_steer_or_queue() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "delayMs": 5000,
                "text": "Looking first.",
                "toolCalls": [{ "name": "list_dir", "arguments": { "path": "." } }]
            },
            { "expectLastMessageContains": "mind the tests", "text": "Heard the steer." },
            { "expectLastMessageContains": "and then this", "text": "Queued one done." }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("look around");
    t.expect("waiting for the model");
    t.line("/steer mind the tests");
    t.expect("your message joins the running request");
    t.line("and then this");
    t.expect("queued (position 1)");
    let rest = t.expect("Queued one done.");
    assert!(rest.contains("Looking first."), "{rest}");
    assert!(rest.contains("✓ list_dir"), "{rest}");
    assert!(rest.contains("Heard the steer."), "{rest}");
    assert!(rest.contains("▶ and then this"), "{rest}");
    t.expect("ask › ");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn a_blocking_review_holds_messages_until_approved() {
    let d = dirs(&serde_json::json!({
        "turns": [{ "text": "Running after the review." }]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("/review");
    let none = t.expect("ask › ");
    assert!(none.contains("no review"), "{none}");

    t.line("/review enter release check --blocking");
    let entered = t.expect("ask › ");
    assert!(entered.contains("review rev_"), "{entered}");
    assert!(entered.contains("reason: release check"), "{entered}");
    assert!(entered.contains("pending"), "{entered}");

    // While it is pending, a message is refused with the stable code.
    t.line("hello");
    let refused = t.expect("ask › ");
    assert!(refused.contains("REVIEW_BLOCKING"), "{refused}");
    assert!(!refused.contains("Running after the review."), "{refused}");

    t.line("/review comment the changelog is missing");
    let commented = t.expect("ask › ");
    assert!(
        commented.contains("the changelog is missing"),
        "{commented}"
    );
    t.line("/review");
    let state = t.expect("ask › ");
    assert!(state.contains("messages are refused"), "{state}");

    t.line("/review approve ship it");
    let approved = t.expect("ask › ");
    assert!(approved.contains("approved"), "{approved}");

    // The next message runs.
    t.line("hello again");
    t.expect("Running after the review.");
    t.expect("ask › ");

    // A resolved review cannot be resolved again.
    t.line("/review reject");
    let again = t.expect("ask › ");
    assert!(again.contains("REVIEW_NOT_FOUND"), "{again}");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn previewed_edits_wait_as_patches() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "text": "Writing the notes.",
                "toolCalls": [{
                    "name": "write_file",
                    "arguments": { "path": "NOTES.md", "content": "# Notes\n\n- proposed first\n" }
                }]
            },
            { "whenLastToolResultContains": "NOT written", "text": "The change awaits your review." },
            { "text": "(unexpected turn)" }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &["--mode", "auto-edit"]);
    t.expect("auto-edit › ");
    t.line("/preview on");
    t.expect("patch preview: on");
    t.expect("auto-edit › ");
    t.line("write the notes");
    let turn = t.expect("The change awaits your review.");
    assert!(
        turn.contains("NOTES.md not written: proposed as patch_"),
        "{turn}"
    );
    assert!(turn.contains("is pending: see it with /patches"), "{turn}");
    assert!(!turn.contains("created NOTES.md"), "{turn}");
    t.expect("auto-edit › ");
    assert!(!d.workspace.join("NOTES.md").exists());

    t.line("/patches");
    let listed = t.expect("apply one with /patches apply <id>");
    assert!(listed.contains("1 pending patch(es)"), "{listed}");
    assert!(listed.contains("create NOTES.md +3 -0"), "{listed}");
    assert!(listed.contains("+- proposed first"), "{listed}");
    let id = listed
        .split_whitespace()
        .find(|w| w.starts_with("patch_"))
        .unwrap()
        .to_owned();
    t.expect("auto-edit › ");

    // Unknown ids are refused with the stable code, and nothing breaks.
    t.line("/patches apply nope");
    let bad = t.expect("auto-edit › ");
    assert!(bad.contains("PATCH_NOT_FOUND"), "{bad}");
    t.line("/patches apply");
    let usage = t.expect("auto-edit › ");
    assert!(usage.contains("usage: /patches"), "{usage}");

    t.line(&format!("/patches apply {id}"));
    let applied = t.expect("auto-edit › ");
    assert!(
        applied.contains(&format!("patch {id} applied: NOTES.md")),
        "{applied}"
    );
    assert_eq!(
        std::fs::read_to_string(d.workspace.join("NOTES.md")).unwrap(),
        "# Notes\n\n- proposed first\n"
    );
    t.line("/patches");
    let empty = t.expect("auto-edit › ");
    assert!(empty.contains("no pending patches (1 resolved)"), "{empty}");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn a_task_graph_from_the_model_is_shown_and_driven() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "toolCalls": [{
                    "name": "task_graph",
                    "arguments": {
                        "action": "create",
                        "title": "Release",
                        "nodes": [
                            { "id": "build", "title": "Build the binaries" },
                            { "id": "test", "title": "Run the tests", "dependsOn": ["build"] },
                            { "id": "ship", "title": "Publish", "dependsOn": ["test"] }
                        ]
                    }
                }]
            },
            { "text": "The graph is ready." }
        ]
    }));
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("/graph");
    let none = t.expect("ask › ");
    assert!(none.contains("no task graph"), "{none}");
    t.line("plan the release");
    t.expect("The graph is ready.");
    t.expect("ask › ");

    t.line("/graph");
    let shown = t.expect("ask › ");
    assert!(shown.contains("task graph graph_"), "{shown}");
    assert!(shown.contains("(active): Release"), "{shown}");
    // Topological order, each node indented under its dependency.
    let build = shown.find("  - build [").unwrap();
    let test = shown.find("    - test [").unwrap();
    let ship = shown.find("      - ship [").unwrap();
    assert!(build < test && test < ship, "{shown}");
    assert!(shown.contains("Run the tests (after build)"), "{shown}");

    t.line("/graph advance");
    let advanced = t.expect("ask › ");
    assert!(advanced.contains("- build [ready]"), "{advanced}");
    t.line("/graph done build");
    let done = t.expect("ask › ");
    assert!(done.contains("node build is completed"), "{done}");
    t.line("/graph skip nope");
    let bad = t.expect("ask › ");
    assert!(bad.contains("GRAPH_NOT_FOUND"), "{bad}");
    t.line("/graph advance");
    let next = t.expect("ask › ");
    assert!(next.contains("- test [ready]"), "{next}");
    t.line("/graph done test");
    t.expect("node test is completed");
    t.expect("ask › ");
    t.line("/graph done ship");
    let last = t.expect("ask › ");
    assert!(last.contains("node ship is completed"), "{last}");
    assert!(last.contains("task graph completed"), "{last}");

    // No sub-agents or background tasks in this session.
    t.line("/agents");
    let agents = t.expect("ask › ");
    assert!(agents.contains("no sub-agents"), "{agents}");
    t.line("/agents sub_nope");
    let agent = t.expect("ask › ");
    assert!(agent.contains("SUB_AGENT_NOT_FOUND"), "{agent}");
    t.line("/background");
    let bg = t.expect("ask › ");
    assert!(bg.contains("no background tasks"), "{bg}");
    t.line("/background log bg_nope");
    let bg_bad = t.expect("ask › ");
    assert!(bg_bad.contains("BACKGROUND_TASK_NOT_FOUND"), "{bg_bad}");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}

#[test]
fn piped_input_gets_plain_output() {
    let d = dirs(&serde_json::json!({
        "turns": [{ "text": "Plain answer.", "usage": { "inputTokens": 7, "outputTokens": 2 } }]
    }));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("--workspace")
        .arg(&d.workspace)
        .arg("--model")
        .arg(format!("scripted:{}", d.script.display()))
        .env("KEEL_HOME", &d.home)
        .env_remove("KEEL_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\n/usage\n/help\n/nope\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains('\x1b'), "no escape sequences: {stdout:?}");
    assert!(stdout.contains("Plain answer."), "{stdout}");
    assert!(
        stdout.contains("tokens: 7 in (0 cached), 2 out"),
        "{stdout}"
    );
    assert!(stdout.contains("unknown command /nope"), "{stdout}");
    assert!(stdout.contains("/resume <id>"), "{stdout}");
    assert!(stdout.contains("/steer <text>"), "{stdout}");
}

#[test]
fn bad_arguments_are_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["--mode", "yolo"])
        .env_remove("KEEL_MODEL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown mode"));
}

#[test]
fn strip_ansi_keeps_the_text() {
    assert_eq!(strip_ansi("\x1b[1mbold\x1b[0m\r\n"), "bold\n");
    assert_eq!(strip_ansi("\x1b]0;title\x07x"), "x");
}

#[test]
fn session_rules_are_listed_and_a_deny_rule_beats_an_allow_rule() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "toolCalls": [{
                    "name": "run_shell",
                    "arguments": { "command": "FOO=1 rm  victim.txt" }
                }]
            },
            { "whenLastToolResultContains": "run_shell(rm victim.txt)", "text": "The rule stopped it." },
            { "text": "(unexpected turn)" }
        ]
    }));
    std::fs::write(d.workspace.join("victim.txt"), "keep me\n").unwrap();
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    t.line("/rules");
    t.expect("no rules: add one with /rules allow");
    t.expect("ask › ");
    // Bad input is refused with the usage line.
    t.line("/rules forbid rm");
    t.expect("usage: /rules | /rules allow <rule>");
    t.expect("ask › ");
    t.line("/rules deny run_shell(rm");
    t.expect("not a rule: run_shell(rm");
    t.expect("ask › ");
    // An allow rule that covers the command, and a deny rule for it.
    t.line("/rules allow run_shell(rm *)");
    t.expect("allowed for this session: run_shell(rm *)");
    t.expect("ask › ");
    t.line("/rules deny run_shell(rm victim.txt)");
    t.expect("denied for this session: run_shell(rm victim.txt)");
    t.expect("ask › ");
    t.line("/rules");
    let listed = t.expect("ask › ");
    assert!(
        listed.contains("allow (this session): run_shell(rm *)"),
        "{listed}"
    );
    assert!(
        listed.contains("deny (this session): run_shell(rm victim.txt)"),
        "{listed}"
    );
    // The wrapped, env-prefixed command hits the deny rule: no approval, not run.
    t.line("remove the victim");
    let after = t.expect("The rule stopped it.");
    assert!(!after.contains("allow? [y/s/a/n]"), "{after}");
    t.expect("ask › ");
    assert_eq!(
        std::fs::read_to_string(d.workspace.join("victim.txt")).unwrap(),
        "keep me\n"
    );
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
    // Session rules are not kept for the next sessions.
    let saved = std::fs::read_to_string(d.home.join("approval-rules.json")).unwrap_or_default();
    assert!(!saved.contains("rm"), "{saved}");
}
