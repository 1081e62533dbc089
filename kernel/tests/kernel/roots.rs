//! Extra roots through the kernel (`session.start {additionalRoots}`), with the
//! built-in tools on real files in temporary folders: the answer and the session's
//! info name the roots (canonical), the system prompt lists them, the file tools read
//! both roots and write only the `write` one, the roots are stored and kept by a
//! resume after a restart (or replaced by the resume's own), a fork keeps them, and
//! bad lists are refused with the entry named.

use std::path::{Path, PathBuf};

use keel_envelope::commands::{SessionFork, SessionResume, SessionStart};
use keel_envelope::events::SessionStarted;
use keel_envelope::worktree::{AdditionalRoot, RootAccess};
use keel_kernel::KernelConfig;
use serde_json::json;

use super::*;

struct Rooted {
    kernel: Kernel,
    model: Arc<TestModel>,
    ws: PathBuf,
    lib: PathBuf,
    docs: PathBuf,
    base: PathBuf,
    store: PathBuf,
    _tmp: tempfile::TempDir,
}

fn kernel_over(ws: &Path, store: &Path, model: Arc<TestModel>) -> Kernel {
    let config = KernelConfig {
        permission_mode: PermissionMode::AutoEdit,
        sandbox: keel_tools::SandboxConfig::off(),
        ..KernelConfig::default()
    };
    Kernel::builder()
        .config(config)
        .workspace(ws)
        .model(model)
        .store_dir(store)
        .ids(Arc::new(SeqIdGen::default()))
        .build()
        .unwrap()
}

