//! The file store keeps the history in `history.jsonl`, appended as it grows; the
//! state file counts its lines; resume reads it back.

use super::*;
use keel_kernel::model::{History, Message};
use keel_kernel::store::{FileStore, PersistedSession, Store};

fn user(t: &str) -> Message {
    Message::User {
        text: t.into(),
        images: vec![],
    }
}

fn state(id: &str, history: History) -> PersistedSession {
    PersistedSession {
        session_id: id.into(),
        title: None,
        workspace: "/w".into(),
        model: "test:model".into(),
        mode: PermissionMode::default(),
        rules: Default::default(),
        session_keys: vec![],
        session_deny: vec![],
        history,
        plan: None,
        usage: Usage::default(),
        created_at: 1,
        updated_at: 2,
        closed: false,
        extensions: Default::default(),
        request_marks: vec![],
    }
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn saving_after_a_turn_appends_only_the_new_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let sdir = dir.path().join("sessions").join("s1");
    let mut h = History::new();
    h.push(user("one — ünïcode"));
    store.save_state(&state("s1", h.clone())).unwrap();
    let first = lines(&sdir.join("history.jsonl"));
    assert_eq!(first.len(), 1);
    h.push(Message::Assistant {
        text: "two".into(),
        tool_calls: vec![],
    });
    h.push(Message::Tool {
        tool_call_id: "c".into(),
        name: "read_file".into(),
        content: "three\n\"quoted\"".into(),
        is_error: true,
    });
    // Mark the first line: an append leaves it, a re-write would not.
    let path = sdir.join("history.jsonl");
    let marked = std::fs::read_to_string(&path)
        .unwrap()
        .replace("one", "ONE");
    std::fs::write(&path, marked).unwrap();
    store.save_state(&state("s1", h.clone())).unwrap();
    let after = lines(&path);
    assert_eq!(after.len(), 3);
    assert!(after[0].contains("ONE"), "the first line was re-written");
    // The state file holds no history, only the count.
    let raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sdir.join("state.json")).unwrap()).unwrap();
    assert!(raw.get("history").is_none(), "{raw}");
    assert_eq!(raw["historyLines"], 3);
    assert_eq!(raw["sessionId"], "s1");

    // Another store (a restart) loads it whole.
    let loaded = FileStore::new(dir.path())
        .load_state("s1")
        .unwrap()
        .unwrap();
    assert_eq!(loaded.history.len(), 3);
    assert_eq!(loaded.history[1], h[1]);
    assert_eq!(loaded.history[2], h[2]);
    assert_eq!(FileStore::new(dir.path()).list().unwrap().len(), 1);
}

#[test]
fn an_edited_history_is_rewritten_and_extra_lines_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let sdir = dir.path().join("sessions").join("s2");
    let mut h: History = vec![user("a"), user("b"), user("c")].into();
    store.save_state(&state("s2", h.clone())).unwrap();
    // Compaction-like edit: the head replaced, the tail kept.
    let mut kept = h.slice(2..);
    kept.insert(0, user("summary"));
    h = kept;
    store.save_state(&state("s2", h.clone())).unwrap();
    let now = lines(&sdir.join("history.jsonl"));
    assert_eq!(now.len(), 2);
    assert!(now[0].contains("summary") && now[1].contains("\"c\""));
    // Lines appended by a save whose state file never got written (a crash between
    // the two) are not part of the session.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(sdir.join("history.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"role\":\"user\",\"text\":\"ghost\"}\n").unwrap();
    let loaded = FileStore::new(dir.path())
        .load_state("s2")
        .unwrap()
        .unwrap();
    assert_eq!(loaded.history, h);
    // A restarted store re-writes the file on its first save, ghost gone.
    let again = FileStore::new(dir.path());
    let mut h2 = loaded.history.clone();
    h2.push(user("d"));
    again.save_state(&state("s2", h2.clone())).unwrap();
    let after = lines(&sdir.join("history.jsonl"));
    assert_eq!(after.len(), 3);
    assert!(!after.iter().any(|l| l.contains("ghost")));
}

