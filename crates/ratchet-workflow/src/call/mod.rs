//! Calls to the world from declarative workflows (`call: http`, `call: openapi`), run as
//! one built-in activity, [`CALL_ACTIVITY`]. The interpreter computes the whole request from
//! the definition and the task's input (deterministic, replayed), the activity sends it and
//! its answer is recorded in history once: a replay reads it, never calls again.

mod auth;
mod grpc;
mod http;
mod openapi;
mod plain;
pub(crate) mod uri;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ratchet_core::ActivityError;
use ratchet_runtime::{ActivityContext, Registry};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use http::is_method;

use crate::model::CallOutput;

/// The name of the activity that runs the calls of declarative workflows. Every Ratchet
/// process registers it (see [`register_calls`]), so any worker can run them.
pub const CALL_ACTIVITY: &str = "ratchet/call";

/// The largest response body (and OpenAPI document) a call reads: 10 MiB. A larger one fails
/// the call with a communication error.
pub const MAX_RESPONSE_BYTES: usize = 10 << 20;

/// Redirections a call follows at most, when its `redirect` is true.
pub const MAX_REDIRECTS: usize = 10;

/// How long a call may take when its task gives no `timeout`: 5 minutes.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS);

/// [`DEFAULT_CALL_TIMEOUT`] in milliseconds, as a call's input records it.
const DEFAULT_CALL_TIMEOUT_MS: u64 = 300_000;

/// OpenAPI documents kept parsed per process (by URI and definition revision).
const DOCUMENTS_KEPT: usize = 64;

/// How a process's calls reach the world. Its `Debug` shows the names of the secrets, never
/// their values.
#[derive(Clone, Default)]
pub struct CallConfig {
    /// Host names sent to a fixed address instead of being looked up (`--http-resolve
    /// host=address:port`, as curl's `--resolve`): for split-horizon set-ups and for tests.
    /// A URL that names a port explicitly keeps its own port.
    pub resolve: Vec<(String, SocketAddr)>,
    /// Root certificates (PEM) trusted besides the web's (`--http-ca`): a private CA.
    pub root_certificates: Vec<Vec<u8>>,
    /// The secrets a workflow's `use.secrets` may name, by name (`--secrets FILE`). A call
    /// reads them when it is sent; they never enter history, errors or logs.
    pub secrets: BTreeMap<String, Value>,
    /// Also read a secret `name` from the environment variable `RATCHET_SECRET_NAME` (its
    /// name in upper case, other characters than letters and digits as `_`), as JSON or as
    /// a string.
    pub secrets_from_env: bool,
    /// Where `call: grpc` reads a `.proto` given as a `file://` URI (`--grpc-protos DIR`):
    /// `file://app/greet.proto` is `DIR/app/greet.proto`, and nothing outside `DIR` is read.
    /// None: such a call fails, saying so.
    pub proto_dir: Option<std::path::PathBuf>,
}

/// Why a [`CallConfig`] cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CallConfigError {
    /// A `--http-resolve` that is not `host=address:port`.
    #[error("`{0}` is not host=address:port (such as api.example.com=10.0.0.7:443)")]
    Resolve(String),
    /// A root certificate that is not PEM.
    #[error("a root certificate is not a PEM certificate: {0}")]
    Certificate(String),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
}

impl std::fmt::Debug for CallConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallConfig")
            .field("resolve", &self.resolve)
            .field("root_certificates", &self.root_certificates.len())
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("secrets_from_env", &self.secrets_from_env)
            .field("proto_dir", &self.proto_dir)
            .finish()
    }
}

impl CallConfig {
    /// The secret `name`, from [`Self::secrets`] or the environment.
    pub(crate) fn secret(&self, name: &str) -> Option<Value> {
        if let Some(v) = self.secrets.get(name) {
            return Some(v.clone());
        }
        if !self.secrets_from_env {
            return None;
        }
        let var: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        let text = std::env::var(format!("RATCHET_SECRET_{var}")).ok()?;
        Some(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Reads one `host=address:port` of `--http-resolve`.
    ///
    /// # Errors
    ///
    /// [`CallConfigError::Resolve`] when it is not one.
    pub fn parse_resolve(spec: &str) -> Result<(String, SocketAddr), CallConfigError> {
        let bad = || CallConfigError::Resolve(spec.to_string());
        let (host, addr) = spec.split_once('=').ok_or_else(bad)?;
        let host = host.trim();
        if host.is_empty() || host.contains(['/', ':', ' ']) {
            return Err(bad());
        }
        let addr: SocketAddr = addr.trim().parse().map_err(|_| bad())?;
        Ok((host.to_ascii_lowercase(), addr))
    }
}

/// Registers [`CALL_ACTIVITY`] on `registry`, reaching the world as `config` says.
///
/// # Errors
///
/// [`CallConfigError`] when a certificate does not read or the client cannot be built.
pub fn register_calls(registry: &mut Registry, config: &CallConfig) -> Result<(), CallConfigError> {
    let caller = Arc::new(http::Caller::new(config)?);
    registry.activity(
        CALL_ACTIVITY,
        move |ctx: ActivityContext, input: CallInput| {
            let caller = caller.clone();
            async move { caller.call(&ctx, input).await }
        },
    );
    Ok(())
}

/// Credentials of a call, as the workflow computed them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Credentials {
    Basic {
        username: String,
        password: String,
    },
    Bearer {
        token: String,
    },
    /// HTTP Digest: the response to the service's challenge, computed when it answers 401.
    Digest {
        username: String,
        password: String,
    },
    /// A token from an OAuth2 client-credentials grant, sent as bearer.
    #[serde(rename = "oauth2")]
    OAuth2(Box<OAuth2>),
    /// The worker's secret of this name: `{username, password}` for basic and digest,
    /// `{token}` (or a string) for bearer, an OAuth2 policy for `oauth2` and `oidc`.
    Secret {
        scheme: String,
        secret: String,
    },
}

/// An OAuth2 client-credentials grant, as the workflow computed it (or a secret holds it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OAuth2 {
    /// Discover the token endpoint from the authority (OpenID Connect).
    #[serde(default)]
    pub(crate) oidc: bool,
    pub(crate) authority: String,
    /// The token endpoint, absolute or relative to the authority (`/oauth2/token`).
    #[serde(default)]
    pub(crate) token: Option<String>,
    pub(crate) client_id: String,
    #[serde(default)]
    pub(crate) client_secret: Option<String>,
    /// Send the client's credentials as basic authentication, not in the form.
    #[serde(default)]
    pub(crate) client_basic: bool,
    #[serde(default)]
    pub(crate) scopes: Vec<String>,
    #[serde(default)]
    pub(crate) audiences: Vec<String>,
}

