//! Harness status and background tasks.

use super::*;

#[tokio::test]
async fn harness_status_aggregates_open_sessions() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;
    let rid = h.kernel.new_request_id();
    h.kernel
        .execute(Command::new(
            rid.clone(),
            None,
            CommandPayload::HarnessStatus(keel_envelope::commands::HarnessStatusCmd {}),
        ))
        .await
        .unwrap();
    let evs: Vec<Envelope> = h
        .drain()
        .into_iter()
        .filter(|e| e.request_id == rid)
        .collect();
    assert_eq!(types(&evs), ["harness.status"]);
    match &evs[0].event {
        Event::HarnessStatus(s) => {
            assert_eq!(s.sessions.len(), 1);
            assert_eq!(s.sessions[0].session_id, h.sid);
            assert!(s.sub_agents.is_empty() && s.background_tasks.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// Polls a background task until `done` holds (the process runs on its own).
async fn wait_task(
    h: &mut H,
    id: &str,
    done: impl Fn(&keel_envelope::ext::BackgroundTask, &[String]) -> bool,
) -> (keel_envelope::ext::BackgroundTask, Vec<String>) {
    tokio::time::timeout(Duration::from_secs(600), async {
        loop {
            let task = match h
                .ok(CommandPayload::BackgroundGet(BackgroundGetCmd {
                    task_id: id.into(),
                }))
                .await
                .event
            {
                Event::BackgroundGet(b) => b.task,
                other => panic!("{other:?}"),
            };
            let lines = match h
                .ok(CommandPayload::BackgroundHistory(BackgroundHistoryCmd {
                    task_id: id.into(),
                }))
                .await
                .event
            {
                Event::BackgroundHistory(b) => b.lines,
                other => panic!("{other:?}"),
            };
            if done(&task, &lines) {
                return (task, lines);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the background task never got there")
}

fn started_task(evs: &[Envelope]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallCompleted(c) if c.tool_name == "run_shell" => c
                .result
                .get("taskId")
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn background_tasks_run_report_and_stop() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "echo started; sleep 600", "background": true}),
        ),
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "echo out; exit 3", "background": true}),
        ),
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "sleep 600", "background": true}),
        ),
        Turn::Say("started them"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::Auto),
    )
    .await;
    let (rid, _) = h.run(send("run things", None)).await;
    let evs = h.finish(&rid).await;
    let ids = started_task(&evs);
    assert_eq!(ids.len(), 3, "{:?}", types(&evs));
    let results = tool_results(&h.model, 3);
    assert!(
        results[0].0.contains("Started background task"),
        "{results:?}"
    );

    let (task, lines) = wait_task(&mut h, &ids[0], |_, l| l.iter().any(|x| x == "started")).await;
    assert_eq!(task.status, BackgroundStatus::Running);
    assert_eq!(lines, ["started"]);
    let (task, _) = wait_task(&mut h, &ids[1], |t, _| {
        t.status != BackgroundStatus::Running
    })
    .await;
    assert_eq!(
        (task.status, task.exit_code),
        (BackgroundStatus::Exited, Some(3))
    );
    assert_eq!(task.output_tail, "out");

    match h
        .ok(CommandPayload::BackgroundStop(BackgroundStopCmd {
            task_id: ids[0].clone(),
        }))
        .await
        .event
    {
        Event::BackgroundStopped(b) => {
            assert_eq!(b.task.status, BackgroundStatus::Stopped);
            assert!(b.task.ended_at.is_some());
        }
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::BackgroundList(BackgroundListCmd {}))
        .await
        .event
    {
        Event::BackgroundList(l) => {
            let st: Vec<BackgroundStatus> = l.tasks.iter().map(|t| t.status).collect();
            assert_eq!(
                st,
                [
                    BackgroundStatus::Stopped,
                    BackgroundStatus::Exited,
                    BackgroundStatus::Running
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    for payload in [
        CommandPayload::BackgroundGet(BackgroundGetCmd {
            task_id: "bg_nope".into(),
        }),
        CommandPayload::BackgroundHistory(BackgroundHistoryCmd {
            task_id: "bg_nope".into(),
        }),
        CommandPayload::BackgroundStop(BackgroundStopCmd {
            task_id: "bg_nope".into(),
        }),
    ] {
        assert_eq!(h.err(payload).await.code, ErrorCode::BackgroundTaskNotFound);
    }

    // Closing the session stops what still runs.
    h.kernel.close_session(&h.sid).await.unwrap();
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            store
                .path()
                .join("sessions")
                .join(&h.sid)
                .join("state.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let statuses: Vec<&str> = state["extensions"]["background"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["stopped", "exited", "stopped"]);
}
