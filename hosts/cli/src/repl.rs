//! `keel` without a subcommand: the interactive REPL.
//!
//! One session per run. A line is sent as a message and its request is followed to
//! its end (streamed text, tools, approvals, plan decisions, questions); a line
//! starting with `/` is a slash command (see docs/cli.md).

mod custom;
mod ext;
mod input;
pub(crate) mod link;
mod notices;
pub(crate) mod render;
mod rewind;
mod rules;
mod rules_cmd;
mod slash;
mod switch;
mod turn;

use std::path::PathBuf;
use std::time::Duration;

use keel_envelope::commands::SessionStart;
use keel_kernel::SessionOptions;
use rustyline::error::ReadlineError;
use tokio::sync::mpsc;

use crate::cli::{SessionArgs, WorktreeArg};
use crate::interrupt::CtrlC;
use crate::setup;
use input::{LineEditor, TypeAhead};
use link::{Backend, Events, Session};
use render::Screen;
use slash::Flow;

/// The names custom commands may not take: the REPL's own commands.
pub(crate) fn reserved_commands() -> Vec<String> {
    custom::builtins().into_iter().map(str::to_owned).collect()
}

/// [`reserved_commands`] as the slices discovery takes.
pub(crate) fn reserved_commands_str() -> Vec<&'static str> {
    custom::builtins()
}

/// The running REPL.
pub(crate) struct Repl {
    rt: tokio::runtime::Runtime,
    kernel: Backend,
    session: Session,
    events: Events,
    editor: LineEditor,
    history: Option<PathBuf>,
    screen: Screen,
    ctrlc: CtrlC,
    typeahead: TypeAhead,
    /// Tokens in context and the context window, from the last `usage.updated`.
    context: Option<(u64, u64)>,
    /// Always-allow rules kept across sessions.
    rules: rules::RulesFile,
    /// Rules added with `/rules` for this session only.
    session_rules: rules_cmd::SessionRules,
    /// Messages typed while a request ran, by request id (for `/queue`).
    queued_text: std::collections::HashMap<String, String>,
    /// `/preview`: whether messages propose edits as patches (`None`: the
    /// configuration decides).
    patch_preview: Option<bool>,
    /// Side questions asked while a request ran, waiting for their answer.
    side_pending: Vec<String>,
    /// Lines that come on their own (a background task that exited).
    notices: notices::Notices,
    /// Skills and custom commands.
    custom: custom::Custom,
}

impl std::fmt::Debug for Repl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repl")
            .field("session", &self.session.id())
            .finish_non_exhaustive()
    }
}

/// The session the REPL opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    /// A new session.
    New,
    /// A stored session: by id or a unique start of one, else the workspace's most
    /// recent; its workspace, when it does not exist here, made in the folder given
    /// from its newest checkpoint (`keel resume --materialize-to`).
    Stored(Option<String>, Option<std::path::PathBuf>),
}

/// Says on stderr where a missing workspace was made, and what it lacks.
fn tell_materialized(m: &keel_envelope::events::MaterializedWorkspace) {
    eprintln!(
        "keel: the workspace {} does not exist here; made {} from checkpoint {} ({} file(s){})",
        m.previous_workspace,
        m.workspace,
        m.checkpoint_id,
        m.restored,
        if m.missing.is_empty() {
            String::new()
        } else {
            format!(", {} missing", m.missing.len())
        }
    );
    for f in &m.missing {
        eprintln!("keel:   missing {}: {}", f.path, f.reason);
    }
}

/// The stored session `given` names (an id, or a unique start of one), or the most
/// recently active session of `workspace` when none is given.
fn stored_session(
    kernel: &keel_kernel::Kernel,
    workspace: &std::path::Path,
    given: Option<&str>,
) -> Result<String, keel_envelope::ErrorPayload> {
    use keel_envelope::{ErrorCode, ErrorPayload};
    let sessions = kernel.list_sessions()?;
    let Some(given) = given else {
        let here = |w: &str| {
            let w = std::path::Path::new(w);
            w == workspace || std::fs::canonicalize(w).is_ok_and(|c| c == workspace)
        };
        return sessions
            .into_iter()
            .filter(|s| here(&s.workspace))
            .max_by_key(|s| s.updated_at)
            .map(|s| s.session_id)
            .ok_or_else(|| {
                ErrorPayload::new(
                    ErrorCode::SessionNotFound,
                    format!(
                        "no stored session in {}; start one with `keel`, or list them all with `keel sessions list`",
                        workspace.display()
                    ),
                )
            });
    };
    let ids = sessions.iter().map(|s| s.session_id.as_str());
    match switch::named_ids(ids, given).as_slice() {
        [one] => Ok((*one).to_owned()),
        // Resuming it says that no such session is stored.
        [] => Ok(given.to_owned()),
        many => Err(ErrorPayload::new(
            ErrorCode::SessionNotFound,
            format!(
                "{given:?} starts {} sessions ({}{}); give more of the id",
                many.len(),
                many[..many.len().min(5)].join(", "),
                if many.len() > 5 { ", …" } else { "" }
            ),
        )),
    }
}

