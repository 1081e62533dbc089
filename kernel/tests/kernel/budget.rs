//! Budgets through the kernel's API: each limit reached (with its `budget.warning`
//! first), per request and per session, the output cap, and bad limits.
//!
//! The test model reports 10 input and 5 output tokens per call.

use std::collections::{BTreeMap, HashMap};

use keel_envelope::budget::{BudgetLimit, BudgetLimits, BudgetScope, BudgetStatus, SessionBudget};
use keel_envelope::commands::SessionStart;
use keel_kernel::config::{BudgetConfig, ModelPrice};
use keel_kernel::KernelConfig;
use serde_json::json;

use super::*;

type Built = (Kernel, Arc<TestModel>, Arc<TestTool>, tempfile::TempDir);

fn kernel_with(turns: Vec<Turn>, config: KernelConfig) -> Built {
    let ws = tempfile::tempdir().unwrap();
    let model = TestModel::new(turns);
    let peek = tool("peek", PermissionLevel::Read, PlanBehavior::Allowed);
    let kernel = Kernel::builder()
        .config(KernelConfig {
            workspace: Some(ws.path().to_owned()),
            ..config
        })
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .tool(peek.clone())
        .tool(tool("poke", PermissionLevel::Read, PlanBehavior::Allowed))
        .build()
        .unwrap();
    (kernel, model, peek, ws)
}

fn peeks(n: usize) -> Vec<Turn> {
    (0..n).map(|_| call("peek", json!({}))).collect()
}

fn budget_warnings(envs: &[Envelope]) -> Vec<BudgetStatus> {
    all_events!(envs, BudgetWarning)
}

/// Checks the end of a request stopped by `limit`: `budget.warning` for it, then the
/// `warning` with `code`, then `session.completed {max_turns, budget}`; returns the
/// budget figure.
fn stopped_by(
    envs: &[Envelope],
    scope: BudgetScope,
    limit: BudgetLimit,
    code: ErrorCode,
) -> BudgetStatus {
    let n = envs.len();
    let Event::SessionCompleted(c) = &envs[n - 1].event else {
        panic!("{:?}", types(envs));
    };
    assert_eq!(c.stop_reason, StopReason::MaxTurns);
    let hit = c
        .budget
        .clone()
        .expect("the limit that stopped the request");
    assert_eq!((&hit.scope, &hit.limit), (&scope, &limit));
    assert!(hit.used >= hit.max, "{hit:?}");
    let Event::Warning(w) = &envs[n - 2].event else {
        panic!("{:?}", types(envs));
    };
    assert_eq!(w.code, code);
    assert_eq!(w.details["limit"], limit.as_str());
    let warned = envs
        .iter()
        .position(
            |e| matches!(&e.event, Event::BudgetWarning(b) if b.scope == scope && b.limit == limit),
        )
        .unwrap_or_else(|| panic!("no budget.warning before the stop: {:?}", types(envs)));
    assert!(warned < n - 2);
    hit
}

#[tokio::test]
async fn max_turns_is_the_request_model_call_budget() {
    let (kernel, model, _, _ws) = kernel_with(
        peeks(10),
        KernelConfig {
            max_turns: 5,
            ..KernelConfig::default()
        },
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("loop").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let hit = stopped_by(
        &all,
        BudgetScope::Request,
        BudgetLimit::ModelCalls,
        ErrorCode::MaxTurnsExceeded,
    );
    assert_eq!((hit.used, hit.max), (5.0, 5.0));
    assert_eq!(model.seen.lock().unwrap().len(), 5);
    // Warned once, at 4 of 5.
    let w = budget_warnings(&all);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].used, 4.0);
    // The last turn carries the telemetry and says why it was the last.
    let last_turn = all
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::TurnCompleted(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap();
    assert!(last_turn.telemetry.is_some());
    let Event::Warning(w) = &all[all.len() - 2].event else {
        unreachable!()
    };
    assert_eq!(w.details["maxTurns"], 5);
}

