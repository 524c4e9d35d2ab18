use std::str::FromStr;

use ratchet_core::{ErrorInfo, HistoryEvent, ParentRef, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A fencing token: each lease of an instance or task gets a larger one, and a write carrying
/// an older token is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fence(pub i64);

/// One life of an instance id: drawn at random when the id is created, and again when it is
/// restarted or created anew after a purge. A turn, a cache entry or a step-derived key of one
/// life never applies to another, even where the execution and history length agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Incarnation(pub i64);

/// Where an instance stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum InstanceStatus {
    /// Started, no turn has run yet.
    Pending,
    /// At least one turn has run; not finished.
    Running,
    /// Returned an output.
    Completed,
    /// Returned an error, hit a limit, or replay found nondeterminism.
    Failed,
    /// Ended after a client asked to cancel it.
    Cancelled,
    /// Stopped by a client at once, without running more code.
    Terminated,
    /// Its last execution continued as new; the next one has not started yet.
    ContinuedAsNew,
}

impl InstanceStatus {
    /// Every status, in display order.
    pub const ALL: [InstanceStatus; 7] = [
        Self::Pending,
        Self::Running,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
        Self::Terminated,
        Self::ContinuedAsNew,
    ];

    /// True once the instance will run no more code.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Cancelled | Self::Terminated
        )
    }

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Completed => "Completed",
            Self::Failed => "Failed",
            Self::Cancelled => "Cancelled",
            Self::Terminated => "Terminated",
            Self::ContinuedAsNew => "ContinuedAsNew",
        }
    }
}

impl FromStr for InstanceStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown status \"{s}\" (expected one of Pending, Running, Completed, Failed, Cancelled, Terminated, ContinuedAsNew)"))
    }
}

impl std::fmt::Display for InstanceStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An instance as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// Instance id.
    pub id: String,
    /// Orchestration name.
    pub name: String,
    /// Orchestration version, fixed by the first turn.
    pub version: Option<u32>,
    /// Status.
    pub status: InstanceStatus,
    /// Current execution number.
    pub execution: u32,
    /// Input of the current execution.
    pub input: Value,
    /// Output, once completed.
    pub output: Option<Value>,
    /// Error, once failed, cancelled with an error, or terminated.
    pub error: Option<ErrorInfo>,
    /// The last custom status the code set.
    pub custom_status: Option<Value>,
    /// The parent, for a sub-orchestration.
    pub parent: Option<ParentRef>,
    /// Events in the current execution's history.
    pub history_len: u32,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
}

/// What to do when the id of a new instance is taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum IfExists {
    /// Refuse with [`crate::StoreError::AlreadyExists`].
    #[default]
    Fail,
    /// Do nothing and report the existing instance (an idempotent start).
    UseExisting,
    /// If the existing instance is finished, erase it and start afresh; otherwise refuse.
    RestartIfFinished,
}

/// An instance to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewInstance {
    /// Instance id.
    pub id: String,
    /// Orchestration name.
    pub name: String,
    /// Input payload.
    pub input: Value,
    /// The parent, for a sub-orchestration.
    pub parent: Option<ParentRef>,
    /// What to do when the id is taken.
    pub if_exists: IfExists,
    /// The W3C `traceparent` its turns and activities join, if any.
    pub trace: Option<String>,
}

/// The outcome of creating one instance.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CreateOutcome {
    /// Created; leased to the caller when it asked for that.
    Created(Option<ClaimedInstance>),
    /// Existed and `UseExisting` was asked: nothing changed.
    Existing(InstanceStatus),
    /// Existed and could not be reused: nothing changed.
    AlreadyExists(InstanceStatus),
}

/// An inbox row: an event waiting to be delivered to an instance.
#[derive(Clone, Debug, PartialEq)]
pub struct InboxEvent {
    /// Row id; the order of delivery.
    pub id: i64,
    /// The event.
    pub event: HistoryEvent,
}

