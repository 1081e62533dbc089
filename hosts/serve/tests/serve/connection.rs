//! One connection over in-memory pipes with tokio's paused clock: the idle timeout.

use super::*;
use keel_envelope::commands::SetMode;
use keel_envelope::types::PermissionMode;
use keel_envelope::Command;
use keel_serve::{serve_connection, ConnectionEnd};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

struct Conn {
    input: DuplexStream,
    lines: Lines<BufReader<DuplexStream>>,
    task: tokio::task::JoinHandle<ConnectionEnd>,
}

fn open(kernel: &Kernel) -> Conn {
    let (input, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, output) = tokio::io::duplex(1 << 16);
    let k = kernel.clone();
    let task = tokio::spawn(async move {
        serve_connection(
            k,
            server_in,
            server_out,
            &ConnectionOptions::default(),
            CancellationToken::new(),
        )
        .await
    });
    Conn {
        input,
        lines: BufReader::new(output).lines(),
        task,
    }
}

impl Conn {
    async fn next(&mut self) -> Envelope {
        decode(&self.lines.next_line().await.unwrap().expect("output ended"))
    }
    async fn send(&mut self, v: serde_json::Value) {
        self.input
            .write_all(format!("{v}\n").as_bytes())
            .await
            .unwrap();
    }
}

/// Lets every task that can run, run (the clock does not move).
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_connection_is_closed_after_90_seconds() {
    let (kernel, _m, _ws, _st) = super::kernel(vec![]);
    let mut c = open(&kernel);
    assert_eq!(c.next().await.type_name(), "runtime.ready");
    tokio::time::advance(Duration::from_secs(89)).await;
    settle().await;
    assert!(!c.task.is_finished(), "closed before 90 s");
    tokio::time::advance(Duration::from_secs(2)).await;
    let last = c.next().await;
    assert_eq!(stopped_reason(&last), Some("idle"));
    assert!(c.lines.next_line().await.unwrap().is_none());
    assert_eq!(c.task.await.unwrap(), ConnectionEnd::Idle);
}

#[tokio::test(start_paused = true)]
async fn input_and_watched_events_keep_a_connection_open() {
    let (kernel, _m, _ws, _st) = super::kernel(vec![]);
    let mut c = open(&kernel);
    c.next().await;
    c.send(serde_json::json!({"version": "1.0", "type": "session.start", "requestId": "c1"}))
        .await;
    let started = c.next().await;
    let sid = started.session_id.clone().unwrap();

    // Input at 60 s restarts the clock.
    tokio::time::advance(Duration::from_secs(60)).await;
    c.send(serde_json::json!({"version": "1.0", "type": "session.list", "requestId": "c2"}))
        .await;
    assert_eq!(c.next().await.type_name(), "session.list");
    // Then only output: another client changes the watched session's mode every 60 s.
    let (other, _other_rx) = kernel.watcher(64);
    for i in 0..3 {
        tokio::time::advance(Duration::from_secs(60)).await;
        settle().await;
        assert!(
            !c.task.is_finished(),
            "closed at step {i} while events flowed"
        );
        other
            .execute(Command::new(
                format!("o{i}"),
                Some(sid.clone()),
                CommandPayload::SessionSetMode(SetMode::new(if i % 2 == 0 {
                    PermissionMode::Plan
                } else {
                    PermissionMode::Ask
                })),
            ))
            .await
            .unwrap();
        assert_eq!(c.next().await.type_name(), "session.mode_changed");
    }
    // Silence: closed 90 s after the last line out.
    tokio::time::advance(Duration::from_secs(89)).await;
    settle().await;
    assert!(!c.task.is_finished());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(stopped_reason(&c.next().await), Some("idle"));
    assert_eq!(c.task.await.unwrap(), ConnectionEnd::Idle);
}

#[tokio::test(start_paused = true)]
async fn runtime_shutdown_ends_only_the_connection_and_a_running_request_goes_on() {
    let slow = Turn {
        deltas: 5,
        delay: Some(Duration::from_secs(30)),
        ..Turn::default()
    };
    let (kernel, _m, _ws, _st) = super::kernel(vec![slow]);
    let mut c = open(&kernel);
    c.next().await;
    c.send(serde_json::json!({"version": "1.0", "type": "session.start", "requestId": "c1"}))
        .await;
    let sid = c.next().await.session_id.unwrap();
    c.send(serde_json::json!({"version": "1.0", "type": "request.send", "requestId": "c2", "sessionId": sid, "payload": {"message": "go"}}))
        .await;
    assert_eq!(c.next().await.type_name(), "request.accepted");
    c.send(serde_json::json!({"version": "1.0", "type": "runtime.shutdown", "requestId": "c3"}))
        .await;
    let mut last = c.next().await;
    while last.type_name() != "runtime.stopped" {
        last = c.next().await;
    }
    assert_eq!(last.request_id, "c3");
    assert_eq!(stopped_reason(&last), Some("disconnect"));
    assert_eq!(c.task.await.unwrap(), ConnectionEnd::Disconnect);
    // The request was not stopped: it completes on its own.
    tokio::time::sleep(Duration::from_secs(31)).await;
    let log = kernel.session_log(&sid).unwrap();
    let end = log.iter().rev().find(|e| e.request_id == "c2").unwrap();
    assert_eq!(end.type_name(), "session.completed");
}
