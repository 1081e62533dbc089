//! A model for tests and benches of a kernel on a store: every answer is `n` short
//! text deltas, then the end of the turn, with no pause (the store is what is
//! measured).

use futures::stream;
use keel_kernel::model::{FinishReason, Model, ModelEvent, ModelRequest, ModelStream};
use tokio_util::sync::CancellationToken;

/// Answers every request with `.0` text deltas: `w0 `, `w1 `, ….
#[derive(Debug, Clone, Copy)]
pub struct Chatty(pub usize);

impl Chatty {
    /// The whole text of an answer, as the deltas add up.
    pub fn text(&self) -> String {
        (0..self.0).map(|i| format!("w{i} ")).collect()
    }
}

impl Model for Chatty {
    fn id(&self) -> String {
        "test:chatty".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, _request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let events = (0..self.0)
            .map(|i| Ok(ModelEvent::TextDelta(format!("w{i} "))))
            .chain(std::iter::once(Ok(ModelEvent::Finished(
                FinishReason::EndTurn,
            ))));
        Box::pin(stream::iter(events))
    }
}
