//! `keel acp`: Keel as an Agent Client Protocol agent on stdio.

use crate::cli::AcpArgs;
use crate::setup;

/// Runs the ACP server on stdin/stdout; returns the exit code.
pub fn run(args: AcpArgs) -> i32 {
    let common = args.session;
    let rt = match setup::server_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel acp: cannot start the runtime: {e}");
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
            eprintln!("keel acp: no model configured (--model, KEEL_MODEL or config); sessions will fail to start");
        }
        let options = keel_acp::AcpOptions {
            max_line_bytes: None,
            skills: Some(runtime.skills.clone()),
            reserved_commands: crate::repl::reserved_commands(),
        };
        keel_acp::serve(runtime.kernel, tokio::io::stdin(), tokio::io::stdout(), options).await;
        eprintln!("keel acp: stopped (end of input)");
        0
    })
}
