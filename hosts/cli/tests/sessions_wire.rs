//! `session.set_title` and `session.delete` on the wire: JSON lines through the real
//! `keel bridge`, bad input included.
#![allow(clippy::unwrap_used)]

#[path = "wire/bridge.rs"]
mod bridge;

use std::io::{BufRead, BufReader, Write};

use keel_envelope::{codec, Envelope, Event, SequenceChecker};

#[test]
fn titles_and_deletion_over_the_bridge() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    std::fs::write(&script, r#"{"turns":[{"text":"Hi."}]}"#).unwrap();
    let mut child = bridge::spawn_bridge(ws.path(), home.path(), &script);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut checker = SequenceChecker::new();
    let mut next = |rid: &str| -> Envelope {
        loop {
            let line = lines.next().expect("the bridge ended").unwrap();
            let env = codec::decode_envelope(line.as_bytes()).unwrap();
            checker.check(&env).unwrap();
            if env.request_id == rid {
                return env;
            }
        }
    };
    let send = |stdin: &mut std::process::ChildStdin, line: String| {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    };
    let error_of = |env: &Envelope| match &env.event {
        Event::Error(e) => e.clone(),
        other => panic!("expected an error, got {other:?}"),
    };

    send(
        &mut stdin,
        r#"{"version":"1.0","type":"session.start","requestId":"r1"}"#.into(),
    );
    let started = next("r1");
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
        send(
            &mut stdin,
            cmd(rid, "session.set_title", Some(&sid), payload),
        );
        let e = error_of(&next(rid));
        assert_eq!(e.code.as_str(), code, "{rid}: {e:?}");
        assert_eq!(e.details["field"], "payload.title", "{rid}: {e:?}");
        if let Some(r) = reason {
            assert_eq!(e.details["reason"], r, "{rid}");
        }
    }
    send(
        &mut stdin,
        cmd(
            "r6",
            "session.set_title",
            Some("sess_nope"),
            r#"{"title":"x"}"#,
        ),
    );
    assert_eq!(error_of(&next("r6")).code.as_str(), "SESSION_NOT_FOUND");

    send(
        &mut stdin,
        cmd(
            "r7",
            "session.set_title",
            Some(&sid),
            r#"{"title":"Fix the build"}"#,
        ),
    );
    let changed = next("r7");
    assert_eq!(changed.sequence, 1);
    let line = String::from_utf8(codec::encode_line(&changed)).unwrap();
    assert!(
        line.contains(
            r#""payload":{"title":"Fix the build","previousTitle":null,"source":"host"}"#
        ),
        "{line}"
    );

    // Deleting: bad input first, then the session.
    send(&mut stdin, cmd("r8", "session.delete", None, "{}"));
    let e = error_of(&next("r8"));
    assert_eq!(e.details["field"], "payload.sessionId", "{e:?}");
    send(
        &mut stdin,
        cmd(
            "r9",
            "session.delete",
            None,
            r#"{"sessionId":"sess_unknown"}"#,
        ),
    );
    assert_eq!(error_of(&next("r9")).code.as_str(), "SESSION_NOT_FOUND");
    send(
        &mut stdin,
        cmd(
            "r10",
            "session.delete",
            None,
            &format!(r#"{{"sessionId":"{sid}"}}"#),
        ),
    );
    let deleted = next("r10");
    assert_eq!(deleted.type_name(), "session.deleted");
    assert_eq!(deleted.session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(deleted.sequence, 1);
    assert!(!home.path().join("sessions").join(&sid).exists());
    send(&mut stdin, cmd("r11", "session.list", None, "{}"));
    match next("r11").event {
        Event::SessionList(l) => assert!(l.sessions.is_empty(), "{:?}", l.sessions),
        other => panic!("{other:?}"),
    }
    send(
        &mut stdin,
        cmd(
            "r12",
            "session.resume",
            None,
            &format!(r#"{{"sessionId":"{sid}"}}"#),
        ),
    );
    assert_eq!(error_of(&next("r12")).code.as_str(), "SESSION_NOT_FOUND");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
