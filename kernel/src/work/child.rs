//! Sub-agent runs (`spawn_sub_agent`): a child loop with its own history and a tool
//! set that is a subset of the parent's. Its model calls go through the turn engine
//! and its tool calls through the same pipeline as the parent's: the same gate, in the
//! parent's permission mode, with approvals asked on the parent request's stream, so
//! the same host answers them. Only the child's final text returns to the parent. The
//! child's calls are children of the parent request's cancellation token:
//! interrupting the parent stops it.
//!
//! With `isolation: "worktree"` (or the configuration's `worktrees.subAgents`) the
//! child works in a git worktree of its own ([`crate::session::worktree::SubTree`]):
//! made at the commit the parent's tree is on, given the parent's uncommitted
//! changes, its tool calls jailed to it. When it ends, what it changed there comes
//! back to the parent as a pending patch (`patch.proposed`), which the host applies
//! or rejects with `patch.apply` / `patch.reject`, and the worktree is removed. An
//! interrupt removes it too, and proposes nothing.

use std::sync::Arc;

use async_trait::async_trait;
use std::path::Path;

use keel_envelope::events::{PatchEvent, SubAgentEvent, SubAgentProgress};
use keel_envelope::ext::{Patch, SubAgentInfo, SubAgentStatus};
use keel_envelope::ids::IdKind;
use keel_envelope::worktree::Isolation;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::base::model::{Message, ModelRequest};
use crate::base::probe::Point;
use crate::base::prompt;
use crate::pipeline::{self, Interrupted};
use crate::session::ext::patch;
use crate::session::registry::{args_mismatch, Args, CallCx, CallScope, KernelHandler, Origin};
use crate::session::worktree::{self, SubTree};
use crate::session::Session;
use crate::work::turn::{self, Echo, TurnEnd};

enum ChildEnd {
    Done(String),
    Failed(ErrorPayload),
    Interrupted,
}

/// The tools a sub-agent may use: the requested ones (default: every tool its caller
/// may use, except the kernel's own), refused if any is not available to the caller.
fn child_tools(
    session: &Session,
    caller: Option<&[String]>,
    requested: Option<Vec<String>>,
) -> Result<Vec<String>, ErrorPayload> {
    let parent: Vec<String> = session
        .services
        .registry()
        .entries()
        .iter()
        .filter(|e| e.origin != Origin::Kernel)
        .map(|e| e.spec.name.clone())
        .filter(|n| caller.is_none_or(|c| c.contains(n)))
        .collect();
    let Some(requested) = requested else {
        return Ok(parent);
    };
    let wider: Vec<String> = requested
        .iter()
        .filter(|n| !parent.contains(n))
        .cloned()
        .collect();
    if !wider.is_empty() {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!(
                "a sub-agent may only use tools of its parent; not available: {}",
                wider.join(", ")
            ),
        )
        .with_detail("tools", wider));
    }
    let mut out: Vec<String> = Vec::new();
    for n in requested {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    Ok(out)
}

async fn progress(session: &Session, rid: &str, id: &str, message: String) {
    session
        .emitter
        .emit(
            rid,
            Event::SubAgentProgress(SubAgentProgress::new(
                session.id.clone(),
                id.to_owned(),
                message,
            )),
        )
        .await;
}

/// Where the sub-agent works: the call's `isolation`, else the configuration's.
fn isolation_of(session: &Session, given: Option<&Isolation>) -> Result<bool, ErrorPayload> {
    let default = &session.services.config().worktrees.sub_agent_isolation;
    worktree::isolation(given, default, "isolation")
        .map(|i| i == Isolation::Worktree)
        .map_err(|e| {
            ErrorPayload::new(ErrorCode::ToolArgumentsInvalid, e.message)
                .with_detail("toolName", crate::base::prompt::SPAWN_SUB_AGENT)
                .with_detail("field", "isolation")
        })
}

