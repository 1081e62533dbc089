//! Payloads of checkpoints, rewind, fork and side questions.

use super::*;

crate::wire::wire_enum! {
    /// How a file changed after a checkpoint.
    pub enum FileChangeKind {
        /// The file did not exist at the checkpoint.
        Created = "created",
        /// Its content, mode or link target changed.
        Modified = "modified",
        /// It existed at the checkpoint and was deleted.
        Deleted = "deleted",
    }
}

crate::wire::wire_enum! {
    /// What a rewind did to a file.
    pub enum RewindAction {
        /// Created after the checkpoint: removed.
        Removed = "removed",
        /// Deleted after the checkpoint: recreated.
        Recreated = "recreated",
        /// Modified after the checkpoint: put back.
        Reverted = "reverted",
    }
}

payloads! {
    /// A file changed after a checkpoint.
    pub struct CheckpointFileChange {
        /// Relative to the workspace, `/`-separated.
        pub path: String,
        /// How it changed.
        pub change: FileChangeKind,
    }

    /// One checkpoint: the workspace as it was just before a request or a tool call.
    pub struct CheckpointEntry {
        /// The checkpoint's id.
        pub checkpoint_id: String,
        /// The request it was taken in (before it started, or before one of its tool calls).
        pub request_id: String,
        /// The tool call it was taken before; absent for the checkpoint before the request.
        pub tool_call_id: Option<String>,
        /// The tool of that call.
        pub tool_name: Option<String>,
        /// When it was taken, ms since the epoch.
        pub created_at: u64,
        /// Files changed after it, up to the next checkpoint (for the last one: up to now).
        /// Rewinding to this checkpoint undoes at least these changes.
        pub files_changed: Vec<CheckpointFileChange>,
        /// Taken by a rewind (its `requestId` is the rewind's) just before it restored
        /// files: the checkpoint it went back to. Rewinding to this one undoes the
        /// rewind. Absent for the checkpoints of requests and tool calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub before_rewind_to: Option<String>,
    }

    /// `checkpoint.list`: the answer to `checkpoint.list`.
    pub struct CheckpointList {
        /// Oldest first.
        pub checkpoints: Vec<CheckpointEntry>,
        /// Why the session takes no checkpoints, when it does not (a store without a
        /// directory, a workspace over the file limit, an earlier failure).
        pub disabled_reason: Option<String>,
    }

    /// A file a rewind put back.
    pub struct RewoundFile {
        /// Relative to the workspace, `/`-separated.
        pub path: String,
        /// What was done.
        pub action: RewindAction,
    }

    /// A file a rewind could not put back.
    pub struct NotRestorableFile {
        /// Relative to the workspace, `/`-separated.
        pub path: String,
        /// Why (larger than the size limit, binary, a directory holding ignored files, …).
        pub reason: String,
    }

    /// `session.rewound`: the answer to `session.rewind`.
    pub struct SessionRewound {
        /// Files put back.
        pub files: Vec<RewoundFile>,
        /// Files left as they are, and why.
        pub not_restorable: Vec<NotRestorableFile>,
        /// Whether the conversation was cut back.
        pub conversation_cut: bool,
        /// The checkpoint holding the files as they were just before the rewind:
        /// rewinding to it (`toRequestId` or `toToolCallId`) undoes the rewind. Absent
        /// when no file was rewound (`files: false`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub undo_checkpoint_id: Option<String>,
        /// Other open sessions whose workspace is this one (a fork, or a session
        /// started on the same folder, in this process or another): the rewind
        /// changed their files too. Absent when there is none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub shared_with: Option<Vec<String>>,
        /// Files that other sessions' checkpoints recorded as changed after the
        /// checkpoint rewound to (a rewind of files puts them back too, so a host may
        /// warn). Absent when there is none, and when no file was rewound.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub changed_by_others: Option<Vec<ForeignFileChange>>,
    }

    /// A file another session of the same workspace changed.
    pub struct ForeignFileChange {
        /// The other session.
        pub session_id: String,
        /// Relative to the workspace, `/`-separated.
        pub path: String,
        /// How it changed (the last change that session recorded).
        pub change: FileChangeKind,
    }

    /// `session.forked`: the answer to `session.fork`, first event of the new session's
    /// log (its envelope carries the new session's id).
    pub struct SessionForked {
        /// The new session.
        pub session_id: String,
        /// The session it was forked from (unchanged).
        pub parent_session_id: String,
        /// The history was copied up to just before this request; absent: all of it.
        pub at_request_id: Option<String>,
        /// The other open sessions whose workspace the fork shares (the parent first,
        /// then sessions started on the same folder, in this process or another): the
        /// fork's edits and rewinds change their files. Absent when there is none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub shared_with: Option<Vec<String>>,
        /// The fork's own worktree (`isolation: "worktree"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub worktree: Option<WorktreeInfo>,
    }

    /// `side.answered`: the answer to `request.side`, on the side request's own stream.
    pub struct SideAnswered {
        /// The model's answer.
        pub text: String,
    }
}
