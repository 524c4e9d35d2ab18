//! The storage API of Ratchet: the batch-shaped [`Store`] trait, its types and errors, and
//! (feature `conformance`) the suite every backend passes.
//!
//! # Round trips
//!
//! Each method costs one round trip: one statement, one SQL function or one pipelined batch.
//! The hot path is batch-shaped: [`Store::commit`] writes the turns and task completions of
//! many instances at once with a per-item outcome, [`Store::instance_claim`] and
//! [`Store::task_claim`] take as many items as the caller has room for, and a commit can lease
//! what it creates to the caller (eager dispatch) so that work this process wrote is never
//! fetched again.
//!
//! # Leases and fences
//!
//! Every claim takes a lease with an expiry and a new [`Fence`]. A write carrying an older
//! fence is refused for that item only ([`TurnResult::Stale`], [`CompletionResult::Stale`]),
//! so a process that lost its lease can never overwrite its successor's work.
#![deny(missing_docs)]

mod cloud;
pub mod codec;
mod commit;
mod error;
mod event;
mod instance;
mod queue;
mod schedule;
mod sql;
mod store;
mod task;
mod throughput;
mod token;
mod wakeup;
mod workflow;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use cloud::{CloudEventError, STORE_SOURCE};
pub use commit::{
    child_exists_event, parent_event, CommitBatch, CommitOutcome, CommitStart, CompletionResult,
    ContinueAsNew, Lease, NewInboxEvent, TurnCommit, TurnResult,
};
pub use error::{Result, StoreError};
pub use event::{
    event_size, normalized_tags, validate_appends, validate_event, validate_event_type,
    validate_tag, AppendCondition, AppendOutcome, Direction, EventAppend, EventPage, EventQuery,
    EventRead, NewEvent, Position, QueryItem, StoredEvent, MAX_EVENTS_PER_APPEND, MAX_EVENT_BYTES,
    MAX_EVENT_TYPE_BYTES, MAX_QUERY_ITEMS, MAX_QUERY_TYPES, MAX_QUERY_TYPES_IN_ALL, MAX_TAGS,
    MAX_TAG_BYTES,
};
pub use instance::{
    prefix_end, ClaimedInstance, CreateOutcome, Fence, HistoryRecord, IfExists, InboxEvent,
    Incarnation, InstanceFilter, InstanceFollow, InstanceRecord, InstanceStatus, NewInstance,
    NewSignal, SignalOutcome, StopOutcome,
};
pub use queue::{
    validate_queue_name, EnqueueOutcome, LeaseState, QueueLimits, QueueStats, QueueUpdate,
    TaskAction, TaskActionOutcome, TaskFilter, TaskRecord, TaskState,
};
pub use schedule::{
    FireKind, FireQuery, FireRecord, FireRun, NewFire, ScheduleAction, ScheduleFiring,
    ScheduleRecord, SchedulesDue, StopRun, FIRES_KEPT,
};
pub use sql::NamedQueries;
pub use store::{
    InstanceClaim, InstanceClaimed, LeaseRelease, QueueClaim, Registered, Store, StoreStats,
    TaskClaim, WorkerAbout, WorkerAlive, WorkerRecord,
};
pub use task::{
    ClaimedTask, NewTask, TaskCompletion, TaskId, TaskOwner, TaskResult, ACTIVITY_QUEUE,
};
pub use throughput::{ThroughputBucket, ThroughputQuery};
pub use token::{NewToken, TokenRecord};
pub use wakeup::{WakeupSender, Wakeups};
pub use workflow::{NewWorkflow, WorkflowPut, WorkflowRecord};
