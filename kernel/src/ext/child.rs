//! Sub-agent runs (`spawn_sub_agent`): a child loop with its own history and a tool
//! set that is a subset of the parent's. Its calls go through the same gate, in the
//! parent's permission mode, and its approvals are asked on the parent request's
//! stream, so the same host answers them. Only the child's final text returns to the
//! parent. The child uses the parent request's cancellation: interrupting the parent
//! stops it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use keel_envelope::events::{SubAgentEvent, SubAgentProgress};
use keel_envelope::ext::{SubAgentInfo, SubAgentStatus};
use keel_envelope::ids::IdKind;
use keel_envelope::types::Usage;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::agent::Interrupted;
use crate::model::{Message, ModelEvent, ModelRequest, ToolCallRequest, ToolDef};
use crate::prompt;
use crate::session::Session;

/// Names of the kernel's own tools; never given to a sub-agent.
const KERNEL_TOOLS: &[&str] = &[
    prompt::PROPOSE_PLAN,
    prompt::UPDATE_PLAN,
    prompt::ASK_USER,
    prompt::TASK_GRAPH,
    prompt::SPAWN_SUB_AGENT,
];

#[derive(Debug, serde::Deserialize)]
struct SpawnArgs {
    task: String,
    #[serde(default)]
    tools: Option<Vec<String>>,
}

enum ChildEnd {
    Done(String),
    Failed(ErrorPayload),
    Interrupted,
}

type CallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(String, bool), Interrupted>> + Send + 'a>>;

/// The tools a sub-agent may use: the requested ones (default: all of the parent's
/// registered tools), refused if any is not the parent's.
fn child_tools(
    session: &Session,
    requested: Option<Vec<String>>,
) -> Result<Vec<String>, ErrorPayload> {
    let parent: Vec<String> = session
        .kernel
        .tools
        .iter()
        .map(|t| t.spec().name.clone())
        .filter(|n| !KERNEL_TOOLS.contains(&n.as_str()))
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
            Event::SubAgentProgress(SubAgentProgress {
                parent_session_id: session.id.clone(),
                sub_agent_id: id.to_owned(),
                message,
            }),
        )
        .await;
}

/// `spawn_sub_agent {task, tools?}`. Boxed: the child's calls run through
/// `handle_call`, which dispatches here.
pub(crate) fn spawn_sub_agent<'a>(
    session: &'a Arc<Session>,
    rid: &'a str,
    tool_call_id: &'a str,
    call: &'a ToolCallRequest,
    cancel: &'a CancellationToken,
) -> CallFuture<'a> {
    Box::pin(spawn(session, rid, tool_call_id, call, cancel))
}

async fn spawn(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    cancel: &CancellationToken,
) -> Result<(String, bool), Interrupted> {
    crate::agent::emit_kernel_tool_started(session, rid, tool_call_id, call).await;
    let parsed = serde_json::from_value::<SpawnArgs>(call.arguments.clone())
        .map_err(|e| {
            ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                format!("bad arguments for spawn_sub_agent: {e}"),
            )
        })
        .and_then(|a| {
            if a.task.trim().is_empty() {
                return Err(ErrorPayload::new(
                    ErrorCode::ToolArgumentsInvalid,
                    "the sub-agent's task is empty",
                ));
            }
            let tools = child_tools(session, a.tools)?;
            Ok((a.task, tools))
        });
    let (task, tools) = match parsed {
        Ok(x) => x,
        Err(e) => {
            return Ok(
                crate::agent::kernel_tool_done(session, rid, tool_call_id, call, Err(e)).await,
            )
        }
    };
    let id = session.kernel.ctx.ids.next_id(IdKind::SubAgent);
    let info = SubAgentInfo {
        sub_agent_id: id.clone(),
        parent_session_id: session.id.clone(),
        parent_request_id: rid.to_owned(),
        task: task.clone(),
        tools: tools.clone(),
        status: SubAgentStatus::Running,
        summary: None,
        error: None,
        usage: Usage::default(),
        turns: 0,
        started_at: session.now(),
        finished_at: None,
    };
    session.data().ext.sub_agents.start(info.clone());
    session
        .emitter
        .emit(
            rid,
            Event::SubAgentStarted(SubAgentEvent {
                parent_session_id: session.id.clone(),
                sub_agent_id: id.clone(),
                sub_agent: info,
            }),
        )
        .await;
    let end = run_child(session, rid, &id, &task, &tools, cancel).await;
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
        .finish(&id, outcome, session.now());
    if let Some(info) = finished {
        let ev = SubAgentEvent {
            parent_session_id: session.id.clone(),
            sub_agent_id: id.clone(),
            sub_agent: info,
        };
        let event = match end {
            ChildEnd::Done(_) => Event::SubAgentCompleted(ev),
            _ => Event::SubAgentFailed(ev),
        };
        session.emitter.emit(rid, event).await;
    }
    let result = match end {
        ChildEnd::Interrupted => return Err(Interrupted),
        ChildEnd::Failed(e) => Err(e),
        ChildEnd::Done(text) => Ok(serde_json::json!({
            "subAgentId": id,
            "summary": text,
            "message": format!("Sub-agent {id} finished. Its summary:\n{text}"),
        })),
    };
    Ok(crate::agent::kernel_tool_done(session, rid, tool_call_id, call, result).await)
}

