//! The bridge over in-memory pipes: framing, bad input, answers, lifecycle.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::stream;
use keel_envelope::{codec, Envelope, ErrorCode, Event};
use keel_kernel::model::{FinishReason, Model, ModelEvent, ModelRequest, ModelStream};
use keel_kernel::Kernel;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use tokio_util::sync::CancellationToken;

/// Answers every call with "ok".
#[derive(Debug)]
struct Ok;

impl Model for Ok {
    fn id(&self) -> String {
        "test:ok".into()
    }
    fn context_window(&self) -> u64 {
        1000
    }
    fn stream(&self, _r: ModelRequest, _c: CancellationToken) -> ModelStream {
        Box::pin(stream::iter(vec![
            std::result::Result::Ok(ModelEvent::TextDelta("ok".into())),
            std::result::Result::Ok(ModelEvent::Finished(FinishReason::EndTurn)),
        ]))
    }
}

struct Harness {
    input: DuplexStream,
    lines: Lines<BufReader<DuplexStream>>,
    server: tokio::task::JoinHandle<keel_bridge::StopReason>,
    _ws: tempfile::TempDir,
    _store: tempfile::TempDir,
}

fn harness(max_line: Option<usize>) -> Harness {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(Ok))
        .store_dir(store.path())
        .builtin_tools(false)
        .build()
        .unwrap();
    let (input, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, output) = tokio::io::duplex(1 << 16);
    let opts = keel_bridge::BridgeOptions {
        workspace: Some(ws.path().display().to_string()),
        max_line_bytes: max_line,
        ..Default::default()
    };
    let server = tokio::spawn(keel_bridge::serve(kernel, server_in, server_out, opts));
    Harness {
        input,
        lines: BufReader::new(output).lines(),
        server,
        _ws: ws,
        _store: store,
    }
}

impl Harness {
    async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.unwrap();
        self.input.write_all(b"\n").await.unwrap();
    }
    async fn next(&mut self) -> Envelope {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("no line in time")
            .unwrap()
            .expect("output ended");
        codec::decode_envelope(line.as_bytes())
            .unwrap_or_else(|e| panic!("not an envelope: {line}: {e}"))
    }
    async fn until(&mut self, ty: &str) -> Vec<Envelope> {
        let mut out = Vec::new();
        loop {
            let e = self.next().await;
            let done = e.type_name() == ty;
            out.push(e);
            if done {
                return out;
            }
        }
    }
}

fn error_of(e: &Envelope) -> (ErrorCode, String) {
    match &e.event {
        Event::Error(x) => (
            x.code.clone(),
            x.details["reason"].as_str().unwrap_or("").to_owned(),
        ),
        other => panic!("expected error, got {other:?}"),
    }
}

