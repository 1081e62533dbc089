//! Session metadata: titles set by the host or generated after a request, and
//! `session.delete` (open or stored sessions, their files, bad ids).

use super::*;
use keel_envelope::commands::{SessionDelete, SetTitle};

fn title_changes(envs: &[Envelope]) -> Vec<(String, Option<String>, String)> {
    envs.iter()
        .filter_map(|e| match &e.event {
            Event::SessionTitleChanged(t) => {
                Some((t.title.clone(), t.previous_title.clone(), t.source.clone()))
            }
            _ => None,
        })
        .collect()
}

/// Runs a command through `execute`; returns its result and everything the kernel
/// emitted on the command's own stream (read from a subscription to all events).
async fn command(
    kernel: &Kernel,
    all: &mut EventStream,
    session: Option<&str>,
    payload: CommandPayload,
) -> (Result<(), ErrorPayload>, Vec<Envelope>) {
    let rid = kernel.new_request_id();
    let cmd = Command::new(rid.clone(), session.map(str::to_owned), payload);
    let result = kernel.execute(cmd).await;
    let mut evs = Vec::new();
    while let Some(e) = all.try_recv() {
        if e.request_id == rid {
            evs.push(e);
        }
    }
    (result, evs)
}

fn set_title(title: &str) -> CommandPayload {
    CommandPayload::SessionSetTitle(SetTitle::new(title.to_owned()))
}

fn delete(id: &str) -> CommandPayload {
    CommandPayload::SessionDelete(SessionDelete::new(id.to_owned()))
}

#[tokio::test]
async fn the_first_request_gets_a_generated_title_just_before_its_terminal_event() {
    let f = fixture(vec![say("one"), say("two")], Duration::from_secs(60));
    let (s, mut events) = f.kernel.start_session(opts()).await.unwrap();
    let message = "  Please refactor the configuration loader so that it reads every file once\nThe rest is detail.";
    let rid = s.send(message).await.unwrap();
    let first = until(&mut events, "session.completed").await;
    check_sequences(&first);
    // After the request's work, before its terminal event (and its final answer).
    let on_request: Vec<String> = first
        .iter()
        .filter(|e| e.request_id == rid)
        .map(|e| e.type_name().to_owned())
        .collect();
    assert!(
        on_request.ends_with(&[
            "turn.completed".to_owned(),
            "session.title_changed".to_owned(),
            "assistant.final".to_owned(),
            "session.completed".to_owned(),
        ]),
        "{on_request:?}"
    );
    assert_eq!(
        title_changes(&first),
        [(
            "Please refactor the configuration loader so that it reads".to_owned(),
            None,
            "generated".to_owned()
        )]
    );
    // Only once: the second request leaves the title alone.
    s.send("And now something else").await.unwrap();
    let second = until(&mut events, "session.completed").await;
    assert!(title_changes(&second).is_empty(), "{:?}", types(&second));
    // Persisted: a new kernel over the same store lists it.
    let listed = f.kernel.list_sessions().unwrap();
    assert_eq!(
        listed[0].title.as_deref(),
        Some("Please refactor the configuration loader so that it reads")
    );
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            f.store
                .path()
                .join("sessions")
                .join(s.id())
                .join("state.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        state["title"],
        "Please refactor the configuration loader so that it reads"
    );
}

#[tokio::test]
async fn an_interrupted_first_request_also_gets_its_title_and_a_titled_session_none() {
    let slow = Turn {
        text: vec!["thinking"],
        delay: Some(Duration::from_secs(600)),
        ..Turn::default()
    };
    let f = fixture(vec![slow, say("hi")], Duration::from_secs(60));
    let (s, mut events) = f.kernel.start_session(opts()).await.unwrap();
    let rid = s.send("Interrupt me").await.unwrap();
    let mut evs = until(&mut events, "turn.started").await;
    s.interrupt().await.unwrap();
    evs.extend(until(&mut events, "session.interrupted").await);
    check_sequences(&evs);
    assert_eq!(
        title_changes(&evs),
        [("Interrupt me".to_owned(), None, "generated".to_owned())]
    );
    let pos = evs
        .iter()
        .position(|e| e.type_name() == "session.title_changed")
        .unwrap();
    assert_eq!(evs[pos].request_id, rid);

    // A session started with a title never gets a generated one.
    let (t, mut tevents) = start(&f).await;
    t.send("Hello there").await.unwrap();
    let evs = until(&mut tevents, "session.completed").await;
    assert!(title_changes(&evs).is_empty(), "{:?}", types(&evs));
    assert_eq!(t.state().session.title.as_deref(), Some("t"));
}

