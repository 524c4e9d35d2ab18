//! Wake one process per piece of new work. A `work` notification reaches every process that
//! listens; if each claimed at once, all but one would find nothing, and their claims would
//! cost the database more than the work. So an enqueue names the queue in its notification
//! with a key, and the live processes that serve that queue (the `workers` table, which
//! each process's liveness beat keeps and its listener reads when work arrives) agree
//! without talking: the one at `key mod n` in id order claims at
//! once, the others only after [`LATER`], in case it died or is full, and processes that do
//! not serve the queue not at all.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The share, whatever a panic elsewhere left in it (it is only ever replaced whole).
pub(crate) fn lock(share: &Mutex<WakeShare>) -> MutexGuard<'_, WakeShare> {
    share.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a process not chosen for a piece of work waits before it looks too.
pub(crate) const LATER: Duration = Duration::from_millis(25);

/// What a listener does with one `work` notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Claim now: this process is the one chosen, or nobody is.
    Now,
    /// Claim after [`LATER`] if the chosen one has not taken the work.
    Later,
    /// Nothing to do here: this process does not serve the queue.
    Skip,
}

/// How old what a process knows of the others may be when work arrives: processes that
/// start or stop are seen within this.
const FRESH: Duration = Duration::from_secs(1);

/// Which live processes serve which queue, as this process last read it.
#[derive(Debug, Default)]
pub(crate) struct WakeShare {
    /// This process's worker id, once it said it was alive.
    me: Option<String>,
    /// Queue name to the ids of the live processes serving it, sorted.
    serving: HashMap<String, Vec<String>>,
    /// When `serving` was read.
    read_at: Option<Instant>,
}

impl WakeShare {
    /// Records that this process (`me`) said it is alive.
    pub(crate) fn set_me(&mut self, me: &str) {
        self.me = Some(me.to_string());
    }

    /// True when work arrives and what this process knows of the others is too old (or
    /// was never read) to choose by: the listener reads the `workers` table first.
    pub(crate) fn needs_read(&self) -> bool {
        self.me.is_some() && self.read_at.is_none_or(|at| at.elapsed() > FRESH)
    }

    /// Records what the `workers` table said: every live process with its queues.
    pub(crate) fn update(&mut self, workers: Vec<(String, Vec<String>)>) {
        let mut serving: HashMap<String, Vec<String>> = HashMap::new();
        for (id, queues) in workers {
            for queue in queues {
                serving.entry(queue).or_default().push(id.clone());
            }
        }
        for ids in serving.values_mut() {
            ids.sort();
            ids.dedup();
        }
        self.serving = serving;
        self.read_at = Some(Instant::now());
    }

    /// This process said it is gone: it serves nothing any more, so it claims when told.
    pub(crate) fn forget(&mut self) {
        *self = Self::default();
    }

    /// What to do with work on `queue` announced with `key`.
    pub(crate) fn decide(&self, queue: &str, key: u64) -> Wake {
        let Some(me) = &self.me else {
            return Wake::Now;
        };
        let Some(ids) = self.serving.get(queue).filter(|ids| !ids.is_empty()) else {
            // Nobody serves it, as far as this process knows: a newcomer may.
            return Wake::Now;
        };
        if !ids.iter().any(|id| id == me) {
            return Wake::Skip;
        }
        let chosen = &ids[(key % ids.len() as u64) as usize];
        if chosen == me {
            Wake::Now
        } else {
            Wake::Later
        }
    }
}

/// The payload of a `work` notification: the earliest ready time of what it announces
/// (claim cursors go back to it), and, for tasks of one queue, that queue and a key that
/// chooses the process to claim them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkPayload {
    /// The earliest ready time, when tasks were made ready.
    pub(crate) ready_from: Option<i64>,
    /// The queue and key, when one process is to claim first.
    pub(crate) target: Option<(String, u64)>,
}

impl WorkPayload {
    /// Text as sent: `<ready>` or `<ready> <key> <queue>` (the queue last, so it may hold
    /// anything), or empty.
    pub(crate) fn encode(ready_from: i64, target: Option<(&str, u64)>) -> String {
        match target {
            Some((queue, key)) => format!("{ready_from} {key} {queue}"),
            None => ready_from.to_string(),
        }
    }

    /// Reads a payload; one that does not parse announces work for everyone.
    pub(crate) fn decode(text: &str) -> Self {
        let mut parts = text.splitn(3, ' ');
        let ready_from = parts.next().and_then(|r| r.parse::<i64>().ok());
        let target = match (parts.next().map(str::parse::<u64>), parts.next()) {
            (Some(Ok(key)), Some(queue)) if ready_from.is_some() => Some((queue.to_string(), key)),
            _ => None,
        };
        Self { ready_from, target }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(me: &str) -> WakeShare {
        let mut s = WakeShare::default();
        s.set_me(me);
        s.update(vec![
            ("b".into(), vec!["q".into()]),
            ("a".into(), vec!["q".into(), "r".into()]),
            ("c".into(), vec!["q".into()]),
        ]);
        s
    }

    #[test]
    fn exactly_one_serving_process_claims_at_once() {
        for key in 0..30 {
            let nows = ["a", "b", "c"]
                .iter()
                .filter(|me| share(me).decide("q", key) == Wake::Now)
                .count();
            assert_eq!(nows, 1, "key {key}");
        }
        // Keys spread the work over all three.
        let chosen: std::collections::HashSet<_> = (0..3)
            .map(|key| {
                ["a", "b", "c"]
                    .into_iter()
                    .find(|me| share(me).decide("q", key) == Wake::Now)
            })
            .collect();
        assert_eq!(chosen.len(), 3);
    }

    #[test]
    fn others_look_later_and_non_servers_not_at_all() {
        assert_eq!(
            share("a").decide("r", 7),
            Wake::Now,
            "the only one serving r"
        );
        assert_eq!(share("b").decide("r", 7), Wake::Skip);
        let later = ["a", "b", "c"]
            .iter()
            .filter(|me| share(me).decide("q", 5) == Wake::Later)
            .count();
        assert_eq!(later, 2);
    }

    #[test]
    fn what_it_knows_is_read_again_when_old() {
        let mut s = WakeShare::default();
        assert!(!s.needs_read(), "not a worker: nothing to choose");
        s.set_me("a");
        assert!(s.needs_read(), "never read");
        s.update(vec![("a".into(), vec!["q".into()])]);
        assert!(!s.needs_read(), "just read");
    }

    #[test]
    fn without_knowledge_everyone_claims() {
        assert_eq!(WakeShare::default().decide("q", 1), Wake::Now);
        assert_eq!(share("a").decide("unknown", 1), Wake::Now);
        let mut gone = share("a");
        gone.forget();
        assert_eq!(gone.decide("q", 1), Wake::Now);
    }

    #[test]
    fn payloads_round_trip_and_old_ones_still_read() {
        let text = WorkPayload::encode(1_000, Some(("a queue", 42)));
        assert_eq!(
            WorkPayload::decode(&text),
            WorkPayload {
                ready_from: Some(1_000),
                target: Some(("a queue".into(), 42))
            }
        );
        assert_eq!(
            WorkPayload::decode("1000"),
            WorkPayload {
                ready_from: Some(1_000),
                target: None
            }
        );
        assert_eq!(
            WorkPayload::decode(""),
            WorkPayload {
                ready_from: None,
                target: None
            }
        );
    }
}
