//! The JSON-lines codec: one command or one envelope per line.
//!
//! Decoding never panics: every bad line becomes a [`CodecError`] carrying a structured
//! [`ErrorPayload`] (`REQUEST_INVALID` or `VERSION_MISMATCH`) whose `details.reason`
//! is one of the stable reasons below, whose `details.field` names the offending field
//! when there is one, and which echoes the line's `requestId` when it can be read.
//!
//! | reason | when |
//! |---|---|
//! | `line_too_long` | the line exceeds [`Limits::max_line_bytes`] |
//! | `empty_line` | the line is blank |
//! | `invalid_utf8` | the bytes are not UTF-8 |
//! | `invalid_json` | the text is not JSON |
//! | `not_an_object` | the JSON is not an object |
//! | `missing_field` | a required field is absent |
//! | `wrong_type` | a field has the wrong JSON type |
//! | `invalid_value` | a field has the right type but a bad value (unknown enum variant, bad version string, empty `requestId`) |
//! | `unknown_type` | `type` names no command |
//! | `version_mismatch` | `version` has another major (code `VERSION_MISMATCH`) |

use std::collections::HashMap;

use serde_json::value::RawValue;

use crate::commands::{Command, CommandPayload, CommandType};
use crate::envelope::Envelope;
use crate::error::{ErrorCategory, ErrorCode, ErrorPayload};

/// Default maximum size of one line: 4 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Longest `requestId` accepted, in bytes. The id is repeated in every event of its
/// request and kept in the session's log and history marks; a longer one is refused
/// (`invalid_value`) and not echoed.
pub const MAX_REQUEST_ID_BYTES: usize = 256;

/// Decoder limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum bytes in one line, excluding the newline.
    pub max_line_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// A line that could not be decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecError {
    /// The structured error to send back.
    pub error: ErrorPayload,
    /// The line's `requestId`, when it could be read.
    pub request_id: Option<String>,
    /// The line's `sessionId`, when it could be read.
    pub session_id: Option<String>,
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for CodecError {}

fn invalid(reason: &str, message: String) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message)
        .category(ErrorCategory::Bridge)
        .with_detail("reason", reason)
}

fn field_error(reason: &str, field: &str, message: String) -> ErrorPayload {
    invalid(reason, message).with_detail("field", field)
}

/// The top-level fields of a command line, borrowed from the line. Other keys are
/// ignored (compatibility rule); a JSON `null` is kept as a raw `null`, not as absent.
#[derive(Default, serde::Deserialize)]
struct Fields<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    version: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present", rename = "type")]
    ty: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present", rename = "requestId")]
    request_id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present", rename = "sessionId")]
    session_id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    payload: Option<&'a RawValue>,
    #[serde(
        default,
        borrow,
        deserialize_with = "present",
        rename = "schemaVersion"
    )]
    schema_version: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue as serde::Deserialize>::deserialize(d).map(Some)
}

impl<'a> Fields<'a> {
    fn get(&self, name: &str) -> Option<&'a RawValue> {
        match name {
            "version" => self.version,
            "type" => self.ty,
            "requestId" => self.request_id,
            "sessionId" => self.session_id,
            "payload" => self.payload,
            "schemaVersion" => self.schema_version,
            _ => None,
        }
    }

    /// Picks the known keys out of a map of every key (the last duplicate wins).
    fn from_map<K: std::borrow::Borrow<str> + std::hash::Hash + Eq>(
        map: &'a HashMap<K, &'a RawValue>,
    ) -> Self {
        Fields {
            version: map.get("version").copied(),
            ty: map.get("type").copied(),
            request_id: map.get("requestId").copied(),
            session_id: map.get("sessionId").copied(),
            payload: map.get("payload").copied(),
            schema_version: map.get("schemaVersion").copied(),
        }
    }
}

