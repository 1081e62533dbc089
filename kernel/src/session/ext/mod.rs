//! Optional extensions (seed 002 §8, §12.5): review mode, patch preview and the
//! persistent task graph. Each is a layer a session only meets when it uses it: a
//! session that never does keeps an empty `extensions` map and behaves as before.
//!
//! The submodules hold the pure state transitions; this module is the glue: it runs
//! the extension commands of a session, the `task_graph` kernel tool and the patch
//! preview of `edit_file` / `write_file`, emits the events and keeps the state in
//! [`PersistedSession::extensions`](crate::base::store::PersistedSession).

pub(crate) mod background;
pub(crate) mod graph;
pub(crate) mod patch;
pub(crate) mod review;
pub(crate) mod subagent;

use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::commands::{CommandPayload, NewTaskNode, NodeUpdates};
use keel_envelope::events::{
    BackgroundEvent, BackgroundHistory, BackgroundList, PatchEvent, PatchSummary, ReviewEvent,
    ReviewStateEvent, SubAgentGet, SubAgentList, TaskGraphAdvanced, TaskGraphEvent,
    TaskGraphNodeEvent,
};
use keel_envelope::ext::{NodeStatus, PatchStatus, ReviewState, TaskGraph};
use keel_envelope::ids::IdKind;
use keel_envelope::kernel_tools::{TaskGraphAction, TaskGraphArgs};
use keel_envelope::tools::{EditFileArgs, WriteFileArgs};
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use keel_tools::spec::Analysis;
use keel_tools::ToolContext;
use keel_tools::ToolSpec;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::base::model::ToolCallRequest;
use crate::pipeline::CallCx;
use crate::session::registry::{KernelHandler, Stage};
use crate::session::Session;

use self::background::BackgroundBook;
use self::patch::PatchBook;
use self::subagent::SubAgents;
use std::collections::HashMap;

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

/// Who acts through a command.
const HOST: &str = "host";

/// The extension state of a session.
#[derive(Debug, Default)]
pub(crate) struct ExtState {
    pub(crate) review: Option<ReviewState>,
    pub(crate) patches: PatchBook,
    pub(crate) graph: Option<TaskGraph>,
    pub(crate) sub_agents: SubAgents,
    pub(crate) background: BackgroundBook,
    /// Running background processes (not persisted).
    pub(crate) processes: HashMap<String, crate::work::process::Running>,
    /// Keys whose stored value could not be read; they are left as they are.
    unreadable: Vec<&'static str>,
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
        sub_agents.after_restart(now);
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

/// A task-graph operation, from a command or from the `task_graph` tool.
#[derive(Debug)]
enum GraphOp {
    Create {
        title: Option<String>,
        description: Option<String>,
        nodes: Vec<NewTaskNode>,
    },
    AddNode(NewTaskNode),
    UpdateNode {
        node_id: String,
        updates: NodeUpdates,
    },
    Advance,
    State,
}

/// What a graph operation left.
struct GraphOutcome {
    graph: Option<TaskGraph>,
    became_ready: Vec<String>,
}

fn no_graph() -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::GraphNotFound,
        "the session has no task graph (create one first)",
    )
}

