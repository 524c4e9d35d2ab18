//! Instance lists: a statement per combination of filters, so that each is planned for what
//! it asks. SQLite plans a statement before it sees its values: one statement for every filter
//! (`?1 IS NULL OR status = ?1`) could use no index at all and sorted the whole table for
//! every page.
//!
//! - Newest first, by the index on (created_at, id); the keyset is a range of it.
//! - One status, or a name: that column's index on (column, created_at), read in order.
//! - Several statuses: one ordered read per status, merged (not all their rows sorted).
//! - An id prefix: its matches are counted first, no further than [`WIDE_PREFIX`]. Below that
//!   they are read from the primary key's range and sorted (every other index is kept out of
//!   the plan, which might otherwise walk a large status for a handful of ids); above it
//!   the prefix is only a filter on one of the plans above, which meets matches often.

use ratchet_store::{prefix_end, InstanceFilter, InstanceRecord, InstanceStatus, Result};
use rusqlite::types::Value;
use rusqlite::Connection;

use crate::convert::{db_err, to_json, InstanceRow};
use crate::store::sql;

/// Past this many ids, a prefix is wide: a page of its newest matches is found sooner by
/// walking creation times than by sorting every match.
pub(crate) const WIDE_PREFIX: i64 = 10_000;

/// The order of every list, and of each part of a merged one.
const ORDER: &str = " ORDER BY created_at DESC, id DESC LIMIT ?";

/// A statement being built: its text and its values, bound in order to its `?`s.
#[derive(Debug, Default)]
struct Statement {
    sql: String,
    values: Vec<Value>,
}

/// The conditions of a filter other than its statuses, each with its values.
fn conditions(f: &InstanceFilter, prefix: Option<&str>, narrow: bool) -> Statement {
    // `+column` keeps a column's index out of the plan.
    let col = |name: &str| {
        if narrow {
            format!("+{name}")
        } else {
            name.to_string()
        }
    };
    let mut terms = Vec::new();
    let mut values = Vec::new();
    if let Some(name) = &f.name {
        terms.push(format!("{} = ?", col("name")));
        values.push(Value::Text(name.clone()));
    }
    if let Some(t) = f.created_after {
        terms.push(format!("{} >= ?", col("created_at")));
        values.push(Value::Integer(t.0));
    }
    if let Some(t) = f.created_before {
        terms.push(format!("{} < ?", col("created_at")));
        values.push(Value::Integer(t.0));
    }
    if let Some((t, id)) = &f.after {
        // The keyset, written so that its first term is a range of the index it walks.
        let at = col("created_at");
        terms.push(format!("{at} <= ? AND ({at} < ? OR id < ?)"));
        values.extend([
            Value::Integer(t.0),
            Value::Integer(t.0),
            Value::Text(id.clone()),
        ]);
    }
    if let Some(custom) = &f.custom_status {
        terms.push("custom_status = ?".to_string());
        values.push(Value::Text(to_json(custom)));
    }
    if let Some(prefix) = prefix {
        let id = if narrow { "id" } else { "+id" };
        terms.push(format!("{id} >= ?"));
        values.push(Value::Text(prefix.to_string()));
        if let Some(end) = prefix_end(prefix) {
            terms.push(format!("{id} < ?"));
            values.push(Value::Text(end));
        }
    }
    Statement {
        sql: terms.join(" AND "),
        values,
    }
}

/// `base WHERE terms...`, `terms` joined with AND, leaving out empty ones.
fn select(base: &str, terms: &[&str]) -> String {
    let terms: Vec<&str> = terms.iter().copied().filter(|t| !t.is_empty()).collect();
    if terms.is_empty() {
        base.to_string()
    } else {
        format!("{base} WHERE {}", terms.join(" AND "))
    }
}

