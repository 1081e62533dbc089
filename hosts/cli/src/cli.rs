//! The command line of the `keel` binary, declared once with clap: the sub-commands,
//! their flags, the flags they share, and the global ones. `docs/cli.md`'s flag tables
//! and the shell completions are generated from these declarations.

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};
use keel_envelope::types::PermissionMode;

mod daemon;
pub use daemon::*;

/// The `keel` command line.
#[derive(Debug, Parser)]
#[command(
    name = "keel",
    version,
    about = "Keel: an agent runtime. Without a command, starts the interactive REPL.",
    long_about = "Keel: an agent runtime.\n\nWithout a command, `keel` starts an interactive \
                  session (the REPL) in the workspace. Type a message and press Enter; /help \
                  lists the slash commands; Ctrl-D exits.",
    disable_help_subcommand = false,
    after_help = "Run `keel help <command>` or `keel <command> --help` for the details of a command."
)]
pub struct Cli {
    /// Flags every command accepts.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The REPL's flags, when no command is given.
    #[command(flatten)]
    pub repl: ReplArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags every command accepts.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    /// Also write the log to stderr (the log file under KEEL_HOME/logs is always written).
    #[arg(long, global = true)]
    pub log_stderr: bool,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one request headless and exit (exit code 0, 1, 2, 3, 4 or 130).
    #[command(
        long_about = "Runs one request in a new session and exits. Without --json the session \
                      is printed as the REPL shows it; with --json every envelope is one JSON \
                      line on stdout. Nobody can answer in exec mode: approvals are denied, \
                      plans rejected, questions answered \"no user is available\".\n\nExit \
                      codes: 0 completed, 1 failed, 2 bad usage or set-up, 3 a call was denied, \
                      130 interrupted."
    )]
    Exec(ExecArgs),
    /// Open a stored session in the REPL.
    Resume(ResumeArgs),
    /// Run an offline demo session on the built-in scripted model.
    Demo,
    /// List or delete the sessions in the store (KEEL_HOME).
    Sessions(SessionsArgs),
    /// Serve the stdio JSON-lines bridge for desktop hosts.
    Bridge(BridgeArgs),
    /// Run the per-user daemon that several clients attach to (a Unix socket, and WebSocket with --listen).
    #[command(
        long_about = "Runs the per-user daemon: one runtime whose sessions several clients \
                      (keel attach, the desktop app, editors) use at once, over a Unix socket \
                      speaking the bridge's JSON-lines protocol. The socket is only for this \
                      user (mode 0600, in a directory only this user may write to). With \
                      --listen ws://HOST:PORT (or wss://, with serve.tlsCert and serve.tlsKey \
                      in the configuration) it also serves remote clients holding a token of \
                      `keel serve token create`.\n\nExit codes: 0 stopped (a signal, or idle), \
                      1 could not start (an unsafe directory, a bad workspace, a listener that \
                      cannot be bound), 2 bad usage, 4 a daemon already listens on the socket \
                      (its path is printed)."
    )]
    Serve(ServeArgs),
    /// Open the REPL on a session held by the daemon (starting the daemon if needed).
    #[command(
        long_about = "Opens the REPL on a session of the daemon: a new one, or SESSION_ID \
                      (watched if the daemon has it open, else resumed from the store). The \
                      daemon is started in the background when none answers. Leaving the REPL \
                      detaches: the session and any running request go on in the daemon; \
                      `keel attach <id>` comes back to it. With --remote wss://HOST:PORT and \
                      --token-file, it opens the REPL on a daemon on another machine, doing \
                      what the token's role allows."
    )]
    Attach(AttachArgs),
    /// Serve the Agent Client Protocol on stdio, for editors.
    Acp(AcpArgs),
    /// Show what the permission gate decides for one tool call.
    Policy(PolicyArgs),
    /// Run one tool through the permission gate (ask mode, nobody to approve).
    Tool(ToolArgs),
    /// Check the installation and the configuration, with a fix for each problem.
    Doctor(DoctorArgs),
    /// Print a shell completion script.
    #[command(
        long_about = "Prints a completion script for the shell on stdout.\n\nbash: \
                      `keel completions bash > ~/.local/share/bash-completion/completions/keel`\n\
                      zsh: `keel completions zsh > ~/.zfunc/_keel` (with ~/.zfunc in fpath)\n\
                      fish: `keel completions fish > ~/.config/fish/completions/keel.fish`"
    )]
    Completions(CompletionsArgs),
}

