//! What runs, who asks, and work over time, in process.

use std::num::NonZeroU32;

use ratchet_core::Timestamp;
use ratchet_runtime::Client;
use ratchet_store::{ThroughputQuery, WorkerRecord};

use super::problem;
use crate::problem::{ApiError, ProblemBody};
use crate::system::{
    OrchestrationName, Registry, Throughput, ThroughputBucketView, ThroughputParams, WorkerView,
};
use crate::time::rfc3339;

impl WorkerView {
    /// The view of a process's record, alive if it said so within its lease of `now`.
    pub fn of(w: WorkerRecord, now: Timestamp) -> Self {
        Self {
            alive: w.alive_until >= now,
            started_at: rfc3339(w.started_at),
            seen_at: rfc3339(w.seen_at),
            id: w.id,
            label: w.about.label,
            host: w.about.host,
            pid: w.about.pid,
            max_orchestrations: w.about.max_orchestrations,
            max_activities: w.about.max_activities,
            queues: w.queues,
            orchestrations: w
                .about
                .orchestrations
                .into_iter()
                .map(|(name, versions)| OrchestrationName { name, versions })
                .collect(),
            activities: w.about.activities,
            tasks: w.about.tasks,
        }
    }
}

/// What `client`'s runtime runs (nothing, without one).
pub(super) fn registry(client: &Client) -> Registry {
    let names = client.registry().map(|r| r.names()).unwrap_or_default();
    Registry {
        worker: client.registry().is_some(),
        orchestrations: names
            .orchestrations
            .into_iter()
            .map(|(name, versions)| OrchestrationName { name, versions })
            .collect(),
        activities: names.activities,
        tasks: names.tasks,
    }
}

/// Counts by bucket, the buckets on whole multiples of their width (two looks a moment apart
/// agree).
pub(super) async fn throughput(
    client: &Client,
    p: ThroughputParams,
) -> Result<Throughput, ApiError> {
    let minutes = p.minutes.unwrap_or(60);
    if !(1..=1440).contains(&minutes) {
        return Err(ProblemBody::invalid("from 1 to 1440 minutes")
            .field("minutes")
            .into());
    }
    let bucket_seconds = p.bucket_seconds.unwrap_or(60);
    if !(1..=3600).contains(&bucket_seconds) {
        return Err(ProblemBody::invalid("from 1 to 3600 seconds")
            .field("bucket_seconds")
            .into());
    }
    let bucket_ms = i64::from(bucket_seconds) * 1000;
    let now = Timestamp::now().as_millis();
    let to = (now / bucket_ms + 1) * bucket_ms;
    let from = to - i64::from(minutes) * 60_000;
    let query = ThroughputQuery {
        from: Timestamp(from),
        to: Timestamp(to),
        bucket_ms: NonZeroU32::new(bucket_seconds * 1000).ok_or_else(|| {
            ApiError::from(ProblemBody::invalid("must be above 0").field("bucket_seconds"))
        })?,
    };
    let buckets = client.throughput(query).await.map_err(problem)?;
    Ok(Throughput {
        from: rfc3339(query.from),
        to: rfc3339(query.to),
        bucket_seconds,
        buckets: buckets
            .into_iter()
            .map(|b| ThroughputBucketView {
                start: rfc3339(b.start),
                started: b.instances_started,
                completed: b.instances_completed,
                failed: b.instances_failed,
                tasks_completed: b.tasks_completed,
                tasks_failed: b.tasks_failed,
            })
            .collect(),
    })
}