/// The statement listing `f`; `narrow` when it has an id prefix with few matches.
fn statement(f: &InstanceFilter, prefix: Option<&str>, narrow: bool) -> Statement {
    let base = sql("instance_list");
    let rest = conditions(f, prefix, narrow);
    let limit = Value::Integer(i64::from(f.limit.unwrap_or(100)));
    let mut statuses: Vec<InstanceStatus> = f.statuses.clone();
    statuses.sort_by_key(|s| s.as_str());
    statuses.dedup();
    let status = if narrow { "+status" } else { "status" };
    match statuses.as_slice() {
        [] => Statement {
            sql: select(base, &[&rest.sql]) + ORDER,
            values: rest.values.into_iter().chain([limit]).collect(),
        },
        [one] => Statement {
            sql: select(base, &[&format!("{status} = ?"), &rest.sql]) + ORDER,
            values: [Value::Text(one.as_str().to_string())]
                .into_iter()
                .chain(rest.values)
                .chain([limit])
                .collect(),
        },
        many if narrow => {
            let names: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
            Statement {
                sql: select(
                    base,
                    &["+status IN (SELECT value FROM json_each(?))", &rest.sql],
                ) + ORDER,
                values: [Value::Text(to_json(&names))]
                    .into_iter()
                    .chain(rest.values)
                    .chain([limit])
                    .collect(),
            }
        }
        many => {
            let part = format!(
                "SELECT * FROM ({}{ORDER})",
                select(base, &["status = ?", &rest.sql])
            );
            let mut values = Vec::new();
            for s in many {
                values.push(Value::Text(s.as_str().to_string()));
                values.extend(rest.values.iter().cloned());
                values.push(limit.clone());
            }
            values.push(limit);
            Statement {
                sql: vec![part; many.len()].join(" UNION ALL ") + ORDER,
                values,
            }
        }
    }
}

/// How many ids start with `prefix`, counted no further than [`WIDE_PREFIX`].
fn prefix_matches(conn: &Connection, prefix: &str) -> Result<i64> {
    let count = match prefix_end(prefix) {
        Some(end) => conn
            .prepare_cached(sql("instance_list_prefix_count"))
            .map_err(db_err)?
            .query_row(rusqlite::params![prefix, end, WIDE_PREFIX], |r| r.get(0)),
        None => conn
            .prepare_cached(sql("instance_list_prefix_count_open"))
            .map_err(db_err)?
            .query_row(rusqlite::params![prefix, WIDE_PREFIX], |r| r.get(0)),
    };
    count.map_err(db_err)
}

/// The instances `f` selects, newest first.
pub(crate) fn list(conn: &Connection, f: &InstanceFilter) -> Result<Vec<InstanceRecord>> {
    // Every id starts with the empty prefix.
    let prefix = f.id_prefix.as_deref().filter(|p| !p.is_empty());
    let narrow = match prefix {
        Some(p) => prefix_matches(conn, p)? < WIDE_PREFIX,
        None => false,
    };
    let statement = statement(f, prefix, narrow);
    let mut stmt = conn.prepare_cached(&statement.sql).map_err(db_err)?;
    let rows = stmt
        .query_map(
            rusqlite::params_from_iter(statement.values),
            InstanceRow::read,
        )
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter().map(InstanceRow::into_record).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratchet_core::Timestamp;

    fn filter() -> InstanceFilter {
        InstanceFilter {
            statuses: vec![InstanceStatus::Running, InstanceStatus::Pending],
            name: Some("order".into()),
            after: Some((Timestamp(5), "o-9".into())),
            ..InstanceFilter::default()
        }
    }

    #[test]
    fn each_statement_binds_a_value_to_every_placeholder() {
        for (f, prefix, narrow) in [
            (InstanceFilter::default(), None, false),
            (filter(), None, false),
            (filter(), Some("o-"), true),
            (filter(), Some("o-"), false),
            (filter(), Some("\u{10FFFF}"), true),
        ] {
            let s = statement(&f, prefix, narrow);
            assert_eq!(s.sql.matches('?').count(), s.values.len(), "{}", s.sql);
        }
        let merged = statement(&filter(), None, false).sql;
        assert_eq!(merged.matches("UNION ALL").count(), 1, "{merged}");
        assert!(!merged.contains('+'), "{merged}");
        let narrow = statement(&filter(), Some("o-"), true).sql;
        assert!(
            narrow.contains("+status IN") && narrow.contains(" id >= ?"),
            "{narrow}"
        );
    }
}