#[tokio::test]
async fn a_request_budget_of_tokens_stops_before_the_tools_of_the_call_that_passed_it() {
    let (kernel, _, peek, _ws) = kernel_with(peeks(10), KernelConfig::default());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send_with(RequestSend::new("loop").budget(BudgetLimits::new().tokens(40)))
        .await
        .unwrap();
    let all = until(&mut events, "session.completed").await;
    let hit = stopped_by(
        &all,
        BudgetScope::Request,
        BudgetLimit::Tokens,
        ErrorCode::BudgetExceeded,
    );
    assert_eq!((hit.used, hit.max), (45.0, 40.0));
    // Two calls ran their tool; the third call's tool was skipped.
    assert_eq!(peek.calls.lock().unwrap().len(), 2);
    let skipped: Vec<&ErrorPayload> = all
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(s) => Some(&s.error),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].code, ErrorCode::BudgetExceeded);
    check_sequences(&all[1..]);
    // The session goes on: the next request has its own budget.
    s.send("again").await.unwrap();
    let next = until(&mut events, "session.completed").await;
    assert_eq!(
        next.iter()
            .filter(|e| e.type_name() == "turn.started")
            .count(),
        8
    );
}

#[tokio::test]
async fn a_session_budget_spans_requests_and_survives_a_restart() {
    let store = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let build = |turns: Vec<Turn>| {
        Kernel::builder()
            .workspace(ws.path())
            .model(TestModel::new(turns))
            .store_dir(store.path())
            .builtin_tools(false)
            .tool(tool("peek", PermissionLevel::Read, PlanBehavior::Allowed))
            .build()
            .unwrap()
    };
    let kernel = build(vec![call("peek", json!({})), say("one"), say("two")]);
    let (s, mut events) = kernel
        .start_session(
            SessionStart::from(opts())
                .budget(SessionBudget::new().session(BudgetLimits::new().model_calls(3))),
        )
        .await
        .unwrap();
    s.send("first").await.unwrap();
    let first = until(&mut events, "session.completed").await;
    assert!(budget_warnings(&first).is_empty());
    s.send("second").await.unwrap();
    let second = until(&mut events, "session.completed").await;
    let w = budget_warnings(&second);
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].scope.clone(), w[0].used, w[0].max),
        (BudgetScope::Session, 3.0, 3.0)
    );
    // The third request stops before any model call.
    let rid = s.send("third").await.unwrap();
    let third = until(&mut events, "session.completed").await;
    let req: Vec<Envelope> = third.into_iter().filter(|e| e.request_id == rid).collect();
    assert_eq!(
        types(&req),
        ["request.accepted", "warning", "session.completed"]
    );
    let Event::SessionCompleted(c) = &req[2].event else {
        unreachable!()
    };
    assert_eq!(c.stop_reason, StopReason::MaxTurns);
    assert_eq!(c.budget.as_ref().unwrap().scope, BudgetScope::Session);
    assert_eq!(c.telemetry.turns, 0);
    let sid = s.id().to_owned();
    kernel.shutdown("test").await;

    // Another process resumes the session: what it used is still counted.
    let kernel = build(vec![say("four")]);
    let (s, mut events) = kernel.resume_session(&sid, None).await.unwrap();
    let rid = s.send("fourth").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let req: Vec<Envelope> = all.into_iter().filter(|e| e.request_id == rid).collect();
    let Event::SessionCompleted(c) = &req.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(c.budget.as_ref().map(|b| b.used), Some(3.0));
}

