//! The dispatcher: claims instances with new events, ready activities and tasks of the queues
//! this process works, sized to free capacity, and sleeps until woken, until the next timer
//! (or rate-limit token) is due, or for the poll interval.

use std::sync::Arc;
use std::time::Duration;

use ratchet_core::Timestamp;
use ratchet_store::{InstanceClaim, Lease, QueueClaim, TaskClaim, ACTIVITY_QUEUE};

use crate::runtime::Shared;

/// The longest a worker that keeps losing claim races waits before answering another
/// process's hint (it still answers its own work at once, and polls as usual).
const MAX_COOLDOWN: Duration = Duration::from_millis(8);
use crate::worker;

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut seen_changes = shared.registry.orchestration_changes();
    let mut orchestrations = shared.registry.registered_orchestrations();
    let activities = shared.registry.activity_names();
    // Activity and task names: one claim takes from the activity queue and each task queue.
    let names: Vec<String> = activities
        .iter()
        .cloned()
        .chain(shared.registry.task_names())
        .collect();
    let mut backoff = Duration::from_millis(50);
    let mut cooldown = Duration::ZERO;
    let mut woken_remotely = false;
    // A claim judges other processes' leases by the database's clock: wait until this process
    // knows its offset from it (the clock service measures it at start).
    tokio::select! {
        _ = shared.clock.synced() => {}
        _ = shared.lifecycle.closed() => return,
    }
    loop {
        if shared.lifecycle.is_closing() {
            return;
        }
        // Orchestrations added while running (a workflow applied later) are claimed too.
        let changes = shared.registry.orchestration_changes();
        if changes != seen_changes {
            seen_changes = changes;
            orchestrations = shared.registry.registered_orchestrations();
        }
        let now = shared.now();
        let lease = Lease {
            owner: shared.owner.clone(),
            until: now.plus(shared.config.lease),
        };
        let mut busy = false;
        let mut next_due = None;
        let mut failed = false;
        let mut found = false;

        // One round trip claims instances, activities and tasks, sized to free capacity.
        let (mut orchestration_room, mut queues) = rooms(&shared, &orchestrations, &activities);
        let full = |orchestration_room: usize, queues: &[(String, usize)]| {
            (!orchestrations.is_empty() && orchestration_room == 0)
                || queues.iter().any(|(_, room)| *room == 0)
        };
        if full(orchestration_room, &queues) {
            // Marked before the rooms are read again: a slot freed from now on wakes the
            // dispatcher, one freed since the first reading shows in the second. (Marked
            // after a single reading, a slot freed in between woke nobody: the work behind
            // it waited for the poll interval.)
            shared.wake.saturated();
            (orchestration_room, queues) = rooms(&shared, &orchestrations, &activities);
        }
        let task_room: usize = queues.iter().map(|(_, room)| room).sum();
        if orchestration_room + task_room > 0 {
            let claim = InstanceClaim {
                lease: lease.clone(),
                limit: u32::try_from(orchestration_room).unwrap_or(u32::MAX),
                orchestrations: orchestrations.clone(),
                now,
                tasks: (task_room > 0).then(|| TaskClaim {
                    lease,
                    queues: queues
                        .iter()
                        .filter(|(_, room)| *room > 0)
                        .map(|(queue, room)| QueueClaim {
                            queue: queue.clone(),
                            limit: u32::try_from(*room).unwrap_or(u32::MAX),
                        })
                        .collect(),
                    names: names.clone(),
                    now,
                }),
            };
            let asked = std::time::Instant::now();
            let answer = shared.store.instance_claim(claim).await;
            match &answer {
                Ok(c) => crate::metrics::claim(
                    c.instances.len(),
                    c.tasks.len(),
                    c.taken_over,
                    asked.elapsed(),
                    true,
                ),
                Err(_) => crate::metrics::claim(0, 0, 0, asked.elapsed(), false),
            }
            match answer {
                Ok(claimed) => {
                    found = !claimed.instances.is_empty() || !claimed.tasks.is_empty();
                    busy |= orchestration_room > 0 && claimed.instances.len() == orchestration_room;
                    busy |= queues.iter().any(|(queue, room)| {
                        *room > 0
                            && claimed.tasks.iter().filter(|t| &t.queue == queue).count() == *room
                    });
                    next_due = claimed.next_due;
                    for instance in claimed.instances {
                        shared.run_turn(instance);
                    }
                    for task in claimed.tasks {
                        worker::spawn(shared.clone(), task);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "claim failed");
                    failed = true;
                }
            }
        }
        if failed {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
            continue;
        }
        backoff = Duration::from_millis(50);
        if busy {
            // A full claim: more may be waiting. Give running work a moment to free slots.
            tokio::task::yield_now().await;
            continue;
        }
        // A claim that another process's hint woke and that found nothing lost a race to
        // another worker: the next hints wait a little, so that a crowd of workers does not
        // claim once each for every task enqueued. Finding work ends the wait.
        if woken_remotely {
            cooldown = if found {
                Duration::ZERO
            } else {
                (cooldown * 2).clamp(Duration::from_millis(1), MAX_COOLDOWN)
            };
        }
        woken_remotely = false;
        // Sleep until woken, until the nearest known timer, or for the poll interval; a timer
        // committed meanwhile only shortens the sleep, it costs no claim.
        let deadline = tokio::time::Instant::now() + shared.config.poll_interval;
        loop {
            let local = shared.wake.next_timer(now);
            let mut until = deadline;
            if let Some(wait) = wait_for([next_due, local], shared.now()) {
                until = until.min(tokio::time::Instant::now() + wait);
            }
            tokio::select! {
                _ = shared.wake.work.notified() => break,
                _ = shared.wake.remote_work.notified() => {
                    woken_remotely = true;
                    if !cooldown.is_zero() {
                        // Local work still wakes at once.
                        tokio::select! {
                            _ = tokio::time::sleep(cooldown) => {}
                            _ = shared.wake.work.notified() => {}
                        }
                    }
                    break;
                }
                _ = shared.wake.timer_changed.notified() => continue,
                _ = tokio::time::sleep_until(until) => break,
            }
        }
    }
}

