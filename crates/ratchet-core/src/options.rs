use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How an activity is retried. Retries happen in the runtime, not in orchestration history:
/// only the final outcome is delivered to the orchestration. A field left out reads as its
/// default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// Each delay is spread by up to this fraction either way (0.1: ±10 %), so retries of
    /// many tasks that failed together do not return together.
    #[serde(default)]
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_interval_ms: 1_000,
            backoff: 2.0,
            max_interval_ms: 60_000,
            non_retryable: Vec::new(),
            jitter: 0.0,
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

    /// Sets the jitter: each delay is spread by up to this fraction either way (0 to 1).
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
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

    /// `delay` spread by the jitter; `unit` is a random number in `[0, 1)` from the caller
    /// (this crate draws no randomness of its own).
    pub fn jittered(&self, delay: Duration, unit: f64) -> Duration {
        let spread = self.jitter.clamp(0.0, 1.0) * (unit.clamp(0.0, 1.0) * 2.0 - 1.0);
        delay.mul_f64((1.0 + spread).max(0.0))
    }
}

/// Options of one activity call. A field left out reads as its default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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

/// How history writes an activity's options: only the fields that differ from their
/// defaults (nothing at all for the default options), so that a fan-out's turn stays a small
/// row. Read back with [`ActivityOptions`]' own `Deserialize`, which fills in the defaults.
pub(crate) mod compact {
    use serde::{Serialize, Serializer};

    use super::{ActivityOptions, RetryPolicy};

    /// True when `options` are the defaults, which history leaves out.
    pub(crate) fn is_default(options: &ActivityOptions) -> bool {
        *options == ActivityOptions::default()
    }

    #[derive(Serialize)]
    struct Options<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        retry: Option<Retry<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        start_to_close_ms: Option<u64>,
    }

    #[derive(Serialize)]
    struct Retry<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        max_attempts: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        initial_interval_ms: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        backoff: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_interval_ms: Option<u64>,
        #[serde(skip_serializing_if = "<[String]>::is_empty")]
        non_retryable: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        jitter: Option<f64>,
    }

    /// Keeps `value` only when it differs from `default`.
    fn unless<T: PartialEq>(value: T, default: T) -> Option<T> {
        (value != default).then_some(value)
    }

    /// Writes `options` without their default fields.
    pub(crate) fn serialize<S: Serializer>(
        options: &ActivityOptions,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        // Taken apart whole: a field added to either struct fails to compile here rather
        // than go missing from history.
        let ActivityOptions {
            retry,
            start_to_close_ms,
        } = options;
        let RetryPolicy {
            max_attempts,
            initial_interval_ms,
            backoff,
            max_interval_ms,
            non_retryable,
            jitter,
        } = retry;
        let (defaults, d) = (ActivityOptions::default(), RetryPolicy::default());
        let retry = (*retry != d).then(|| Retry {
            max_attempts: unless(*max_attempts, d.max_attempts),
            initial_interval_ms: unless(*initial_interval_ms, d.initial_interval_ms),
            backoff: unless(*backoff, d.backoff),
            max_interval_ms: unless(*max_interval_ms, d.max_interval_ms),
            non_retryable,
            jitter: unless(*jitter, d.jitter),
        });
        Options {
            retry,
            start_to_close_ms: unless(*start_to_close_ms, defaults.start_to_close_ms),
        }
        .serialize(serializer)
    }
}

/// Options of a standalone task, enqueued by a client or by an orchestration step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskOptions {
    /// The queue (default `default`). Workers run the queues they are configured for.
    pub queue: String,
    /// Lower runs first (default 0); negative is allowed.
    pub priority: i16,
    /// Not run before this time, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<crate::Timestamp>,
    /// Not run before this long after enqueueing, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Attempts, backoff and jitter, and error kinds never retried.
    pub retry: RetryPolicy,
    /// How long one attempt may run before it counts as failed with kind `Timeout`, in ms.
    pub timeout_ms: u64,
    /// While a task with this key is not finished, enqueueing another with it does nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// Anything the caller wants to keep with the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

impl Default for TaskOptions {
    fn default() -> Self {
        Self {
            queue: "default".into(),
            priority: 0,
            run_at: None,
            delay_ms: 0,
            retry: RetryPolicy {
                max_attempts: 20,
                initial_interval_ms: 1_000,
                backoff: 2.0,
                max_interval_ms: 3_600_000,
                non_retryable: Vec::new(),
                jitter: 0.2,
            },
            timeout_ms: 300_000,
            unique_key: None,
            metadata: None,
        }
    }
}