impl Command {
    /// The command's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Exec(_) => "exec",
            Command::Resume(_) => "resume",
            Command::Demo => "demo",
            Command::Sessions(_) => "sessions",
            Command::Bridge(_) => "bridge",
            Command::Serve(_) => "serve",
            Command::Attach(_) => "attach",
            Command::Acp(_) => "acp",
            Command::Policy(_) => "policy",
            Command::Tool(_) => "tool",
            Command::Doctor(_) => "doctor",
            Command::Completions(_) => "completions",
        }
    }
}

/// `--workspace`, the same for every command that takes it.
#[derive(Debug, Clone, Default, Args)]
pub struct WorkspaceArg {
    /// The project directory the session works in (default: the current directory).
    #[arg(short = 'w', long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub workspace: Option<PathBuf>,
}

/// `--model`, the same for every command that takes it.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelArg {
    /// The model, provider:model (default: KEEL_MODEL, else the configuration).
    #[arg(short = 'm', long, value_name = "PROVIDER:MODEL")]
    pub model: Option<String>,
}

/// `--mode`, the same for every command that takes it.
#[derive(Debug, Clone, Default, Args)]
pub struct ModeArg {
    /// The permission mode (default: permissionMode of the configuration, else ask).
    #[arg(long, alias = "permission-mode", value_name = "MODE", value_parser = mode_parser())]
    pub mode: Option<PermissionMode>,
}

/// `--worktree`, the same for `keel` and `keel exec`.
#[derive(Debug, Clone, Default, Args)]
pub struct WorktreeArg {
    /// Work in a new git worktree of the workspace, on a new branch keel/<short id>
    /// (default: `isolation` of the configuration).
    #[arg(long, conflicts_with = "no_worktree")]
    pub worktree: bool,
    /// Work in the workspace itself, whatever the configuration's `isolation`.
    #[arg(long)]
    pub no_worktree: bool,
    /// The commit the worktree starts at (default: HEAD).
    #[arg(long, value_name = "REF")]
    pub base_ref: Option<String>,
}

impl WorktreeArg {
    /// The `session.start` isolation these flags ask for (`None`: the configuration's).
    pub fn isolation(&self) -> Option<keel_envelope::worktree::Isolation> {
        use keel_envelope::worktree::Isolation;
        match (self.worktree, self.no_worktree) {
            (true, _) => Some(Isolation::Worktree),
            (_, true) => Some(Isolation::None),
            _ => None,
        }
    }
}

/// `--json`, the same for every command that takes it.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct JsonArg {
    /// Print JSON on stdout instead of text, and nothing else (`exec`: one envelope per line).
    #[arg(long)]
    pub json: bool,
}

/// `--store`, the same for every command that takes it.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArg {
    /// Where sessions are kept: a directory, or a PostgreSQL URL
    /// (postgres://USER:PASSWORD@HOST:5432/DATABASE) that several nodes may share
    /// (default: KEEL_STORE, else `store` in config.toml, else KEEL_HOME).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
}

/// The flags of every command that runs sessions: workspace, model, mode and store.
#[derive(Debug, Clone, Default, Args)]
pub struct SessionArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub model: ModelArg,
    #[command(flatten)]
    pub mode: ModeArg,
    #[command(flatten)]
    pub store: StoreArg,
}

/// The REPL's flags.
#[derive(Debug, Clone, Default, Args)]
pub struct ReplArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Open this stored session instead of starting a new one.
    #[arg(long, value_name = "SESSION_ID")]
    pub resume: Option<String>,
    #[command(flatten)]
    pub isolation: WorktreeArg,
}

