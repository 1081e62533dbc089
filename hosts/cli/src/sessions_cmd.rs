//! `keel sessions list [--json]`: the sessions in the store (`KEEL_HOME`).

use crate::setup;

const USAGE: &str = "usage: keel sessions list [--json]";

/// Runs `keel sessions`; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let mut json = false;
    match args.first().map(String::as_str) {
        Some("list") => {}
        _ => {
            eprintln!("{USAGE}");
            return 2;
        }
    }
    for a in &args[1..] {
        match a.as_str() {
            "--json" => json = true,
            other => {
                eprintln!("keel sessions: unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
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
        let runtime = match setup::runtime(&setup::Common::default()) {
            Ok(r) => r,
            Err(e) => {
                setup::report(&e);
                return 1;
            }
        };
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
    })
}
