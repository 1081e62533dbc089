//! Sessions as stored: deletion, titles, the stored log, and the listing of stored and
//! open sessions.

use std::collections::HashMap;
use std::sync::Arc;

use keel_envelope::commands::CommandPayload;
use keel_envelope::types::SessionInfo;
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event};

use crate::kernel::Kernel;
use crate::session::Session;

impl Kernel {
    /// `session.delete`: closes the session if it is open (on a request id of its own,
    /// as a shutdown does), removes its stored files, then answers `session.deleted`
    /// on `request_id`'s stream (not logged: the log is gone).
    pub(crate) async fn delete(&self, request_id: &str, id: &str) -> Result<(), ErrorPayload> {
        let open = self.inner.open.remove(id);
        if let Some(session) = &open {
            let rid = self.new_request_id();
            session.close(&rid, "deleted").await;
        }
        self.inner.open.forget(id);
        let stored = self.inner.services.store().delete(id)?;
        if open.is_none() && !stored {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("no session {id:?} in the store"),
            )
            .with_detail("sessionId", id));
        }
        self.inner
            .services
            .emitter()
            .emit_as(
                Some(id.to_owned()),
                request_id,
                Event::SessionDeleted(keel_envelope::events::SessionDeleted {
                    session_id: id.to_owned(),
                }),
            )
            .await;
        Ok(())
    }

    /// Deletes a session (open or stored) and its stored files (`session.delete`).
    pub async fn delete_session(&self, id: &str) -> Result<(), ErrorPayload> {
        let cmd = Command::new(
            self.new_request_id(),
            None,
            CommandPayload::SessionDelete(keel_envelope::commands::SessionDelete {
                session_id: id.to_owned(),
            }),
        );
        self.execute(cmd).await
    }

    /// Sets an open session's title (`session.set_title`).
    pub async fn set_session_title(&self, id: &str, title: &str) -> Result<(), ErrorPayload> {
        let cmd = Command::new(
            self.new_request_id(),
            Some(id.to_owned()),
            CommandPayload::SessionSetTitle(keel_envelope::commands::SetTitle {
                title: title.to_owned(),
            }),
        );
        self.execute(cmd).await
    }

    /// A session's whole event log, oldest first, as stored (for hosts that replay a
    /// session in their own format, e.g. ACP's `session/load`).
    pub fn session_log(&self, id: &str) -> Result<Vec<Envelope>, ErrorPayload> {
        Ok(self.inner.services.store().load_events(id)?.events)
    }

    /// Stored and open sessions, most recently updated first.
    pub fn list_sessions(&self) -> Result<Vec<SessionInfo>, ErrorPayload> {
        let live: HashMap<String, Arc<Session>> = self.inner.open.loaded_by_id();
        let mut out: Vec<SessionInfo> = Vec::new();
        for stored in self.inner.services.store().list_summaries()? {
            match live.get(&stored.session_id) {
                Some(s) => out.push(s.info()),
                None => out.push(stored.info()),
            }
        }
        for (id, s) in &live {
            if !out.iter().any(|i| &i.session_id == id) {
                out.push(s.info());
            }
        }
        out.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        Ok(out)
    }
}
