//! Requests and the queue: `request.send` (start, queue behind the running request,
//! or steer into it, per `whenBusy`), `request.interrupt` and `request.cancel_queued`.
//! A request's life once started is [`crate::work::request`].

use std::sync::Arc;

use keel_envelope::commands::{CancelQueued, RequestInterrupt, RequestSend, WhenBusy};
use keel_envelope::events::{RequestCancelled, RequestQueued, RequestSteered, SessionInterrupted};
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use super::{invalid, not_pending, Cx};
use crate::base::limits::RequestOverrides;
use crate::session::queue::{Active, Queued, MAX_WAITING};
use crate::session::{closed, Data, Session};

/// `request.send`.
pub(crate) async fn send(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &RequestSend,
) -> Result<(), ErrorPayload> {
    if p.message.trim().is_empty() {
        return Err(invalid("the message is empty", "payload.message"));
    }
    if let Some(refusal) = session.data().ext.send_refusal() {
        return Err(refusal);
    }
    let trace = trace_parent(p)?;
    let q = Queued {
        id: cx.rid.to_owned(),
        message: p.message.clone(),
        images: p.images.clone().unwrap_or_default(),
        patch_preview: p
            .patch_preview
            .unwrap_or(cx.services.config().patch_preview),
        overrides: RequestOverrides::of(p)?,
        trace,
    };
    enqueue(session, q, p.when_busy.unwrap_or_default()).await
}

/// The host's trace context of `request.send`, checked whether or not telemetry is
/// on (a host learns of a bad value at once, not when export is turned on).
fn trace_parent(p: &RequestSend) -> Result<Option<keel_telemetry::TraceParent>, ErrorPayload> {
    let Some(tp) = &p.traceparent else {
        if p.tracestate.is_some() {
            return Err(invalid(
                "tracestate comes with a traceparent",
                "payload.tracestate",
            ));
        }
        return Ok(None);
    };
    keel_telemetry::TraceParent::parse(tp, p.tracestate.as_deref())
        .map(Some)
        .map_err(|e| invalid(&e.message, "payload.traceparent"))
}

/// Starts `q`, queues it, or steers it into the running request, under the
/// session's turnover lock.
async fn enqueue(
    session: &Arc<Session>,
    q: Queued,
    when_busy: WhenBusy,
) -> Result<(), ErrorPayload> {
    let _turnover = session.turnover.lock().await;
    enum Outcome {
        Start(CancellationToken),
        Queued(u32),
        Steered(String),
    }
    let outcome = {
        let mut d = session.data();
        if d.state.closed {
            return Err(closed());
        }
        refuse_reused_id(&d, &q.id)?;
        let compacting = d.compacting;
        let waiting = d.queue.len() + d.active.as_ref().map_or(0, |a| a.steer.len());
        if d.active.is_some() && !matches!(when_busy, WhenBusy::Reject) && waiting >= MAX_WAITING {
            return Err(ErrorPayload::new(
                ErrorCode::SessionBusy,
                format!("{waiting} messages already wait for the running request (the most a session keeps)"),
            )
            .retryable(true)
            .with_detail("reason", "queue_full")
            .with_detail("limit", MAX_WAITING as u64));
        }
        match (&mut d.active, when_busy) {
            (None, _) => {
                let cancel = session.cancel.child_token();
                d.active = Some(Active::new(&q.id, cancel.clone(), q.patch_preview));
                Outcome::Start(cancel)
            }
            (Some(_), WhenBusy::Steer | WhenBusy::Queue) if compacting => {
                d.queue.push_back(q.clone());
                Outcome::Queued(d.queue.len() as u32)
            }
            (Some(active), WhenBusy::Steer) => {
                active.steer.push(q.message.clone());
                Outcome::Steered(active.id.clone())
            }
            (Some(active), WhenBusy::Reject) => {
                return Err(ErrorPayload::new(
                    ErrorCode::SessionBusy,
                    format!("request {} is running", active.id),
                )
                .retryable(true)
                .with_detail("activeRequestId", active.id.clone()));
            }
            // Queue, the default (the codec accepts the known values only).
            (Some(_), _) => {
                d.queue.push_back(q.clone());
                Outcome::Queued(d.queue.len() as u32)
            }
        }
    };
    match outcome {
        Outcome::Start(cancel) => {
            let me = session.clone();
            // Boxed: the task keeps its cell until `runner` lets go of the handle (when
            // the next request starts), and a finished request's cell would otherwise
            // hold the whole request's future (some 30 KB) for each idle session.
            let handle = tokio::spawn(Box::pin(async move {
                // The first model call offers the tools of MCP servers still
                // starting (each start has its own time limit).
                me.mcp.wait_started(&cancel).await;
                crate::work::request::run_requests(me, q, cancel).await
            }));
            session.data().runner = Some(handle);
        }
        Outcome::Queued(position) => {
            session
                .emitter
                .emit(&q.id, Event::RequestQueued(RequestQueued::new(position)))
                .await;
        }
        Outcome::Steered(target) => {
            session
                .emitter
                .emit_reply(
                    &target,
                    Some(&q.id),
                    Event::RequestSteered(RequestSteered::new(target.clone())),
                )
                .await;
        }
    }
    Ok(())
}

