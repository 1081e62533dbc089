//! Patch preview: in a request that previews edits, an allowed `edit_file` /
//! `write_file` call is proposed as a patch (computed in memory with the tool's own
//! semantics) instead of written; `patch.proposed` is emitted and the model learns
//! that the change awaits review.

use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::events::PatchEvent;
use keel_envelope::ids::IdKind;
use keel_envelope::{ErrorPayload, Event};
use keel_tools::{ToolArgs, ToolContext};
use tokio_util::sync::CancellationToken;

use crate::base::model::ToolCallRequest;
use crate::session::ext::patch;
use crate::session::registry::{args_mismatch, Args, CallCx, Stage};
use crate::session::Session;

/// Computes the change of an `edit_file` / `write_file` call in memory, with the
/// tool's own semantics, and records it as a pending patch.
fn propose_from_call(
    session: &Session,
    rid: &str,
    call: &ToolCallRequest,
    args: &ToolArgs,
) -> Result<keel_envelope::ext::Patch, ErrorPayload> {
    let ctx = ToolContext {
        workspace: session.workspace.clone(),
        cancel: CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: session.services.config().sandbox.clone(),
        roots: session.data().roots.clone(),
    };
    let file = match args {
        ToolArgs::EditFile(a) => {
            let (r, old, new, _) = keel_tools::fs::plan_edit(a, &ctx)?;
            patch::file_change(0, &r.display, Some(old), Some(new))
        }
        ToolArgs::WriteFile(a) => {
            let (r, old) = keel_tools::fs::plan_write(a, &ctx)?;
            patch::file_change(0, &r.display, old, Some(a.content.clone()))
        }
        _ => return Err(args_mismatch(&call.name)),
    };
    let id = session.services.next_id(IdKind::Patch);
    let p = patch::new_patch(
        id,
        "tool",
        Some(format!("{} by the model", call.name)),
        Some(rid.to_owned()),
        vec![file],
        session.now(),
    );
    session.data().ext.patches.propose(p.clone());
    Ok(p)
}

/// Patch preview: an allowed `edit_file` / `write_file` call of a request that
/// previews edits is proposed as a patch instead of written. `patch.proposed` is
/// emitted and the model learns that the change awaits review.
#[derive(Debug)]
pub(crate) struct PatchPreview;

#[async_trait]
impl Stage for PatchPreview {
    fn claims(&self, session: &Session, args: &Args) -> bool {
        matches!(
            args.tool_args(),
            ToolArgs::EditFile(_) | ToolArgs::WriteFile(_)
        ) && session
            .data()
            .active
            .as_ref()
            .is_some_and(|a| a.patch_preview)
    }

    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<serde_json::Value, ErrorPayload> {
        let p = propose_from_call(cx.session, cx.rid, cx.call, args.tool_args())?;
        cx.session
            .emitter
            .emit(cx.rid, Event::PatchProposed(PatchEvent::new(p.clone())))
            .await;
        let path = p.files.first().map(|f| f.path.clone()).unwrap_or_default();
        let message = format!(
            "The change to `{path}` was NOT written: it is proposed as patch {} and is pending review by the user. Continue as if it will be applied, and do not propose the same change again.",
            p.patch_id
        );
        Ok(serde_json::json!({
            "patchId": p.patch_id,
            "status": "pending",
            "path": path,
            "stats": p.stats,
            "diff": p.files.first().map(|f| f.diff.clone()).unwrap_or_default(),
            "message": message,
        }))
    }
}
