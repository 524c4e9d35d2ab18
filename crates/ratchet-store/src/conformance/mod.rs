//! The conformance suite: every backend runs these same tests against a real database.
//!
//! A backend's test file calls [`conformance_suite!`](crate::conformance_suite) with an async
//! expression that returns a fresh, empty store (its own file or schema):
//!
//! ```text
//! ratchet_store::conformance_suite!(async { my_backend::open_fresh().await });
//! ```
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod concurrency;
mod events;
mod instances;
mod listing;
mod queue;
mod schedules;
mod tasks;
mod throughput;
mod workflows;

pub use concurrency::*;
pub use events::*;
pub use instances::*;
pub use listing::*;
pub use queue::*;
pub use schedules::*;
pub use tasks::*;
pub use throughput::*;
pub use workflows::*;

use ratchet_core::{ActivityOptions, HistoryEvent, Timestamp};
use serde_json::json;

use crate::{
    ClaimedInstance, CommitBatch, CreateOutcome, IfExists, InstanceClaim, InstanceStatus, Lease,
    NewInstance, NewTask, Registered, Store, TaskOwner, TurnCommit,
};

/// Generates one `#[tokio::test]` per conformance test. `$make` is an async expression
/// evaluating to a fresh store (anything that derefs to `dyn Store` or implements it).
/// With `optional:`, it evaluates to an `Option` of one, and `None` skips the test (a backend
/// whose server is not configured).
#[macro_export]
macro_rules! conformance_suite {
    (@list @$kind:ident $make:expr) => {
        $crate::conformance_suite!(@$kind $make;
            create_and_claim, create_if_exists, a_restart_fences_off_the_earlier_life, create_leased, turns_that_ran_on_their_start_commit_with_it, commit_turn_appends_history,
            stale_turn_is_refused_alone, finishes_are_heard_once_committed_and_refused_ones_never,
            eager_task_lease_respects_capacity, completion_delivers_and_locks,
            stale_completion_is_refused_alone, turns_fed_by_completions_commit_with_them,
            fed_path_commits_start_to_finish, retry_reschedules_task, timers_become_visible_at_their_time,
            signals_buffer_in_order_and_dedup, cancel_and_terminate, cancels_and_signals_are_visible_at_once, continue_as_new_starts_next_execution, history_pages_by_position,
            child_result_reaches_parent, claim_respects_versions_and_leases,
            claims_reach_instances_behind_a_window_they_cannot_take, a_claim_takes_any_limit,
            list_filters_and_history,
            heartbeat_and_release, purge_removes_finished, list_pages_by_keyset,
            list_filters_combine_by_id_prefix_and_page_by_keyset, task_lists_page_by_keyset,
            instances_are_followed_from_a_position, throughput_counts_by_bucket,
            tokens_are_found_by_hash_and_revoked, workflows_are_stored_by_version,
            workflows_are_deleted_by_version_or_whole, workflow_delete_refuses_while_instances_run_on_it,
            workers_are_listed_with_what_they_run, stats_count_round_trips,
            one_claim_takes_instances_and_tasks, terminated_child_fails_parent_step,
            taken_child_id_fails_parent_step, payloads_round_trip_exactly,
            concurrent_claims_never_share_an_instance,
            concurrent_commits_apply_each_completion_once, tasks_run_and_leave_the_hot_table,
            tasks_run_by_priority_then_time, delayed_tasks_wait_for_their_time,
            unique_keys_hold_until_the_task_finishes, retries_and_snoozes,
            dead_letters_can_be_retried_or_discarded, late_completions_after_a_rearm_are_refused,
            live_owners_keep_their_expired_leases, claims_count_the_expired_leases_they_take_over,
            a_late_commit_behind_earlier_claims_is_claimed,
            tasks_can_be_cancelled_waiting_or_running,
            paused_queues_start_nothing, queue_concurrency_holds_across_claimers,
            queue_rate_limit_spends_tokens, queue_stats_and_task_lists,
            task_purge_removes_old_results, bulk_enqueue_is_one_round_trip,
            turns_enqueue_standalone_tasks_once, events_append_and_read_back_exactly,
            events_queries_match_types_and_all_tags, events_append_if_fails_on_a_newer_match,
            events_every_item_of_a_condition_counts, events_conditions_far_behind_the_head,
            events_sequential_appends_with_one_after_fail_the_second,
            events_appends_of_one_call_apply_in_order, events_bad_input_appends_nothing,
            events_concurrent_conditional_appends_never_overbook,
            events_readers_never_skip_a_late_commit, schedules_are_written_by_compare_and_set,
            schedules_due_are_found_with_the_next_time, a_fire_is_written_whole_or_not_at_all,
            dropped_fire_records_settle_their_ticks, a_fire_stops_the_previous_run_only_if_it_wins);
    };
    (@tests $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let store = $make.await;
                $crate::conformance::$name(&store).await;
            }
        )*
    };
    (@optional $make:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some(store) = $make.await {
                    $crate::conformance::$name(&store).await;
                }
            }
        )*
    };
    (optional: $make:expr) => {
        $crate::conformance_suite!(@list @optional $make);
    };
    ($make:expr) => {
        $crate::conformance_suite!(@list @tests $make);
    };
}

