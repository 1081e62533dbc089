//! `session.set_title` and `session.delete` on the wire: JSON lines through the real
//! `keel bridge`, bad input included, and a session named in the envelope alone.
#![allow(clippy::unwrap_used)]

use keel_envelope::{codec, Envelope, Event, SequenceChecker};
use keel_testsupport::bridge::{Bridge, Setup};

#[test]
fn titles_and_deletion_over_the_bridge() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    std::fs::write(&script, r#"{"turns":[{"text":"Hi."}]}"#).unwrap();
    let model = format!("scripted:{}", script.display());
    let mut b = Bridge::start(Setup::new(
        env!("CARGO_BIN_EXE_keel"),
        home.path(),
        ws.path(),
        &model,
    ));
    let error_of = |env: &Envelope| match &env.event {
        Event::Error(e) => e.clone(),
        other => panic!("expected an error, got {other:?}"),
    };

    b.send(r#"{"version":"1.0","type":"session.start","requestId":"r1"}"#);
    let started = b.first_on("r1");
    let sid = started.session_id.clone().unwrap();
    let cmd = |rid: &str, ty: &str, session: Option<&str>, payload: &str| {
        let session = session.map_or("null".to_owned(), |s| format!("\"{s}\""));
        format!(
            r#"{{"version":"1.0","type":"{ty}","requestId":"{rid}","sessionId":{session},"payload":{payload}}}"#
        )
    };

    // Bad titles: refused on the command's stream, naming the field.
    for (rid, payload, code, reason) in [
        ("r2", r#"{"title":"  "}"#, "REQUEST_INVALID", None),
        ("r3", r#"{"title":"a\u0007b"}"#, "REQUEST_INVALID", None),
        (
            "r4",
            r#"{"title":5}"#,
            "REQUEST_INVALID",
            Some("wrong_type"),
        ),
        ("r5", r#"{}"#, "REQUEST_INVALID", Some("missing_field")),
    ] {
        b.send(&cmd(rid, "session.set_title", Some(&sid), payload));
        let e = error_of(&b.first_on(rid));
        assert_eq!(e.code.as_str(), code, "{rid}: {e:?}");
        assert_eq!(e.details["field"], "payload.title", "{rid}: {e:?}");
        if let Some(r) = reason {
            assert_eq!(e.details["reason"], r, "{rid}");
        }
    }
    b.send(&cmd(
        "r6",
        "session.set_title",
        Some("sess_nope"),
        r#"{"title":"x"}"#,
    ));
    assert_eq!(
        error_of(&b.first_on("r6")).code.as_str(),
        "SESSION_NOT_FOUND"
    );

    b.send(&cmd(
        "r7",
        "session.set_title",
        Some(&sid),
        r#"{"title":"Fix the build"}"#,
    ));
    let changed = b.first_on("r7");
    assert_eq!(changed.sequence, 1);
    let line = String::from_utf8(codec::encode_line(&changed)).unwrap();
    assert!(
        line.contains(
            r#""payload":{"title":"Fix the build","previousTitle":null,"source":"host"}"#
        ),
        "{line}"
    );

    // Deleting: bad input first, then the session.
    b.send(&cmd("r8", "session.delete", None, "{}"));
    let e = error_of(&b.first_on("r8"));
    assert_eq!(e.details["field"], "payload.sessionId", "{e:?}");
    b.send(&cmd(
        "r9",
        "session.delete",
        None,
        r#"{"sessionId":"sess_unknown"}"#,
    ));
    assert_eq!(
        error_of(&b.first_on("r9")).code.as_str(),
        "SESSION_NOT_FOUND"
    );
    // The envelope's sessionId alone names the session for a command that names one
    // in its payload; two different ones are refused, naming both.
    b.send(&cmd("w1", "session.watch", Some(&sid), "{}"));
    assert_eq!(b.first_on("w1").type_name(), "session.watched");
    b.send(&cmd(
        "w2",
        "session.delete",
        Some(&sid),
        r#"{"sessionId":"sess_other"}"#,
    ));
    let e = error_of(&b.first_on("w2"));
    assert_eq!(e.details["field"], "payload.sessionId", "{e:?}");
    assert!(
        e.message.contains(&sid) && e.message.contains("sess_other"),
        "{e:?}"
    );
    b.send(&cmd(
        "r10",
        "session.delete",
        None,
        &format!(r#"{{"sessionId":"{sid}"}}"#),
    ));
    let deleted = b.first_on("r10");
    assert_eq!(deleted.type_name(), "session.deleted");
    assert_eq!(deleted.session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(deleted.sequence, 1);
    assert!(!home.path().join("sessions").join(&sid).exists());
    b.send(&cmd("r11", "session.list", None, "{}"));
    match b.first_on("r11").event {
        Event::SessionList(l) => assert!(l.sessions.is_empty(), "{:?}", l.sessions),
        other => panic!("{other:?}"),
    }
    b.send(&cmd(
        "r12",
        "session.resume",
        None,
        &format!(r#"{{"sessionId":"{sid}"}}"#),
    ));
    assert_eq!(
        error_of(&b.first_on("r12")).code.as_str(),
        "SESSION_NOT_FOUND"
    );
    b.close_input();
    assert!(b.wait());
    // Every envelope read came in sequence.
    let mut checker = SequenceChecker::new();
    for env in &b.seen {
        checker.check(env).unwrap();
    }
}
