//! `keel sessions export ID FILE` and `keel sessions import FILE [--workspace DIR]
//! [--as-new]`: a session and its checkpoints in one file, from the configured store
//! (`--store`, `KEEL_STORE`, `store` in config.toml, else KEEL_HOME) to another
//! machine's (`Kernel::export_session`, `Kernel::import_session`). Exit 0; 1 when it
//! cannot be done (an unknown session, an id the store has already, a store that
//! cannot be read or written); 3 when the file is not a whole export this keel reads.

use std::path::Path;

use keel_envelope::{ErrorCode, ErrorPayload};
use keel_kernel::ImportOptions;

use crate::cli::{SessionArgs, StoreArg};
use crate::setup;

/// The exit code of a failure: 3 for a file that cannot be read as an export.
fn code_of(e: &ErrorPayload) -> i32 {
    let about_file = e.details.get("field").and_then(|f| f.as_str()) == Some("file");
    if e.code == ErrorCode::RequestInvalid && about_file {
        3
    } else {
        1
    }
}

/// Reports `e` (as `{"ok": false, "error": …}` on stdout with `--json`, else on
/// stderr) and gives the exit code.
fn fail(what: &str, e: &ErrorPayload, json: bool) -> i32 {
    tracing::error!(code = e.code.as_str(), message = %e.message, "keel sessions {what} failed");
    if json {
        println!("{}", serde_json::json!({ "ok": false, "error": e }));
    } else {
        eprintln!("keel sessions {what}: {}", e.message);
    }
    code_of(e)
}

fn runtime(store: StoreArg) -> Result<setup::Runtime, ErrorPayload> {
    setup::runtime(&SessionArgs {
        store,
        ..SessionArgs::default()
    })
}

fn human_bytes(n: u64) -> String {
    crate::doctor_checkpoints::human_bytes(n)
}

/// `keel sessions export ID FILE`.
pub async fn export(id: &str, file: &Path, json: bool, store: StoreArg) -> i32 {
    let runtime = match runtime(store) {
        Ok(r) => r,
        Err(e) => return fail("export", &e, json),
    };
    let result = runtime.kernel.export_session(id, file).await;
    runtime.kernel.shutdown("exit").await;
    match result {
        Ok(r) => {
            if json {
                let mut v = serde_json::to_value(&r).unwrap_or_default();
                v["ok"] = true.into();
                println!("{v}");
            } else {
                println!(
                    "exported session {} to {}: {} event(s), {} message(s), {} checkpoint(s) ({} object(s)), {}",
                    r.session_id,
                    r.file.display(),
                    r.events,
                    r.messages,
                    r.checkpoints,
                    r.objects,
                    human_bytes(r.bytes)
                );
            }
            0
        }
        Err(e) => fail("export", &e, json),
    }
}

/// `keel sessions import FILE`.
pub async fn import(file: &Path, options: ImportOptions, json: bool, store: StoreArg) -> i32 {
    let runtime = match runtime(store) {
        Ok(r) => r,
        Err(e) => return fail("import", &e, json),
    };
    let checkpoints_only = options.checkpoints_only;
    let result = runtime.kernel.import_session(file, options).await;
    runtime.kernel.shutdown("exit").await;
    let r = match result {
        Ok(r) => r,
        Err(e) => return fail("import", &e, json),
    };
    if json {
        let mut v = serde_json::to_value(&r).unwrap_or_default();
        v["ok"] = true.into();
        println!("{v}");
        return 0;
    }
    if checkpoints_only {
        println!(
            "took in {} checkpoint(s) of session {}; workspace {}",
            r.checkpoints, r.session_id, r.workspace
        );
        return 0;
    }
    let renamed = if r.session_id == r.exported_session_id {
        String::new()
    } else {
        format!(" (exported as {})", r.exported_session_id)
    };
    println!(
        "imported session {}{renamed}: {} event(s), {} message(s), {} checkpoint(s); workspace {}",
        r.session_id, r.events, r.messages, r.checkpoints, r.workspace
    );
    if let Some(m) = &r.materialized {
        println!(
            "made the workspace from checkpoint {}: {} file(s) written, {} missing",
            m.checkpoint_id,
            m.restored,
            m.missing.len()
        );
        for f in &m.missing {
            println!("  missing {}: {}", f.path, f.reason);
        }
    }
    if r.workspace_missing {
        println!(
            "the workspace does not exist on this machine: import again with --workspace DIR to make it from the newest checkpoint, or resume the session with materializeTo"
        );
    }
    0
}
