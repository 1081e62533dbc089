//! Isolated sessions through the kernel, with real git in temporary folders:
//! `session.start {isolation: "worktree"}` (the answer names the worktree, the
//! built-in tools write there and not in the repository), `worktree.list`,
//! `worktree.remove`, `session.delete` taking the worktree with it (or keeping one
//! with uncommitted changes), forks in worktrees of their own whose rewinds touch
//! only their own tree, ten sessions started at once under CPU load, and bad input.

use std::path::{Path, PathBuf};
use std::process::Command as Process;

use keel_envelope::commands::{
    SessionDelete, SessionFork, SessionRewind, SessionStart, WorktreeListCmd, WorktreeRemove,
};
use keel_envelope::events::{SessionStarted, WorktreeList};
use keel_envelope::worktree::{AdditionalRoot, Isolation, RootAccess, WorktreeInfo};
use keel_kernel::config::WorktreeConfig;
use keel_kernel::KernelConfig;
use serde_json::json;

use super::*;

pub(super) use keel_testsupport::git;

pub(super) struct Wt {
    pub(super) kernel: Kernel,
    pub(super) model: Arc<TestModel>,
    pub(super) repo: PathBuf,
    pub(super) folder: PathBuf,
    pub(super) _tmp: tempfile::TempDir,
}

fn fixture(turns: Vec<Turn>) -> Wt {
    fixture_with(turns, |_| {})
}

/// A kernel on a repository with one commit (`a.txt`), in `auto` mode with the
/// built-in tools, its worktrees under `worktrees/`; `tune` adjusts its configuration.
pub(super) fn fixture_with(turns: Vec<Turn>, tune: impl FnOnce(&mut KernelConfig)) -> Wt {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "first"]);
    let repo = std::fs::canonicalize(repo).unwrap();
    let folder = tmp.path().join("worktrees");
    let model = TestModel::new(turns);
    let mut config = KernelConfig {
        permission_mode: PermissionMode::Auto,
        sandbox: keel_tools::SandboxConfig::off(),
        worktrees: WorktreeConfig {
            dir: Some(folder.clone()),
            ..WorktreeConfig::default()
        },
        ..KernelConfig::default()
    };
    tune(&mut config);
    let kernel = Kernel::builder()
        .config(config)
        .workspace(&repo)
        .model(model.clone())
        .store_dir(tmp.path().join("store"))
        .build()
        .unwrap();
    Wt {
        kernel,
        model,
        repo,
        folder,
        _tmp: tmp,
    }
}

fn isolated() -> SessionStart {
    SessionStart::new().isolation(Isolation::Worktree)
}

async fn started(events: &mut EventStream) -> SessionStarted {
    match until(events, "session.started").await.pop().unwrap().event {
        Event::SessionStarted(s) => s,
        other => panic!("{other:?}"),
    }
}

/// Runs a kernel command; its answers up to (and with) the first of type `ty`, or
/// the error.
pub(super) async fn kernel_command(
    w: &Wt,
    payload: CommandPayload,
    ty: &str,
) -> Result<Vec<Envelope>, ErrorPayload> {
    let mut all = w.kernel.subscribe();
    let cmd = Command::new("req_wt".to_owned(), None, payload);
    w.kernel.execute(cmd).await?;
    Ok(until(&mut all, ty).await)
}

pub(super) async fn listed(w: &Wt) -> Vec<WorktreeInfo> {
    let answers = kernel_command(
        w,
        CommandPayload::WorktreeList(WorktreeListCmd::new()),
        "worktree.list",
    )
    .await
    .unwrap();
    match answers.into_iter().last().unwrap().event {
        Event::WorktreeList(WorktreeList { worktrees, .. }) => worktrees,
        other => panic!("{other:?}"),
    }
}