/// What came back of a sub-agent's worktree.
#[derive(Debug, Default)]
struct Returned {
    /// The pending patch of its changes (none when it changed nothing).
    patch: Option<Patch>,
    /// Changed files a patch cannot carry, with why.
    skipped: Vec<(String, &'static str)>,
    /// What went wrong reading its changes, if anything.
    error: Option<ErrorPayload>,
}

impl Returned {
    /// Its part of the tool's result.
    fn json(&self) -> serde_json::Value {
        let skipped: Vec<serde_json::Value> = self
            .skipped
            .iter()
            .map(|(path, reason)| serde_json::json!({"path": path, "reason": reason}))
            .collect();
        let mut v = serde_json::json!({
            "patchId": self.patch.as_ref().map(|p| p.patch_id.clone()),
            "stats": self.patch.as_ref().map(|p| p.stats),
            "files": self.patch.as_ref().map(|p| p.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>()),
        });
        if !skipped.is_empty() {
            v["skipped"] = serde_json::Value::Array(skipped);
        }
        if let Some(e) = &self.error {
            v["error"] = serde_json::to_value(e).unwrap_or_default();
        }
        v
    }

    /// What the model reads of it.
    fn text(&self) -> String {
        let mut out = match &self.patch {
            Some(p) => format!(
                "It worked in a git worktree of its own. Its changes ({} file{}, +{} -{}: {}) were NOT written to your workspace: they are proposed as patch {}, pending review by the user, who applies or rejects it.",
                p.stats.file_count,
                if p.stats.file_count == 1 { "" } else { "s" },
                p.stats.added,
                p.stats.removed,
                p.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>().join(", "),
                p.patch_id
            ),
            None if self.error.is_none() => {
                "It worked in a git worktree of its own and changed no files: there is no patch.".to_owned()
            }
            None => String::new(),
        };
        if !self.skipped.is_empty() {
            let list: Vec<String> = self
                .skipped
                .iter()
                .map(|(p, r)| format!("{p} ({r})"))
                .collect();
            out.push_str(&format!(
                " Changed files a patch cannot carry were left out: {}.",
                list.join(", ")
            ));
        }
        if let Some(e) = &self.error {
            out.push_str(&format!(
                " Its changes could not be read ({}: {}), so none came back.",
                e.code, e.message
            ));
        }
        out
    }
}

/// Reads what the sub-agent changed in its worktree, removes the worktree, and
/// proposes the changes to the parent as a pending patch (`patch.proposed`,
/// persisted like every patch).
async fn bring_back(session: &Session, rid: &str, id: &str, tree: SubTree) -> Returned {
    let max = keel_tools::fs::EDIT_MAX_BYTES;
    let (changes, removed) = tree.finish(max).await;
    if let Err(e) = removed {
        let warning = e.severity(keel_envelope::error::Severity::Warning);
        session.emitter.emit(rid, Event::Warning(warning)).await;
    }
    let changes = match changes {
        Ok(c) => c,
        Err(error) => {
            return Returned {
                error: Some(error),
                ..Returned::default()
            }
        }
    };
    let (files, skipped) = patch::from_tree_changes(changes);
    if files.is_empty() {
        return Returned {
            skipped,
            ..Returned::default()
        };
    }
    let p = patch::new_patch(
        session.services.next_id(IdKind::Patch),
        patch::SUB_AGENT_ORIGIN,
        Some(format!("the changes of sub-agent {id}")),
        Some(rid.to_owned()),
        files,
        session.now(),
    );
    {
        let mut d = session.data();
        d.ext.patches.propose(p.clone());
        d.ext.sub_agents.patched(id, &p.patch_id);
    }
    session
        .emit_persist(rid, Event::PatchProposed(PatchEvent::new(p.clone())))
        .await;
    Returned {
        patch: Some(p),
        skipped,
        error: None,
    }
}

/// `spawn_sub_agent {task, tools?, isolation?}`.
#[derive(Debug)]
pub(crate) struct SpawnSubAgent;

#[async_trait]
impl KernelHandler for SpawnSubAgent {
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<serde_json::Value, ErrorPayload> {
        let session = cx.session;
        let rid = cx.rid;
        let Args::SpawnSubAgent(a) = args else {
            return Err(args_mismatch(&cx.call.name));
        };
        if a.task.trim().is_empty() {
            return Err(ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                "the sub-agent's task is empty",
            ));
        }
        let isolated = isolation_of(session, a.isolation.as_ref())?;
        let tools = child_tools(session, cx.scope, a.tools)?;
        let task = a.task;
        let id = session.services.next_id(IdKind::SubAgent);
        // Made before the sub-agent starts: outside git the call fails here, with
        // nothing started and nothing left.
        let tree = match isolated {
            true => Some(worktree::sub_tree(session, &id).await?),
            false => None,
        };
        let info = SubAgentInfo::new(
            id.clone(),
            session.id.clone(),
            rid.to_owned(),
            task.clone(),
            tools.clone(),
            SubAgentStatus::Running,
            Default::default(),
            0,
            session.now(),
        )
        .worktree(tree.as_ref().map(|t| t.info.clone()));
        session.data().ext.sub_agents.start(info.clone());
        let ev = SubAgentEvent::new(session.id.clone(), id.clone(), info);
        // Saved with it: a process that dies while it runs leaves a record of its
        // worktree, removed when the session opens again.
        session.emit_persist(rid, Event::SubAgentStarted(ev)).await;
        // The sub-agent's `invoke_agent` span, under the tool call that spawned it:
        // its model and tool calls hang under it.
        let model = session.data().model.id();
        let (provider, model) = crate::base::trace::provider_model(&model);
        let agent = session
            .services
            .telemetry()
            .invoke_agent(keel_telemetry::AgentStart {
                agent_name: "sub-agent",
                agent_id: Some(&id),
                session_id: &session.id,
                request_id: rid,
                provider: Some(provider),
                model: Some(model),
                parent: keel_telemetry::Parent::Current,
            });
        agent.input_text(&task);
        // A task of its own: a sub-agent's calls run the whole pipeline again, and
        // polled inside the parent's call their frames would stack on the parent's
        // (a debug build overflowed the stack). Aborted with the call if the call is
        // dropped, as the child was when it ran inline.
        let work = {
            let (session, rid, id) = (session.clone(), rid.to_owned(), id.clone());
            let (task, tools, cancel) = (task.clone(), tools.clone(), cx.cancel.clone());
            let place = tree.as_ref().map(|t| t.workspace.clone());
            let run = async move {
                run_child(
                    &session,
                    &rid,
                    &id,
                    &task,
                    &tools,
                    place.as_deref(),
                    &cancel,
                )
                .await
            };
            ChildTask(tokio::spawn(tracing::Instrument::instrument(
                run,
                agent.span().clone(),
            )))
        };
        let end = work.end().await;
        let usage = session
            .data()
            .ext
            .sub_agents
            .active
            .iter()
            .find(|a| a.sub_agent_id == id)
            .map(|a| a.usage)
            .unwrap_or_default();
        if let ChildEnd::Done(text) = &end {
            agent.output_text(text);
        }
        agent.finish(keel_telemetry::RunEnd {
            input_tokens: Some(usage.input_tokens),
            output_tokens: Some(usage.output_tokens),
            error_type: match &end {
                ChildEnd::Done(_) => None,
                ChildEnd::Failed(e) => Some(crate::base::trace::error_type(e)),
                ChildEnd::Interrupted => Some("interrupted"),
            },
        });
        // Its changes come back unless it was interrupted; an interrupted one's
        // worktree goes (dropped here, removed before the request ends).
        let returned = match (tree, &end) {
            (Some(t), ChildEnd::Done(_) | ChildEnd::Failed(_)) if !cx.cancel.is_cancelled() => {
                Some(bring_back(session, rid, &id, t).await)
            }
            _ => None,
        };
        let outcome = match &end {
            ChildEnd::Done(text) => Ok(text.clone()),
            ChildEnd::Failed(e) => Err(e.clone()),
            ChildEnd::Interrupted => Err(ErrorPayload::new(
                ErrorCode::Interrupted,
                "the parent request was interrupted",
            )),
        };
        let finished = session
            .data()
            .ext
            .sub_agents
            .finish(&id, outcome.clone(), session.now());
        if let Some(info) = finished {
            let ev = SubAgentEvent::new(session.id.clone(), id.clone(), info);
            let event = match end {
                ChildEnd::Done(_) => Event::SubAgentCompleted(ev),
                _ => Event::SubAgentFailed(ev),
            };
            session.emitter.emit(rid, event).await;
        }
        let text = match (outcome, &returned) {
            (Ok(text), _) => text,
            (Err(mut e), Some(r)) => {
                // A failed sub-agent's changes still come back.
                if let Some(p) = &r.patch {
                    e = e.with_detail("patchId", p.patch_id.clone());
                }
                e.message = format!("{} {}", e.message, r.text());
                return Err(e);
            }
            (Err(e), None) => return Err(e),
        };
        let mut message = format!("Sub-agent {id} finished. Its summary:\n{text}");
        let mut result = serde_json::json!({
            "subAgentId": id,
            "summary": text,
        });
        if let Some(r) = &returned {
            message.push_str("\n\n");
            message.push_str(&r.text());
            result["patch"] = r.json();
        }
        result["message"] = serde_json::Value::String(message);
        Ok(result)
    }
}