/// A request's id names its stream, its checkpoints and its place in the history: one
/// already used by a request of this session (running, queued or done) is refused.
fn refuse_reused_id(d: &Data, id: &str) -> Result<(), ErrorPayload> {
    let reused = d.state.request_marks.iter().any(|m| m.request_id == id)
        || d.active.as_ref().is_some_and(|a| a.id == id)
        || d.queue.iter().any(|w| w.id == id);
    if !reused {
        return Ok(());
    }
    Err(ErrorPayload::new(
        ErrorCode::RequestInvalid,
        format!("requestId {id:?} was already used by a request of this session; use a new one"),
    )
    .with_detail("field", "requestId")
    .with_detail("reason", "duplicate_request_id"))
}

/// `request.interrupt`: cancels the running request, which answers with
/// `session.interrupted` once its tools are stopped; with nothing running (or an
/// interrupt already under way) it is answered at once.
pub(crate) async fn interrupt(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &RequestInterrupt,
) -> Result<(), ErrorPayload> {
    let rid = cx.rid;
    let _turnover = session.turnover.lock().await;
    let target = {
        let mut d = session.data();
        match &mut d.active {
            Some(a) if a.interrupt_reply.is_none() => {
                a.interrupt_reply = Some(rid.to_owned());
                a.cancel.cancel();
                None
            }
            Some(a) => Some(Some(a.id.clone())),
            None => Some(None),
        }
    };
    // `None`: the running request will emit `session.interrupted` (replyTo rid)
    // once its tools are stopped. Otherwise answer now, on the command's own stream.
    if let Some(already) = target {
        session
            .emitter
            .emit(
                rid,
                Event::SessionInterrupted(
                    SessionInterrupted::new("noop", already.is_some())
                        .interrupted_request_id(already),
                ),
            )
            .await;
    }
    Ok(())
}

/// `request.cancel_queued`.
pub(crate) async fn cancel_queued(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &CancelQueued,
) -> Result<(), ErrorPayload> {
    let removed = {
        let mut d = session.data();
        let pos = d.queue.iter().position(|q| q.id == p.queued_request_id);
        pos.and_then(|i| d.queue.remove(i))
    };
    let Some(q) = removed else {
        return Err(not_pending(
            ErrorCode::QueuedRequestNotFound,
            "queued request",
            &p.queued_request_id,
        ));
    };
    session
        .emitter
        .emit_reply(
            &q.id,
            Some(cx.rid),
            Event::RequestCancelled(RequestCancelled::new(q.id.clone())),
        )
        .await;
    Ok(())
}
