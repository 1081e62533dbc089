//! Tools the host app defines (`hostTools` of `session.start`, `session.set_host_tools`).
//! Each is an entry of the session's overlay with the row its level gives; when the
//! model calls one and the gate allows it, the handler emits `host-tool.requested` on
//! the request's stream and waits for the host's `host-tool.respond`, the call's time
//! limit, or an interrupt.

use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::events::{HostToolRequested, HostToolResponded};
use keel_envelope::host::{HostToolApproval, HostToolSpec};
use keel_envelope::types::PermissionLevel;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use keel_tools::{ApprovalRequirement, PlanBehavior, ToolSpec};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::pipeline::approval::sleep_opt;
use crate::session::queue::HostAnswer;
use crate::session::registry::CallCx;
use crate::session::registry::{Args, Decoder, Entry, Handler, KernelHandler, Origin};
use crate::session::Session;

fn invalid(field: String, message: String) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message).with_detail("field", field)
}

/// Checks host tools and makes their entries. `field` names the list in errors
/// (`payload.hostTools`).
pub(crate) fn entries(specs: &[HostToolSpec], field: &str) -> Result<Vec<Entry>, ErrorPayload> {
    let mut out = Vec::with_capacity(specs.len());
    for (i, t) in specs.iter().enumerate() {
        let at = |f: &str| format!("{field}[{i}].{f}");
        let valid_name = !t.name.is_empty()
            && t.name.len() <= 64
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(invalid(
                at("name"),
                format!(
                    "host tool name {:?} is not valid: use 1 to 64 letters, digits, `_` or `-`",
                    t.name
                ),
            ));
        }
        check_schema(&t.input_schema).map_err(|why| {
            invalid(
                at("inputSchema"),
                format!("the inputSchema of host tool `{}` {why}", t.name),
            )
        })?;
        let plan = if t.level == PermissionLevel::Read {
            PlanBehavior::Allowed
        } else {
            PlanBehavior::Denied
        };
        let approval = match (t.approval, &t.level) {
            (Some(HostToolApproval::Never), _) | (None, PermissionLevel::Read) => {
                ApprovalRequirement::Never
            }
            _ => ApprovalRequirement::Always,
        };
        let spec = ToolSpec::custom(
            t.name.clone(),
            t.description.clone(),
            t.input_schema.clone(),
            t.level.clone(),
            plan,
            approval,
        )
        .with_action_type("host-tool.call");
        out.push(Entry {
            spec,
            origin: Origin::Host,
            handler: Handler::Kernel(Arc::new(HostTool)),
            decoder: Decoder::Row,
        });
    }
    Ok(out)
}

/// An object schema that is a valid JSON Schema.
fn check_schema(schema: &Value) -> Result<(), String> {
    let Value::Object(map) = schema else {
        return Err("is not a JSON object".into());
    };
    if map.get("type") != Some(&Value::String("object".into())) {
        return Err("must be an object schema (`\"type\": \"object\"`)".into());
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| format!("is not a valid JSON Schema: {e}"))
}

/// The text the model reads for a host's result: a string as is, else its JSON.
fn text_of(result: &Value) -> String {
    match result {
        Value::String(s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Takes the answer of a pending call (`host-tool.respond`).
pub(crate) fn respond(
    session: &Session,
    tool_call_id: &str,
    answer: HostAnswer,
) -> Result<(), ErrorPayload> {
    let not_found = || {
        ErrorPayload::new(
            ErrorCode::HostToolCallNotFound,
            format!(
                "no host-tool call {tool_call_id:?} is waiting for an answer (unknown, or already finished)"
            ),
        )
        .with_detail("toolCallId", tool_call_id.to_owned())
    };
    let waiter = session.data().host_calls.remove(tool_call_id);
    let Some((_, tx)) = waiter else {
        return Err(not_found());
    };
    tx.send(answer).map_err(|_| not_found())
}

/// Removes a call's waiter when the call ends, however it ends.
struct Pending<'a> {
    session: &'a Session,
    id: &'a str,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.session.data().host_calls.remove(self.id);
    }
}

/// The handler of every host tool.
#[derive(Debug)]
struct HostTool;

#[async_trait]
impl KernelHandler for HostTool {
    async fn run(&self, cx: &CallCx<'_>, _: Args) -> Result<Value, ErrorPayload> {
        let session = cx.session;
        let id = cx.tool_call_id;
        let name = cx.call.name.clone();
        let timeout = session.services.config().host_tool_timeout;
        let (tx, mut rx) = oneshot::channel();
        session
            .data()
            .host_calls
            .insert(id.to_owned(), (name.clone(), tx));
        let _pending = Pending { session, id };
        let expires_at = (!timeout.is_zero()).then(|| session.now() + timeout.as_millis() as u64);
        session
            .emitter
            .emit(
                cx.rid,
                Event::HostToolRequested(
                    HostToolRequested::new(id.to_owned(), name.clone(), cx.call.arguments.clone())
                        .expires_at(expires_at),
                ),
            )
            .await;
        let answer = tokio::select! {
            biased;
            _ = cx.cancel.cancelled() => {
                return Err(ErrorPayload::new(ErrorCode::Interrupted, "interrupted before the host answered"));
            }
            a = &mut rx => a.ok(),
            _ = sleep_opt((!timeout.is_zero()).then_some(timeout)) => {
                // An answer that arrived with the time limit still counts.
                if session.data().host_calls.remove(id).is_some() { None } else { rx.await.ok() }
            }
        };
        let Some((result, reply_to)) = answer else {
            return Err(ErrorPayload::new(
                ErrorCode::ToolTimeout,
                format!(
                    "the host did not answer the call of `{name}` within {} s",
                    timeout.as_secs_f64()
                ),
            )
            .with_detail("toolName", name)
            .with_detail("limitMs", timeout.as_millis() as u64));
        };
        session
            .emitter
            .emit_reply(
                cx.rid,
                Some(&reply_to),
                Event::HostToolResponded(HostToolResponded::new(
                    id.to_owned(),
                    name.clone(),
                    result.is_err(),
                )),
            )
            .await;
        match result {
            Ok(value) => {
                let message = text_of(&value);
                Ok(json!({"result": value, "message": message}))
            }
            Err(message) => Err(ErrorPayload::new(ErrorCode::ToolExecutionFailed, message)
                .with_detail("toolName", name)),
        }
    }
}