pub(super) fn branch_exists(repo: &Path, branch: &str) -> bool {
    Process::new("git")
        .args([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .current_dir(repo)
        .status()
        .unwrap()
        .success()
}

#[tokio::test]
async fn a_session_in_a_worktree_works_there_and_goes_with_its_deletion() {
    let w = fixture(vec![
        call(
            "write_file",
            json!({"path": "new.txt", "content": "made\n"}),
        ),
        say("done"),
    ]);
    // The repository's own tree is dirty; the worktree starts at HEAD.
    std::fs::write(w.repo.join("a.txt"), "dirty\n").unwrap();
    let (h, mut ev) = w.kernel.start_session(isolated()).await.unwrap();
    let s = started(&mut ev).await;
    let tree = s.worktree.clone().expect("the answer names the worktree");
    assert_eq!(tree.session_id.as_deref(), Some(h.id()));
    assert!(tree.branch.starts_with("keel/"), "{tree:?}");
    assert_eq!(tree.repository, w.repo.display().to_string());
    assert_eq!(s.workspace, tree.path);
    let path = PathBuf::from(&tree.path);
    assert!(path.starts_with(std::fs::canonicalize(&w.folder).unwrap()));
    assert_eq!(
        std::fs::read_to_string(path.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(
        git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        tree.branch
    );
    h.send("write a file").await.unwrap();
    until(&mut ev, "session.completed").await;
    assert_eq!(
        std::fs::read_to_string(path.join("new.txt")).unwrap(),
        "made\n"
    );
    assert!(
        !w.repo.join("new.txt").exists(),
        "the repository's tree is untouched"
    );
    assert_eq!(
        std::fs::read_to_string(w.repo.join("a.txt")).unwrap(),
        "dirty\n"
    );
    let l = listed(&w).await;
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].dirty, Some(true));
    // Not while its session is open.
    let remove = |force| {
        CommandPayload::WorktreeRemove(
            WorktreeRemove::new()
                .session_id(h.id().to_owned())
                .force(force),
        )
    };
    let e = kernel_command(&w, remove(true), "worktree.removed")
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionBusy, "{e:?}");
    // Deleting the session keeps a worktree with uncommitted changes, and says so.
    let delete = CommandPayload::SessionDelete(SessionDelete::new(h.id().to_owned()));
    let answers = kernel_command(&w, delete, "session.deleted").await.unwrap();
    let warning = answers
        .iter()
        .find_map(|e| match &e.event {
            Event::Warning(p) => Some(p.clone()),
            _ => None,
        })
        .expect("a warning");
    assert_eq!(warning.code, ErrorCode::WorktreeDirty, "{warning:?}");
    assert!(path.join("new.txt").exists());
    // Refused without force, removed with it.
    let e = kernel_command(&w, remove(false), "worktree.removed")
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::WorktreeDirty, "{e:?}");
    let answers = kernel_command(&w, remove(true), "worktree.removed")
        .await
        .unwrap();
    let Event::WorktreeRemoved(r) = &answers.last().unwrap().event else {
        panic!()
    };
    assert!(!r.branch_kept);
    assert!(!path.exists());
    assert!(!branch_exists(&w.repo, &tree.branch));
    assert!(listed(&w).await.is_empty());
    // A clean one goes with its session, branch and all.
    let (h2, mut ev2) = w.kernel.start_session(isolated()).await.unwrap();
    let t2 = started(&mut ev2).await.worktree.unwrap();
    let delete = CommandPayload::SessionDelete(SessionDelete::new(h2.id().to_owned()));
    let answers = kernel_command(&w, delete, "session.deleted").await.unwrap();
    let kinds = types(&answers);
    let removed = kinds
        .iter()
        .position(|t| t == "worktree.removed")
        .expect("removed");
    assert!(
        removed < kinds.len() - 1,
        "before session.deleted: {kinds:?}"
    );
    assert!(!Path::new(&t2.path).exists());
    assert!(!branch_exists(&w.repo, &t2.branch));
}

