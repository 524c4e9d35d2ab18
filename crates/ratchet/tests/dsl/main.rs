//! Declarative workflows against the world: the specification's conformance kit, and calls
//! to a local stand-in of the services it names.
#![allow(clippy::unwrap_used, unreachable_pub)]

#[path = "../it/harness.rs"]
mod harness;
mod ran;
mod standin;

mod calls;
mod conformance;
mod grpc;
mod listen;
mod plain;
mod processes;
mod retries;
mod schemas;
mod secrets;
