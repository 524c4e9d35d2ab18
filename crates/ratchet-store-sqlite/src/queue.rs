//! Queue settings shared by every process: pause, concurrency and the rate limit's token
//! bucket, and the statistics of each queue.

use std::collections::BTreeMap;

use ratchet_core::Timestamp;
use ratchet_store::{QueueLimits, QueueStats, QueueUpdate, Result, TaskState};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::convert::{db_err, task_state, u32_of};
use crate::store::sql;

/// A queue's row in `queues`, as a claim reads it.
pub(crate) struct Settings {
    /// No task of the queue starts.
    pub(crate) paused: bool,
    /// Tasks running at once at most.
    pub(crate) concurrency: Option<u32>,
    rate_per_second: Option<f64>,
    burst: Option<u32>,
    tokens: Option<f64>,
    refilled_at: Option<i64>,
}

impl Settings {
    /// The rate limit's bucket refilled up to `now`, when the queue has a rate limit.
    pub(crate) fn bucket(&self, now: Timestamp) -> Option<Bucket> {
        let rate = self.rate_per_second?;
        let capacity = capacity(rate, self.burst);
        let (tokens, refilled_at) = match (self.tokens, self.refilled_at) {
            (Some(tokens), Some(at)) => {
                // A clock behind the last refill adds nothing and does not move it back, so
                // no interval is ever counted twice.
                let elapsed = now.0.saturating_sub(at).max(0) as f64;
                let tokens = (tokens + elapsed * rate / 1000.0).min(capacity);
                (tokens, now.0.max(at))
            }
            _ => (capacity, now.0),
        };
        Some(Bucket {
            rate,
            tokens,
            refilled_at,
        })
    }
}

/// How many tasks a queue's rate limit lets start at once after a quiet spell: `burst`, or a
/// tenth of a second's worth and at least one.
fn capacity(rate: f64, burst: Option<u32>) -> f64 {
    burst.map_or_else(|| (rate / 10.0).ceil().max(1.0), f64::from)
}

/// A rate limit's token bucket: one token per task started, refilled at `rate` per second.
#[derive(Debug, PartialEq)]
pub(crate) struct Bucket {
    rate: f64,
    tokens: f64,
    refilled_at: i64,
}

impl Bucket {
    /// How many tasks may start now.
    pub(crate) fn whole(&self) -> u32 {
        // Float-to-int casts saturate; tokens are never negative.
        self.tokens.floor().max(0.0) as u32
    }

    /// Spends a token per task started.
    pub(crate) fn spend(&mut self, started: usize) {
        self.tokens -= started as f64;
    }

    /// When the next whole token arrives, if there is none now.
    pub(crate) fn next_token(&self, now: Timestamp) -> Option<Timestamp> {
        if self.tokens >= 1.0 || self.rate <= 0.0 {
            return None;
        }
        let wait = ((1.0 - self.tokens) * 1000.0 / self.rate).ceil() as i64;
        Some(Timestamp(now.0.saturating_add(wait)))
    }

    /// Writes the bucket back to the queue's row.
    pub(crate) fn store(&self, tx: &Transaction<'_>, queue: &str) -> Result<()> {
        tx.prepare_cached(sql("queue_refill"))
            .map_err(db_err)?
            .execute(params![queue, self.tokens, self.refilled_at])
            .map_err(db_err)?;
        Ok(())
    }
}

/// The queue's settings, `None` when it has no row (it runs freely).
pub(crate) fn settings(tx: &Transaction<'_>, queue: &str) -> Result<Option<Settings>> {
    tx.prepare_cached(sql("queue_settings"))
        .map_err(db_err)?
        .query_row([queue], |r| {
            Ok(Settings {
                paused: r.get(0)?,
                rate_per_second: r.get(1)?,
                burst: r.get::<_, Option<i64>>(2)?.map(u32_of),
                concurrency: r.get::<_, Option<i64>>(3)?.map(u32_of),
                tokens: r.get(4)?,
                refilled_at: r.get(5)?,
            })
        })
        .optional()
        .map_err(db_err)
}

