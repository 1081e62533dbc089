//! Compaction by hand: `context.compact` starts it as the session's unit of work
//! ([`crate::work::request::start_compaction`]) and is answered once it is accepted.

use std::sync::Arc;

use keel_envelope::commands::ContextCompact;
use keel_envelope::ErrorPayload;

use super::Cx;
use crate::session::Session;

/// `context.compact`.
pub(crate) async fn compact(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &ContextCompact,
) -> Result<(), ErrorPayload> {
    crate::work::request::start_compaction(session, cx.rid).await
}
