//! Crash safety: `keel bridge` killed with SIGKILL at seeded random points (during a
//! request making many tool calls, during an approval wait, during a large file
//! write), restarted, and resumed from the last event the host saw.
//!
//! Each kill checks: every event delivered on stdout before the kill is in the
//! session's log, in order, with contiguous sequences; the log is readable (at most a
//! torn last line, dropped on resume); the session resumes, replays what was logged
//! but not seen, ends the request cut by the kill, and completes a new request. The
//! default run kills a few times per scenario; `KEEL_RELIABILITY_FULL=1` kills 50
//! times in the tool-call scenario and 20 in each of the others.

use std::path::Path;

use keel_envelope::{Envelope, Event};
use serde_json::json;

use crate::common::*;

/// A request of `turns` model turns, each asking for two tool calls.
fn many_tools(turns: usize) -> serde_json::Value {
    let mut t: Vec<serde_json::Value> = (0..turns)
        .map(|i| {
            json!({
                "text": format!("Step {i}: reading."),
                "toolCalls": [
                    {"name": "read_file", "arguments": {"path": "README.md"}},
                    {"name": "list_dir", "arguments": {"path": "."}}
                ]
            })
        })
        .collect();
    t.push(json!({"text": "All steps done."}));
    json!({"chunkDelayMs": 1, "turns": t})
}

struct World {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
    quick: String,
}

fn world() -> World {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), "# Project\n\nA readme.\n").unwrap();
    let quick = script(
        home.path(),
        "quick.json",
        json!({"turns": [{"text": "Quick answer."}]}),
    );
    World { home, ws, quick }
}

fn bridge(w: &World, model: &str) -> Bridge {
    Bridge::start(Setup {
        bin: KEEL,
        home: w.home.path(),
        workspace: w.ws.path(),
        model,
        max_files: None,
        extra_args: &[],
        env: &[],
    })
}

/// The last event the host saw of `session` (its resume cursor).
fn cursor(seen: &[Envelope], session: &str) -> serde_json::Value {
    let last = seen
        .iter()
        .rev()
        .find(|e| e.session_id.as_deref() == Some(session))
        .unwrap();
    json!({"requestId": last.request_id, "sequence": last.sequence})
}

/// Restarts after a kill: resumes from the cursor and checks the replay, the end of
/// the cut request, and that a new request completes. Returns the running bridge.
fn restart_and_check(
    w: &World,
    model: &str,
    session: &str,
    seen: &mut Vec<Envelope>,
    cut_request: &str,
    n: usize,
) -> Bridge {
    let log_before = assert_log_holds(w.home.path(), session, seen);
    let cursor = cursor(seen, session);
    let at = log_before
        .iter()
        .position(|e| {
            e.request_id == cursor["requestId"].as_str().unwrap()
                && Some(e.sequence) == cursor["sequence"].as_u64()
        })
        .unwrap();
    let mut b = bridge(w, model);
    let rid = format!("resume{n}");
    b.send(&command(
        "session.resume",
        &rid,
        None,
        json!({"sessionId": session, "afterSequence": cursor}),
    ));
    let got = b.until_on(&rid, "session.resumed");
    let resumed = got.last().unwrap();
    let Event::SessionResumed(r) = &resumed.event else {
        panic!()
    };
    // The replay: exactly the events logged after the cursor, as first written.
    let expected: Vec<&Envelope> = log_before[at + 1..].iter().collect();
    assert_eq!(r.replayed as usize, expected.len());
    let mut replay = Vec::new();
    for _ in 0..expected.len() {
        let e = b.next().unwrap();
        assert_eq!(e.meta.as_ref().and_then(|m| m.replay), Some(true), "{e:?}");
        replay.push(e);
    }
    for (got, want) in replay.iter().zip(&expected) {
        assert_eq!(
            (&got.event_id, got.sequence),
            (&want.event_id, want.sequence)
        );
    }
    // The request cut by the kill ends, continuing its own sequence (unless its
    // terminal event was already logged, or the kill came before the session took
    // the request: then nothing of it was logged and nothing is owed).
    let logged = log_before.iter().any(|e| e.request_id == cut_request);
    let ended = !logged
        || log_before.iter().any(|e| {
            e.request_id == cut_request
                && matches!(
                    e.event,
                    Event::SessionCompleted(_) | Event::SessionInterrupted(_)
                )
        });
    if !ended {
        let end = b.until_on(cut_request, "session.interrupted");
        let Event::SessionInterrupted(i) = &end.last().unwrap().event else {
            panic!()
        };
        assert_eq!(i.reason, "restart");
    }
    seen.append(&mut b.seen);
    // A new request completes (on a short script).
    b.send(&command(
        "session.set_model",
        &format!("model{n}"),
        Some(session),
        json!({"model": w.quick}),
    ));
    b.until_on(&format!("model{n}"), "session.model_changed");
    b.send(&command(
        "request.send",
        &format!("after{n}"),
        Some(session),
        json!({"message": "are you there?"}),
    ));
    let done = b.until_on(&format!("after{n}"), "session.completed");
    assert!(matches!(
        &done.last().unwrap().event,
        Event::SessionCompleted(c) if c.final_text.as_deref() == Some("Quick answer.")
    ));
    b
}

