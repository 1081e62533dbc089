//! `session/prompt`: the prompt's text for the kernel, and its answer when the
//! request ends.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, PromptRequest, PromptResponse, StopReason,
};
use agent_client_protocol::Error;
use keel_envelope::types::StopReason as KeelStop;
use keel_envelope::{ErrorCode, ErrorPayload};
use serde_json::json;
use tokio::sync::oneshot;

use crate::error::{from_keel, invalid_params};
use crate::host::{Host, PromptEnd, Sess};

/// The text the kernel receives for an ACP prompt: text blocks joined with newlines,
/// embedded text resources as `<context uri="…">…</context>`, links as `[name](uri)`.
pub(crate) fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut text = String::new();
    for (i, b) in blocks.iter().enumerate() {
        let piece = match b {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::ResourceLink(l) => format!("[{}]({})", l.name, l.uri),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    format!("<context uri=\"{}\">\n{}\n</context>", t.uri, t.text)
                }
                _ => {
                    return Err(invalid_params(format!(
                        "prompt[{i}]: binary resources are not supported"
                    )))
                }
            },
            ContentBlock::Image(_) => return Err(unsupported(i, "image")),
            ContentBlock::Audio(_) => return Err(unsupported(i, "audio")),
            _ => return Err(unsupported(i, "this")),
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&piece);
    }
    if text.trim().is_empty() {
        return Err(invalid_params("the prompt is empty"));
    }
    Ok(text)
}

fn unsupported(i: usize, what: &str) -> Error {
    invalid_params(format!(
        "prompt[{i}]: {what} content is not supported (see promptCapabilities)"
    ))
}

/// ACP's stop reason for Keel's; `None` for a failed request.
pub(crate) fn stop_reason(s: KeelStop) -> Option<StopReason> {
    match s {
        KeelStop::EndTurn => Some(StopReason::EndTurn),
        KeelStop::MaxTokens => Some(StopReason::MaxTokens),
        KeelStop::MaxTurns => Some(StopReason::MaxTurnRequests),
        KeelStop::Refusal => Some(StopReason::Refusal),
        KeelStop::Interrupted => Some(StopReason::Cancelled),
        // Error, and a reason this version does not know.
        _ => None,
    }
}

/// Where a prompt's end will come from.
#[derive(Debug)]
pub(crate) enum Wait {
    Ended(PromptEnd),
    Pending(oneshot::Receiver<PromptEnd>),
}

impl Host {
    /// Sends a prompt to the kernel; the caller then waits with [`finish_prompt`].
    /// Runs in the reader's order, so a later `session/cancel` always finds it.
    pub(crate) async fn start_prompt(
        &self,
        p: PromptRequest,
    ) -> Result<(Arc<Sess>, String, Wait), Error> {
        let sess = self.session(&p.session_id.0)?;
        let mut text = prompt_text(&p.prompt)?;
        if let Some(catalog) = &sess.catalog {
            text = crate::commands::expand(catalog, text)?;
        }
        let rid = sess.handle.send(text).await.map_err(from_keel)?;
        let wait = {
            let mut st = sess.st();
            match st.ended.remove(&rid) {
                Some(end) => Wait::Ended(end),
                None => {
                    let (tx, rx) = oneshot::channel();
                    st.waiters.insert(rid.clone(), tx);
                    Wait::Pending(rx)
                }
            }
        };
        Ok((sess, rid, wait))
    }
}

/// Waits for a prompt's end and builds its answer.
pub(crate) async fn finish_prompt(
    sess: Arc<Sess>,
    rid: String,
    wait: Wait,
) -> Result<PromptResponse, Error> {
    let end = match wait {
        Wait::Ended(end) => end,
        Wait::Pending(rx) => rx.await.unwrap_or_else(|_| {
            PromptEnd::Failed(ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                "the session closed before the prompt ended",
            ))
        }),
    };
    drop(sess);
    match end {
        PromptEnd::Stop(reason, usage) => {
            let mut meta = serde_json::Map::new();
            meta.insert("keel".into(), json!({ "requestId": rid }));
            Ok(PromptResponse::new(reason).usage(usage).meta(meta))
        }
        PromptEnd::Failed(e) => Err(from_keel(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{
        EmbeddedResource, ImageContent, ResourceLink, TextResourceContents,
    };

    #[test]
    fn blocks_become_one_text() {
        let blocks = vec![
            ContentBlock::from("Look at this:"),
            ContentBlock::ResourceLink(ResourceLink::new("notes", "file:///w/NOTES.md")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///w/main.rs",
                )),
            )),
        ];
        assert_eq!(
            prompt_text(&blocks).ok().as_deref(),
            Some("Look at this:\n[notes](file:///w/NOTES.md)\n<context uri=\"file:///w/main.rs\">\nfn main() {}\n</context>")
        );
    }

    #[test]
    fn images_and_empty_prompts_are_refused() {
        let img = vec![ContentBlock::Image(ImageContent::new("AAAA", "image/png"))];
        let e = prompt_text(&img).err().map(|e| (e.code.value(), e.message));
        assert_eq!(
            e,
            Some((
                -32602,
                "prompt[0]: image content is not supported (see promptCapabilities)".into()
            ))
        );
        assert!(prompt_text(&[ContentBlock::from("  ")]).is_err());
        assert!(prompt_text(&[]).is_err());
    }
}
