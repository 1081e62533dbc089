//! Sub-agents in worktrees of their own, with real git in temporary folders:
//! `spawn_sub_agent {isolation: "worktree"}` edits a file and runs a shell command in
//! its worktree while the parent's files stay as they are; its changes come back as
//! `patch.proposed`, applied (past the permission gate) or rejected by the host; no
//! change is no patch; an interrupt leaves no worktree, branch or record; outside
//! git the call fails with `WORKTREE_UNAVAILABLE` and the session goes on; a bad
//! `isolation` is refused before anything runs; the configuration's default.

use std::path::{Path, PathBuf};

use keel_envelope::commands::{PatchApply, PatchReject, SessionStart, SetRules};
use keel_envelope::events::{PatchEvent, SubAgentEvent, ToolCallCompleted};
use keel_envelope::ext::{Patch, PatchOp, PatchStatus};
use keel_envelope::worktree::Isolation;
use keel_kernel::KernelConfig;
use serde_json::json;

use super::worktrees::{branch_exists, fixture_with, git, listed, Wt};
use super::*;

fn spawn(task: &str, isolation: Option<&str>) -> Turn {
    let mut args = json!({"task": task});
    if let Some(i) = isolation {
        args["isolation"] = json!(i);
    }
    Turn {
        calls: vec![("spawn_sub_agent", args)],
        ..Turn::default()
    }
}

