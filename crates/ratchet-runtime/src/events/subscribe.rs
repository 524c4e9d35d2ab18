//! Reading on, page by page, and following live: one stream for both.

use std::collections::VecDeque;

use futures::Stream;
use ratchet_store::{EventQuery, Position, StoredEvent};
use tokio::sync::watch;

use super::{EventStore, PAGE};
use crate::Result;

struct Cursor {
    events: EventStore,
    query: EventQuery,
    after: Option<Position>,
    buffer: VecDeque<StoredEvent>,
    /// Live: wait for more at the end instead of ending.
    live: bool,
    done: bool,
    wake: Option<watch::Receiver<u64>>,
}

impl Cursor {
    /// The next event, reading a page when the buffer is empty.
    async fn next(&mut self) -> Option<Result<StoredEvent>> {
        loop {
            if let Some(e) = self.buffer.pop_front() {
                self.after = Some(e.position);
                return Some(Ok(e));
            }
            if self.done {
                return None;
            }
            // Marked seen before the read: an append after this point wakes the wait below.
            if let Some(w) = &mut self.wake {
                w.borrow_and_update();
            }
            match self.events.read(self.query.clone(), self.after, PAGE).await {
                Ok(page) => {
                    let full = page.events.len() >= PAGE as usize;
                    self.buffer.extend(page.events);
                    if full || !self.buffer.is_empty() {
                        continue;
                    }
                    if !self.live {
                        self.done = true;
                        continue;
                    }
                    // Nothing matching is past `after` at this head: skip the read ahead.
                    self.wait().await;
                }
                Err(e) => {
                    if !self.live {
                        self.done = true;
                        return Some(Err(e));
                    }
                    tracing::warn!(error = %e, "event subscription read failed; retrying");
                    let pause = self.events.poll_interval;
                    let out = Some(Err(e));
                    tokio::time::sleep(pause).await;
                    return out;
                }
            }
        }
    }

    /// Until a wake-up or the poll interval.
    async fn wait(&mut self) {
        let poll = self.events.poll_interval;
        match &mut self.wake {
            Some(w) => {
                let _ = tokio::time::timeout(poll, w.changed()).await;
            }
            None => tokio::time::sleep(poll).await,
        }
    }
}

pub(super) fn stream(
    events: EventStore,
    query: EventQuery,
    after: Option<Position>,
    live: bool,
) -> impl Stream<Item = Result<StoredEvent>> + Send + 'static {
    let wake = if live {
        events.store.wakeups().map(|w| w.events)
    } else {
        None
    };
    let cursor = Cursor {
        events,
        query,
        after,
        buffer: VecDeque::new(),
        live,
        done: false,
        wake,
    };
    futures::stream::unfold(cursor, |mut c| async move {
        let next = c.next().await?;
        Some((next, c))
    })
}