fn json_kind(raw: &RawValue) -> &'static str {
    match raw.get().trim_start().as_bytes().first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't') | Some(b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

/// Finds `"requestId": "…"` in a line that could not be parsed whole (too long, bad
/// UTF-8 elsewhere), so the error can still be correlated.
pub fn scan_request_id(bytes: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"requestId\"";
    let pos = bytes.windows(KEY.len()).position(|w| w == KEY)?;
    let rest = &bytes[pos + KEY.len()..];
    let rest = rest
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &rest[i..])?;
    let rest = rest.strip_prefix(b":")?;
    let start = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = rest[start..].strip_prefix(b"\"")?;
    let end = rest
        .iter()
        .take(MAX_REQUEST_ID_BYTES)
        .position(|b| *b == b'"' || *b == b'\\')?;
    if end == 0 || rest.get(end) != Some(&b'"') {
        return None;
    }
    std::str::from_utf8(&rest[..end]).ok().map(str::to_owned)
}

/// Decodes one line (without or with its trailing newline) into a [`Command`].
pub fn decode_command(line: &[u8], limits: Limits) -> Result<Command, CodecError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let fail =
        |error: ErrorPayload, request_id: Option<String>, session_id: Option<String>| CodecError {
            error,
            request_id,
            session_id,
        };

    if line.len() > limits.max_line_bytes {
        return Err(fail(
            invalid(
                "line_too_long",
                format!(
                    "line of {} bytes exceeds the limit of {} bytes",
                    line.len(),
                    limits.max_line_bytes
                ),
            )
            .with_detail("limit", limits.max_line_bytes as u64)
            .with_detail("size", line.len() as u64),
            scan_request_id(&line[..line.len().min(64 * 1024)]),
            None,
        ));
    }
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            return Err(fail(
                invalid(
                    "invalid_utf8",
                    format!("line is not valid UTF-8 (at byte {})", e.valid_up_to()),
                )
                .with_detail("byteOffset", e.valid_up_to() as u64),
                scan_request_id(line),
                None,
            ))
        }
    };
    if text.trim().is_empty() {
        return Err(fail(
            invalid("empty_line", "line is empty".into()),
            None,
            None,
        ));
    }
    // Fast path: one pass into the known fields. Anything unusual (not an object, bad
    // JSON, duplicate keys) takes the slower path below, which also classifies errors.
    if text.trim_start().starts_with('{') {
        if let Ok(fields) = serde_json::from_str::<Fields<'_>>(text) {
            return decode_fields(&fields);
        }
    }
    let fields: HashMap<&str, &RawValue> = match serde_json::from_str::<&RawValue>(text) {
        Err(e) => {
            return Err(fail(
                invalid("invalid_json", format!("line is not valid JSON: {e}"))
                    .with_detail("line", e.line() as u64)
                    .with_detail("column", e.column() as u64),
                scan_request_id(line),
                None,
            ))
        }
        Ok(raw) if json_kind(raw) != "object" => {
            return Err(fail(
                invalid(
                    "not_an_object",
                    format!("a command must be a JSON object, got {}", json_kind(raw)),
                ),
                None,
                None,
            ))
        }
        Ok(raw) => match serde_json::from_str(raw.get()) {
            Ok(map) => map,
            // Keys with escapes cannot be borrowed; fall back to owned parsing.
            Err(_) => return decode_owned(text, limits),
        },
    };
    decode_fields(&Fields::from_map(&fields))
}

fn decode_owned(text: &str, _limits: Limits) -> Result<Command, CodecError> {
    let owned: HashMap<String, &RawValue> = serde_json::from_str(text).map_err(|e| CodecError {
        error: invalid("invalid_json", format!("line is not valid JSON: {e}")),
        request_id: None,
        session_id: None,
    })?;
    decode_fields(&Fields::from_map(&owned))
}

