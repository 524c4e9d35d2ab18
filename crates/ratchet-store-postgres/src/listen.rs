//! The listener: one connection per store that LISTENs for `<schema>.work`,
//! `<schema>.done` and `<schema>.events` and turns notifications into [`WakeupSender`] hints. It reconnects with
//! backoff when the connection drops, and then wakes everyone, since notifications sent
//! while it was away are lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cursor::ClaimCursors;

use futures::StreamExt;
use ratchet_store::WakeupSender;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, Notification};
use tokio_postgres_rustls::MakeRustlsConnect;

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Starts the listener; it runs until the returned task is aborted.
pub(crate) fn spawn(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    schema: String,
    sender: WakeupSender,
    cursors: Arc<Mutex<ClaimCursors>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = FIRST_BACKOFF;
        let mut failures = 0_u32;
        loop {
            match listen(&config, &tls, &schema, &sender, &cursors, &mut backoff).await {
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

/// One connection's life: connect, LISTEN, forward notifications until it drops.
async fn listen(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    schema: &str,
    sender: &WakeupSender,
    cursors: &Mutex<ClaimCursors>,
    backoff: &mut Duration,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(tls.clone()).await?;
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
    let listened = client
        .batch_execute(&format!(
            "LISTEN \"{work}\"; LISTEN \"{done}\"; LISTEN \"{events}\";"
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
    crate::cursor::lock(cursors).forget();
    sender.resync();
    while let Some(n) = rx.recv().await {
        if n.channel() == work {
            // Tasks ready from a time claims may have passed already (a long transaction).
            if let Ok(ready_from) = n.payload().parse::<i64>() {
                crate::cursor::lock(cursors).pull_back(ready_from);
            }
            sender.work_ready();
        } else if n.channel() == done {
            sender.finished(n.payload().to_string());
        } else if n.channel() == events {
            sender.events_appended();
        }
    }
    drop(client);
    let _ = driver.await;
    Ok(())
}
