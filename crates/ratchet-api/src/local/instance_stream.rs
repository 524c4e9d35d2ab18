//! An instance live, in process: a look at its row and new history every quarter second,
//! the instance sent again only when it changed, and an end once it finished and its whole
//! history was given.

use std::time::Duration;

use futures::stream::{self, BoxStream};
use futures::StreamExt as _;
use ratchet_runtime::{Client, Error};

use super::problem;
use crate::instances::{HistoryItem, InstanceMessage, InstanceView};
use crate::problem::ApiError;

/// How long the stream waits between looks while nothing changes. One look is one round
/// trip (the instance and its new history together), so a stream open on a running instance
/// costs the database four small reads a second.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Most history events one look reads; a longer backlog comes over the next looks at once.
const PAGE: u32 = 500;

/// Where a stream is.
struct Follow {
    client: Client,
    id: String,
    after: Option<(u32, u32)>,
    /// The instance as last given, to give it again only when it changes.
    sent: Option<InstanceView>,
    /// Whether the last look saw the whole history (no more waiting to be read).
    caught_up: bool,
    /// Whether an earlier look saw the instance finished.
    seen_finished: bool,
    done: bool,
}

/// The stream of instance `id` after history position `after`; an unknown id is refused
/// now, not an empty stream.
pub(super) async fn follow(
    client: &Client,
    id: &str,
    after: Option<(u32, u32)>,
) -> Result<BoxStream<'static, Result<InstanceMessage, ApiError>>, ApiError> {
    client.status(id).await.map_err(problem)?;
    let start = Follow {
        client: client.clone(),
        id: id.to_string(),
        after,
        sent: None,
        caught_up: false,
        seen_finished: false,
        done: false,
    };
    Ok(stream::unfold(start, |mut f| async move {
        if f.done {
            return None;
        }
        if f.caught_up {
            tokio::time::sleep(LOOK_EVERY).await;
        }
        let messages = look(&mut f).await;
        Some((stream::iter(messages), f))
    })
    .flatten()
    .boxed())
}

/// One look: the messages for what changed since the last.
async fn look(f: &mut Follow) -> Vec<Result<InstanceMessage, ApiError>> {
    let seen = match f.client.follow(&f.id, f.after, PAGE).await {
        Ok(seen) => seen,
        Err(Error::NotFound(_)) => {
            // Purged or deleted while followed: nothing more will come.
            f.done = true;
            return vec![Ok(InstanceMessage::End)];
        }
        Err(e) => {
            // The next look tries again.
            f.caught_up = true;
            return vec![Err(problem(e))];
        }
    };
    let mut messages = Vec::new();
    f.caught_up = seen.history.len() < PAGE as usize;
    for record in seen.history {
        f.after = Some((record.execution, record.seq));
        messages.push(Ok(InstanceMessage::History(Box::new(HistoryItem {
            execution: record.execution,
            seq: record.seq,
            event: record.event,
        }))));
    }
    let finished = seen.instance.status.is_finished();
    let view = InstanceView::from(seen.instance);
    if f.sent.as_ref() != Some(&view) {
        messages.push(Ok(InstanceMessage::Instance(Box::new(view.clone()))));
        f.sent = Some(view);
    }
    // The history is read before the instance, so the look that first sees it finished may
    // have read the history before its last turn committed. The next look's history comes
    // after that, so it is complete: that look, read to the end, ends the stream. (It follows
    // at once, without the pause between looks.)
    if finished && f.caught_up {
        if f.seen_finished {
            f.done = true;
            messages.push(Ok(InstanceMessage::End));
        } else {
            f.seen_finished = true;
            f.caught_up = false;
        }
    }
    messages
}
