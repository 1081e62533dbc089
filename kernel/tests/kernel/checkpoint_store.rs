//! The kernel and the workspace's checkpoint store: the request's checkpoint is taken
//! beside its first model call (with the store locked, as a garbage collection holds
//! it, the model is still asked, and a call that changes files waits for the
//! checkpoint), and the kernel prunes by itself what is past the age limit.

use std::path::{Path, PathBuf};
use std::time::Instant;

use keel_envelope::commands::{CheckpointListCmd, SessionRewind};
use keel_kernel::KernelConfig;
use nix::fcntl::{Flock, FlockArg};
use serde_json::json;

use super::*;

fn kernel(ws: &Path, store: &Path, model: Arc<TestModel>, config: KernelConfig) -> Kernel {
    Kernel::builder()
        .config(KernelConfig {
            permission_mode: PermissionMode::Auto,
            sandbox: keel_tools::SandboxConfig::off(),
            ..config
        })
        .workspace(ws)
        .model(model)
        .store_dir(store)
        .build()
        .unwrap()
}

/// The one workspace store under `store/checkpoints`.
fn workspace_store(store: &Path) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(store.join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.pop().unwrap()
}

/// Waits (a bound, not a measure) until `done` holds.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_is_asked_before_the_checkpoint_and_a_write_waits_for_it() {
    let _busy = Busy::start(2);
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "a").unwrap();
    let model = TestModel::new(vec![
        say("hello"),
        call(
            "write_file",
            json!({"path": "new.txt", "content": "written\n"}),
        ),
        say("wrote"),
    ]);
    let k = kernel(
        ws.path(),
        store.path(),
        model.clone(),
        KernelConfig::default(),
    );
    let (h, mut ev) = k.start_session(opts()).await.unwrap();
    h.send("hi").await.unwrap();
    until(&mut ev, "session.completed").await;

    // The store locked as a garbage collection locks it: no checkpoint can be taken.
    let lock = std::fs::File::open(workspace_store(store.path()).join("lock")).unwrap();
    let held = Flock::lock(lock, FlockArg::LockExclusive).unwrap();
    let r2 = h.send("write").await.unwrap();
    // The model is asked all the same.
    eventually("the model asked while the store is locked", || {
        model.seen.lock().unwrap().len() == 2
    })
    .await;
    drop(held);
    let seen = until(&mut ev, "session.completed").await;
    assert!(
        !seen.iter().any(|e| e.type_name() == "warning"),
        "{:?}",
        types(&seen)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new.txt")).unwrap(),
        "written\n"
    );
    // The request's checkpoint holds the workspace as it was before the write: the
    // write waited for it.
    h.command(CommandPayload::CheckpointList(CheckpointListCmd::new()))
        .await
        .unwrap();
    let list = until(&mut ev, "checkpoint.list").await;
    let Some(Event::CheckpointList(l)) = list.last().map(|e| e.event.clone()) else {
        panic!("{list:?}")
    };
    let ids: Vec<&str> = l
        .checkpoints
        .iter()
        .map(|c| c.checkpoint_id.as_str())
        .collect();
    assert!(ids.contains(&r2.as_str()), "{ids:?}");
    h.command(CommandPayload::SessionRewind(
        SessionRewind::new()
            .to_request_id(r2.clone())
            .files(true)
            .conversation(false),
    ))
    .await
    .unwrap();
    until(&mut ev, "session.rewound").await;
    assert!(!ws.path().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "a"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kernel_prunes_closed_sessions_past_the_age_limit() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    // A first kernel leaves a closed session with a checkpoint.
    let first = kernel(
        ws.path(),
        store.path(),
        TestModel::new(vec![say("one")]),
        KernelConfig::default(),
    );
    let (h, mut ev) = first.start_session(opts()).await.unwrap();
    let old = h.id().to_owned();
    h.send("hi").await.unwrap();
    until(&mut ev, "session.completed").await;
    first.shutdown("done").await;
    let sessions = workspace_store(store.path()).join("sessions");
    assert!(sessions.join(&old).exists());

    // A second kernel with an age limit of zero and no size limit.
    let second = kernel(
        ws.path(),
        store.path(),
        TestModel::new(vec![say("two")]),
        KernelConfig {
            checkpoint_max_age: Some(Duration::ZERO),
            checkpoint_max_bytes: None,
            ..KernelConfig::default()
        },
    );
    let (h2, mut ev2) = second.start_session(opts()).await.unwrap();
    let r = h2.send("hi").await.unwrap();
    until(&mut ev2, "session.completed").await;
    eventually("the closed session's checkpoints pruned", || {
        !sessions.join(&old).exists()
    })
    .await;
    // The new session's checkpoint, taken after the pruning started or spared as
    // open, is still there.
    let report = second.prune_checkpoints(None, true).await.unwrap().unwrap();
    assert!(report.dropped.iter().all(|d| d.session_id != old));
    h2.command(CommandPayload::CheckpointList(CheckpointListCmd::new()))
        .await
        .unwrap();
    let list = until(&mut ev2, "checkpoint.list").await;
    let Some(Event::CheckpointList(l)) = list.last().map(|e| e.event.clone()) else {
        panic!("{list:?}")
    };
    assert_eq!(l.checkpoints.len(), 1);
    assert_eq!(l.checkpoints[0].checkpoint_id, r);
}
