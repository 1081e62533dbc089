//! The file store's open files and the limit on open sessions.

use super::*;
use keel_envelope::Source;
use keel_kernel::store::{FileStore, FileStoreOptions, Store};
use keel_kernel::KernelConfig;

/// Files of this process open under `root`.
fn open_files_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let root = std::fs::canonicalize(root).unwrap();
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|p| p.starts_with(&root))
        .collect()
}

pub(super) fn envelope(session: &str, request: &str, sequence: u64) -> Envelope {
    Envelope {
        version: "1.0".into(),
        session_id: Some(session.into()),
        request_id: request.into(),
        event_id: format!("evt_{session}_{sequence}"),
        timestamp: 1,
        source: Source::Runtime,
        sequence,
        event: Event::Warning(ErrorPayload::new(ErrorCode::ModelError, "x")),
        meta: None,
    }
}

#[test]
fn the_file_store_keeps_a_bounded_number_of_logs_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::with_options(
        dir.path(),
        FileStoreOptions {
            max_open_logs: 4,
            ..FileStoreOptions::default()
        },
    );
    // Round after round over 50 sessions: every log is closed and opened again many
    // times, and keeps every event in order.
    for round in 1..=3u64 {
        for i in 0..50 {
            let sid = format!("sess_{i:03}");
            store.append(&sid, &envelope(&sid, "req_1", round)).unwrap();
            assert!(store.open_logs() <= 4);
        }
        assert!(
            open_files_under(dir.path()).len() <= 4,
            "{:?}",
            open_files_under(dir.path())
        );
    }
    store.flush().unwrap();
    for i in 0..50 {
        let log = store.load_events(&format!("sess_{i:03}")).unwrap();
        let seqs: Vec<u64> = log.events.iter().map(|e| e.sequence).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert!(!log.torn_tail_dropped);
    }
    // Releasing a session closes its log.
    store
        .append("sess_000", &envelope("sess_000", "req_1", 4))
        .unwrap();
    assert!(open_files_under(dir.path())
        .iter()
        .any(|p| p.to_string_lossy().contains("sess_000")));
    store.release("sess_000").unwrap();
    assert!(!open_files_under(dir.path())
        .iter()
        .any(|p| p.to_string_lossy().contains("sess_000")));
    assert_eq!(store.load_events("sess_000").unwrap().events.len(), 4);
}

#[test]
fn syncing_each_event_writes_the_same_log() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::with_options(
        dir.path(),
        FileStoreOptions {
            fsync_each_event: true,
            max_open_logs: 1,
        },
    );
    assert_eq!(store.options().max_open_logs, 1);
    for seq in 1..=5 {
        for sid in ["sess_a", "sess_b"] {
            store.append(sid, &envelope(sid, "req_1", seq)).unwrap();
        }
    }
    for sid in ["sess_a", "sess_b"] {
        let log = store.load_events(sid).unwrap();
        assert_eq!(log.events.len(), 5);
        assert!(log
            .events
            .iter()
            .all(|e| e.session_id.as_deref() == Some(sid)));
    }
    assert!(open_files_under(dir.path()).len() <= 1);
    // A zero maximum still keeps the log being written open.
    let other = FileStore::with_options(
        dir.path().join("other"),
        FileStoreOptions {
            fsync_each_event: false,
            max_open_logs: 0,
        },
    );
    other.append("sess_c", &envelope("sess_c", "r", 1)).unwrap();
    assert_eq!(other.options().max_open_logs, 1);
}

#[test]
fn hostile_session_ids_name_no_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileStore::new(dir.path());
    for bad in ["", "../x", "a/b", ".", "sess\u{0}", &"s".repeat(4096)] {
        let e = store.append(bad, &envelope("x", "r", 1)).unwrap_err();
        assert_eq!(e.code, ErrorCode::SessionNotFound, "{bad:?}");
        assert_eq!(
            store.load_state(bad).unwrap_err().code,
            ErrorCode::SessionNotFound
        );
    }
}

#[tokio::test]
async fn closing_a_session_closes_its_log() {
    let f = fixture(vec![say("hello")], Duration::from_secs(5));
    let (s, mut events) = start(&f).await;
    s.send("hi").await.unwrap();
    until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    let ours = |f: &Fixture| {
        open_files_under(f.store.path())
            .iter()
            .filter(|p| p.to_string_lossy().contains(&sid))
            // The workspace checkpoints' mark of an open session is not the log.
            .filter(|p| {
                !p.starts_with(
                    std::fs::canonicalize(f.store.path())
                        .unwrap()
                        .join("checkpoints"),
                )
            })
            .count()
    };
    assert_eq!(ours(&f), 1, "the log stays open while the session is");
    s.close().await.unwrap();
    until(&mut events, "session.closed").await;
    assert_eq!(ours(&f), 0, "closing the session closed its log");
    // Resuming opens it again, and the log goes on.
    let (again, mut events) = f.kernel.resume_session(&sid, None).await.unwrap();
    until(&mut events, "session.resumed").await;
    f.model.push(vec![say("again")]);
    again.send("more").await.unwrap();
    until(&mut events, "session.completed").await;
    let log = f.kernel.session_log(&sid).unwrap();
    check_sequences(&log);
}

fn limited(max: usize, dir: &std::path::Path) -> Kernel {
    Kernel::builder()
        .config(KernelConfig {
            max_open_sessions: max,
            fsync_each_event: true,
            ..KernelConfig::default()
        })
        .workspace(dir)
        .model(TestModel::new(Vec::new()))
        .store_dir(dir.join("store"))
        .builtin_tools(false)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_open_session_limit_refuses_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = limited(3, dir.path());
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(kernel.start_session(opts()).await.unwrap().0);
    }
    let mut all = kernel.subscribe();
    let e = kernel.start_session(opts()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionLimitReached);
    assert!(e.retryable);
    assert_eq!(
        (e.details["limit"].as_u64(), e.details["open"].as_u64()),
        (Some(3), Some(3))
    );
    // Over the wire it is an error event answering the command.
    let rid = kernel.new_request_id();
    let cmd = Command::new(
        rid.clone(),
        None,
        CommandPayload::SessionStart(keel_envelope::commands::SessionStart::new()),
    );
    assert!(kernel.execute(cmd).await.is_err());
    let answer = loop {
        let env = all.recv().await.unwrap();
        if env.request_id == rid {
            break env;
        }
    };
    assert!(matches!(&answer.event, Event::Error(e) if e.code == ErrorCode::SessionLimitReached));

    // A stored session cannot be resumed at the limit; an open one can (no new place).
    let closed = open.pop().unwrap();
    let closed_id = closed.id().to_owned();
    closed.close().await.unwrap();
    open.push(kernel.start_session(opts()).await.unwrap().0);
    let e = kernel.resume_session(&closed_id, None).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionLimitReached);
    kernel.resume_session(open[0].id(), None).await.unwrap();
    assert_eq!(kernel.open_sessions().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_starts_never_pass_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let kernel = limited(5, dir.path());
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let k = kernel.clone();
            tokio::spawn(async move { k.start_session(opts()).await.map(|_| ()) })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => ok += 1,
            Err(e) => assert_eq!(e.code, ErrorCode::SessionLimitReached),
        }
    }
    assert_eq!(ok, 5);
    assert_eq!(kernel.open_sessions().len(), 5);
    // No limit at all with 0.
    let unlimited = limited(0, dir.path());
    for _ in 0..20 {
        unlimited.start_session(opts()).await.unwrap();
    }
}
