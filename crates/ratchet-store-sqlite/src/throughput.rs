//! Work started and finished over time, counted bucket by bucket.

use ratchet_core::Timestamp;
use ratchet_store::{Result, ThroughputBucket, ThroughputQuery};
use rusqlite::{params, Connection};

use crate::convert::db_err;
use crate::store::sql;

/// The buckets of `q` where something happened, in order.
pub(crate) fn read(conn: &Connection, q: &ThroughputQuery) -> Result<Vec<ThroughputBucket>> {
    let count = |r: &rusqlite::Row<'_>, i: usize| -> rusqlite::Result<u64> {
        Ok(u64::try_from(r.get::<_, i64>(i)?).unwrap_or(0))
    };
    conn.prepare_cached(sql("throughput"))
        .map_err(db_err)?
        .query_map(
            params![q.from.0, q.to.0, i64::from(q.bucket_ms.get())],
            |r| {
                Ok(ThroughputBucket {
                    start: Timestamp(r.get(0)?),
                    instances_started: count(r, 1)?,
                    instances_completed: count(r, 2)?,
                    instances_failed: count(r, 3)?,
                    tasks_completed: count(r, 4)?,
                    tasks_failed: count(r, 5)?,
                })
            },
        )
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)
}
