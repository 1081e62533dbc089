//! The commands whose payload names a session (`session.resume`, `session.watch`,
//! `session.unwatch`, `session.delete`) take it from the envelope's `sessionId` as
//! well; both given and different is refused, naming both.

use super::*;

/// Every command whose payload names a session.
const NAMING: [&str; 4] = [
    "session.resume",
    "session.watch",
    "session.unwatch",
    "session.delete",
];

/// The session a decoded command's payload names.
fn payload_session(cmd: &Command) -> &str {
    match &cmd.payload {
        CommandPayload::SessionResume(p) => &p.session_id,
        CommandPayload::SessionWatch(p) => &p.session_id,
        CommandPayload::SessionUnwatch(p) => &p.session_id,
        CommandPayload::SessionDelete(p) => &p.session_id,
        other => panic!("not a naming command: {other:?}"),
    }
}

fn line(ty: &str, envelope: Option<&str>, payload: Option<&str>) -> String {
    let sid = envelope.map_or(String::new(), |s| format!(r#","sessionId":"{s}""#));
    let body = payload.map_or("{}".to_owned(), |s| format!(r#"{{"sessionId":"{s}"}}"#));
    format!(r#"{{"version":"1.0","type":"{ty}","requestId":"r1"{sid},"payload":{body}}}"#)
}

#[test]
fn a_session_in_the_envelope_alone_is_the_one_the_payload_names() {
    for ty in NAMING {
        let cmd = accept(line(ty, Some("sess_a"), None).as_bytes());
        assert_eq!(payload_session(&cmd), "sess_a", "{ty}");
        assert_eq!(cmd.session_id.as_deref(), Some("sess_a"), "{ty}");
        // With no payload at all too.
        let bare =
            format!(r#"{{"version":"1.0","type":"{ty}","requestId":"r1","sessionId":"sess_b"}}"#);
        assert_eq!(payload_session(&accept(bare.as_bytes())), "sess_b", "{ty}");
    }
}

#[test]
fn the_same_session_in_both_places_and_in_the_payload_alone_are_accepted() {
    for ty in NAMING {
        let both = accept(line(ty, Some("sess_a"), Some("sess_a")).as_bytes());
        assert_eq!(payload_session(&both), "sess_a", "{ty}");
        let payload = accept(line(ty, None, Some("sess_c")).as_bytes());
        assert_eq!(payload_session(&payload), "sess_c", "{ty}");
        assert_eq!(payload.session_id, None, "{ty}: the envelope stays as sent");
    }
}

#[test]
fn two_different_sessions_are_refused_naming_both() {
    for ty in NAMING {
        let l = line(ty, Some("sess_env"), Some("sess_pay"));
        check(
            l.as_bytes(),
            invalid("invalid_value", Some("payload.sessionId"), Some("r1")),
        );
        let e = decode(l.as_bytes()).unwrap_err().error;
        assert!(
            e.message.contains("sess_env") && e.message.contains("sess_pay"),
            "{ty}: {}",
            e.message
        );
        assert_eq!(e.details["envelopeSessionId"], "sess_env", "{ty}");
        assert_eq!(e.details["payloadSessionId"], "sess_pay", "{ty}");
    }
}

#[test]
fn no_session_in_either_place_is_a_missing_field() {
    for ty in NAMING {
        check(
            line(ty, None, None).as_bytes(),
            invalid("missing_field", Some("payload.sessionId"), Some("r1")),
        );
        // An empty one names nothing either.
        check(
            line(ty, None, Some("")).as_bytes(),
            invalid("missing_field", Some("payload.sessionId"), Some("r1")),
        );
    }
}
