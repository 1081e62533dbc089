//! Real time, for what the kernel's injected clock must not decide (how long a
//! session has been idle).

/// Milliseconds of real time since the first call in this process (idle times are
/// real time, whatever clock stamps the events).
pub(crate) fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