/// A sub-agent's run on a task of its own, aborted when dropped.
struct ChildTask(tokio::task::JoinHandle<ChildEnd>);

impl ChildTask {
    async fn end(mut self) -> ChildEnd {
        match (&mut self.0).await {
            Ok(end) => end,
            Err(e) => ChildEnd::Failed(ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                format!("the sub-agent's run failed: {e}"),
            )),
        }
    }
}

impl Drop for ChildTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn run_child(
    session: &Arc<Session>,
    rid: &str,
    id: &str,
    task: &str,
    tools: &[String],
    place: Option<&Path>,
    cancel: &CancellationToken,
) -> ChildEnd {
    let defs: std::sync::Arc<[crate::base::model::ToolDef]> =
        session.services.registry().defs_of(tools).into();
    let mut history = crate::base::model::History::new();
    history.push(Message::User {
        text: task.to_owned(),
        images: Vec::new(),
    });
    let workspace = place.unwrap_or(&session.workspace);
    let scope = CallScope {
        tools: Some(tools),
        workspace: place,
    };
    let max_turns = session.services.config().max_turns.max(1);
    for turn in 1..=max_turns {
        if cancel.is_cancelled() {
            return ChildEnd::Interrupted;
        }
        let (model, system) = {
            let d = session.data();
            let (mut system, _) = prompt::system_prompt(
                workspace,
                session.services.config().system_prompt.as_deref(),
                d.state.mode.clone(),
            );
            system.push_str(&crate::session::roots::prompt_section(&d.roots));
            system.push_str(
                "\nYou are a sub-agent: another agent gave you the task below. Do it with the tools you have, \
then answer with a short summary of what you found or did; only that summary reaches the other agent.\n",
            );
            if place.is_some() {
                system.push_str(&format!(
                    "You work in a git worktree of your own at {}, holding the other agent's files as they were when you started. \
Your edits and commands stay there; when you finish, what you changed is handed back as a patch for the user to review.\n",
                    workspace.display()
                ));
            }
            (d.model.clone(), system)
        };
        let request = ModelRequest {
            system,
            messages: history.clone(),
            tools: defs.clone(),
            max_output_tokens: crate::work::budget::session_output_cap(session),
        };
        session.probe(Point::SubAgentTurn, rid).await;
        let echo = Echo {
            session,
            rid,
            deltas: false,
        };
        let out = turn::stream(&model, request, cancel, echo).await;
        session.data().state.usage.add(out.usage);
        session.data().ext.sub_agents.turn(id, out.usage);
        match out.end {
            TurnEnd::Interrupted => return ChildEnd::Interrupted,
            TurnEnd::Failed(e) => return ChildEnd::Failed(e),
            TurnEnd::Finished(_) => {}
        }
        history.push(Message::Assistant {
            text: out.text.clone(),
            tool_calls: out.calls.clone(),
        });
        if out.calls.is_empty() {
            return ChildEnd::Done(out.text);
        }
        let names: Vec<&str> = out.calls.iter().map(|c| c.name.as_str()).collect();
        progress(
            session,
            rid,
            id,
            format!("turn {turn}: {}", names.join(", ")),
        )
        .await;
        for call in &out.calls {
            let (content, is_error) =
                match Box::pin(pipeline::run_call(session, rid, call, cancel, scope)).await {
                    Ok(r) => r,
                    Err(Interrupted) => return ChildEnd::Interrupted,
                };
            history.push(Message::Tool {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
    }
    ChildEnd::Failed(
        ErrorPayload::new(
            ErrorCode::MaxTurnsExceeded,
            format!("the sub-agent reached its limit of {max_turns} model calls"),
        )
        .with_detail("maxTurns", max_turns),
    )
}
