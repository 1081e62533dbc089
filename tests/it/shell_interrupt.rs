//! Interrupting a request while `run_shell` runs a command whose child spawned a
//! grandchild: both are gone afterwards, and the session goes on.

use std::sync::Arc;
use std::time::Duration;

use keel_adapters::ScriptedModel;
use keel_envelope::types::PermissionMode;
use keel_envelope::Event;
use keel_kernel::{Kernel, KernelConfig, SessionOptions};
use keel_tools::SandboxConfig;

fn alive(pid: u32) -> bool {
    // A zombie is gone for our purpose; only a running or sleeping process counts.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_kills_the_shell_child_and_grandchild() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    // The child writes its pid, starts a grandchild that writes its pid, and both sleep.
    let command =
        "sh -c 'echo $$ > child.pid; sh -c \"echo \\$\\$ > grandchild.pid; sleep 60\" & sleep 60'";
    let script = serde_json::json!({"turns": [
        {"toolCalls": [{"name": "run_shell", "arguments": {"command": command, "timeoutMs": 120000}}]},
        {"text": "after"}
    ]});
    // Without the sandbox the pids written by the shell are this machine's pids (the
    // sandbox's own pid namespace is covered by the tools' tests).
    let kernel = Kernel::builder()
        .config(KernelConfig {
            sandbox: SandboxConfig::off(),
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .model(Arc::new(ScriptedModel::from_json(script).unwrap()))
        .store_dir(store.path())
        .permission_mode(PermissionMode::Auto)
        .build()
        .unwrap();
    let (session, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: None,
        })
        .await
        .unwrap();
    let rid = session.send("run it").await.unwrap();
    // Wait until both pids are written.
    let read_pid = |name: &str| -> Option<u32> {
        std::fs::read_to_string(ws.path().join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (child, grandchild) = loop {
        if let (Some(c), Some(g)) = (read_pid("child.pid"), read_pid("grandchild.pid")) {
            break (c, g);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the command did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let seen_started = loop {
        let e = events.recv().await.unwrap();
        if e.type_name() == "tool.call.started" {
            break e;
        }
    };
    assert_eq!(seen_started.request_id, rid);
    assert!(
        alive(child) && alive(grandchild),
        "both run before the interrupt"
    );
    let irid = session.interrupt().await.unwrap();
    let interrupted = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let e = events.recv().await.unwrap();
            if let Event::SessionInterrupted(_) = &e.event {
                break e;
            }
            assert_ne!(
                e.type_name(),
                "tool.call.completed",
                "the shell must not complete"
            );
        }
    })
    .await
    .expect("interrupt answered");
    assert_eq!(interrupted.request_id, rid);
    assert_eq!(interrupted.reply_to(), Some(irid.as_str()));
    assert!(!alive(child), "child {child} survived the interrupt");
    assert!(
        !alive(grandchild),
        "grandchild {grandchild} survived the interrupt"
    );
    // The session goes on.
    session.send("again").await.unwrap();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if e.type_name() == "session.completed" {
            break;
        }
    }
    kernel.shutdown("test").await;
}
