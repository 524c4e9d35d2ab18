//! The dispatcher: claims instances with new events, ready activities and tasks of the queues
//! this process works, sized to free capacity, and sleeps until woken, until the next timer
//! (or rate-limit token) is due, or for the poll interval.

use std::sync::Arc;
use std::time::Duration;

use ratchet_store::{InstanceClaim, Lease, QueueClaim, TaskClaim, ACTIVITY_QUEUE};

use crate::runtime::Shared;

/// The longest a worker that keeps losing claim races waits before answering another
/// process's hint (it still answers its own work at once, and polls as usual).
const MAX_COOLDOWN: Duration = Duration::from_millis(8);
use crate::{turn, worker};

pub(crate) async fn run(shared: Arc<Shared>) {
    let orchestrations = shared.registry.registered_orchestrations();
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
        _ = shared.closed() => return,
    }
    loop {
        if shared.is_closing() {
            return;
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
        let orchestration_room = if orchestrations.is_empty() {
            0
        } else {
            shared
                .orchestration_slots
                .available_permits()
                .min(shared.config.commit_batch)
        };
        let mut queues = Vec::new();
        if !activities.is_empty() {
            queues.push((ACTIVITY_QUEUE.to_string(), shared.activity_room()));
        }
        for queue in shared.config.queues.keys() {
            queues.push((queue.clone(), shared.queue_room(queue)));
        }
        for (_, room) in &mut queues {
            *room = (*room).min(shared.config.commit_batch);
        }
        let full = (!orchestrations.is_empty() && orchestration_room == 0)
            || queues.iter().any(|(_, room)| *room == 0);
        if full {
            shared
                .saturated
                .store(true, std::sync::atomic::Ordering::SeqCst);
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
            match shared.store.instance_claim(claim).await {
                Ok(claimed) => {
                    found = !claimed.instances.is_empty() || !claimed.tasks.is_empty();
                    busy |= orchestration_room > 0 && claimed.instances.len() == orchestration_room;
                    busy |= queues.iter().any(|(queue, room)| {
                        *room > 0
                            && claimed.tasks.iter().filter(|t| &t.queue == queue).count() == *room
                    });
                    next_due = claimed.next_due;
                    for instance in claimed.instances {
                        turn::spawn(shared.clone(), instance);
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
            let local = {
                let mut next = shared.next_timer.lock().unwrap_or_else(|p| p.into_inner());
                if next.is_some_and(|t| t <= now) {
                    *next = None;
                }
                *next
            };
            let mut until = deadline;
            if let Some(due) = [next_due, local].into_iter().flatten().min() {
                let wait = due.since(shared.now()) + Duration::from_millis(1);
                until = until.min(tokio::time::Instant::now() + wait);
            }
            tokio::select! {
                _ = shared.wake.notified() => break,
                _ = shared.remote_work.notified() => {
                    woken_remotely = true;
                    if !cooldown.is_zero() {
                        // Local work still wakes at once.
                        tokio::select! {
                            _ = tokio::time::sleep(cooldown) => {}
                            _ = shared.wake.notified() => {}
                        }
                    }
                    break;
                }
                _ = shared.timer_changed.notified() => continue,
                _ = tokio::time::sleep_until(until) => break,
            }
        }
    }
}
