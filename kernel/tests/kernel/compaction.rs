//! Compaction by hand (`context.compact`) runs as the session's unit of work: the
//! command is answered as soon as it is accepted, messages sent meanwhile wait behind
//! it, and interrupts, close and shutdown stop it.

use super::*;
use futures::future::BoxFuture;
use keel_envelope::commands::ContextCompact;
use keel_envelope::types::SessionState;
use keel_kernel::store::{FileStore, Store};
use keel_kernel::testing::{Point, Probe};
use tokio::sync::{mpsc, oneshot};

/// Pauses the first compaction until the test lets it go.
#[derive(Debug)]
struct PauseCompaction {
    reached: mpsc::UnboundedSender<String>,
    release: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Probe for PauseCompaction {
    fn reached(&self, point: Point, _session: &str, request: &str) -> BoxFuture<'static, ()> {
        if point != Point::Compaction {
            return Box::pin(async {});
        }
        let Some(release) = self.release.lock().unwrap().take() else {
            return Box::pin(async {});
        };
        let _ = self.reached.send(request.to_owned());
        Box::pin(async move {
            let _ = release.await;
        })
    }
}

struct Paused {
    kernel: Kernel,
    model: Arc<TestModel>,
    reached: mpsc::UnboundedReceiver<String>,
    release: Option<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

fn paused_kernel(turns: Vec<Turn>) -> Paused {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(turns);
    let (tx, reached) = mpsc::unbounded_channel();
    let (release, rx) = oneshot::channel();
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .probe(Arc::new(PauseCompaction {
            reached: tx,
            release: Mutex::new(Some(rx)),
        }))
        .build()
        .unwrap();
    Paused {
        kernel,
        model,
        reached,
        release: Some(release),
        _dir: dir,
    }
}

/// Three finished requests: six messages, so a compaction has older turns to summarise.
async fn three_requests(s: &SessionHandle, events: &mut EventStream) {
    for m in ["one", "two", "three"] {
        s.send(m).await.unwrap();
        until(events, "session.completed").await;
    }
    assert_eq!(s.state().message_count, 6);
}

/// Sends `context.compact` without waiting for its answer; returns its requestId and
/// the task running `Kernel::execute`.
fn compact(
    kernel: &Kernel,
    session: &str,
) -> (String, tokio::task::JoinHandle<Result<(), ErrorPayload>>) {
    let rid = kernel.new_request_id();
    let cmd = Command::new(
        rid.clone(),
        Some(session.to_owned()),
        CommandPayload::ContextCompact(ContextCompact::new()),
    );
    let k = kernel.clone();
    (rid, tokio::spawn(async move { k.execute(cmd).await }))
}

/// Waits for a spawned command; a generous bound turns a hang into a failure.
async fn answered(task: tokio::task::JoinHandle<Result<(), ErrorPayload>>) {
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("Kernel::execute did not return")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn messages_sent_during_a_slow_summary_wait_behind_it_in_order() {
    let mut p = paused_kernel(vec![
        say("a1"),
        say("a2"),
        say("a3"),
        say("SUMMARY of one and two"),
        say("answer b"),
        say("answer c"),
    ]);
    let (s, mut events) = p.kernel.start_session(opts()).await.unwrap();
    three_requests(&s, &mut events).await;

    let (crid, task) = compact(&p.kernel, s.id());
    assert_eq!(p.reached.recv().await.unwrap(), crid);
    // The command is answered once accepted, while the summary is still being written,
    // so a bridge reads its next command.
    answered(task).await;
    assert_eq!(s.state().active_request_id.as_deref(), Some(crid.as_str()));

    // A message sent now waits (queued), also one that asked to steer: there is no
    // running model call it could join.
    let b = s.send("message b").await.unwrap();
    let c = s
        .send_with(RequestSend::new("message c").when_busy(WhenBusy::Steer))
        .await
        .unwrap();
    // Settings that need an idle session are refused meanwhile.
    let busy = s.set_model("test:model").await.unwrap_err();
    assert_eq!(busy.code, ErrorCode::SessionBusy);
    p.release.take().unwrap().send(()).unwrap();

    let mut all = until(&mut events, "session.completed").await;
    if !all
        .iter()
        .any(|e| e.request_id == c && e.type_name() == "session.completed")
    {
        all.extend(until(&mut events, "session.completed").await);
    }
    check_sequences(&all);
    let pos = |rid: &str, ty: &str| {
        all.iter()
            .position(|e| e.request_id == rid && e.type_name() == ty)
            .unwrap_or_else(|| panic!("no {ty} on {rid}: {:?}", types(&all)))
    };
    assert!(pos(&b, "request.queued") < pos(&crid, "context.compaction.completed"));
    assert!(pos(&c, "request.queued") < pos(&crid, "context.compaction.completed"));
    assert!(pos(&crid, "context.compaction.completed") < pos(&b, "request.accepted"));
    assert!(pos(&b, "session.completed") < pos(&c, "request.accepted"));
    let Event::CompactionCompleted(done) = &all[pos(&crid, "context.compaction.completed")].event
    else {
        panic!()
    };
    assert_eq!((done.messages_compacted, done.fallback), (2, false));

    // Nothing was lost: b's model call saw the summary, the kept turns and b, in order;
    // c's saw b's exchange too.
    let seen = p.model.seen.lock().unwrap();
    let user_texts = |r: &ModelRequest| -> Vec<String> {
        r.messages
            .iter()
            .filter_map(|m| match m {
                keel_kernel::model::Message::User { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    let for_c = user_texts(&seen[seen.len() - 1]);
    assert_eq!(for_c.len(), 5, "{for_c:?}");
    assert!(for_c[0].contains("SUMMARY of one and two"), "{for_c:?}");
    assert_eq!(&for_c[1..], ["two", "three", "message b", "message c"]);
    drop(seen);
    assert_eq!(s.state().message_count, 9);
}

#[tokio::test]
async fn an_interrupt_answers_a_running_compaction_and_keeps_the_history() {
    let mut p = paused_kernel(vec![say("a1"), say("a2"), say("a3"), say("SUMMARY")]);
    let (s, mut events) = p.kernel.start_session(opts()).await.unwrap();
    three_requests(&s, &mut events).await;
    let (crid, task) = compact(&p.kernel, s.id());
    p.reached.recv().await.unwrap();
    answered(task).await;
    let irid = s.interrupt().await.unwrap();
    p.release.take().unwrap().send(()).unwrap();
    let all = until(&mut events, "session.interrupted").await;
    check_sequences(&all);
    let last = all.last().unwrap();
    let Event::SessionInterrupted(i) = &last.event else {
        panic!()
    };
    assert_eq!(last.request_id, crid);
    assert_eq!(
        last.meta.as_ref().and_then(|m| m.reply_to.as_deref()),
        Some(irid.as_str())
    );
    assert!(i.was_running, "{i:?}");
    assert_eq!(i.interrupted_request_id.as_deref(), Some(crid.as_str()));
    let done = first_event!(all, CompactionCompleted).expect("context.compaction.completed");
    assert_eq!(done.messages_compacted, 0);
    assert_eq!(s.state().message_count, 6, "the history is unchanged");
    // Its terminal event out, the compaction no longer shows in the state.
    assert_eq!(s.state().session.state, SessionState::Idle);
    assert_eq!(s.state().active_request_id, None);
    // The session goes on.
    s.send("four").await.unwrap();
    until(&mut events, "session.completed").await;
    assert_eq!(s.state().message_count, 8);
}

/// A host that has a compaction's `context.compaction.completed` reads the session as
/// idle, or as running the request queued behind it: never the compaction that ended.
#[tokio::test]
async fn the_state_read_after_a_compaction_ended_is_not_the_compaction() {
    let _busy = Busy::start(2);
    let rounds = 20;
    let turns = (0..rounds).flat_map(|_| [say("ok"), say("SUMMARY"), say("after")]);
    let f = fixture(turns.collect(), Duration::from_secs(60));
    let (s, mut events) = start(&f).await;
    for m in ["one", "two", "three"] {
        s.send(m).await.unwrap();
        until(&mut events, "session.completed").await;
    }
    for round in 0..rounds {
        let (crid, task) = compact(&f.kernel, s.id());
        answered(task).await;
        // Every other round a request waits behind the compaction.
        let queued = if round % 2 == 1 {
            Some(s.send("behind").await.unwrap())
        } else {
            None
        };
        loop {
            let env = events.recv().await.unwrap();
            if env.request_id == crid && env.type_name() == "context.compaction.completed" {
                assert_not_still_running(&s.state(), &crid, queued.as_deref(), round);
                break;
            }
        }
        if queued.is_some() {
            until(&mut events, "session.completed").await;
        } else {
            s.send("more").await.unwrap();
            until(&mut events, "session.completed").await;
        }
    }
}

#[tokio::test]
async fn shutdown_stops_a_compaction_waiting_on_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(vec![
        say("a1"),
        say("a2"),
        say("a3"),
        Turn {
            text: vec!["a summary that never comes"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        },
    ]);
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model.clone())
        .store_dir(dir.path().join("store"))
        .builtin_tools(false)
        .build()
        .unwrap();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    three_requests(&s, &mut events).await;
    let (crid, task) = compact(&kernel, s.id());
    until(&mut events, "context.compaction.started").await;
    tokio::time::timeout(Duration::from_secs(60), kernel.shutdown("shutdown"))
        .await
        .expect("shutdown waited for the model");
    answered(task).await;
    let all = until(&mut events, "session.closed").await;
    let t: Vec<(String, String)> = all
        .iter()
        .map(|e| (e.request_id.clone(), e.type_name().to_owned()))
        .collect();
    let completed = t
        .iter()
        .position(|(r, ty)| *r == crid && ty == "context.compaction.completed")
        .expect("completed");
    let interrupted = t
        .iter()
        .position(|(r, ty)| *r == crid && ty == "session.interrupted")
        .expect("interrupted");
    assert!(completed < interrupted, "{t:?}");
    // Stopped before the history was touched, and the stored state says so.
    let stored: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join("store/sessions")
                .join(s.id())
                .join("state.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // The history itself sits in history.jsonl; the state counts its lines.
    assert_eq!(stored["historyLines"], 6);
    let loaded = FileStore::new(dir.path().join("store"))
        .load_state(s.id())
        .unwrap()
        .unwrap();
    assert_eq!(loaded.history.len(), 6);
    assert_eq!(stored["closed"], true);
}

#[tokio::test]
async fn close_stops_a_compaction_and_a_busy_session_refuses_one() {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(vec![
        say("a1"),
        say("a2"),
        say("a3"),
        Turn {
            text: vec!["slow"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        },
        Turn {
            text: vec!["slow"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        },
    ]);
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    three_requests(&s, &mut events).await;
    // While a request runs, compaction by hand is refused (retryable).
    let r = s.send("slow").await.unwrap();
    until(&mut events, "turn.started").await;
    let busy = s
        .command(CommandPayload::ContextCompact(ContextCompact::new()))
        .await
        .unwrap_err();
    assert_eq!(busy.code, ErrorCode::SessionBusy);
    assert!(busy.retryable);
    assert_eq!(busy.details["activeRequestId"], r.as_str());
    s.interrupt().await.unwrap();
    until(&mut events, "session.interrupted").await;

    let (crid, task) = compact(&kernel, s.id());
    until(&mut events, "context.compaction.started").await;
    answered(task).await;
    let queued = s.send("waits").await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), s.close())
        .await
        .expect("close waited for the model")
        .unwrap();
    let all = until(&mut events, "session.closed").await;
    assert!(all
        .iter()
        .any(|e| e.request_id == queued && e.type_name() == "request.cancelled"));
    assert!(all
        .iter()
        .any(|e| e.request_id == crid && e.type_name() == "session.interrupted"));
    assert!(!all
        .iter()
        .any(|e| e.request_id == queued && e.type_name() == "request.accepted"));
}
