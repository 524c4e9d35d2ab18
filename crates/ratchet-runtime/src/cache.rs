//! The sticky cache: live orchestrations kept in memory between turns, so the next turn feeds
//! only its new events instead of replaying the whole history.

use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};

use lru::LruCache;
use ratchet_core::{Execution, ParentRef};
use ratchet_store::{ClaimedInstance, Fence, Incarnation};

/// A live execution kept between turns.
pub(crate) struct Cached {
    pub(crate) exec: Execution,
    /// The orchestration's name.
    pub(crate) name: String,
    /// The fence of the lease its last turn ran under.
    pub(crate) fence: Fence,
    pub(crate) incarnation: Incarnation,
    pub(crate) execution: u32,
    pub(crate) version: u32,
    pub(crate) parent: Option<ParentRef>,
    /// The `traceparent` the instance's turns join.
    pub(crate) trace: Option<String>,
}

/// Live executions by instance id, least recently used first out.
pub(crate) struct StickyCache {
    entries: Mutex<LruCache<String, Cached>>,
}

impl StickyCache {
    pub(crate) fn new(size: usize) -> Self {
        Self {
            entries: Mutex::new(LruCache::new(
                NonZeroUsize::new(size).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<String, Cached>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the entry that can run `claimed`'s next turn: the same life of the id, the same
    /// execution and history length (nothing was written elsewhere since). Any other entry for
    /// the id is dropped.
    pub(crate) fn take_for(&self, claimed: &ClaimedInstance) -> Option<Cached> {
        self.lock().pop(&claimed.id).filter(|c| {
            c.incarnation == claimed.incarnation
                && c.execution == claimed.execution
                && c.exec.history_len() == claimed.history_len as usize
        })
    }

    /// Takes the entry of `id`, whatever it is.
    pub(crate) fn take(&self, id: &str) -> Option<Cached> {
        self.lock().pop(id)
    }

    /// Keeps `cached` for the next turn of `id`.
    pub(crate) fn put(&self, id: String, cached: Cached) {
        self.lock().put(id, cached);
    }

    /// Forgets `id` (it finished, or its turn was refused).
    pub(crate) fn forget(&self, id: &str) {
        self.lock().pop(id);
    }

    /// Those of `ids` that are cached here.
    pub(crate) fn cached_of(&self, ids: impl Iterator<Item = String>) -> Vec<String> {
        let cache = self.lock();
        ids.filter(|i| cache.contains(i)).collect()
    }

    /// Live executions held.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
