//! `keel serve`: the per-user daemon on a Unix socket.

use std::time::Duration;

use keel_serve::{Bind, ConnectionOptions, ServeOptions, StopCause};

use crate::cli::ServeArgs;
use crate::setup;

/// The exit code when a daemon already listens on the socket.
pub const ALREADY_RUNNING: i32 = 4;

/// Runs the daemon until a signal or its idle time; returns the exit code.
pub fn run(args: ServeArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel serve: cannot start the runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async move {
        let socket = keel_serve::resolve_socket_path(args.socket.socket.as_deref());
        let listener = match keel_serve::bind(&socket).await {
            Ok(Bind::Listening(l)) => l,
            Ok(Bind::AlreadyRunning(p)) => {
                eprintln!("keel serve: a daemon already listens on {}", p.display());
                return ALREADY_RUNNING;
            }
            Err(e) => {
                tracing::error!(error = %e, "daemon could not start");
                eprintln!("keel serve: {e}");
                return 1;
            }
        };
        let runtime = match setup::runtime(&args.session) {
            Ok(r) => r,
            Err(e) => {
                setup::report(&e);
                return 1;
            }
        };
        if runtime.model_spec.is_none() {
            eprintln!("keel serve: no model configured (--model, KEEL_MODEL or config); sessions need a model in session.start");
        }
        let stop = match keel_serve::stop_on_signals() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("keel serve: cannot listen for signals: {e}");
                return 1;
            }
        };
        let options = ServeOptions {
            socket: socket.clone(),
            connection: ConnectionOptions {
                workspace: Some(runtime.workspace.display().to_string()),
                available_models: runtime.kernel.config().available_models.clone(),
                max_line_bytes: args.max_line_bytes,
                ..ConnectionOptions::default()
            },
            exit_when_idle: (args.idle_exit > 0).then(|| Duration::from_secs(args.idle_exit)),
        };
        eprintln!("keel serve: listening on {}", socket.display());
        let cause = keel_serve::run(runtime.kernel, listener, &options, stop).await;
        eprintln!(
            "keel serve: stopped ({})",
            match cause {
                StopCause::Idle => "idle",
                StopCause::Stopped => "signal",
            }
        );
        0
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}
