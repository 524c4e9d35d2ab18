//! When a schedule fires. A [`Spec`] is a cron expression (seconds optional) read in an IANA
//! time zone, or a fixed interval with an offset; a [`Schedule`] adds the zone, a start and
//! an end. Everything here is a pure function of its inputs, so every process computes the
//! same ticks, the same jitter and the same catch-up: that is what lets any number of them
//! fire a schedule exactly once.
#![deny(missing_docs)]

mod catchup;
mod spec;

pub use catchup::{keep, CatchUp, Overlap, MAX_CATCH_UP};
pub use spec::{jitter, parse_duration, parse_zone, rfc3339, tick_id, Schedule, Spec, SpecError};
