//! Golden transcripts: a scenario (scripted model turns, workspace files, host
//! actions) in, the exact envelope stream out, with ids and clock injected.
//!
//! Each `tests/data/golden/<name>.json` scenario has its transcript beside it in
//! `<name>.jsonl`. `KEEL_UPDATE_GENERATED=1 cargo test -p keel --test it golden`
//! rewrites the transcripts; without it a difference fails the test with a diff.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_adapters::ScriptedModel;
use keel_envelope::commands::{CommandPayload, RequestSend, WhenBusy};
use keel_envelope::ids::{ManualClock, SeqIdGen};
use keel_envelope::types::{ApprovalDecision, PermissionMode};
use keel_envelope::{codec, Envelope, Event};
use keel_kernel::{EventStream, Kernel, SessionHandle, SessionOptions};
use serde_json::Value;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden")
}

/// Reads events until one of `ty` arrives (hang guard only).
async fn until(events: &mut EventStream, out: &mut Vec<Envelope>, ty: &str) -> Envelope {
    loop {
        let env = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no {ty} in time; got {:?}",
                    out.iter()
                        .map(|e| e.type_name().to_owned())
                        .collect::<Vec<_>>()
                )
            })
            .expect("stream ended");
        out.push(env.clone());
        if env.type_name() == ty {
            return env;
        }
    }
}

fn decision(s: &str) -> ApprovalDecision {
    serde_json::from_value(Value::String(s.to_owned()))
        .unwrap_or_else(|_| panic!("bad decision {s}"))
}

/// Runs one scenario; returns the transcript lines.
async fn run_scenario(scenario: &Value) -> Vec<String> {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    if let Some(files) = scenario["files"].as_object() {
        for (path, content) in files {
            let p = ws.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content.as_str().unwrap()).unwrap();
        }
    }
    let model = ScriptedModel::from_json(scenario["script"].clone())
        .unwrap()
        .with_id("scripted:golden");
    let mode = scenario["mode"]
        .as_str()
        .and_then(PermissionMode::parse)
        .unwrap_or(PermissionMode::Ask);
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(model))
        .store_dir(store.path())
        .permission_mode(mode)
        .clock(Arc::new(ManualClock::new(1_775_600_000_000, 1)))
        .ids(Arc::new(SeqIdGen::default()))
        .approval_timeout(Duration::from_secs(
            scenario["approvalTimeoutSecs"].as_u64().unwrap_or(60),
        ))
        .build()
        .unwrap();
    let (session, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: Some("golden".into()),
        })
        .await
        .unwrap();
    let mut out = Vec::new();
    until(&mut events, &mut out, "session.started").await;
    for step in scenario["steps"].as_array().unwrap() {
        run_step(&session, &mut events, &mut out, step).await;
    }
    session.close().await.unwrap();
    until(&mut events, &mut out, "session.closed").await;
    let workspace = ws.path().canonicalize().unwrap().display().to_string();
    // Files the scenario expects afterwards.
    if let Some(expect) = scenario["expectFiles"].as_object() {
        for (path, content) in expect {
            let got = std::fs::read_to_string(ws.path().join(path)).ok();
            assert_eq!(
                got.as_deref(),
                content.as_str(),
                "file {path} (null: must not exist)"
            );
        }
    }
    out.iter().map(|e| normalise(e, &workspace)).collect()
}

