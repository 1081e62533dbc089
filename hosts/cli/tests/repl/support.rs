//! The pseudo-terminal driver and temporary directories the REPL tests share.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

/// How long any one expected text may take to appear before the test fails.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Removes ANSI escape sequences and carriage returns.
pub fn strip_ansi(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\x1b' => match it.next() {
                Some('[') => {
                    // CSI: parameters, then one final byte in @..~.
                    for c in it.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    // OSC: until BEL or ESC \.
                    while let Some(c) = it.next() {
                        if c == '\x07' {
                            break;
                        }
                        if c == '\x1b' {
                            it.next();
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

/// A running `keel` in a pseudo-terminal.
pub struct Term {
    child: Box<dyn Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    output: Arc<Mutex<Vec<u8>>>,
    _master: Box<dyn MasterPty + Send>,
    /// Position in the stripped screen text up to which expectations were met.
    seen: usize,
}

impl Term {
    pub fn start(workspace: &Path, home: &Path, script: &Path, extra: &[&str]) -> Term {
        Term::start_with_env(workspace, home, script, extra, &[])
    }

    /// Like [`Term::start`], with extra environment variables.
    pub fn start_with_env(
        workspace: &Path,
        home: &Path,
        script: &Path,
        extra: &[&str],
        env: &[(&str, &Path)],
    ) -> Term {
        let pty = native_pty_system();
        let pair = pty
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
        for a in extra {
            cmd.arg(a);
        }
        cmd.cwd(workspace);
        cmd.env("KEEL_HOME", home);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("KEEL_MODEL");
        cmd.env_remove("NO_COLOR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
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

    /// Everything shown so far, without escape sequences.
    pub fn screen(&self) -> String {
        let raw = self.output.lock().unwrap().clone();
        strip_ansi(&String::from_utf8_lossy(&raw))
    }

    /// Waits until `text` appears after what was already matched; returns the screen
    /// text between the previous match and the end of this one.
    pub fn expect(&mut self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            let from = self.seen.min(screen.len());
            if let Some(i) = screen.get(from..).and_then(|s| s.find(text)) {
                let end = from + i + text.len();
                let chunk = screen[from..end].to_owned();
                self.seen = end;
                return chunk;
            }
            if start.elapsed() > HANG_GUARD {
                panic!(
                    "waited {HANG_GUARD:?} for {text:?}; the screen after the last match:\n{}",
                    screen.get(from..).unwrap_or("")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Types keys (`\r` is Enter).
    pub fn keys(&mut self, keys: &str) {
        self.writer.write_all(keys.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types a line and presses Enter.
    pub fn line(&mut self, text: &str) {
        self.keys(text);
        self.keys("\r");
    }

    /// Waits for the process to exit; returns its exit code.
    pub fn exit_code(&mut self) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            if start.elapsed() > HANG_GUARD {
                let _ = self.child.kill();
                panic!("keel did not exit; screen:\n{}", self.screen());
            }
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

pub struct Dirs {
    pub _root: tempfile::TempDir,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub script: PathBuf,
}

pub fn dirs(script: &serde_json::Value) -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    let home = root.path().join("home");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(workspace.join("README.md"), "# Demo project\n").unwrap();
    let path = root.path().join("script.json");
    std::fs::write(&path, serde_json::to_string_pretty(script).unwrap()).unwrap();
    Dirs {
        workspace,
        home,
        script: path,
        _root: root,
    }
}
