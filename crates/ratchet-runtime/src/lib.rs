//! Ratchet's runtime: claims orchestration turns and activities from a [`Store`], runs them,
//! and commits their results in groups.
//!
//! # Services
//!
//! - the dispatcher claims instances with new events and ready activities, as many as there is
//!   room for, and otherwise sleeps until woken, until the next timer, or for the poll interval;
//! - the committer writes the turns and completions of many instances in one round trip;
//! - the heartbeat renews the leases of running activities in one round trip;
//! - the sticky cache keeps live orchestrations between turns, so a turn feeds only new events;
//! - the notifier wakes the dispatcher when the store pushes that work is ready elsewhere;
//! - maintenance removes finished instances past the retention period;
//! - the schedule dispatcher fires schedules at their ticks, exactly once across processes.
//!
//! # Round trips of one orchestration started and awaited in this process
//!
//! Start (creates the instance already leased here) → first turn commit (returns its
//! activities already leased here) → completions commit (locks the instance here when it is
//! cached) → next turn commit. The waiting client is woken in memory, without a read.
//!
//! [`Store`]: ratchet_store::Store
#![deny(missing_docs)]

mod activity;
mod batcher;
mod cache;
mod capacity;
mod client;
mod clock;
mod committer;
mod config;
mod dispatcher;
mod error;
mod events;
mod heartbeat;
mod hub;
mod lifecycle;
mod liveness;
mod maintenance;
mod metrics;
mod notifier;
mod registry;
mod running;
mod runtime;
mod schedule;
mod started;
mod task;
pub mod trace;
mod turn;
mod wake;
mod worker;

pub use activity::ActivityContext;
pub use client::{
    Client, InstanceHandle, RemoteClaim, RemoteOutcome, RemoteResult, StartOptions, TaskRequest,
};
pub use clock::{Clock, LocalClock};
pub use config::{QueueConfig, RuntimeConfig, MAX_SLOTS};
pub use error::{Error, Result};
pub use events::{
    append_events, await_event, await_event_after, events_head, Appended, EventStore, Projection,
    Projector, EVENTS_APPEND_ACTIVITY, EVENTS_AWAIT_ACTIVITY, EVENTS_HEAD_ACTIVITY,
};
pub use hub::InstanceOutcome;
pub use ratchet_schedule::{CatchUp, Overlap};
pub use registry::{RegisteredNames, Registry};
pub use runtime::Runtime;
pub use schedule::{FireResult, ScheduleDescription, ScheduleOptions};
pub use started::{start_instance, START_ACTIVITY};
pub use task::TaskContext;
