//! Helpers shared by the reliability tests, beside the bridge driver and the seeded
//! generator of `keel-testsupport`.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use keel_envelope::{codec, Envelope, Event, SequenceChecker};
pub use keel_testsupport::bridge::{command, Bridge, Setup, HANG};
pub use keel_testsupport::Rng;

/// The `keel` binary under test.
pub const KEEL: &str = env!("CARGO_BIN_EXE_keel");

/// Whether the full (long) versions of the tests run: `KEEL_RELIABILITY_FULL=1`.
pub fn full() -> bool {
    std::env::var("KEEL_RELIABILITY_FULL").is_ok_and(|v| v == "1")
}

/// Writes a scripted model's script and returns its `scripted:` selection.
pub fn script(dir: &Path, name: &str, body: serde_json::Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body.to_string()).unwrap();
    format!("scripted:{}", p.display())
}

/// A session's log as stored: its envelopes, and whether the last line was torn.
/// Panics if any other line is unreadable.
pub fn read_log(home: &Path, session: &str) -> (Vec<Envelope>, bool) {
    let path = home.join("sessions").join(session).join("events.jsonl");
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let mut out = Vec::new();
    let mut torn = false;
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match rest.iter().position(|b| *b == b'\n') {
            Some(i) => {
                let line = &rest[..=i];
                let env = codec::decode_envelope(line).unwrap_or_else(|e| {
                    panic!(
                        "line {} of the log of {session} is unreadable: {e:?}",
                        out.len() + 1
                    )
                });
                out.push(env);
                rest = &rest[i + 1..];
            }
            None => {
                torn = true;
                break;
            }
        }
    }
    (out, torn)
}

/// Checks that `events` (one session's log, or what a host received of it) have
/// contiguous sequences per request.
pub fn assert_contiguous(events: &[Envelope]) {
    let mut checker = SequenceChecker::new();
    for e in events {
        checker.check(e).unwrap_or_else(|gap| {
            panic!("sequence gap {gap:?} at {} {}", e.request_id, e.type_name())
        });
    }
}

/// Checks the crash-safety rule: every event the host received of a session is in
/// its log, the same event (id, request, sequence); the events received first-hand
/// (not replayed) come in log order; the log has contiguous sequences. Returns the
/// log.
pub fn assert_log_holds(home: &Path, session: &str, seen: &[Envelope]) -> Vec<Envelope> {
    let (log, _torn) = read_log(home, session);
    assert_contiguous(&log);
    let at: HashMap<&str, usize> = log
        .iter()
        .enumerate()
        .map(|(i, e)| (e.event_id.as_str(), i))
        .collect();
    let mut last = None;
    for d in seen
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(session))
    {
        let Some(&i) = at.get(d.event_id.as_str()) else {
            // Not session events, so not logged: the bridge's answers to lines it could
            // not decode, and the error answering a command the session never took
            // (it was closed, or not open in this process).
            let refused = matches!(d.event, Event::Error(_) | Event::RequestRejected(_))
                && !log.iter().any(|l| l.request_id == d.request_id);
            if d.source == keel_envelope::Source::Bridge || refused {
                continue;
            }
            panic!(
                "delivered event {} {} #{} is not in the log",
                d.type_name(),
                d.request_id,
                d.sequence
            );
        };
        assert_eq!(
            (&d.request_id, d.sequence, d.type_name()),
            (&log[i].request_id, log[i].sequence, log[i].type_name())
        );
        let replayed = d.meta.as_ref().and_then(|m| m.replay) == Some(true);
        if !replayed {
            assert!(
                last.is_none_or(|l| i > l),
                "delivered event {} {} #{} is out of log order",
                d.type_name(),
                d.request_id,
                d.sequence
            );
            last = Some(i);
        }
    }
    log
}

/// Whether the host received every event of the session's log.
pub fn assert_saw_all(home: &Path, session: &str, seen: &[Envelope]) {
    let log = assert_log_holds(home, session, seen);
    let got: std::collections::HashSet<&str> = seen
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(session))
        .map(|e| e.event_id.as_str())
        .collect();
    let missing: Vec<String> = log
        .iter()
        .filter(|e| !got.contains(e.event_id.as_str()))
        .map(|e| format!("{} {} #{}", e.type_name(), e.request_id, e.sequence))
        .collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
}

/// The session id in a `session.started` answer.
pub fn session_of(env: &Envelope) -> String {
    assert!(
        matches!(
            env.event,
            Event::SessionStarted(_) | Event::SessionResumed(_)
        ),
        "{env:?}"
    );
    env.session_id.clone().unwrap()
}
