//! `session.load_history`: the host's messages turned into the kernel's history.

use keel_envelope::{ErrorCode, ErrorPayload};

use keel_envelope::types::{HistoryMessage, Role};

use crate::base::model::{Message, ToolCallRequest};

/// Converts host history (seed 000 §5.5) into model messages.
pub(crate) fn convert_history(messages: &[HistoryMessage]) -> Result<Vec<Message>, ErrorPayload> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::User => out.push(Message::User {
                text: m.content.clone(),
                images: Vec::new(),
            }),
            Role::Assistant => {
                let calls = m
                    .tool_calls
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| ToolCallRequest {
                        id: c.id,
                        name: c.name,
                        arguments: c.arguments,
                    })
                    .collect::<Vec<_>>();
                out.push(Message::Assistant {
                    text: m.content.clone(),
                    tool_calls: calls.clone(),
                });
                for r in m.tool_results.clone().unwrap_or_default() {
                    let name = calls
                        .iter()
                        .find(|c| c.id == r.tool_call_id)
                        .map(|c| c.name.clone())
                        .unwrap_or_default();
                    out.push(Message::Tool {
                        tool_call_id: r.tool_call_id,
                        name,
                        content: r.content,
                        is_error: r.is_error,
                    });
                }
            }
            Role::Tool => {
                for r in m.tool_results.clone().unwrap_or_default() {
                    out.push(Message::Tool {
                        tool_call_id: r.tool_call_id,
                        name: String::new(),
                        content: r.content,
                        is_error: r.is_error,
                    });
                }
            }
            Role::System => {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    "history cannot contain system messages (the system prompt is the kernel's)",
                )
                .with_detail("field", format!("payload.messages[{i}].role")));
            }
            // The codec decodes the known roles only.
            _ => {
                return Err(ErrorPayload::new(ErrorCode::RequestInvalid, "unknown role")
                    .with_detail("field", format!("payload.messages[{i}].role")));
            }
        }
    }
    Ok(out)
}