/// Starts the first bridge and a session on `model`; returns both.
fn first_session(w: &World, model: &str, mode: &str) -> (Bridge, String) {
    let mut b = bridge(w, model);
    b.send(&command(
        "session.start",
        "start",
        None,
        json!({"permissionMode": mode}),
    ));
    let started = b.until_on("start", "session.started");
    let sid = session_of(started.last().unwrap());
    (b, sid)
}

fn kills(default: usize, full_run: usize) -> usize {
    if full() {
        full_run
    } else {
        default
    }
}

#[test]
fn killed_during_a_request_making_many_tool_calls() {
    let w = world();
    let long = script(w.home.path(), "long.json", many_tools(25));
    let mut rng = Rng::new(0x5EED_0001);
    let (mut b, sid) = first_session(&w, &long, "ask");
    let mut seen: Vec<Envelope> = Vec::new();
    let rounds = kills(4, 50);
    for n in 0..rounds {
        let rid = format!("long{n}");
        if n > 0 {
            b.send(&command(
                "session.set_model",
                &format!("back{n}"),
                Some(&sid),
                json!({"model": long}),
            ));
            b.until_on(&format!("back{n}"), "session.model_changed");
        }
        b.send(&command(
            "request.send",
            &rid,
            Some(&sid),
            json!({"message": "do all the steps"}),
        ));
        // About 8 events per turn: kill anywhere from the first to the last.
        let k = rng.range(1, 210) as usize;
        let mut on_request = 0;
        b.until(|e| {
            if e.request_id == rid {
                on_request += 1;
            }
            on_request >= k || (e.request_id == rid && e.type_name() == "session.completed")
        });
        if rng.range(0, 1) == 1 {
            std::thread::sleep(std::time::Duration::from_micros(rng.range(0, 3000)));
        }
        b.kill();
        b.assert_no_panic();
        seen.append(&mut b.seen);
        b = restart_and_check(&w, &w.quick, &sid, &mut seen, &rid, n);
    }
    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    assert!(b.wait());
    b.assert_no_panic();
    seen.append(&mut b.seen);
    // After a clean stop, the host saw every logged event of the session.
    assert_saw_all(w.home.path(), &sid, &seen);
}

