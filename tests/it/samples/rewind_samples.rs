//! Samples of the checkpoint, rewind, fork, side-question and worktree events.

use keel_envelope::events::{self as ev, EventType};
use keel_envelope::worktree::WorktreeInfo;
use keel_envelope::Event;

use super::{SESSION, T0};

fn s(v: &str) -> String {
    v.to_owned()
}

pub fn checkpoint_list() -> Event {
    Event::CheckpointList(ev::CheckpointList::new(vec![
        ev::CheckpointEntry::new(s("req_0002"), s("req_0002"), 1_700_000_000_000, Vec::new()),
        ev::CheckpointEntry::new(
            s("call_0001"),
            s("req_0002"),
            1_700_000_001_000,
            vec![ev::CheckpointFileChange::new(
                s("src/lib.rs"),
                ev::FileChangeKind::Modified,
            )],
        )
        .tool_call_id(s("call_0001"))
        .tool_name(s("run_shell")),
        ev::CheckpointEntry::new(
            s("ckpt_0001"),
            s("req_c008"),
            1_700_000_002_000,
            vec![ev::CheckpointFileChange::new(
                s("src/lib.rs"),
                ev::FileChangeKind::Modified,
            )],
        )
        .before_rewind_to(s("call_0001")),
    ]))
}

pub fn session_rewound() -> Event {
    Event::SessionRewound(
        ev::SessionRewound::new(
            vec![
                ev::RewoundFile::new(s("src/lib.rs"), ev::RewindAction::Reverted),
                ev::RewoundFile::new(s("build/out.txt"), ev::RewindAction::Removed),
            ],
            vec![ev::NotRestorableFile::new(
                s("assets/logo.png"),
                s("not saved: a binary file (not saved in checkpoints)"),
            )],
            true,
        )
        .undo_checkpoint_id(s("ckpt_0001"))
        .shared_with(vec![s("sess_0002")])
        .changed_by_others(vec![ev::ForeignFileChange::new(
            s("sess_0002"),
            s("build/out.txt"),
            ev::FileChangeKind::Created,
        )]),
    )
}

pub fn session_forked() -> Event {
    Event::SessionForked(
        ev::SessionForked::new(s("sess_0002"), s(SESSION))
            .at_request_id(s("req_0002"))
            .shared_with(vec![s(SESSION)]),
    )
}

/// The worktree of the sample session.
pub fn worktree() -> WorktreeInfo {
    WorktreeInfo::new(
        "/home/dev/.local/share/keel/worktrees/sess_0001",
        "keel/0001",
        "/home/dev/project",
        "9f4c2d7e1b3a5c6d8e0f1a2b3c4d5e6f7a8b9c0d",
        Some(s(SESSION)),
        T0,
    )
}

/// A sample of the worktree events.
pub fn worktree_event(t: EventType) -> Event {
    match t {
        EventType::WorktreeList => {
            Event::WorktreeList(ev::WorktreeList::new(vec![worktree().dirty(Some(true))]))
        }
        _ => {
            let mut w = worktree();
            w.path = s("/home/dev/.local/share/keel/worktrees/sess_0002");
            w.branch = s("keel/0002");
            w.session_id = Some(s("sess_0002"));
            Event::WorktreeRemoved(ev::WorktreeRemoved::new(w, false))
        }
    }
}

pub fn side_answered() -> Event {
    Event::SideAnswered(ev::SideAnswered::new(s("The parser is in src/parse.rs.")))
}