/// Runs the REPL on a new or a stored session; returns the exit code.
pub fn run(common: SessionArgs, open: Open, isolation: WorktreeArg) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel: cannot start the runtime: {e}");
            return 1;
        }
    };
    let started = rt.block_on(async {
        let runtime = setup::runtime(&common).map_err(|e| {
            setup::report(&e);
            1
        })?;
        if let Open::Stored(given, into) = &open {
            let resumed =
                match stored_session(&runtime.kernel, &runtime.workspace, given.as_deref()) {
                    Ok(id) => match into {
                        Some(dir) => match runtime.kernel.resume_session_into(&id, dir).await {
                            Ok((session, events, made)) => {
                                if let Some(m) = made {
                                    tell_materialized(&m);
                                }
                                Ok((session, events))
                            }
                            Err(e) => Err(e),
                        },
                        None => runtime.kernel.resume_session(&id, None).await,
                    },
                    Err(e) => Err(e),
                };
            let (session, events) = resumed.map_err(|e| {
                setup::report(&e);
                1
            })?;
            return Ok((runtime, session, events));
        }
        if runtime.model_spec.is_none() {
            eprintln!("keel: {}", setup::NO_MODEL);
            return Err(2);
        }
        let opts = SessionStart::from(SessionOptions {
            workspace_path: Some(runtime.workspace.display().to_string()),
            permission_mode: common.mode.mode,
            model: None,
            title: None,
        })
        .isolation(isolation.isolation())
        .base_ref(isolation.base_ref.clone());
        let (session, events) = runtime.kernel.start_session(opts).await.map_err(|e| {
            setup::report(&e);
            1
        })?;
        Ok((runtime, session, events))
    });
    let (runtime, session, events) = match started {
        Ok(x) => x,
        Err(code) => {
            rt.shutdown_timeout(Duration::from_secs(2));
            return code;
        }
    };
    let opened = Opened {
        backend: Backend::Local(runtime.kernel),
        session: Session::Local(session),
        events: Events::Local(events),
        home: runtime.home,
        workspace: runtime.workspace,
        resumed: open != Open::New,
        running: None,
        skills: runtime.skills,
    };
    run_opened(rt, opened)
}

/// A session ready for the REPL, local or in the daemon.
pub(crate) struct Opened {
    pub(crate) backend: Backend,
    pub(crate) session: Session,
    pub(crate) events: Events,
    /// `KEEL_HOME`: history and saved rules.
    pub(crate) home: PathBuf,
    pub(crate) workspace: PathBuf,
    pub(crate) resumed: bool,
    /// A request already running in the session (attaching to a busy one).
    pub(crate) running: Option<String>,
    /// Where skills and custom commands are found.
    pub(crate) skills: keel_skills::Settings,
}

/// Runs the REPL on an opened session; returns the exit code.
pub(crate) fn run_opened(rt: tokio::runtime::Runtime, opened: Opened) -> i32 {
    let Opened {
        backend,
        session,
        events,
        home,
        workspace,
        resumed,
        running,
        skills,
    } = opened;
    let ctrlc = rt.block_on(async { CtrlC::install() });
    let rules = rules::RulesFile::new(&home, &workspace);
    let history = input::history_path(&home);
    let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut editor = match input::editor(history.as_deref(), names.clone()) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("keel: cannot open the terminal: {e}");
            let _ = rt.block_on(session.close());
            rt.shutdown_timeout(Duration::from_secs(2));
            return 1;
        }
    };
    let mut screen = Screen::new();
    if let Some((cols, _)) = editor.dimensions() {
        screen.set_width(usize::from(cols));
    }
    let printer = editor
        .create_external_printer()
        .ok()
        .map(|p| Box::new(p) as notices::Printer);
    let (notices, events) = match (&backend, events) {
        (Backend::Local(k), events) => (
            notices::Notices::start(&rt, k.subscribe(), printer, screen.style),
            events,
        ),
        (Backend::Remote(_), Events::Remote(rx)) => {
            let (n, rx) = notices::Notices::start_remote(&rt, rx, printer, screen.style);
            (n, Events::Remote(rx))
        }
        (Backend::Remote(_), events) => (
            notices::Notices::start_remote(&rt, mpsc::unbounded_channel().1, printer, screen.style)
                .0,
            events,
        ),
    };
    let mut repl = Repl {
        rt,
        kernel: backend,
        session,
        events,
        editor,
        history,
        screen,
        ctrlc,
        typeahead: TypeAhead::new(),
        context: None,
        rules,
        session_rules: Default::default(),
        queued_text: Default::default(),
        patch_preview: None,
        side_pending: Vec::new(),
        notices,
        custom: custom::Custom::new(skills, &workspace, names),
    };
    tracing::info!(
        session_id = %repl.session.id(),
        resumed,
        remote = repl.session.is_remote(),
        "REPL session opened"
    );
    repl.banner();
    repl.custom_notice();
    repl.apply_saved_rules(None);
    if let Some(rid) = running {
        let line = repl
            .screen
            .style
            .dim("a request is running; following it (Ctrl-C interrupts it)");
        repl.screen.line(&line);
        repl.follow(rid);
    }
    let code = repl.main_loop();
    repl.finish();
    let Repl { rt, .. } = repl;
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}

