//! Deny rules on the wire: `session.set_rules` through the real `keel bridge`, a denied
//! command however it is spelled, and bad rule lists refused.
#![allow(clippy::unwrap_used)]

#[path = "wire/bridge.rs"]
mod bridge;

use std::io::{BufRead, BufReader, Write};

use keel_envelope::{codec, Envelope, ErrorCode, Event};

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
    let mut child = bridge::spawn_bridge(ws.path(), home.path(), &script);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let seen: std::cell::RefCell<Vec<Envelope>> = std::cell::RefCell::default();
    let mut until = |pred: &dyn Fn(&Envelope) -> bool| -> Envelope {
        loop {
            let line = lines.next().expect("the bridge ended").unwrap();
            let env = codec::decode_envelope(line.as_bytes()).unwrap();
            seen.borrow_mut().push(env.clone());
            if pred(&env) {
                return env;
            }
        }
    };
    let mut send = |line: String| {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    };
    send(r#"{"version":"1.0","type":"session.start","requestId":"r1","payload":{"permissionMode":"auto"}}"#.into());
    let started = until(&|e| e.request_id == "r1");
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
        send(cmd(rid, "session.set_rules", payload));
        let answer = until(&|e| e.request_id == rid);
        match &answer.event {
            Event::Error(e) => assert_eq!(e.code, ErrorCode::RequestInvalid, "{rid}: {e:?}"),
            other => panic!("{rid}: expected an error, got {other:?}"),
        }
    }

    // Allow rules that would let every command run, beside a session deny rule and a
    // project deny rule: the deny rules win, on the canonical command.
    send(cmd(
        "r5",
        "session.set_rules",
        r#"{"alwaysAllowGlobal":["run_shell"],"alwaysDenyProject":["run_shell(rm y)"],"deny":["run_shell(rm x)"]}"#,
    ));
    let set = until(&|e| e.request_id == "r5");
    assert!(!matches!(set.event, Event::Error(_)), "{set:?}");
    send(cmd("r6", "request.send", r#"{"message":"clean up"}"#));
    until(&|e| e.request_id == "r6" && e.type_name() == "session.completed");
    let seen = seen.borrow().clone();
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
    send(cmd("r7", "session.state", "{}"));
    let state = until(&|e| e.request_id == "r7");
    let v = serde_json::to_value(&state).unwrap();
    assert_eq!(
        v["payload"]["rules"]["alwaysDenyProject"],
        serde_json::json!(["run_shell(rm y)"]),
        "{v}"
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