/// An instance leased to the caller, with the inbox events its next turn consumes.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedInstance {
    /// Instance id.
    pub id: String,
    /// Orchestration name.
    pub name: String,
    /// Pinned version, or `None` before the first turn.
    pub version: Option<u32>,
    /// Current execution.
    pub execution: u32,
    /// Events already in this execution's history.
    pub history_len: u32,
    /// The lease's fence.
    pub fence: Fence,
    /// The life of the id this lease is for.
    pub incarnation: Incarnation,
    /// Visible inbox events, oldest first.
    pub events: Vec<InboxEvent>,
}

/// Filter for listing instances. Empty fields match everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceFilter {
    /// Any of these statuses.
    pub statuses: Vec<InstanceStatus>,
    /// This orchestration name.
    pub name: Option<String>,
    /// Created at or after.
    pub created_after: Option<Timestamp>,
    /// Created before.
    pub created_before: Option<Timestamp>,
    /// Keyset pagination: only instances after this one in the listing's order (newest
    /// first), given as its creation time and id; the last record of a page gives the next.
    pub after: Option<(Timestamp, String)>,
    /// Only instances whose last custom status is this value (compared as written: a string,
    /// a number, or an object with its keys in the same order).
    pub custom_status: Option<Value>,
    /// Only instances whose id starts with this, character for character (case matters). A
    /// range of the ids' index ([`prefix_end`]), so a narrow prefix reads only its matches.
    pub id_prefix: Option<String>,
    /// At most this many, newest first (default 100).
    pub limit: Option<u32>,
}

/// The least string above every string that starts with `prefix`, in code point order (which
/// is UTF-8's byte order, the order both backends compare ids in): `prefix` with its last
/// character moved on to the next, after dropping trailing characters that have no next.
/// `None` when no string is above them all (an empty prefix, or one of `char::MAX` only).
///
/// The strings that start with `prefix` are exactly those from `prefix` (inclusive) to this
/// (exclusive), so a prefix filter is a range of an ordered index.
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        // The surrogates are no characters: the one after U+D7FF is U+E000.
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(u32::from(c) + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// An instance with the history recorded after a position, read together: what a live view
/// of the instance polls ([`crate::Store::instance_follow`]).
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceFollow {
    /// The instance as it stands.
    pub instance: InstanceRecord,
    /// Up to the asked number of its history events after the position, across executions,
    /// in order.
    pub history: Vec<HistoryRecord>,
}

/// One stored history event with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryRecord {
    /// Execution it belongs to.
    pub execution: u32,
    /// Position within the execution.
    pub seq: u32,
    /// The event.
    pub event: HistoryEvent,
}

/// A signal to raise.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSignal {
    /// Target instance.
    pub instance: String,
    /// Signal name.
    pub name: String,
    /// Payload.
    pub payload: Value,
    /// When set, a second signal with the same id for the same instance is ignored.
    pub dedup_id: Option<String>,
}

/// The outcome of raising one signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalOutcome {
    /// Delivered to the inbox.
    Raised,
    /// A signal with the same dedup id was raised before; nothing changed.
    Duplicate,
    /// No such instance.
    NotFound,
    /// The instance has finished; nothing changed.
    Finished(InstanceStatus),
}

/// The outcome of a cancel or terminate request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopOutcome {
    /// Requested (cancel) or done (terminate).
    Done,
    /// No such instance.
    NotFound,
    /// Already finished; nothing changed.
    Finished(InstanceStatus),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends_bound_exactly_the_strings_that_start_with_the_prefix() {
        assert_eq!(prefix_end("ord").as_deref(), Some("ore"));
        assert_eq!(prefix_end("a-").as_deref(), Some("a."));
        assert_eq!(prefix_end("é").as_deref(), Some("ê"));
        assert_eq!(prefix_end("x\u{D7FF}").as_deref(), Some("x\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(prefix_end(""), None);
        // Byte order (what the databases compare) agrees with code point order.
        for (p, inside, outside) in [
            ("ord", "ord-7", "ore"),
            ("é", "é1", "f"),
            ("z", "z\u{10FFFF}", "{"),
        ] {
            let end = prefix_end(p).unwrap();
            assert!(p.as_bytes() <= inside.as_bytes() && inside.as_bytes() < end.as_bytes());
            assert!(!(outside.as_bytes() < end.as_bytes() && outside.as_bytes() >= p.as_bytes()));
        }
    }
}
