//! The budget an expression runs on. jq is a full language: a user's expression may recurse
//! without end, loop a trillion times or build a value of a terabyte in forty steps. Each
//! evaluation therefore runs metered, and running out stops it as an error of its own, never
//! as a crash of the process that runs it:
//!
//! - **fuel**: every step of the evaluator (each term it runs) costs one unit, and so does
//!   the work done inside one step: each element a collection gains or yields, each node a
//!   comparison or a conversion visits, each 32 bytes of string built;
//! - **stack**: the evaluator's recursion may use at most [`STACK_BUDGET`] bytes of stack,
//!   measured from where the evaluation started, on a stack known to have that room;
//! - **size**: no value nests deeper than [`MAX_DEPTH`], no string grows past
//!   [`MAX_STRING_BYTES`], no array or object past [`MAX_ITEMS`].
//!
//! Fuel and stack are counted the same way on every run of the same expression on the same
//! values, so a replay stops where the first run stopped. The meter lives in a thread-local:
//! values' operations (which jaq calls without a context) charge it too.

use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// Fuel for one evaluation: about 50-100 ms of a core at worst, and (with what building
/// values costs) at most a few tens of megabytes of values.
pub const EVAL_FUEL: u64 = 1_000_000;

/// Stack the evaluator's recursion may use, from where an evaluation starts.
pub(crate) const STACK_BUDGET: usize = 512 * 1024;

/// Room an evaluation needs on its stack: its budget, and a margin for what runs below the
/// deepest metered step (a native filter, dropping a value). A thread with less runs the
/// evaluation on a fresh stack of [`FRESH_STACK`].
const RED_ZONE: usize = STACK_BUDGET + 512 * 1024;
const FRESH_STACK: usize = STACK_BUDGET + 2 * 1024 * 1024;

/// How deeply a value may nest (`[[1]]` nests 2 levels).
pub(crate) const MAX_DEPTH: u16 = ratchet_core::limits::MAX_JSON_DEPTH as u16;

/// The longest string an expression may build.
pub(crate) const MAX_STRING_BYTES: usize = 8 << 20;

/// The most elements an array (or fields an object) may have.
pub(crate) const MAX_ITEMS: usize = 1_000_000;

/// String bytes that cost one unit of fuel to build.
const BYTES_PER_FUEL: usize = 32;

/// Why an evaluation was stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Exhausted {
    /// It ran out of fuel.
    Fuel,
    /// Its recursion went deeper than its stack budget.
    Stack,
    /// It built a value past a size limit (the message names which).
    Size(String),
    /// The evaluator itself panicked (a defect, reported rather than crashing the process).
    Panic(String),
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fuel => write!(
                f,
                "it ran out of its budget of {EVAL_FUEL} steps (a loop without end, or too much work for one expression)"
            ),
            Self::Stack => write!(
                f,
                "its recursion went deeper than its stack budget of {} KiB",
                STACK_BUDGET / 1024
            ),
            Self::Size(what) => write!(f, "{what}"),
            Self::Panic(what) => write!(f, "the evaluator failed: {what}"),
        }
    }
}

/// The meter of the evaluation running on this thread.
struct Meter {
    /// Whether an evaluation is running (values used outside one charge nothing).
    active: Cell<bool>,
    fuel: Cell<u64>,
    /// The stack address where the evaluation started (stacks grow down).
    base: Cell<usize>,
}

thread_local! {
    static METER: Meter = const {
        Meter {
            active: Cell::new(false),
            fuel: Cell::new(0),
            base: Cell::new(0),
        }
    };
}

/// An address on the current stack, to measure how much of it is in use.
#[inline(always)]
fn stack_address() -> usize {
    let marker = 0_u8;
    std::hint::black_box(std::ptr::addr_of!(marker)) as usize
}

/// Stops the evaluation running on this thread, for `why`. Unwinds to [`run`] without the
/// panic hook (nothing is printed).
pub(crate) fn stop(why: Exhausted) -> ! {
    resume_unwind(Box::new(why))
}

