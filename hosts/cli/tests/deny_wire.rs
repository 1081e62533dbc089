//! Deny rules on the wire: `session.set_rules` through the real `keel bridge`, a denied
//! command however it is spelled, and bad rule lists refused.
#![allow(clippy::unwrap_used)]

use keel_envelope::{ErrorCode, Event};
use keel_testsupport::bridge::{Bridge, Setup};

#[test]
fn deny_rules_set_over_the_bridge_refuse_the_command_in_auto_mode() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for f in ["x", "y"] {
        std::fs::write(ws.path().join(f), "keep me\n").unwrap();
    }
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[
            {"toolCalls":[{"name":"run_shell","arguments":{"command":"FOO=1 rm x"}}]},
            {"toolCalls":[{"name":"run_shell","arguments":{"command":"bash -c 'rm  y'"}}]},
            {"text":"Both refused."}
        ]}"#,
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let mut b = Bridge::start(Setup::new(
        env!("CARGO_BIN_EXE_keel"),
        home.path(),
        ws.path(),
        &model,
    ));
    b.send(r#"{"version":"1.0","type":"session.start","requestId":"r1","payload":{"permissionMode":"auto"}}"#);
    let started = b.first_on("r1");
    let sid = started.session_id.clone().unwrap();
    let cmd = |rid: &str, ty: &str, payload: &str| {
        format!(
            r#"{{"version":"1.0","type":"{ty}","requestId":"{rid}","sessionId":"{sid}","payload":{payload}}}"#
        )
    };

    // Bad rule lists: refused, naming the field; the rules stay as they were.
    for (rid, payload) in [
        ("r2", r#"{"deny":"run_shell(rm x)"}"#),
        ("r3", r#"{"alwaysDenyProject":[5]}"#),
        ("r4", r#"{"deny":["run_shell(rm x"]}"#),
    ] {
        b.send(&cmd(rid, "session.set_rules", payload));
        let answer = b.first_on(rid);
        match &answer.event {
            Event::Error(e) => assert_eq!(e.code, ErrorCode::RequestInvalid, "{rid}: {e:?}"),
            other => panic!("{rid}: expected an error, got {other:?}"),
        }
    }

    // Allow rules that would let every command run, beside a session deny rule and a
    // project deny rule: the deny rules win, on the canonical command.
    b.send(&cmd(
        "r5",
        "session.set_rules",
        r#"{"alwaysAllowGlobal":["run_shell"],"alwaysDenyProject":["run_shell(rm y)"],"deny":["run_shell(rm x)"]}"#,
    ));
    let set = b.first_on("r5");
    assert!(!matches!(set.event, Event::Error(_)), "{set:?}");
    b.send(&cmd("r6", "request.send", r#"{"message":"clean up"}"#));
    b.until_on("r6", "session.completed");
    let seen = b.seen.clone();
    let skipped: Vec<(ErrorCode, String)> = seen
        .iter()
        .filter(|e| e.request_id == "r6")
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(s) => Some((s.error.code.clone(), s.error.message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped
        .iter()
        .all(|(c, _)| *c == ErrorCode::ToolPermissionDenied));
    assert!(skipped[0].1.contains("run_shell(rm x)"), "{skipped:?}");
    assert!(skipped[1].1.contains("run_shell(rm y)"), "{skipped:?}");
    assert!(!seen
        .iter()
        .any(|e| matches!(e.event, Event::ToolCallStarted(_))));
    for f in ["x", "y"] {
        assert_eq!(
            std::fs::read_to_string(ws.path().join(f)).unwrap(),
            "keep me\n"
        );
    }

    // The state reports the lasting deny rule.
    b.send(&cmd("r7", "session.state", "{}"));
    let state = b.first_on("r7");
    let v = serde_json::to_value(&state).unwrap();
    assert_eq!(
        v["payload"]["rules"]["alwaysDenyProject"],
        serde_json::json!(["run_shell(rm y)"]),
        "{v}"
    );
    b.close_input();
    assert!(b.wait());
}
