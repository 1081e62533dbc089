//! The task graph's operations with their events, shared by the `task-graph.*`
//! commands ([`crate::commands::ext`]) and the `task_graph` kernel tool, whose handler
//! this is. The graph itself is the pure state machine of
//! [`crate::session::ext::graph`].

use async_trait::async_trait;
use keel_envelope::commands::{NewTaskNode, NodeUpdates};
use keel_envelope::events::{TaskGraphAdvanced, TaskGraphEvent, TaskGraphNodeEvent};
use keel_envelope::ext::{NodeStatus, TaskGraph};
use keel_envelope::ids::IdKind;
use keel_envelope::kernel_tools::{TaskGraphAction, TaskGraphArgs};
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use crate::session::ext::graph;
use crate::session::registry::{args_mismatch, Args, CallCx, KernelHandler};
use crate::session::Session;

/// A task-graph operation, from a command or from the `task_graph` tool.
#[derive(Debug)]
pub(crate) enum GraphOp {
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
pub(crate) struct GraphOutcome {
    pub(crate) graph: Option<TaskGraph>,
    pub(crate) became_ready: Vec<String>,
}

fn no_graph() -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::GraphNotFound,
        "the session has no task graph (create one first)",
    )
}

/// Runs a graph operation and emits its events on `rid`'s stream: the answer
/// first, then `task-graph.completed` when the graph just became terminal.
pub(crate) async fn graph_op(
    session: &Session,
    rid: &str,
    op: GraphOp,
) -> Result<GraphOutcome, ErrorPayload> {
    let now = session.now();
    let mut events = Vec::new();
    let mut became_ready = Vec::new();
    let mutated = !matches!(op, GraphOp::State);
    let graph = {
        let mut d = session.data();
        match op {
            GraphOp::Create {
                title,
                description,
                nodes,
            } => {
                let id = session.services.next_id(IdKind::Graph);
                let g = graph::create(id, title, description, &nodes, now)?;
                events.push(Event::TaskGraphCreated(
                    TaskGraphEvent::new().graph(g.clone()),
                ));
                d.ext.graph = Some(g);
            }
            GraphOp::State => {
                events.push(Event::TaskGraphState(
                    TaskGraphEvent::new().graph(d.ext.graph.clone()),
                ));
            }
            GraphOp::AddNode(n) => {
                let g = d.ext.graph.as_mut().ok_or_else(no_graph)?;
                let node = graph::add_node(g, &n, now)?;
                graph::settle(g, now);
                events.push(Event::TaskGraphNodeAdded(TaskGraphNodeEvent::new(
                    g.graph_id.clone(),
                    node,
                )));
            }
            GraphOp::UpdateNode { node_id, updates } => {
                let g = d.ext.graph.as_mut().ok_or_else(no_graph)?;
                let node = graph::update_node(g, &node_id, &updates, now)?;
                let done = graph::settle(g, now);
                let ev = TaskGraphNodeEvent::new(g.graph_id.clone(), node);
                events.push(match ev.node.status {
                    NodeStatus::Completed => Event::TaskGraphNodeCompleted(ev),
                    NodeStatus::Failed => Event::TaskGraphNodeFailed(ev),
                    _ => Event::TaskGraphNodeUpdated(ev),
                });
                if done {
                    events.push(Event::TaskGraphCompleted(
                        TaskGraphEvent::new().graph(g.clone()),
                    ));
                }
            }
            GraphOp::Advance => {
                let g = d.ext.graph.as_mut().ok_or_else(no_graph)?;
                became_ready = graph::advance(g, now);
                let done = graph::settle(g, now);
                events.push(Event::TaskGraphAdvanced(TaskGraphAdvanced::new(
                    g.graph_id.clone(),
                    became_ready.clone(),
                    g.clone(),
                )));
                if done {
                    events.push(Event::TaskGraphCompleted(
                        TaskGraphEvent::new().graph(g.clone()),
                    ));
                }
            }
        }
        d.ext.graph.clone()
    };
    for ev in events {
        session.emitter.emit(rid, ev).await;
    }
    if mutated {
        session.persist(rid).await;
    }
    Ok(GraphOutcome {
        graph,
        became_ready,
    })
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
        // The arguments decode the known actions only.
        _ => return Err(tool_args_error("unknown action")),
    })
}

/// The `task_graph` kernel tool: the same operations as the commands, on the
/// request's stream.
#[derive(Debug)]
pub(crate) struct TaskGraphTool;

#[async_trait]
impl KernelHandler for TaskGraphTool {
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<serde_json::Value, ErrorPayload> {
        let Args::TaskGraph(args) = args else {
            return Err(args_mismatch(&cx.call.name));
        };
        let out = graph_op(cx.session, cx.rid, graph_op_of(*args)?).await?;
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