fn string_field(fields: &Fields<'_>, name: &str) -> Result<Option<String>, ErrorPayload> {
    match fields.get(name) {
        None => Ok(None),
        Some(raw) => match serde_json::from_str::<Option<String>>(raw.get()) {
            Ok(v) => Ok(v),
            Err(_) => Err(field_error(
                "wrong_type",
                name,
                format!("field `{name}` must be a string, got {}", json_kind(raw)),
            )
            .with_detail("expected", "string")),
        },
    }
}

fn decode_fields(fields: &Fields<'_>) -> Result<Command, CodecError> {
    // requestId first, so every later error can echo it.
    let request_id = string_field(fields, "requestId").map_err(|error| CodecError {
        error,
        request_id: None,
        session_id: None,
    })?;
    // An empty requestId cannot correlate anything, and an over-long one would be
    // repeated in every event: both are refused and not echoed.
    let refused = match request_id.as_deref() {
        Some("") => Some(field_error(
            "invalid_value",
            "requestId",
            "field `requestId` must not be empty".into(),
        )),
        Some(id) if id.len() > MAX_REQUEST_ID_BYTES => Some(
            field_error(
                "invalid_value",
                "requestId",
                format!(
                    "field `requestId` is {} bytes long; the limit is {MAX_REQUEST_ID_BYTES}",
                    id.len()
                ),
            )
            .with_detail("limit", MAX_REQUEST_ID_BYTES as u64)
            .with_detail("size", id.len() as u64),
        ),
        _ => None,
    };
    let request_id = request_id.filter(|_| refused.is_none());
    let session_id = string_field(fields, "sessionId").ok().flatten();
    let fail = |error: ErrorPayload| CodecError {
        error,
        request_id: request_id.clone(),
        session_id: session_id.clone(),
    };
    if let Some(error) = refused {
        return Err(fail(error));
    }
    let Some(request_id_value) = request_id.clone() else {
        return Err(fail(field_error(
            "missing_field",
            "requestId",
            "missing field `requestId`".into(),
        )));
    };

    let version = match string_field(fields, "version").map_err(&fail)? {
        Some(v) => v,
        None => {
            return Err(fail(field_error(
                "missing_field",
                "version",
                "missing field `version`".into(),
            )))
        }
    };
    match parse_major(&version) {
        Some(crate::PROTOCOL_MAJOR) => {}
        Some(major) => {
            return Err(fail(
                ErrorPayload::new(
                    ErrorCode::VersionMismatch,
                    format!(
                        "protocol version {version} is not supported; this runtime speaks {}",
                        crate::PROTOCOL_VERSION
                    ),
                )
                .category(ErrorCategory::Bridge)
                .with_detail("reason", "version_mismatch")
                .with_detail("field", "version")
                .with_detail("expected", format!("{}.x", crate::PROTOCOL_MAJOR))
                .with_detail("got", version.clone())
                .with_detail("gotMajor", major),
            ))
        }
        None => {
            return Err(fail(field_error(
                "invalid_value",
                "version",
                format!("field `version` must look like \"1.0\", got {version:?}"),
            )))
        }
    }

    // The optional `schemaVersion` of socket clients (seed 000): the protocol's major.
    if let Some(raw) = fields.schema_version {
        match serde_json::from_str::<u64>(raw.get()) {
            Ok(v) if v == u64::from(crate::PROTOCOL_MAJOR) => {}
            Ok(v) => {
                return Err(fail(
                    ErrorPayload::new(
                        ErrorCode::VersionMismatch,
                        format!(
                            "schemaVersion {v} is not supported; this runtime speaks {}",
                            crate::PROTOCOL_MAJOR
                        ),
                    )
                    .category(ErrorCategory::Bridge)
                    .with_detail("reason", "version_mismatch")
                    .with_detail("field", "schemaVersion")
                    .with_detail("expected", u64::from(crate::PROTOCOL_MAJOR))
                    .with_detail("got", v),
                ))
            }
            Err(_) => {
                return Err(fail(
                    field_error(
                        "wrong_type",
                        "schemaVersion",
                        format!(
                            "field `schemaVersion` must be a non-negative integer, got {}",
                            json_kind(raw)
                        ),
                    )
                    .with_detail("expected", "integer"),
                ))
            }
        }
    }

    let type_name = match string_field(fields, "type").map_err(&fail)? {
        Some(t) => t,
        None => {
            return Err(fail(field_error(
                "missing_field",
                "type",
                "missing field `type`".into(),
            )))
        }
    };
    let Some(ty) = CommandType::from_name(&type_name) else {
        return Err(fail(
            invalid(
                "unknown_type",
                format!("unknown command type {type_name:?}"),
            )
            .with_detail("field", "type")
            .with_detail("type", type_name.clone()),
        ));
    };

    if fields.session_id.is_some() {
        string_field(fields, "sessionId").map_err(&fail)?;
    }
    if ty.needs_session() && session_id.is_none() {
        return Err(fail(field_error(
            "missing_field",
            "sessionId",
            format!("command `{type_name}` needs field `sessionId`"),
        )));
    }

    let payload_text = match fields.payload {
        None => "{}",
        Some(raw) if json_kind(raw) == "object" => raw.get(),
        Some(raw) => {
            return Err(fail(
                field_error(
                    "wrong_type",
                    "payload",
                    format!("field `payload` must be an object, got {}", json_kind(raw)),
                )
                .with_detail("expected", "object"),
            ))
        }
    };
    let payload = CommandPayload::decode(ty, payload_text).map_err(|e| fail(payload_error(&e)))?;

    let mut cmd = Command {
        version,
        request_id: request_id_value,
        session_id: session_id.clone(),
        payload,
    };
    cmd.settle_session().map_err(fail)?;
    Ok(cmd)
}

