//! Samples of the checkpoint, rewind, fork and side-question events.

use keel_envelope::events as ev;
use keel_envelope::Event;

use super::SESSION;

fn s(v: &str) -> String {
    v.to_owned()
}

pub fn checkpoint_list() -> Event {
    Event::CheckpointList(ev::CheckpointList {
        checkpoints: vec![
            ev::CheckpointEntry {
                checkpoint_id: s("req_0002"),
                request_id: s("req_0002"),
                tool_call_id: None,
                tool_name: None,
                created_at: 1_700_000_000_000,
                files_changed: Vec::new(),
                before_rewind_to: None,
            },
            ev::CheckpointEntry {
                checkpoint_id: s("call_0001"),
                request_id: s("req_0002"),
                tool_call_id: Some(s("call_0001")),
                tool_name: Some(s("run_shell")),
                created_at: 1_700_000_001_000,
                files_changed: vec![ev::CheckpointFileChange {
                    path: s("src/lib.rs"),
                    change: ev::FileChangeKind::Modified,
                }],
                before_rewind_to: None,
            },
            ev::CheckpointEntry {
                checkpoint_id: s("ckpt_0001"),
                request_id: s("req_c008"),
                tool_call_id: None,
                tool_name: None,
                created_at: 1_700_000_002_000,
                files_changed: vec![ev::CheckpointFileChange {
                    path: s("src/lib.rs"),
                    change: ev::FileChangeKind::Modified,
                }],
                before_rewind_to: Some(s("call_0001")),
            },
        ],
        disabled_reason: None,
    })
}

pub fn session_rewound() -> Event {
    Event::SessionRewound(ev::SessionRewound {
        files: vec![
            ev::RewoundFile {
                path: s("src/lib.rs"),
                action: ev::RewindAction::Reverted,
            },
            ev::RewoundFile {
                path: s("build/out.txt"),
                action: ev::RewindAction::Removed,
            },
        ],
        not_restorable: vec![ev::NotRestorableFile {
            path: s("assets/logo.png"),
            reason: s("not saved: a binary file (not saved in checkpoints)"),
        }],
        conversation_cut: true,
        undo_checkpoint_id: Some(s("ckpt_0001")),
        shared_with: Some(vec![s("sess_0002")]),
        changed_by_others: Some(vec![ev::ForeignFileChange {
            session_id: s("sess_0002"),
            path: s("build/out.txt"),
            change: ev::FileChangeKind::Created,
        }]),
    })
}

pub fn session_forked() -> Event {
    Event::SessionForked(ev::SessionForked {
        session_id: s("sess_0002"),
        parent_session_id: s(SESSION),
        at_request_id: Some(s("req_0002")),
        shared_with: Some(vec![s(SESSION)]),
    })
}

pub fn side_answered() -> Event {
    Event::SideAnswered(ev::SideAnswered {
        text: s("The parser is in src/parse.rs."),
    })
}
