//! Ratchet's API, written once.
//!
//! Every operation of the HTTP API is a method of [`Api`], with the request and response
//! types the server reads and answers ([`instances`], [`tasks`], [`queues`],
//! [`schedules`], [`events`], [`workflows`],
//! [`system`], [`work`]) and its errors
//! as problems ([`ProblemBody`], [`ApiError`]). Two implementations answer it alike:
//! `LocalApi` on a client in this process (feature `local`), and `HttpApi` on a
//! `ratchet server` (feature `http`). The server is a thin HTTP layer over `LocalApi`; the
//! command line calls whichever its flags name, through the same trait.
//!
//! Times are RFC 3339 strings in UTC to the millisecond ([`time`]); durations are
//! milliseconds (`*_ms`).
//!
//! ```no_run
//! # async fn run() -> Result<(), ratchet_api::ApiError> {
//! use ratchet_api::{Api, HttpApi, StartRequest, WriteParams};
//! let api = HttpApi::new("http://127.0.0.1:8080", None)?;
//! let started = api
//!     .instances_start(&StartRequest::new("greet", serde_json::json!("Ada")), WriteParams::default())
//!     .await?;
//! let outcome = api.instances_wait_until(&started.id, std::time::Duration::from_secs(10)).await?;
//! println!("{:?}", outcome.output);
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod api;
mod dispatch;
pub mod events;
#[cfg(feature = "http")]
mod http;
pub mod instances;
pub mod json;
#[cfg(feature = "local")]
mod local;
mod problem;
pub mod queues;
pub mod routes;
pub mod schedules;
pub mod system;
pub mod tasks;
pub mod text;
pub mod time;
pub mod work;
pub mod workflows;

pub use api::Api;
pub use dispatch::{dispatch, Call};
pub use events::{
    AppendInput, AppendedView, CloudEventsInput, ConditionInput, DirectionParam, EventInput,
    EventPageView, EventView, ItemInput, QueryInput, ReadQuery, StreamQuery,
};
#[cfg(feature = "http")]
pub use http::{HttpApi, REQUEST_TIMEOUT};
pub use instances::{
    BatchItem, HistoryItem, HistoryPage, HistoryQuery, IfExistsParam, InstanceMessage,
    InstancePage, InstanceQuery, InstanceStreamQuery, InstanceView, ParentView, PurgeRequest,
    Purged, Restarted, SignalRequest, Signalled, StartBatch, StartRequest, Started, StopRequest,
    WaitOutcome, WaitQuery, WriteParams,
};
#[cfg(feature = "local")]
pub use local::{
    comma_list, decode_cursor, encode_cursor, lease_keys, one_item, parse_position, position,
    to_query, worker_claim, worker_complete, workflow_apply, workflow_compile, workflow_validate,
    LocalApi, DEFAULT_WAIT, MAX_CLAIM_WAIT, MAX_PAGE,
};
pub use problem::{ApiError, ProblemBody, SourceError, PROBLEM_JSON};
pub use queues::{Done, Limits, QueueView};
pub use schedules::{
    BackfillInput, DescribeQuery, DescriptionView, FireView, PauseInput, ScheduleInput,
    ScheduleView,
};
pub use system::{
    OrchestrationName, Registry, Throughput, ThroughputBucketView, ThroughputParams, WhoAmI,
    WorkerView,
};
pub use tasks::{
    ActOutcome, Acted, ActedOn, EnqueueBatch, EnqueueRequest, Enqueued, ManyIds, OptionsInput,
    RetryInput, TaskAct, TaskQuery, TaskView,
};
pub use work::{
    AttemptView, ClaimBody, Claimed, CompleteBody, ErrorBody, HeartbeatBody, LeaseHeld,
    LeaseStatus, LeaseView, Leases, QueueLimit, ReleaseBody, Released, ReportStatus, Reported,
    ReportedAll, ResultBody, StepView,
};
pub use workflows::{AppliedView, Definition, DeleteQuery, ShowQuery, Valid, WorkflowView};