#[tokio::test]
async fn set_title_answers_on_the_commands_stream_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(vec![say("ok")], Duration::from_secs(60), dir, store);
    let mut all = f.kernel.subscribe();
    let (s, mut events) = f.kernel.start_session(opts()).await.unwrap();
    let sid = s.id().to_owned();
    let (r, evs) = command(
        &f.kernel,
        &mut all,
        Some(&sid),
        set_title("  Fix the parser "),
    )
    .await;
    r.unwrap();
    assert_eq!(types(&evs), ["session.title_changed"]);
    assert_eq!(evs[0].sequence, 1);
    assert_eq!(
        title_changes(&evs),
        [("Fix the parser".to_owned(), None, "host".to_owned())]
    );
    let (r, evs) = command(&f.kernel, &mut all, Some(&sid), set_title("Fix the lexer")).await;
    r.unwrap();
    assert_eq!(
        title_changes(&evs),
        [(
            "Fix the lexer".to_owned(),
            Some("Fix the parser".to_owned()),
            "host".to_owned()
        )]
    );
    // A titled session keeps the host's title after its first request.
    let rid = s.send("Something unrelated").await.unwrap();
    let evs: Vec<Envelope> = until(&mut events, "session.completed")
        .await
        .into_iter()
        .filter(|e| e.request_id == rid)
        .collect();
    assert!(title_changes(&evs).is_empty(), "{:?}", types(&evs));
    f.kernel.shutdown("test").await;

    let kernel = Kernel::builder()
        .workspace(&ws)
        .model(TestModel::new(vec![]))
        .store_dir(&store_path)
        .builtin_tools(false)
        .build()
        .unwrap();
    let listed = kernel.list_sessions().unwrap();
    assert_eq!(listed[0].title.as_deref(), Some("Fix the lexer"));
    let (resumed, _) = kernel.resume_session(&sid, None).await.unwrap();
    assert_eq!(
        resumed.state().session.title.as_deref(),
        Some("Fix the lexer")
    );
}

#[tokio::test]
async fn set_title_refuses_bad_titles_and_unknown_sessions() {
    let f = fixture(vec![], Duration::from_secs(60));
    let mut all = f.kernel.subscribe();
    let (s, _events) = start(&f).await;
    let sid = s.id().to_owned();
    let long = "x".repeat(201);
    for (bad, why) in [
        ("", "empty"),
        ("   \t ", "empty"),
        (long.as_str(), "201 characters"),
        ("two\nlines", "U+000A"),
        ("bell\u{7}", "U+0007"),
    ] {
        let (r, evs) = command(&f.kernel, &mut all, Some(&sid), set_title(bad)).await;
        let e = r.unwrap_err();
        assert_eq!(e.code, ErrorCode::RequestInvalid, "{bad:?}");
        assert_eq!(e.details["field"], "payload.title");
        assert!(e.message.contains(why), "{}", e.message);
        assert_eq!(types(&evs), ["error"], "one answer on the command's stream");
    }
    assert_eq!(s.state().session.title.as_deref(), Some("t"), "unchanged");
    // 200 characters is the limit, inclusive.
    let (r, _) = command(&f.kernel, &mut all, Some(&sid), set_title(&"y".repeat(200))).await;
    r.unwrap();
    let (r, evs) = command(&f.kernel, &mut all, Some("sess_nope"), set_title("x")).await;
    assert_eq!(r.unwrap_err().code, ErrorCode::SessionNotFound);
    assert_eq!(types(&evs), ["error"]);
    let (r, _) = command(&f.kernel, &mut all, None, set_title("x")).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    assert_eq!(e.details["field"], "sessionId");
    // A wrong type never reaches the kernel: the decoder names the field.
    let line = format!(
        r#"{{"version":"1.0","type":"session.set_title","requestId":"req_x","sessionId":"{sid}","payload":{{"title":5}}}}"#
    );
    let err = keel_envelope::codec::decode_command(
        line.as_bytes(),
        keel_envelope::codec::Limits::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.error.details["field"], "payload.title",
        "{:?}",
        err.error
    );
}