/// The parent session, working in the repository itself.
async fn parent(w: &Wt) -> (SessionHandle, EventStream) {
    let ws = w.repo.display().to_string();
    w.kernel
        .start_session(SessionStart::new().workspace_path(Some(ws)))
        .await
        .unwrap()
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The spawn call's result.
fn spawn_result(envs: &[Envelope]) -> serde_json::Value {
    all_events!(envs, ToolCallCompleted)
        .into_iter()
        .find(|c: &ToolCallCompleted| c.tool_name == "spawn_sub_agent")
        .expect("spawn_sub_agent completed")
        .result
}

/// Nothing of a sub-agent's worktree is left: no record, no folder, no branch, no
/// entry in git.
async fn nothing_left(w: &Wt, branch: &str) {
    assert!(listed(w).await.is_empty(), "no worktree listed");
    let left: Vec<PathBuf> = std::fs::read_dir(&w.folder)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        left.iter().all(|p| p.ends_with("records")),
        "only the records folder: {left:?}"
    );
    let records: Vec<PathBuf> = std::fs::read_dir(w.folder.join("records"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(records.is_empty(), "no record: {records:?}");
    assert!(!branch_exists(&w.repo, branch), "{branch} deleted");
    let trees = git(&w.repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        trees.lines().filter(|l| l.starts_with("worktree ")).count(),
        1,
        "{trees}"
    );
}

#[tokio::test]
async fn a_sub_agent_in_a_worktree_hands_its_changes_back_as_a_patch_the_host_applies() {
    let w = fixture_with(
        vec![
            spawn("add a file and extend a.txt", Some("worktree")),
            // The sub-agent: a write, then a shell command, in its worktree.
            call(
                "write_file",
                json!({"path": "src/new.txt", "content": "from the sub-agent\n"}),
            ),
            call(
                "run_shell",
                json!({"command": "printf 'shell\\n' >> a.txt && mv draft.txt moved.txt && pwd > where.txt"}),
            ),
            say("added src/new.txt, extended a.txt, moved draft.txt"),
            say("parent done"),
        ],
        |_| {},
    );
    // The parent's tree has uncommitted changes the sub-agent starts with.
    std::fs::write(w.repo.join("a.txt"), "parent edit\n").unwrap();
    std::fs::write(w.repo.join("draft.txt"), "draft\n").unwrap();
    let (h, mut ev) = parent(&w).await;
    h.send("delegate").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    check_sequences(&envs);
    let started: SubAgentEvent = first_event!(envs, SubAgentStarted).expect("started");
    let tree = started.sub_agent.worktree.clone().expect("its worktree");
    assert_eq!(tree.session_id.as_deref(), Some(h.id()));
    assert_eq!(tree.base_commit, git(&w.repo, &["rev-parse", "HEAD"]));
    let tree_path = PathBuf::from(&tree.path);
    assert!(tree_path.starts_with(std::fs::canonicalize(&w.folder).unwrap()));
    // The shell command ran in the worktree, not in the parent's folder.
    let shell: Vec<ToolCallCompleted> = all_events!(envs, ToolCallCompleted);
    assert!(
        shell.iter().any(|c| c.tool_name == "run_shell"),
        "{:?}",
        types(&envs)
    );
    // The parent's files are as they were.
    assert_eq!(
        read(&w.repo.join("a.txt")).as_deref(),
        Some("parent edit\n")
    );
    assert_eq!(read(&w.repo.join("draft.txt")).as_deref(), Some("draft\n"));
    assert!(!w.repo.join("src/new.txt").exists());
    assert!(!w.repo.join("moved.txt").exists());
    assert!(!w.repo.join("where.txt").exists());
    // Its changes, against where it started: the parent's uncommitted edits are
    // not in them.
    let proposed: PatchEvent = first_event!(envs, PatchProposed).expect("patch.proposed");
    let p: Patch = proposed.patch;
    assert_eq!(p.status, PatchStatus::Pending);
    assert_eq!(p.origin, "sub-agent");
    let paths: Vec<(&str, PatchOp)> = p
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.op.clone()))
        .collect();
    assert_eq!(
        paths,
        [
            ("a.txt", PatchOp::Modify),
            ("draft.txt", PatchOp::Delete),
            ("moved.txt", PatchOp::Create),
            ("src/new.txt", PatchOp::Create),
            ("where.txt", PatchOp::Create),
        ]
    );
    let a = &p.files[0];
    assert_eq!(a.before.as_deref(), Some("parent edit\n"));
    assert_eq!(a.after.as_deref(), Some("parent edit\nshell\n"));
    assert!(a.diff.contains("+shell"), "{}", a.diff);
    let where_ = p.files[4].after.clone().unwrap();
    assert_eq!(
        PathBuf::from(where_.trim()),
        tree_path,
        "pwd in the worktree"
    );
    assert_eq!(p.stats.file_count, 5);
    assert_eq!((p.stats.added, p.stats.removed), (4, 1));
    // The model learns the patch's id and stats; the sub-agent's record names it.
    let result = spawn_result(&envs);
    assert_eq!(result["patch"]["patchId"], json!(p.patch_id));
    assert_eq!(result["patch"]["stats"]["fileCount"], 5);
    let message = result["message"].as_str().unwrap();
    assert!(
        message.contains(&p.patch_id) && message.contains("NOT written"),
        "{message}"
    );
    let done: SubAgentEvent = first_event!(envs, SubAgentCompleted).expect("completed");
    assert_eq!(
        done.sub_agent.patch_id.as_deref(),
        Some(p.patch_id.as_str())
    );
    let kinds = types(&envs);
    let at = |t: &str| kinds.iter().position(|k| k == t).unwrap();
    assert!(
        at("patch.proposed") < at("sub-agent.completed"),
        "{kinds:?}"
    );
    // Its worktree and branch are gone once it has ended.
    nothing_left(&w, &tree.branch).await;
    // The host applies it: the parent's workspace gets the changes.
    let mut all = h.subscribe();
    h.command(CommandPayload::PatchApply(PatchApply::new(
        p.patch_id.clone(),
    )))
    .await
    .unwrap();
    let applied = until(&mut all, "patch.applied").await;
    let applied: PatchEvent = first_event!(applied, PatchApplied).unwrap();
    assert_eq!(applied.patch.status, PatchStatus::Applied);
    assert_eq!(
        read(&w.repo.join("a.txt")).as_deref(),
        Some("parent edit\nshell\n")
    );
    assert_eq!(
        read(&w.repo.join("src/new.txt")).as_deref(),
        Some("from the sub-agent\n")
    );
    assert_eq!(read(&w.repo.join("moved.txt")).as_deref(), Some("draft\n"));
    assert!(!w.repo.join("draft.txt").exists());
    assert_eq!(read(&w.repo.join("where.txt")), Some(where_));
}

