//! `keel bridge`: the stdio JSON-lines bridge for desktop hosts.

use crate::setup;

const USAGE: &str = "usage: keel bridge [--workspace DIR] [--session-id ID] [--model M] [--permission-mode MODE] [--max-line-bytes N]";

/// Runs the bridge on stdin/stdout; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let common = match setup::parse_common(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("keel bridge: {e}\n{USAGE}");
            return 2;
        }
    };
    let mut session_id = None;
    let mut max_line = None;
    let mut it = common.rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--session-id" => session_id = it.next().cloned(),
            "--max-line-bytes" => max_line = it.next().and_then(|v| v.parse::<usize>().ok()),
            "-h" | "--help" => {
                eprintln!("{USAGE}");
                return 0;
            }
            other => {
                eprintln!("keel bridge: unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel bridge: cannot start the runtime: {e}");
            return 1;
        }
    };
    rt.block_on(async move {
        let runtime = match setup::runtime(&common) {
            Ok(r) => r,
            Err(e) => {
                setup::report(&e);
                return 1;
            }
        };
        if runtime.model_spec.is_none() {
            eprintln!("keel bridge: no model configured (--model, KEEL_MODEL or config); sessions will fail to start");
        }
        let options = keel_bridge::BridgeOptions {
            workspace: Some(runtime.workspace.display().to_string()),
            available_models: runtime.kernel.config().available_models.clone(),
            resume_session: session_id,
            max_line_bytes: max_line,
        };
        let reason = keel_bridge::serve(runtime.kernel, tokio::io::stdin(), tokio::io::stdout(), options).await;
        eprintln!("keel bridge: stopped ({reason:?})");
        0
    })
}