/// The major of a `MAJOR.MINOR` version, both parts plain ASCII digits.
fn parse_major(version: &str) -> Option<u32> {
    let (major, minor) = version.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return None;
    }
    major.parse().ok()
}

fn payload_error(e: &serde_path_to_error::Error<serde_json::Error>) -> ErrorPayload {
    let inner = e.inner().to_string();
    // serde_json appends " at line X column Y"; drop it, the line is one line.
    let inner = inner.split(" at line ").next().unwrap_or(&inner).to_owned();
    let path = e.path().to_string();
    let base = if path == "." || path.is_empty() {
        "payload".to_owned()
    } else {
        format!("payload.{path}")
    };
    if let Some(rest) = inner.strip_prefix("missing field `") {
        let name = rest.trim_end_matches('`');
        let field = format!("{base}.{name}");
        return field_error("missing_field", &field, format!("missing field `{field}`"));
    }
    let reason = if inner.starts_with("invalid type") {
        "wrong_type"
    } else {
        "invalid_value"
    };
    field_error(reason, &base, format!("field `{base}`: {inner}"))
}

/// Encodes an envelope as one JSON line with a trailing newline.
///
/// The bytes are those of `serde_json` serializing the envelope, plus `\n`; the
/// encoder writes them directly (see the `encode` module).
pub fn encode_line(env: &Envelope) -> Vec<u8> {
    let mut out = Vec::with_capacity(crate::encode::size_hint(env));
    crate::encode::write_envelope(&mut out, env);
    out
}

/// Appends an envelope as one JSON line (with newline) to `out`.
pub fn encode_into(env: &Envelope, out: &mut Vec<u8>) {
    crate::encode::write_envelope(out, env);
}

/// Encodes a command as one JSON line with a trailing newline.
pub fn encode_command(cmd: &Command) -> Vec<u8> {
    let mut out = serde_json::to_vec(cmd).unwrap_or_default();
    out.push(b'\n');
    out
}

/// Decodes one envelope line. Unknown event types decode to `Event::Unknown`.
pub fn decode_envelope(line: &[u8]) -> Result<Envelope, ErrorPayload> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    serde_json::from_slice(line)
        .map_err(|e| invalid("invalid_envelope", format!("not a valid envelope: {e}")))
}
