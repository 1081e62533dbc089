//! Review mode and patches.

use super::*;

#[tokio::test]
async fn review_mode_follows_its_state_machine() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;

    // Nothing to submit to or resolve yet.
    assert_eq!(
        h.err(submit(Some("hi"), None)).await.code,
        ErrorCode::ReviewNotFound
    );
    assert_eq!(
        h.err(resolve(ReviewDecision::Approved)).await.code,
        ErrorCode::ReviewNotFound
    );
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd::new()))
        .await
        .event
    {
        Event::ReviewState(s) => assert!(s.review.is_none() && !s.blocking),
        other => panic!("{other:?}"),
    }

    let (rid, evs) = h.run(enter(false)).await;
    assert_eq!(types(&evs), ["review.requested"]);
    assert_eq!(evs[0].request_id, rid);
    let review_id = match &evs[0].event {
        Event::ReviewRequested(r) => {
            assert_eq!(r.review.status, ReviewStatus::Pending);
            assert_eq!(r.review.checklist[0].id, "k1");
            r.review.review_id.clone()
        }
        other => panic!("{other:?}"),
    };
    // One review at a time.
    assert_eq!(h.err(enter(true)).await.code, ErrorCode::RequestInvalid);
    // Bad submits change nothing.
    assert_eq!(
        h.err(submit(None, None)).await.code,
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        h.err(submit(None, Some(("k9", true)))).await.code,
        ErrorCode::RequestInvalid
    );
    match h
        .ok(submit(Some("looks fine"), Some(("k1", true))))
        .await
        .event
    {
        Event::ReviewUpdated(r) => {
            assert_eq!(r.review.comments.len(), 1);
            assert!(r.review.checklist[0].done);
        }
        other => panic!("{other:?}"),
    }
    match h.ok(resolve(ReviewDecision::Rejected)).await.event {
        Event::ReviewResolved(r) => {
            assert_eq!(r.review.status, ReviewStatus::Rejected);
            assert_eq!(r.review.decision, Some(ReviewStatus::Rejected));
        }
        other => panic!("{other:?}"),
    }
    // A resolved review stays resolved.
    assert_eq!(
        h.err(resolve(ReviewDecision::Approved)).await.code,
        ErrorCode::ReviewNotFound
    );
    assert_eq!(
        h.err(submit(Some("late"), None)).await.code,
        ErrorCode::ReviewNotFound
    );
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd::new()))
        .await
        .event
    {
        Event::ReviewState(s) => {
            let r = s.review.unwrap();
            assert_eq!(
                (r.review_id.as_str(), r.status),
                (review_id.as_str(), ReviewStatus::Rejected)
            );
        }
        other => panic!("{other:?}"),
    }
    // Entering again starts a new review.
    match h.ok(enter(false)).await.event {
        Event::ReviewRequested(r) => assert_ne!(r.review.review_id, review_id),
        other => panic!("{other:?}"),
    }
    check_sequences(&h.log);
}

#[tokio::test]
async fn a_blocking_review_refuses_requests_before_the_model_is_called() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(
        ws.path(),
        store.path(),
        vec![Turn::Say("hello")],
        false,
        None,
    )
    .await;
    h.ok(enter(true)).await;
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd::new()))
        .await
        .event
    {
        Event::ReviewState(s) => assert!(s.blocking),
        other => panic!("{other:?}"),
    }
    let (rid, evs) = h.run(send("go", None)).await;
    assert_eq!(types(&evs), ["request.rejected"]);
    assert_eq!(evs[0].request_id, rid);
    match &evs[0].event {
        Event::RequestRejected(e) => assert_eq!(e.code, ErrorCode::ReviewBlocking),
        other => panic!("{other:?}"),
    }
    tokio::task::yield_now().await;
    assert_eq!(
        h.model.calls(),
        0,
        "a blocked request never reaches the model"
    );
    assert!(h
        .kernel
        .session_handle(&h.sid)
        .unwrap()
        .state()
        .active_request_id
        .is_none());

    // A non-blocking review does not refuse; resolving the blocking one unblocks.
    h.ok(resolve(ReviewDecision::Approved)).await;
    let (rid, _) = h.run(send("go", None)).await;
    let evs = h.finish(&rid).await;
    assert_eq!(evs[0].type_name(), "request.accepted");
    assert_eq!(h.model.calls(), 1);
    check_sequences(&h.log);
}

