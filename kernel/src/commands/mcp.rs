//! MCP: `mcp.list`, the session's servers with their state and tools
//! ([`crate::session::mcp`]).

use std::sync::Arc;

use keel_envelope::commands::McpListCmd;
use keel_envelope::events::McpList;
use keel_envelope::{ErrorPayload, Event};

use super::Cx;
use crate::session::Session;

/// `mcp.list`.
pub(crate) async fn list(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &McpListCmd,
) -> Result<(), ErrorPayload> {
    let servers = session.mcp.list();
    session
        .emitter
        .emit(cx.rid, Event::McpList(McpList::new(servers)))
        .await;
    Ok(())
}
