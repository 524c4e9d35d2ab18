//! End-to-end tests: orchestrations through the runtime on a real store.
#![allow(clippy::unwrap_used, unreachable_pub)]

mod harness;

mod bad_input;
mod basics;
mod cancel;
mod events;
mod graphs;
mod housekeeping;
mod isolation;
mod leases;
mod planner;
mod replay;
mod schedules;
mod signals;
mod tasks;
mod times;
mod workflows;
