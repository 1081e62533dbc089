//! Points in a request's life where a test can pause it (and interrupt it there).
//! Production kernels have no probe; the cost is one `Option` check per point.

use futures::future::BoxFuture;

/// A point in a request's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Point {
    /// `request.accepted` is out; nothing else has happened.
    RequestStarted,
    /// `turn.started` is out; the model call is about to start.
    BeforeModelCall,
    /// The model stream delivered its first item.
    MidStream,
    /// The model stream ended; its tool calls have not been looked at.
    AfterStream,
    /// A tool call is decoded; the gate has not decided.
    BeforeGate,
    /// `approval.requested` is out; the wait begins.
    ApprovalWait,
    /// `tool.call.started` is out; the handler is about to run.
    ToolRunning,
    /// A sub-agent is about to call the model.
    SubAgentTurn,
    /// `context.compaction.started` is out; the summary call is about to start.
    Compaction,
    /// The request's work is done; its terminal event is about to be emitted.
    BeforeTerminal,
}

impl Point {
    /// Every point.
    pub const ALL: &'static [Point] = &[
        Point::RequestStarted,
        Point::BeforeModelCall,
        Point::MidStream,
        Point::AfterStream,
        Point::BeforeGate,
        Point::ApprovalWait,
        Point::ToolRunning,
        Point::SubAgentTurn,
        Point::Compaction,
        Point::BeforeTerminal,
    ];
}

/// Called at every [`Point`] a request reaches; the request waits for the returned
/// future.
pub trait Probe: Send + Sync + std::fmt::Debug {
    /// `request_id` is the running request's id.
    fn reached(&self, point: Point, session_id: &str, request_id: &str) -> BoxFuture<'static, ()>;
}
