//! The listener: one connection per store that LISTENs for `<schema>.work`,
//! `<schema>.done`, `<schema>.events` and `<schema>.schedules` and turns notifications into [`WakeupSender`] hints. It reconnects with
//! backoff when the connection drops, and then wakes everyone, since notifications sent
//! while it was away are lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cursor::ClaimCursors;
use crate::share::{Wake, WakeShare, WorkPayload, LATER};
use crate::tls::Tls;

use futures::StreamExt;
use ratchet_store::WakeupSender;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Notification};

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Starts the listener; it runs until the returned task is aborted.
pub(crate) fn spawn(
    config: tokio_postgres::Config,
    tls: Tls,
    schema: String,
    sender: WakeupSender,
    cursors: Arc<Mutex<ClaimCursors>>,
    share: Arc<Mutex<WakeShare>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = FIRST_BACKOFF;
        let mut failures = 0_u32;
        let later = Arc::new(AtomicBool::new(false));
        let hearing = Hearing {
            sender: &sender,
            cursors: &cursors,
            share: &share,
            later: &later,
        };
        loop {
            match listen(&config, &tls, &schema, &hearing, &mut backoff).await {
                // A close that reconnects at once is no news.
                Ok(()) => {
                    failures = 0;
                    tracing::debug!(schema, "notification connection closed; reconnecting");
                }
                // One failure is a blip, or a short-lived process ending while it connects;
                // a reconnect that fails again is worth a warning.
                Err(e) if failures == 0 => {
                    failures += 1;
                    tracing::debug!(schema, error = %e, retry_in = ?backoff, "notification connection failed")
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(schema, error = %e, retry_in = ?backoff, "notification connection failed")
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    })
}

/// Where notifications go.
struct Hearing<'a> {
    sender: &'a WakeupSender,
    cursors: &'a Mutex<ClaimCursors>,
    share: &'a Mutex<WakeShare>,
    /// Set while a wake-up for work another process was chosen for waits.
    later: &'a Arc<AtomicBool>,
}

impl Hearing<'_> {
    /// A `work` notification: cursors go back to its ready time, and this process claims
    /// now, a little later (if it was not chosen), or not at all (not its queue).
    fn work(&self, work: &WorkPayload) {
        if let Some(ready_from) = work.ready_from {
            // Tasks ready from a time claims may have passed already (a long transaction).
            crate::cursor::lock(self.cursors).pull_back(ready_from);
        }
        let wake = match &work.target {
            Some((queue, key)) => crate::share::lock(self.share).decide(queue, *key),
            None => Wake::Now,
        };
        match wake {
            Wake::Now => self.sender.work_ready(),
            Wake::Later => {
                // One wake-up waits at a time: it looks at everything ready by then.
                if !self.later.swap(true, Ordering::SeqCst) {
                    let (sender, later) = (self.sender.clone(), self.later.clone());
                    tokio::spawn(async move {
                        tokio::time::sleep(LATER).await;
                        later.store(false, Ordering::SeqCst);
                        sender.work_ready();
                    });
                }
            }
            Wake::Skip => {}
        }
    }
}

/// One connection's life: connect, LISTEN, forward notifications until it drops.
async fn listen(
    config: &tokio_postgres::Config,
    tls: &Tls,
    schema: &str,
    hearing: &Hearing<'_>,
    backoff: &mut Duration,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = tls.open(config).await?;
    let (tx, mut rx) = mpsc::unbounded_channel::<Notification>();
    // The connection delivers notifications only while it is polled, so it gets its own task.
    let driver = tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(n).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "notification connection error");
                    break;
                }
            }
        }
    });
    let work = format!("{schema}.work");
    let done = format!("{schema}.done");
    let events = format!("{schema}.events");
    let schedules = format!("{schema}.schedules");
    let listened = client
        .batch_execute(&format!(
            "LISTEN \"{work}\"; LISTEN \"{done}\"; LISTEN \"{events}\"; LISTEN \"{schedules}\";"
        ))
        .await;
    if let Err(e) = listened {
        driver.abort();
        return Err(e);
    }
    *backoff = FIRST_BACKOFF;
    tracing::debug!(schema, "listening for notifications");
    // Whatever was sent before LISTEN took effect is unknown: everyone looks again, every
    // queue from its start.
    crate::cursor::lock(hearing.cursors).forget();
    hearing.sender.resync();
    let live_workers = crate::migrate::in_schema(
        "SELECT id, queues FROM ratchet.workers
         WHERE alive_until >= (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
        schema,
    );
    while let Some(n) = rx.recv().await {
        if n.channel() == work {
            let payload = WorkPayload::decode(n.payload());
            // Choosing who claims needs a fresh view of who serves what (one query a second
            // at most, and none while no work arrives).
            if payload.target.is_some() && crate::share::lock(hearing.share).needs_read() {
                let rows = client.query(&live_workers, &[]).await?;
                let live = rows
                    .iter()
                    .filter_map(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?)))
                    .collect();
                crate::share::lock(hearing.share).update(live);
            }
            hearing.work(&payload);
        } else if n.channel() == done {
            hearing.sender.finished(n.payload().to_string());
        } else if n.channel() == events {
            hearing.sender.events_appended();
        } else if n.channel() == schedules {
            hearing.sender.schedules_changed();
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}
