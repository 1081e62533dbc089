//! Keel errors as JSON-RPC errors (see docs/acp.md, "Errors").

use agent_client_protocol::{Error, ErrorCode};
use keel_envelope::{ErrorCode as KeelCode, ErrorPayload};
use serde_json::json;

/// `-32602` with a message.
pub(crate) fn invalid_params(message: impl Into<String>) -> Error {
    Error::new(ErrorCode::INVALID_PARAMS, message)
}

/// `-32002`: the session is not open on this connection.
pub(crate) fn not_open(session_id: &str) -> Error {
    Error::new(
        ErrorCode::RESOURCE_NOT_FOUND,
        format!("session {session_id:?} is not open (use session/load)"),
    )
    .data(json!({ "sessionId": session_id }))
}

/// A kernel error: an unknown session is `-32002`, bad input `-32602`, anything else
/// `-32603`; Keel's error payload is the `data`.
pub(crate) fn from_keel(e: ErrorPayload) -> Error {
    let code = match e.code {
        KeelCode::SessionNotFound => ErrorCode::RESOURCE_NOT_FOUND,
        KeelCode::RequestInvalid => ErrorCode::INVALID_PARAMS,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    let data = serde_json::to_value(&e).ok();
    Error::new(code, e.message).data(data)
}

/// Serializes a response of the protocol's types.
pub(crate) fn to_value<T: serde::Serialize>(v: T) -> Result<serde_json::Value, Error> {
    serde_json::to_value(v).map_err(Error::into_internal_error)
}
