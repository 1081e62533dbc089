//! `keel attach [SESSION_ID]`: the REPL on a session held by the daemon, starting the
//! daemon in the background when none answers; with `--remote URL --token-file F`, on
//! a daemon on another machine, over WebSocket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_config::{default_keel_home, Config, EnvMap};
use keel_envelope::commands::{CommandPayload, SessionStart};
use keel_envelope::Event;
use keel_serve::{Client, ConnectError};

use crate::cli::{AttachArgs, SessionArgs};
use crate::repl::link::{Backend, Events, Remote, Session};
use crate::repl::{run_opened, Opened};

/// How long to wait for a daemon started here to answer.
const START_WAIT: Duration = Duration::from_secs(20);

use keel_serve::Connected;

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
    if let Some(s) = &common.store.store {
        cmd.arg("--store").arg(s);
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
    if let Some(url) = &args.remote {
        return open_remote(args, url).await;
    }
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
    let (session, resumed, running, _) = open_session(
        &backend,
        &client,
        args,
        Some(workspace.display().to_string()),
    )
    .await?;
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

/// The longest token file read.
const MAX_TOKEN_FILE: u64 = 4096;

/// Reads a token file: one token, surrounding white space ignored. A file others may
/// read is used, with a warning.
fn read_token(path: &Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    if !meta.is_file() || meta.len() > MAX_TOKEN_FILE {
        return Err(format!(
            "{shown} is not a token file (one line, as `keel serve token create` printed it)"
        ));
    }
    if meta.mode() & 0o077 != 0 {
        eprintln!(
            "keel attach: warning: {shown} may be read by others (mode {:04o}); chmod 600 it",
            meta.mode() & 0o7777
        );
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {shown}: {e}"))?;
    let token = text.trim();
    if token.is_empty() || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{shown} does not hold one token (as `keel serve token create` printed it)"
        ));
    }
    Ok(token.to_owned())
}

/// `keel attach --remote URL --token-file F`: the REPL on a daemon on another machine,
/// doing what the token's role allows. The workspace is the daemon's (`-w` names a
/// directory there).
async fn open_remote(args: &AttachArgs, url: &str) -> Result<Opened, (i32, String)> {
    let env = EnvMap::from_process();
    let home =
        default_keel_home(&env).ok_or((2, "no store directory: set KEEL_HOME".to_owned()))?;
    let Some(file) = args.token_file.as_deref() else {
        return Err((2, "--remote needs --token-file FILE".to_owned()));
    };
    let token = read_token(file).map_err(|m| (2, m))?;
    let (client, ready, rx) = Client::connect_remote(url, &token, args.ca_cert.as_deref())
        .await
        .map_err(|e| (1, format!("{url}: {e}")))?;
    tracing::info!(url, daemon_pid = ready.pid, "attached to a remote daemon");
    let default_workspace = ready.workspace.clone();
    let backend = Backend::Remote(Remote {
        client: client.clone(),
        models: ready.available_models,
        patch_preview: false,
    });
    let given = args
        .session
        .workspace
        .workspace
        .as_ref()
        .map(|w| w.display().to_string());
    let (session, resumed, running, workspace) =
        open_session(&backend, &client, args, given.clone()).await?;
    // The workspace is the daemon's: only the user's own skills and commands are
    // offered, read from this machine's configuration.
    let config = Config::load(&home, None).map_err(|e| (2, e.message))?;
    let skills = crate::setup::skill_settings(&config, &home);
    let workspace = workspace
        .or(given)
        .or(default_workspace)
        .unwrap_or_default();
    Ok(Opened {
        backend,
        session,
        events: Events::Remote(rx),
        home,
        workspace: PathBuf::from(workspace),
        resumed,
        running,
        skills,
    })
}

/// Opens `SESSION_ID` (watched or resumed) or starts a session in `workspace`; returns
/// the session, whether it was an existing one, the request running in it, and its
/// workspace as the daemon names it.
async fn open_session(
    backend: &Backend,
    client: &Client,
    args: &AttachArgs,
    workspace: Option<String>,
) -> Result<(Session, bool, Option<String>, Option<String>), (i32, String)> {
    match &args.session_id {
        Some(id) => {
            let o = backend.open(id).await.map_err(|e| (1, e.message))?;
            let ws = o.resumed.as_ref().map(|r| r.session.workspace.clone());
            Ok((o.session, true, o.running, ws))
        }
        None => {
            let start = CommandPayload::SessionStart(
                SessionStart::new()
                    .workspace_path(workspace)
                    .permission_mode(args.session.mode.mode.clone())
                    .model(args.session.model.model.clone()),
            );
            let env = client
                .request(None, start)
                .await
                .map_err(|e| (1, e.message))?;
            let Event::SessionStarted(s) = env.event else {
                return Err((1, format!("unexpected answer {}", env.type_name())));
            };
            let ws = Some(s.workspace.clone());
            Ok((
                Session::remote(client.clone(), s.session_id),
                false,
                None,
                ws,
            ))
        }
    }
}
