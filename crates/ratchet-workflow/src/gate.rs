//! How many definitions a process compiles at once: at most one per core. Compiling runs
//! each expression on its budget, so a burst of hostile definitions (to the validate
//! endpoint, say) costs the process a few cores' worth of work and memory at a time, never
//! one burst's worth each.

use std::sync::{Condvar, Mutex, OnceLock};

struct Gate {
    inside: Mutex<usize>,
    freed: Condvar,
    limit: usize,
}

fn gate() -> &'static Gate {
    static GATE: OnceLock<Gate> = OnceLock::new();
    GATE.get_or_init(|| Gate {
        inside: Mutex::new(0),
        freed: Condvar::new(),
        limit: std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
    })
}

/// A place inside the gate, given back when dropped.
pub(crate) struct Turn;

/// Waits for a place inside the gate.
pub(crate) fn enter() -> Turn {
    let g = gate();
    let mut inside = g.inside.lock().unwrap_or_else(|p| p.into_inner());
    while *inside >= g.limit {
        inside = g.freed.wait(inside).unwrap_or_else(|p| p.into_inner());
    }
    *inside += 1;
    Turn
}

impl Drop for Turn {
    fn drop(&mut self) {
        let g = gate();
        let mut inside = g.inside.lock().unwrap_or_else(|p| p.into_inner());
        *inside = inside.saturating_sub(1);
        g.freed.notify_one();
    }
}
