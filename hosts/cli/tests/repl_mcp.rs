//! The REPL's `/mcp` and an MCP tool call as a person sees them: the real `keel`
//! binary in a pseudo-terminal, a configured MCP server over streamable HTTP on
//! loopback (in this process), a scripted model. Every wait has a hang guard; nothing
//! asserts on timing.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

const HANG_GUARD: Duration = Duration::from_secs(60);

/// The text without ANSI escape sequences (CSI and OSC) and carriage returns.
fn strip_ansi(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        match c {
            '\x1b' => match it.next() {
                Some('[') => {
                    for c in it.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    for c in it.by_ref() {
                        if c == '\x07' {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

struct Term {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    output: Arc<Mutex<Vec<u8>>>,
    _master: Box<dyn MasterPty + Send>,
    seen: usize,
}

impl Term {
    fn start(workspace: &Path, home: &Path, script: &Path) -> Term {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 50,
                cols: 140,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_keel"));
        cmd.arg("--workspace");
        cmd.arg(workspace);
        cmd.arg("--model");
        cmd.arg(format!("scripted:{}", script.display()));
        cmd.cwd(workspace);
        cmd.env("KEEL_HOME", home);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("KEEL_MODEL");
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Term {
            child,
            writer,
            output,
            _master: pair.master,
            seen: 0,
        }
    }

    fn screen(&self) -> String {
        strip_ansi(&String::from_utf8_lossy(&self.output.lock().unwrap()))
    }

    /// Waits until `text` appears after the last match; returns the text up to it.
    fn expect(&mut self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            let from = self.seen.min(screen.len());
            if let Some(i) = screen.get(from..).and_then(|s| s.find(text)) {
                let end = from + i + text.len();
                self.seen = end;
                return screen[from..end].to_owned();
            }
            assert!(
                start.elapsed() < HANG_GUARD,
                "no {text:?} in:\n{}",
                &screen[from..]
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn keys(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    fn line(&mut self, text: &str) {
        self.keys(text);
        self.keys("\r");
    }

    fn exit_code(&mut self) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            assert!(
                start.elapsed() < HANG_GUARD,
                "keel did not exit:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
    }
}

struct Dirs {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
    script: PathBuf,
}

fn dirs(script: &serde_json::Value) -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    let home = root.path().join("home");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let path = root.path().join("script.json");
    std::fs::write(&path, serde_json::to_string_pretty(script).unwrap()).unwrap();
    Dirs {
        workspace,
        home,
        script: path,
        _root: root,
    }
}

#[test]
fn mcp_servers_are_listed_and_their_tools_called() {
    // A real MCP server over streamable HTTP on loopback, in this process.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(keel_mcp::testing::serve_http(Some("Bearer t0k")))
        .unwrap();
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "text": "Asking the web server.",
                "toolCalls": [{ "name": "mcp__web__echo", "arguments": { "text": "from the REPL" } }]
            },
            { "whenLastToolResultContains": "echo: from the REPL", "text": "The server echoed it." },
            { "text": "The call did not work." }
        ]
    }));
    std::fs::write(
        d.home.join("config.toml"),
        format!(
            "[mcpServers.web]\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer t0k\" }}\n\n[mcpServers.broken]\ncommand = \"/nonexistent/keel-no-such-server\"\n",
            server.url()
        ),
    )
    .unwrap();
    let mut t = Term::start(&d.workspace, &d.home, &d.script);
    t.expect("ask › ");
    // The servers start with the session; /mcp shows where they are.
    let mut listed = String::new();
    for _ in 0..200 {
        t.line("/mcp");
        listed = t.expect("ask › ");
        if !listed.contains("starting") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(listed.contains("web"), "{listed}");
    assert!(listed.contains("http · trust ask · config"), "{listed}");
    assert!(listed.contains("mcp__web__echo"), "{listed}");
    assert!(listed.contains("broken"), "{listed}");
    assert!(listed.contains("failed: could not start"), "{listed}");

    // The model calls one of its tools: asked first (trust ask), then run.
    t.line("echo something");
    let approval = t.expect("allow? [y/s/a/n]");
    assert!(approval.contains("mcp__web__echo"), "{approval}");
    t.line("y");
    t.expect("The server echoed it.");
    t.expect("ask › ");
    assert!(server.journal.lines().contains(&"call echo".to_owned()));
    t.keys("\x04");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}
