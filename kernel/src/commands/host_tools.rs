//! The host app's tools: `session.set_host_tools` (idle only) replaces them,
//! `host-tool.respond` answers a call waiting in [`crate::pipeline::host_tools`].

use std::sync::Arc;

use keel_envelope::commands::{HostToolRespond, SetHostTools};
use keel_envelope::events::SessionHostToolsUpdated;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use serde_json::Value;

use super::{invalid, Cx};
use crate::pipeline::host_tools::{entries, respond as answer_call};
use crate::session::Session;

/// `session.set_host_tools`.
pub(crate) async fn set(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SetHostTools,
) -> Result<(), ErrorPayload> {
    let built = entries(&p.tools, "payload.tools")?;
    if session.data().active.is_some() {
        return Err(ErrorPayload::new(
            ErrorCode::SessionBusy,
            "host tools can only be replaced while the session is idle",
        ));
    }
    session.tools.set_host(cx.services.registry(), built)?;
    let tools = session.tools.host_names();
    session
        .emitter
        .emit(
            cx.rid,
            Event::SessionHostToolsUpdated(SessionHostToolsUpdated::new(tools)),
        )
        .await;
    Ok(())
}

/// `host-tool.respond`.
pub(crate) async fn respond(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &HostToolRespond,
) -> Result<(), ErrorPayload> {
    if p.tool_call_id.trim().is_empty() {
        return Err(invalid("the toolCallId is empty", "payload.toolCallId"));
    }
    let answer = match (&p.result, &p.error) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "give either `result` or `error`, not both",
                "payload.error",
            ))
        }
        (_, Some(e)) if e.message.trim().is_empty() => {
            return Err(invalid(
                "the error's message is empty",
                "payload.error.message",
            ))
        }
        (_, Some(e)) => Err(e.message.clone()),
        (r, None) => Ok(r.clone().unwrap_or(Value::Null)),
    };
    answer_call(session, &p.tool_call_id, (answer, cx.rid.to_owned()))
}