#[tokio::test]
async fn a_rejected_patch_leaves_the_parent_as_it_was_and_a_denying_gate_refuses_the_apply() {
    let w = fixture_with(
        vec![
            spawn("write a secret", Some("worktree")),
            call(
                "write_file",
                json!({"path": "secret.txt", "content": "s3cret\n"}),
            ),
            say("wrote secret.txt"),
            say("parent done"),
        ],
        |_| {},
    );
    let (h, mut ev) = parent(&w).await;
    h.send("delegate").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let p = first_event!(envs, PatchProposed)
        .expect("patch.proposed")
        .patch;
    assert_eq!(p.files.len(), 1);
    assert!(!w.repo.join("secret.txt").exists());
    // A deny rule on the path: the apply is refused by the gate, the patch stays.
    h.command(CommandPayload::SessionSetRules(
        SetRules::new().always_deny_project(vec!["write_file(secret.txt)".into()]),
    ))
    .await
    .unwrap();
    let e = h
        .command(CommandPayload::PatchApply(PatchApply::new(
            p.patch_id.clone(),
        )))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ToolPermissionDenied, "{e:?}");
    assert_eq!(e.details["path"], "secret.txt");
    assert_eq!(e.details["patchId"], json!(p.patch_id));
    assert!(!w.repo.join("secret.txt").exists());
    // Still pending: the host rejects it, and nothing is written.
    let mut all = h.subscribe();
    h.command(CommandPayload::PatchReject(
        PatchReject::new(p.patch_id.clone()).reason(Some("not wanted".into())),
    ))
    .await
    .unwrap();
    let rejected = until(&mut all, "patch.rejected").await;
    let rejected = first_event!(rejected, PatchRejected).unwrap();
    assert_eq!(rejected.patch.status, PatchStatus::Rejected);
    assert!(!w.repo.join("secret.txt").exists());
    assert_eq!(read(&w.repo.join("a.txt")).as_deref(), Some("one\n"));
    let e = h
        .command(CommandPayload::PatchApply(PatchApply::new(
            p.patch_id.clone(),
        )))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::PatchNotFound);
    // Plan mode denies writes: an apply then is refused too.
    w.model.push(vec![
        spawn("write again", Some("worktree")),
        call("write_file", json!({"path": "b.txt", "content": "b\n"})),
        say("wrote b.txt"),
        say("parent done"),
    ]);
    h.send("again").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let p = first_event!(envs, PatchProposed)
        .expect("patch.proposed")
        .patch;
    h.command(CommandPayload::SessionSetMode(
        keel_envelope::commands::SetMode::new(PermissionMode::Plan),
    ))
    .await
    .unwrap();
    let e = h
        .command(CommandPayload::PatchApply(PatchApply::new(
            p.patch_id.clone(),
        )))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::PlanApprovalRequired, "{e:?}");
    assert_eq!(e.details["path"], "b.txt", "{e:?}");
    assert!(!w.repo.join("b.txt").exists());
}

#[tokio::test]
async fn a_sub_agent_that_changes_nothing_proposes_no_patch() {
    let w = fixture_with(
        vec![
            spawn("read a.txt", Some("worktree")),
            call("read_file", json!({"path": "a.txt"})),
            say("a.txt says one"),
            say("parent done"),
        ],
        |_| {},
    );
    let (h, mut ev) = parent(&w).await;
    h.send("delegate").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let tree = first_event!(envs, SubAgentStarted)
        .and_then(|s| s.sub_agent.worktree)
        .expect("its worktree");
    assert!(first_event!(envs, PatchProposed).is_none(), "no patch");
    let result = spawn_result(&envs);
    assert_eq!(result["patch"]["patchId"], serde_json::Value::Null);
    let message = result["message"].as_str().unwrap();
    assert!(message.contains("changed no files"), "{message}");
    let done = first_event!(envs, SubAgentCompleted).unwrap();
    assert_eq!(done.sub_agent.patch_id, None);
    nothing_left(&w, &tree.branch).await;
    drop(h);
}

