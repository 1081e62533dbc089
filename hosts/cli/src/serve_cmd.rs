//! `keel serve`: the per-user daemon on a Unix socket, and with `--listen` on a
//! WebSocket for remote clients; `keel serve token …` manages their tokens.

use std::time::Duration;

use keel_config::{default_keel_home, EnvMap};
use keel_serve::tokens::{NewToken, TokenRecord, TokenStore};
use keel_serve::{Bind, ConnectionOptions, ListenAddr, ServeConfig, ServeOptions, StopCause};

use crate::cli::{ServeArgs, ServeCommand, TokenCommand, TokenCreateArgs};
use crate::setup;

/// The exit code when a daemon already listens on the socket.
pub const ALREADY_RUNNING: i32 = 4;

/// How long a daemon with no remote listener waits, idle, before it exits.
const IDLE_EXIT: u64 = 600;

fn home() -> Result<std::path::PathBuf, String> {
    default_keel_home(&EnvMap::from_process())
        .ok_or_else(|| "no store directory: set KEEL_HOME".to_owned())
}

/// Runs the daemon until a signal or its idle time, or a token command; returns the
/// exit code.
pub fn run(args: ServeArgs) -> i32 {
    if let Some(ServeCommand::Token(t)) = &args.command {
        return token(&t.command);
    }
    let rt = match setup::server_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel serve: cannot start the runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(daemon(args));
    rt.shutdown_timeout(Duration::from_secs(2));
    code
}

async fn daemon(args: ServeArgs) -> i32 {
    let home = match home() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("keel serve: {e}");
            return 2;
        }
    };
    let config = match ServeConfig::load(&home) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keel serve: {e}");
            return 2;
        }
    };
    let listen = match args.listen.as_deref().map(ListenAddr::parse).transpose() {
        Ok(l) => l.or_else(|| config.listen.clone()),
        Err(e) => {
            eprintln!("keel serve: --listen: {e}");
            return 2;
        }
    };
    let remote_options = match listen
        .map(|l| config.remote(l, TokenStore::in_home(&home)))
        .transpose()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keel serve: {e}");
            return 2;
        }
    };
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
    let remote = match remote_options {
        None => None,
        Some(o) => {
            let store = o.tokens.clone();
            match keel_serve::bind_remote(o).await {
                Ok(r) => {
                    let live = store.load().map_or(0, |t| {
                        let now = keel_serve::tokens::now_ms();
                        t.iter()
                            .filter(|t| t.state(now) == keel_serve::tokens::TokenState::Active)
                            .count()
                    });
                    tracing::info!(url = %r.url(), tokens = live, "remote listener bound");
                    eprintln!(
                        "keel serve: remote clients on {} ({live} active tokens)",
                        r.url()
                    );
                    if live == 0 {
                        eprintln!("keel serve: no token yet: keel serve token create --role observer|approver|controller");
                    }
                    Some(r)
                }
                Err(e) => {
                    tracing::error!(error = %e, "remote listener could not start");
                    eprintln!("keel serve: {e}");
                    return 1;
                }
            }
        }
    };
    let stop = match keel_serve::stop_on_signals() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("keel serve: cannot listen for signals: {e}");
            return 1;
        }
    };
    let idle_exit = args
        .idle_exit
        .unwrap_or(if remote.is_some() { 0 } else { IDLE_EXIT });
    let options = ServeOptions {
        socket: socket.clone(),
        connection: ConnectionOptions {
            workspace: Some(runtime.workspace.display().to_string()),
            available_models: runtime.kernel.config().available_models.clone(),
            max_line_bytes: args.max_line_bytes.or(config.max_message_bytes),
            queue_capacity: config.queue_capacity.unwrap_or(keel_serve::QUEUE_CAPACITY),
            ..ConnectionOptions::default()
        },
        exit_when_idle: (idle_exit > 0).then(|| Duration::from_secs(idle_exit)),
    };
    eprintln!("keel serve: listening on {}", socket.display());
    let cause = keel_serve::run_with(runtime.kernel, listener, remote, &options, stop).await;
    eprintln!(
        "keel serve: stopped ({})",
        match cause {
            StopCause::Idle => "idle",
            StopCause::Stopped => "signal",
        }
    );
    0
}

