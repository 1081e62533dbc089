//! `keel bridge`: the stdio JSON-lines bridge for desktop hosts.

use crate::cli::BridgeArgs;
use crate::setup;

/// Runs the bridge on stdin/stdout; returns the exit code.
pub fn run(args: BridgeArgs) -> i32 {
    let BridgeArgs {
        session: common,
        session_id,
        max_line_bytes: max_line,
    } = args;
    let rt = match setup::server_runtime() {
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
