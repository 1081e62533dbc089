//! `keel attach [SESSION_ID]`: the REPL on a session held by the daemon, starting the
//! daemon in the background when none answers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_config::{default_keel_home, Config, EnvMap};
use keel_envelope::commands::{CommandPayload, SessionStart};
use keel_envelope::events::RuntimeReady;
use keel_envelope::{Envelope, Event};
use keel_serve::{Client, ConnectError};
use tokio::sync::mpsc;

use crate::cli::{AttachArgs, SessionArgs};
use crate::repl::link::{Backend, Events, Remote, Session};
use crate::repl::{run_opened, Opened};

/// How long to wait for a daemon started here to answer.
const START_WAIT: Duration = Duration::from_secs(20);

type Connected = (Client, RuntimeReady, mpsc::UnboundedReceiver<Envelope>);

/// Starts `keel serve` for this socket, detached: its own process group, no terminal.
fn spawn_daemon(socket: &Path, common: &SessionArgs) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("serve").arg("--socket").arg(socket);
    if let Some(w) = &common.workspace.workspace {
        cmd.arg("--workspace").arg(w);
    }
    if let Some(m) = &common.model.model {
        cmd.arg("--model").arg(m);
    }
    if let Some(m) = &common.mode.mode {
        cmd.arg("--mode").arg(m.as_str());
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
}

/// Connects to the daemon, starting one when none answers.
pub(crate) async fn connect_or_start(
    socket: &Path,
    common: &SessionArgs,
) -> Result<Connected, String> {
    match Client::connect(socket).await {
        Ok(c) => return Ok(c),
        Err(ConnectError::VersionMismatch(v)) => {
            return Err(ConnectError::VersionMismatch(v).to_string())
        }
        Err(e) => tracing::info!(error = %e, "no daemon answers; starting one"),
    }
    let mut child = spawn_daemon(socket, common)
        .map_err(|e| format!("cannot start the daemon (keel serve): {e}"))?;
    let started = tokio::time::Instant::now();
    loop {
        match Client::connect(socket).await {
            Ok(c) => return Ok(c),
            Err(ConnectError::VersionMismatch(v)) => {
                return Err(ConnectError::VersionMismatch(v).to_string())
            }
            Err(_) => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Exit 4: another daemon won the start-up race; it answers soon.
            if status.code() != Some(crate::serve_cmd::ALREADY_RUNNING) {
                return Err(format!(
                    "the daemon could not start ({status}); run `keel serve --socket {}` to see why",
                    socket.display()
                ));
            }
        }
        if started.elapsed() > START_WAIT {
            return Err(format!(
                "the daemon did not answer on {} within {}s",
                socket.display(),
                START_WAIT.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn workspace_of(common: &SessionArgs) -> Result<PathBuf, String> {
    let w = match &common.workspace.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    std::fs::canonicalize(&w).map_err(|e| format!("workspace {} is not usable: {e}", w.display()))
}

/// Runs `keel attach`; returns the exit code.
pub fn run(args: AttachArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel attach: cannot start the runtime: {e}");
            return 1;
        }
    };
    let opened = rt.block_on(open(&args));
    match opened {
        Ok(o) => run_opened(rt, o),
        Err((code, message)) => {
            eprintln!("keel attach: {message}");
            rt.shutdown_timeout(Duration::from_secs(2));
            code
        }
    }
}

async fn open(args: &AttachArgs) -> Result<Opened, (i32, String)> {
    let workspace = workspace_of(&args.session).map_err(|m| (2, m))?;
    let env = EnvMap::from_process();
    let home =
        default_keel_home(&env).ok_or((2, "no store directory: set KEEL_HOME".to_owned()))?;
    let config = Config::load(&home, Some(&workspace)).map_err(|e| (2, e.message))?;
    let socket = keel_serve::resolve_socket_path(args.socket.socket.as_deref());
    let (client, ready, rx) = connect_or_start(&socket, &args.session)
        .await
        .map_err(|m| (1, m))?;
    tracing::info!(socket = %socket.display(), daemon_pid = ready.pid, "attached to the daemon");
    let backend = Backend::Remote(Remote {
        client: client.clone(),
        models: ready.available_models,
        patch_preview: config.patch_preview,
    });
    let (session, resumed, running) = match &args.session_id {
        Some(id) => {
            let o = backend.open(id).await.map_err(|e| (1, e.message))?;
            (o.session, true, o.running)
        }
        None => {
            let start = CommandPayload::SessionStart(SessionStart {
                workspace_path: Some(workspace.display().to_string()),
                permission_mode: args.session.mode.mode.clone(),
                model: args.session.model.model.clone(),
                ..SessionStart::default()
            });
            let env = client
                .request(None, start)
                .await
                .map_err(|e| (1, e.message))?;
            let Event::SessionStarted(s) = env.event else {
                return Err((1, format!("unexpected answer {}", env.type_name())));
            };
            (Session::remote(client.clone(), s.session_id), false, None)
        }
    };
    let skills = crate::setup::skill_settings(&config, &home);
    Ok(Opened {
        backend,
        session,
        events: Events::Remote(rx),
        home,
        workspace,
        resumed,
        running,
        skills,
    })
}
