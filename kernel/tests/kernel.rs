//! Kernel behaviour through its public API, with an in-test model that replays turns
//! and in-test tools.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream;
use keel_envelope::commands::{CommandPayload, RequestSend, WhenBusy};
use keel_envelope::ids::{ManualClock, SeqIdGen};
use keel_envelope::types::{ApprovalDecision, PermissionLevel, PermissionMode, StopReason, Usage};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, SequenceChecker};
use keel_kernel::model::{
    FinishReason, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{EventStream, Kernel, SessionHandle, SessionOptions};
use keel_tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
use tokio_util::sync::CancellationToken;

/// One scripted model turn.
#[derive(Debug, Clone, Default)]
struct Turn {
    text: Vec<&'static str>,
    calls: Vec<(&'static str, serde_json::Value)>,
    delay: Option<Duration>,
    fail: bool,
}

fn say(text: &'static str) -> Turn {
    Turn {
        text: vec![text],
        ..Turn::default()
    }
}

fn call(name: &'static str, args: serde_json::Value) -> Turn {
    Turn {
        calls: vec![(name, args)],
        ..Turn::default()
    }
}

#[derive(Debug, Default)]
struct TestModel {
    turns: Mutex<VecDeque<Turn>>,
    seen: Mutex<Vec<ModelRequest>>,
    window: Option<u64>,
}

impl TestModel {
    fn new(turns: Vec<Turn>) -> Arc<Self> {
        Arc::new(Self {
            turns: Mutex::new(turns.into()),
            seen: Mutex::new(Vec::new()),
            window: None,
        })
    }
    fn push(&self, turns: Vec<Turn>) {
        self.turns.lock().unwrap().extend(turns);
    }
}

impl Model for TestModel {
    fn id(&self) -> String {
        "test:model".into()
    }
    fn context_window(&self) -> u64 {
        self.window.unwrap_or(100_000)
    }
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.seen.lock().unwrap().push(request);
        let turn = self
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| say("done"));
        Box::pin(stream::unfold(
            Some((turn, 0usize, cancel)),
            |state| async move {
                let (turn, step, cancel) = state?;
                if step == 0 {
                    if let Some(d) = turn.delay {
                        tokio::select! {
                            _ = tokio::time::sleep(d) => {}
                            _ = cancel.cancelled() => return None,
                        }
                    }
                    if turn.fail {
                        let e = ErrorPayload::new(ErrorCode::ModelError, "provider exploded");
                        return Some((Err(keel_kernel::model::ModelError(e)), None));
                    }
                }
                let texts = turn.text.len();
                let calls = turn.calls.len();
                let item = if step < texts {
                    ModelEvent::TextDelta(turn.text[step].to_owned())
                } else if step < texts + calls {
                    let (name, args) = &turn.calls[step - texts];
                    ModelEvent::ToolCall(ToolCallRequest {
                        id: format!("call_{step}"),
                        name: (*name).to_owned(),
                        arguments: args.clone(),
                    })
                } else if step == texts + calls {
                    ModelEvent::Usage(Usage {
                        input_tokens: 10,
                        output_tokens: 5,
                        cached_input_tokens: 0,
                    })
                } else if step == texts + calls + 1 {
                    ModelEvent::Finished(if calls > 0 {
                        FinishReason::ToolUse
                    } else {
                        FinishReason::EndTurn
                    })
                } else {
                    return None;
                };
                Some((Ok(item), Some((turn, step + 1, cancel))))
            },
        ))
    }
}

/// A tool that records its calls; `sleep_ms` makes it wait (cancellably).
#[derive(Debug)]
struct TestTool {
    spec: ToolSpec,
    calls: Mutex<Vec<serde_json::Value>>,
}

fn tool(name: &str, level: PermissionLevel, plan: PlanBehavior) -> Arc<TestTool> {
    Arc::new(TestTool {
        spec: ToolSpec::custom(
            name,
            format!("test tool {name}"),
            serde_json::json!({"type": "object"}),
            level,
            plan,
            if level == PermissionLevel::Read {
                ApprovalRequirement::Never
            } else {
                ApprovalRequirement::Always
            },
        ),
        calls: Mutex::new(Vec::new()),
    })
}

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(
        &self,
        args: serde_json::Value,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        self.calls.lock().unwrap().push(args.clone());
        if let Some(ms) = args.get("sleep_ms").and_then(|v| v.as_u64()) {
            (ctx.progress)(keel_tools::ProgressStream::Stdout, "working\n".into());
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancel.cancelled() => {
                    return Err(ErrorPayload::new(ErrorCode::Interrupted, "cancelled"));
                }
            }
        }
        Ok(serde_json::json!({"ok": true, "echo": args}))
    }
}

struct Fixture {
    kernel: Kernel,
    model: Arc<TestModel>,
    reader: Arc<TestTool>,
    writer: Arc<TestTool>,
    _dir: tempfile::TempDir,
    store: tempfile::TempDir,
}