impl Repl {
    fn banner(&mut self) {
        let st = self.screen.style;
        let s = self.session.state().session;
        self.screen.line(&format!(
            "{} {}",
            st.bold("keel"),
            st.dim(env!("CARGO_PKG_VERSION"))
        ));
        self.screen.line(&st.dim(&format!(
            "model {} · mode {} · workspace {}",
            s.model,
            s.permission_mode.as_str(),
            s.workspace
        )));
        self.screen.line(
            &st.dim(
                "Type a message, /help for commands. Ctrl-C interrupts a request; Ctrl-D exits.",
            ),
        );
    }

    fn prompt(&self) -> (String, String) {
        let mode = self.session.state().session.permission_mode;
        let mode = mode.as_str();
        let raw = format!("{mode} › ");
        let st = self.screen.style;
        let styled = format!("{} {} ", st.cyan(mode), st.bold("›"));
        (raw, styled)
    }

    /// Reads lines until the person leaves; returns the exit code.
    fn main_loop(&mut self) -> i32 {
        let mut ctrl_c_at_prompt = 0;
        loop {
            if let Some((cols, _)) = self.editor.dimensions() {
                self.screen.set_width(usize::from(cols));
            }
            // Answers to earlier commands nobody waited for.
            while self.events.try_recv().is_some() {}
            let (raw, styled) = self.prompt();
            for line in self.notices.at_prompt() {
                self.screen.line(&line);
            }
            let read = self.editor.readline(&(raw.as_str(), styled.as_str()));
            self.notices.busy();
            match read {
                Ok(line) => {
                    ctrl_c_at_prompt = 0;
                    let private = line.starts_with(' ');
                    let line = line.trim();
                    if line.is_empty() {
                        continue;
                    }
                    if !private {
                        let _ = self.editor.add_history_entry(line);
                    }
                    if slash::is_command(line) {
                        if self.slash(line) == Flow::Quit {
                            return 0;
                        }
                    } else {
                        let message = line
                            .strip_prefix("//")
                            .map_or(line.to_owned(), |m| format!("/{m}"))
                            .replace("\\\n", "\n");
                        self.send(&message, None);
                    }
                }
                Err(ReadlineError::Interrupted) => {
                    ctrl_c_at_prompt += 1;
                    if ctrl_c_at_prompt >= 2 {
                        return 0;
                    }
                    let hint = self.screen.style.dim("(Ctrl-C again or Ctrl-D to exit)");
                    self.screen.line(&hint);
                }
                Err(ReadlineError::Eof) => return 0,
                Err(e) => {
                    eprintln!("keel: cannot read input: {e}");
                    return 1;
                }
            }
        }
    }

    /// Saves the history and closes the session.
    fn finish(&mut self) {
        if let Some(path) = &self.history {
            let _ = self.editor.save_history(path);
        }
        if let Err(e) = self.rt.block_on(self.session.close()) {
            eprintln!("keel: the session did not close cleanly: {}", e.message);
        }
        self.rt.block_on(self.kernel.shutdown());
        let bye = if self.session.is_remote() {
            format!(
                "detached; the session goes on in the daemon (keel attach {})",
                self.session.id()
            )
        } else {
            "bye".to_owned()
        };
        let bye = self.screen.style.dim(&bye);
        self.screen.line(&bye);
    }

    /// Gives the session the rules kept for this project, added to `current`.
    fn apply_saved_rules(&mut self, current: Option<keel_envelope::types::ApprovalRules>) {
        let saved = match self.rules.load() {
            Ok(r) => r,
            Err(e) => {
                self.warn_line(&format!("saved approval rules ignored: {e}"));
                return;
            }
        };
        let mut rules = current.clone().unwrap_or_default();
        for r in saved.always_allow_global {
            if !rules.always_allow_global.contains(&r) {
                rules.always_allow_global.push(r);
            }
        }
        for r in saved.always_allow_project {
            if !rules.always_allow_project.contains(&r) {
                rules.always_allow_project.push(r);
            }
        }
        if Some(&rules) == current.as_ref() || rules == Default::default() {
            return;
        }
        if let Err(e) = self.rt.block_on(self.session.set_rules(rules)) {
            self.warn_line(&format!("saved approval rules not applied: {}", e.message));
        }
    }

    /// Keeps rules added by an "always" approval for the next sessions.
    fn save_rules(&mut self, rules: &keel_envelope::types::ApprovalRules) {
        let lasting = self.session_rules.lasting(rules);
        if let Err(e) = self.rules.save(&lasting) {
            self.warn_line(&format!("could not save the approval rules: {e}"));
        }
    }

    fn warn_line(&mut self, text: &str) {
        let line = self.screen.style.yellow(text);
        self.screen.line(&line);
    }

    fn error_line(&mut self, text: &str) {
        let line = self.screen.style.red(text);
        self.screen.line(&line);
    }
}
