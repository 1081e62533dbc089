//! The command decoder on bad input: one test per kind of bad line, a data-driven
//! corpus (`tests/data/codec/*.jsonl`), and a randomised never-panics test.
//!
//! Every check compares the exact error code, `details.reason`, `details.field` (absent
//! when not expected) and the echoed `requestId` (absent when not expected).

use std::path::Path;

use keel_envelope::codec::{decode_command, encode_command, CodecError, Limits};
use keel_envelope::commands::CommandPayload;
use keel_envelope::types::{Cursor, PermissionMode};
use keel_envelope::{Command, CommandType, ErrorCode};
use serde_json::Value;

use crate::samples::sample_command;

/// The reasons the codec documents; any other value is a bug.
const REASONS: &[&str] = &[
    "line_too_long",
    "empty_line",
    "invalid_utf8",
    "invalid_json",
    "not_an_object",
    "missing_field",
    "wrong_type",
    "invalid_value",
    "unknown_type",
    "version_mismatch",
];

/// What a bad line must produce.
#[derive(Debug, Clone)]
struct Expect<'a> {
    code: ErrorCode,
    reason: &'a str,
    field: Option<&'a str>,
    request_id: Option<&'a str>,
}

fn invalid<'a>(reason: &'a str, field: Option<&'a str>, request_id: Option<&'a str>) -> Expect<'a> {
    Expect {
        code: ErrorCode::RequestInvalid,
        reason,
        field,
        request_id,
    }
}

/// Compares a decode error with what was expected; returns every mismatch.
fn mismatches(err: &CodecError, expect: Expect<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let e = &err.error;
    if e.code != expect.code {
        out.push(format!("code: expected {}, got {}", expect.code, e.code));
    }
    let reason = e.details.get("reason").and_then(Value::as_str);
    if reason != Some(expect.reason) {
        out.push(format!(
            "reason: expected {:?}, got {reason:?}",
            expect.reason
        ));
    }
    let field = e.details.get("field").and_then(Value::as_str);
    if field != expect.field {
        out.push(format!("field: expected {:?}, got {field:?}", expect.field));
    }
    if err.request_id.as_deref() != expect.request_id {
        out.push(format!(
            "requestId: expected {:?}, got {:?}",
            expect.request_id, err.request_id
        ));
    }
    if e.message.is_empty() {
        out.push("message is empty".into());
    }
    if e.retryable {
        out.push("a bad line is never retryable".into());
    }
    out
}

fn decode(line: &[u8]) -> Result<Command, CodecError> {
    decode_command(line, Limits::default())
}

#[track_caller]
fn check(line: &[u8], expect: Expect<'_>) {
    check_with(line, Limits::default(), expect)
}

#[track_caller]
fn check_with(line: &[u8], limits: Limits, expect: Expect<'_>) {
    match decode_command(line, limits) {
        Ok(cmd) => panic!(
            "expected {} / {}, but the line decoded to {cmd:?}\nline: {}",
            expect.code,
            expect.reason,
            String::from_utf8_lossy(line)
        ),
        Err(err) => {
            let m = mismatches(&err, expect);
            assert!(
                m.is_empty(),
                "line: {}\nerror: {}\n{}",
                String::from_utf8_lossy(line),
                serde_json::to_string(&err.error).unwrap(),
                m.join("\n")
            );
        }
    }
}

#[track_caller]
fn accept(line: &[u8]) -> Command {
    decode(line).unwrap_or_else(|e| {
        panic!(
            "line should decode: {}\nerror: {}",
            String::from_utf8_lossy(line),
            serde_json::to_string(&e.error).unwrap()
        )
    })
}

// ---- one test per kind of bad line -------------------------------------------------

#[test]
fn line_over_the_limit_echoes_the_scanned_request_id() {
    let limits = Limits { max_line_bytes: 64 };
    let line = format!(
        r#"{{"version":"1.0","type":"request.send","requestId":"req_long","sessionId":"s","payload":{{"message":"{}"}}}}"#,
        "x".repeat(100)
    );
    check_with(
        line.as_bytes(),
        limits,
        invalid("line_too_long", None, Some("req_long")),
    );
    let err = decode_command(line.as_bytes(), limits).unwrap_err();
    assert_eq!(err.error.details["limit"], 64);
    assert_eq!(err.error.details["size"], line.len());
    // Exactly at the limit is fine; the newline does not count.
    let ok = r#"{"version":"1.0","type":"session.list","requestId":"r"}"#;
    let limits = Limits {
        max_line_bytes: ok.len(),
    };
    assert!(decode_command(format!("{ok}\r\n").as_bytes(), limits).is_ok());
    let limits = Limits {
        max_line_bytes: ok.len() - 1,
    };
    check_with(
        ok.as_bytes(),
        limits,
        invalid("line_too_long", None, Some("r")),
    );
}

#[test]
fn line_over_the_limit_without_a_readable_request_id() {
    let limits = Limits { max_line_bytes: 16 };
    check_with(
        br#"{"requestId":42,"version":"1.0","type":"session.list"}"#,
        limits,
        invalid("line_too_long", None, None),
    );
}

