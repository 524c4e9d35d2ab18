//! Work started and finished over time, counted by the database for dashboards.

use std::num::NonZeroU32;

use ratchet_core::Timestamp;

use crate::{Result, StoreError};

/// Parameters of [`crate::Store::throughput`]: a time range cut into buckets of equal width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThroughputQuery {
    /// The first bucket's start (inclusive).
    pub from: Timestamp,
    /// The end of the last bucket (exclusive); a last bucket shorter than the others ends here.
    pub to: Timestamp,
    /// The width of a bucket, in milliseconds.
    pub bucket_ms: NonZeroU32,
}

impl ThroughputQuery {
    /// The most buckets one query may ask for: a dashboard's day by the minute, with room.
    pub const MAX_BUCKETS: u64 = 10_000;

    /// How many buckets the range holds (the last one may be shorter); 0 for an empty range.
    pub fn buckets(&self) -> u64 {
        let span = u64::try_from(self.to.0.saturating_sub(self.from.0)).unwrap_or(0);
        span.div_ceil(u64::from(self.bucket_ms.get()))
    }

    /// Refuses a query of more than [`ThroughputQuery::MAX_BUCKETS`] buckets.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] naming the count.
    pub fn validate(&self) -> Result<()> {
        let buckets = self.buckets();
        if buckets > Self::MAX_BUCKETS {
            return Err(StoreError::Invalid(format!(
                "{buckets} buckets asked for; at most {} are counted at once",
                Self::MAX_BUCKETS
            )));
        }
        Ok(())
    }
}

/// What happened in one bucket of a [`ThroughputQuery`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThroughputBucket {
    /// Its start: the query's `from` plus a whole number of buckets.
    pub start: Timestamp,
    /// Instances created in it (a restarted id counts again when it restarts).
    pub instances_started: u64,
    /// Instances that finished in it with an output.
    pub instances_completed: u64,
    /// Instances that finished in it with an error (status `Failed`).
    pub instances_failed: u64,
    /// Standalone tasks that completed in it.
    pub tasks_completed: u64,
    /// Standalone tasks that ran out of attempts in it (dead letters).
    pub tasks_failed: u64,
}

impl ThroughputBucket {
    /// True when nothing happened in it.
    pub fn is_empty(&self) -> bool {
        self.instances_started == 0
            && self.instances_completed == 0
            && self.instances_failed == 0
            && self.tasks_completed == 0
            && self.tasks_failed == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_range_and_are_bounded() {
        let q = |from: i64, to: i64, ms: u32| ThroughputQuery {
            from: Timestamp(from),
            to: Timestamp(to),
            bucket_ms: NonZeroU32::new(ms).unwrap(),
        };
        assert_eq!(q(0, 60_000, 60_000).buckets(), 1);
        assert_eq!(q(0, 60_001, 60_000).buckets(), 2);
        assert_eq!(q(5, 5, 1).buckets(), 0);
        assert_eq!(q(9, 5, 1).buckets(), 0);
        assert!(q(0, 86_400_000, 60_000).validate().is_ok());
        assert!(q(0, 86_400_000, 1).validate().is_err());
    }
}