/// `YYYY-MM-DD HH:MM UTC` of a time in ms since the epoch.
fn when(ms: u64) -> String {
    let secs = ms / 1000;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    format!("{} {h:02}:{m:02} UTC", crate::logging::date_of(secs))
}

/// A record as JSON: everything but the hash.
fn record_json(t: &TokenRecord, now: u64) -> serde_json::Value {
    serde_json::json!({
        "id": t.id,
        "name": t.name,
        "role": t.role.as_str(),
        "session": t.session,
        "createdAt": t.created_at,
        "expiresAt": t.expires_at,
        "revokedAt": t.revoked_at,
        "state": t.state(now).as_str(),
    })
}

fn token(cmd: &TokenCommand) -> i32 {
    let store = match home() {
        Ok(h) => TokenStore::in_home(&h),
        Err(e) => {
            eprintln!("keel serve token: {e}");
            return 2;
        }
    };
    match cmd {
        TokenCommand::Create(a) => create(&store, a),
        TokenCommand::List { json } => list(&store, json.json),
        TokenCommand::Revoke { token } => match store.revoke(token) {
            Ok(t) => {
                tracing::info!(token = %t.id, "token revoked");
                eprintln!(
                    "keel serve token: revoked {}{}; its connections are closed",
                    t.id,
                    t.name
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                );
                0
            }
            Err(e) => {
                eprintln!("keel serve token: {e}");
                1
            }
        },
    }
}

fn create(store: &TokenStore, a: &TokenCreateArgs) -> i32 {
    if let Some(s) = &a.session {
        if s.is_empty()
            || s.len() > 128
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            eprintln!("keel serve token: --session {s:?} is not a session id (as `keel sessions list` shows them)");
            return 2;
        }
    }
    if let Some(n) = &a.name {
        if n.trim().is_empty() || n.len() > 64 || n.chars().any(char::is_control) {
            eprintln!(
                "keel serve token: --name must have 1 to 64 characters and no control characters"
            );
            return 2;
        }
    }
    let spec = NewToken {
        role: a.role,
        session: a.session.clone(),
        expires_in: a.expires,
        name: a.name.clone(),
    };
    match store.create(spec) {
        Ok((secret, t)) => {
            tracing::info!(token = %t.id, role = t.role.as_str(), "token created");
            if a.json.json {
                let mut v = record_json(&t, t.created_at);
                v["token"] = secret.expose().into();
                println!("{v}");
            } else {
                println!("{}", secret.expose());
            }
            eprintln!(
                "keel serve token: created {} (role {}{}{}); the token is shown only this once",
                t.id,
                t.role,
                t.session
                    .as_deref()
                    .map(|s| format!(", session {s}"))
                    .unwrap_or_default(),
                t.expires_at
                    .map(|e| format!(", expires {}", when(e)))
                    .unwrap_or_default()
            );
            0
        }
        Err(e) => {
            eprintln!("keel serve token: {e}");
            1
        }
    }
}

fn list(store: &TokenStore, json: bool) -> i32 {
    let tokens = match store.load() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("keel serve token: {e}");
            return 1;
        }
    };
    let now = keel_serve::tokens::now_ms();
    if json {
        let all: Vec<serde_json::Value> = tokens.iter().map(|t| record_json(t, now)).collect();
        println!("{}", serde_json::Value::Array(all));
        return 0;
    }
    if tokens.is_empty() {
        println!("no tokens in {}", store.path().display());
        return 0;
    }
    for t in &tokens {
        println!(
            "{}  {:<10} {:<8} {:<12} {:<24} {}",
            t.id,
            t.role,
            t.state(now).as_str(),
            t.name.as_deref().unwrap_or("-"),
            t.expires_at.map_or_else(
                || "never expires".to_owned(),
                |e| format!("expires {}", when(e))
            ),
            t.session
                .as_deref()
                .map(|s| format!("session {s}"))
                .unwrap_or_else(|| "all sessions".into()),
        );
    }
    0
}
