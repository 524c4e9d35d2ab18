//! The processes that said they are alive, with what they said of themselves.

use ratchet_core::Timestamp;
use ratchet_store::{Result, WorkerRecord};
use rusqlite::Connection;

use crate::convert::{db_err, from_json};
use crate::store::sql;

pub(crate) fn list(conn: &Connection) -> Result<Vec<WorkerRecord>> {
    let mut stmt = conn.prepare_cached(sql("worker_list")).map_err(db_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter()
        .map(|(id, started_at, seen_at, alive_until, queues, about)| {
            Ok(WorkerRecord {
                id,
                started_at: Timestamp(started_at),
                seen_at: Timestamp(seen_at),
                alive_until: Timestamp(alive_until),
                queues: from_json(&queues, "worker queues")?,
                about: from_json(&about, "worker about")?,
            })
        })
        .collect()
}