/// Applies a [`QueueUpdate`]; new limits start with a full bucket.
pub(crate) fn update(tx: &Transaction<'_>, u: &QueueUpdate) -> Result<()> {
    tx.prepare_cached(sql("queue_ensure"))
        .map_err(db_err)?
        .execute([&u.queue])
        .map_err(db_err)?;
    if let Some(paused) = u.paused {
        tx.prepare_cached(sql("queue_pause"))
            .map_err(db_err)?
            .execute(params![u.queue, paused])
            .map_err(db_err)?;
    }
    if let Some(l) = &u.limits {
        let tokens = l.rate_per_second.map(|rate| capacity(rate, l.burst));
        tx.prepare_cached(sql("queue_limit"))
            .map_err(db_err)?
            .execute(params![
                u.queue,
                l.rate_per_second,
                l.burst,
                l.concurrency,
                tokens
            ])
            .map_err(db_err)?;
    }
    Ok(())
}

/// Every queue with settings, unfinished tasks or results, by name, with a count for every
/// state.
pub(crate) fn stats(conn: &Connection, now: Timestamp) -> Result<Vec<QueueStats>> {
    let mut queues: BTreeMap<String, QueueStats> = BTreeMap::new();
    let empty = |queue: &str| QueueStats {
        queue: queue.to_string(),
        counts: TaskState::ALL.iter().map(|s| (*s, 0)).collect(),
        ..QueueStats::default()
    };
    let mut stmt = conn.prepare_cached(sql("queue_all")).map_err(db_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, bool>(1)?,
                QueueLimits {
                    rate_per_second: r.get(2)?,
                    burst: r.get::<_, Option<i64>>(3)?.map(u32_of),
                    concurrency: r.get::<_, Option<i64>>(4)?.map(u32_of),
                },
            ))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    for (name, paused, limits) in rows {
        let q = queues.entry(name).or_insert_with_key(|name| empty(name));
        q.paused = paused;
        q.limits = limits;
    }
    let mut stmt = conn.prepare_cached(sql("queue_counts")).map_err(db_err)?;
    let rows = stmt
        .query_map([now.0], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<i64>>(3)?,
            ))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    for (name, state, n, oldest) in rows {
        let state = task_state(&state)?;
        let q = queues.entry(name).or_insert_with_key(|name| empty(name));
        if state == TaskState::Available {
            q.oldest_available = oldest.map(Timestamp);
        }
        if let Some(count) = q.counts.iter_mut().find(|(s, _)| *s == state) {
            count.1 = u64::try_from(n).unwrap_or(0);
        }
    }
    Ok(queues.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(rate: f64, burst: Option<u32>, tokens: Option<f64>, at: Option<i64>) -> Settings {
        Settings {
            paused: false,
            concurrency: None,
            rate_per_second: Some(rate),
            burst,
            tokens,
            refilled_at: at,
        }
    }

    #[test]
    fn a_new_bucket_is_full() {
        let b = limited(25.0, None, None, None).bucket(Timestamp(10));
        assert_eq!(b.as_ref().map(Bucket::whole), Some(3), "ceil(25 / 10)");
        let b = limited(2.0, None, None, None).bucket(Timestamp(10));
        assert_eq!(b.as_ref().map(Bucket::whole), Some(1), "at least one");
        let b = limited(2.0, Some(7), None, None).bucket(Timestamp(10));
        assert_eq!(b.as_ref().map(Bucket::whole), Some(7), "the burst");
    }

    #[test]
    fn tokens_refill_at_the_rate_up_to_the_capacity() {
        let s = limited(10.0, Some(2), Some(0.0), Some(1_000));
        let b = s.bucket(Timestamp(1_150)).map(|b| (b.whole(), b.tokens));
        assert_eq!(b, Some((1, 1.5)));
        let b = s.bucket(Timestamp(9_000)).map(|b| b.tokens);
        assert_eq!(b, Some(2.0));
        let back = s.bucket(Timestamp(500));
        assert_eq!(
            back.map(|b| (b.tokens, b.refilled_at)),
            Some((0.0, 1_000)),
            "a clock behind adds nothing and moves nothing back"
        );
    }

    #[test]
    fn next_token_is_when_a_whole_one_arrives() {
        let s = limited(10.0, Some(2), Some(0.25), Some(1_000));
        let Some(mut b) = s.bucket(Timestamp(1_000)) else {
            panic!("rate limited")
        };
        assert_eq!(b.next_token(Timestamp(1_000)), Some(Timestamp(1_075)));
        b.tokens = 1.0;
        assert_eq!(b.next_token(Timestamp(1_000)), None);
        b.spend(1);
        assert_eq!(b.next_token(Timestamp(1_000)), Some(Timestamp(1_100)));
        assert!(limited(0.0, Some(1), Some(0.0), Some(0))
            .bucket(Timestamp(5))
            .and_then(|b| b.next_token(Timestamp(5)))
            .is_none());
    }
}