#[tokio::test]
async fn outside_git_the_call_fails_with_worktree_unavailable_and_the_session_goes_on() {
    let w = fixture_with(
        vec![
            spawn("anything", Some("worktree")),
            say("could not delegate"),
        ],
        |_| {},
    );
    let plain = tempfile::tempdir().unwrap();
    let ws = plain.path().display().to_string();
    let (h, mut ev) = w
        .kernel
        .start_session(SessionStart::new().workspace_path(Some(ws)))
        .await
        .unwrap();
    h.send("delegate").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let failed = first_event!(envs, ToolCallFailed).expect("tool.call.failed");
    assert_eq!(failed.tool_name, "spawn_sub_agent");
    assert_eq!(failed.error.code, ErrorCode::WorktreeUnavailable);
    assert_eq!(failed.error.details["reason"], "not_a_repository");
    assert!(first_event!(envs, SubAgentStarted).is_none());
    let done = first_event!(envs, SessionCompleted).unwrap();
    assert_eq!(done.final_text.as_deref(), Some("could not delegate"));
    // The model was told why.
    let seen = w.model.seen.lock().unwrap().last().cloned().unwrap();
    let told = seen.messages.iter().any(|m| match m {
        keel_kernel::model::Message::Tool {
            content, is_error, ..
        } => *is_error && content.contains("WORKTREE_UNAVAILABLE"),
        _ => false,
    });
    assert!(told, "the tool result names the error");
    assert!(listed(&w).await.is_empty());
    assert_eq!(std::fs::read_dir(plain.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_bad_isolation_is_refused_and_the_configuration_gives_the_default() {
    // The configuration puts sub-agents in worktrees.
    let w = fixture_with(
        vec![
            spawn("x", Some("elsewhere")),
            say("refused"),
            // The default: a worktree.
            spawn("write", None),
            call("write_file", json!({"path": "w.txt", "content": "w\n"})),
            say("wrote w.txt"),
            say("parent done"),
            // `none` overrides it: the write lands in the parent's folder.
            spawn("write here", Some("none")),
            call("write_file", json!({"path": "n.txt", "content": "n\n"})),
            say("wrote n.txt"),
            say("parent done"),
        ],
        |c| c.worktrees.sub_agent_isolation = Isolation::Worktree,
    );
    let (h, mut ev) = parent(&w).await;
    h.send("bad").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let skipped = first_event!(envs, ToolCallSkipped).expect("tool.call.skipped");
    assert_eq!(skipped.tool_name, "spawn_sub_agent");
    assert_eq!(skipped.error.code, ErrorCode::ToolArgumentsInvalid);
    assert!(
        skipped.error.message.contains("isolation") || skipped.error.message.contains("elsewhere"),
        "{:?}",
        skipped.error
    );
    assert!(first_event!(envs, SubAgentStarted).is_none());
    assert!(listed(&w).await.is_empty());
    h.send("default").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let started = first_event!(envs, SubAgentStarted).unwrap();
    assert!(
        started.sub_agent.worktree.is_some(),
        "a worktree by default"
    );
    let p = first_event!(envs, PatchProposed).expect("a patch").patch;
    assert_eq!(p.files[0].path, "w.txt");
    assert!(!w.repo.join("w.txt").exists());
    h.send("none").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let started = first_event!(envs, SubAgentStarted).unwrap();
    assert!(started.sub_agent.worktree.is_none());
    assert!(first_event!(envs, PatchProposed).is_none());
    assert_eq!(read(&w.repo.join("n.txt")).as_deref(), Some("n\n"));
}

#[tokio::test]
async fn an_interrupt_while_the_sub_agent_works_leaves_no_worktree_behind() {
    let w = fixture_with(
        vec![
            spawn("work slowly", Some("worktree")),
            call(
                "write_file",
                json!({"path": "half.txt", "content": "half\n"}),
            ),
            // Its next model call hangs until the interrupt.
            Turn {
                delay: Some(Duration::from_secs(600)),
                ..say("never")
            },
        ],
        |_| {},
    );
    let (h, mut ev) = parent(&w).await;
    h.send("delegate").await.unwrap();
    let mut envs = until(&mut ev, "sub-agent.started").await;
    let tree = first_event!(envs, SubAgentStarted)
        .and_then(|s| s.sub_agent.worktree)
        .unwrap();
    envs.extend(until(&mut ev, "tool.call.completed").await);
    assert!(Path::new(&tree.path).join("half.txt").exists());
    h.interrupt().await.unwrap();
    envs.extend(until(&mut ev, "session.interrupted").await);
    check_sequences(&envs);
    let failed = first_event!(envs, SubAgentFailed).expect("sub-agent.failed");
    assert_eq!(
        failed.sub_agent.error.map(|e| e.code),
        Some(ErrorCode::Interrupted)
    );
    assert!(first_event!(envs, PatchProposed).is_none(), "no patch");
    // Gone by the time the request has ended.
    nothing_left(&w, &tree.branch).await;
    assert!(!w.repo.join("half.txt").exists());
    // The session goes on.
    w.model.push(vec![say("back")]);
    h.send("again").await.unwrap();
    let done = until(&mut ev, "session.completed").await;
    assert_eq!(
        first_event!(done, SessionCompleted)
            .unwrap()
            .final_text
            .as_deref(),
        Some("back")
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

#[tokio::test]
async fn a_sub_agent_cut_off_by_a_dead_process_has_its_worktree_removed_on_resume() {
    let w = fixture_with(
        vec![
            spawn("work slowly", Some("worktree")),
            call(
                "write_file",
                json!({"path": "half.txt", "content": "half\n"}),
            ),
            Turn {
                delay: Some(Duration::from_secs(600)),
                ..say("never")
            },
        ],
        |_| {},
    );
    let (h, mut ev) = parent(&w).await;
    let sid = h.id().to_owned();
    h.send("delegate").await.unwrap();
    let envs = until(&mut ev, "tool.call.completed").await;
    let tree = first_event!(envs, SubAgentStarted)
        .and_then(|s| s.sub_agent.worktree)
        .unwrap();
    assert!(Path::new(&tree.path).join("half.txt").exists());
    // The store as a process that died now leaves it: the sub-agent still running,
    // its worktree on disk. A new process opens that store.
    let store = w._tmp.path().join("store-after-crash");
    copy_dir(&w._tmp.path().join("store"), &store);
    let config = KernelConfig {
        permission_mode: PermissionMode::Auto,
        sandbox: keel_tools::SandboxConfig::off(),
        worktrees: keel_kernel::config::WorktreeConfig {
            dir: Some(w.folder.clone()),
            ..Default::default()
        },
        ..KernelConfig::default()
    };
    let kernel = Kernel::builder()
        .config(config)
        .workspace(&w.repo)
        .model(TestModel::new(vec![]))
        .store_dir(&store)
        .build()
        .unwrap();
    let (h2, _ev2) = kernel.resume_session(&sid, None).await.unwrap();
    assert!(!Path::new(&tree.path).exists(), "removed on resume");
    assert!(listed(&w).await.is_empty());
    assert!(!branch_exists(&w.repo, &tree.branch));
    assert!(!w.repo.join("half.txt").exists());
    // Recorded as failed.
    let mut all = kernel.subscribe();
    h2.command(CommandPayload::SubAgentGet(
        keel_envelope::commands::SubAgentGetCmd::new(
            first_event!(envs, SubAgentStarted).unwrap().sub_agent_id,
        ),
    ))
    .await
    .unwrap();
    let got = until(&mut all, "sub-agent.get").await;
    let got = first_event!(got, SubAgentGet).unwrap();
    assert_eq!(
        got.sub_agent.status,
        keel_envelope::ext::SubAgentStatus::Failed
    );
    drop(h);
}
