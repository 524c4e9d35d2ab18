//! Declarative workflow definitions.

use ratchet_core::Timestamp;
use ratchet_store::{NewWorkflow, StoreError, WorkflowPut, WorkflowRecord};

use crate::convert::{col, u32_of, Failure, Res};
use crate::param::p;
use crate::store::Conn;

pub(crate) async fn put(c: &Conn, w: &NewWorkflow, now: Timestamp) -> Res<WorkflowPut> {
    let rows = c
        .query(
            "workflow_put",
            &[
                p(&w.namespace),
                p(&w.name),
                p(&w.version),
                p(&w.hash),
                p(&w.source),
                p(&now.0),
            ],
        )
        .await?;
    let Some(row) = rows.first() else {
        return Err(Failure::Store(StoreError::Invalid(format!(
            "another process stored a revision of {}/{} at the same moment: apply again",
            w.namespace, w.name
        ))));
    };
    let revision = u32_of(col(row, "revision")?);
    let outcome: String = col(row, "outcome")?;
    Ok(match outcome.as_str() {
        "created" => WorkflowPut::Created(revision),
        "unchanged" => WorkflowPut::Unchanged(revision),
        _ => WorkflowPut::Conflict {
            revision,
            hash: col(row, "hash")?,
        },
    })
}

pub(crate) async fn list(
    c: &Conn,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Res<Vec<WorkflowRecord>> {
    c.query("workflow_list", &[p(&namespace), p(&name)])
        .await?
        .iter()
        .map(|r| {
            Ok(WorkflowRecord {
                namespace: col(r, "namespace")?,
                name: col(r, "name")?,
                version: col(r, "version")?,
                revision: u32_of(col(r, "revision")?),
                hash: col(r, "hash")?,
                source: col(r, "source")?,
                created_at: Timestamp(col(r, "created_at")?),
            })
        })
        .collect()
}

/// How errors name what a delete was after: `namespace/name`, with the version if one.
fn target(namespace: &str, name: &str, version: Option<&str>) -> String {
    match version {
        Some(v) => format!("{namespace}/{name} version {v}"),
        None => format!("{namespace}/{name}"),
    }
}

pub(crate) async fn delete(
    c: &Conn,
    namespace: &str,
    name: &str,
    version: Option<&str>,
    force: bool,
) -> Res<Vec<WorkflowRecord>> {
    let rows = c
        .query(
            "workflow_delete",
            &[p(&namespace), p(&name), p(&version), p(&force)],
        )
        .await?;
    let Some(first) = rows.first() else {
        return Err(Failure::Store(StoreError::Corrupt(
            "workflow_delete answered no row".into(),
        )));
    };
    let found: i64 = col(first, "found")?;
    let in_use: i64 = col(first, "in_use")?;
    if found == 0 {
        return Err(Failure::Store(StoreError::NotFound(format!(
            "workflow {}",
            target(namespace, name, version)
        ))));
    }
    let mut deleted = Vec::with_capacity(rows.len());
    for r in &rows {
        let Some(revision) = col::<Option<i32>>(r, "revision")? else {
            continue;
        };
        deleted.push(WorkflowRecord {
            namespace: col(r, "namespace")?,
            name: col(r, "name")?,
            version: col(r, "version")?,
            revision: u32_of(revision),
            hash: col(r, "hash")?,
            source: col(r, "source")?,
            created_at: Timestamp(col(r, "created_at")?),
        });
    }
    if deleted.is_empty() {
        return Err(Failure::Store(StoreError::InUse {
            workflow: target(namespace, name, version),
            instances: u64::try_from(in_use).unwrap_or(0),
        }));
    }
    Ok(deleted)
}