impl Session {
    /// Runs an extension command; `Ok(false)` when `payload` is not one.
    pub(crate) async fn handle_ext(
        self: &Arc<Self>,
        rid: &str,
        payload: &CommandPayload,
    ) -> Result<bool, ErrorPayload> {
        let now = self.now();
        match payload {
            CommandPayload::ReviewEnter(p) => {
                let id = self.services.next_id(IdKind::Review);
                let r = {
                    let mut d = self.data();
                    review::enter(
                        &mut d.ext.review,
                        id,
                        &p.reason,
                        p.blocking,
                        p.checklist.as_deref().unwrap_or(&[]),
                        HOST,
                        now,
                    )?
                };
                self.emit_persist(rid, Event::ReviewRequested(ReviewEvent { review: r }))
                    .await;
            }
            CommandPayload::ReviewSubmit(p) => {
                let r = {
                    let mut d = self.data();
                    review::submit(
                        &mut d.ext.review,
                        p.comment.as_deref(),
                        p.checklist_item.as_ref(),
                        HOST,
                        now,
                    )?
                };
                self.emit_persist(rid, Event::ReviewUpdated(ReviewEvent { review: r }))
                    .await;
            }
            CommandPayload::ReviewResolve(p) => {
                let r = {
                    let mut d = self.data();
                    review::resolve(
                        &mut d.ext.review,
                        p.decision,
                        p.summary.as_deref(),
                        HOST,
                        now,
                    )?
                };
                self.emit_persist(rid, Event::ReviewResolved(ReviewEvent { review: r }))
                    .await;
            }
            CommandPayload::ReviewStatus(_) => {
                let ev = {
                    let d = self.data();
                    ReviewStateEvent {
                        review: d.ext.review.clone(),
                        blocking: review::is_blocking(d.ext.review.as_ref()),
                    }
                };
                self.emitter.emit(rid, Event::ReviewState(ev)).await;
            }
            CommandPayload::PatchPropose(p) => {
                if p.files.is_empty() {
                    return Err(ErrorPayload::new(
                        ErrorCode::RequestInvalid,
                        "a patch needs at least one file",
                    )
                    .with_detail("field", "payload.files"));
                }
                let mut files = Vec::with_capacity(p.files.len());
                for (i, f) in p.files.iter().enumerate() {
                    let (display, _, before) = patch::read_current(&self.workspace, &f.path)
                        .map_err(|e| e.with_detail("field", format!("payload.files[{i}].path")))?;
                    if files
                        .iter()
                        .any(|x: &keel_envelope::ext::PatchFile| x.path == display)
                    {
                        return Err(ErrorPayload::new(
                            ErrorCode::RequestInvalid,
                            format!("`{}` appears twice in the patch", f.path),
                        )
                        .with_detail("field", format!("payload.files[{i}].path")));
                    }
                    if before.is_none() && f.content.is_none() {
                        return Err(ErrorPayload::new(
                            ErrorCode::RequestInvalid,
                            format!("`{}` does not exist; there is nothing to delete", f.path),
                        )
                        .with_detail("field", format!("payload.files[{i}].content")));
                    }
                    files.push(patch::file_change(
                        i as u32,
                        &display,
                        before,
                        f.content.clone(),
                    ));
                }
                let id = self.services.next_id(IdKind::Patch);
                let patch =
                    patch::new_patch(id, HOST, p.reason.clone(), Some(rid.to_owned()), files, now);
                self.data().ext.patches.propose(patch.clone());
                self.emit_persist(rid, Event::PatchProposed(PatchEvent { patch }))
                    .await;
            }
            CommandPayload::PatchApply(p) => {
                // Taken out while it is written, so a second apply cannot race it.
                let taken = self.data().ext.patches.take(&p.patch_id)?;
                let written = patch::write_patch(&self.workspace, &taken);
                let resolved = {
                    let mut d = self.data();
                    match written {
                        Ok(()) => {
                            Ok(d.ext
                                .patches
                                .resolve(taken, PatchStatus::Applied, HOST, None, now))
                        }
                        Err(e) => {
                            d.ext.patches.restore(taken);
                            Err(e)
                        }
                    }
                };
                let patch = resolved?;
                self.emit_persist(rid, Event::PatchApplied(PatchEvent { patch }))
                    .await;
            }
            CommandPayload::PatchReject(p) => {
                let patch = {
                    let mut d = self.data();
                    let taken = d.ext.patches.take(&p.patch_id)?;
                    d.ext
                        .patches
                        .resolve(taken, PatchStatus::Rejected, HOST, p.reason.clone(), now)
                };
                self.emit_persist(rid, Event::PatchRejected(PatchEvent { patch }))
                    .await;
            }
            CommandPayload::PatchSummary(_) => {
                let ev = {
                    let d = self.data();
                    PatchSummary {
                        pending: d.ext.patches.pending.clone(),
                        history: d.ext.patches.history.clone(),
                        totals: d.ext.patches.totals(),
                    }
                };
                self.emitter.emit(rid, Event::PatchSummary(ev)).await;
            }
            CommandPayload::TaskGraphCreate(p) => {
                self.graph_op(
                    rid,
                    GraphOp::Create {
                        title: p.title.clone(),
                        description: p.description.clone(),
                        nodes: p.nodes.clone(),
                    },
                )
                .await?;
            }
            CommandPayload::TaskGraphAddNode(p) => {
                self.graph_op(rid, GraphOp::AddNode(p.node.clone())).await?;
            }
            CommandPayload::TaskGraphUpdateNode(p) => {
                self.graph_op(
                    rid,
                    GraphOp::UpdateNode {
                        node_id: p.node_id.clone(),
                        updates: p.updates.clone(),
                    },
                )
                .await?;
            }
            CommandPayload::TaskGraphAdvance(_) => {
                self.graph_op(rid, GraphOp::Advance).await?;
            }
            CommandPayload::TaskGraphState(_) => {
                self.graph_op(rid, GraphOp::State).await?;
            }
            CommandPayload::SubAgentList(_) => {
                let ev = {
                    let d = self.data();
                    SubAgentList {
                        active: d.ext.sub_agents.active.clone(),
                        recent: d.ext.sub_agents.recent.iter().cloned().collect(),
                    }
                };
                self.emitter.emit(rid, Event::SubAgentList(ev)).await;
            }
            CommandPayload::SubAgentGet(p) => {
                let sub_agent = self.data().ext.sub_agents.get(&p.sub_agent_id)?;
                self.emitter
                    .emit(rid, Event::SubAgentGet(SubAgentGet { sub_agent }))
                    .await;
            }
            CommandPayload::BackgroundList(_) => {
                let tasks = self.data().ext.background.tasks.clone();
                self.emitter
                    .emit(rid, Event::BackgroundList(BackgroundList { tasks }))
                    .await;
            }
            CommandPayload::BackgroundGet(p) => {
                let task = self.data().ext.background.get(&p.task_id)?;
                self.emitter
                    .emit(rid, Event::BackgroundGet(BackgroundEvent { task }))
                    .await;
            }
            CommandPayload::BackgroundHistory(p) => {
                let lines = self.data().ext.background.history(&p.task_id)?;
                self.emitter
                    .emit(
                        rid,
                        Event::BackgroundHistory(BackgroundHistory {
                            task_id: p.task_id.clone(),
                            lines,
                        }),
                    )
                    .await;
            }
            CommandPayload::BackgroundStop(p) => {
                let task = crate::work::process::stop(self, &p.task_id).await?;
                self.emit_persist(rid, Event::BackgroundStopped(BackgroundEvent { task }))
                    .await;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    async fn emit_persist(&self, rid: &str, event: Event) {
        self.emitter.emit(rid, event).await;
        self.persist(rid).await;
    }

    /// Runs a graph operation and emits its events on `rid`'s stream: the answer
    /// first, then `task-graph.completed` when the graph just became terminal.
    async fn graph_op(&self, rid: &str, op: GraphOp) -> Result<GraphOutcome, ErrorPayload> {
        let now = self.now();
        let mut events = Vec::new();
        let mut became_ready = Vec::new();
        let mutated = !matches!(op, GraphOp::State);
        let graph = {
            let mut d = self.data();
            match op {
                GraphOp::Create {
                    title,
                    description,
                    nodes,
                } => {
                    let id = self.services.next_id(IdKind::Graph);
                    let g = graph::create(id, title, description, &nodes, now)?;
                    events.push(Event::TaskGraphCreated(TaskGraphEvent {
                        graph: Some(g.clone()),
                    }));
                    d.ext.graph = Some(g);
                }
                GraphOp::State => {
                    events.push(Event::TaskGraphState(TaskGraphEvent {
                        graph: d.ext.graph.clone(),
                    }));
                }
                GraphOp::AddNode(n) => {
                    let g = d.ext.graph.as_mut().ok_or_else(no_graph)?;
                    let node = graph::add_node(g, &n, now)?;
                    graph::settle(g, now);
                    events.push(Event::TaskGraphNodeAdded(TaskGraphNodeEvent {
                        graph_id: g.graph_id.clone(),
                        node,
                    }));
                }
                GraphOp::UpdateNode { node_id, updates } => {
                    let g = d.ext.graph.as_mut().ok_or_else(no_graph)?;
                    let node = graph::update_node(g, &node_id, &updates, now)?;
                    let done = graph::settle(g, now);
                    let ev = TaskGraphNodeEvent {
                        graph_id: g.graph_id.clone(),
                        node,
                    };
                    events.push(match ev.node.status {
                        NodeStatus::Completed => Event::TaskGraphNodeCompleted(ev),
                        NodeStatus::Failed => Event::TaskGraphNodeFailed(ev),
                        _ => Event::TaskGraphNodeUpdated(ev),
                    });
                    if done {
                        events.push(Event::TaskGraphCompleted(TaskGraphEvent {
                            graph: Some(g.clone()),
                        }));
                    }
                }
                GraphOp::Advance => {
                    let g = d.ext.graph.as_mut().ok_or_else(no_graph)?;
                    became_ready = graph::advance(g, now);
                    let done = graph::settle(g, now);
                    events.push(Event::TaskGraphAdvanced(TaskGraphAdvanced {
                        graph_id: g.graph_id.clone(),
                        became_ready: became_ready.clone(),
                        graph: g.clone(),
                    }));
                    if done {
                        events.push(Event::TaskGraphCompleted(TaskGraphEvent {
                            graph: Some(g.clone()),
                        }));
                    }
                }
            }
            d.ext.graph.clone()
        };
        for ev in events {
            self.emitter.emit(rid, ev).await;
        }
        if mutated {
            self.persist(rid).await;
        }
        Ok(GraphOutcome {
            graph,
            became_ready,
        })
    }
}

fn tool_args_error(message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ToolArgumentsInvalid, message).with_detail("tool", "task_graph")
}

fn graph_op_of(args: TaskGraphArgs) -> Result<GraphOp, ErrorPayload> {
    Ok(match args.action {
        TaskGraphAction::Create => GraphOp::Create {
            title: args.title,
            description: args.description,
            nodes: args.nodes.unwrap_or_default(),
        },
        TaskGraphAction::AddNode => GraphOp::AddNode(
            args.node
                .ok_or_else(|| tool_args_error("add_node needs `node`"))?,
        ),
        TaskGraphAction::UpdateNode => GraphOp::UpdateNode {
            node_id: args
                .node_id
                .ok_or_else(|| tool_args_error("update_node needs `nodeId`"))?,
            updates: args
                .updates
                .ok_or_else(|| tool_args_error("update_node needs `updates`"))?,
        },
        TaskGraphAction::Advance => GraphOp::Advance,
        TaskGraphAction::State => GraphOp::State,
    })
}

/// The `task_graph` kernel tool: the same operations as the commands, on the
/// request's stream.
#[derive(Debug)]
pub(crate) struct TaskGraphTool;

#[async_trait]
impl KernelHandler for TaskGraphTool {
    async fn run(&self, cx: &CallCx<'_>) -> Result<serde_json::Value, ErrorPayload> {
        let args: TaskGraphArgs = crate::pipeline::kernel_tools::args(cx)?;
        let out = cx.session.graph_op(cx.rid, graph_op_of(args)?).await?;
        let mut message = match &out.graph {
            Some(g) => graph::describe(g),
            None => "There is no task graph yet.".to_owned(),
        };
        if !out.became_ready.is_empty() {
            message.push_str(&format!("Now ready: {}\n", out.became_ready.join(", ")));
        }
        Ok(serde_json::json!({
            "graph": out.graph,
            "becameReady": out.became_ready,
            "message": message,
        }))
    }
}

fn parse<T: DeserializeOwned>(call: &ToolCallRequest) -> Result<T, ErrorPayload> {
    keel_tools::fs::parse_args(&call.name, call.arguments.clone())
}

/// Computes the change of an `edit_file` / `write_file` call in memory, with the
/// tool's own semantics, and records it as a pending patch.
fn propose_from_call(
    session: &Session,
    rid: &str,
    call: &ToolCallRequest,
) -> Result<keel_envelope::ext::Patch, ErrorPayload> {
    let ctx = ToolContext {
        workspace: session.workspace.clone(),
        cancel: CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: session.services.config().sandbox.clone(),
    };
    let file = if call.name == "edit_file" {
        let args: EditFileArgs = parse(call)?;
        let (r, old, new, _) = keel_tools::fs::plan_edit(&args, &ctx)?;
        patch::file_change(0, &r.display, Some(old), Some(new))
    } else {
        let args: WriteFileArgs = parse(call)?;
        let (r, old) = keel_tools::fs::plan_write(&args, &ctx)?;
        patch::file_change(0, &r.display, old, Some(args.content))
    };
    let id = session.services.next_id(IdKind::Patch);
    let p = patch::new_patch(
        id,
        "tool",
        Some(format!("{} by the model", call.name)),
        Some(rid.to_owned()),
        vec![file],
        session.now(),
    );
    session.data().ext.patches.propose(p.clone());
    Ok(p)
}

/// Patch preview: an allowed `edit_file` / `write_file` call of a request that
/// previews edits is proposed as a patch instead of written. `patch.proposed` is
/// emitted and the model learns that the change awaits review.
#[derive(Debug)]
pub(crate) struct PatchPreview;

#[async_trait]
impl Stage for PatchPreview {
    fn claims(&self, session: &Session, spec: &ToolSpec, _call: &ToolCallRequest) -> bool {
        matches!(spec.analysis, Analysis::Edit | Analysis::Write)
            && session
                .data()
                .active
                .as_ref()
                .is_some_and(|a| a.patch_preview)
    }

    async fn run(&self, cx: &CallCx<'_>) -> Result<serde_json::Value, ErrorPayload> {
        let p = propose_from_call(cx.session, cx.rid, cx.call)?;
        cx.session
            .emitter
            .emit(
                cx.rid,
                Event::PatchProposed(PatchEvent { patch: p.clone() }),
            )
            .await;
        let path = p.files.first().map(|f| f.path.clone()).unwrap_or_default();
        let message = format!(
            "The change to `{path}` was NOT written: it is proposed as patch {} and is pending review by the user. Continue as if it will be applied, and do not propose the same change again.",
            p.patch_id
        );
        Ok(serde_json::json!({
            "patchId": p.patch_id,
            "status": "pending",
            "path": path,
            "stats": p.stats,
            "diff": p.files.first().map(|f| f.diff.clone()).unwrap_or_default(),
            "message": message,
        }))
    }
}
