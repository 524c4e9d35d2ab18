//! What PostgreSQL saw during a run: deltas of `pg_stat_database`, WAL written, the wait
//! events Ratchet's connections were in (sampled from `pg_stat_activity`), and the dead tuples
//! left in Ratchet's tables.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, NoTls};

/// The PostgreSQL part of a report.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct PgReport {
    pub(crate) commits: i64,
    pub(crate) rollbacks: i64,
    pub(crate) blks_hit: i64,
    pub(crate) blks_read: i64,
    pub(crate) tup_inserted: i64,
    pub(crate) tup_updated: i64,
    pub(crate) tup_deleted: i64,
    pub(crate) wal_bytes: i64,
    pub(crate) wal_bytes_per_unit: f64,
    /// The most frequent states of Ratchet's busy connections ("CPU" when not waiting), with
    /// how many samples found them there.
    pub(crate) wait_events: Vec<(String, u64)>,
    pub(crate) wait_samples: u64,
    /// Dead tuples per table of Ratchet's schema after the run.
    pub(crate) dead_tuples: BTreeMap<String, i64>,
}

struct Snapshot {
    counters: [i64; 7],
    lsn: String,
}

pub(crate) async fn connect(url: &str) -> anyhow::Result<Client> {
    let mut config: tokio_postgres::Config = url.parse().context("database URL")?;
    config.application_name("ratchet-bench");
    let (client, connection) = config
        .connect(NoTls)
        .await
        .context("connecting to PostgreSQL for statistics")?;
    tokio::spawn(connection);
    Ok(client)
}

/// A session in a REPEATABLE READ transaction that has taken its snapshot.
pub(crate) async fn hold_snapshot(url: &str) -> anyhow::Result<Client> {
    let client = connect(url).await?;
    client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pg_class")
        .await
        .context("holding a snapshot")?;
    Ok(client)
}

async fn snapshot(client: &Client) -> anyhow::Result<Snapshot> {
    let row = client
        .query_one(
            "SELECT xact_commit, xact_rollback, blks_hit, blks_read, tup_inserted, tup_updated,
                    tup_deleted, pg_current_wal_lsn()::text
             FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await?;
    let mut counters = [0i64; 7];
    for (i, c) in counters.iter_mut().enumerate() {
        *c = row.try_get(i)?;
    }
    Ok(Snapshot {
        counters,
        lsn: row.try_get(7)?,
    })
}

/// Statistics being gathered for a run.
pub(crate) struct PgStats {
    client: Client,
    schema: String,
    start: Snapshot,
    stop: watch::Sender<bool>,
    sampler: JoinHandle<HashMap<String, u64>>,
}

impl PgStats {
    /// Takes the starting snapshot and starts sampling wait events every 10 ms. `url` must
    /// reach the server directly (not through the bench's proxy).
    pub(crate) async fn begin(url: &str, schema: &str) -> anyhow::Result<Self> {
        let client = connect(url).await?;
        // The run's tables were empty when its connections planned their statements, and a
        // connection keeps a plan until the table's statistics change: sequential scans
        // planned for a few rows would outlive a short run. Autovacuum analyzes a busy table
        // within a minute in production; the measured part starts from that state.
        client
            .batch_execute(&format!(
                "ANALYZE {schema}.instances, {schema}.inbox, {schema}.tasks, {schema}.history, \
                 {schema}.events, {schema}.event_tags"
            ))
            .await
            .context("analyzing the run's tables")?;
        let start = snapshot(&client).await?;
        let sampling = connect(url).await?;
        let (stop, mut stopped) = watch::channel(false);
        let sampler = tokio::spawn(async move {
            let mut seen: HashMap<String, u64> = HashMap::new();
            let query = "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU')
                         FROM pg_stat_activity
                         WHERE datname = current_database() AND application_name = 'ratchet'
                           AND state = 'active'";
            loop {
                if let Ok(rows) = sampling.query(query, &[]).await {
                    for row in rows {
                        let event: String = row.try_get(0).unwrap_or_default();
                        *seen.entry(event).or_default() += 1;
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(10)) => {}
                    _ = stopped.changed() => break,
                }
            }
            seen
        });
        Ok(Self {
            client,
            schema: schema.to_string(),
            start,
            stop,
            sampler,
        })
    }

    /// Stops sampling and reads the deltas. Call it after Ratchet's connections closed, so
    /// their statistics were flushed.
    pub(crate) async fn end(self, units: u64) -> anyhow::Result<PgReport> {
        let _ = self.stop.send(true);
        let seen = self.sampler.await.unwrap_or_default();
        // Backends flush their statistics when they exit: give them a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let end = snapshot(&self.client).await?;
        let wal: i64 = self
            .client
            .query_one(
                "SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint",
                &[&end.lsn, &self.start.lsn],
            )
            .await?
            .try_get(0)?;
        let mut dead_tuples = BTreeMap::new();
        for row in self
            .client
            .query(
                "SELECT relname::text, n_dead_tup FROM pg_stat_user_tables WHERE schemaname = $1",
                &[&self.schema],
            )
            .await?
        {
            dead_tuples.insert(row.try_get(0)?, row.try_get(1)?);
        }
        let d = |i: usize| end.counters[i] - self.start.counters[i];
        let wait_samples = seen.values().sum();
        let mut wait_events: Vec<(String, u64)> = seen.into_iter().collect();
        wait_events.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        wait_events.truncate(8);
        Ok(PgReport {
            commits: d(0),
            rollbacks: d(1),
            blks_hit: d(2),
            blks_read: d(3),
            tup_inserted: d(4),
            tup_updated: d(5),
            tup_deleted: d(6),
            wal_bytes: wal,
            wal_bytes_per_unit: if units == 0 {
                0.0
            } else {
                wal as f64 / units as f64
            },
            wait_events,
            wait_samples,
            dead_tuples,
        })
    }
}

/// Asks for a checkpoint before a run, so that it does not pay for one that an earlier run's
/// WAL made due (under default settings one comes every 1 GB of WAL, and the full-page images
/// written after it slow every commit for a while). Needs superuser or `pg_checkpoint`;
/// without them the run goes on and says so.
pub(crate) async fn checkpoint(url: &str) -> anyhow::Result<()> {
    if let Err(e) = connect(url).await?.batch_execute("CHECKPOINT").await {
        tracing::warn!(error = %e, "no CHECKPOINT before the run; its figures may include one");
    }
    Ok(())
}

/// The bytes of every table of `schema`, with its indexes and TOAST.
pub(crate) async fn schema_bytes(url: &str, schema: &str) -> anyhow::Result<u64> {
    let bytes: i64 = connect(url)
        .await?
        .query_one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind = 'r'",
            &[&schema],
        )
        .await?
        .try_get(0)?;
    Ok(u64::try_from(bytes).unwrap_or(0))
}

/// Drops a run's schema.
pub(crate) async fn drop_schema(url: &str, schema: &str) -> anyhow::Result<()> {
    connect(url)
        .await?
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await?;
    Ok(())
}