#[test]
fn a_state_with_the_history_inline_still_loads_and_a_short_history_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let sdir = dir.path().join("sessions").join("old");
    std::fs::create_dir_all(&sdir).unwrap();
    let legacy = serde_json::to_vec(&state("old", vec![user("x"), user("y")].into())).unwrap();
    std::fs::write(sdir.join("state.json"), legacy).unwrap();
    let store = FileStore::new(dir.path());
    let loaded = store.load_state("old").unwrap().unwrap();
    assert_eq!(loaded.history.len(), 2);

    // A state that counts more lines than the file has: a structured error.
    store.save_state(&loaded).unwrap();
    std::fs::write(
        sdir.join("history.jsonl"),
        "{\"role\":\"user\",\"text\":\"x\"}\n",
    )
    .unwrap();
    let e = FileStore::new(dir.path()).load_state("old").unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionPersistenceFailed);
    assert!(e.message.contains("history"), "{}", e.message);
    // A line that is not a message: the same.
    std::fs::write(
        sdir.join("history.jsonl"),
        "{\"role\":\"user\",\"text\":\"x\"}\nnot json\n",
    )
    .unwrap();
    let e = FileStore::new(dir.path()).load_state("old").unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionPersistenceFailed);
    assert!(e.message.contains("line 2"), "{}", e.message);
    // A count that is not a number.
    let mut raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sdir.join("state.json")).unwrap()).unwrap();
    raw["historyLines"] = serde_json::json!("many");
    std::fs::write(sdir.join("state.json"), raw.to_string()).unwrap();
    let e = FileStore::new(dir.path()).load_state("old").unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionPersistenceFailed);
}

#[tokio::test]
async fn a_session_of_many_turns_resumes_with_its_whole_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let turns: Vec<Turn> = (0..6)
        .map(|i| call("peek", serde_json::json!({"text": format!("t{i}")})))
        .chain([say("all done")])
        .collect();
    let f = fixture_in(turns, Duration::from_secs(60), dir, store);
    let (s, mut events) = start(&f).await;
    s.send("go").await.unwrap();
    until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    let before = s.state().message_count;
    assert_eq!(before, 1 + 6 * 2 + 1);
    f.kernel.shutdown("test").await;
    drop(f.kernel);
    let file = store_path.join("sessions").join(&sid).join("history.jsonl");
    assert_eq!(lines(&file).len() as u32, before);

    let model = TestModel::new(vec![say("resumed answer")]);
    let kernel = reopen(&ws, &store_path, model.clone());
    let (s2, mut ev2) = kernel.resume_session(&sid, None).await.unwrap();
    assert_eq!(s2.state().message_count, before);
    s2.send("and now?").await.unwrap();
    until(&mut ev2, "session.completed").await;
    let seen = model.seen.lock().unwrap().last().unwrap().messages.clone();
    assert_eq!(seen.len() as u32, before + 1);
    assert!(matches!(&seen[0], Message::User { text, .. } if text == "go"));
    kernel.shutdown("test").await;
    assert_eq!(lines(&file).len() as u32, before + 2);
}

/// Saving a state after every turn creates no file: the replaced state becomes the
/// next save's temporary file (where the system can exchange two files; elsewhere a
/// rename replaces it). Every save still loads whole.
#[test]
fn saving_again_and_again_reuses_the_same_two_files() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let sdir = dir.path().join("sessions").join("s1");
    let mut h = History::new();
    let mut inodes = std::collections::BTreeSet::new();
    for i in 0..6u64 {
        h.push(user(&format!("message {i}")));
        let mut s = state("s1", h.clone());
        s.updated_at = 100 + i;
        store.save_state(&s).unwrap();
        let loaded = FileStore::new(dir.path())
            .load_state("s1")
            .unwrap()
            .unwrap();
        assert_eq!(loaded.updated_at, 100 + i);
        assert_eq!(loaded.history, h);
        inodes.insert(std::fs::metadata(sdir.join("state.json")).unwrap().ino());
    }
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(
            inodes.len() <= 2,
            "each save made a new state file: {} inodes over 6 saves",
            inodes.len()
        );
    }
}