/// `keel exec`.
#[derive(Debug, Clone, Args)]
pub struct ExecArgs {
    /// The message to send (quote it); `-`, or none with standard input not a
    /// terminal, reads it from standard input.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
    /// Write every model response of the session to FILE in the scripted model's
    /// format; `--model scripted:FILE` replays the session offline.
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub isolation: WorktreeArg,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `keel resume`.
#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    /// The stored session's id, or a unique start of it (default: the workspace's most
    /// recent session).
    #[arg(value_name = "SESSION_ID")]
    pub session_id: Option<String>,
    /// When the session's workspace does not exist on this machine: make it in DIR (absent or empty) from the session's newest checkpoint, and work there.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub materialize_to: Option<PathBuf>,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `keel sessions`.
#[derive(Debug, Clone, Args)]
#[command(subcommand_required = true, arg_required_else_help = false)]
pub struct SessionsArgs {
    #[command(subcommand)]
    pub command: SessionsCommand,
}

/// `keel sessions …`.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsCommand {
    /// List the sessions: id, state, mode, title, workspace (from the daemon when one runs).
    List {
        #[command(flatten)]
        json: JsonArg,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Delete a session: its event log and state are removed for good (through the daemon when one runs).
    Delete {
        /// The session's id (as `keel sessions list` shows it).
        #[arg(value_name = "ID")]
        session_id: String,
        #[command(flatten)]
        socket: SocketArg,
    },
    /// Export a session to one file: its state, conversation, event log and checkpoints (a gzip-compressed tar, read from the configured store).
    Export {
        /// The session's id (as `keel sessions list` shows it).
        #[arg(value_name = "ID")]
        session_id: String,
        /// The file to write (replaced whole).
        #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
        file: PathBuf,
        #[command(flatten)]
        json: JsonArg,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Import a session exported by `keel sessions export` into the configured store, its checkpoints into the checkpoint store of its workspace here.
    Import {
        /// The export file.
        #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
        file: PathBuf,
        /// The session's workspace on this machine (default: the path it had); a folder that does not exist or is empty is made from the newest checkpoint, one with files is used as it is.
        #[arg(short = 'w', long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
        workspace: Option<PathBuf>,
        /// Give the session a new id (without it, an id the store has already is refused).
        #[arg(long)]
        as_new: bool,
        /// Take in only the checkpoints, for a session the store has already (a node of a shared database that lacks them), into the checkpoint store of the workspace the store names.
        #[arg(long, conflicts_with_all = ["as_new", "workspace"])]
        checkpoints_only: bool,
        #[command(flatten)]
        json: JsonArg,
        #[command(flatten)]
        store: StoreArg,
    },
    /// Prune checkpoints: those older than the age limit go, then the oldest beyond checkpoints.maxBytes (closed sessions' first), and what only they used is freed. Sessions some process holds open keep theirs; sessions' logs stay.
    Prune {
        /// Drop the checkpoints older than D: a number with `d` (days), `h` or `m`, or a plain number of days (default: checkpoints.maxAgeDays).
        #[arg(long, value_name = "D", value_parser = crate::sessions_cmd::parse_age)]
        older_than: Option<std::time::Duration>,
        /// Say what would go and what it would free; change nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonArg,
    },
}

/// `--socket`, the same for every command that takes it.
#[derive(Debug, Clone, Default, Args)]
pub struct SocketArg {
    /// The daemon's socket (default: KEEL_SOCKET, else $XDG_RUNTIME_DIR/keel-$UID.sock, else ${TMPDIR:-/tmp}/keel-$UID/keel.sock).
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub socket: Option<PathBuf>,
}

/// `keel bridge`.
#[derive(Debug, Clone, Args)]
pub struct BridgeArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Resume this stored session at start-up.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// The longest command line accepted, in bytes.
    #[arg(long, value_name = "N")]
    pub max_line_bytes: Option<usize>,
}

/// `keel acp`.
#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub session: SessionArgs,
}

