//! Optional extensions (seed 002 §8, §12.5): review mode, patch preview and the
//! persistent task graph. Each is a layer a session only meets when it uses it: a
//! session that never does keeps an empty `extensions` map and behaves as before.
//!
//! The submodules are the pure state machines; this module holds them together as a
//! session's [`ExtState`] and keeps it in
//! [`PersistedSession::extensions`](crate::base::store::PersistedSession). The
//! extension commands are [`crate::commands::ext`]; the `task_graph` tool and the
//! patch preview are in the pipeline ([`crate::pipeline::task_graph`],
//! [`crate::pipeline::patch_preview`]); sub-agents and background processes run in
//! [`crate::work`].

pub(crate) mod background;
pub(crate) mod graph;
pub(crate) mod patch;
pub(crate) mod review;
pub(crate) mod subagent;

use std::collections::HashMap;

use keel_envelope::ext::{ReviewState, TaskGraph};
use keel_envelope::ErrorPayload;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::background::BackgroundBook;
use self::patch::PatchBook;
use self::subagent::SubAgents;

/// Key of the review in `extensions`.
const REVIEW_KEY: &str = "review";
/// Key of the patches in `extensions`.
const PATCHES_KEY: &str = "patches";
/// Key of the task graph in `extensions`.
const GRAPH_KEY: &str = "taskGraph";
/// Key of the background tasks in `extensions`.
const BACKGROUND_KEY: &str = "background";
/// Key of the sub-agents in `extensions`.
const SUB_AGENTS_KEY: &str = "subAgents";

/// A running background process: its stop switch and the task that waits for it
/// ([`crate::work::process`]).
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) stop: CancellationToken,
    pub(crate) waiter: JoinHandle<()>,
}

/// The extension state of a session.
#[derive(Debug, Default)]
pub(crate) struct ExtState {
    pub(crate) review: Option<ReviewState>,
    pub(crate) patches: PatchBook,
    pub(crate) graph: Option<TaskGraph>,
    pub(crate) sub_agents: SubAgents,
    pub(crate) background: BackgroundBook,
    /// Running background processes (not persisted).
    pub(crate) processes: HashMap<String, Running>,
    /// Keys whose stored value could not be read; they are left as they are.
    unreadable: Vec<&'static str>,
    /// The worktrees of sub-agents that were running when the state was saved (a
    /// process that died meanwhile), to be removed when the session opens; not
    /// stored.
    pub(crate) orphaned_trees: Vec<keel_envelope::worktree::WorktreeInfo>,
}

fn load_key<T: DeserializeOwned>(
    map: &serde_json::Map<String, serde_json::Value>,
    key: &'static str,
    unreadable: &mut Vec<&'static str>,
) -> Option<T> {
    let v = map.get(key)?;
    match serde_json::from_value(v.clone()) {
        Ok(t) => Some(t),
        Err(_) => {
            unreadable.push(key);
            None
        }
    }
}

impl ExtState {
    /// Reads the state kept in a session's `extensions`; sub-agents that were
    /// running when it was saved are recorded as failed.
    pub(crate) fn load(map: &serde_json::Map<String, serde_json::Value>, now: u64) -> Self {
        let mut unreadable = Vec::new();
        let review = load_key(map, REVIEW_KEY, &mut unreadable);
        let patches = load_key(map, PATCHES_KEY, &mut unreadable).unwrap_or_default();
        let graph = load_key(map, GRAPH_KEY, &mut unreadable);
        let mut sub_agents: SubAgents =
            load_key(map, SUB_AGENTS_KEY, &mut unreadable).unwrap_or_default();
        let orphaned_trees = sub_agents.after_restart(now);
        let mut background: BackgroundBook =
            load_key(map, BACKGROUND_KEY, &mut unreadable).unwrap_or_default();
        background.after_restart(now);
        Self {
            review,
            patches,
            graph,
            sub_agents,
            background,
            processes: HashMap::new(),
            unreadable,
            orphaned_trees,
        }
    }

    /// Writes the state into a session's `extensions` (only what is in use).
    pub(crate) fn save(&self, map: &mut serde_json::Map<String, serde_json::Value>) {
        let mut put = |key: &'static str, value: Option<serde_json::Value>| {
            if self.unreadable.contains(&key) {
                return;
            }
            match value {
                Some(v) => {
                    map.insert(key.to_owned(), v);
                }
                None => {
                    map.remove(key);
                }
            }
        };
        put(
            REVIEW_KEY,
            self.review
                .as_ref()
                .and_then(|r| serde_json::to_value(r).ok()),
        );
        put(
            PATCHES_KEY,
            (!self.patches.is_empty())
                .then(|| serde_json::to_value(&self.patches).ok())
                .flatten(),
        );
        put(
            BACKGROUND_KEY,
            (!self.background.is_empty())
                .then(|| serde_json::to_value(&self.background).ok())
                .flatten(),
        );
        put(
            SUB_AGENTS_KEY,
            (!self.sub_agents.is_empty())
                .then(|| serde_json::to_value(&self.sub_agents).ok())
                .flatten(),
        );
        put(
            GRAPH_KEY,
            self.graph
                .as_ref()
                .and_then(|g| serde_json::to_value(g).ok()),
        );
    }

    /// The refusal for `request.send` while a blocking review is pending.
    pub(crate) fn send_refusal(&self) -> Option<ErrorPayload> {
        self.review
            .as_ref()
            .filter(|r| review::is_blocking(Some(r)))
            .map(review::blocking_error)
    }
}