/// `summary.json` is written when a listing's field changes; a save that changes only
/// `updatedAt`, by less than two seconds, leaves it (a request's tool-call turns);
/// a later one, a new last message or a close writes it.
#[test]
fn the_summary_is_written_when_a_listed_field_changes() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let summary = dir.path().join("sessions/s1/summary.json");
    let read = || -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap()
    };
    let mut h = History::new();
    h.push(user("first question"));
    let mut s = state("s1", h.clone());
    s.updated_at = 10_000;
    store.save_state(&s).unwrap();
    assert_eq!(read()["updatedAt"], 10_000);

    // A tool call's turn: no new text, 1.5 s later.
    h.push(Message::Tool {
        tool_call_id: "c1".into(),
        name: "read_file".into(),
        content: "x".into(),
        is_error: false,
    });
    s.history = h.clone();
    s.updated_at = 11_500;
    store.save_state(&s).unwrap();
    assert_eq!(read()["updatedAt"], 10_000, "left as it was");
    assert_eq!(store.load_state("s1").unwrap().unwrap().updated_at, 11_500);

    // Later than two seconds after the written one.
    s.updated_at = 12_000;
    store.save_state(&s).unwrap();
    assert_eq!(read()["updatedAt"], 12_000);

    // A new last message, at once.
    h.push(Message::Assistant {
        text: "the answer".into(),
        tool_calls: vec![],
    });
    s.history = h.clone();
    s.updated_at = 12_100;
    store.save_state(&s).unwrap();
    assert_eq!(read()["lastMessage"], "the answer");
    assert_eq!(read()["updatedAt"], 12_100);

    // Closed, at once; and what `session.list` reads agrees.
    s.closed = true;
    s.updated_at = 12_200;
    store.save_state(&s).unwrap();
    assert_eq!(read()["closed"], true);
    let listed = store.list_summaries().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].closed);
    assert_eq!(listed[0].updated_at, 12_200);
}

/// The state's temporary file is written in place and cut to length after (not
/// truncated first): a shorter state after a longer one leaves no bytes of the longer.
#[test]
fn a_shorter_state_after_a_longer_one_loads_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let sdir = dir.path().join("sessions").join("s1");
    for (i, title) in [
        "a long title ".repeat(40),
        "short".to_owned(),
        "mid".repeat(9),
    ]
    .into_iter()
    .chain(["x".to_owned(), "y".to_owned()])
    .enumerate()
    {
        let mut s = state("s1", History::new());
        s.title = Some(title.clone());
        s.updated_at = 10 + i as u64;
        store.save_state(&s).unwrap();
        let loaded = FileStore::new(dir.path())
            .load_state("s1")
            .unwrap()
            .unwrap();
        assert_eq!(loaded.title.as_deref(), Some(title.as_str()));
        let bytes = std::fs::read(sdir.join("state.json")).unwrap();
        serde_json::from_slice::<serde_json::Value>(&bytes)
            .unwrap_or_else(|e| panic!("save {i}: {e}: {}", String::from_utf8_lossy(&bytes)));
    }
}

/// The store makes a session's directory once; removed from outside, it is made
/// again by the next save and the next append.
#[test]
fn a_session_directory_removed_from_outside_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    let sdir = dir.path().join("sessions").join("s1");
    let mut h = History::new();
    h.push(user("one"));
    store.save_state(&state("s1", h.clone())).unwrap();
    std::fs::remove_dir_all(&sdir).unwrap();
    h.push(user("two"));
    store.save_state(&state("s1", h.clone())).unwrap();
    let loaded = FileStore::new(dir.path())
        .load_state("s1")
        .unwrap()
        .unwrap();
    assert_eq!(loaded.history, h);
    std::fs::remove_dir_all(&sdir).unwrap();
    store.release("s1").unwrap();
    store
        .append("s1", &super::store::envelope("s1", "req_1", 1))
        .unwrap();
    assert_eq!(
        FileStore::new(dir.path())
            .load_events("s1")
            .unwrap()
            .events
            .len(),
        1
    );
}
