//! The `keel` binary: flag parsing and glue only. The work lives in the library crates.

mod acp_cmd;
mod attach_cmd;
mod bridge_cmd;
mod cli;
mod demo_cmd;
mod doctor_checkpoints;
mod doctor_cmd;
mod doctor_mcp;
mod doctor_skills;
mod doctor_store;
mod doctor_telemetry;
mod doctor_worktrees;
mod exec_cmd;
mod interrupt;
mod logging;
mod markdown;
mod policy_cmd;
mod portable_cmd;
mod render;
mod repl;
mod serve_cmd;
mod sessions_cmd;
mod setup;
mod store_select;
mod telemetry;
mod tool_cmd;

use clap::{CommandFactory, FromArgMatches};

use cli::{Cli, Command};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cli = match Cli::command()
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
        .and_then(Cli::resolve)
    {
        Ok(cli) => cli,
        Err(e) => std::process::exit(usage_error(&args, e)),
    };
    std::process::exit(run(cli))
}

/// Reports a command-line error (or prints the help or version asked for); returns
/// the exit code: 0 for help and version, 2 for a usage error.
fn usage_error(args: &[String], e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    let asked = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    let json = cli::command_name(args).is_some_and(|c| cli::JSON_ERROR_COMMANDS.contains(&c));
    if json && !asked {
        return policy_cmd::usage_error(&e);
    }
    let _ = e.print();
    e.exit_code()
}

fn run(cli: Cli) -> i32 {
    if let Some(Command::Completions(a)) = &cli.command {
        let mut cmd = Cli::command();
        clap_complete::generate(a.shell, &mut cmd, "keel", &mut std::io::stdout());
        return 0;
    }
    let (log, telemetry) = logging::init(cli.global.log_stderr);
    let name = cli.command.as_ref().map_or("repl", Command::name);
    tracing::info!(
        command = name,
        version = env!("CARGO_PKG_VERSION"),
        pid = std::process::id(),
        "keel started"
    );
    let code = dispatch(cli, log);
    tracing::info!(command = name, code, "keel finished");
    // The last spans and metrics, within a bound (an endpoint that is down or hangs
    // delays the exit by that much at most).
    telemetry::finish(telemetry);
    code
}

fn dispatch(cli: Cli, log: logging::LogSetup) -> i32 {
    match cli.command {
        Some(Command::Exec(a)) => exec_cmd::run(a),
        Some(Command::Resume(a)) => repl::run(
            a.session,
            repl::Open::Stored(a.session_id, a.materialize_to),
            Default::default(),
        ),
        Some(Command::Demo) => demo_cmd::run(),
        Some(Command::Sessions(a)) => sessions_cmd::run(a),
        Some(Command::Bridge(a)) => bridge_cmd::run(a),
        Some(Command::Serve(a)) => serve_cmd::run(a),
        Some(Command::Attach(a)) => attach_cmd::run(a),
        Some(Command::Acp(a)) => acp_cmd::run(a),
        Some(Command::Policy(a)) => policy_cmd::run(a),
        Some(Command::Tool(a)) => tool_cmd::run(a),
        Some(Command::Doctor(a)) => doctor_cmd::run(a, &log),
        Some(Command::Completions(_)) => 0,
        None => repl::run(
            cli.repl.session,
            cli.repl
                .resume
                .map_or(repl::Open::New, |id| repl::Open::Stored(Some(id), None)),
            cli.repl.isolation,
        ),
    }
}
