//! The session's unit of work and what waits around it: the running request
//! ([`Active`]), the requests queued behind it ([`Queued`]), and the answers that
//! command handlers hand to a waiting request (approvals, questions, plan decisions,
//! host-tool results).

use keel_envelope::types::{ApprovalDecision, PermissionMode};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::base::limits::RequestOverrides;

/// Most messages waiting on a busy session (queued requests plus steered messages not
/// yet given to the model); beyond it `request.send` is refused with `SESSION_BUSY`
/// (`details.reason: "queue_full"`).
pub(crate) const MAX_WAITING: usize = 64;

/// A request waiting to run.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) id: String,
    pub(crate) message: String,
    pub(crate) images: Vec<String>,
    /// Whether `edit_file` / `write_file` are proposed as patches in this request.
    pub(crate) patch_preview: bool,
    /// The request's own budget and output cap.
    pub(crate) overrides: RequestOverrides,
    /// The host's trace that the request's spans join (`request.send {traceparent}`).
    pub(crate) trace: Option<keel_telemetry::TraceParent>,
}

/// The running unit of work: a request, or a compaction by hand.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) id: String,
    pub(crate) cancel: CancellationToken,
    /// The requestId of the command that interrupted it.
    pub(crate) interrupt_reply: Option<String>,
    /// Messages steered into the running request, not yet given to the model.
    pub(crate) steer: Vec<String>,
    /// Whether `edit_file` / `write_file` are proposed as patches.
    pub(crate) patch_preview: bool,
    /// Its terminal event is out: the session reads as idle (or running the next
    /// queued request) while it turns over.
    pub(crate) ended: bool,
    /// The request's output cap, once its budget is known: the cap of every model
    /// call made for it (sub-agents too).
    pub(crate) output_cap: Option<u32>,
}

impl Active {
    pub(crate) fn new(id: &str, cancel: CancellationToken, patch_preview: bool) -> Active {
        Active {
            id: id.to_owned(),
            cancel,
            interrupt_reply: None,
            steer: Vec::new(),
            patch_preview,
            ended: false,
            output_cap: None,
        }
    }
}

/// An answer to a pending approval: the decision and the answering command's requestId.
pub(crate) type ApprovalAnswer = (ApprovalDecision, String);
/// An answer to a question: the text and the answering command's requestId.
pub(crate) type AskAnswer = (String, String);

/// A plan decision.
#[derive(Debug)]
pub(crate) enum PlanAnswer {
    Approve {
        mode: PermissionMode,
        reply_to: String,
    },
    Reject {
        feedback: Option<String>,
        reply_to: String,
    },
}

/// The host's answer to a host-tool call, and the requestId of the `host-tool.respond`.
pub(crate) type HostAnswer = (Result<Value, String>, String);

/// A pending host-tool call: the tool's name and where its answer goes.
pub(crate) type HostWaiter = (String, oneshot::Sender<HostAnswer>);
