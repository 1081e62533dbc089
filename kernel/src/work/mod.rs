//! Running work: a request's life, the agent loop, the turn engine, compaction,
//! budgets, side questions, sub-agents and background processes.

pub(crate) mod agent;
pub(crate) mod budget;
pub(crate) mod child;
pub(crate) mod compact;
pub(crate) mod process;
pub(crate) mod request;
pub(crate) mod side;
pub(crate) mod turn;