#[tokio::test]
async fn the_first_line_is_ready_and_a_session_runs() {
    let mut h = harness(None);
    let ready = h.next().await;
    let Event::RuntimeReady(r) = &ready.event else {
        panic!("{ready:?}")
    };
    assert_eq!(r.protocol_version, "1.0");
    assert_eq!(r.permission_modes.len(), 4);
    assert!(ready.session_id.is_none());
    h.send(r#"{"version":"1.0","type":"session.start","requestId":"r1","payload":{"title":"x"}}"#)
        .await;
    let started = h.next().await;
    assert_eq!(
        (
            started.type_name(),
            started.request_id.as_str(),
            started.sequence
        ),
        ("session.started", "r1", 1)
    );
    let sid = started.session_id.clone().unwrap();
    h.send(&format!(
        r#"{{"version":"1.0","type":"request.send","requestId":"r2","sessionId":"{sid}","payload":{{"message":"hi"}}}}"#
    ))
    .await;
    let run = h.until("session.completed").await;
    assert!(run.iter().all(|e| e.request_id == "r2"));
    assert_eq!(
        run.iter().map(|e| e.sequence).collect::<Vec<_>>(),
        (1..=run.len() as u64).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn bad_lines_get_errors_and_reading_goes_on() {
    let mut h = harness(Some(200));
    h.next().await;
    h.send("{not json").await;
    let e = h.next().await;
    assert_eq!(
        error_of(&e),
        (ErrorCode::RequestInvalid, "invalid_json".into())
    );
    h.send(r#"{"version":"1.0","type":"nope.nope","requestId":"r7"}"#)
        .await;
    let e = h.next().await;
    assert_eq!(e.request_id, "r7");
    assert_eq!(
        error_of(&e),
        (ErrorCode::RequestInvalid, "unknown_type".into())
    );
    let big = format!(
        r#"{{"version":"1.0","type":"session.start","requestId":"r8","payload":{{"title":"{}"}}}}"#,
        "x".repeat(500)
    );
    h.send(&big).await;
    let e = h.next().await;
    assert_eq!(
        e.request_id, "r8",
        "the requestId of an oversized line is echoed"
    );
    assert_eq!(
        error_of(&e),
        (ErrorCode::RequestInvalid, "line_too_long".into())
    );
    h.send(r#"{"version":"2.0","type":"session.list","requestId":"r9"}"#)
        .await;
    let e = h.next().await;
    assert_eq!(error_of(&e).0, ErrorCode::VersionMismatch);
    h.send(r#"{"version":"1.0","type":"session.state","requestId":"r10","sessionId":"sess_nope"}"#)
        .await;
    let e = h.next().await;
    assert_eq!(
        (e.request_id.as_str(), error_of(&e).0),
        ("r10", ErrorCode::SessionNotFound)
    );
    h.send("").await;
    h.send(r#"{"version":"1.0","type":"session.list","requestId":"r11"}"#)
        .await;
    let e = h.next().await;
    assert_eq!(
        (e.type_name(), e.request_id.as_str()),
        ("session.list", "r11")
    );
}

#[tokio::test]
async fn eof_closes_sessions_and_stops_cleanly() {
    let mut h = harness(None);
    h.next().await;
    h.send(r#"{"version":"1.0","type":"session.start","requestId":"r1"}"#)
        .await;
    let sid = h.next().await.session_id.unwrap();
    h.input.shutdown().await.unwrap();
    let rest = h.until("runtime.stopped").await;
    let closed = rest
        .iter()
        .find(|e| e.type_name() == "session.closed")
        .unwrap();
    assert_eq!(closed.session_id.as_deref(), Some(sid.as_str()));
    assert_eq!(rest.last().unwrap().type_name(), "runtime.stopped");
    assert_eq!(h.server.await.unwrap(), keel_bridge::StopReason::Eof);
    assert!(
        h.lines.next_line().await.unwrap().is_none(),
        "nothing after runtime.stopped"
    );
}

#[tokio::test]
async fn shutdown_command_stops_with_its_reason() {
    let mut h = harness(None);
    h.next().await;
    h.send(r#"{"version":"1.0","type":"runtime.shutdown","requestId":"r1"}"#)
        .await;
    let rest = h.until("runtime.stopped").await;
    assert!(
        matches!(&rest.last().unwrap().event, Event::RuntimeStopped(s) if s.reason == "shutdown")
    );
    assert_eq!(h.server.await.unwrap(), keel_bridge::StopReason::Shutdown);
}

/// A host that does not read stdout: the bridge stops reading commands once its
/// bounded buffers are full (instead of buffering answers without limit), and every
/// answer still arrives, in order, when the host reads again.
///
/// Paused time makes the check deterministic: a sleep only returns once every task is
/// blocked, that is once the bridge has stopped making progress.
#[tokio::test(start_paused = true)]
async fn a_slow_reader_gets_backpressure_not_unbounded_buffering() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    const COMMANDS: usize = 10_000;
    let ws = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .config(keel_kernel::KernelConfig {
            channel_capacity: 8,
            ..Default::default()
        })
        .workspace(ws.path())
        .model(Arc::new(Ok))
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    let (mut input, server_in) = tokio::io::duplex(4096);
    let (server_out, output) = tokio::io::duplex(4096);
    let server = tokio::spawn(keel_bridge::serve(
        kernel,
        server_in,
        server_out,
        Default::default(),
    ));
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let feeder = tokio::spawn(async move {
        for i in 0..COMMANDS {
            let line = format!(
                "{{\"version\":\"1.0\",\"type\":\"session.list\",\"requestId\":\"r{i}\"}}\n"
            );
            input.write_all(line.as_bytes()).await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
        }
        input
    });
    // Nobody reads the output: wait until nothing can move any more.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let accepted = written.load(Ordering::SeqCst);
    assert!(
        accepted < COMMANDS / 5,
        "the bridge kept reading commands ({accepted} of {COMMANDS}) while its output was not read"
    );
    // Reading again lets everything through, in order, nothing lost.
    let mut lines = BufReader::new(output).lines();
    let ready = lines.next_line().await.unwrap().unwrap();
    assert!(ready.contains("runtime.ready"));
    for i in 0..COMMANDS {
        let line = lines.next_line().await.unwrap().unwrap();
        let env = codec::decode_envelope(line.as_bytes()).unwrap();
        assert_eq!(
            (env.type_name(), env.request_id.as_str()),
            ("session.list", format!("r{i}").as_str())
        );
    }
    let mut input = feeder.await.unwrap();
    input.shutdown().await.unwrap();
    drop(input);
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("runtime.stopped") {
            break;
        }
    }
    assert_eq!(server.await.unwrap(), keel_bridge::StopReason::Eof);
}

#[tokio::test]
async fn checkpoints_rewind_fork_and_side_questions_work_over_the_wire() {
    let mut h = harness(None);
    let ws = h._ws.path().to_path_buf();
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    h.next().await;
    h.send(r#"{"version":"1.0","type":"session.start","requestId":"r1","payload":{}}"#)
        .await;
    let sid = h.next().await.session_id.unwrap();
    let cmd = |rid: &str, ty: &str, payload: &str| {
        format!(
            r#"{{"version":"1.0","type":"{ty}","requestId":"{rid}","sessionId":"{sid}","payload":{payload}}}"#
        )
    };
    h.send(&cmd("r2", "request.send", r#"{"message":"hi"}"#))
        .await;
    h.until("session.completed").await;
    // Changes made after the request's checkpoint, by something else than the agent.
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    std::fs::write(ws.join("made.txt"), "new\n").unwrap();
    h.send(&cmd("r3", "checkpoint.list", "{}")).await;
    let list = h.until("checkpoint.list").await.pop().unwrap();
    assert_eq!(list.request_id, "r3");
    let Event::CheckpointList(l) = &list.event else {
        panic!()
    };
    assert_eq!(l.checkpoints.len(), 1);
    assert_eq!(l.checkpoints[0].request_id, "r2");
    assert_eq!(l.checkpoints[0].files_changed.len(), 2);
    // Bad input: an unknown id, no id at all.
    h.send(&cmd("r4", "session.rewind", r#"{"toRequestId":"nope"}"#))
        .await;
    let e = h.next().await;
    assert_eq!(e.request_id, "r4");
    assert_eq!(error_of(&e).0, ErrorCode::CheckpointNotFound);
    h.send(&cmd("r5", "session.rewind", "{}")).await;
    let e = h.next().await;
    assert_eq!(error_of(&e).0, ErrorCode::RequestInvalid);
    h.send(&cmd("r6", "session.rewind", r#"{"toRequestId":"r2"}"#))
        .await;
    let rewound = h.until("session.rewound").await.pop().unwrap();
    let Event::SessionRewound(r) = &rewound.event else {
        panic!()
    };
    assert_eq!(r.files.len(), 2);
    assert!(r.conversation_cut);
    assert!(!ws.join("made.txt").exists());
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    h.send(&cmd("r7", "request.side", r#"{"message":"and?"}"#))
        .await;
    let side = h.until("side.answered").await.pop().unwrap();
    assert_eq!((side.request_id.as_str(), side.sequence), ("r7", 1));
    h.send(&cmd("r8", "session.fork", "{}")).await;
    let forked = h.until("session.forked").await.pop().unwrap();
    let Event::SessionForked(f) = &forked.event else {
        panic!()
    };
    assert_eq!(f.parent_session_id, sid);
    assert_eq!(forked.session_id.as_deref(), Some(f.session_id.as_str()));
}
