//! The protocol of workers in other processes, in process: claims with leases and fences,
//! renewals, reports and give-backs, as in-process workers take them.

use std::future::Future;
use std::time::Duration;

use ratchet_core::{ErrorInfo, Timestamp};
use ratchet_runtime::{Client, RemoteClaim, RemoteOutcome, RemoteResult};
use ratchet_store::{ClaimedTask, CompletionResult, Fence, LeaseState, TaskId};
use serde_json::Value;

use super::problem;
use crate::problem::{ApiError, ProblemBody};
use crate::time::rfc3339;
use crate::work::{
    AttemptView, ClaimBody, Claimed, CompleteBody, LeaseHeld, LeaseStatus, LeaseView, Leases,
    Released, ReportStatus, Reported, ReportedAll, ResultBody, StepView,
};

/// The longest error kind and message a worker may report, in bytes: what Ratchet keeps of
/// an error made in process.
const MAX_KIND: usize = ratchet_core::limits::MAX_ERROR_KIND_BYTES;
const MAX_MESSAGE: usize = ratchet_core::limits::MAX_ERROR_MESSAGE_BYTES;

/// The longest snooze: a year.
const MAX_SNOOZE_MS: u64 = 365 * 24 * 3_600_000;

/// The longest a claim waits for work.
pub const MAX_CLAIM_WAIT: Duration = Duration::from_secs(60);

fn lease_of(ms: Option<u64>) -> Result<Duration, ApiError> {
    let ms = ms.unwrap_or(30_000);
    if !(1_000..=3_600_000).contains(&ms) {
        return Err(
            ProblemBody::invalid(format!("a lease is 1,000 to 3,600,000 ms, got {ms}"))
                .field("lease_ms")
                .into(),
        );
    }
    Ok(Duration::from_millis(ms))
}

fn view(t: ClaimedTask, lease_until: String) -> AttemptView {
    AttemptView {
        id: t.id.0,
        fence: t.fence.0,
        queue: t.queue,
        name: t.name,
        input: t.input,
        attempt: t.attempt,
        max_attempts: t.options.retry.max_attempts,
        timeout_ms: t.options.start_to_close_ms,
        metadata: t.metadata,
        activity: t.owner.map(|o| StepView {
            instance: o.instance,
            execution: o.execution,
            step: o.seq,
        }),
        lease_until,
    }
}

/// Claims for `worker`: ready attempts at once, else the first that become ready within its
/// wait (at most [`MAX_CLAIM_WAIT`]), or none once `stop` resolves.
pub async fn claim(
    client: &Client,
    worker: &str,
    body: &ClaimBody,
    stop: impl Future<Output = ()>,
) -> Result<Claimed, ApiError> {
    let lease = lease_of(body.lease_ms)?;
    let wait = Duration::from_millis(body.wait_ms.unwrap_or(0)).min(MAX_CLAIM_WAIT);
    let claim = RemoteClaim {
        worker: worker.to_string(),
        queues: body
            .queues
            .iter()
            .map(|q| (q.queue.clone(), q.limit))
            .collect(),
        activities: body.activities,
        names: body.names.clone(),
        lease,
        wait,
    };
    let claimed = client.remote_claim(claim, stop).await.map_err(problem)?;
    let until = rfc3339(Timestamp::now().plus(lease));
    Ok(Claimed {
        tasks: claimed
            .into_iter()
            .map(|t| view(t, until.clone()))
            .collect(),
    })
}

/// The attempts a body names, as the store keys them.
pub fn keys(held: &[LeaseHeld]) -> Vec<(TaskId, Fence)> {
    held.iter()
        .map(|t| (TaskId(t.id), Fence(t.fence)))
        .collect()
}

/// Renews leases; says of each whether it holds, was lost, or should stop.
pub(super) async fn heartbeat(
    client: &Client,
    worker: &str,
    tasks: &[LeaseHeld],
    lease_ms: Option<u64>,
) -> Result<Leases, ApiError> {
    let lease = lease_of(lease_ms)?;
    let states = client
        .remote_heartbeat(worker, keys(tasks), lease)
        .await
        .map_err(problem)?;
    Ok(Leases {
        tasks: tasks
            .iter()
            .zip(states)
            .map(|(t, s)| LeaseView {
                id: t.id,
                fence: t.fence,
                lease: match s {
                    LeaseState::Kept => LeaseStatus::Kept,
                    LeaseState::CancelRequested => LeaseStatus::Cancel,
                    _ => LeaseStatus::Lost,
                },
            })
            .collect(),
    })
}

