//! Work started and finished over time, counted by the database.

use std::collections::BTreeMap;

use ratchet_core::Timestamp;
use ratchet_store::{ThroughputBucket, ThroughputQuery};

use crate::convert::{col, Res};
use crate::param::p;
use crate::store::Conn;

/// The buckets of `q` where something happened, in order.
pub(crate) async fn read(c: &Conn, q: &ThroughputQuery) -> Res<Vec<ThroughputBucket>> {
    let rows = c
        .query(
            "throughput",
            &[p(&q.from.0), p(&q.to.0), p(&i64::from(q.bucket_ms.get()))],
        )
        .await?;
    let mut buckets: BTreeMap<i64, ThroughputBucket> = BTreeMap::new();
    for row in &rows {
        let kind: String = col(row, "kind")?;
        let start: i64 = col(row, "start")?;
        let n = u64::try_from(col::<i64>(row, "n")?).unwrap_or(0);
        let bucket = buckets.entry(start).or_insert_with(|| ThroughputBucket {
            start: Timestamp(start),
            ..ThroughputBucket::default()
        });
        match kind.as_str() {
            "started" => bucket.instances_started += n,
            "Completed" => bucket.instances_completed += n,
            "Failed" => bucket.instances_failed += n,
            "task_Completed" => bucket.tasks_completed += n,
            _ => bucket.tasks_failed += n,
        }
    }
    Ok(buckets.into_values().collect())
}