async fn run_step(
    session: &SessionHandle,
    events: &mut EventStream,
    out: &mut Vec<Envelope>,
    step: &Value,
) {
    let (kind, arg) = step
        .as_object()
        .and_then(|o| o.iter().next())
        .expect("a step is {kind: arg}");
    match kind.as_str() {
        "send" => {
            session.send(arg.as_str().unwrap()).await.unwrap();
        }
        "sendBusy" => {
            let when: WhenBusy = serde_json::from_value(arg["whenBusy"].clone()).unwrap();
            let _ = session
                .send_with(
                    RequestSend::new(arg["message"].as_str().unwrap().to_owned()).when_busy(when),
                )
                .await;
        }
        "waitFor" => {
            until(events, out, arg.as_str().unwrap()).await;
        }
        "approve" => {
            // Answers every approval still waiting, or the next one to arrive.
            let pending = session.state().pending_approval_ids;
            let id = match pending.first() {
                Some(id) => id.clone(),
                // The stream may still hold the request of an approval answered
                // above from the state (not from its event): skip those.
                None => loop {
                    let env = until(events, out, "approval.requested").await;
                    let Event::ApprovalRequested(a) = &env.event else {
                        unreachable!()
                    };
                    if session
                        .state()
                        .pending_approval_ids
                        .contains(&a.approval_id)
                    {
                        break a.approval_id.clone();
                    }
                },
            };
            session
                .respond_approval(&id, decision(arg.as_str().unwrap()))
                .await
                .unwrap();
        }
        "approvePlan" => {
            let env = until(events, out, "plan.approval_required").await;
            let Event::PlanApprovalRequired(p) = &env.event else {
                unreachable!()
            };
            let mode = arg.as_str().and_then(PermissionMode::parse);
            session.approve_plan(&p.plan_id, mode).await.unwrap();
        }
        "rejectPlan" => {
            let env = until(events, out, "plan.approval_required").await;
            let Event::PlanApprovalRequired(p) = &env.event else {
                unreachable!()
            };
            session
                .reject_plan(&p.plan_id, arg.as_str().map(str::to_owned))
                .await
                .unwrap();
        }
        "answer" => {
            let env = until(events, out, "ask.requested").await;
            let Event::AskRequested(a) = &env.event else {
                unreachable!()
            };
            session
                .answer_ask(&a.ask_id, arg.as_str().unwrap())
                .await
                .unwrap();
        }
        "interrupt" => {
            session.interrupt().await.unwrap();
        }
        "setMode" => {
            session
                .set_mode(PermissionMode::parse(arg.as_str().unwrap()).unwrap())
                .await
                .unwrap();
        }
        "cancelQueued" => {
            // Cancels the most recent queued request.
            let queued = session.state().queued_request_ids;
            let id = queued.last().expect("a queued request").clone();
            session
                .command(CommandPayload::RequestCancelQueued(
                    keel_envelope::commands::CancelQueued::new(id),
                ))
                .await
                .unwrap();
        }
        other => panic!("unknown step {other}"),
    }
}

/// Wall-clock measurements and temporary paths vary from run to run; everything
/// else in the transcript is fixed by the injected clock and ids.
fn normalise(env: &Envelope, workspace: &str) -> String {
    let mut v: Value = serde_json::from_slice(&codec::encode_line(env)).unwrap();
    fn walk(v: &mut Value, workspace: &str) {
        match v {
            Value::Object(map) => {
                for (k, val) in map.iter_mut() {
                    if matches!(k.as_str(), "durationMs" | "elapsedMs") && val.is_number() {
                        *val = Value::from(0);
                    } else {
                        walk(val, workspace);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, workspace)),
            Value::String(s) if s.contains(workspace) => *s = s.replace(workspace, "<workspace>"),
            _ => {}
        }
    }
    walk(&mut v, workspace);
    // Keys sorted whatever order `serde_json` maps keep in this build.
    serde_json::to_string(&keel_envelope::generate::sorted(&v)).unwrap()
}

fn check(name: &str) {
    let dir = data_dir();
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap())
            .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let got = rt.block_on(run_scenario(&scenario)).join("\n") + "\n";
    let path = dir.join(format!("{name}.jsonl"));
    if std::env::var_os("KEEL_UPDATE_GENERATED").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if want != got {
        let mut diff = String::new();
        for change in similar_lines(&want, &got) {
            diff.push_str(&change);
        }
        panic!("golden transcript {name} differs:\n{diff}\nregenerate with: KEEL_UPDATE_GENERATED=1 cargo test -p keel --test it golden");
    }
}

/// A small line diff for failure messages.
fn similar_lines(want: &str, got: &str) -> Vec<String> {
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let mut out = Vec::new();
    for i in 0..w.len().max(g.len()) {
        match (w.get(i), g.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => {
                out.push(format!(
                    "line {}:\n- {}\n+ {}\n",
                    i + 1,
                    a.unwrap_or(&""),
                    b.unwrap_or(&"")
                ));
                if out.len() > 5 {
                    break;
                }
            }
        }
    }
    out
}

#[test]
fn golden_smoke() {
    check("smoke");
}

#[test]
fn golden_read_plan_approve_edit_verify() {
    check("read_plan_edit_verify");
}

#[test]
fn golden_deny_and_continue() {
    check("deny_and_continue");
}

#[test]
fn golden_plan_mode_refuses_every_write_and_execute_tool() {
    check("plan_mode_refusals");
}

#[test]
fn golden_plan_rejected_with_feedback() {
    check("plan_rejected");
}

#[test]
fn golden_interrupt_during_model_stream() {
    check("interrupt_model_stream");
}

#[test]
fn golden_interrupt_during_approval() {
    check("interrupt_approval");
}

#[test]
fn golden_interrupt_while_idle() {
    check("interrupt_idle");
}

#[test]
fn golden_queue_steer_cancel() {
    check("queue_steer_cancel");
}

#[test]
fn golden_ask_user() {
    check("ask_user");
}