fn rooted(turns: Vec<Turn>) -> Rooted {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (ws, lib, docs) = (base.join("ws"), base.join("lib"), base.join("docs"));
    for d in [&ws, &lib, &docs] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ws.join("main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(lib.join("lib.rs"), "pub fn one() {}\n").unwrap();
    std::fs::write(docs.join("guide.md"), "the guide\n").unwrap();
    // The write root is given through a symlink: the session keeps its target.
    std::os::unix::fs::symlink(&lib, base.join("lib-link")).unwrap();
    let store = base.join("store");
    let model = TestModel::new(turns);
    Rooted {
        kernel: kernel_over(&ws, &store, model.clone()),
        model,
        ws,
        lib,
        docs,
        base,
        store,
        _tmp: tmp,
    }
}

fn given(r: &Rooted) -> Vec<AdditionalRoot> {
    vec![
        AdditionalRoot::new(
            r.base.join("lib-link").display().to_string(),
            RootAccess::Write,
        ),
        // `access` left out: read.
        serde_json::from_value(json!({"path": r.docs.display().to_string()})).unwrap(),
    ]
}

fn canonical(r: &Rooted) -> Vec<AdditionalRoot> {
    vec![
        AdditionalRoot::new(r.lib.display().to_string(), RootAccess::Write),
        AdditionalRoot::new(r.docs.display().to_string(), RootAccess::Read),
    ]
}

fn abs(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

async fn started(events: &mut EventStream) -> SessionStarted {
    match until(events, "session.started").await.pop().unwrap().event {
        Event::SessionStarted(s) => s,
        other => panic!("{other:?}"),
    }
}

/// The calls of one request: read in the read root, write in the write root, try to
/// write in the read root.
fn calls(r: &Rooted) -> Vec<Turn> {
    vec![
        call("read_file", json!({"path": abs(&r.docs, "guide.md")})),
        call(
            "write_file",
            json!({"path": abs(&r.lib, "new.rs"), "content": "pub fn two() {}\n"}),
        ),
        call(
            "write_file",
            json!({"path": abs(&r.docs, "guide.md"), "content": "overwritten\n"}),
        ),
        say("done"),
    ]
}

#[tokio::test]
async fn a_session_reaches_its_roots_and_writes_only_the_write_ones() {
    let r = rooted(Vec::new());
    r.model.push(calls(&r));
    let mut all = r.kernel.subscribe();
    let (h, mut ev) = r
        .kernel
        .start_session(SessionStart::new().additional_roots(Some(given(&r))))
        .await
        .unwrap();
    let s = started(&mut all).await;
    assert_eq!(
        s.additional_roots,
        Some(canonical(&r)),
        "canonical, in order"
    );
    assert_eq!(h.state().session.additional_roots, Some(canonical(&r)));
    h.send("use the roots").await.unwrap();
    let envs = until(&mut ev, "session.completed").await;
    let done: Vec<&str> = envs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallCompleted(c) => Some(c.tool_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(done, ["read_file", "write_file"], "{:?}", types(&envs));
    let skipped: Vec<&ErrorPayload> = envs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(c) => Some(&c.error),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 1, "{:?}", types(&envs));
    assert_eq!(skipped[0].code, ErrorCode::PathOutsideWorkspace);
    assert!(
        skipped[0].message.contains("may only read"),
        "{}",
        skipped[0].message
    );
    assert_eq!(
        std::fs::read_to_string(r.lib.join("new.rs")).unwrap(),
        "pub fn two() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(r.docs.join("guide.md")).unwrap(),
        "the guide\n"
    );
    // The model was told where the roots are and what it may do there.
    let system = r.model.seen.lock().unwrap()[0].system.clone();
    assert!(system.contains("# Extra roots"), "{system}");
    assert!(
        system.contains(&format!("- {} (read and write)", r.lib.display())),
        "{system}"
    );
    assert!(
        system.contains(&format!("- {} (read only", r.docs.display())),
        "{system}"
    );
    // A session without roots has no such section.
    let (plain, mut pev) = r.kernel.start_session(SessionStart::new()).await.unwrap();
    assert_eq!(plain.state().session.additional_roots, None);
    plain.send("hello").await.unwrap();
    until(&mut pev, "session.completed").await;
    let seen = r.model.seen.lock().unwrap();
    assert!(!seen.last().unwrap().system.contains("# Extra roots"));
}

#[tokio::test]
async fn a_resume_after_a_restart_keeps_the_roots_or_takes_its_own() {
    let r = rooted(Vec::new());
    let (h, _ev) = r
        .kernel
        .start_session(SessionStart::new().additional_roots(Some(given(&r))))
        .await
        .unwrap();
    let id = h.id().to_owned();
    let (plain, _pev) = r.kernel.start_session(SessionStart::new()).await.unwrap();
    let plain_id = plain.id().to_owned();
    let want = canonical(&r);
    let turns = calls(&r);
    r.kernel.shutdown("test").await;
    drop(r.kernel);
    // The stored state keeps them canonical.
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(r.store.join("sessions").join(&id).join("state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        state["extensions"]["additionalRoots"],
        serde_json::to_value(want.clone()).unwrap()
    );
    let model = TestModel::new(turns);
    let kernel = kernel_over(&r.ws, &r.store, model.clone());
    let listed = kernel.list_sessions().unwrap();
    let info = listed.iter().find(|s| s.session_id == id).unwrap();
    assert_eq!(info.additional_roots, Some(want.clone()), "session.list");
    let (h, mut ev) = kernel.resume_session(&id, None).await.unwrap();
    assert_eq!(h.state().session.additional_roots, Some(want.clone()));
    h.send("again").await.unwrap();
    until(&mut ev, "session.completed").await;
    assert!(
        r.lib.join("new.rs").exists(),
        "the write root is writable again"
    );
    assert_eq!(
        std::fs::read_to_string(r.docs.join("guide.md")).unwrap(),
        "the guide\n",
        "the read root is still read only"
    );
    // A session stored without roots has none.
    let (p, _) = kernel.resume_session(&plain_id, None).await.unwrap();
    assert_eq!(p.state().session.additional_roots, None);
    // A resume that gives roots replaces them: on the open, idle session…
    let only_docs = vec![AdditionalRoot::new(
        r.docs.display().to_string(),
        RootAccess::Write,
    )];
    let (h, _) = kernel
        .resume_session_with(&id, None, &[], Some(&only_docs))
        .await
        .unwrap();
    assert_eq!(h.state().session.additional_roots, Some(only_docs.clone()));
    // …and an empty list leaves none; a bad one is refused and changes nothing.
    let mut all = kernel.subscribe();
    let bad = vec![AdditionalRoot::new("not/absolute", RootAccess::Read)];
    let e = kernel
        .execute(Command::new(
            "req_bad".to_owned(),
            None,
            CommandPayload::SessionResume(SessionResume::new(id.clone()).additional_roots(bad)),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    assert_eq!(e.details["field"], "payload.additionalRoots[0].path");
    assert_eq!(h.state().session.additional_roots, Some(only_docs));
    let (h, _) = kernel
        .resume_session_with(&id, None, &[], Some(&[]))
        .await
        .unwrap();
    assert_eq!(h.state().session.additional_roots, None);
    drop(all.try_recv());
    // From the store too: close, then resume with roots.
    h.close().await.unwrap();
    let (h, _) = kernel
        .resume_session_with(&id, None, &[], Some(&want.clone()))
        .await
        .unwrap();
    assert_eq!(h.state().session.additional_roots, Some(want.clone()));
}

#[tokio::test]
async fn a_fork_keeps_the_parents_roots_or_takes_its_own() {
    let r = rooted(Vec::new());
    let (h, _ev) = r
        .kernel
        .start_session(SessionStart::new().additional_roots(Some(given(&r))))
        .await
        .unwrap();
    let (f, _) = r
        .kernel
        .fork_session(h.id(), SessionFork::default())
        .await
        .unwrap();
    assert_eq!(f.state().session.additional_roots, Some(canonical(&r)));
    let own = vec![AdditionalRoot::new(
        r.docs.display().to_string(),
        RootAccess::Write,
    )];
    let (f, _) = r
        .kernel
        .fork_session(h.id(), SessionFork::new().additional_roots(own.clone()))
        .await
        .unwrap();
    assert_eq!(f.state().session.additional_roots, Some(own));
    let e = r
        .kernel
        .fork_session(
            h.id(),
            SessionFork::new().additional_roots(vec![AdditionalRoot::new(
                r.ws.join("inner").display().to_string(),
                RootAccess::Read,
            )]),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
}

#[tokio::test]
async fn bad_roots_are_refused_with_the_entry_named() {
    let r = rooted(Vec::new());
    std::fs::write(r.base.join("file.txt"), "x").unwrap();
    std::fs::create_dir_all(r.ws.join("inner")).unwrap();
    std::fs::create_dir_all(r.lib.join("sub")).unwrap();
    let root = |p: &Path, a: RootAccess| AdditionalRoot::new(p.display().to_string(), a);
    let w = RootAccess::Write;
    let cases: Vec<(Vec<AdditionalRoot>, &str, &str)> = vec![
        (
            vec![AdditionalRoot::new("lib", w.clone())],
            "payload.additionalRoots[0].path",
            "absolute",
        ),
        (
            vec![root(&r.base.join("missing"), w.clone())],
            "payload.additionalRoots[0].path",
            "cannot be used",
        ),
        (
            vec![root(&r.base.join("file.txt"), w.clone())],
            "payload.additionalRoots[0].path",
            "not a directory",
        ),
        (
            vec![
                root(&r.lib, w.clone()),
                root(&r.base.join("lib-link"), RootAccess::Read),
            ],
            "payload.additionalRoots[1].path",
            "given twice",
        ),
        (
            vec![
                root(&r.docs, w.clone()),
                root(&r.lib, w.clone()),
                root(&r.lib.join("sub"), w.clone()),
            ],
            "payload.additionalRoots[2].path",
            "overlaps",
        ),
        (
            vec![root(&r.ws.join("inner"), w.clone())],
            "payload.additionalRoots[0].path",
            "inside the workspace",
        ),
        (
            vec![root(&r.base, RootAccess::Read)],
            "payload.additionalRoots[0].path",
            "holds the workspace",
        ),
        (
            vec![root(&r.lib, RootAccess::Unknown("admin".into()))],
            "payload.additionalRoots[0].access",
            "not known",
        ),
    ];
    for (roots, field, says) in cases {
        let e = r
            .kernel
            .start_session(SessionStart::new().additional_roots(Some(roots.clone())))
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::RequestInvalid, "{roots:?}");
        assert_eq!(e.details["field"], field, "{roots:?}: {}", e.message);
        assert!(e.message.contains(says), "{roots:?}: {}", e.message);
    }
    // The same over the wire: a JSON line with a bad root is an error envelope.
    let line = json!({
        "version": "1.0",
        "type": "session.start",
        "requestId": "req_wire",
        "payload": {"additionalRoots": [{"path": "relative", "access": "write"}]}
    });
    let cmd = keel_envelope::codec::decode_command(line.to_string().as_bytes(), Default::default())
        .unwrap();
    let e = r.kernel.execute(cmd).await.unwrap_err();
    assert_eq!(e.details["field"], "payload.additionalRoots[0].path");
    assert!(
        r.kernel.list_sessions().unwrap().is_empty(),
        "no session was made"
    );
}

async fn rewound(
    h: &SessionHandle,
    ev: &mut EventStream,
    to: &str,
) -> keel_envelope::events::SessionRewound {
    h.command(CommandPayload::SessionRewind(
        keel_envelope::commands::SessionRewind::new()
            .to_request_id(to.to_owned())
            .files(true)
            .conversation(false),
    ))
    .await
    .unwrap();
    match until(ev, "session.rewound").await.pop().unwrap().event {
        Event::SessionRewound(r) => r,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn checkpoints_and_rewinds_cover_the_write_roots() {
    let r = rooted(Vec::new());
    r.model.push(vec![
        call(
            "write_file",
            json!({"path": abs(&r.lib, "new.rs"), "content": "pub fn two() {}\n"}),
        ),
        call(
            "edit_file",
            json!({"path": abs(&r.lib, "lib.rs"), "edits": [{"oldText": "one", "newText": "uno"}]}),
        ),
        call("write_file", json!({"path": "ws.txt", "content": "ws\n"})),
        say("first done"),
        say("second done"),
    ]);
    let (h, mut ev) = r
        .kernel
        .start_session(SessionStart::new().additional_roots(Some(given(&r))))
        .await
        .unwrap();
    let r1 = h.send("change the library").await.unwrap();
    until(&mut ev, "session.completed").await;
    // A change by another program between requests is seen too.
    std::fs::write(r.lib.join("by-hand.txt"), "hand\n").unwrap();
    h.send("say something").await.unwrap();
    until(&mut ev, "session.completed").await;
    h.command(CommandPayload::CheckpointList(
        keel_envelope::commands::CheckpointListCmd::new(),
    ))
    .await
    .unwrap();
    let Event::CheckpointList(l) = until(&mut ev, "checkpoint.list").await.pop().unwrap().event
    else {
        panic!()
    };
    assert_eq!(l.disabled_reason, None);
    let mut changed: Vec<String> = l
        .checkpoints
        .iter()
        .flat_map(|c| c.files_changed.iter().map(|f| f.path.clone()))
        .collect();
    changed.sort();
    let mut want = vec![
        abs(&r.lib, "by-hand.txt"),
        abs(&r.lib, "lib.rs"),
        abs(&r.lib, "new.rs"),
        "ws.txt".to_owned(),
    ];
    want.sort();
    assert_eq!(
        changed, want,
        "workspace paths relative, root paths absolute"
    );
    // Back to before the first request: the root's files too, the read root untouched.
    let rw = rewound(&h, &mut ev, &r1).await;
    assert!(rw.not_restorable.is_empty(), "{:?}", rw.not_restorable);
    let mut files: Vec<String> = rw.files.iter().map(|f| f.path.clone()).collect();
    files.sort();
    assert_eq!(files, want);
    assert!(!r.lib.join("new.rs").exists());
    assert!(!r.lib.join("by-hand.txt").exists());
    assert!(!r.ws.join("ws.txt").exists());
    assert_eq!(
        std::fs::read_to_string(r.lib.join("lib.rs")).unwrap(),
        "pub fn one() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(r.docs.join("guide.md")).unwrap(),
        "the guide\n"
    );
    // The rewind is undone everywhere by rewinding to its undo point.
    let undo = rw.undo_checkpoint_id.expect("an undo point");
    rewound(&h, &mut ev, &undo).await;
    assert_eq!(
        std::fs::read_to_string(r.lib.join("lib.rs")).unwrap(),
        "pub fn uno() {}\n"
    );
    assert!(r.lib.join("new.rs").exists() && r.lib.join("by-hand.txt").exists());
    assert!(r.ws.join("ws.txt").exists());
    // A root made writable later has no checkpoint from before: left as it is, named.
    let now_writable = vec![
        AdditionalRoot::new(r.lib.display().to_string(), RootAccess::Write),
        AdditionalRoot::new(r.docs.display().to_string(), RootAccess::Write),
    ];
    let (h, mut ev) = r
        .kernel
        .resume_session_with(h.id(), None, &[], Some(&now_writable))
        .await
        .unwrap();
    let rw = rewound(&h, &mut ev, &r1).await;
    let named: Vec<&str> = rw.not_restorable.iter().map(|n| n.path.as_str()).collect();
    assert_eq!(
        named,
        [r.docs.display().to_string()],
        "{:?}",
        rw.not_restorable
    );
    assert!(rw.not_restorable[0].reason.contains("added later"));
    assert!(!r.lib.join("new.rs").exists(), "the other root is rewound");
    assert_eq!(
        std::fs::read_to_string(r.docs.join("guide.md")).unwrap(),
        "the guide\n"
    );
}

#[tokio::test]
async fn patches_reach_the_write_roots_and_never_the_read_ones() {
    use keel_envelope::commands::{PatchApply, PatchPropose, ProposedFile};
    let r = rooted(Vec::new());
    let (h, mut ev) = r
        .kernel
        .start_session(SessionStart::new().additional_roots(Some(given(&r))))
        .await
        .unwrap();
    let propose = |path: String| {
        CommandPayload::PatchPropose(PatchPropose::new(vec![
            ProposedFile::new(path).content(Some("patched\n".into()))
        ]))
    };
    h.command(propose(abs(&r.lib, "lib.rs"))).await.unwrap();
    let Event::PatchProposed(p) = until(&mut ev, "patch.proposed").await.pop().unwrap().event
    else {
        panic!()
    };
    assert_eq!(
        p.patch.files[0].path,
        abs(&r.lib, "lib.rs"),
        "named absolute"
    );
    h.command(CommandPayload::PatchApply(PatchApply::new(
        p.patch.patch_id.clone(),
    )))
    .await
    .unwrap();
    until(&mut ev, "patch.applied").await;
    assert_eq!(
        std::fs::read_to_string(r.lib.join("lib.rs")).unwrap(),
        "patched\n"
    );
    let e = h
        .command(propose(abs(&r.docs, "guide.md")))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::PathOutsideWorkspace, "{}", e.message);
    assert_eq!(e.details["access"], "read");
    assert_eq!(
        std::fs::read_to_string(r.docs.join("guide.md")).unwrap(),
        "the guide\n"
    );
}