#[test]
fn killed_during_an_approval_wait() {
    let w = world();
    let asks = script(
        w.home.path(),
        "asks.json",
        json!({"turns": [
            {"text": "Writing.", "toolCalls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "new\n"}}]},
            {"text": "Written."}
        ]}),
    );
    let mut rng = Rng::new(0x5EED_0002);
    let (mut b, sid) = first_session(&w, &asks, "ask");
    let mut seen = Vec::new();
    for n in 0..kills(2, 20) {
        let rid = format!("ask{n}");
        if n > 0 {
            b.send(&command(
                "session.set_model",
                &format!("back{n}"),
                Some(&sid),
                json!({"model": asks}),
            ));
            b.until_on(&format!("back{n}"), "session.model_changed");
        }
        b.send(&command(
            "request.send",
            &rid,
            Some(&sid),
            json!({"message": "write the notes"}),
        ));
        let got = b.until_on(&rid, "approval.requested");
        let Event::ApprovalRequested(a) = &got.last().unwrap().event else {
            panic!()
        };
        let approval = a.approval_id.clone();
        std::thread::sleep(std::time::Duration::from_millis(rng.range(0, 20)));
        b.kill();
        seen.append(&mut b.seen);
        let mut next = restart_and_check(&w, &w.quick, &sid, &mut seen, &rid, n);
        // The approval died with the process: answering it now is a clear error.
        let late = format!("late{n}");
        next.send(&command(
            "approval.respond",
            &late,
            Some(&sid),
            json!({"approvalId": approval, "decision": "allow_once"}),
        ));
        let e = next.answer(&late);
        assert!(
            matches!(&e.event, Event::Error(x) if x.code == keel_envelope::ErrorCode::ApprovalNotFound),
            "{e:?}"
        );
        assert!(!w.ws.path().join("notes.md").exists());
        seen.append(&mut next.seen);
        b = next;
    }
    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    assert!(b.wait());
    seen.append(&mut b.seen);
    assert_saw_all(w.home.path(), &sid, &seen);
}

/// Files in the workspace left by interrupted atomic writes.
fn leftovers(ws: &Path) -> Vec<String> {
    std::fs::read_dir(ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".keel-tmp-"))
        .collect()
}

#[test]
fn killed_during_a_large_file_write() {
    let w = world();
    const SIZE: usize = 8 << 20;
    let old = "o".repeat(SIZE);
    std::fs::write(w.ws.path().join("big.txt"), &old).unwrap();
    let new = "n".repeat(SIZE);
    let writes = script(
        w.home.path(),
        "write.json",
        json!({"turns": [
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": new}}]},
            {"text": "Written."}
        ]}),
    );
    let mut rng = Rng::new(0x5EED_0003);
    let (mut b, sid) = first_session(&w, &writes, "auto-edit");
    let mut seen = Vec::new();
    let mut outcomes = (0, 0);
    let mut stray_files = 0;
    for n in 0..kills(4, 20) {
        // Each round starts from the old content.
        std::fs::write(w.ws.path().join("big.txt"), &old).unwrap();
        let rid = format!("write{n}");
        if n > 0 {
            b.send(&command(
                "session.set_model",
                &format!("back{n}"),
                Some(&sid),
                json!({"model": writes}),
            ));
            b.until_on(&format!("back{n}"), "session.model_changed");
        }
        b.send(&command(
            "request.send",
            &rid,
            Some(&sid),
            json!({"message": "rewrite big.txt"}),
        ));
        // Kill while the write is under way: its temporary file is there (or, for a
        // few rounds, just after the request was sent, or just after the rename).
        if n % 4 != 3 {
            let deadline = std::time::Instant::now() + HANG;
            while leftovers(w.ws.path()).is_empty() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the write never started"
                );
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        if n % 4 == 2 {
            // This round kills just after the rename: the temporary file is gone.
            let deadline = std::time::Instant::now() + HANG;
            while !leftovers(w.ws.path()).is_empty() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the write never ended"
                );
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        } else {
            std::thread::sleep(std::time::Duration::from_micros(rng.range(0, 20_000)));
        }
        b.kill();
        let content = std::fs::read(w.ws.path().join("big.txt")).unwrap();
        assert_eq!(content.len(), SIZE, "the file is neither old nor new");
        if content.iter().all(|c| *c == b'o') {
            outcomes.0 += 1;
        } else if content.iter().all(|c| *c == b'n') {
            outcomes.1 += 1;
        } else {
            panic!("the file mixes old and new content");
        }
        // Temporary files of a write cut by the kill are left behind; they never
        // replace the file.
        for stray in leftovers(w.ws.path()) {
            stray_files += 1;
            std::fs::remove_file(w.ws.path().join(stray)).unwrap();
        }
        seen.append(&mut b.seen);
        b = restart_and_check(&w, &w.quick, &sid, &mut seen, &rid, n);
        seen.append(&mut b.seen);
    }
    eprintln!(
        "large write killed: old content {}, new content {}, temporary files left {stray_files}",
        outcomes.0, outcomes.1
    );
    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    assert!(b.wait());
}