impl ResultBody {
    /// The outcome it reports, checked; `n` is its place in the request, for the field.
    pub fn outcome(&self, n: usize) -> Result<RemoteOutcome, ApiError> {
        let field = |name: &str| format!("results[{n}].{name}");
        let refuse = |detail: String, name: &str| {
            Err(ApiError::from(
                ProblemBody::invalid(detail).field(field(name)),
            ))
        };
        match self.outcome.as_str() {
            "completed" => Ok(RemoteOutcome::Completed(
                self.output.clone().unwrap_or(Value::Null),
            )),
            "failed" => {
                let Some(error) = &self.error else {
                    return refuse("a failed attempt reports its error".into(), "error");
                };
                if error.kind.is_empty() || error.kind.len() > MAX_KIND {
                    return refuse(
                        format!("an error's kind is 1 to {MAX_KIND} bytes"),
                        "error.kind",
                    );
                }
                if error.message.len() > MAX_MESSAGE {
                    return refuse(
                        format!("an error's message is at most {MAX_MESSAGE} bytes"),
                        "error.message",
                    );
                }
                // Details are kept in the task's row and an activity's step, read back with
                // more around them: as shallow and small as any payload.
                if let Some(details) = &error.details {
                    let at = field("error.details");
                    if let Err(e) = ratchet_core::limits::check_json_depth(&at, details) {
                        return refuse(e.to_string(), "error.details");
                    }
                    if serde_json::to_vec(details).map_or(0, |b| b.len()) > MAX_MESSAGE {
                        return refuse(
                            format!("an error's details are at most {MAX_MESSAGE} bytes"),
                            "error.details",
                        );
                    }
                }
                let mut info = ErrorInfo::new(error.kind.clone(), error.message.clone());
                info.details = error.details.clone();
                Ok(RemoteOutcome::Failed {
                    error: info,
                    retryable: self.retryable.unwrap_or(true),
                })
            }
            "snoozed" => match self.delay_ms {
                Some(ms) if ms <= MAX_SNOOZE_MS => {
                    Ok(RemoteOutcome::Snooze(Duration::from_millis(ms)))
                }
                _ => refuse(
                    format!("a snoozed attempt gives delay_ms, at most {MAX_SNOOZE_MS}"),
                    "delay_ms",
                ),
            },
            "cancelled" => Ok(RemoteOutcome::Cancelled),
            other => refuse(
                format!(
                    "unknown outcome {other:?} (expected completed, failed, snoozed or cancelled)"
                ),
                "outcome",
            ),
        }
    }
}

impl CompleteBody {
    /// The ends it reports, each checked.
    pub fn to_results(&self) -> Result<Vec<RemoteResult>, ApiError> {
        self.results
            .iter()
            .enumerate()
            .map(|(n, r)| {
                Ok(RemoteResult {
                    id: TaskId(r.id),
                    fence: Fence(r.fence),
                    outcome: r.outcome(n)?,
                })
            })
            .collect()
    }
}

/// Writes checked ends in one commit.
pub async fn complete(
    client: &Client,
    results: Vec<RemoteResult>,
) -> Result<ReportedAll, ApiError> {
    let keys: Vec<(i64, i64)> = results.iter().map(|r| (r.id.0, r.fence.0)).collect();
    let applied = client.remote_complete(results).await.map_err(problem)?;
    Ok(ReportedAll {
        results: keys
            .into_iter()
            .zip(applied)
            .map(|((id, fence), result)| Reported {
                id,
                fence,
                result: match result {
                    CompletionResult::Applied => ReportStatus::Applied,
                    _ => ReportStatus::Stale,
                },
            })
            .collect(),
    })
}

/// Gives attempts back to their queues at once, counting no attempt.
pub(super) async fn release(
    client: &Client,
    worker: &str,
    tasks: &[LeaseHeld],
) -> Result<Released, ApiError> {
    client
        .remote_release(worker, keys(tasks))
        .await
        .map_err(problem)?;
    Ok(Released {
        released: tasks.len(),
    })
}