/// `keel policy`.
#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

/// `keel policy …`.
#[derive(Debug, Clone, Subcommand)]
pub enum PolicyCommand {
    /// Print the gate's verdict on one call as one JSON object.
    Check {
        #[command(flatten)]
        call: CallArgs,
        #[command(flatten)]
        mode: ModeArg,
    },
}

/// A tool call given on the command line.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("workspace", |a| a
    .help("The workspace the call runs in or is checked against (required; also before the command)")))]
pub struct CallArgs {
    /// The tool's name (read_file, list_dir, search_files, edit_file, write_file, run_shell, git).
    #[arg(value_name = "TOOL")]
    pub tool: String,
    /// The tool's arguments, one JSON object.
    #[arg(value_name = "JSON_ARGS")]
    pub args: String,
    #[command(flatten)]
    pub workspace: WorkspaceArg,
}

/// `keel tool`.
#[derive(Debug, Clone, Args)]
pub struct ToolArgs {
    #[command(flatten)]
    pub call: CallArgs,
}

/// `keel doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub workspace: WorkspaceArg,
    #[command(flatten)]
    pub store: StoreArg,
    #[command(flatten)]
    pub model: ModelArg,
    #[command(flatten)]
    pub json: JsonArg,
    /// How long each model endpoint may take to answer, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub timeout: u64,
}

/// `keel completions`.
#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Parses a permission mode by its wire spelling; the possible values are listed in
/// the help and the completions.
fn mode_parser() -> ModeParser {
    ModeParser
}

/// The value parser of `--mode`.
#[derive(Debug, Clone, Copy)]
pub struct ModeParser;

impl TypedValueParser for ModeParser {
    type Value = PermissionMode;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PermissionMode, clap::Error> {
        let text = value.to_string_lossy();
        PermissionMode::parse(&text).ok_or_else(|| {
            let flag = arg
                .and_then(|a| a.get_long())
                .map_or_else(|| "mode".to_owned(), |l| format!("--{l}"));
            let mut e = clap::Error::raw(
                clap::error::ErrorKind::InvalidValue,
                format!("unknown mode {text:?} for {flag}: use ask, auto-edit, auto or plan\n"),
            )
            .with_cmd(cmd);
            e.insert(
                clap::error::ContextKind::InvalidArg,
                clap::error::ContextValue::String(flag),
            );
            e
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            PermissionMode::ALL
                .iter()
                .map(|m| clap::builder::PossibleValue::new(m.as_str())),
        ))
    }
}

