//! What one remote connection may do: its token's role and session binding, checked
//! against every command before the kernel sees it, and enforced again on everything
//! it is sent (a session-bound token never receives another session's events, and
//! its `session.list` and `harness.status` answers show its session alone). The
//! token's revocation or expiry ends the connection.

use std::borrow::Cow;

use keel_envelope::commands::CommandPayload;
use keel_envelope::error::ErrorCategory;
use keel_envelope::{Command, CommandType, Envelope, ErrorCode, ErrorPayload, Event, Source};
use tokio::sync::watch;

use crate::conn::ConnectionEnd;
use crate::roles::{requirement, Role};
use crate::tokens::{now_ms, Snapshot, TokenRecord, TokenState};

/// A remote connection's grant.
#[derive(Debug, Clone)]
pub struct Access {
    token_id: String,
    role: Role,
    session: Option<String>,
    expires_at: Option<u64>,
    tokens: Option<watch::Receiver<Snapshot>>,
}

/// The session a command names: its envelope's `sessionId` for session commands, its
/// payload's for the others that name one; `None` for those that name none.
fn named_session(cmd: &Command) -> Option<&str> {
    if let CommandPayload::WorktreeRemove(p) = &cmd.payload {
        // By path, a worktree's owner is not known here: a bound token names it.
        return Some(p.session_id.as_deref().unwrap_or(""));
    }
    match cmd.payload.named_session() {
        Some(named) => Some(named),
        None if cmd.command_type().needs_session() => cmd.session_id.as_deref(),
        None => None,
    }
}

/// Commands that make a session other than the one they name.
fn creates_session(t: CommandType) -> bool {
    matches!(t, CommandType::SessionStart | CommandType::SessionFork)
}

impl Access {
    /// The grant of a verified token; `tokens` follows the store for revocations.
    pub fn new(record: &TokenRecord, tokens: Option<watch::Receiver<Snapshot>>) -> Self {
        Self {
            token_id: record.id.clone(),
            role: record.role,
            session: record.session.clone(),
            expires_at: record.expires_at,
            tokens,
        }
    }

    /// The token's id (`tok_…`), for logs.
    pub fn token_id(&self) -> &str {
        &self.token_id
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The session the token is bound to.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// Whether the command may go to the kernel; otherwise the error that answers it
    /// (`ROLE_FORBIDDEN`, or `SESSION_NOT_FOUND` for another session than the bound
    /// one: the same answer whether that session exists or not).
    pub fn check(&self, cmd: &Command) -> Result<(), ErrorPayload> {
        let t = cmd.command_type();
        let needed = requirement(t).role;
        if !self.role.allows(needed) {
            return Err(ErrorPayload::new(
                ErrorCode::RoleForbidden,
                format!(
                    "{} needs the {needed} role; this connection's token is {}",
                    t.as_str(),
                    self.role
                ),
            )
            .category(ErrorCategory::Bridge)
            .with_detail("reason", "role")
            .with_detail("command", t.as_str())
            .with_detail("role", self.role.as_str())
            .with_detail("required", needed.as_str()));
        }
        let Some(bound) = &self.session else {
            return Ok(());
        };
        if creates_session(t) {
            return Err(ErrorPayload::new(
                ErrorCode::RoleForbidden,
                format!(
                    "{} makes a new session; this connection's token is bound to session {bound}",
                    t.as_str()
                ),
            )
            .category(ErrorCategory::Bridge)
            .with_detail("reason", "session_bound")
            .with_detail("command", t.as_str())
            .with_detail("role", self.role.as_str())
            .with_detail("required", needed.as_str())
            .with_detail("sessionId", bound.as_str()));
        }
        match named_session(cmd) {
            Some(s) if s != bound => Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("session {s:?} cannot be reached with this connection's token"),
            )
            .category(ErrorCategory::Business)
            .with_detail("reason", "session_bound")
            .with_detail("sessionId", s)),
            _ => Ok(()),
        }
    }

    /// What of `env` this connection may be sent: all of it, a copy narrowed to the
    /// bound session, or nothing.
    pub fn filter<'a>(&self, env: &'a Envelope) -> Option<Cow<'a, Envelope>> {
        let Some(bound) = &self.session else {
            return Some(Cow::Borrowed(env));
        };
        // The transport's own envelopes (this connection's answers) always go.
        if env.source == Source::Bridge {
            return Some(Cow::Borrowed(env));
        }
        if env.session_id.as_deref().is_some_and(|s| s != bound) {
            return None;
        }
        match &env.event {
            Event::SessionList(l) if l.sessions.iter().any(|s| &s.session_id != bound) => {
                let mut l = l.clone();
                l.sessions.retain(|s| &s.session_id == bound);
                Some(Cow::Owned(Envelope {
                    event: Event::SessionList(l),
                    ..env.clone()
                }))
            }
            Event::WorktreeList(l) => {
                let mut l = l.clone();
                l.worktrees
                    .retain(|w| w.session_id.as_deref() == Some(bound.as_str()));
                Some(Cow::Owned(Envelope {
                    event: Event::WorktreeList(l),
                    ..env.clone()
                }))
            }
            Event::HarnessStatus(h) => {
                let mut h = h.clone();
                h.sessions.retain(|s| &s.session_id == bound);
                h.background_tasks.retain(|t| &t.session_id == bound);
                h.sub_agents.retain(|a| &a.parent_session_id == bound);
                Some(Cow::Owned(Envelope {
                    event: Event::HarnessStatus(h),
                    ..env.clone()
                }))
            }
            _ => Some(Cow::Borrowed(env)),
        }
    }

    /// Resolves when the token stops being usable: it expires, is revoked, leaves the
    /// store, or the store cannot be read.
    pub async fn lost(&self) -> ConnectionEnd {
        let mut rx = self.tokens.clone();
        loop {
            let now = now_ms();
            if let Some(rx) = &mut rx {
                let state = rx.borrow_and_update().state(&self.token_id, now);
                match state {
                    Some(TokenState::Active) => {}
                    Some(TokenState::Expired) => return ConnectionEnd::Expired,
                    Some(TokenState::Revoked) | None => return ConnectionEnd::Revoked,
                }
            }
            if self.expires_at.is_some_and(|e| now >= e) {
                return ConnectionEnd::Expired;
            }
            let until_expiry = self
                .expires_at
                .map(|e| std::time::Duration::from_millis(e.saturating_sub(now)));
            let expiry = async {
                match until_expiry {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            let changed = async {
                match &mut rx {
                    Some(r) => {
                        if r.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = expiry => {}
                _ = changed => {}
            }
        }
    }
}
