//! The REPL in a real terminal: `keel` runs inside tmux on a scripted model whose
//! reply is Markdown (a heading, bold and italic text, a list, a table and a Rust code
//! fence). The pane is captured with and without its escape sequences: the markup
//! characters are gone and colours are there. Needs `tmux` (installed by .ci/run).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long any one expected text may take to appear before the test fails.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// A tmux server of its own (its socket in a temporary directory).
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap_or_else(|e| panic!("tmux cannot run ({e}); install it (bash .ci/run does)"))
    }

    fn capture(&self, escapes: bool) -> String {
        let mut args = vec!["capture-pane", "-p", "-J", "-t", "keel"];
        if escapes {
            args.push("-e");
        }
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane shows `text`; returns the pane.
    fn wait_for(&self, text: &str) -> String {
        self.wait_until(text, |pane| pane.contains(text))
    }

    /// Waits until `done` holds for the pane (as plain text); returns the pane.
    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let pane = self.capture(false);
            if done(&pane) {
                return pane;
            }
            if start.elapsed() > HANG_GUARD {
                panic!("waited {HANG_GUARD:?} for {what}; the pane:\n{pane}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn start(dir: &Path, script: &Path, extra_env: &[&str]) -> Tmux {
    let ws = dir.join("project");
    let home = dir.join("home");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let tmux = Tmux {
        socket: dir.join("tmux.sock"),
    };
    let command = format!(
        "'{}' --model 'scripted:{}'",
        env!("CARGO_BIN_EXE_keel"),
        script.display()
    );
    let home_env = format!("KEEL_HOME={}", home.display());
    let mut args = vec![
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        "100",
        "-y",
        "60",
        "-s",
        "keel",
        "-c",
    ];
    let ws_str = ws.to_str().unwrap().to_owned();
    args.push(&ws_str);
    args.extend(["-e", &home_env]);
    for e in extra_env {
        args.extend(["-e", e]);
    }
    args.push(&command);
    let out = Command::new("tmux")
        .arg("-S")
        .arg(&tmux.socket)
        .args(&args)
        .env_remove("TMUX")
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color")
        .output()
        .unwrap_or_else(|e| panic!("tmux cannot run ({e}); install it (bash .ci/run does)"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tmux
}

const REPLY: &str = "# Release notes\n\nThis is **important** and *subtle*.\n\n- first item\n- second item\n\n| crate | status |\n|:---|---:|\n| keel | ready |\n\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\nAll `done` now.";

fn script(dir: &Path) -> PathBuf {
    let path = dir.join("script.json");
    let body = serde_json::json!({"chunkDelayMs": 1, "turns": [{"text": REPLY}]});
    std::fs::write(&path, body.to_string()).unwrap();
    path
}

#[test]
fn the_repl_renders_markdown_in_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = start(dir.path(), &script(dir.path()), &[]);
    tmux.wait_for("ask ›");
    let out = tmux.run(&["send-keys", "-t", "keel", "show me the notes", "Enter"]);
    assert!(out.status.success());
    tmux.wait_for("All done now.");
    // The request ended: the prompt is back.
    let plain = tmux.wait_until("the prompt again", |p| p.matches("ask ›").count() >= 2);
    let reply: &str = plain
        .split("show me the notes")
        .nth(1)
        .unwrap_or_else(|| panic!("no reply in:\n{plain}"));
    // The markup characters are gone…
    for markup in [
        "# Release",
        "**",
        "*subtle*",
        "```",
        "|---",
        "| keel",
        "`done`",
        "- first",
    ] {
        assert!(!reply.contains(markup), "{markup:?} left in:\n{reply}");
    }
    // …and the content is there, laid out.
    for line in [
        "Release notes",
        "This is important and subtle.",
        "• first item",
        "• second item",
        "crate │ status",
        "──────┼───────",
        "keel  │  ready",
        "fn main() {",
        "println!(\"hi\");",
        "All done now.",
    ] {
        assert!(
            reply.lines().any(|l| l.contains(line)),
            "{line:?} missing from:\n{reply}"
        );
    }
    // Colours: the heading, the bold word and the highlighted code carry SGR escapes.
    let styled = tmux.capture(true);
    let line_of = |needle: &str| {
        styled
            .lines()
            .find(|l| l.contains(needle) || strip(l).contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not in:\n{styled}"))
            .to_owned()
    };
    let heading = line_of("Release");
    assert!(
        heading.contains("\x1b["),
        "heading without style: {heading:?}"
    );
    let bold = line_of("important");
    assert!(bold.contains("\x1b[1m"), "bold without style: {bold:?}");
    let code = line_of("main()");
    assert!(
        code.contains("38;5;") || code.contains("38;2;"),
        "code without highlighting: {code:?}"
    );
    let _ = tmux.run(&["send-keys", "-t", "keel", "/quit", "Enter"]);
}

#[test]
fn no_color_keeps_the_layout_without_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let tmux = start(dir.path(), &script(dir.path()), &["NO_COLOR=1"]);
    tmux.wait_for("ask ›");
    tmux.run(&["send-keys", "-t", "keel", "show me", "Enter"]);
    tmux.wait_for("All done now.");
    let styled = tmux.capture(true);
    let reply = styled
        .split("show me")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    assert!(!reply.contains('\x1b'), "escapes with NO_COLOR: {reply:?}");
    for line in [
        "Release notes",
        "This is important and subtle.",
        "- first item",
        "keel  |  ready",
        "    fn main() {",
    ] {
        assert!(reply.contains(line), "{line:?} missing from:\n{reply}");
    }
    assert!(!reply.contains("**") && !reply.contains("```"));
    let _ = tmux.run(&["send-keys", "-t", "keel", "/quit", "Enter"]);
}

/// Removes SGR escape sequences.
fn strip(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\x1b' {
            for n in it.by_ref() {
                if n.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
