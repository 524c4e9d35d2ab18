//! Queues: shared settings and statistics.

use ratchet_core::Timestamp;
use ratchet_store::{QueueLimits, QueueStats, QueueUpdate, TaskState};

use crate::convert::{col, Res};
use crate::param::p;
use crate::store::Conn;
use crate::task::task_state;

pub(crate) async fn update(c: &Conn, u: &QueueUpdate) -> Res<()> {
    let limits = u.limits.unwrap_or_default();
    let burst = limits.burst.map(|b| i32::try_from(b).unwrap_or(i32::MAX));
    let concurrency = limits
        .concurrency
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX));
    c.query(
        "queue_update",
        &[
            p(&u.queue),
            p(&u.paused),
            p(&u.limits.is_some()),
            p(&limits.rate_per_second),
            p(&burst),
            p(&concurrency),
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn stats(c: &Conn, now: Timestamp) -> Res<Vec<QueueStats>> {
    let rows = c.query("queue_stats", &[p(&now.0)]).await?;
    rows.iter()
        .map(|r| {
            let states: Vec<String> = col(r, "states")?;
            let counts: Vec<i64> = col(r, "counts")?;
            let mut by_state: Vec<(TaskState, u64)> =
                TaskState::ALL.iter().map(|s| (*s, 0)).collect();
            for (state, n) in states.iter().zip(counts) {
                let state = task_state(state)?;
                if let Some(slot) = by_state.iter_mut().find(|(s, _)| *s == state) {
                    slot.1 += u64::try_from(n).unwrap_or(0);
                }
            }
            Ok(QueueStats {
                queue: col(r, "queue")?,
                paused: col(r, "paused")?,
                limits: QueueLimits {
                    rate_per_second: col(r, "rate_per_second")?,
                    burst: col::<Option<i32>>(r, "burst")?.map(|b| u32::try_from(b).unwrap_or(0)),
                    concurrency: col::<Option<i32>>(r, "concurrency")?
                        .map(|n| u32::try_from(n).unwrap_or(0)),
                },
                counts: by_state,
                oldest_available: col::<Option<i64>>(r, "oldest_available")?.map(Timestamp),
            })
        })
        .collect()
}
