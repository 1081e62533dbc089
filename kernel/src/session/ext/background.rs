//! Background shell tasks of a session (seed 002 §8 harness): their records and
//! output lines. Pure bookkeeping; the processes are run by `ext::process`.

use std::collections::{BTreeMap, VecDeque};

use keel_envelope::ext::{BackgroundStatus, BackgroundTask};
use keel_envelope::{ErrorCode, ErrorPayload};
use serde::{Deserialize, Serialize};

/// Output lines kept per task (the oldest are dropped).
pub(crate) const LINES_LIMIT: usize = 1000;
/// Lines in `outputTail`.
pub(crate) const TAIL_LINES: usize = 20;

/// The session's background tasks, oldest first, and their output.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BackgroundBook {
    pub(crate) tasks: Vec<BackgroundTask>,
    pub(crate) lines: BTreeMap<String, VecDeque<String>>,
}

/// The unknown task error.
pub(crate) fn not_found(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::BackgroundTaskNotFound,
        format!("no background task {id:?}"),
    )
    .with_detail("taskId", id)
}

impl BackgroundBook {
    /// Records a started task.
    pub(crate) fn start(&mut self, task: BackgroundTask) {
        self.lines.insert(task.task_id.clone(), VecDeque::new());
        self.tasks.push(task);
    }

    /// Adds an output line.
    pub(crate) fn output(&mut self, id: &str, line: String) {
        let Some(lines) = self.lines.get_mut(id) else {
            return;
        };
        lines.push_back(line);
        while lines.len() > LINES_LIMIT {
            lines.pop_front();
        }
        let tail: Vec<&str> = lines
            .iter()
            .skip(lines.len().saturating_sub(TAIL_LINES))
            .map(String::as_str)
            .collect();
        let tail = tail.join("\n");
        if let Some(t) = self.tasks.iter_mut().find(|t| t.task_id == id) {
            t.output_tail = tail;
        }
    }

    /// Ends a running task (the first end wins); returns the record.
    pub(crate) fn end(
        &mut self,
        id: &str,
        status: BackgroundStatus,
        exit_code: Option<i32>,
        now: u64,
    ) -> Option<BackgroundTask> {
        let t = self.tasks.iter_mut().find(|t| t.task_id == id)?;
        if t.status == BackgroundStatus::Running && status != BackgroundStatus::Running {
            t.status = status;
            t.exit_code = exit_code;
            t.ended_at = Some(now);
        }
        Some(t.clone())
    }

    /// A task by id.
    pub(crate) fn get(&self, id: &str) -> Result<BackgroundTask, ErrorPayload> {
        self.tasks
            .iter()
            .find(|t| t.task_id == id)
            .cloned()
            .ok_or_else(|| not_found(id))
    }

    /// A task's output lines, oldest first.
    pub(crate) fn history(&self, id: &str) -> Result<Vec<String>, ErrorPayload> {
        self.get(id)?;
        Ok(self
            .lines
            .get(id)
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// After a restart no process is left: running tasks become stopped.
    pub(crate) fn after_restart(&mut self, now: u64) {
        for t in &mut self.tasks {
            if t.status == BackgroundStatus::Running {
                t.status = BackgroundStatus::Stopped;
                t.ended_at = Some(now);
            }
        }
    }

    /// Whether there is nothing to persist.
    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The tasks still running.
    pub(crate) fn running(&self) -> impl Iterator<Item = &BackgroundTask> {
        self.tasks
            .iter()
            .filter(|t| t.status == BackgroundStatus::Running)
    }

    /// Whether a task still runs.
    pub(crate) fn has_running(&self) -> bool {
        self.running().next().is_some()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn task(id: &str) -> BackgroundTask {
        BackgroundTask::new(
            id,
            "sess",
            "true",
            BackgroundStatus::Running,
            0,
            String::new(),
        )
    }

    proptest! {
        /// An ended task never runs again and keeps its first end; output is capped
        /// and the tail is the last lines.
        #[test]
        fn tasks_end_once_and_output_is_capped(ops in proptest::collection::vec((0u8..4, 0usize..4), 0..400)) {
            let mut b = BackgroundBook::default();
            let mut n = 0u64;
            for (kind, pick) in ops {
                n += 1;
                let id = b.tasks.get(pick).map(|t| t.task_id.clone());
                let before = b.clone();
                match (kind, id) {
                    (0, _) => b.start(task(&format!("bg_{n}"))),
                    (1, Some(id)) => b.output(&id, format!("line {n}")),
                    (2, Some(id)) => { b.end(&id, BackgroundStatus::Exited, Some(0), n); }
                    (3, Some(id)) => { b.end(&id, BackgroundStatus::Stopped, None, n); }
                    _ => {}
                }
                for old in &before.tasks {
                    let now = b.get(&old.task_id).unwrap();
                    if old.status != BackgroundStatus::Running {
                        prop_assert_eq!((now.status, now.ended_at, now.exit_code), (old.status.clone(), old.ended_at, old.exit_code));
                    }
                }
                for t in &b.tasks {
                    let lines = b.history(&t.task_id).unwrap();
                    prop_assert!(lines.len() <= LINES_LIMIT);
                    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
                    prop_assert_eq!(&t.output_tail, &tail);
                    prop_assert_eq!(t.status == BackgroundStatus::Running, t.ended_at.is_none());
                }
            }
            prop_assert_eq!(b.get("bg_none").unwrap_err().code, ErrorCode::BackgroundTaskNotFound);
        }
    }
}