#[tokio::test]
async fn a_cost_budget_counts_with_the_model_price() {
    let prices = HashMap::from([(
        "test:model".to_owned(),
        ModelPrice {
            input: 1000.0,
            output: 2000.0,
            cached_input: None,
        },
    )]);
    // Each call costs (10 · 1000 + 5 · 2000) / 1e6 = $0.02.
    let (kernel, model, _, _ws) = kernel_with(
        peeks(10),
        KernelConfig {
            prices,
            budget: BudgetConfig {
                request: BudgetLimits::new().cost_usd(0.045),
                session: BudgetLimits::default(),
            },
            ..KernelConfig::default()
        },
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("spend").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let hit = stopped_by(
        &all,
        BudgetScope::Request,
        BudgetLimit::CostUsd,
        ErrorCode::BudgetExceeded,
    );
    assert!((hit.used - 0.06).abs() < 1e-9, "{hit:?}");
    assert_eq!(model.seen.lock().unwrap().len(), 3);
    let w = budget_warnings(&all);
    assert!((w[0].used - 0.04).abs() < 1e-9, "{w:?}");
}

#[tokio::test]
async fn a_cost_budget_without_a_price_says_so_once() {
    let (kernel, _, _, _ws) = kernel_with(
        vec![call("peek", json!({})), say("ok")],
        KernelConfig {
            budget: BudgetConfig {
                request: BudgetLimits::new().cost_usd(1.0),
                session: BudgetLimits::default(),
            },
            ..KernelConfig::default()
        },
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("spend").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let unknown: Vec<&Envelope> = all
        .iter()
        .filter(|e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::PriceUnknown))
        .collect();
    assert_eq!(unknown.len(), 1);
    let Event::SessionCompleted(c) = &all.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(c.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn calls_per_tool_are_limited_by_name_or_by_star() {
    let mut turns = Vec::new();
    for _ in 0..3 {
        turns.push(call("poke", json!({})));
        turns.push(call("peek", json!({})));
    }
    let (kernel, _, peek, _ws) = kernel_with(turns, KernelConfig::default());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send_with(
        RequestSend::new("go").budget(BudgetLimits::new().tool_calls(BTreeMap::from([
            ("peek".to_owned(), 2),
            ("*".to_owned(), 10),
        ]))),
    )
    .await
    .unwrap();
    let all = until(&mut events, "session.completed").await;
    let hit = stopped_by(
        &all,
        BudgetScope::Request,
        BudgetLimit::ToolCalls,
        ErrorCode::BudgetExceeded,
    );
    assert_eq!(hit.tool_name.as_deref(), Some("peek"));
    assert_eq!((hit.used, hit.max), (2.0, 2.0));
    assert_eq!(peek.calls.lock().unwrap().len(), 2);
    let w = budget_warnings(&all);
    assert!(w
        .iter()
        .any(|w| w.tool_name.as_deref() == Some("peek") && w.used == 2.0));
    // `poke` (3 calls of its 10 under "*") was never close.
    assert!(!w.iter().any(|w| w.tool_name.as_deref() == Some("poke")));
}

#[tokio::test]
async fn the_wall_time_limit_stops_a_running_tool() {
    let (kernel, _, peek, _ws) = kernel_with(
        vec![call("peek", json!({"sleep_ms": 60_000})), say("never")],
        KernelConfig::default(),
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send_with(RequestSend::new("wait").budget(BudgetLimits::new().wall_time_secs(1)))
        .await
        .unwrap();
    let all = until(&mut events, "session.completed").await;
    stopped_by(
        &all,
        BudgetScope::Request,
        BudgetLimit::WallTimeSecs,
        ErrorCode::BudgetExceeded,
    );
    assert_eq!(peek.calls.lock().unwrap().len(), 1);
    let failed = all.iter().find_map(|e| match &e.event {
        Event::ToolCallFailed(f) => Some(f.error.code.clone()),
        _ => None,
    });
    assert_eq!(failed, Some(ErrorCode::Interrupted));
    assert!(!all.iter().any(|e| e.type_name() == "session.interrupted"));
    // The session is usable afterwards.
    s.send("hello").await.unwrap();
    let next = until(&mut events, "session.completed").await;
    let Event::SessionCompleted(c) = &next.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(c.stop_reason, StopReason::EndTurn);
}

#[tokio::test]
async fn a_user_interrupt_still_wins_over_a_wall_time_limit() {
    let (kernel, _, _, _ws) = kernel_with(
        vec![call("peek", json!({"sleep_ms": 60_000}))],
        KernelConfig {
            budget: BudgetConfig {
                request: BudgetLimits::new().wall_time_secs(3600),
                session: BudgetLimits::default(),
            },
            ..KernelConfig::default()
        },
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("wait").await.unwrap();
    until(&mut events, "tool.call.progress").await;
    s.interrupt().await.unwrap();
    let all = until(&mut events, "session.interrupted").await;
    assert!(!all.iter().any(|e| e.type_name() == "session.completed"));
}

#[tokio::test]
async fn the_output_cap_comes_from_the_request_the_session_or_the_configuration() {
    let (kernel, model, _, _ws) = kernel_with(
        vec![say("a"), say("b"), say("c")],
        KernelConfig {
            max_output_tokens: Some(1000),
            ..KernelConfig::default()
        },
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("x").await.unwrap();
    until(&mut events, "session.completed").await;
    s.send_with(RequestSend::new("y").max_output_tokens(200))
        .await
        .unwrap();
    until(&mut events, "session.completed").await;
    let (s2, mut events2) = kernel
        .start_session(SessionStart::from(opts()).max_output_tokens(500))
        .await
        .unwrap();
    s2.send("z").await.unwrap();
    until(&mut events2, "session.completed").await;
    let caps: Vec<Option<u32>> = model
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.max_output_tokens)
        .collect();
    assert_eq!(caps, [Some(1000), Some(200), Some(500)]);

    // Without any setting the provider's default applies (nothing is set here).
    let (kernel, model, _, _ws) = kernel_with(vec![say("a")], KernelConfig::default());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("x").await.unwrap();
    until(&mut events, "session.completed").await;
    assert_eq!(model.seen.lock().unwrap()[0].max_output_tokens, None);
}

#[tokio::test]
async fn bad_limits_are_refused_with_the_field() {
    let (kernel, _, _, _ws) = kernel_with(vec![], KernelConfig::default());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    for (req, field) in [
        (
            RequestSend::new("x").budget(BudgetLimits::new().cost_usd(-1.0)),
            "payload.budget.costUsd",
        ),
        (
            RequestSend::new("x").max_output_tokens(0),
            "payload.maxOutputTokens",
        ),
        (
            RequestSend::new("x")
                .budget(BudgetLimits::new().tool_calls(BTreeMap::from([(" ".to_owned(), 1)]))),
            "payload.budget.toolCalls",
        ),
    ] {
        let err = s.send_with(req).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid);
        assert_eq!(err.details["field"], field);
        let env = until(&mut events, "request.rejected").await;
        assert!(
            matches!(&env.last().unwrap().event, Event::RequestRejected(e) if e.details["field"] == field)
        );
    }
    let err = kernel
        .start_session(
            SessionStart::from(opts())
                .budget(SessionBudget::new().session(BudgetLimits::new().cost_usd(f64::NAN))),
        )
        .await
        .unwrap_err();
    assert_eq!(err.details["field"], "payload.budget.session.costUsd");
    let err = kernel
        .start_session(SessionStart::from(opts()).max_output_tokens(0))
        .await
        .unwrap_err();
    assert_eq!(err.details["field"], "payload.maxOutputTokens");
    // A limit of 0 is no limit.
    let (kernel, _, _, _ws) = kernel_with(
        peeks(3),
        KernelConfig {
            max_turns: 2,
            ..KernelConfig::default()
        },
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send_with(RequestSend::new("x").budget(BudgetLimits::new().model_calls(0)))
        .await
        .unwrap();
    let all = until(&mut events, "session.completed").await;
    let Event::SessionCompleted(c) = &all.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(
        (c.stop_reason.clone(), c.telemetry.turns),
        (StopReason::EndTurn, 4)
    );
}