fn fixture(turns: Vec<Turn>, timeout: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    fixture_in(turns, timeout, dir, store)
}

fn fixture_in(
    turns: Vec<Turn>,
    timeout: Duration,
    dir: tempfile::TempDir,
    store: tempfile::TempDir,
) -> Fixture {
    let model = TestModel::new(turns);
    let reader = tool("peek", PermissionLevel::Read, PlanBehavior::Allowed);
    let writer = tool("poke", PermissionLevel::Write, PlanBehavior::Denied);
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model.clone())
        .store_dir(store.path())
        .clock(Arc::new(ManualClock::new(1_775_600_000_000, 1)))
        .ids(Arc::new(SeqIdGen::default()))
        .approval_timeout(timeout)
        .builtin_tools(false)
        .tool(reader.clone())
        .tool(writer.clone())
        .build()
        .unwrap();
    Fixture {
        kernel,
        model,
        reader,
        writer,
        _dir: dir,
        store,
    }
}

async fn start(f: &Fixture) -> (SessionHandle, EventStream) {
    f.kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: Some("t".into()),
        })
        .await
        .unwrap()
}

/// Reads envelopes until one of type `ty` arrives; returns all read (inclusive).
async fn until(events: &mut EventStream, ty: &str) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(600), events.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {ty}; got {:?}", types(&out)))
            .expect("stream ended");
        let done = env.type_name() == ty;
        out.push(env);
        if done {
            return out;
        }
    }
}

fn types(envs: &[Envelope]) -> Vec<String> {
    envs.iter().map(|e| e.type_name().to_owned()).collect()
}

fn check_sequences(envs: &[Envelope]) {
    let mut checker = SequenceChecker::new();
    for e in envs {
        checker
            .check(e)
            .unwrap_or_else(|gap| panic!("sequence gap {gap:?} in {:?}", types(envs)));
    }
}

