//! Listing stored sessions: 10,000 sessions in a file store, each with a conversation
//! of 40 messages, listed from the per-session summaries (`session.list`) beside
//! reading every session's whole state (what a listing without summaries must do),
//! measured in the same run.
//!
//! Run: `cargo bench --bench sessions` (about half a minute after the build).

use std::time::{Duration, Instant};

use keel_envelope::types::PermissionMode;
use keel_kernel::model::Message;
use keel_kernel::store::{FileStore, PersistedSession, RequestMark, Store};

const SESSIONS: usize = 10_000;
const MESSAGES: usize = 40;

fn state(i: usize) -> PersistedSession {
    let mut history = Vec::with_capacity(MESSAGES);
    let mut marks = Vec::new();
    for m in 0..MESSAGES {
        if m % 2 == 0 {
            marks.push(RequestMark {
                request_id: format!("req_{i}_{m}"),
                history_len: m,
            });
            history.push(Message::User {
                text: format!(
                    "Request {m} of session {i}: {}",
                    "look at the parser ".repeat(10)
                ),
                images: vec![],
            });
        } else {
            history.push(Message::Assistant {
                text: format!(
                    "Done with step {m}.\n{}",
                    "The change touched three files. ".repeat(15)
                ),
                tool_calls: vec![],
            });
        }
    }
    PersistedSession {
        session_id: format!("sess_{i:06}"),
        title: Some(format!("Session {i}")),
        workspace: "/home/dev/project".into(),
        model: "scripted:demo".into(),
        mode: PermissionMode::Ask,
        rules: Default::default(),
        session_keys: vec![],
        session_deny: vec![],
        history: history.into(),
        plan: None,
        usage: Default::default(),
        created_at: 1_775_600_000_000 + i as u64,
        updated_at: 1_775_600_100_000 + i as u64,
        closed: false,
        extensions: Default::default(),
        request_marks: marks,
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = FileStore::new(tmp.path());
    for i in 0..SESSIONS {
        store.save_state(&state(i)).expect("save");
    }
    // Warm the page cache once for each way of listing.
    assert_eq!(store.list_summaries().expect("list").len(), SESSIONS);
    assert_eq!(store.list().expect("list").len(), SESSIONS);
    let (mut summaries, mut states) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let n = store.list_summaries().expect("list").len();
        summaries.push(t.elapsed());
        assert_eq!(n, SESSIONS);
        let t = Instant::now();
        let n = store.list().expect("list").len();
        states.push(t.elapsed());
        assert_eq!(n, SESSIONS);
    }
    let (a, b) = (median(summaries), median(states));
    println!("| sessions | from summaries | from whole states | ratio |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {SESSIONS} | {:.0} ms | {:.0} ms | {:.2}× |",
        a.as_secs_f64() * 1000.0,
        b.as_secs_f64() * 1000.0,
        a.as_secs_f64() / b.as_secs_f64()
    );
}
