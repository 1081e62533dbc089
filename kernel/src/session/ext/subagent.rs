//! The sub-agent registry of a session (seed 002 §8): running sub-agents, and the
//! last [`RECENT_LIMIT`] finished ones (newest first). Pure bookkeeping; the child
//! loop itself is in `ext::child`.

use std::collections::VecDeque;

use keel_envelope::ext::{SubAgentInfo, SubAgentStatus};
use keel_envelope::types::Usage;
use keel_envelope::worktree::WorktreeInfo;
use keel_envelope::{ErrorCode, ErrorPayload};
use serde::{Deserialize, Serialize};

/// How many finished sub-agents are kept.
pub(crate) const RECENT_LIMIT: usize = 100;

/// Running and recently finished sub-agents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubAgents {
    pub(crate) active: Vec<SubAgentInfo>,
    pub(crate) recent: VecDeque<SubAgentInfo>,
}

/// The unknown sub-agent error.
pub(crate) fn not_found(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SubAgentNotFound,
        format!("no sub-agent {id:?} (unknown, or older than the last {RECENT_LIMIT})"),
    )
    .with_detail("subAgentId", id)
}

impl SubAgents {
    /// Records a started sub-agent.
    pub(crate) fn start(&mut self, info: SubAgentInfo) {
        self.active.push(info);
    }

    /// Adds a model turn and its usage; returns the snapshot.
    pub(crate) fn turn(&mut self, id: &str, usage: Usage) -> Option<SubAgentInfo> {
        let a = self.active.iter_mut().find(|a| a.sub_agent_id == id)?;
        a.turns += 1;
        a.usage.add(usage);
        Some(a.clone())
    }

    /// Records the patch that brings back a running sub-agent's changes.
    pub(crate) fn patched(&mut self, id: &str, patch_id: &str) {
        if let Some(a) = self.active.iter_mut().find(|a| a.sub_agent_id == id) {
            a.patch_id = Some(patch_id.to_owned());
        }
    }

    /// Moves a running sub-agent to the finished ones; returns its final snapshot.
    pub(crate) fn finish(
        &mut self,
        id: &str,
        outcome: Result<String, ErrorPayload>,
        now: u64,
    ) -> Option<SubAgentInfo> {
        let pos = self.active.iter().position(|a| a.sub_agent_id == id)?;
        let mut a = self.active.remove(pos);
        match outcome {
            Ok(summary) => {
                a.status = SubAgentStatus::Completed;
                a.summary = Some(summary);
            }
            Err(e) => {
                a.status = SubAgentStatus::Failed;
                a.error = Some(e);
            }
        }
        a.finished_at = Some(now);
        self.recent.push_front(a.clone());
        self.recent.truncate(RECENT_LIMIT);
        Some(a)
    }

    /// A sub-agent by id.
    pub(crate) fn get(&self, id: &str) -> Result<SubAgentInfo, ErrorPayload> {
        self.active
            .iter()
            .chain(self.recent.iter())
            .find(|a| a.sub_agent_id == id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    /// After a restart nothing is running any more: running entries become failed.
    /// Returns the worktrees they worked in (to be removed: nothing of them can come
    /// back).
    pub(crate) fn after_restart(&mut self, now: u64) -> Vec<WorktreeInfo> {
        let trees = self
            .active
            .iter()
            .filter_map(|a| a.worktree.clone())
            .collect();
        let ids: Vec<String> = self.active.iter().map(|a| a.sub_agent_id.clone()).collect();
        for id in ids {
            self.finish(
                &id,
                Err(ErrorPayload::new(
                    ErrorCode::Interrupted,
                    "the runtime stopped while the sub-agent ran",
                )),
                now,
            );
        }
        trees
    }

    /// Whether there is nothing to persist.
    pub(crate) fn is_empty(&self) -> bool {
        self.active.is_empty() && self.recent.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn info(id: &str) -> SubAgentInfo {
        SubAgentInfo::new(
            id,
            "sess",
            "req",
            "t",
            Vec::new(),
            SubAgentStatus::Running,
            Usage::default(),
            0,
            0,
        )
    }

    proptest! {
        /// A sub-agent is running or finished, never both; at most 100 finished are
        /// kept, newest first; finished ones carry a summary or an error.
        #[test]
        fn the_registry_keeps_its_shape(ops in proptest::collection::vec((0u8..3, 0usize..8), 0..300)) {
            let mut r = SubAgents::default();
            let mut n = 0u64;
            for (kind, pick) in ops {
                n += 1;
                match kind {
                    0 => r.start(info(&format!("sub_{n}"))),
                    _ => {
                        if let Some(id) = r.active.get(pick).map(|a| a.sub_agent_id.clone()) {
                            let out = if kind == 1 { Ok("sum".into()) } else { Err(ErrorPayload::new(ErrorCode::ModelError, "x")) };
                            let done = r.finish(&id, out, n).unwrap();
                            prop_assert_eq!(&r.recent[0], &done);
                            prop_assert!(r.get(&id).is_ok());
                        }
                    }
                }
                prop_assert!(r.recent.len() <= RECENT_LIMIT);
                for a in &r.active {
                    prop_assert_eq!(a.status.clone(), SubAgentStatus::Running);
                    prop_assert!(!r.recent.iter().any(|f| f.sub_agent_id == a.sub_agent_id));
                }
                for f in &r.recent {
                    prop_assert!(f.summary.is_some() != f.error.is_some());
                    prop_assert!(f.finished_at.is_some());
                }
                let times: Vec<u64> = r.recent.iter().filter_map(|f| f.finished_at).collect();
                prop_assert!(times.windows(2).all(|w| w[0] >= w[1]));
            }
            prop_assert_eq!(r.get("sub_none").unwrap_err().code, ErrorCode::SubAgentNotFound);
        }
    }
}