#[tokio::test]
async fn a_plain_answer_streams_and_completes() {
    let f = fixture(
        vec![Turn {
            text: vec!["Hel", "lo"],
            ..Turn::default()
        }],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("hi").await.unwrap();
    let mut all = until(&mut events, "session.completed").await;
    assert_eq!(all[0].type_name(), "session.started");
    let req: Vec<Envelope> = all.drain(1..).collect();
    assert_eq!(
        types(&req),
        [
            "request.accepted",
            "turn.started",
            "assistant.delta",
            "assistant.delta",
            "usage.updated",
            "turn.completed",
            "assistant.final",
            "session.completed"
        ]
    );
    assert!(req.iter().all(|e| e.request_id == rid));
    check_sequences(&req);
    let Event::SessionCompleted(c) = &req[7].event else {
        panic!("{:?}", req[7]);
    };
    assert_eq!(c.stop_reason, StopReason::EndTurn);
    assert_eq!(c.final_text.as_deref(), Some("Hello"));
    assert_eq!(c.telemetry.turns, 1);
    assert_eq!(c.telemetry.input_tokens, 10);
    // The last turn carries the request's telemetry, the same as the terminal event's.
    let Event::TurnCompleted(t) = &req[5].event else {
        panic!("{:?}", req[5]);
    };
    assert_eq!(t.index, 1);
    assert_eq!(t.stop_reason, keel_envelope::types::TurnStopReason::EndTurn);
    assert_eq!(t.tool_calls, 0);
    assert_eq!(t.usage.input_tokens, 10);
    assert_eq!(t.telemetry, Some(c.telemetry));
}

#[tokio::test]
async fn read_tools_run_without_approval_and_results_reach_the_model() {
    let f = fixture(
        vec![
            call("peek", serde_json::json!({"path": "a"})),
            say("read it"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("look").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let t = types(&all);
    assert!(t.contains(&"tool.call.started".to_owned()));
    assert!(t.contains(&"tool.call.completed".to_owned()));
    assert!(!t.contains(&"approval.requested".to_owned()));
    assert_eq!(f.reader.calls.lock().unwrap().len(), 1);
    let seen = f.model.seen.lock().unwrap();
    let last = seen.last().unwrap();
    let tool_msg = last
        .messages
        .iter()
        .find_map(|m| match m {
            keel_kernel::model::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(
        tool_msg.0.contains("\"ok\":true") && !tool_msg.1,
        "{tool_msg:?}"
    );
}

fn approval_id(envs: &[Envelope]) -> String {
    envs.iter()
        .find_map(|e| match &e.event {
            Event::ApprovalRequested(a) => Some(a.approval_id.clone()),
            _ => None,
        })
        .expect("approval.requested")
}

#[tokio::test]
async fn an_approved_write_runs_and_the_grant_answers_the_command() {
    let f = fixture(
        vec![call("poke", serde_json::json!({"x": 1})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("change it").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    assert!(
        f.writer.calls.lock().unwrap().is_empty(),
        "must not run before approval"
    );
    let appr = approval_id(&before);
    let answer_rid = s
        .respond_approval(&appr, ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let granted = after
        .iter()
        .find(|e| e.type_name() == "approval.granted")
        .unwrap();
    assert_eq!(
        granted.request_id, rid,
        "the grant belongs to the running request"
    );
    assert_eq!(
        granted.reply_to(),
        Some(answer_rid.as_str()),
        "and answers the command"
    );
    let t = types(&after);
    let g = t.iter().position(|x| x == "approval.granted").unwrap();
    let st = t.iter().position(|x| x == "tool.call.started").unwrap();
    assert!(g < st, "granted before the tool starts: {t:?}");
    assert_eq!(f.writer.calls.lock().unwrap().len(), 1);
    let mut req: Vec<Envelope> = before
        .into_iter()
        .chain(after)
        .filter(|e| e.request_id == rid)
        .collect();
    req.sort_by_key(|e| e.sequence);
    check_sequences(&req);
    // Answering again is APPROVAL_NOT_FOUND, never a hang.
    let again = s.respond_approval(&appr, ApprovalDecision::AllowOnce).await;
    assert_eq!(again.unwrap_err().code, ErrorCode::ApprovalNotFound);
}

#[tokio::test]
async fn a_denied_call_is_skipped_and_the_loop_goes_on() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("understood")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("change it").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    s.respond_approval(&approval_id(&before), ApprovalDecision::Deny)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let t = types(&after);
    assert!(
        t.contains(&"approval.denied".to_owned()) && t.contains(&"tool.call.skipped".to_owned()),
        "{t:?}"
    );
    assert!(!t.contains(&"tool.call.started".to_owned()));
    assert!(f.writer.calls.lock().unwrap().is_empty());
    let skipped = after.iter().find_map(|e| match &e.event {
        Event::ToolCallSkipped(s) => Some(s.error.code),
        _ => None,
    });
    assert_eq!(skipped, Some(ErrorCode::ToolPermissionDenied));
    assert!(t.contains(&"assistant.final".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_approval_expires_and_counts_as_deny() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("fine")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("change it").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let t = types(&all);
    let exp = all
        .iter()
        .find_map(|e| match &e.event {
            Event::ApprovalExpired(x) => Some(x.reason.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(exp, "timeout");
    assert!(t.contains(&"tool.call.skipped".to_owned()));
    assert!(f.writer.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn allow_for_session_is_remembered_by_key() {
    let f = fixture(
        vec![
            call("poke", serde_json::json!({"x": 1})),
            call("poke", serde_json::json!({"x": 1})),
            say("twice"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("twice").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    s.respond_approval(&approval_id(&before), ApprovalDecision::AllowSession)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    assert_eq!(
        types(&after)
            .iter()
            .filter(|t| *t == "approval.requested")
            .count(),
        0
    );
    assert_eq!(f.writer.calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn allow_always_reports_the_rule_to_the_host() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("k")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("go").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    s.respond_approval(&approval_id(&before), ApprovalDecision::AllowAlwaysProject)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let rules = after
        .iter()
        .find_map(|e| match &e.event {
            Event::SessionRulesUpdated(r) => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(rules.source, "approval");
    assert_eq!(rules.rules.always_allow_project, vec!["poke".to_owned()]);
    assert_eq!(
        s.state().rules.always_allow_project,
        vec!["poke".to_owned()]
    );
}

#[tokio::test]
async fn interrupting_a_model_stream_keeps_the_session_usable() {
    let f = fixture(
        vec![Turn {
            text: vec!["never"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        }],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("slow").await.unwrap();
    until(&mut events, "request.accepted").await;
    let irid = s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    let last = got.last().unwrap();
    assert_eq!(last.request_id, rid);
    assert_eq!(last.reply_to(), Some(irid.as_str()));
    match &last.event {
        Event::SessionInterrupted(i) => {
            assert!(i.was_running);
            assert_eq!(i.interrupted_request_id.as_deref(), Some(rid.as_str()));
        }
        other => panic!("{other:?}"),
    }
    f.model.push(vec![say("back")]);
    s.send("again").await.unwrap();
    let next = until(&mut events, "session.completed").await;
    assert!(types(&next).contains(&"assistant.final".to_owned()));
}

#[tokio::test]
async fn interrupting_during_an_approval_releases_it() {
    let f = fixture(
        vec![call("poke", serde_json::json!({}))],
        Duration::from_secs(600),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("go").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    let appr = approval_id(&before);
    s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    let t = types(&got);
    let e = t
        .iter()
        .position(|x| x == "approval.expired")
        .expect("expired");
    assert!(e < t.len() - 1);
    let expired = got
        .iter()
        .find_map(|e| match &e.event {
            Event::ApprovalExpired(x) => Some((
                x.approval_id.clone(),
                x.reason.clone(),
                e.request_id.clone(),
            )),
            _ => None,
        })
        .unwrap();
    assert_eq!(expired, (appr.clone(), "interrupted".into(), rid));
    let late = s.respond_approval(&appr, ApprovalDecision::AllowOnce).await;
    assert_eq!(late.unwrap_err().code, ErrorCode::ApprovalNotFound);
    assert!(f.writer.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn interrupting_a_running_tool_cancels_it() {
    let f = fixture(
        vec![call("peek", serde_json::json!({"sleep_ms": 3_600_000}))],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("go").await.unwrap();
    until(&mut events, "tool.call.progress").await;
    s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    assert!(!types(&got).contains(&"tool.call.completed".to_owned()));
}

#[tokio::test]
async fn interrupting_an_idle_session_is_a_noop_with_an_answer() {
    let f = fixture(vec![], Duration::from_secs(60));
    let (s, mut events) = start(&f).await;
    until(&mut events, "session.started").await;
    let irid = s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    let env = got.last().unwrap();
    assert_eq!(env.request_id, irid);
    assert_eq!(env.sequence, 1);
    match &env.event {
        Event::SessionInterrupted(i) => {
            assert!(!i.was_running && i.interrupted_request_id.is_none())
        }
        other => panic!("{other:?}"),
    }
    // Twice is the same.
    let irid2 = s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    assert_eq!(got.last().unwrap().request_id, irid2);
}

#[tokio::test]
async fn busy_sessions_queue_steer_reject_and_cancel() {
    let f = fixture(
        vec![
            Turn {
                text: vec!["first"],
                delay: Some(Duration::from_millis(300)),
                ..Turn::default()
            },
            say("second"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let r1 = s.send("one").await.unwrap();
    until(&mut events, "request.accepted").await;
    let send = |m: &str, w: WhenBusy| RequestSend {
        message: m.into(),
        images: None,
        when_busy: Some(w),
        patch_preview: None,
    };
    let rejected = s.send_with(send("no", WhenBusy::Reject)).await;
    assert_eq!(rejected.unwrap_err().code, ErrorCode::SessionBusy);
    let steer_rid = s
        .send_with(send("also this", WhenBusy::Steer))
        .await
        .unwrap();
    let q2 = s.send_with(send("two", WhenBusy::Queue)).await.unwrap();
    let q3 = s.send_with(send("three", WhenBusy::Queue)).await.unwrap();
    let cancel_rid = s
        .command(CommandPayload::RequestCancelQueued(
            keel_envelope::commands::CancelQueued {
                queued_request_id: q3.clone(),
            },
        ))
        .await
        .unwrap();
    let first = until(&mut events, "session.completed").await;
    let steered = first
        .iter()
        .find(|e| e.type_name() == "request.steered")
        .unwrap();
    assert_eq!(steered.request_id, r1);
    assert_eq!(steered.reply_to(), Some(steer_rid.as_str()));
    let queued = first
        .iter()
        .find(|e| e.type_name() == "request.queued" && e.request_id == q2)
        .unwrap();
    assert!(matches!(&queued.event, Event::RequestQueued(q) if q.position == 1));
    let cancelled = first
        .iter()
        .find(|e| e.type_name() == "request.cancelled")
        .unwrap();
    assert_eq!(cancelled.request_id, q3);
    assert_eq!(cancelled.reply_to(), Some(cancel_rid.as_str()));
    let rejected_env = first
        .iter()
        .find(|e| e.type_name() == "request.rejected")
        .unwrap();
    assert!(
        matches!(&rejected_env.event, Event::RequestRejected(e) if e.code == ErrorCode::SessionBusy)
    );
    // The queued request runs after the first.
    let second = until(&mut events, "session.completed").await;
    let acc = second
        .iter()
        .find(|e| e.type_name() == "request.accepted")
        .unwrap();
    assert_eq!(acc.request_id, q2);
    assert!(matches!(&acc.event, Event::RequestAccepted(a) if a.from_queue));
    assert_eq!(acc.sequence, 2, "request.queued was 1");
    // The steered text reached the model in the first request.
    let steered_seen = f.model.seen.lock().unwrap().iter().any(|r| {
        r.messages.iter().any(
            |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text == "also this"),
        )
    });
    assert!(steered_seen);
    let cancel_again = s
        .command(CommandPayload::RequestCancelQueued(
            keel_envelope::commands::CancelQueued {
                queued_request_id: q3,
            },
        ))
        .await;
    assert_eq!(
        cancel_again.unwrap_err().code,
        ErrorCode::QueuedRequestNotFound
    );
}

#[tokio::test]
async fn plan_mode_refuses_writes_at_the_gate_then_runs_the_approved_plan() {
    let f = fixture(
        vec![
            call("poke", serde_json::json!({})),
            call("peek", serde_json::json!({})),
            call(
                "propose_plan",
                serde_json::json!({"summary": "do it", "steps": [{"id": "s1", "title": "poke"}]}),
            ),
            call(
                "update_plan",
                serde_json::json!({"steps": [{"id": "s1", "status": "in_progress"}]}),
            ),
            call("poke", serde_json::json!({})),
            call(
                "update_plan",
                serde_json::json!({"steps": [{"id": "s1", "status": "completed"}]}),
            ),
            say("finished"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.set_mode(PermissionMode::Plan).await.unwrap();
    s.send("please poke").await.unwrap();
    let before = until(&mut events, "plan.approval_required").await;
    let skipped = before
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolCallSkipped(x) => Some(x.error.code),
            _ => None,
        })
        .unwrap();
    assert_eq!(skipped, ErrorCode::PlanApprovalRequired);
    assert!(
        !types(&before).contains(&"approval.requested".to_owned()),
        "no approval is even asked"
    );
    assert!(f.writer.calls.lock().unwrap().is_empty());
    assert_eq!(
        f.reader.calls.lock().unwrap().len(),
        1,
        "reads run in plan mode"
    );
    let plan_id = before
        .iter()
        .find_map(|e| match &e.event {
            Event::PlanApprovalRequired(p) => Some(p.plan_id.clone()),
            _ => None,
        })
        .unwrap();
    // Approve into auto mode so the write runs without another approval.
    let arid = s
        .approve_plan(&plan_id, Some(PermissionMode::Auto))
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let approved = after
        .iter()
        .find(|e| e.type_name() == "plan.approved")
        .unwrap();
    assert_eq!(approved.reply_to(), Some(arid.as_str()));
    assert_eq!(f.writer.calls.lock().unwrap().len(), 1);
    let statuses: Vec<String> = after
        .iter()
        .filter_map(|e| match &e.event {
            Event::PlanUpdated(p) => Some(format!("{:?}", p.steps[0].status)),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, ["InProgress", "Completed"]);
    assert_eq!(s.state().session.permission_mode, PermissionMode::Auto);
    let again = s.approve_plan(&plan_id, None).await;
    assert_eq!(again.unwrap_err().code, ErrorCode::PlanNotFound);
}

#[tokio::test]
async fn a_rejected_plan_keeps_plan_mode_and_feeds_back() {
    let f = fixture(
        vec![
            call(
                "propose_plan",
                serde_json::json!({"steps": [{"title": "x"}]}),
            ),
            say("will revise"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.set_mode(PermissionMode::Plan).await.unwrap();
    s.send("plan").await.unwrap();
    let before = until(&mut events, "plan.approval_required").await;
    let plan_id = before
        .iter()
        .find_map(|e| match &e.event {
            Event::PlanApprovalRequired(p) => Some(p.plan_id.clone()),
            _ => None,
        })
        .unwrap();
    s.reject_plan(&plan_id, Some("smaller steps".into()))
        .await
        .unwrap();
    until(&mut events, "session.completed").await;
    assert_eq!(s.state().session.permission_mode, PermissionMode::Plan);
    let seen = f.model.seen.lock().unwrap();
    assert!(seen.last().unwrap().messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::Tool { content, .. } if content.contains("smaller steps"))
    ));
}

#[tokio::test]
async fn ask_user_waits_for_the_answer() {
    let f = fixture(
        vec![
            call(
                "ask_user",
                serde_json::json!({"question": "which?", "candidates": ["a", "b"]}),
            ),
            say("b it is"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("help").await.unwrap();
    let before = until(&mut events, "ask.requested").await;
    let ask = before
        .iter()
        .find_map(|e| match &e.event {
            Event::AskRequested(a) => Some(a.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(ask.candidates, ["a", "b"]);
    s.answer_ask(&ask.ask_id, "b").await.unwrap();
    until(&mut events, "session.completed").await;
    let answered = f.model.seen.lock().unwrap().last().unwrap().messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::Tool { content, .. } if content.contains("answered: b")),
    );
    assert!(answered);
    let again = s.answer_ask(&ask.ask_id, "b").await;
    assert_eq!(again.unwrap_err().code, ErrorCode::AskNotFound);
}

#[tokio::test]
async fn a_model_failure_is_an_error_then_completion() {
    let f = fixture(
        vec![Turn {
            fail: true,
            ..Turn::default()
        }],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("x").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::Error(x) if x.code == ErrorCode::ModelError)));
    assert!(
        matches!(&all.last().unwrap().event, Event::SessionCompleted(c) if c.stop_reason == StopReason::Error)
    );
}

#[tokio::test]
async fn unknown_tools_and_sessions_get_stable_codes() {
    let f = fixture(
        vec![call("nope", serde_json::json!({})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("x").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::ToolCallSkipped(x) if x.error.code == ErrorCode::ToolNotRegistered)));
    let mut any = f.kernel.subscribe();
    let cmd = Command::new(
        "req_x",
        Some("sess_missing".into()),
        CommandPayload::SessionState(keel_envelope::commands::SessionStateCmd {}),
    );
    let err = f.kernel.execute(cmd).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    let env = any.recv().await.unwrap();
    assert_eq!(
        (env.request_id.as_str(), env.session_id.as_deref()),
        ("req_x", Some("sess_missing"))
    );
    assert!(matches!(&env.event, Event::Error(e) if e.code == ErrorCode::SessionNotFound));
}

#[tokio::test]
async fn max_turns_ends_the_request_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(
        (0..10)
            .map(|_| call("peek", serde_json::json!({})))
            .collect(),
    );
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model)
        .memory_store()
        .max_turns(3)
        .builtin_tools(false)
        .tool(tool("peek", PermissionLevel::Read, PlanBehavior::Allowed))
        .build()
        .unwrap();
    let (s, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: None,
        })
        .await
        .unwrap();
    s.send("loop").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::MaxTurnsExceeded)));
    assert!(
        matches!(&all.last().unwrap().event, Event::SessionCompleted(c) if c.stop_reason == StopReason::MaxTurns && c.telemetry.turns == 3)
    );
}

#[tokio::test]
async fn resume_after_restart_restores_history_and_replays_from_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(
        vec![say("first answer")],
        Duration::from_secs(60),
        dir,
        store,
    );
    let (s, mut events) = start(&f).await;
    s.set_mode(PermissionMode::AutoEdit).await.unwrap();
    s.send("remember me").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    let cursor_env = all
        .iter()
        .find(|e| e.type_name() == "request.accepted")
        .unwrap()
        .clone();
    f.kernel.shutdown("test").await;
    drop(f.kernel);
    let log = std::fs::read_to_string(store_path.join("sessions").join(&sid).join("events.jsonl"))
        .unwrap();
    let logged: Vec<Envelope> = log
        .lines()
        .map(|l| keel_envelope::codec::decode_envelope(l.as_bytes()).unwrap())
        .collect();
    assert_eq!(logged.last().unwrap().type_name(), "session.closed");

    // A fresh kernel over the same store.
    let model = TestModel::new(vec![say("second answer")]);
    let kernel = Kernel::builder()
        .workspace(&ws)
        .model(model.clone())
        .store_dir(&store_path)
        .builtin_tools(false)
        .build()
        .unwrap();
    let (s2, mut ev2) = kernel
        .resume_session(
            &sid,
            Some(keel_envelope::types::Cursor {
                request_id: cursor_env.request_id.clone(),
                sequence: cursor_env.sequence,
            }),
        )
        .await
        .unwrap();
    let resumed = ev2.recv().await.unwrap();
    let Event::SessionResumed(r) = &resumed.event else {
        panic!("{resumed:?}")
    };
    assert_eq!(r.session.permission_mode, PermissionMode::AutoEdit);
    assert_eq!(r.message_count, 2);
    // Replay: exactly the events after the cursor in the old log.
    let expected: Vec<String> = logged
        .iter()
        .skip_while(|e| e.event_id != cursor_env.event_id)
        .skip(1)
        .map(|e| e.event_id.clone())
        .collect();
    assert_eq!(r.replayed as usize, expected.len());
    let mut replayed = Vec::new();
    for _ in 0..expected.len() {
        replayed.push(ev2.recv().await.unwrap());
    }
    assert_eq!(
        replayed
            .iter()
            .map(|e| e.event_id.clone())
            .collect::<Vec<_>>(),
        expected
    );
    assert!(replayed
        .iter()
        .all(|e| e.meta.as_ref().and_then(|m| m.replay) == Some(true)));
    s2.send("and now?").await.unwrap();
    until(&mut ev2, "session.completed").await;
    let seen = model.seen.lock().unwrap();
    assert!(seen[0].messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text == "remember me")
    ));
}

#[tokio::test]
async fn a_torn_log_tail_is_dropped_and_nothing_before_it_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(vec![say("answer")], Duration::from_secs(60), dir, store);
    let (s, mut events) = start(&f).await;
    s.send("hello").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    f.kernel.shutdown("test").await;
    let log = store_path.join("sessions").join(&sid).join("events.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    let last_line = String::from_utf8(bytes.clone())
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let last = keel_envelope::codec::decode_envelope(last_line.as_bytes()).unwrap();
    assert!(all.iter().any(|e| e.type_name() == "session.completed"));
    let lines_before = bytes.iter().filter(|b| **b == b'\n').count();
    bytes.extend_from_slice(br#"{"version":"1.0","sessionId":"#);
    std::fs::write(&log, &bytes).unwrap();
    let kernel = Kernel::builder()
        .workspace(&ws)
        .model(TestModel::new(vec![]))
        .store_dir(&store_path)
        .builtin_tools(false)
        .build()
        .unwrap();
    let (_s2, mut ev2) = kernel.resume_session(&sid, None).await.unwrap();
    let warn = ev2.recv().await.unwrap();
    assert!(
        matches!(&warn.event, Event::Warning(w) if w.code == ErrorCode::SessionPersistenceFailed)
    );
    let resumed = ev2.recv().await.unwrap();
    let Event::SessionResumed(r) = &resumed.event else {
        panic!()
    };
    let cursor = r.last_cursor.clone().unwrap();
    assert_eq!(
        (cursor.request_id.as_str(), cursor.sequence),
        (last.request_id.as_str(), last.sequence)
    );
    kernel.shutdown("test").await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'));
    assert!(
        text.lines().count() > lines_before,
        "appending goes on after the cut"
    );
    for line in text.lines() {
        keel_envelope::codec::decode_envelope(line.as_bytes()).unwrap();
    }
}

#[tokio::test]
async fn session_list_and_state_answer_on_the_commands_own_stream() {
    let f = fixture(vec![], Duration::from_secs(60));
    let (s, _events) = start(&f).await;
    let mut all = f.kernel.subscribe();
    f.kernel
        .execute(Command::new(
            "req_list",
            None,
            CommandPayload::SessionList(keel_envelope::commands::SessionListCmd {}),
        ))
        .await
        .unwrap();
    let env = all.recv().await.unwrap();
    assert_eq!((env.request_id.as_str(), env.sequence), ("req_list", 1));
    let Event::SessionList(list) = &env.event else {
        panic!()
    };
    assert!(list.sessions.iter().any(|i| i.session_id == s.id()));
    let state = s.state();
    assert_eq!(state.session.title.as_deref(), Some("t"));
    let _ = f.store.path();
}

#[tokio::test]
async fn a_request_cut_off_by_a_dead_process_ends_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(vec![], Duration::from_secs(60), dir, store);
    let (s, mut events) = start(&f).await;
    let sid = s.id().to_owned();
    let rid = s.send("hello").await.unwrap();
    until(&mut events, "session.completed").await;
    // Simulate a process that died mid-request: drop the terminal events of the log.
    let log = store_path.join("sessions").join(&sid).join("events.jsonl");
    f.kernel.shutdown("test").await;
    let text = std::fs::read_to_string(&log).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .take_while(|l| !l.contains("\"assistant.final\""))
        .collect();
    let last_seq = keel_envelope::codec::decode_envelope(kept.last().unwrap().as_bytes())
        .unwrap()
        .sequence;
    std::fs::write(&log, kept.join("\n") + "\n").unwrap();
    let kernel = Kernel::builder()
        .workspace(&ws)
        .model(TestModel::new(vec![]))
        .store_dir(&store_path)
        .builtin_tools(false)
        .build()
        .unwrap();
    let (_s2, mut ev2) = kernel.resume_session(&sid, None).await.unwrap();
    let resumed = ev2.recv().await.unwrap();
    assert_eq!(resumed.type_name(), "session.resumed");
    let ended = ev2.recv().await.unwrap();
    assert_eq!(ended.request_id, rid);
    assert_eq!(
        ended.sequence,
        last_seq + 1,
        "the stream goes on without a gap"
    );
    assert!(matches!(&ended.event, Event::SessionInterrupted(i) if i.reason == "restart"));
}

#[derive(Debug)]
struct Boom(ToolSpec);

#[async_trait]
impl Tool for Boom {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(
        &self,
        _args: serde_json::Value,
        _ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        panic!("tool bug")
    }
}

#[tokio::test]
async fn a_panic_inside_a_request_is_reported_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(vec![call("boom", serde_json::json!({})), say("after")]);
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model)
        .memory_store()
        .builtin_tools(false)
        .tool(Arc::new(Boom(ToolSpec::custom(
            "boom",
            "panics",
            serde_json::json!({"type": "object"}),
            PermissionLevel::Read,
            PlanBehavior::Allowed,
            ApprovalRequirement::Never,
        ))))
        .build()
        .unwrap();
    let (s, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: None,
        })
        .await
        .unwrap();
    s.send("x").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::Error(x) if x.code == ErrorCode::RuntimeInternalError)));
    assert!(
        matches!(&all.last().unwrap().event, Event::SessionCompleted(c) if c.stop_reason == StopReason::Error)
    );
    s.send("again").await.unwrap();
    let next = until(&mut events, "session.completed").await;
    assert!(types(&next).contains(&"assistant.final".to_owned()));
}

fn small_window_kernel(
    turns: Vec<Turn>,
    window: u64,
    dir: &std::path::Path,
) -> (Kernel, Arc<TestModel>) {
    let model = Arc::new(TestModel {
        turns: Mutex::new(turns.into()),
        seen: Mutex::new(Vec::new()),
        window: Some(window),
    });
    let kernel = Kernel::builder()
        .workspace(dir)
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    (kernel, model)
}

fn opts() -> SessionOptions {
    SessionOptions {
        workspace_path: None,
        permission_mode: None,
        model: None,
        title: None,
    }
}

#[tokio::test]
async fn context_past_the_threshold_is_compacted_through_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(4000);
    // Window 1000 tokens: four 1000-token user turns pass the 80 % threshold.
    let (kernel, model) = small_window_kernel(
        vec![
            say("a1"),
            say("a2"),
            say("a3"),
            say("SUMMARY: earlier turns"),
            say("a4"),
        ],
        1000,
        dir.path(),
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    for _ in 0..3 {
        s.send(long.clone()).await.unwrap();
        until(&mut events, "session.completed").await;
    }
    s.send("short question").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let t = types(&all);
    let started = t
        .iter()
        .position(|x| x == "context.compaction.started")
        .expect("compaction");
    let done = t
        .iter()
        .position(|x| x == "context.compaction.completed")
        .unwrap();
    assert!(started < done);
    let Event::CompactionCompleted(c) = &all[done].event else {
        panic!()
    };
    assert!(c.tokens_after < c.tokens_before && !c.fallback, "{c:?}");
    // The next model call sees the summary instead of the old turns.
    let seen = model.seen.lock().unwrap();
    let last = seen.last().unwrap();
    assert!(last.messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text.contains("SUMMARY: earlier turns"))
    ));
    assert!(last.messages.len() < 8);
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_truncation_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, _model) = small_window_kernel(
        vec![
            say("a1"),
            say("a2"),
            say("a3"),
            Turn {
                fail: true,
                ..Turn::default()
            },
        ],
        100_000,
        dir.path(),
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    for m in ["one", "two", "three"] {
        s.send(m).await.unwrap();
        until(&mut events, "session.completed").await;
    }
    // By hand, while idle: answered on the command's own stream.
    let crid = s
        .command(CommandPayload::ContextCompact(
            keel_envelope::commands::ContextCompact {},
        ))
        .await
        .unwrap();
    let all = until(&mut events, "context.compaction.completed").await;
    assert!(all.iter().all(|e| e.request_id == crid));
    assert!(all.iter().any(
        |e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::ContextCompactionFailed)
    ));
    let Event::CompactionCompleted(c) = &all.last().unwrap().event else {
        panic!()
    };
    assert!(c.fallback && c.tokens_after < c.tokens_before, "{c:?}");
    assert_eq!(c.messages_compacted, 2);
    assert_eq!(
        s.state().message_count,
        4,
        "the two oldest messages were dropped"
    );
}

#[tokio::test]
async fn project_instructions_join_the_system_prompt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "Always answer in haiku.").unwrap();
    let (kernel, model) = small_window_kernel(vec![say("ok")], 100_000, dir.path());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("hi").await.unwrap();
    until(&mut events, "session.completed").await;
    let system = model.seen.lock().unwrap()[0].system.clone();
    assert!(system.contains("Always answer in haiku."), "{system}");
}

/// A second model under another id, for switching.
#[derive(Debug)]
struct Named(&'static str, Arc<TestModel>);

impl Model for Named {
    fn id(&self) -> String {
        self.0.to_owned()
    }
    fn context_window(&self) -> u64 {
        self.1.context_window()
    }
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.1.stream(request, cancel)
    }
}

#[tokio::test]
async fn switching_model_while_idle_keeps_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let first = TestModel::new(vec![
        say("first answer"),
        Turn {
            text: vec!["slow"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        },
    ]);
    let second = TestModel::new(vec![say("second answer")]);
    let (a, b) = (first.clone(), second.clone());
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(Arc::new(Named("test:first", a.clone())))
        .model_factory(Arc::new(
            move |id: &str| -> Result<Arc<dyn Model>, ErrorPayload> {
                match id {
                    "test:first" => Ok(Arc::new(Named("test:first", a.clone()))),
                    "test:second" => Ok(Arc::new(Named("test:second", b.clone()))),
                    other => Err(ErrorPayload::new(
                        ErrorCode::ModelUnavailable,
                        format!("no model {other}"),
                    )),
                }
            },
        ))
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("remember the number 42").await.unwrap();
    until(&mut events, "session.completed").await;

    let rid = s.set_model("test:second").await.unwrap();
    let changed = until(&mut events, "session.model_changed").await;
    let env = changed.last().unwrap();
    assert_eq!(env.request_id, rid);
    assert!(
        matches!(&env.event, Event::SessionModelChanged(m) if m.model == "test:second" && m.previous_model == "test:first")
    );
    let unknown = s.set_model("test:nope").await.unwrap_err();
    assert_eq!(unknown.code, ErrorCode::ModelUnavailable);

    s.send("what was the number?").await.unwrap();
    until(&mut events, "session.completed").await;
    let seen = second.seen.lock().unwrap().last().unwrap().messages.clone();
    assert!(seen.iter().any(
        |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text == "remember the number 42")
    ));
    assert!(seen.iter().any(
        |m| matches!(m, keel_kernel::model::Message::Assistant { text, .. } if text == "first answer")
    ));

    // Busy: refused, nothing changes.
    s.set_model("test:first").await.unwrap();
    until(&mut events, "session.model_changed").await;
    s.send("slow one").await.unwrap();
    until(&mut events, "request.accepted").await;
    let busy = s.set_model("test:second").await.unwrap_err();
    assert_eq!(busy.code, ErrorCode::SessionBusy);
    assert_eq!(s.state().session.model, "test:first");
    s.interrupt().await.unwrap();
    until(&mut events, "session.interrupted").await;
    assert!(!first.seen.lock().unwrap().is_empty());
}
