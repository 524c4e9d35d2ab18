//! The processes that said they are alive, with what they said of themselves.

use ratchet_core::Timestamp;
use ratchet_store::{StoreError, WorkerAbout, WorkerRecord};

use crate::convert::{col, Failure, Res};
use crate::store::Conn;

pub(crate) async fn list(c: &Conn) -> Res<Vec<WorkerRecord>> {
    c.query("worker_list", &[])
        .await?
        .iter()
        .map(|row| {
            let about: String = col(row, "about")?;
            let about: WorkerAbout = serde_json::from_str(&about)
                .map_err(|e| Failure::Store(StoreError::Corrupt(format!("worker about: {e}"))))?;
            Ok(WorkerRecord {
                id: col(row, "id")?,
                started_at: Timestamp(col(row, "started_at")?),
                seen_at: Timestamp(col(row, "seen_at")?),
                alive_until: Timestamp(col(row, "alive_until")?),
                queues: col(row, "queues")?,
                about,
            })
        })
        .collect()
}

/// Refuses a role that may not do a worker's writes, naming what it lacks.
pub(crate) async fn check_grants(c: &Conn, schema: &str) -> Res<()> {
    let schema = schema.to_string();
    let missing: Vec<String> = c
        .query("worker_grants_missing", &[crate::param::p(&schema)])
        .await?
        .iter()
        .map(|row| col(row, "what"))
        .collect::<Res<_>>()?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Failure::Store(StoreError::PermissionDenied(format!(
        "this role may not do a worker's writes in schema {schema}: it lacks {}; grant them \
         as docs/operations.md (\"Roles and grants\") shows",
        missing.join("; ")
    ))))
}
