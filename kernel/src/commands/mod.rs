//! The command handlers, one module per feature, found through one table
//! ([`table`]). A handler gets a [`Cx`] (the kernel's services, its open sessions and
//! the command's requestId), the typed payload, and — for a command about a session —
//! that open session, looked up once by the table.

pub(crate) mod approvals;
pub(crate) mod checkpoints;
pub(crate) mod compaction;
pub(crate) mod ext;
pub(crate) mod fork;
pub(crate) mod host_tools;
pub(crate) mod lifecycle;
pub(crate) mod mcp;
pub(crate) mod plans;
pub(crate) mod requests;
pub(crate) mod runtime;
pub(crate) mod settings;
pub(crate) mod side;
pub(crate) mod skills;
pub(crate) mod stored;
pub(crate) mod table;
pub(crate) mod watch_remote;
pub(crate) mod worktree;

use std::sync::Arc;

use keel_envelope::{ErrorCode, ErrorPayload};

use crate::session::open::Sessions;
use crate::session::services::Services;
use crate::session::Session;

/// What every handler gets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cx<'a> {
    pub(crate) services: &'a Arc<Services>,
    pub(crate) open: &'a Sessions,
    /// The requestId of the command: the stream that carries its answer.
    pub(crate) rid: &'a str,
}

/// The error of an answer to something no longer (or never) pending.
pub(crate) fn not_pending(code: ErrorCode, what: &str, id: &str) -> ErrorPayload {
    ErrorPayload::new(
        code,
        format!("no pending {what} {id:?} (unknown, or already resolved)"),
    )
    .with_detail("id", id)
}

/// `REQUEST_INVALID` naming the payload field at fault.
pub(crate) fn invalid(message: &str, field: &str) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message).with_detail("field", field)
}

/// The refusal of `what` while a request runs in `session` (`SESSION_BUSY`, naming
/// the running request), or `None` when none runs.
pub(crate) fn refuse_while_running(session: &Session, what: &str) -> Option<ErrorPayload> {
    let d = session.data();
    let active = d.active.as_ref().map(|a| a.id.clone())?;
    Some(
        ErrorPayload::new(
            ErrorCode::SessionBusy,
            format!("{what} is refused while request {active} runs; interrupt it first"),
        )
        .retryable(true)
        .with_detail("activeRequestId", active),
    )
}
