//! `keel sessions list [--json]`: the sessions of the daemon when one answers on the
//! socket, else those in the store (`KEEL_HOME`).

use keel_envelope::commands::{CommandPayload, SessionListCmd};
use keel_envelope::types::SessionInfo;
use keel_envelope::{ErrorPayload, Event};

use crate::cli::{SessionArgs, SessionsArgs, SessionsCommand};
use crate::setup;

/// The daemon's list, when a daemon answers on `socket`.
async fn from_daemon(socket: &std::path::Path) -> Option<Result<Vec<SessionInfo>, ErrorPayload>> {
    let (client, _ready, _events) = keel_serve::Client::connect(socket).await.ok()?;
    let answer = client
        .query(None, CommandPayload::SessionList(SessionListCmd {}))
        .await;
    client.close().await;
    Some(answer.and_then(|env| match env.event {
        Event::SessionList(l) => Ok(l.sessions),
        other => Err(ErrorPayload::new(
            keel_envelope::ErrorCode::RuntimeInternalError,
            format!("unexpected answer {}", other.type_name()),
        )),
    }))
}

/// Runs `keel sessions`; returns the exit code.
pub fn run(args: SessionsArgs) -> i32 {
    let SessionsCommand::List { json, socket } = args.command;
    let json = json.json;
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
        let path = keel_serve::resolve_socket_path(socket.socket.as_deref());
        let (sessions, place) = match from_daemon(&path).await {
            Some(Ok(s)) => (s, format!("the daemon on {}", path.display())),
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
    })
}
