//! Deny rules set over `session.set_rules` refuse matching calls in every mode, on the
//! canonical form of the command, whatever allow rule would let them run.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream;
use keel_envelope::commands::{CommandPayload, SetRules};
use keel_envelope::ids::{ManualClock, SeqIdGen};
use keel_envelope::types::{PermissionMode, Usage};
use keel_envelope::{Command, Envelope, ErrorCode, Event};
use keel_kernel::model::{
    FinishReason, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{EventStream, Kernel, SessionOptions};
use tokio_util::sync::CancellationToken;

/// A model that calls `run_shell` once per command, then ends the turn.
#[derive(Debug)]
struct ShellCaller {
    commands: Mutex<VecDeque<&'static str>>,
}

impl Model for ShellCaller {
    fn id(&self) -> String {
        "test:shell-caller".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, _request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let next = self.commands.lock().unwrap().pop_front();
        let mut events = Vec::new();
        match next {
            Some(cmd) => {
                events.push(ModelEvent::ToolCall(ToolCallRequest {
                    id: format!("call_{}", cmd.len()),
                    name: "run_shell".into(),
                    arguments: serde_json::json!({ "command": cmd }),
                }));
                events.push(ModelEvent::Usage(Usage::default()));
                events.push(ModelEvent::Finished(FinishReason::ToolUse));
            }
            None => {
                events.push(ModelEvent::TextDelta("done".into()));
                events.push(ModelEvent::Usage(Usage::default()));
                events.push(ModelEvent::Finished(FinishReason::EndTurn));
            }
        }
        Box::pin(stream::iter(events.into_iter().map(Ok)))
    }
}

async fn until(events: &mut EventStream, ty: &str) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(600), events.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {ty}"))
            .expect("stream ended");
        let done = env.type_name() == ty;
        out.push(env);
        if done {
            return out;
        }
    }
}

#[tokio::test]
async fn a_deny_rule_set_over_set_rules_refuses_the_command_in_auto_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    for f in ["x", "y"] {
        std::fs::write(dir.path().join(f), "keep me\n").unwrap();
    }
    let model = Arc::new(ShellCaller {
        commands: Mutex::new(VecDeque::from(["FOO=1 rm x", "timeout 5 rm  y"])),
    });
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model)
        .store_dir(store.path())
        .clock(Arc::new(ManualClock::new(1_775_600_000_000, 1)))
        .ids(Arc::new(SeqIdGen::default()))
        .build()
        .unwrap();
    let (s, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: Some(PermissionMode::Auto),
            model: None,
            ..SessionOptions::default()
        })
        .await
        .unwrap();
    // A session-only deny rule and a project deny rule, next to allow rules that
    // would let every shell command run.
    kernel
        .execute(Command::new(
            "req_rules",
            Some(s.id().to_owned()),
            CommandPayload::SessionSetRules(
                SetRules::new()
                    .always_allow_global(vec!["run_shell".into()])
                    .always_allow_project(vec!["run_shell(rm *)".into()])
                    .always_deny_global(Vec::new())
                    .always_deny_project(vec!["run_shell(rm y)".into()])
                    .deny(vec!["run_shell(rm x)".into()]),
            ),
        ))
        .await
        .unwrap();
    let state = s.state();
    assert_eq!(state.rules.always_deny_project, vec!["run_shell(rm y)"]);

    s.send("clean up").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let skipped: Vec<(ErrorCode, String)> = all
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(x) => Some((x.error.code.clone(), x.error.message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped
        .iter()
        .all(|(code, _)| *code == ErrorCode::ToolPermissionDenied));
    assert!(skipped[0].1.contains("run_shell(rm x)"), "{skipped:?}");
    assert!(skipped[1].1.contains("run_shell(rm y)"), "{skipped:?}");
    assert!(!all
        .iter()
        .any(|e| matches!(e.event, Event::ToolCallStarted(_))));
    for f in ["x", "y"] {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(f)).unwrap(),
            "keep me\n",
            "{f} was touched"
        );
    }
}
