//! The open sessions of a kernel: those in memory, those dropped from memory while
//! idle (reloaded from the store by the next command naming them), and the places
//! reserved for sessions being started or resumed, counted against
//! [`crate::KernelConfig::max_open_sessions`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use keel_envelope::{ErrorCode, ErrorPayload, Sequencer};

use crate::session::services::Services;
use crate::session::Session;

/// The open sessions.
#[derive(Debug)]
pub(crate) struct Sessions {
    services: Arc<Services>,
    map: Mutex<HashMap<String, Arc<Session>>>,
    /// Ids of the sessions dropped from memory while open.
    unloaded: Mutex<HashSet<String>>,
    /// Sessions being started or resumed: counted against `max_open_sessions` until
    /// they join `map`.
    admitting: AtomicUsize,
}

/// A place reserved for a session being opened (see [`Sessions::admit`]); given back
/// when dropped unless the session was inserted.
pub(crate) struct Admission<'k> {
    open: &'k Sessions,
    done: bool,
}

impl Admission<'_> {
    /// Makes the session open: inserts it and gives the reservation back at once.
    /// If a session of that id was opened meanwhile (two resumes at once), that one
    /// stays and is returned.
    pub(crate) fn insert(mut self, id: &str, session: Arc<Session>) -> Arc<Session> {
        let mut map = self.open.map();
        let open = map.entry(id.to_owned()).or_insert(session).clone();
        self.open.admitting.fetch_sub(1, Ordering::SeqCst);
        self.done = true;
        open
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.open.admitting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Sessions {
    pub(crate) fn new(services: Arc<Services>) -> Self {
        Self {
            services,
            map: Mutex::new(HashMap::new()),
            unloaded: Mutex::new(HashSet::new()),
            admitting: AtomicUsize::new(0),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unloaded(&self) -> MutexGuard<'_, HashSet<String>> {
        self.unloaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An open session, reloaded if it was unloaded while idle; marked as used now.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        let live = self.map().get(id).cloned();
        let session = match live {
            Some(s) => Some(s),
            None => self.reload(id).unwrap_or_else(|e| {
                tracing::warn!(session_id = %id, code = %e.code, message = %e.message, "reloading an idle session failed");
                None
            }),
        };
        if let Some(s) = &session {
            s.touch();
        }
        session
    }

    /// The open session `id`, or the error of a command naming a session that is not
    /// open.
    pub(crate) fn require(&self, id: &str) -> Result<Arc<Session>, ErrorPayload> {
        self.get(id).ok_or_else(|| {
            ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("session {id:?} is not open (resume it first)"),
            )
            .with_detail("sessionId", id)
        })
    }

    /// Brings back an unloaded session from the store (`None` when `id` was not
    /// unloaded).
    pub(crate) fn reload(&self, id: &str) -> Result<Option<Arc<Session>>, ErrorPayload> {
        // Held while reloading, so two commands naming the session reload it once.
        let mut map = self.map();
        if let Some(s) = map.get(id) {
            return Ok(Some(s.clone()));
        }
        if !self.unloaded().contains(id) {
            return Ok(None);
        }
        let store = self.services.store();
        let Some(mut state) = store.load_state(id)? else {
            self.forget(id);
            return Ok(None);
        };
        let log = store.load_events(id)?;
        let mut seq = Sequencer::new();
        for env in &log.events {
            seq.restore(&env.request_id, env.sequence);
        }
        let model = self.services.model_or_default(&state.model)?;
        state.model = model.id();
        let session = Session::new(self.services.clone(), state, model, seq);
        session.touch();
        map.insert(id.to_owned(), session.clone());
        self.forget(id);
        tracing::info!(session_id = %id, "idle session reloaded");
        Ok(Some(session))
    }

    /// Reloads every unloaded session (shutdown closes them like the others).
    pub(crate) fn reload_all(&self) {
        for id in self.unloaded_ids() {
            let _ = self.reload(&id);
        }
    }

    /// Reserves a place for one more open session, or refuses with
    /// `SESSION_LIMIT_REACHED` when `max_open_sessions` are open (or being opened).
    pub(crate) fn admit(&self) -> Result<Admission<'_>, ErrorPayload> {
        let max = self.services.config().max_open_sessions;
        let map = self.map();
        // Sessions unloaded while idle are open too.
        let open = map.len() + self.admitting.load(Ordering::SeqCst) + self.unloaded().len();
        if max > 0 && open >= max {
            return Err(ErrorPayload::new(
                ErrorCode::SessionLimitReached,
                format!(
                    "{open} sessions are open, the most this runtime allows ({max}); close one first"
                ),
            )
            .category(keel_envelope::error::ErrorCategory::Business)
            .retryable(true)
            .with_detail("limit", max as u64)
            .with_detail("open", open as u64));
        }
        self.admitting.fetch_add(1, Ordering::SeqCst);
        drop(map);
        Ok(Admission {
            open: self,
            done: false,
        })
    }

    /// Takes `id` out of memory (closed or deleted).
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<Session>> {
        self.map().remove(id)
    }

    /// Takes every session out of memory (shutdown).
    pub(crate) fn drain(&self) -> Vec<Arc<Session>> {
        self.map().drain().map(|(_, s)| s).collect()
    }

    /// The sessions in memory.
    pub(crate) fn loaded(&self) -> Vec<Arc<Session>> {
        self.map().values().cloned().collect()
    }

    /// The sessions in memory, by id.
    pub(crate) fn loaded_by_id(&self) -> HashMap<String, Arc<Session>> {
        self.map().clone()
    }

    /// Ids of the sessions in memory.
    pub(crate) fn loaded_ids(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// Ids of the open sessions dropped from memory.
    pub(crate) fn unloaded_ids(&self) -> Vec<String> {
        self.unloaded().iter().cloned().collect()
    }

    /// Forgets that `id` was unloaded (closed, deleted or reloaded).
    pub(crate) fn forget(&self, id: &str) -> bool {
        self.unloaded().remove(id)
    }

    /// Drops `session` from memory, keeping it open, if it is still the one in memory
    /// and `still_idle` says so (looked at under the map's lock: a command that took
    /// the session from the map since touched it). Returns whether it was dropped.
    pub(crate) fn unload(
        &self,
        session: &Arc<Session>,
        still_idle: impl FnOnce(&Session) -> bool,
    ) -> bool {
        let mut map = self.map();
        if !still_idle(session)
            || !map
                .get(&session.id)
                .is_some_and(|s| Arc::ptr_eq(s, session))
        {
            return false;
        }
        map.remove(&session.id);
        self.unloaded().insert(session.id.clone());
        true
    }
}