impl TaskOptions {
    /// Sets the queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Sets the priority: lower runs first.
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = priority;
        self
    }

    /// Runs the task no earlier than `at`.
    pub fn run_at(mut self, at: crate::Timestamp) -> Self {
        self.run_at = Some(at);
        self
    }

    /// Runs the task no earlier than `delay` after enqueueing.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the number of attempts (at least 1), keeping the rest of the retry policy.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.retry = self.retry.max_attempts(n);
        self
    }

    /// Sets the timeout of one attempt.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1);
        self
    }

    /// Sets the unique key.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Sets the metadata.
    pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = Some(metadata);
        self
    }

    /// When the task may first run, if enqueued at `now`.
    pub fn visible_at(&self, now: crate::Timestamp) -> crate::Timestamp {
        let delayed = now.plus(Duration::from_millis(self.delay_ms));
        self.run_at.map_or(delayed, |at| at.max(delayed))
    }

    /// The retry policy and timeout in the form the runtime runs attempts with.
    pub fn attempt_options(&self) -> ActivityOptions {
        ActivityOptions {
            retry: self.retry.clone(),
            start_to_close_ms: self.timeout_ms.max(1),
        }
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

    #[test]
    fn jitter_spreads_within_bounds() {
        let p = RetryPolicy::default().jitter(0.5);
        let d = Duration::from_millis(1000);
        assert_eq!(p.jittered(d, 0.0), Duration::from_millis(500));
        assert_eq!(p.jittered(d, 0.5), d);
        assert!(p.jittered(d, 0.999) < Duration::from_millis(1500));
        assert_eq!(
            RetryPolicy::default().jittered(d, 0.9),
            d,
            "no jitter by default"
        );
    }

    #[test]
    fn task_options_schedule_and_convert() {
        let now = crate::Timestamp(10_000);
        let o = TaskOptions::default().delay(Duration::from_secs(2));
        assert_eq!(o.visible_at(now), crate::Timestamp(12_000));
        let at = o.clone().run_at(crate::Timestamp(50_000));
        assert_eq!(at.visible_at(now), crate::Timestamp(50_000));
        let opts = o
            .timeout(Duration::from_secs(3))
            .max_attempts(0)
            .attempt_options();
        assert_eq!(
            (opts.start_to_close_ms, opts.retry.max_attempts),
            (3_000, 1)
        );
    }

    #[test]
    fn history_keeps_only_the_options_that_differ_from_the_defaults() {
        use crate::HistoryEvent;
        let scheduled = |options: ActivityOptions| HistoryEvent::ActivityScheduled {
            seq: 0,
            name: "a".into(),
            input: serde_json::Value::Null,
            options,
        };
        let written = |e: &HistoryEvent| serde_json::to_value(e).expect("serializes");
        let read = |v: serde_json::Value| -> HistoryEvent {
            serde_json::from_value(v).expect("reads back")
        };

        let plain = scheduled(ActivityOptions::default());
        assert_eq!(
            written(&plain),
            serde_json::json!({"type": "ActivityScheduled", "seq": 0, "name": "a", "input": null})
        );
        assert_eq!(read(written(&plain)), plain);

        let mut options = ActivityOptions::default();
        options.retry.max_attempts = 1;
        options.start_to_close_ms = 305_000;
        let call = scheduled(options);
        assert_eq!(
            written(&call)["options"],
            serde_json::json!({"retry": {"max_attempts": 1}, "start_to_close_ms": 305_000})
        );
        assert_eq!(read(written(&call)), call);

        let every = ActivityOptions {
            retry: RetryPolicy {
                max_attempts: 7,
                initial_interval_ms: 5,
                backoff: 1.5,
                max_interval_ms: 9,
                non_retryable: vec!["Fatal".into()],
                jitter: 0.25,
            },
            start_to_close_ms: 1,
        };
        let every = scheduled(every);
        assert_eq!(read(written(&every)), every);

        // Histories written whole, before the defaults were left out, read the same.
        let whole = serde_json::json!({"type": "ActivityScheduled", "seq": 0, "name": "a",
            "input": null, "options": serde_json::to_value(ActivityOptions::default())
                .expect("serializes")});
        assert_eq!(read(whole), plain);
    }
}
