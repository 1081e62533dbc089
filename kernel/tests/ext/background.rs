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
            CommandPayload::HarnessStatus(keel_envelope::commands::HarnessStatusCmd::new()),
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
                .ok(CommandPayload::BackgroundGet(BackgroundGetCmd::new(id)))
                .await
                .event
            {
                Event::BackgroundGet(b) => b.task,
                other => panic!("{other:?}"),
            };
            let lines = match h
                .ok(CommandPayload::BackgroundHistory(
                    BackgroundHistoryCmd::new(id),
                ))
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
    // It ended by itself: `background.exited` on the stream of the request that
    // started it (before or after that request's end), logged like every event.
    let stream = h.until(&rid, "background.exited").await;
    check_sequences(&stream);
    let exited: Vec<&Envelope> = stream
        .iter()
        .filter(|e| e.type_name() == "background.exited")
        .collect();
    assert_eq!(exited.len(), 1, "{:?}", types(&stream));
    match &exited[0].event {
        Event::BackgroundExited(b) => {
            assert_eq!(b.task.task_id, ids[1]);
            assert_eq!(
                (b.task.status.clone(), b.task.exit_code),
                (BackgroundStatus::Exited, Some(3))
            );
            assert_eq!(b.task.output_tail, "out");
        }
        other => panic!("{other:?}"),
    }
    let logged = std::fs::read_to_string(
        store
            .path()
            .join("sessions")
            .join(&h.sid)
            .join("events.jsonl"),
    )
    .unwrap();
    assert!(
        logged.contains(&exited[0].event_id),
        "logged before delivery"
    );

    match h
        .ok(CommandPayload::BackgroundStop(BackgroundStopCmd::new(
            ids[0].clone(),
        )))
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
        .ok(CommandPayload::BackgroundList(BackgroundListCmd::new()))
        .await
        .event
    {
        Event::BackgroundList(l) => {
            let st: Vec<BackgroundStatus> = l.tasks.iter().map(|t| t.status.clone()).collect();
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
        CommandPayload::BackgroundGet(BackgroundGetCmd::new("bg_nope")),
        CommandPayload::BackgroundHistory(BackgroundHistoryCmd::new("bg_nope")),
        CommandPayload::BackgroundStop(BackgroundStopCmd::new("bg_nope")),
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
    // Stopped tasks (by `background.stop` or the session closing) did not report an exit.
    h.drain();
    let exits = h
        .log
        .iter()
        .filter(|e| e.type_name() == "background.exited")
        .count();
    assert_eq!(exits, 1);
}

#[tokio::test]
async fn background_output_survives_invalid_utf8_and_long_lines() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    // Invalid UTF-8 on the second line, then a 20,000-byte line, then more lines: the
    // whole output is read (no SIGPIPE), long lines are cut, bad bytes replaced.
    let script = "printf 'one\\n\\377\\376bad\\n'; head -c 20000 /dev/zero | tr '\\0' x; echo; \
                  i=0; while [ $i -lt 300 ]; do echo line$i; i=$((i+1)); done; echo done\n";
    std::fs::write(ws.path().join("gen.sh"), script).unwrap();
    let turns = vec![
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "sh gen.sh", "background": true}),
        ),
        Turn::Say("started"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::Auto),
    )
    .await;
    let (rid, _) = h.run(send("run it", None)).await;
    let evs = h.finish(&rid).await;
    let ids = started_task(&evs);
    assert_eq!(ids.len(), 1, "{:?}", types(&evs));
    let (task, lines) = wait_task(&mut h, &ids[0], |t, _| {
        t.status != BackgroundStatus::Running
    })
    .await;
    assert_eq!(
        (task.status, task.exit_code),
        (BackgroundStatus::Exited, Some(0)),
        "{lines:?}"
    );
    assert_eq!(lines[0], "one");
    assert_eq!(lines[1], "\u{fffd}\u{fffd}bad");
    assert!(
        lines[2].starts_with(&"x".repeat(8192)),
        "{}",
        &lines[2][..20]
    );
    assert!(
        lines[2].ends_with("[line truncated at 8192 bytes; 11808 more dropped]"),
        "{}",
        &lines[2][8000..]
    );
    assert_eq!(lines[3], "line0");
    assert_eq!(lines.last().map(String::as_str), Some("done"));
    assert_eq!(lines.len(), 3 + 300 + 1);
}

#[tokio::test]
async fn background_tasks_stop_at_their_time_limit() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let token = format!("6{}.25", std::process::id());
    let command = format!("echo started; sleep {token} & sleep {token}");
    let turns = vec![
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": command, "background": true, "timeoutMs": 500}),
        ),
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "true", "background": true, "timeoutMs": 3_600_001}),
        ),
        Turn::Say("started"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::Auto),
    )
    .await;
    let (rid, _) = h.run(send("run it", None)).await;
    let evs = h.finish(&rid).await;
    let ids = started_task(&evs);
    assert_eq!(ids.len(), 1, "the second call has a bad time limit");
    let failed: Vec<&ErrorPayload> = evs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFailed(f) => Some(&f.error),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].code, ErrorCode::ToolArgumentsInvalid);
    assert_eq!(failed[0].details["field"], "timeoutMs");
    let (task, lines) = wait_task(&mut h, &ids[0], |t, _| {
        t.status != BackgroundStatus::Running
    })
    .await;
    assert_eq!(task.status, BackgroundStatus::Stopped);
    assert_eq!(lines.first().map(String::as_str), Some("started"));
    // Nobody stopped it: the time limit is reported like an exit, without a code.
    let stream = h.until(&rid, "background.exited").await;
    let exited = stream
        .iter()
        .find(|e| e.type_name() == "background.exited")
        .unwrap();
    match &exited.event {
        Event::BackgroundExited(b) => {
            assert_eq!(b.task.task_id, ids[0]);
            assert_eq!(
                (b.task.status.clone(), b.task.exit_code),
                (BackgroundStatus::Stopped, None)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("timed out after 500 ms")),
        "{lines:?}"
    );
    // Nothing it started survives (a SIGKILL'd process may take a moment to go).
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let p = e.path();
                let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains(&token)
                    && !stat
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
            })
            .count()
    };
    for _ in 0..500 {
        if alive() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(alive(), 0, "a process of the timed-out task survived");
}
