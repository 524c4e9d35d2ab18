//! API tokens.

use ratchet_core::Timestamp;
use ratchet_store::{NewToken, Result, StoreError, TokenRecord};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::convert::{db_err, from_json, to_json};
use crate::store::sql;

fn record(row: &Row<'_>) -> rusqlite::Result<(String, String, String, i64, Option<i64>)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

fn into_record(
    (id, name, scopes, created_at, revoked_at): (String, String, String, i64, Option<i64>),
) -> Result<TokenRecord> {
    Ok(TokenRecord {
        id,
        name,
        scopes: from_json(&scopes, "token scopes")?,
        created_at: Timestamp(created_at),
        revoked_at: revoked_at.map(Timestamp),
    })
}

pub(crate) fn create(conn: &Connection, token: &NewToken) -> Result<()> {
    let scopes = to_json(&token.scopes);
    conn.prepare_cached(sql("token_create"))
        .map_err(db_err)?
        .execute(rusqlite::params![
            token.id,
            token.name,
            token.hash,
            scopes,
            token.created_at.0
        ])
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::ConstraintViolation) => {
                StoreError::Invalid(format!("a token with id {:?} exists", token.id))
            }
            _ => db_err(e),
        })?;
    Ok(())
}

pub(crate) fn list(conn: &Connection) -> Result<Vec<TokenRecord>> {
    let mut stmt = conn.prepare_cached(sql("token_list")).map_err(db_err)?;
    let rows = stmt
        .query_map([], record)
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter().map(into_record).collect()
}

pub(crate) fn revoke(conn: &Connection, id: &str, now: Timestamp) -> Result<bool> {
    let changed = conn
        .prepare_cached(sql("token_revoke"))
        .map_err(db_err)?
        .execute(rusqlite::params![id, now.0])
        .map_err(db_err)?;
    Ok(changed > 0)
}

pub(crate) fn find(conn: &Connection, hash: &str) -> Result<Option<TokenRecord>> {
    let row = conn
        .prepare_cached(sql("token_find"))
        .map_err(db_err)?
        .query_row([hash], record)
        .optional()
        .map_err(db_err)?;
    row.map(into_record).transpose()
}
