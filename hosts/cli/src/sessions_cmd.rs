//! `keel sessions list [--json]` and `keel sessions delete <id>`: the sessions in the
//! store (`KEEL_HOME`).

use keel_kernel::Kernel;

use crate::cli::{SessionArgs, SessionsArgs, SessionsCommand};
use crate::setup;

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
        let runtime = match setup::runtime(&SessionArgs::default()) {
            Ok(r) => r,
            Err(e) => {
                setup::report(&e);
                return 1;
            }
        };
        match args.command {
            SessionsCommand::List { json } => list(&runtime, json.json),
            SessionsCommand::Delete { session_id } => delete(&runtime.kernel, &session_id).await,
        }
    })
}

fn list(runtime: &setup::Runtime, json: bool) -> i32 {
    let sessions = match runtime.kernel.list_sessions() {
        Ok(s) => s,
        Err(e) => {
            setup::report(&e);
            return 1;
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&sessions).unwrap_or_else(|_| "[]".into())
        );
    } else if sessions.is_empty() {
        println!("no sessions in {}", runtime.home.display());
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

/// Deletes one session (`session.delete`): exit 0, or 1 with the reason on stderr.
async fn delete(kernel: &Kernel, id: &str) -> i32 {
    let result = kernel.delete_session(id).await;
    kernel.shutdown("exit").await;
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