#[tokio::test]
async fn host_patches_are_applied_atomically_or_refused() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(ws.path().join("old.txt"), "bye\n").unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;

    let env = h
        .ok(propose(&[
            ("a.txt", Some("one\n2\nthree\n")),
            ("dir/new.txt", Some("fresh\n")),
            ("old.txt", None),
        ]))
        .await;
    let id = patch_id(&env);
    match &env.event {
        Event::PatchProposed(p) => {
            let ops: Vec<PatchOp> = p.patch.files.iter().map(|f| f.op.clone()).collect();
            assert_eq!(ops, [PatchOp::Modify, PatchOp::Create, PatchOp::Delete]);
            assert_eq!(
                (p.patch.files[0].stats.added, p.patch.files[0].stats.removed),
                (2, 1)
            );
            assert!(p.patch.files[0].diff.contains("+three"));
            assert_eq!(p.patch.stats.file_count, 3);
            assert_eq!(p.patch.status, PatchStatus::Pending);
            assert_eq!(p.patch.origin, "host");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.file("a.txt").as_deref(),
        Some("one\ntwo\n"),
        "nothing written yet"
    );

    // A file changed since the proposal: the whole patch is refused and stays pending.
    std::fs::write(ws.path().join("old.txt"), "edited\n").unwrap();
    let e = h
        .err(CommandPayload::PatchApply(PatchApply::new(id.clone())))
        .await;
    assert_eq!(e.code, ErrorCode::PatchConflict);
    assert_eq!(h.file("a.txt").as_deref(), Some("one\ntwo\n"));
    assert!(h.file("dir/new.txt").is_none());
    std::fs::write(ws.path().join("old.txt"), "bye\n").unwrap();
    match h
        .ok(CommandPayload::PatchApply(PatchApply::new(id.clone())))
        .await
        .event
    {
        Event::PatchApplied(p) => assert_eq!(p.patch.status, PatchStatus::Applied),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.file("a.txt").as_deref(), Some("one\n2\nthree\n"));
    assert_eq!(h.file("dir/new.txt").as_deref(), Some("fresh\n"));
    assert!(h.file("old.txt").is_none());
    // Resolved patches are gone from the pending set.
    let e = h
        .err(CommandPayload::PatchApply(PatchApply::new(id.clone())))
        .await;
    assert_eq!(e.code, ErrorCode::PatchNotFound);
    let e = h
        .err(CommandPayload::PatchReject(PatchReject::new("patch_nope")))
        .await;
    assert_eq!(e.code, ErrorCode::PatchNotFound);

    // Bad proposals.
    assert_eq!(
        h.err(propose(&[("../escape.txt", Some("x"))])).await.code,
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(
        h.err(propose(&["/etc/passwd"].map(|p| (p, Some("x")))))
            .await
            .code,
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(h.err(propose(&[])).await.code, ErrorCode::RequestInvalid);
    assert_eq!(
        h.err(propose(&[("ghost.txt", None)])).await.code,
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        h.err(propose(&[("a.txt", Some("x")), ("./a.txt", Some("y"))]))
            .await
            .code,
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        h.err(propose(&[("dir", Some("x"))])).await.code,
        ErrorCode::RequestInvalid
    );
    assert!(!ws.path().parent().unwrap().join("escape.txt").exists());

    // Reject, then the summary.
    let id2 = patch_id(&h.ok(propose(&[("b.txt", Some("b\n"))])).await);
    let id3 = patch_id(&h.ok(propose(&[("c.txt", Some("c\nc\n"))])).await);
    match h
        .ok(CommandPayload::PatchReject(
            PatchReject::new(id2.clone()).reason(Some("not now".into())),
        ))
        .await
        .event
    {
        Event::PatchRejected(p) => {
            assert_eq!(p.patch.status, PatchStatus::Rejected);
            assert_eq!(p.patch.reason.as_deref(), Some("not now"));
        }
        other => panic!("{other:?}"),
    }
    assert!(h.file("b.txt").is_none());
    match h
        .ok(CommandPayload::PatchSummary(PatchSummaryCmd::new()))
        .await
        .event
    {
        Event::PatchSummary(s) => {
            let pending: Vec<&str> = s.pending.iter().map(|p| p.patch_id.as_str()).collect();
            let history: Vec<&str> = s.history.iter().map(|p| p.patch_id.as_str()).collect();
            assert_eq!(pending, [id3.as_str()]);
            assert_eq!(history, [id.as_str(), id2.as_str()]);
            assert_eq!((s.totals.file_count, s.totals.added), (1, 2));
        }
        other => panic!("{other:?}"),
    }
    check_sequences(&h.log);
}

#[tokio::test]
async fn patch_preview_turns_edits_into_pending_patches() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("lib.rs"), "fn a() {}\n").unwrap();
    let turns = vec![
        Turn::Call(
            "edit_file",
            serde_json::json!({"path": "lib.rs", "edits": [{"oldText": "fn a() {}", "newText": "fn b() {}"}]}),
        ),
        Turn::Call(
            "write_file",
            serde_json::json!({"path": "new.rs", "content": "x\n"}),
        ),
        Turn::Call(
            "write_file",
            serde_json::json!({"path": "../out.rs", "content": "x\n"}),
        ),
        Turn::Say("proposed"),
        Turn::Call(
            "write_file",
            serde_json::json!({"path": "direct.rs", "content": "d\n"}),
        ),
        Turn::Say("written"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::AutoEdit),
    )
    .await;
    let (rid, _) = h.run(send("change it", Some(true))).await;
    let evs = h.finish(&rid).await;
    let t = types(&evs);
    assert_eq!(
        t.iter().filter(|t| *t == "patch.proposed").count(),
        2,
        "{t:?}"
    );
    assert!(!t.contains(&"approval.requested".to_owned()));
    // Nothing was written.
    assert_eq!(h.file("lib.rs").as_deref(), Some("fn a() {}\n"));
    assert!(h.file("new.rs").is_none());
    let patches: Vec<_> = evs
        .iter()
        .filter_map(|e| match &e.event {
            Event::PatchProposed(p) => Some(p.patch.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(patches[0].files[0].op, PatchOp::Modify);
    assert_eq!(patches[0].files[0].after.as_deref(), Some("fn b() {}\n"));
    assert_eq!(patches[0].origin, "tool");
    assert_eq!(patches[0].request_id.as_deref(), Some(rid.as_str()));
    assert_eq!(patches[1].files[0].op, PatchOp::Create);
    // The model is told the change is pending; the escape fails like the tool would.
    {
        let seen = h.model.seen.lock().unwrap();
        let tool_results: Vec<(String, bool)> = seen
            .last()
            .unwrap()
            .messages
            .iter()
            .filter_map(|m| match m {
                keel_kernel::model::Message::Tool {
                    content, is_error, ..
                } => Some((content.clone(), *is_error)),
                _ => None,
            })
            .collect();
        assert!(tool_results[0].0.contains("pending review") && !tool_results[0].1);
        assert!(tool_results[2].0.contains("PATH_OUTSIDE_WORKSPACE") && tool_results[2].1);
    }
    assert!(!ws.path().parent().unwrap().join("out.rs").exists());
    check_sequences(&evs);

    // The host applies one.
    h.ok(CommandPayload::PatchApply(PatchApply::new(
        patches[0].patch_id.clone(),
    )))
    .await;
    assert_eq!(h.file("lib.rs").as_deref(), Some("fn b() {}\n"));

    // Without the flag (and the kernel default off) edits are written as before.
    let (rid, _) = h.run(send("write", None)).await;
    let evs = h.finish(&rid).await;
    assert!(!types(&evs).contains(&"patch.proposed".to_owned()));
    assert_eq!(h.file("direct.rs").as_deref(), Some("d\n"));
}