impl Cli {
    /// Hands the session flags given before a command (`keel --model m exec …`, as
    /// with git's `-C`) to the command, when it takes them and was not given the same
    /// flag with another value; refuses them, saying why, where they would be ignored
    /// (`keel --model m sessions list`) or contradicted.
    pub fn resolve(mut self) -> Result<Cli, clap::Error> {
        let Some(command) = self.command.as_mut() else {
            return Ok(self);
        };
        let before = std::mem::take(&mut self.repl);
        let name = command.name();
        let refuse = |message: String| {
            use clap::CommandFactory;
            Cli::command().error(clap::error::ErrorKind::ArgumentConflict, message)
        };
        if before.resume.is_some() {
            return Err(refuse(format!(
                "--resume opens a session in the REPL and means nothing before `keel {name}`; \
                 use `keel resume SESSION_ID`"
            )));
        }
        let (workspace, model, mode) = match command {
            Command::Exec(ExecArgs { session, .. })
            | Command::Resume(ResumeArgs { session, .. })
            | Command::Serve(ServeArgs { session, .. })
            | Command::Attach(AttachArgs { session, .. })
            | Command::Bridge(BridgeArgs { session, .. })
            | Command::Acp(AcpArgs { session }) => (
                Some(&mut session.workspace),
                Some(&mut session.model),
                Some(&mut session.mode),
            ),
            Command::Doctor(a) => (Some(&mut a.workspace), Some(&mut a.model), None),
            Command::Tool(ToolArgs { call }) => (Some(&mut call.workspace), None, None),
            Command::Policy(PolicyArgs {
                command: PolicyCommand::Check { call, mode },
            }) => (Some(&mut call.workspace), None, Some(mode)),
            _ => (None, None, None),
        };
        let given = before.session;
        forward(
            "--workspace",
            name,
            given.workspace.workspace,
            workspace.map(|w| &mut w.workspace),
        )
        .map_err(refuse)?;
        forward(
            "--model",
            name,
            given.model.model,
            model.map(|m| &mut m.model),
        )
        .map_err(refuse)?;
        forward("--mode", name, given.mode.mode, mode.map(|m| &mut m.mode)).map_err(refuse)?;
        // A tool call names its workspace, before or after the command's name.
        if let Some(
            Command::Tool(ToolArgs { call })
            | Command::Policy(PolicyArgs {
                command: PolicyCommand::Check { call, .. },
            }),
        ) = &self.command
        {
            if call.workspace.workspace.is_none() {
                use clap::error::{ContextKind, ContextValue, ErrorKind};
                use clap::CommandFactory;
                let mut cmd = Cli::command();
                cmd.build();
                let mut e = clap::Error::new(ErrorKind::MissingRequiredArgument);
                e.insert(
                    ContextKind::InvalidArg,
                    ContextValue::Strings(vec!["--workspace <DIR>".into()]),
                );
                if let Some(sub) = cmd.find_subcommand_mut(name) {
                    e = e.with_cmd(sub);
                    e.insert(
                        ContextKind::Usage,
                        ContextValue::StyledStr(sub.render_usage()),
                    );
                }
                return Err(e);
            }
        }
        Ok(self)
    }
}

/// Moves one flag given before the command into the command's own, or says why not.
fn forward<T: PartialEq>(
    flag: &str,
    command: &str,
    before: Option<T>,
    after: Option<&mut Option<T>>,
) -> Result<(), String> {
    let Some(value) = before else {
        return Ok(());
    };
    match after {
        None => Err(format!("{flag} means nothing for `keel {command}`, which does not take it")),
        Some(slot) => match slot {
            Some(own) if *own != value => Err(format!(
                "{flag} is given twice, before and after `{command}`, with different values; give it once"
            )),
            _ => {
                *slot = Some(value);
                Ok(())
            }
        },
    }
}

/// The commands whose errors are printed as one JSON object on stdout
/// (`{ok: false, error}`), because their output is JSON.
pub const JSON_ERROR_COMMANDS: &[&str] = &["policy", "tool"];

/// The flags before a command that take a value as the next word.
const VALUE_FLAGS: &[&str] = &[
    "-w",
    "--workspace",
    "-m",
    "--model",
    "--mode",
    "--permission-mode",
    "--resume",
];

/// The command named on a command line (the first word that is neither a flag nor a
/// flag's value), if any.
pub fn command_name(args: &[String]) -> Option<&str> {
    let mut words = args.iter().skip(1).map(String::as_str);
    while let Some(word) = words.next() {
        if VALUE_FLAGS.contains(&word) {
            words.next();
        } else if !word.starts_with('-') {
            return Some(word);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_declarations_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_command_name_is_the_first_word() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_name(&args(&["keel", "--log-stderr", "tool", "x"])),
            Some("tool")
        );
        assert_eq!(command_name(&args(&["keel", "--help"])), None);
        assert_eq!(
            command_name(&args(&[
                "keel",
                "-w",
                "tool",
                "--model=x",
                "policy",
                "check"
            ])),
            Some("policy")
        );
        assert_eq!(command_name(&args(&["keel", "--mode"])), None);
    }
}

/// The flag tables of `docs/cli.md`, generated from the declarations above (checked
/// by a test that regenerates them with `KEEL_UPDATE_GENERATED=1`).
#[cfg(test)]
pub mod docs;