/// Charges `units` of fuel; stops the evaluation when it has none left.
#[inline]
pub(crate) fn charge(units: u64) {
    METER.with(|m| {
        if !m.active.get() {
            return;
        }
        match m.fuel.get().checked_sub(units) {
            Some(left) => m.fuel.set(left),
            None => {
                m.fuel.set(0);
                stop(Exhausted::Fuel)
            }
        }
    })
}

/// Charges for building `bytes` bytes of string, after checking the string limit.
pub(crate) fn charge_string(bytes: usize) {
    if bytes > MAX_STRING_BYTES {
        stop(Exhausted::Size(format!(
            "it built a string of {bytes} bytes; at most {MAX_STRING_BYTES} are allowed"
        )));
    }
    charge((bytes / BYTES_PER_FUEL) as u64 + 1);
}

/// Charges for a collection of `items` elements, after checking the count limit.
pub(crate) fn charge_items(items: usize) {
    if items > MAX_ITEMS {
        stop(Exhausted::Size(format!(
            "it built a collection of {items} elements; at most {MAX_ITEMS} are allowed"
        )));
    }
    charge(items as u64);
}

/// One step of the evaluator: a unit of fuel, and the stack check. jaq looks its terms up
/// at every step, so this runs from there (see `Data` in `mod.rs`).
#[inline]
pub(crate) fn step() {
    METER.with(|m| {
        if !m.active.get() {
            return;
        }
        match m.fuel.get().checked_sub(1) {
            Some(left) => m.fuel.set(left),
            None => stop(Exhausted::Fuel),
        }
        if m.base.get().saturating_sub(stack_address()) > STACK_BUDGET {
            stop(Exhausted::Stack)
        }
    })
}

/// Runs `f` metered with `fuel`, on a stack with room for its budget: its result, or why it
/// was stopped (a panic inside, from jaq or from a value's operation, is caught and
/// reported the same way). Returns the fuel left too.
pub(crate) fn run<R>(fuel: u64, f: impl FnOnce() -> R) -> (Result<R, Exhausted>, u64) {
    stacker::maybe_grow(RED_ZONE, FRESH_STACK, || {
        let outer = METER.with(|m| {
            (
                m.active.replace(true),
                m.fuel.replace(fuel),
                m.base.replace(stack_address()),
            )
        });
        let result = catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
            match payload.downcast::<Exhausted>() {
                Ok(why) => *why,
                Err(payload) => {
                    let text = payload
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".to_string());
                    Exhausted::Panic(text)
                }
            }
        });
        let left = METER.with(|m| {
            let left = m.fuel.get();
            m.active.set(outer.0);
            m.fuel.set(outer.1);
            m.base.set(outer.2);
            left
        });
        (result, left)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuel_runs_out_and_the_meter_is_restored() {
        let (r, left) = run(10, || {
            for _ in 0..5 {
                step();
            }
            7
        });
        assert_eq!((r, left), (Ok(7), 5));
        let (r, left) = run(10, || loop {
            charge(3);
        });
        assert_eq!((r, left), (Err(Exhausted::Fuel), 0));
        // Outside an evaluation nothing is charged.
        charge(1_000_000);
        assert!(!METER.with(|m| m.active.get()));
    }

    #[test]
    fn recursion_is_stopped_before_the_stack_ends() {
        #[allow(unconditional_recursion)]
        fn down(n: u64) -> u64 {
            step();
            let pad = std::hint::black_box([n; 16]);
            down(n + 1) + pad[3]
        }
        let (r, _) = run(u64::MAX, || down(0));
        assert_eq!(r, Err(Exhausted::Stack));
    }

    #[test]
    fn panics_and_limits_are_reported_not_raised() {
        let (r, _) = run(10, || -> u8 { panic!("boom") });
        assert_eq!(r, Err(Exhausted::Panic("boom".into())));
        let (r, _) = run(u64::MAX, || charge_string(MAX_STRING_BYTES + 1));
        assert!(matches!(r, Err(Exhausted::Size(m)) if m.contains("string")));
        let (r, _) = run(u64::MAX, || charge_items(MAX_ITEMS + 1));
        assert!(matches!(r, Err(Exhausted::Size(m)) if m.contains("elements")));
    }
}