#[test]
fn empty_line() {
    for line in [&b""[..], b"\n", b"\r\n", b"   \t  \n"] {
        check(line, invalid("empty_line", None, None));
    }
}

#[test]
fn invalid_utf8_echoes_the_scanned_request_id() {
    let mut line = br#"{"version":"1.0","type":"request.send","requestId":"req_8","sessionId":"s","payload":{"message":""#.to_vec();
    line.extend_from_slice(&[0xff, 0xfe]);
    line.extend_from_slice(b"\"}}");
    check(&line, invalid("invalid_utf8", None, Some("req_8")));
    let err = decode(&line).unwrap_err();
    let offset = line.iter().position(|b| *b == 0xff).unwrap();
    assert_eq!(err.error.details["byteOffset"], offset);
    check(&[0xc3, 0x28], invalid("invalid_utf8", None, None));
}

#[test]
fn invalid_json_truncated_object() {
    check(
        br#"{"version":"1.0","type":"session.list","requestId":"req_t""#,
        invalid("invalid_json", None, Some("req_t")),
    );
    check(br#"{"version":"1.0","#, invalid("invalid_json", None, None));
    check(
        br#"{"requestId":"r1"} trailing"#,
        invalid("invalid_json", None, Some("r1")),
    );
}

#[test]
fn not_an_object() {
    for line in [
        &br#"["version","1.0"]"#[..],
        br#""request.send""#,
        b"42",
        b"null",
        b"true",
    ] {
        check(line, invalid("not_an_object", None, None));
    }
}

#[test]
fn missing_request_id() {
    check(
        br#"{"version":"1.0","type":"session.list"}"#,
        invalid("missing_field", Some("requestId"), None),
    );
    check(
        br#"{"version":"1.0","type":"session.list","requestId":null}"#,
        invalid("missing_field", Some("requestId"), None),
    );
}

#[test]
fn mistyped_request_id() {
    check(
        br#"{"version":"1.0","type":"session.list","requestId":7}"#,
        invalid("wrong_type", Some("requestId"), None),
    );
}

#[test]
fn empty_request_id_is_not_echoed() {
    check(
        br#"{"version":"1.0","type":"session.list","requestId":""}"#,
        invalid("invalid_value", Some("requestId"), None),
    );
}

#[test]
fn over_long_request_id_is_refused_and_not_echoed() {
    let longest = "r".repeat(keel_envelope::codec::MAX_REQUEST_ID_BYTES);
    let line = format!(r#"{{"version":"1.0","type":"session.list","requestId":"{longest}"}}"#);
    assert!(
        decode(line.as_bytes()).is_ok(),
        "an id at the limit is accepted"
    );

    let too_long = format!("{longest}r");
    let line = format!(r#"{{"version":"1.0","type":"session.list","requestId":"{too_long}"}}"#);
    check(
        line.as_bytes(),
        invalid("invalid_value", Some("requestId"), None),
    );
    let err = decode(line.as_bytes()).unwrap_err();
    assert_eq!(err.error.details["limit"], 256);
    assert_eq!(err.error.details["size"], 257);
    // Multi-byte characters count as their bytes.
    let wide = "é".repeat(129);
    let line = format!(r#"{{"version":"1.0","type":"session.list","requestId":"{wide}"}}"#);
    check(
        line.as_bytes(),
        invalid("invalid_value", Some("requestId"), None),
    );
}

#[test]
fn missing_version() {
    check(
        br#"{"type":"session.list","requestId":"r2"}"#,
        invalid("missing_field", Some("version"), Some("r2")),
    );
}

#[test]
fn mistyped_version() {
    check(
        br#"{"version":1.0,"type":"session.list","requestId":"r3"}"#,
        invalid("wrong_type", Some("version"), Some("r3")),
    );
}

#[test]
fn unparseable_version() {
    for v in ["abc", "1", "1.x", "1.", ".1", "+1.0", " 1.0", "1.0.0", ""] {
        let line = format!(r#"{{"version":"{v}","type":"session.list","requestId":"r4"}}"#);
        check(
            line.as_bytes(),
            invalid("invalid_value", Some("version"), Some("r4")),
        );
    }
}

#[test]
fn other_major_version_is_a_version_mismatch() {
    let line = br#"{"version":"2.0","type":"session.list","requestId":"r5"}"#;
    check(
        line,
        Expect {
            code: ErrorCode::VersionMismatch,
            reason: "version_mismatch",
            field: Some("version"),
            request_id: Some("r5"),
        },
    );
    let err = decode(line).unwrap_err();
    assert_eq!(err.error.details["got"], "2.0");
    assert_eq!(err.error.details["expected"], "1.x");
    check(
        br#"{"version":"0.9","type":"session.list","requestId":"r5"}"#,
        Expect {
            code: ErrorCode::VersionMismatch,
            reason: "version_mismatch",
            field: Some("version"),
            request_id: Some("r5"),
        },
    );
}

#[test]
fn missing_type() {
    check(
        br#"{"version":"1.0","requestId":"r6"}"#,
        invalid("missing_field", Some("type"), Some("r6")),
    );
}

#[test]
fn mistyped_type() {
    check(
        br#"{"version":"1.0","type":["session.list"],"requestId":"r6"}"#,
        invalid("wrong_type", Some("type"), Some("r6")),
    );
}

#[test]
fn unknown_type() {
    let line = br#"{"version":"1.0","type":"session.teleport","requestId":"r7","sessionId":"s"}"#;
    check(line, invalid("unknown_type", Some("type"), Some("r7")));
    assert_eq!(
        decode(line).unwrap_err().error.details["type"],
        "session.teleport"
    );
    assert_eq!(decode(line).unwrap_err().session_id.as_deref(), Some("s"));
}

#[test]
fn missing_session_id_for_a_session_command() {
    check(
        br#"{"version":"1.0","type":"request.send","requestId":"r8","payload":{"message":"hi"}}"#,
        invalid("missing_field", Some("sessionId"), Some("r8")),
    );
    check(
        br#"{"version":"1.0","type":"request.send","requestId":"r8","sessionId":null,"payload":{"message":"hi"}}"#,
        invalid("missing_field", Some("sessionId"), Some("r8")),
    );
}

#[test]
fn mistyped_session_id() {
    let line = br#"{"version":"1.0","type":"request.send","requestId":"r9","sessionId":12,"payload":{"message":"hi"}}"#;
    check(line, invalid("wrong_type", Some("sessionId"), Some("r9")));
    assert_eq!(decode(line).unwrap_err().session_id, None);
    // Also for a command that does not need a session.
    check(
        br#"{"version":"1.0","type":"session.list","requestId":"r9","sessionId":{}}"#,
        invalid("wrong_type", Some("sessionId"), Some("r9")),
    );
}

#[test]
fn payload_not_an_object() {
    for payload in ["[]", "\"mode\"", "3", "null", "false"] {
        let line = format!(
            r#"{{"version":"1.0","type":"session.set_mode","requestId":"r10","sessionId":"s","payload":{payload}}}"#
        );
        check(
            line.as_bytes(),
            invalid("wrong_type", Some("payload"), Some("r10")),
        );
    }
}

#[test]
fn missing_payload_field() {
    let line = br#"{"version":"1.0","type":"session.set_mode","requestId":"r11","sessionId":"s1","payload":{}}"#;
    check(
        line,
        invalid("missing_field", Some("payload.mode"), Some("r11")),
    );
    assert_eq!(decode(line).unwrap_err().session_id.as_deref(), Some("s1"));
    // An omitted payload is an empty one: a required field is still missing.
    check(
        br#"{"version":"1.0","type":"session.set_mode","requestId":"r11","sessionId":"s1"}"#,
        invalid("missing_field", Some("payload.mode"), Some("r11")),
    );
}

#[test]
fn mistyped_payload_field() {
    check(
        br#"{"version":"1.0","type":"session.set_model","requestId":"r12","sessionId":"s","payload":{"model":5}}"#,
        invalid("wrong_type", Some("payload.model"), Some("r12")),
    );
    check(
        br#"{"version":"1.0","type":"request.send","requestId":"r12","sessionId":"s","payload":{"message":"m","images":"a.png"}}"#,
        invalid("wrong_type", Some("payload.images"), Some("r12")),
    );
}

#[test]
fn invalid_enum_value() {
    check(
        br#"{"version":"1.0","type":"session.set_mode","requestId":"r13","sessionId":"s","payload":{"mode":"yolo"}}"#,
        invalid("invalid_value", Some("payload.mode"), Some("r13")),
    );
    check(
        br#"{"version":"1.0","type":"approval.respond","requestId":"r13","sessionId":"s","payload":{"approvalId":"a","decision":"maybe"}}"#,
        invalid("invalid_value", Some("payload.decision"), Some("r13")),
    );
}

#[test]
fn nested_missing_field() {
    check(
        br#"{"version":"1.0","type":"approval.respond","requestId":"r14","sessionId":"s","payload":{"approvalId":"appr_1"}}"#,
        invalid("missing_field", Some("payload.decision"), Some("r14")),
    );
    check(
        br#"{"version":"1.0","type":"session.resume","requestId":"r14","payload":{"sessionId":"s","afterSequence":{"requestId":"req_1"}}}"#,
        invalid(
            "missing_field",
            Some("payload.afterSequence.sequence"),
            Some("r14"),
        ),
    );
    check(
        br#"{"version":"1.0","type":"session.load_history","requestId":"r14","sessionId":"s","payload":{"messages":[{"role":"user","content":"a"},{"content":"b"}]}}"#,
        invalid(
            "missing_field",
            Some("payload.messages[1].role"),
            Some("r14"),
        ),
    );
    check(
        br#"{"version":"1.0","type":"session.resume","requestId":"r14","payload":{"sessionId":"s","afterSequence":{"requestId":"req_1","sequence":"3"}}}"#,
        invalid(
            "wrong_type",
            Some("payload.afterSequence.sequence"),
            Some("r14"),
        ),
    );
}

// ---- lines that must be accepted ---------------------------------------------------

mod more;
mod session_ids;
