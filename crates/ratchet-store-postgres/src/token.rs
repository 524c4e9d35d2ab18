//! API tokens.

use ratchet_core::Timestamp;
use ratchet_store::{NewToken, StoreError, TokenRecord};
use tokio_postgres::Row;

use crate::convert::{col, Failure, Res};
use crate::param::p;
use crate::store::Conn;

fn record(row: &Row) -> Res<TokenRecord> {
    Ok(TokenRecord {
        id: col(row, "id")?,
        name: col(row, "name")?,
        scopes: col(row, "scopes")?,
        created_at: Timestamp(col(row, "created_at")?),
        revoked_at: col::<Option<i64>>(row, "revoked_at")?.map(Timestamp),
    })
}

pub(crate) async fn create(c: &Conn, t: &NewToken) -> Res<()> {
    let rows = c
        .query(
            "token_create",
            &[
                p(&t.id),
                p(&t.name),
                p(&t.hash),
                p(&t.scopes),
                p(&t.created_at.0),
            ],
        )
        .await?;
    if rows.is_empty() {
        return Err(Failure::Store(StoreError::Invalid(format!(
            "a token with id {:?} exists",
            t.id
        ))));
    }
    Ok(())
}

pub(crate) async fn list(c: &Conn) -> Res<Vec<TokenRecord>> {
    c.query("token_list", &[])
        .await?
        .iter()
        .map(record)
        .collect()
}

pub(crate) async fn revoke(c: &Conn, id: &str, now: Timestamp) -> Res<bool> {
    Ok(!c
        .query("token_revoke", &[p(&id), p(&now.0)])
        .await?
        .is_empty())
}

pub(crate) async fn find(c: &Conn, hash: &str) -> Res<Option<TokenRecord>> {
    c.query("token_find", &[p(&hash)])
        .await?
        .first()
        .map(record)
        .transpose()
}