pub(crate) const T0: Timestamp = Timestamp(1_000_000);

pub(crate) fn lease(owner: &str, until: Timestamp) -> Lease {
    Lease {
        owner: owner.to_string(),
        until,
    }
}

pub(crate) fn new_instance(id: &str, name: &str) -> NewInstance {
    NewInstance {
        id: id.into(),
        name: name.into(),
        input: json!({ "n": 1 }),
        parent: None,
        if_exists: IfExists::Fail,
        trace: None,
    }
}

pub(crate) fn registered(names: &[&str]) -> Vec<Registered> {
    names
        .iter()
        .map(|n| Registered {
            name: n.to_string(),
            versions: vec![1],
        })
        .collect()
}

pub(crate) async fn claim(store: &dyn Store, owner: &str, now: Timestamp) -> Vec<ClaimedInstance> {
    store
        .instance_claim(InstanceClaim {
            lease: lease(owner, now.plus(std::time::Duration::from_secs(30))),
            limit: 100,
            orchestrations: registered(&["wf", "child"]),
            now,
            tasks: None,
        })
        .await
        .unwrap()
        .instances
}

pub(crate) async fn start(store: &dyn Store, id: &str) {
    let out = store
        .instance_create(vec![new_instance(id, "wf")], None, T0)
        .await
        .unwrap();
    assert!(matches!(out[0], CreateOutcome::Created(None)), "{out:?}");
}

/// A turn that consumes `claimed`'s events and appends them after a `TurnStarted`.
pub(crate) fn turn(claimed: &ClaimedInstance, status: InstanceStatus) -> TurnCommit {
    let mut history = vec![HistoryEvent::TurnStarted { at: T0 }];
    history.extend(claimed.events.iter().map(|e| e.event.clone()));
    TurnCommit {
        instance: claimed.id.clone(),
        incarnation: claimed.incarnation,
        fence: claimed.fence,
        execution: claimed.execution,
        version: Some(1),
        consumed: claimed.events.iter().map(|e| e.id).collect(),
        fed: Vec::new(),
        started: None,
        history_start: claimed.history_len,
        history,
        status,
        output: None,
        error: None,
        custom_status: None,
        tasks: Vec::new(),
        inbox: Vec::new(),
        children: Vec::new(),
        continue_as_new: None,
    }
}

/// A batch that starts `id` as a life of `incarnation` with the first turn that ran on that
/// start, scheduling `activities` activities leased to "p". The turn's own fence (7) does not
/// count: a first turn is checked against the fence its start gave the instance.
pub(crate) fn start_with_first_turn(
    id: &str,
    incarnation: i64,
    if_exists: IfExists,
    activities: u32,
) -> CommitBatch {
    let claimed = ClaimedInstance {
        id: id.into(),
        name: "wf".into(),
        version: None,
        execution: 0,
        history_len: 0,
        fence: crate::Fence(7),
        incarnation: crate::Incarnation(incarnation),
        events: Vec::new(),
    };
    let mut t = turn(&claimed, InstanceStatus::Running);
    t.history.push(HistoryEvent::ExecutionStarted {
        name: "wf".into(),
        version: 1,
        input: json!({ "n": 1 }),
        parent: None,
        trace: None,
    });
    t.tasks = (0..activities).map(|seq| activity(id, seq)).collect();
    t.started = Some(0);
    let mut b = batch(vec![t]);
    b.starts = vec![crate::CommitStart {
        instance: NewInstance {
            if_exists,
            ..new_instance(id, "wf")
        },
        incarnation: crate::Incarnation(incarnation),
    }];
    b.task_lease = Some(lease("p", T0.plus(std::time::Duration::from_secs(30))));
    b.task_capacity = 10;
    b
}

pub(crate) fn activity(instance: &str, seq: u32) -> NewTask {
    NewTask::activity(
        "act".into(),
        json!(seq),
        ActivityOptions::default(),
        TaskOwner {
            instance: instance.into(),
            execution: 0,
            seq,
        },
        T0,
    )
}

pub(crate) fn batch(turns: Vec<TurnCommit>) -> CommitBatch {
    CommitBatch {
        turns,
        now: T0,
        ..CommitBatch::default()
    }
}
