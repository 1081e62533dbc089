//! Every role against every command type over a real WebSocket, driven by the role
//! table itself; and tokens bound to one session, which see nothing of the others.

use super::remote::*;
use super::*;
use keel_envelope::CommandType;
use keel_serve::roles::{requirement, Role};
use serde_json::json;

/// A well-formed payload of every command type (the tests walk `CommandType::ALL`, so a
/// new command type fails them until it has one here).
fn payload(t: CommandType) -> serde_json::Value {
    use CommandType as C;
    let none = "sess_none";
    match t {
        C::RuntimeShutdown
        | C::SessionStart
        | C::SessionClose
        | C::SessionList
        | C::SessionState
        | C::CheckpointList
        | C::RequestInterrupt
        | C::ContextCompact
        | C::ReviewStatus
        | C::PatchSummary
        | C::TaskGraphAdvance
        | C::TaskGraphState
        | C::SubAgentList
        | C::HarnessStatus
        | C::BackgroundList
        | C::McpList
        | C::SkillsList
        | C::CommandsList => json!({}),
        C::SessionResume | C::SessionWatch | C::SessionUnwatch | C::SessionDelete => {
            json!({"sessionId": none})
        }
        C::SessionRewind => json!({"toRequestId": "req_none"}),
        C::SessionFork => json!({}),
        C::RequestSide => json!({"message": "what now?"}),
        C::SessionSetMode => json!({"mode": "plan"}),
        C::SessionSetModel => json!({"model": "test:model"}),
        C::SessionSetRules => json!({
            "alwaysAllowGlobal": [], "alwaysAllowProject": [],
            "alwaysDenyGlobal": [], "alwaysDenyProject": []
        }),
        C::SessionLoadHistory => json!({"messages": []}),
        C::SessionSetTitle => json!({"title": "t"}),
        C::RequestSend => json!({"message": "hello"}),
        C::RequestCancelQueued => json!({"queuedRequestId": "req_none"}),
        C::ApprovalRespond => json!({"approvalId": "appr_none", "decision": "allow_once"}),
        C::PlanApprove | C::PlanReject => json!({"planId": "plan_none"}),
        C::AskRespond => json!({"askId": "ask_none", "answer": "yes"}),
        C::ReviewEnter => json!({"reason": "r", "blocking": false}),
        C::ReviewSubmit => json!({"comment": "c"}),
        C::ReviewResolve => json!({"decision": "approved"}),
        C::PatchPropose => json!({"files": [{"path": "a.txt", "content": "a"}]}),
        C::PatchApply | C::PatchReject => json!({"patchId": "patch_none"}),
        C::TaskGraphCreate => json!({"nodes": []}),
        C::TaskGraphAddNode => json!({"node": {"id": "n", "title": "n", "dependsOn": []}}),
        C::TaskGraphUpdateNode => json!({"nodeId": "n", "updates": {"title": "m"}}),
        C::SubAgentGet => json!({"subAgentId": "sub_none"}),
        C::BackgroundGet | C::BackgroundHistory | C::BackgroundStop => json!({"taskId": "bg_none"}),
        C::SessionSetHostTools => json!({"tools": []}),
        C::HostToolRespond => json!({"toolCallId": "call_none", "result": 1}),
        C::WorktreeList => json!({}),
        C::WorktreeRemove => json!({"sessionId": "sess_none"}),
        other => panic!("no payload for {other:?}: give the new command type one here"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_against_every_command_type_follows_the_role_table() {
    let r = remote(vec![], ConnectionOptions::default(), |_| {}).await;
    let mut checked = 0;
    for role in Role::ALL {
        let (token, _) = r.token(role, None);
        let mut ws = open_with(&r.url, &token).await;
        for &t in CommandType::ALL {
            if t == CommandType::RuntimeShutdown {
                continue;
            }
            let session = t.needs_session().then_some("sess_none");
            let answer = ws.ask(t.as_str(), session, payload(t)).await;
            let needed = requirement(t).role;
            let what = format!("{} with {role}", t.as_str());
            if role.allows(needed) {
                // The kernel answered: whatever it said, it was not the role check.
                assert_eq!(
                    answer.source,
                    keel_envelope::Source::Runtime,
                    "{what}: {answer:?}"
                );
                if let Event::Error(e) | Event::RequestRejected(e) = &answer.event {
                    assert_ne!(e.code, ErrorCode::RoleForbidden, "{what}");
                }
            } else {
                let e = error_of(&answer);
                assert_eq!(e.code, ErrorCode::RoleForbidden, "{what}");
                assert_eq!(e.details["required"], needed.as_str(), "{what}");
                assert_eq!(e.details["role"], role.as_str(), "{what}");
                assert_eq!(e.details["command"], t.as_str(), "{what}");
                assert_eq!(answer.source, keel_envelope::Source::Bridge, "{what}");
                assert_eq!(answer.session_id.as_deref(), session, "{what}");
                // As the kernel answers a command it cannot carry out.
                let want = if t == CommandType::RequestSend {
                    "request.rejected"
                } else {
                    "error"
                };
                assert_eq!(answer.type_name(), want, "{what}");
                assert!(e.message.contains(needed.as_str()), "{what}: {}", e.message);
            }
            checked += 1;
        }
        // `runtime.shutdown` ends this connection only, for every role.
        let rid = ws.command("runtime.shutdown", None, json!({})).await;
        let (rest, _) = ws.rest().await;
        let last = rest.last().unwrap();
        assert_eq!(stopped_reason(last), Some("disconnect"), "{role}");
        assert_eq!(last.request_id, rid);
        checked += 1;
    }
    assert_eq!(checked, 3 * CommandType::ALL.len());
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bound_to_one_session_sees_nothing_of_the_others() {
    let _load = cpu_load();
    let r = remote(
        vec![say(5), say(5), say(5), say(5)],
        ConnectionOptions::default(),
        |_| {},
    )
    .await;
    let (admin, _) = r.token(Role::Controller, None);
    let mut owner = open_with(&r.url, &admin).await;
    let a = owner
        .ask("session.start", None, json!({"title": "mine"}))
        .await
        .session_id
        .unwrap();
    let b = owner
        .ask("session.start", None, json!({"title": "theirs"}))
        .await
        .session_id
        .unwrap();

    let (bound, _) = r.token(Role::Controller, Some(&a));
    let mut ws = open_with(&r.url, &bound).await;
    let list = ws.ask("session.list", None, json!({})).await;
    let Event::SessionList(l) = &list.event else {
        panic!("{list:?}")
    };
    assert_eq!(
        l.sessions
            .iter()
            .map(|s| s.session_id.as_str())
            .collect::<Vec<_>>(),
        vec![a.as_str()]
    );
    let status = ws.ask("harness.status", None, json!({})).await;
    let Event::HarnessStatus(h) = &status.event else {
        panic!("{status:?}")
    };
    assert!(h.sessions.iter().all(|s| s.session_id == a) && !h.sessions.is_empty());

    // Another session is not found, whether it exists or not, and nothing is made.
    for (ty, sid, p) in [
        ("session.watch", None, json!({"sessionId": b})),
        ("session.resume", None, json!({"sessionId": b})),
        ("session.delete", None, json!({"sessionId": b})),
        ("session.state", Some(b.as_str()), json!({})),
        ("request.send", Some(b.as_str()), json!({"message": "x"})),
        (
            "approval.respond",
            Some(b.as_str()),
            json!({"approvalId": "appr_1", "decision": "deny"}),
        ),
        ("session.state", Some("sess_never"), json!({})),
    ] {
        let e = ws.ask(ty, sid, p).await;
        let err = error_of(&e);
        assert_eq!(err.code, ErrorCode::SessionNotFound, "{ty}");
        assert_eq!(reason_of(err), "session_bound", "{ty}");
    }
    for (ty, sid) in [("session.start", None), ("session.fork", Some(a.as_str()))] {
        let e = ws.ask(ty, sid, json!({})).await;
        let err = error_of(&e);
        assert_eq!(err.code, ErrorCode::RoleForbidden, "{ty}");
        assert_eq!(reason_of(err), "session_bound", "{ty}");
    }
    // Its own session works, and while both sessions run it gets A's events alone.
    let w = ws.ask("session.watch", None, json!({"sessionId": a})).await;
    assert_eq!(w.type_name(), "session.watched");
    let ra = owner
        .command("request.send", Some(&a), json!({"message": "a"}))
        .await;
    let rb = owner
        .command("request.send", Some(&b), json!({"message": "b"}))
        .await;
    owner
        .until("both", |e| {
            e.request_id == rb && e.type_name() == "session.completed"
        })
        .await;
    let own = ws
        .command("request.send", Some(&a), json!({"message": "again"}))
        .await;
    let got = ws.until("own request", completed(&own)).await;
    assert!(
        got.iter().any(|e| e.request_id == ra),
        "A's first request reached it"
    );
    for e in &got {
        assert!(
            e.session_id.is_none() || e.session_id.as_deref() == Some(a.as_str()),
            "{} of {:?} reached a token bound to {a}",
            e.type_name(),
            e.session_id
        );
        assert_ne!(e.request_id, rb);
    }
    r.stop().await;
}
