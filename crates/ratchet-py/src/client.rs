//! The client on the database: every operation of Ratchet's API (`ratchet_api`), answered in
//! process through `LocalApi` as a server answers it. One method, `call`, takes the
//! operation's name and its JSON; it returns an awaitable, and the work runs on the module's
//! tokio runtime with the GIL released.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use ratchet::Client;
use serde_json::Value;

use crate::convert::{parse, text};
use crate::error::{invalid, to_py};

/// A client on one store.
#[pyclass(module = "ratchet._ratchet", frozen)]
pub(crate) struct NativeClient {
    /// The API on a client: what `call` answers through.
    pub(crate) api: ratchet_api::LocalApi,
}

impl NativeClient {
    /// The native client on `client`.
    pub(crate) fn new(client: Client) -> Self {
        Self {
            api: ratchet_api::LocalApi::new(client),
        }
    }
}

/// Where a store is: a `postgres://` or `postgresql://` URL (in `schema` when given), else a
/// SQLite file: a `sqlite:` URL (`sqlite:app.db`, `sqlite:///var/lib/app.db`) or a path
/// (`app.db`, relative to the working directory, is created there when missing).
pub(crate) enum Location {
    Postgres(String, ratchet::PostgresConfig),
    Sqlite(String),
}

impl Location {
    /// Where `url` says the store is.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an empty location, a URL of any other scheme (`mysql://`, or
    /// `http://` where only the database will do), or what looks like a database URL
    /// without its scheme (`user:pw@host/db`); the message never shows a password.
    pub(crate) fn of(url: &str, schema: Option<String>) -> PyResult<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut config = ratchet::PostgresConfig::default();
            if let Some(schema) = schema {
                config.schema = schema;
            }
            return Ok(Self::Postgres(url.to_string(), config));
        }
        let path = match url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            Some(path) => path,
            None => {
                if let Some(scheme) = scheme(url) {
                    return Err(invalid(format!(
                        "url: {} is not a store: {scheme}:// is none of postgres://, \
                         postgresql:// (PostgreSQL), sqlite: or a file path (SQLite){}",
                        masked(url),
                        if scheme == "http" || scheme == "https" {
                            "; ratchet.connect() and ratchet.Worker() take a ratchet \
                             server's http(s):// URL, this needs the database"
                        } else {
                            ""
                        }
                    )));
                }
                if url
                    .split('/')
                    .next()
                    .is_some_and(|first| first.contains('@'))
                {
                    return Err(invalid(format!(
                        "url: {} looks like a database URL without its scheme (postgres://); \
                         a SQLite file path has no user or password",
                        masked(url)
                    )));
                }
                url
            }
        };
        if path.is_empty() {
            return Err(invalid(
                "url: empty: give a postgres:// URL or the path of a SQLite file",
            ));
        }
        Ok(Self::Sqlite(path.to_string()))
    }

    /// The store, created or upgraded as needed.
    pub(crate) async fn open(self) -> ratchet::Result<Arc<dyn ratchet::Store>> {
        Ok(match self {
            Self::Postgres(url, config) => {
                Arc::new(ratchet::PostgresStore::connect_with(&url, config).await?)
            }
            Self::Sqlite(path) => Arc::new(ratchet::SqliteStore::open(path).await?),
        })
    }
}

/// The scheme of `url` when it starts with one followed by `//` (RFC 3986: a letter, then
/// letters, digits, `+`, `-` or `.`).
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// `url` as it may be shown: the password of its user info replaced by `***` (however many
/// `@`, `:` or `/` it holds) and its query and fragment left out, since they may carry one
/// too (`?password=`).
fn masked(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (head, tail) = rest.split_at(end);
    let head = match head.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => head.to_string(),
    };
    let tail = if tail.is_empty() { "" } else { "?..." };
    format!("{scheme}{head}{tail}")
}

/// Opens the store at `url` (created or upgraded as needed): an awaitable of a client.
#[pyfunction]
#[pyo3(signature = (url, schema=None))]
pub(crate) fn connect(
    py: Python<'_>,
    url: String,
    schema: Option<String>,
) -> PyResult<Bound<'_, PyAny>> {
    let location = Location::of(&url, schema)?;
    future_into_py(py, async move {
        // A client that runs nothing here accepts any orchestration or task name: the
        // workers that run them may be anywhere.
        let store = location.open().await.map_err(to_py)?;
        Ok(NativeClient::new(Client::new(store)))
    })
}

#[pymethods]
impl NativeClient {
    /// Calls the API operation `operation` (its OpenAPI `operationId`) with the path's
    /// `segments`, the JSON `query` and `body`; answers the response as JSON, in the API's
    /// format (times RFC 3339), the same as a server answers it.
    #[pyo3(signature = (operation, segments, query=None, body=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        operation: String,
        segments: Vec<String>,
        query: Option<String>,
        body: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let json = |text: Option<String>, what: &str| -> PyResult<Value> {
            text.map_or(Ok(Value::Null), |t| parse(&t, what))
        };
        let call = ratchet_api::Call {
            segments,
            query: json(query, "query")?,
            body: json(body, "body")?,
        };
        let api = self.api.clone();
        future_into_py(py, async move {
            let answer = ratchet_api::dispatch(&api, &operation, &call)
                .await
                .map_err(crate::error::api_to_py)?;
            Ok(text(&answer))
        })
    }
}
