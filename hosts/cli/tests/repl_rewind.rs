//! `/btw`, `/rewind`, `/undo` and `/fork` in the REPL: the real `keel` binary in a
//! pseudo-terminal with a scripted model, changing real files in a directory that is
//! not a git repository.
#![allow(clippy::unwrap_used)]

#[path = "repl/support.rs"]
mod support;

use support::{dirs, Term};

#[test]
fn side_questions_rewind_undo_and_fork_in_the_repl() {
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "text": "Writing it.",
                "toolCalls": [{
                    "name": "write_file",
                    "arguments": { "path": "new.txt", "content": "made\n" }
                }]
            },
            { "text": "Wrote new.txt for you." },
            { "text": "On the side: you asked for new.txt." }
        ]
    }));
    let new = d.workspace.join("new.txt");
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &["--mode", "auto-edit"]);
    t.expect("› ");
    t.line("write the file");
    t.expect("Wrote new.txt for you.");
    t.expect("› ");
    assert_eq!(std::fs::read_to_string(&new).unwrap(), "made\n");

    // A side question: answered, not kept.
    t.line("/btw what did I ask?");
    t.expect("btw:");
    t.expect("On the side: you asked for new.txt.");
    t.expect("› ");

    // The checkpoints: before the request, and before the write.
    t.line("/rewind");
    let listed = t.expect("› ");
    assert!(listed.contains("before request"), "{listed}");
    assert!(listed.contains("before write_file"), "{listed}");

    // Undo the request: the file goes, the conversation is cut back.
    t.line("/undo");
    let undone = t.expect("rewound 1 file; conversation cut back");
    assert!(
        undone.contains("removed") && undone.contains("new.txt"),
        "{undone}"
    );
    assert!(!new.exists());
    t.expect("› ");

    // Bad input: an unknown point.
    t.line("/rewind 99");
    t.expect("no point \"99\"");
    t.expect("› ");

    // A fork continues in a new session; the parent stays stored.
    t.line("/fork");
    let forked = t.expect("the parent stays as it was");
    assert!(forked.contains("forked "), "{forked}");
    t.expect("› ");

    // The fork's own checkpoints start afresh.
    t.line("/rewind");
    t.expect("no checkpoints yet");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0);
}
