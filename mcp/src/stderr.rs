//! A stdio server's stderr, written to the log (target `keel_mcp::server`) with bounds:
//! each line cut at [`LINE_CAP`], a rate of [`RATE`] bytes a second with bursts of
//! [`BURST`], and at most [`TOTAL_CAP`] bytes per server start. What goes over is
//! read (the server never blocks on a full pipe) and dropped, and the log says where:
//! when dropping starts, how much was dropped when logging resumes, once when the
//! total cap is reached, and the count at the end.

use std::time::Instant;

use keel_tools::exec::LineSplitter;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStderr;

/// The longest line kept (the rest of a longer line is dropped with a marker).
pub const LINE_CAP: usize = 4 * 1024;
/// Sustained rate of stderr logged per server, bytes per second.
pub const RATE: usize = 16 * 1024;
/// Bytes that may be logged at once before the rate applies.
pub const BURST: usize = 256 * 1024;
/// Bytes of stderr logged per server start, in all.
pub const TOTAL_CAP: usize = 1024 * 1024;

/// The budget of one server's stderr.
#[derive(Debug)]
struct Budget {
    tokens: f64,
    at: Instant,
    logged: usize,
    /// Lines and bytes dropped since logging last stopped, and in all.
    dropped_lines: u64,
    dropped_bytes: u64,
    total_dropped_lines: u64,
    total_dropped_bytes: u64,
    capped: bool,
}

/// What to do with one line.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Log,
    /// Dropped; the first of a run says so.
    Drop {
        first: bool,
    },
}

impl Budget {
    fn new(now: Instant) -> Self {
        Self {
            tokens: BURST as f64,
            at: now,
            logged: 0,
            dropped_lines: 0,
            dropped_bytes: 0,
            total_dropped_lines: 0,
            total_dropped_bytes: 0,
            capped: false,
        }
    }

    fn judge(&mut self, len: usize, now: Instant) -> Verdict {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * RATE as f64).min(BURST as f64);
        let cost = len.max(1);
        if !self.capped && self.logged + cost <= TOTAL_CAP && self.tokens >= cost as f64 {
            self.tokens -= cost as f64;
            self.logged += cost;
            return Verdict::Log;
        }
        let first = self.dropped_lines == 0;
        self.dropped_lines += 1;
        self.dropped_bytes += len as u64;
        self.total_dropped_lines += 1;
        self.total_dropped_bytes += len as u64;
        Verdict::Drop { first }
    }
}

/// A note of the bounds in the log, beside the server's lines.
fn note(server: &str, text: std::fmt::Arguments<'_>) {
    tracing::warn!(target: "keel_mcp::server", server = %server, "[{text}]");
}

/// Logs `stderr` of server `server` until it ends, within the bounds.
pub(crate) async fn pump(server: String, mut stderr: ChildStderr) {
    let mut split = LineSplitter::new(LINE_CAP);
    let mut budget = Budget::new(Instant::now());
    let mut buf = vec![0u8; 16 * 1024];
    let log = |line: String, budget: &mut Budget| match budget.judge(line.len(), Instant::now()) {
        Verdict::Log => {
            if budget.dropped_lines > 0 {
                note(
                    &server,
                    format_args!(
                        "{} lines ({} bytes) of this server's stderr were dropped above: over {RATE} bytes a second",
                        budget.dropped_lines, budget.dropped_bytes
                    ),
                );
                budget.dropped_lines = 0;
                budget.dropped_bytes = 0;
            }
            tracing::info!(target: "keel_mcp::server", server = %server, "{line}");
        }
        Verdict::Drop { first } => {
            if budget.logged + LINE_CAP > TOTAL_CAP && !budget.capped {
                budget.capped = true;
                note(
                    &server,
                    format_args!(
                        "stderr cut here: this server logged its {TOTAL_CAP} bytes; the rest of its stderr is dropped"
                    ),
                );
            } else if first && !budget.capped {
                note(
                    &server,
                    format_args!("stderr cut here: over {RATE} bytes a second; dropping lines"),
                );
            }
        }
    };
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for line in split.push(&buf[..n]) {
                    log(line, &mut budget);
                }
            }
        }
    }
    if let Some(line) = split.finish() {
        log(line, &mut budget);
    }
    if budget.total_dropped_lines > 0 {
        note(
            &server,
            format_args!(
                "stderr ended: {} lines ({} bytes) were dropped in all",
                budget.total_dropped_lines, budget.total_dropped_bytes
            ),
        );
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_budget_allows_a_burst_then_the_rate_then_stops_at_the_cap() {
        let t0 = Instant::now();
        let mut b = Budget::new(t0);
        let line = 1024;
        // The burst goes through at once.
        for _ in 0..BURST / line {
            assert_eq!(b.judge(line, t0), Verdict::Log);
        }
        assert_eq!(b.judge(line, t0), Verdict::Drop { first: true });
        assert_eq!(b.judge(line, t0), Verdict::Drop { first: false });
        // A second later, the rate's worth is logged.
        let t1 = t0 + Duration::from_secs(1);
        for _ in 0..RATE / line {
            assert_eq!(b.judge(line, t1), Verdict::Log);
        }
        assert!(matches!(b.judge(line, t1), Verdict::Drop { .. }));
        // Hours later, the total cap still holds.
        let mut logged = b.logged;
        for h in 1..100u64 {
            let t = t1 + Duration::from_secs(3600 * h);
            while b.judge(line, t) == Verdict::Log {
                logged += line;
            }
        }
        assert!(logged <= TOTAL_CAP, "{logged}");
        assert_eq!(b.logged, logged);
    }
}
