use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How an activity is retried. Retries happen in the runtime, not in orchestration history:
/// only the final outcome is delivered to the orchestration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts in total, including the first. `1` means no retry.
    pub max_attempts: u32,
    /// Delay before the second attempt, in milliseconds.
    pub initial_interval_ms: u64,
    /// Each further delay is the previous one times this.
    pub backoff: f64,
    /// The largest delay, in milliseconds.
    pub max_interval_ms: u64,
    /// Error kinds that are never retried.
    #[serde(default)]
    pub non_retryable: Vec<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_interval_ms: 1_000,
            backoff: 2.0,
            max_interval_ms: 60_000,
            non_retryable: Vec::new(),
        }
    }
}

impl RetryPolicy {
    /// A policy that makes one attempt only.
    pub fn no_retry() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// Sets the number of attempts (at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// Sets the first retry delay.
    pub fn initial_interval(mut self, d: Duration) -> Self {
        self.initial_interval_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Sets the backoff multiplier (at least 1).
    pub fn backoff(mut self, factor: f64) -> Self {
        self.backoff = if factor.is_finite() {
            factor.max(1.0)
        } else {
            1.0
        };
        self
    }

    /// Sets the largest delay.
    pub fn max_interval(mut self, d: Duration) -> Self {
        self.max_interval_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Adds an error kind that is never retried.
    pub fn non_retryable(mut self, kind: impl Into<String>) -> Self {
        self.non_retryable.push(kind.into());
        self
    }

    /// The delay before attempt `next_attempt` (2 for the first retry), or `None` when the
    /// policy allows no such attempt or `error_kind` is non-retryable.
    pub fn delay_before(&self, next_attempt: u32, error_kind: &str) -> Option<Duration> {
        if next_attempt > self.max_attempts || self.non_retryable.iter().any(|k| k == error_kind) {
            return None;
        }
        let exponent = i32::try_from(next_attempt.saturating_sub(2)).unwrap_or(i32::MAX);
        let ms = (self.initial_interval_ms as f64) * self.backoff.max(1.0).powi(exponent);
        let ms = ms.min(self.max_interval_ms as f64).max(0.0);
        Some(Duration::from_millis(ms as u64))
    }
}

/// Options of one activity call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActivityOptions {
    /// Retry policy.
    pub retry: RetryPolicy,
    /// How long one attempt may run before it counts as failed with kind `Timeout`, in ms.
    pub start_to_close_ms: u64,
}

impl Default for ActivityOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            start_to_close_ms: 300_000,
        }
    }
}

impl ActivityOptions {
    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the start-to-close timeout of one attempt.
    pub fn start_to_close(mut self, d: Duration) -> Self {
        self.start_to_close_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        self
    }

    /// The start-to-close timeout as a duration.
    pub fn start_to_close_timeout(&self) -> Duration {
        Duration::from_millis(self.start_to_close_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let p = RetryPolicy::default()
            .max_attempts(5)
            .initial_interval(Duration::from_millis(100))
            .backoff(2.0)
            .max_interval(Duration::from_millis(300))
            .non_retryable("Fatal");
        assert_eq!(p.delay_before(2, "X"), Some(Duration::from_millis(100)));
        assert_eq!(p.delay_before(3, "X"), Some(Duration::from_millis(200)));
        assert_eq!(p.delay_before(4, "X"), Some(Duration::from_millis(300)));
        assert_eq!(p.delay_before(6, "X"), None);
        assert_eq!(p.delay_before(2, "Fatal"), None);
    }
}
