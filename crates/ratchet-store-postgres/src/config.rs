use std::time::Duration;

use ratchet_store::{Result, StoreError};

/// How a [`crate::PostgresStore`] connects and behaves. Every field has a default; see
/// [`PostgresConfig::default`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresConfig {
    /// The schema holding Ratchet's tables and functions (default `ratchet`). Several
    /// installations, or tests, can share one database, each in its own schema. Lower-case
    /// letters, digits and `_`, starting with a letter or `_`, at most 48 bytes.
    pub schema: String,
    /// Connections in the pool (default 8). Concurrent calls pipeline on these; a large pool
    /// buys little.
    pub pool_size: usize,
    /// Listen for and send notifications (default true): other processes wake at once when work
    /// is ready, clients learn at once that an instance finished. Off: polling only, for
    /// PgBouncer in transaction mode.
    pub notify: bool,
    /// Prepare each statement once per connection (default true). Off: every statement is sent
    /// unnamed with its types, still one round trip, for PgBouncer in transaction mode.
    pub prepared_statements: bool,
    /// Create or upgrade the schema on connect (default true).
    pub migrate: bool,
    /// How long to wait for a connection before failing a call (default 10 s).
    pub connect_timeout: Duration,
    /// How long a call may take before it fails (default 30 s), so that a server that stops
    /// answering cannot stall the runtime; the statement is then cancelled on the server. A
    /// call that timed out may still have committed: the runtime's fences make that safe.
    pub call_timeout: Duration,
    /// The server ends a statement that runs longer (`statement_timeout`; default 30 s).
    /// `None` leaves the server's setting.
    pub statement_timeout: Option<Duration>,
    /// The server ends a statement that waits longer for a lock (`lock_timeout`; default
    /// 10 s): a table locked by someone else fails the call, which the runtime retries,
    /// instead of holding one of the pool's connections.
    pub lock_timeout: Option<Duration>,
    /// The server closes a session idle this long inside a transaction
    /// (`idle_in_transaction_session_timeout`; default 60 s), so that a transaction left open
    /// cannot hold back vacuum.
    pub idle_in_transaction_timeout: Option<Duration>,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        Self {
            schema: "ratchet".into(),
            pool_size: 8,
            notify: true,
            prepared_statements: true,
            migrate: true,
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(30),
            statement_timeout: Some(Duration::from_secs(30)),
            lock_timeout: Some(Duration::from_secs(10)),
            idle_in_transaction_timeout: Some(Duration::from_secs(60)),
        }
    }
}

impl PostgresConfig {
    /// Polling only and no prepared statements: what works behind PgBouncer in transaction
    /// mode, which keeps no session state between transactions.
    ///
    /// PgBouncer refuses the startup options that carry the session timeouts, so they are left
    /// to the server's or the role's settings (`ALTER ROLE ... SET statement_timeout = ...`;
    /// see docs/operations.md).
    pub fn pgbouncer(mut self) -> Self {
        self.notify = false;
        self.prepared_statements = false;
        self.statement_timeout = None;
        self.lock_timeout = None;
        self.idle_in_transaction_timeout = None;
        self
    }

    /// The session timeouts as startup options (`-c name=ms ...`), empty when none is set.
    pub(crate) fn session_options(&self) -> String {
        [
            ("statement_timeout", self.statement_timeout),
            ("lock_timeout", self.lock_timeout),
            (
                "idle_in_transaction_session_timeout",
                self.idle_in_transaction_timeout,
            ),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some(format!("-c {name}={}", value?.as_millis())))
        .collect::<Vec<_>>()
        .join(" ")
    }

    /// Checks the values.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] naming the bad field.
    pub fn validate(&self) -> Result<()> {
        let s = self.schema.as_bytes();
        let valid_schema = !s.is_empty()
            && s.len() <= 48
            && (s[0].is_ascii_lowercase() || s[0] == b'_')
            && s.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_');
        if !valid_schema {
            return Err(StoreError::Invalid(format!(
                "schema \"{}\": use 1 to 48 lower-case letters, digits or _, not starting with a digit",
                self.schema
            )));
        }
        if RESERVED.binary_search(&self.schema.as_str()).is_ok() {
            return Err(StoreError::Invalid(format!(
                "schema \"{}\": a word PostgreSQL reserves cannot name a schema unquoted; choose another",
                self.schema
            )));
        }
        if self.pool_size == 0 {
            return Err(StoreError::Invalid("pool_size must be at least 1".into()));
        }
        if self.connect_timeout.is_zero() || self.call_timeout.is_zero() {
            return Err(StoreError::Invalid(
                "connect_timeout and call_timeout must be positive".into(),
            ));
        }
        Ok(())
    }
}

/// PostgreSQL's reserved words and those that cannot name a schema unquoted (categories R and
/// T of `pg_get_keywords()`), sorted.
const RESERVED: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "binary",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "false",
    "fetch",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "group",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "intersect",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "natural",
    "not",
    "notnull",
    "null",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "outer",
    "overlaps",
    "placing",
    "primary",
    "references",
    "returning",
    "right",
    "select",
    "session_user",
    "similar",
    "some",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "to",
    "trailing",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_words_are_sorted_for_binary_search() {
        assert!(RESERVED.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn schema_names_are_checked() {
        let with = |schema: &str| PostgresConfig {
            schema: schema.into(),
            ..PostgresConfig::default()
        };
        assert!(with("ratchet").validate().is_ok());
        assert!(with("_t_1").validate().is_ok());
        for bad in [
            "",
            "1abc",
            "Ratchet",
            "a-b",
            "a.b",
            "x\"; drop table y; --",
            "select",
            "user",
            "table",
            &"a".repeat(49),
        ] {
            assert!(
                matches!(with(bad).validate(), Err(StoreError::Invalid(_))),
                "{bad} accepted"
            );
        }
        assert!(PostgresConfig {
            pool_size: 0,
            ..PostgresConfig::default()
        }
        .validate()
        .is_err());
    }
}
