//! Side questions: `request.side` starts one beside the running request
//! ([`crate::work::side`]) and is answered on its own stream.

use std::sync::Arc;

use keel_envelope::commands::RequestSide;
use keel_envelope::ErrorPayload;

use super::Cx;
use crate::session::Session;

/// `request.side`.
pub(crate) async fn ask(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &RequestSide,
) -> Result<(), ErrorPayload> {
    crate::work::side::spawn(session, cx.rid, &p.message)
}