/// What to call.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "call", rename_all = "camelCase")]
pub(crate) enum Target {
    /// A request written out whole.
    #[serde(rename_all = "camelCase")]
    Http {
        method: String,
        uri: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        query: BTreeMap<String, String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<Credentials>,
    },
    /// An operation of an OpenAPI (or Swagger 2.0) document.
    #[serde(rename_all = "camelCase")]
    Openapi {
        document: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        document_auth: Option<Credentials>,
        /// The definition's revision (its hash): a document is fetched once per revision.
        revision: String,
        operation_id: String,
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        parameters: serde_json::Map<String, Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth: Option<Credentials>,
    },
    /// A unary method of a gRPC service (`call: grpc`).
    Grpc(Box<GrpcTarget>),
}

/// A unary method of a gRPC service.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GrpcTarget {
    /// The `.proto`'s URI: `https://`, `http://`, or `file://` under the worker's
    /// [`CallConfig::proto_dir`].
    pub(crate) proto: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) proto_auth: Option<Credentials>,
    /// The definition's revision: a `.proto` is read once per revision.
    pub(crate) revision: String,
    /// `package.Service`.
    pub(crate) service: String,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) method: String,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub(crate) arguments: serde_json::Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) auth: Option<Credentials>,
}

/// The input of [`CALL_ACTIVITY`], recorded in history (and in the task's row). Fields at
/// their defaults are left out: a fan-out of calls writes each of them once per call, twice.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CallInput {
    pub(crate) target: Target,
    /// `content`, `response` or `raw`: `raw` gives the content base64-encoded.
    #[serde(default = "content", skip_serializing_if = "is_content")]
    pub(crate) output: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) redirect: bool,
    #[serde(
        default = "default_timeout_ms",
        skip_serializing_if = "is_default_timeout_ms"
    )]
    pub(crate) timeout_ms: u64,
    /// Sent as `Idempotency-Key` unless the request sets one: the same for every attempt of
    /// one call of the instance.
    pub(crate) idempotency_key: String,
}

/// A call's `output` when its task names none.
fn content() -> String {
    CallOutput::Content.as_str().to_string()
}

fn is_content(output: &str) -> bool {
    output == CallOutput::Content.as_str()
}

fn default_timeout_ms() -> u64 {
    DEFAULT_CALL_TIMEOUT_MS
}

fn is_default_timeout_ms(ms: &u64) -> bool {
    *ms == DEFAULT_CALL_TIMEOUT_MS
}

/// The error kinds the activity fails with: the interpreter raises the DSL's timeout error
/// for the first, its communication error for the other.
pub(crate) const TIMEOUT: &str = "Timeout";
pub(crate) const COMMUNICATION: &str = "Communication";
/// A secret the call names is missing or not credentials: the DSL's authorization error.
pub(crate) const AUTHORIZATION: &str = "Authorization";

fn communication(message: impl Into<String>) -> ActivityError {
    ActivityError::non_retryable(COMMUNICATION, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn get(uri: &str) -> Target {
        Target::Http {
            method: "GET".into(),
            uri: uri.into(),
            headers: BTreeMap::new(),
            query: BTreeMap::new(),
            body: None,
            auth: None,
        }
    }

    #[test]
    fn call_inputs_leave_out_their_defaults_and_read_back_whole() {
        let plain = CallInput {
            target: get("http://a/"),
            output: "content".into(),
            redirect: false,
            timeout_ms: 300_000,
            idempotency_key: "k".into(),
        };
        let written = serde_json::to_value(&plain).unwrap();
        assert_eq!(
            written,
            json!({"target": {"call": "http", "method": "GET", "uri": "http://a/"}, "idempotencyKey": "k"})
        );
        assert_eq!(serde_json::from_value::<CallInput>(written).unwrap(), plain);

        let other = CallInput {
            output: "response".into(),
            redirect: true,
            timeout_ms: 1_500,
            ..plain.clone()
        };
        let written = serde_json::to_value(&other).unwrap();
        assert_eq!(written["output"], "response");
        assert_eq!(written["redirect"], true);
        assert_eq!(written["timeoutMs"], 1_500);
        assert_eq!(serde_json::from_value::<CallInput>(written).unwrap(), other);

        // What history holds from before the defaults were left out still reads.
        let recorded = json!({
            "idempotencyKey": "k", "output": "content", "redirect": false,
            "target": {"call": "http", "method": "GET", "uri": "http://a/"}, "timeoutMs": 300000
        });
        assert_eq!(
            serde_json::from_value::<CallInput>(recorded).unwrap(),
            plain
        );
    }
}
