//! `keel sessions list [--json]` and `keel sessions delete <id>`: through the daemon
//! when one answers on the socket, else on the store (`KEEL_HOME`). `keel sessions
//! prune [--older-than D] [--dry-run] [--json]` works on the checkpoint stores
//! directly (`KEEL_HOME/checkpoints`): sessions some process holds open, a daemon's
//! included, keep their checkpoints. `keel sessions export` and `keel sessions
//! import` are in `portable_cmd.rs`.

use keel_envelope::commands::{CommandPayload, SessionDelete, SessionListCmd};
use keel_envelope::types::SessionInfo;
use keel_envelope::{ErrorPayload, Event};

use crate::cli::{SessionArgs, SessionsArgs, SessionsCommand};
use crate::setup;

/// The daemon's answer to `payload`, when a daemon answers on `socket`.
async fn ask_daemon(
    socket: &std::path::Path,
    payload: CommandPayload,
) -> Option<Result<Event, ErrorPayload>> {
    let (client, _ready, _events) = keel_serve::Client::connect(socket).await.ok()?;
    let answer = client.query(None, payload).await;
    client.close().await;
    Some(answer.map(|env| env.event))
}

fn unexpected(ev: &Event) -> ErrorPayload {
    ErrorPayload::new(
        keel_envelope::ErrorCode::RuntimeInternalError,
        format!("unexpected answer {}", ev.type_name()),
    )
}

/// Runs `keel sessions`; returns the exit code.
pub fn run(args: SessionsArgs) -> i32 {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel sessions: {e}");
            return 1;
        }
    };
    rt.block_on(async move {
        match args.command {
            SessionsCommand::List { json, socket } => {
                list(socket.socket.as_deref(), json.json).await
            }
            SessionsCommand::Delete { session_id, socket } => {
                delete(socket.socket.as_deref(), &session_id).await
            }
            SessionsCommand::Prune {
                older_than,
                dry_run,
                json,
            } => prune(older_than, dry_run, json.json).await,
            SessionsCommand::Export {
                session_id,
                file,
                json,
                store,
            } => crate::portable_cmd::export(&session_id, &file, json.json, store).await,
            SessionsCommand::Import {
                file,
                workspace,
                as_new,
                checkpoints_only,
                json,
                store,
            } => {
                let options = keel_kernel::ImportOptions {
                    workspace,
                    as_new,
                    checkpoints_only,
                };
                crate::portable_cmd::import(&file, options, json.json, store).await
            }
        }
    })
}

async fn list(socket: Option<&std::path::Path>, json: bool) -> i32 {
    let path = keel_serve::resolve_socket_path(socket);
    let asked = ask_daemon(&path, CommandPayload::SessionList(SessionListCmd::new())).await;
    let (sessions, place): (Vec<SessionInfo>, String) = match asked {
        Some(Ok(Event::SessionList(l))) => {
            (l.sessions, format!("the daemon on {}", path.display()))
        }
        Some(Ok(other)) => {
            setup::report(&unexpected(&other));
            return 1;
        }
        Some(Err(e)) => {
            setup::report(&e);
            return 1;
        }
        None => {
            let runtime = match setup::runtime(&SessionArgs::default()) {
                Ok(r) => r,
                Err(e) => {
                    setup::report(&e);
                    return 1;
                }
            };
            match runtime.kernel.list_sessions() {
                Ok(s) => (s, runtime.home.display().to_string()),
                Err(e) => {
                    setup::report(&e);
                    return 1;
                }
            }
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&sessions).unwrap_or_else(|_| "[]".into())
        );
    } else if sessions.is_empty() {
        println!("no sessions in {place}");
    } else {
        for s in &sessions {
            println!(
                "{}  {:<8} {:<9} {}  {}",
                s.session_id,
                format!("{:?}", s.state).to_lowercase(),
                s.permission_mode.as_str(),
                s.title.as_deref().unwrap_or("-"),
                s.workspace
            );
        }
    }
    0
}

/// Deletes one session (`session.delete`), through the daemon when one runs (it closes
/// the session if open): exit 0, or 1 with the reason on stderr.
async fn delete(socket: Option<&std::path::Path>, id: &str) -> i32 {
    let path = keel_serve::resolve_socket_path(socket);
    let payload = CommandPayload::SessionDelete(SessionDelete::new(id.to_owned()));
    let result = match ask_daemon(&path, payload).await {
        Some(Ok(Event::SessionDeleted(_))) => Ok(()),
        Some(Ok(other)) => Err(unexpected(&other)),
        Some(Err(e)) => Err(e),
        None => {
            let runtime = match setup::runtime(&SessionArgs::default()) {
                Ok(r) => r,
                Err(e) => {
                    setup::report(&e);
                    return 1;
                }
            };
            let result = runtime.kernel.delete_session(id).await;
            runtime.kernel.shutdown("exit").await;
            result
        }
    };
    match result {
        Ok(()) => {
            println!("deleted {id}");
            0
        }
        Err(e) => {
            eprintln!("keel sessions delete: {}", e.message);
            1
        }
    }
}

/// `--older-than`: `7d`, `12h`, `30m`, or a plain number of days.
pub fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c),
        _ => (t, 'd'),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not an age: a whole number with d, h or m, e.g. 7d, 12h or 30m"
        ));
    }
    let secs_per = match unit {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        _ => {
            return Err(format!(
                "{text:?}: the unit must be d (days), h (hours) or m (minutes), e.g. 7d"
            ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is too large"))?;
    n.checked_mul(secs_per)
        .filter(|s| *s <= 100 * 365 * 86_400)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is more than 100 years"))
}

/// Prunes the checkpoint stores by the configured limits (`older_than` replaces the
/// age limit): exit 0 with what went (or would), 1 with the reason on stderr.
async fn prune(older_than: Option<std::time::Duration>, dry_run: bool, json: bool) -> i32 {
    let runtime = match setup::runtime(&SessionArgs::default()) {
        Ok(r) => r,
        Err(e) => {
            setup::report(&e);
            return 1;
        }
    };
    let result = runtime.kernel.prune_checkpoints(older_than, dry_run).await;
    runtime.kernel.shutdown("exit").await;
    let report = match result {
        Ok(Some(r)) => r,
        Ok(None) => keel_tools::checkpoint::PruneReport {
            dry_run,
            ..Default::default()
        },
        Err(e) => {
            eprintln!("keel sessions prune: {}", e.message);
            return 1;
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&report).unwrap_or_else(|_| "{}".into())
        );
        return 0;
    }
    let sessions: std::collections::BTreeSet<&str> = report
        .dropped
        .iter()
        .map(|d| d.session_id.as_str())
        .collect();
    let human = crate::doctor_checkpoints::human_bytes;
    println!(
        "{} {} checkpoint(s) of {} session(s), {} {} (checkpoints: {} before, {} after){}",
        if dry_run { "would drop" } else { "dropped" },
        report.dropped.len(),
        sessions.len(),
        if dry_run { "freeing" } else { "freed" },
        human(report.bytes_freed()),
        human(report.bytes_before),
        human(report.bytes_after),
        if report.damaged.is_empty() {
            String::new()
        } else {
            format!("; damaged, left out: {}", report.damaged.join("; "))
        }
    );
    0
}