/// The free capacity for orchestrations, and for each queue this process claims from (the
/// activity queue first), each at most a commit batch.
fn rooms(
    shared: &Shared,
    orchestrations: &[ratchet_store::Registered],
    activities: &[String],
) -> (usize, Vec<(String, usize)>) {
    let orchestration_room = if orchestrations.is_empty() {
        0
    } else {
        shared.capacity.orchestration_room()
    };
    let mut queues = Vec::new();
    if !activities.is_empty() {
        queues.push((ACTIVITY_QUEUE.to_string(), shared.capacity.activity_room()));
    }
    for queue in shared.config.queues.keys() {
        queues.push((queue.clone(), shared.capacity.queue_room(queue)));
    }
    let batch = shared.config.commit_batch;
    for (_, room) in &mut queues {
        *room = (*room).min(batch);
    }
    (orchestration_room.min(batch), queues)
}

/// How long to sleep until the nearest of `due` (times on the database's clock), at `now`:
/// a millisecond past it, so the claim that follows finds it visible.
fn wait_for(due: [Option<Timestamp>; 2], now: Timestamp) -> Option<Duration> {
    let nearest = due.into_iter().flatten().min()?;
    Some(nearest.since(now) + Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_until_just_past_the_nearest_due_time() {
        let now = Timestamp(10_000);
        assert_eq!(wait_for([None, None], now), None);
        assert_eq!(
            wait_for([Some(Timestamp(10_500)), Some(Timestamp(10_200))], now),
            Some(Duration::from_millis(201))
        );
        assert_eq!(
            wait_for([Some(Timestamp(9_000)), None], now),
            Some(Duration::from_millis(1)),
            "already due: at once"
        );
    }
}
