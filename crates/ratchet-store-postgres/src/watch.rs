//! A watch on the named statements' durations: when one takes far longer than it has lately,
//! the log says so, naming it, and `ratchet_store_slow_statements_total` counts it.
//!
//! A queue table is empty and full many times a minute, so its statistics are always wrong
//! somewhere; a plan made on the wrong ones can make a 5 ms statement take 500 ms, with no
//! error anywhere. This is how an operator hears of it without `auto_explain`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Durations kept per statement.
const WINDOW: usize = 64;
/// Samples needed before a statement is judged: its median means something by then.
const WARM: usize = WINDOW;
/// The median is computed again after this many samples (sorting on every call would cost
/// more than the watch is worth).
const RECOMPUTE_EVERY: u64 = 16;
/// A call is a jump when it took this many times the median...
const JUMP_FACTOR: u32 = 10;
/// ...and at least this long: short statements jitter by multiples of themselves.
const JUMP_FLOOR: Duration = Duration::from_millis(250);
/// One warning per statement at most this often (the counter counts every jump).
const WARN_EVERY: Duration = Duration::from_secs(30);

/// What one statement took lately.
#[derive(Default)]
struct Window {
    /// The last [`WINDOW`] durations, in microseconds, as a ring.
    took_us: Vec<u32>,
    /// Samples recorded in all.
    seen: u64,
    /// The median of the ring when last computed.
    median_us: u32,
    /// When this statement last caused a warning.
    warned_at: Option<Instant>,
}

/// A call far slower than its statement's recent median.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Jump {
    /// What the call took.
    pub(crate) took: Duration,
    /// The statement's recent median.
    pub(crate) median: Duration,
    /// Whether to say so in the log (at most once per [`WARN_EVERY`] per statement).
    pub(crate) warn: bool,
}

/// The durations of every named statement of a store.
#[derive(Default)]
pub(crate) struct StatementWatch {
    windows: Mutex<HashMap<String, Window>>,
}

impl StatementWatch {
    /// Records that `name` took `took` at `now`, and reports it when it jumped.
    pub(crate) fn record(&self, name: &str, took: Duration, now: Instant) -> Option<Jump> {
        let took_us = u32::try_from(took.as_micros()).unwrap_or(u32::MAX);
        // Plain counters: a panic while the lock was held leaves them usable.
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !windows.contains_key(name) {
            windows.insert(name.to_string(), Window::default());
        }
        let w = windows.get_mut(name)?;
        let median = Duration::from_micros(u64::from(w.median_us));
        let judged = w.took_us.len() >= WARM;
        let jump = judged && took >= JUMP_FLOOR && took >= median.saturating_mul(JUMP_FACTOR);
        // The ring: a jump goes in too, so a plan that stays bad becomes the new normal
        // after a while instead of warning forever.
        if w.took_us.len() < WINDOW {
            w.took_us.push(took_us);
        } else {
            let at = (w.seen % WINDOW as u64) as usize;
            w.took_us[at] = took_us;
        }
        w.seen += 1;
        if w.took_us.len() == WARM || w.seen.is_multiple_of(RECOMPUTE_EVERY) {
            let mut sorted = w.took_us.clone();
            sorted.sort_unstable();
            w.median_us = sorted[sorted.len() / 2];
        }
        if !jump {
            return None;
        }
        let warn = w
            .warned_at
            .is_none_or(|at| now.saturating_duration_since(at) >= WARN_EVERY);
        if warn {
            w.warned_at = Some(now);
        }
        Some(Jump { took, median, warn })
    }

    /// Records a call and, on a jump, counts it and (rate-limited) warns, naming the
    /// statement.
    pub(crate) fn observe(&self, name: &str, started: Instant) {
        let now = Instant::now();
        let Some(jump) = self.record(name, now.saturating_duration_since(started), now) else {
            return;
        };
        metrics::counter!("ratchet_store_slow_statements_total", "statement" => name.to_string())
            .increment(1);
        if jump.warn {
            tracing::warn!(
                statement = name,
                took_ms = jump.took.as_millis() as u64,
                median_ms = jump.median.as_secs_f64() * 1000.0,
                "statement {name} took {:?}, against a recent median of {:?}: its plan may have \
                 gone wrong (docs/operations.md, \"When a statement slows down\")",
                jump.took,
                jump.median
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_jump_far_above_the_median_is_reported_and_warned_once_in_a_while() {
        let watch = StatementWatch::default();
        let t0 = Instant::now();
        for _ in 0..WARM {
            assert_eq!(watch.record("claim", ms(3), t0), None);
        }
        // Slower, but not ten times the median, or under the floor: not a jump.
        assert_eq!(watch.record("claim", ms(25), t0), None);
        let jump = watch.record("claim", ms(400), t0).expect("a jump");
        assert_eq!((jump.took, jump.median, jump.warn), (ms(400), ms(3), true));
        // Counted again, warned no more until WARN_EVERY has passed.
        assert!(!watch.record("claim", ms(400), t0 + ms(10)).unwrap().warn);
        assert!(
            watch
                .record("claim", ms(400), t0 + WARN_EVERY)
                .unwrap()
                .warn
        );
        // Other statements have their own medians.
        assert_eq!(watch.record("commit", ms(400), t0), None);
    }

    #[test]
    fn a_statement_that_is_always_slow_is_not_a_jump() {
        let watch = StatementWatch::default();
        let t0 = Instant::now();
        for _ in 0..WINDOW * 2 {
            assert_eq!(watch.record("report", ms(900), t0), None);
        }
    }

    #[test]
    fn a_plan_that_stays_bad_becomes_the_new_median() {
        let watch = StatementWatch::default();
        let t0 = Instant::now();
        for _ in 0..WINDOW {
            watch.record("claim", ms(2), t0);
        }
        let jumps = (0..WINDOW * 2)
            .filter(|_| watch.record("claim", ms(300), t0).is_some())
            .count();
        assert!(jumps > 0 && jumps < WINDOW, "{jumps} jumps");
    }
}
