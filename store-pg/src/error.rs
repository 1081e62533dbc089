//! The store's errors: every failure is an [`ErrorPayload`] with code
//! `SESSION_PERSISTENCE_FAILED` (or `SESSION_NOT_FOUND` / `REQUEST_INVALID` where the
//! file store answers those) and a stable `details.reason` naming what went wrong, so a
//! host, `keel doctor` and the kernel can tell a wrong password from a fenced writer
//! without parsing messages. [`kind_of`] reads the reason back.
//!
//! Messages say what is wrong and what to do about it. They never contain the password
//! of a store URL: places are named by [`crate::options::PgOptions::describe`].

use keel_envelope::{ErrorCode, ErrorPayload};

/// What went wrong, as `details.reason` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreErrorKind {
    /// The store URL cannot be parsed, or asks for something this build cannot do.
    InvalidUrl,
    /// The server refused the user or password.
    AuthFailed,
    /// The server could not be reached within the connect timeout.
    Unreachable,
    /// The database named by the URL does not exist.
    DatabaseMissing,
    /// The database holds tables that are not Keel's.
    ForeignDatabase,
    /// The database's schema is newer than this binary knows.
    DatabaseNewer,
    /// The write carried a lease epoch that is not the session's live one: another
    /// node took the session over, the lease ran out, or it was released.
    Fenced,
    /// The database went away in the middle of an operation (and did not come back
    /// within the retry window). Retryable.
    Unavailable,
    /// An argument the store cannot take (a checkpoint object whose bytes do not match
    /// its hash, an event of another session, a duplicate event).
    InvalidInput,
    /// A checkpoint manifest names objects the store does not hold
    /// (`details.missing`). Retryable after putting them.
    ObjectMissing,
    /// A stored row cannot be decoded.
    Corrupt,
    /// Any other database error.
    Database,
}

impl StoreErrorKind {
    /// Every kind.
    pub const ALL: &'static [StoreErrorKind] = &[
        StoreErrorKind::InvalidUrl,
        StoreErrorKind::AuthFailed,
        StoreErrorKind::Unreachable,
        StoreErrorKind::DatabaseMissing,
        StoreErrorKind::ForeignDatabase,
        StoreErrorKind::DatabaseNewer,
        StoreErrorKind::Fenced,
        StoreErrorKind::Unavailable,
        StoreErrorKind::InvalidInput,
        StoreErrorKind::ObjectMissing,
        StoreErrorKind::Corrupt,
        StoreErrorKind::Database,
    ];

    /// The stable `details.reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreErrorKind::InvalidUrl => "invalid_url",
            StoreErrorKind::AuthFailed => "auth_failed",
            StoreErrorKind::Unreachable => "unreachable",
            StoreErrorKind::DatabaseMissing => "database_missing",
            StoreErrorKind::ForeignDatabase => "foreign_database",
            StoreErrorKind::DatabaseNewer => "database_newer",
            StoreErrorKind::Fenced => "fenced",
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::InvalidInput => "invalid_input",
            StoreErrorKind::ObjectMissing => "object_missing",
            StoreErrorKind::Corrupt => "corrupt",
            StoreErrorKind::Database => "database_error",
        }
    }

    /// Whether trying the same thing again may succeed.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            StoreErrorKind::Unreachable
                | StoreErrorKind::Unavailable
                | StoreErrorKind::ObjectMissing
        )
    }
}

impl std::fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error of `kind`: `SESSION_PERSISTENCE_FAILED` with `details.reason`.
pub fn store_error(kind: StoreErrorKind, message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::SessionPersistenceFailed, message)
        .retryable(kind.retryable())
        .with_detail("reason", kind.as_str())
}

/// The kind of a store error, from its `details.reason`; `None` for other errors.
pub fn kind_of(e: &ErrorPayload) -> Option<StoreErrorKind> {
    if e.code != ErrorCode::SessionPersistenceFailed {
        return None;
    }
    let reason = e.details.get("reason")?.as_str()?;
    StoreErrorKind::ALL
        .iter()
        .copied()
        .find(|k| k.as_str() == reason)
}

/// Whether `e` says the write was fenced (its lease epoch is stale).
pub fn is_fenced(e: &ErrorPayload) -> bool {
    kind_of(e) == Some(StoreErrorKind::Fenced)
}

/// The session id is not one a store keeps (the file store's rule: 1 to 128 ASCII
/// letters, digits, `_` and `-`), `SESSION_NOT_FOUND` as the file store answers.
pub fn check_session_id(session_id: &str) -> Result<(), ErrorPayload> {
    if session_id.is_empty()
        || session_id.len() > 128
        || !session_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(ErrorPayload::new(
            ErrorCode::SessionNotFound,
            format!("{session_id:?} is not a valid session id"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back() {
        for &k in StoreErrorKind::ALL {
            assert_eq!(kind_of(&store_error(k, "x")), Some(k));
        }
        let other =
            ErrorPayload::new(ErrorCode::SessionNotFound, "x").with_detail("reason", "fenced");
        assert_eq!(kind_of(&other), None);
        assert!(is_fenced(&store_error(StoreErrorKind::Fenced, "x")));
        assert!(!store_error(StoreErrorKind::Fenced, "x").retryable);
        assert!(store_error(StoreErrorKind::Unavailable, "x").retryable);
    }

    #[test]
    fn session_ids_are_checked() {
        assert!(check_session_id("sess_01ABC-x").is_ok());
        for bad in ["", "a/b", "../x", "a b", &"x".repeat(129)] {
            let e = check_session_id(bad).err();
            assert_eq!(
                e.map(|e| e.code),
                Some(ErrorCode::SessionNotFound),
                "{bad:?}"
            );
        }
    }
}