async fn run_child(
    session: &Arc<Session>,
    rid: &str,
    id: &str,
    task: &str,
    tools: &[String],
    cancel: &CancellationToken,
) -> ChildEnd {
    let defs: Vec<ToolDef> = session
        .kernel
        .tools
        .iter()
        .filter(|t| tools.contains(&t.spec().name))
        .map(|t| {
            let s = t.spec();
            ToolDef {
                name: s.name.clone(),
                description: s.description.clone(),
                parameters: s.parameters.clone(),
            }
        })
        .collect();
    let mut history = vec![Message::User {
        text: task.to_owned(),
        images: Vec::new(),
    }];
    let max_turns = session.kernel.config.max_turns.max(1);
    for turn in 1..=max_turns {
        if cancel.is_cancelled() {
            return ChildEnd::Interrupted;
        }
        let (model, system) = {
            let d = session.data();
            let mut system = prompt::system_prompt(session, d.state.mode);
            system.push_str(
                "\nYou are a sub-agent: another agent gave you the task below. Do it with the tools you have, \
then answer with a short summary of what you found or did; only that summary reaches the other agent.\n",
            );
            (d.model.clone(), system)
        };
        let request = ModelRequest {
            system,
            messages: history.clone(),
            tools: defs.clone(),
            max_output_tokens: None,
        };
        let mut stream = model.stream(request, cancel.child_token());
        let mut text = String::new();
        let mut calls: Vec<ToolCallRequest> = Vec::new();
        let mut usage = Usage::default();
        let mut failure = None;
        loop {
            let item = tokio::select! {
                biased;
                _ = cancel.cancelled() => return ChildEnd::Interrupted,
                item = stream.next() => item,
            };
            match item {
                None | Some(Ok(ModelEvent::Finished(_))) => break,
                Some(Ok(ModelEvent::TextDelta(t))) => text.push_str(&t),
                Some(Ok(ModelEvent::ToolCall(c))) => calls.push(c),
                Some(Ok(ModelEvent::Usage(u))) => usage = u,
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    failure = Some(e.0);
                    break;
                }
            }
        }
        drop(stream);
        session.data().state.usage.add(usage);
        session.data().ext.sub_agents.turn(id, usage);
        if let Some(e) = failure {
            return ChildEnd::Failed(e);
        }
        history.push(Message::Assistant {
            text: text.clone(),
            tool_calls: calls.clone(),
        });
        if calls.is_empty() {
            return ChildEnd::Done(text);
        }
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        progress(
            session,
            rid,
            id,
            format!("turn {turn}: {}", names.join(", ")),
        )
        .await;
        for call in &calls {
            let (content, is_error) = if tools.contains(&call.name) {
                match crate::agent::handle_call(session, rid, call, cancel).await {
                    Ok(r) => r,
                    Err(Interrupted) => return ChildEnd::Interrupted,
                }
            } else {
                (
                    format!(
                        "{}: the tool {:?} is not available to this sub-agent",
                        ErrorCode::ToolNotRegistered,
                        call.name
                    ),
                    true,
                )
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
