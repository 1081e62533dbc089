//! Input: the line editor (history, completion of slash commands), Ctrl-C while a
//! turn runs, and lines typed while a turn runs.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Config, Context, Editor, Helper};

use super::slash::COMMANDS;

/// The line editor used for the prompt and for answers to prompts.
pub(crate) type LineEditor = Editor<CommandCompleter, FileHistory>;

/// Completes slash commands (the REPL's own, then the custom commands and skills in
/// `extra`) and `/mode` arguments; continues lines ending with `\`.
#[derive(Debug, Default)]
pub(crate) struct CommandCompleter {
    extra: Arc<Mutex<Vec<String>>>,
}

impl Completer for CommandCompleter {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let head = line.get(..pos).unwrap_or(line);
        if head.starts_with('/') && !head.contains(' ') {
            let extra = self.extra.lock().map(|e| e.clone()).unwrap_or_default();
            let found = COMMANDS
                .iter()
                .map(|c| c.name.to_owned())
                .chain(extra)
                .filter(|n| n.starts_with(head))
                .map(|n| format!("{n} "))
                .collect();
            return Ok((0, found));
        }
        if let Some(found) = super::ext::complete_args(head) {
            return Ok(found);
        }
        if let Some(rest) = head.strip_prefix("/mode ") {
            let found = ["ask", "auto-edit", "auto", "plan"]
                .iter()
                .filter(|m| m.starts_with(rest))
                .map(|m| (*m).to_owned())
                .collect();
            return Ok(("/mode ".len(), found));
        }
        Ok((pos, Vec::new()))
    }
}

impl Hinter for CommandCompleter {
    type Hint = String;
}
impl Highlighter for CommandCompleter {}
/// A line ending with `\` continues on the next line.
impl Validator for CommandCompleter {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        if ctx.input().ends_with('\\') {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}
impl Helper for CommandCompleter {}

/// Builds the editor and loads the history file (a missing or unreadable file only
/// means an empty history).
pub(crate) fn editor(
    history: Option<&Path>,
    extra: Arc<Mutex<Vec<String>>>,
) -> rustyline::Result<LineEditor> {
    let config = Config::builder()
        .auto_add_history(false)
        .history_ignore_space(true)
        .max_history_size(2000)?
        .build();
    let mut ed: LineEditor = Editor::with_config(config)?;
    ed.set_helper(Some(CommandCompleter { extra }));
    if let Some(path) = history {
        let _ = ed.load_history(path);
    }
    Ok(ed)
}

/// Where the history lives: `history` in the store directory.
pub(crate) fn history_path(home: &Path) -> Option<PathBuf> {
    std::fs::create_dir_all(home).ok()?;
    Some(home.join("history"))
}

/// Lines typed while a turn runs. The terminal is in its normal (line) mode then, so
/// a line becomes readable once Enter is pressed; it is read without blocking. Only
/// when stdin is a terminal: piped input is read one prompt at a time.
#[derive(Debug)]
pub(crate) struct TypeAhead {
    enabled: bool,
}

impl TypeAhead {
    pub(crate) fn new() -> Self {
        TypeAhead {
            enabled: cfg!(unix) && std::io::stdin().is_terminal(),
        }
    }

    /// A complete line typed since the last call, if any.
    pub(crate) fn poll_line(&self) -> Option<String> {
        if !self.enabled || !stdin_readable() {
            return None;
        }
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_owned()),
        }
    }
}

#[cfg(unix)]
fn stdin_readable() -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(n) if n > 0 => fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN)),
        _ => false,
    }
}

#[cfg(not(unix))]
fn stdin_readable() -> bool {
    false
}