#[tokio::test]
async fn a_fork_in_its_own_worktree_never_touches_its_parents_files() {
    let w = fixture(vec![
        call(
            "write_file",
            json!({"path": "p.txt", "content": "parent\n"}),
        ),
        say("parent done"),
    ]);
    let ws = w.repo.display().to_string();
    let (parent, mut pev) = w
        .kernel
        .start_session(SessionStart::new().workspace_path(Some(ws)))
        .await
        .unwrap();
    parent.send("write p").await.unwrap();
    until(&mut pev, "session.completed").await;
    std::fs::write(w.repo.join("a.txt"), "edited by hand\n").unwrap();
    let mut all = w.kernel.subscribe();
    parent
        .command(CommandPayload::SessionFork(
            SessionFork::new().isolation(Isolation::Worktree),
        ))
        .await
        .unwrap();
    let env = until(&mut all, "session.forked").await.pop().unwrap();
    let Event::SessionForked(f) = env.event else {
        panic!()
    };
    let tree = f.worktree.expect("the fork's worktree");
    let fork_root = PathBuf::from(&tree.path);
    // The parent's files as they are at the fork, uncommitted ones included.
    assert_eq!(
        std::fs::read_to_string(fork_root.join("p.txt")).unwrap(),
        "parent\n"
    );
    assert_eq!(
        std::fs::read_to_string(fork_root.join("a.txt")).unwrap(),
        "edited by hand\n"
    );
    let child = w.kernel.session_handle(&f.session_id).unwrap();
    assert_eq!(child.state().session.workspace, tree.path);
    // Each works in its own tree.
    w.model.push(vec![
        call("write_file", json!({"path": "f.txt", "content": "fork\n"})),
        say("fork done"),
    ]);
    let mut cev = child.subscribe();
    let rf = child.send("write f").await.unwrap();
    until(&mut cev, "session.completed").await;
    assert!(fork_root.join("f.txt").exists());
    assert!(!w.repo.join("f.txt").exists());
    w.model.push(vec![
        call("write_file", json!({"path": "q.txt", "content": "after\n"})),
        say("parent again"),
    ]);
    parent.send("write q").await.unwrap();
    until(&mut pev, "session.completed").await;
    assert!(w.repo.join("q.txt").exists());
    assert!(!fork_root.join("q.txt").exists());
    // A rewind of the fork touches the fork's tree only.
    child
        .command(CommandPayload::SessionRewind(
            SessionRewind::new()
                .to_request_id(rf)
                .files(true)
                .conversation(false),
        ))
        .await
        .unwrap();
    until(&mut cev, "session.rewound").await;
    assert!(!fork_root.join("f.txt").exists(), "rewound in the fork");
    assert!(fork_root.join("p.txt").exists());
    assert_eq!(
        std::fs::read_to_string(w.repo.join("p.txt")).unwrap(),
        "parent\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.repo.join("q.txt")).unwrap(),
        "after\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.repo.join("a.txt")).unwrap(),
        "edited by hand\n"
    );
    // `files: true` cannot go with a worktree.
    let e = parent
        .command(CommandPayload::SessionFork(
            SessionFork::new()
                .at_request_id(Some("req_x".into()))
                .files(true)
                .isolation(Isolation::Worktree),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    assert_eq!(e.details["field"], "payload.files");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_sessions_start_in_worktrees_at_once_under_cpu_load() {
    let w = fixture(Vec::new());
    let _busy = Busy::start(2);
    let starts = (0..10).map(|_| w.kernel.start_session(isolated()));
    let results = futures::future::join_all(starts).await;
    let mut paths = Vec::new();
    for r in results {
        let (h, mut ev) = r.unwrap_or_else(|e| panic!("{e:?}"));
        let tree = started(&mut ev).await.worktree.unwrap();
        assert_eq!(tree.session_id.as_deref(), Some(h.id()));
        paths.push(tree.path);
    }
    paths.sort();
    paths.dedup();
    assert_eq!(paths.len(), 10);
    let l = listed(&w).await;
    assert_eq!(l.len(), 10);
    assert!(l.iter().all(|t| t.dirty == Some(false)));
    let worktrees = git(&w.repo, &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 11, "{worktrees}");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_structured_error() {
    let w = fixture(Vec::new());
    let plain = tempfile::tempdir().unwrap();
    let code_field = |e: ErrorPayload| {
        (
            e.code.clone(),
            e.details
                .get("field")
                .or(e.details.get("reason"))
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let start =
        |o: SessionStart| async { w.kernel.start_session(o).await.map(|_| ()).unwrap_err() };
    let e = start(isolated().workspace_path(Some(plain.path().display().to_string()))).await;
    assert_eq!(
        code_field(e),
        (ErrorCode::WorktreeUnavailable, "not_a_repository".into())
    );
    let e = start(SessionStart::new().isolation(Isolation::Unknown("copy".into()))).await;
    assert_eq!(
        code_field(e),
        (ErrorCode::RequestInvalid, "payload.isolation".into())
    );
    let e = start(SessionStart::new().base_ref(Some("main".to_owned()))).await;
    assert_eq!(
        code_field(e),
        (ErrorCode::RequestInvalid, "payload.baseRef".into())
    );
    let e = start(isolated().base_ref(Some("no-such-branch".to_owned()))).await;
    assert_eq!(
        code_field(e),
        (ErrorCode::RequestInvalid, "payload.baseRef".into())
    );
    // Bad extra roots refuse an isolated start before its worktree is made.
    let roots = vec![AdditionalRoot::new("relative/dir", RootAccess::Read)];
    let e = start(isolated().additional_roots(Some(roots))).await;
    assert_eq!(
        code_field(e),
        (
            ErrorCode::RequestInvalid,
            "payload.additionalRoots[0].path".into()
        )
    );
    assert!(listed(&w).await.is_empty(), "no refusal left a worktree");
    let remove = |path: Option<&str>, session: Option<&str>| {
        CommandPayload::WorktreeRemove(
            WorktreeRemove::new()
                .path(path.map(str::to_owned))
                .session_id(session.map(str::to_owned)),
        )
    };
    for (payload, want) in [
        (
            remove(None, None),
            (ErrorCode::RequestInvalid, "payload.path"),
        ),
        (
            remove(Some("/a"), Some("s")),
            (ErrorCode::RequestInvalid, "payload.sessionId"),
        ),
        (
            remove(Some(""), None),
            (ErrorCode::RequestInvalid, "payload.path"),
        ),
        (
            remove(Some("/etc"), None),
            (ErrorCode::WorktreeNotFound, ""),
        ),
        (
            remove(None, Some("sess_none")),
            (ErrorCode::WorktreeNotFound, ""),
        ),
    ] {
        let e = kernel_command(&w, payload, "worktree.removed")
            .await
            .unwrap_err();
        assert_eq!(code_field(e), (want.0, want.1.to_owned()));
    }
    // The wire decoder refuses a mistyped field.
    let line =
        r#"{"version":"1.0","type":"worktree.remove","requestId":"r1","payload":{"force":"yes"}}"#;
    let e = keel_envelope::codec::decode_command(line.as_bytes(), Default::default()).unwrap_err();
    assert_eq!(e.error.code, ErrorCode::RequestInvalid);
    assert_eq!(e.request_id.as_deref(), Some("r1"));
}
