//! The command line of the daemon and its clients: `keel serve` (with `--listen` and
//! the `token` sub-commands) and `keel attach` (with `--remote`).

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use keel_serve::roles::Role;

use super::{JsonArg, SessionArgs, SocketArg};

/// `keel serve`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ServeArgs {
    /// The tokens of remote clients, instead of running the daemon.
    #[command(subcommand)]
    pub command: Option<ServeCommand>,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub socket: SocketArg,
    /// Also serve remote clients over WebSocket: ws://HOST:PORT, or wss://HOST:PORT with serve.tlsCert and serve.tlsKey (default: serve.listen of the configuration).
    #[arg(long, value_name = "URL")]
    pub listen: Option<String>,
    /// Exit after this many seconds with no client connected and nothing running (0: never; default 600, never with a remote listener).
    #[arg(long, value_name = "SECS")]
    pub idle_exit: Option<u64>,
    /// The longest command line (or WebSocket message) accepted, in bytes.
    #[arg(long, value_name = "N")]
    pub max_line_bytes: Option<usize>,
}

/// `keel serve …`.
#[derive(Debug, Clone, Subcommand)]
pub enum ServeCommand {
    /// Create, list or revoke the tokens of remote clients (kept as hashes in KEEL_HOME).
    Token(TokenArgs),
}

/// `keel serve token`.
#[derive(Debug, Clone, Args)]
#[command(subcommand_required = true)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// `keel serve token …`.
#[derive(Debug, Clone, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it, once (only its hash is kept).
    #[command(
        long_about = "Creates a token for remote clients of `keel serve --listen` and prints \
                      it on stdout, once: 256 random bits as keel_ and 64 hexadecimal digits. \
                      Only its SHA-256 is kept, in KEEL_HOME/serve-tokens.json (mode 0600). A \
                      client sends it as `Authorization: Bearer …` (a browser, as its first \
                      message). Roles: observer (list, watch, read), approver (also answer \
                      approvals and questions, and interrupt), controller (everything)."
    )]
    Create(TokenCreateArgs),
    /// List the tokens: id, name, role, session, expiry, state (never the tokens themselves).
    List {
        #[command(flatten)]
        json: JsonArg,
    },
    /// Revoke a token: its open connections are closed within a second.
    Revoke {
        /// The token's id (tok_…) or its name.
        #[arg(value_name = "ID_OR_NAME")]
        token: String,
    },
}

/// `keel serve token create`.
#[derive(Debug, Clone, Args)]
pub struct TokenCreateArgs {
    /// What the token may do.
    #[arg(long, value_name = "ROLE", value_parser = role_parser())]
    pub role: Role,
    /// Bind the token to this session: it reaches and sees that session alone.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Let the token expire after this long: a number and s, m, h, d or w (90m, 12h, 7d).
    #[arg(long, value_name = "DURATION", value_parser = keel_serve::tokens::parse_duration)]
    pub expires: Option<Duration>,
    /// A label, shown by `list` and accepted by `revoke` (unique among live tokens).
    #[arg(long, value_name = "LABEL")]
    pub name: Option<String>,
    #[command(flatten)]
    pub json: JsonArg,
}

fn role_parser() -> impl TypedValueParser<Value = Role> {
    PossibleValuesParser::new(Role::ALL.map(Role::as_str)).try_map(|s: String| {
        Role::parse(&s)
            .ok_or_else(|| format!("unknown role {s:?}: use observer, approver or controller"))
    })
}

/// `keel attach`.
#[derive(Debug, Clone, Args)]
pub struct AttachArgs {
    /// The session to open (default: a new one in the workspace).
    #[arg(value_name = "SESSION_ID")]
    pub session_id: Option<String>,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub socket: SocketArg,
    /// A daemon on another machine instead of this user's socket: wss://HOST:PORT (or ws://HOST:PORT); needs --token-file.
    #[arg(
        long,
        value_name = "URL",
        requires = "token_file",
        conflicts_with = "socket"
    )]
    pub remote: Option<String>,
    /// The file holding the token for --remote, as `keel serve token create` printed it.
    #[arg(long, value_name = "FILE", requires = "remote", value_hint = clap::ValueHint::FilePath)]
    pub token_file: Option<PathBuf>,
    /// Certificates (PEM) to trust for --remote's wss://, besides the usual roots: a private authority or a self-signed certificate.
    #[arg(long, value_name = "FILE", requires = "remote", value_hint = clap::ValueHint::FilePath)]
    pub ca_cert: Option<PathBuf>,
}