#[tokio::test]
async fn delete_closes_an_open_session_and_removes_its_files() {
    let f = fixture(vec![say("hello")], Duration::from_secs(60));
    let mut all = f.kernel.subscribe();
    let (s, mut events) = start(&f).await;
    let sid = s.id().to_owned();
    s.send("hi").await.unwrap();
    until(&mut events, "session.completed").await;
    let dir = f.store.path().join("sessions").join(&sid);
    assert!(dir.join("events.jsonl").exists() && dir.join("state.json").exists());
    while all.try_recv().is_some() {}

    let rid = f.kernel.new_request_id();
    f.kernel
        .execute(Command::new(rid.clone(), None, delete(&sid)))
        .await
        .unwrap();
    let mut evs = Vec::new();
    while let Some(e) = all.try_recv() {
        evs.push(e);
    }
    // Closed first (on a request id of its own), then deleted (on the command's).
    assert_eq!(types(&evs), ["session.closed", "session.deleted"]);
    assert_ne!(evs[0].request_id, rid);
    assert_eq!(evs[1].request_id, rid);
    assert_eq!(evs[1].sequence, 1);
    assert_eq!(evs[1].session_id.as_deref(), Some(sid.as_str()));
    let Event::SessionDeleted(d) = &evs[1].event else {
        panic!("{evs:?}")
    };
    assert_eq!(d.session_id, sid);
    assert!(!dir.exists(), "the session's files are gone");
    assert!(
        std::fs::read_dir(f.store.path().join("sessions"))
            .unwrap()
            .next()
            .is_none(),
        "nothing left behind"
    );
    assert!(f.kernel.list_sessions().unwrap().is_empty());
    assert!(f.kernel.session_handle(&sid).is_none());
    let e = f.kernel.resume_session(&sid, None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionNotFound);
    let e = f.kernel.delete_session(&sid).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionNotFound);
    // Commands to it now fail like for any unknown session.
    let (r, _) = command(&f.kernel, &mut all, Some(&sid), set_title("x")).await;
    assert_eq!(r.unwrap_err().code, ErrorCode::SessionNotFound);
}

#[tokio::test]
async fn delete_interrupts_a_running_request_first() {
    let slow = Turn {
        text: vec!["thinking"],
        delay: Some(Duration::from_secs(600)),
        ..Turn::default()
    };
    let f = fixture(vec![slow], Duration::from_secs(60));
    let mut all = f.kernel.subscribe();
    let (s, mut events) = start(&f).await;
    let sid = s.id().to_owned();
    let rid = s.send("take your time").await.unwrap();
    until(&mut events, "turn.started").await;
    f.kernel.delete_session(&sid).await.unwrap();
    let mut evs = Vec::new();
    while let Some(e) = all.try_recv() {
        evs.push(e);
    }
    check_sequences(&evs);
    let tail: Vec<String> = types(&evs)
        .into_iter()
        .skip_while(|t| t != "session.interrupted")
        .collect();
    assert_eq!(
        tail,
        ["session.interrupted", "session.closed", "session.deleted"]
    );
    assert!(evs
        .iter()
        .any(|e| e.request_id == rid && e.type_name() == "session.interrupted"));
    assert!(!f.store.path().join("sessions").join(&sid).exists());
}

#[tokio::test]
async fn delete_a_stored_session_from_a_new_kernel_and_refuse_bad_ids() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(vec![say("ok")], Duration::from_secs(60), dir, store);
    let (a, mut events) = start(&f).await;
    a.send("keep me").await.unwrap();
    until(&mut events, "session.completed").await;
    let (b, _) = start(&f).await;
    let (keep, gone) = (a.id().to_owned(), b.id().to_owned());
    f.kernel.shutdown("test").await;
    // Something next to the store that a path in an id must never reach.
    let outside = store_path.join("outside");
    std::fs::create_dir_all(&outside).unwrap();

    let kernel = Kernel::builder()
        .workspace(&ws)
        .model(TestModel::new(vec![]))
        .store_dir(&store_path)
        .builtin_tools(false)
        .build()
        .unwrap();
    let mut all = kernel.subscribe();
    let (r, evs) = command(&kernel, &mut all, None, delete(&gone)).await;
    r.unwrap();
    assert_eq!(types(&evs), ["session.deleted"]);
    let ids: Vec<String> = kernel
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(ids, std::slice::from_ref(&keep));
    for bad in ["sess_unknown", "../outside", "..", "sess/../../outside"] {
        let (r, evs) = command(&kernel, &mut all, None, delete(bad)).await;
        assert_eq!(r.unwrap_err().code, ErrorCode::SessionNotFound, "{bad:?}");
        assert_eq!(types(&evs), ["error"], "{bad:?}");
    }
    // An empty id names no session: the field is missing.
    let (r, evs) = command(&kernel, &mut all, None, delete("")).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid, "{e:?}");
    assert_eq!(e.details["field"], "payload.sessionId", "{e:?}");
    assert_eq!(types(&evs), ["error"]);
    assert!(outside.exists());
    assert!(store_path
        .join("sessions")
        .join(&keep)
        .join("state.json")
        .exists());
    // The other session is untouched and resumes.
    let (h, _) = kernel.resume_session(&keep, None).await.unwrap();
    assert_eq!(h.state().message_count, 2);
}

#[tokio::test]
async fn a_memory_store_deletes_too() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, _) = small_window_kernel(vec![say("hi")], 100_000, dir.path());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("hello").await.unwrap();
    until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    kernel.delete_session(&sid).await.unwrap();
    assert!(kernel.list_sessions().unwrap().is_empty());
    assert!(kernel.session_log(&sid).unwrap().is_empty());
    assert_eq!(
        kernel.delete_session(&sid).await.unwrap_err().code,
        ErrorCode::SessionNotFound
    );
}
