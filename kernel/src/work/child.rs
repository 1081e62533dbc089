//! Sub-agent runs (`spawn_sub_agent`): a child loop with its own history and a tool
//! set that is a subset of the parent's. Its model calls go through the turn engine
//! and its tool calls through the same pipeline as the parent's: the same gate, in the
//! parent's permission mode, with approvals asked on the parent request's stream, so
//! the same host answers them. Only the child's final text returns to the parent. The
//! child's calls are children of the parent request's cancellation token:
//! interrupting the parent stops it.

use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::events::{SubAgentEvent, SubAgentProgress};
use keel_envelope::ext::{SubAgentInfo, SubAgentStatus};
use keel_envelope::ids::IdKind;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::base::model::{Message, ModelRequest};
use crate::base::probe::Point;
use crate::base::prompt;
use crate::pipeline::{self, Interrupted};
use crate::session::registry::{args_mismatch, Args, CallCx, KernelHandler, Origin};
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
            Event::SubAgentProgress(SubAgentProgress {
                parent_session_id: session.id.clone(),
                sub_agent_id: id.to_owned(),
                message,
            }),
        )
        .await;
}

/// `spawn_sub_agent {task, tools?}`.
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
        let tools = child_tools(session, cx.scope, a.tools)?;
        let task = a.task;
        let id = session.services.next_id(IdKind::SubAgent);
        let info = SubAgentInfo {
            sub_agent_id: id.clone(),
            parent_session_id: session.id.clone(),
            parent_request_id: rid.to_owned(),
            task: task.clone(),
            tools: tools.clone(),
            status: SubAgentStatus::Running,
            summary: None,
            error: None,
            usage: Default::default(),
            turns: 0,
            started_at: session.now(),
            finished_at: None,
        };
        session.data().ext.sub_agents.start(info.clone());
        let ev = SubAgentEvent {
            parent_session_id: session.id.clone(),
            sub_agent_id: id.clone(),
            sub_agent: info,
        };
        session.emitter.emit(rid, Event::SubAgentStarted(ev)).await;
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
        let work = run_child(session, rid, &id, &task, &tools, cx.cancel);
        let end = tracing::Instrument::instrument(work, agent.span().clone()).await;
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
        let text = outcome?;
        Ok(serde_json::json!({
            "subAgentId": id,
            "summary": text,
            "message": format!("Sub-agent {id} finished. Its summary:\n{text}"),
        }))
    }
}

async fn run_child(
    session: &Arc<Session>,
    rid: &str,
    id: &str,
    task: &str,
    tools: &[String],
    cancel: &CancellationToken,
) -> ChildEnd {
    let defs: std::sync::Arc<[crate::base::model::ToolDef]> =
        session.services.registry().defs_of(tools).into();
    let mut history = crate::base::model::History::new();
    history.push(Message::User {
        text: task.to_owned(),
        images: Vec::new(),
    });
    let max_turns = session.services.config().max_turns.max(1);
    for turn in 1..=max_turns {
        if cancel.is_cancelled() {
            return ChildEnd::Interrupted;
        }
        let (model, system) = {
            let d = session.data();
            let (mut system, _) = prompt::system_prompt(
                &session.workspace,
                session.services.config().system_prompt.as_deref(),
                d.state.mode.clone(),
            );
            system.push_str(&crate::session::roots::prompt_section(&d.roots));
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
                match pipeline::run_call(session, rid, call, cancel, Some(tools)).await {
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
