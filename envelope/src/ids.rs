//! Identifiers: ULIDs with readable prefixes (`sess_…`, `req_…`, `evt_…`), and the
//! injectable clock and id generator that make transcripts deterministic.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The kinds of identifiers Keel mints; each has its own readable prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IdKind {
    /// A session (`sess_`).
    Session,
    /// A request, when the runtime has to mint one (`req_`).
    Request,
    /// An event (`evt_`).
    Event,
    /// An approval (`appr_`).
    Approval,
    /// A plan (`plan_`).
    Plan,
    /// A tool call (`tool_`).
    ToolCall,
    /// A patch (`patch_`).
    Patch,
    /// A task graph (`graph_`).
    Graph,
    /// A sub-agent (`sub_`).
    SubAgent,
    /// A question to the user (`ask_`).
    Ask,
    /// A review (`rev_`).
    Review,
    /// A background task (`bg_`).
    Background,
}

impl IdKind {
    /// The prefix, including the underscore.
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Session => "sess_",
            IdKind::Request => "req_",
            IdKind::Event => "evt_",
            IdKind::Approval => "appr_",
            IdKind::Plan => "plan_",
            IdKind::ToolCall => "tool_",
            IdKind::Patch => "patch_",
            IdKind::Graph => "graph_",
            IdKind::SubAgent => "sub_",
            IdKind::Ask => "ask_",
            IdKind::Review => "rev_",
            IdKind::Background => "bg_",
        }
    }
}

/// Mints identifiers. Implementations must be thread-safe.
pub trait IdGen: Send + Sync + fmt::Debug {
    /// A new identifier of the given kind, e.g. `sess_01J…`.
    fn next_id(&self, kind: IdKind) -> String;
}

/// The production generator: a prefix and a ULID, monotonic within the process so
/// ids sort in creation order.
#[derive(Default)]
pub struct UlidGen {
    generator: Mutex<ulid::Generator>,
}

impl fmt::Debug for UlidGen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UlidGen")
    }
}

impl IdGen for UlidGen {
    fn next_id(&self, kind: IdKind) -> String {
        let id = match self.generator.lock() {
            // Overflow of the random part within one millisecond: fall back to a fresh id.
            Ok(mut g) => g.generate().unwrap_or_else(|_| ulid::Ulid::new()),
            Err(_) => ulid::Ulid::new(),
        };
        format!("{}{}", kind.prefix(), id)
    }
}

/// A deterministic generator for tests and golden transcripts: `sess_0001`, `evt_0002`, …
/// (one counter per kind).
#[derive(Debug, Default)]
pub struct SeqIdGen {
    counters: Mutex<std::collections::HashMap<&'static str, u64>>,
}

impl IdGen for SeqIdGen {
    fn next_id(&self, kind: IdKind) -> String {
        let mut map = match self.counters.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        let n = map.entry(kind.prefix()).or_insert(0);
        *n += 1;
        format!("{}{:04}", kind.prefix(), n)
    }
}

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// A clock for tests: starts at a fixed instant and advances by a fixed step on every read.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicU64,
    step: u64,
}

impl ManualClock {
    /// A clock reading `start` first and `start + step`, `start + 2·step`, … afterwards.
    pub fn new(start: u64, step: u64) -> Self {
        Self {
            now: AtomicU64::new(start),
            step,
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.fetch_add(self.step, Ordering::SeqCst)
    }
}

/// Whether `id` looks like an identifier of `kind` (prefix and a non-empty tail of
/// ASCII alphanumerics).
pub fn is_valid(kind: IdKind, id: &str) -> bool {
    id.strip_prefix(kind.prefix())
        .is_some_and(|tail| !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulid_ids_have_prefix_and_increase() {
        let g = UlidGen::default();
        let a = g.next_id(IdKind::Event);
        let b = g.next_id(IdKind::Event);
        assert!(a.starts_with("evt_") && a.len() == 4 + 26, "{a}");
        assert!(b > a, "{b} should sort after {a}");
        assert!(is_valid(IdKind::Event, &a));
        assert!(!is_valid(IdKind::Session, &a));
    }

    #[test]
    fn seq_ids_are_deterministic_per_kind() {
        let g = SeqIdGen::default();
        assert_eq!(g.next_id(IdKind::Session), "sess_0001");
        assert_eq!(g.next_id(IdKind::Event), "evt_0001");
        assert_eq!(g.next_id(IdKind::Event), "evt_0002");
    }

    #[test]
    fn manual_clock_steps() {
        let c = ManualClock::new(1000, 5);
        assert_eq!(c.now_ms(), 1000);
        assert_eq!(c.now_ms(), 1005);
        c.advance(100);
        assert_eq!(c.now_ms(), 1110);
    }
}
