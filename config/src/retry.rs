//! How failed model calls are retried (`[retry]`): how many times, and the wait
//! before each retry.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Longest wait a server's requested delay (`Retry-After`) can impose.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// How failed calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = never retry).
    pub max_retries: u32,
    /// Wait before the first retry, in milliseconds; doubled at each retry.
    pub base_delay_ms: u64,
    /// Cap on the computed wait, in milliseconds.
    pub max_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay_ms: 1000,
            max_delay_ms: 30_000,
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based): the server's requested
    /// wait when given (at most five minutes), otherwise exponential backoff with
    /// jitter (between half and all of `base · 2^(attempt-1)`, capped at
    /// `max_delay_ms`).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(ra) = retry_after {
            return ra.min(MAX_RETRY_AFTER);
        }
        let exp = attempt.saturating_sub(1).min(30);
        let full = self
            .base_delay_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_delay_ms);
        let half = full / 2;
        let jitter = if full - half == 0 {
            0
        } else {
            random_u64() % (full - half + 1)
        };
        Duration::from_millis(half + jitter)
    }
}

fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_jittered_and_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            base_delay_ms: 100,
            max_delay_ms: 1000,
        };
        for _ in 0..50 {
            let d1 = p.delay(1, None).as_millis();
            assert!((50..=100).contains(&d1), "{d1}");
            let d3 = p.delay(3, None).as_millis();
            assert!((200..=400).contains(&d3), "{d3}");
            let d10 = p.delay(10, None).as_millis();
            assert!((500..=1000).contains(&d10), "{d10}");
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(7))),
            Duration::from_secs(7)
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(9999))), MAX_RETRY_AFTER);
        let zero = RetryPolicy {
            base_delay_ms: 0,
            ..p
        };
        assert_eq!(zero.delay(2, None), Duration::ZERO);
    }
}
