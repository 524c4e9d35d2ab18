//! Sending a call and reading its answer, within the limits: plain `http://` without
//! redirects on the worker's own connections (`plain.rs`), everything else through reqwest
//! over rustls, with the web's root certificates and any the operator adds.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use ratchet_core::ActivityError;
use ratchet_runtime::ActivityContext;
use serde_json::{json, Map, Value};

use super::auth::Tokens;
use super::openapi::Document;
use super::plain::{Failure, Plain, CONNECT_TIMEOUT};
use super::{
    communication, CallConfig, CallConfigError, CallInput, Credentials, Target, AUTHORIZATION,
    DOCUMENTS_KEPT, MAX_REDIRECTS, MAX_RESPONSE_BYTES, TIMEOUT,
};

/// Methods a call may use.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// True for an HTTP method, in any case.
pub(crate) fn is_method(m: &str) -> bool {
    METHODS.contains(&m.to_ascii_uppercase().as_str())
}

/// The request headers never written into a call's recorded output.
const SECRET_HEADERS: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// Sends calls: plain ones on its own connections, the others through one client that
/// follows redirections and one that does not (reqwest fixes the policy per client); and
/// the OpenAPI documents read so far.
pub(crate) struct Caller {
    follow: reqwest::Client,
    stay: reqwest::Client,
    documents: Kept<Document>,
    /// HTTP/2 from the first byte, for gRPC.
    grpc: reqwest::Client,
    /// The `.proto`s of `call: grpc` compiled so far, by URI and definition revision.
    protos: Kept<prost_reflect::DescriptorPool>,
    /// Where secrets come from.
    config: CallConfig,
    /// OAuth2 tokens, kept.
    tokens: Tokens,
    /// Plain `http://` calls without redirects, sent without reqwest; `None` when the
    /// environment names a proxy.
    plain: Option<Plain>,
}

/// The `User-Agent` of every call.
const USER_AGENT: &str = concat!("ratchet/", env!("CARGO_PKG_VERSION"));

fn client(
    config: &CallConfig,
    redirect: reqwest::redirect::Policy,
    http2_only: bool,
) -> Result<reqwest::Client, CallConfigError> {
    let mut builder = reqwest::Client::builder();
    if http2_only {
        builder = builder.http2_prior_knowledge();
    }
    let mut builder = builder
        .redirect(redirect)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(USER_AGENT);
    for (host, addr) in &config.resolve {
        builder = builder.resolve(host, *addr);
    }
    for pem in &config.root_certificates {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| CallConfigError::Certificate(e.to_string()))?;
        if certs.is_empty() {
            return Err(CallConfigError::Certificate("no certificate in it".into()));
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| CallConfigError::Client(e.to_string()))
}

impl Caller {
    pub(crate) fn new(config: &CallConfig) -> Result<Caller, CallConfigError> {
        let kept = NonZeroUsize::new(DOCUMENTS_KEPT).unwrap_or(NonZeroUsize::MIN);
        Ok(Caller {
            follow: client(
                config,
                reqwest::redirect::Policy::limited(MAX_REDIRECTS),
                false,
            )?,
            stay: client(config, reqwest::redirect::Policy::none(), false)?,
            documents: Kept::new(kept),
            grpc: client(config, reqwest::redirect::Policy::none(), true)?,
            protos: Kept::new(kept),
            config: config.clone(),
            tokens: Tokens::default(),
            plain: (!Plain::proxied()).then(|| Plain::new(&config.resolve)),
        })
    }

    /// Runs one call: its answer whatever its status (the interpreter decides what is an
    /// error, from what is recorded), or a communication or timeout error when nothing usable
    /// came back.
    pub(crate) async fn call(
        &self,
        _ctx: &ActivityContext,
        input: CallInput,
    ) -> Result<Value, ActivityError> {
        let timeout = Duration::from_millis(input.timeout_ms.max(1));
        let work = self.call_within(&input);
        match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(ActivityError::non_retryable(
                TIMEOUT,
                format!("the call took longer than its timeout of {timeout:?}"),
            )),
        }
    }

    async fn call_within(&self, input: &CallInput) -> Result<Value, ActivityError> {
        let client = if input.redirect {
            &self.follow
        } else {
            &self.stay
        };
        let request = match &input.target {
            Target::Grpc(target) => {
                let proto_auth = self
                    .tokens
                    .credentials(&self.config, &self.stay, target.proto_auth.as_ref())
                    .await?;
                let pool = self
                    .proto(client, &target.proto, proto_auth.as_ref(), &target.revision)
                    .await?;
                let auth = self
                    .tokens
                    .credentials(&self.config, &self.stay, target.auth.as_ref())
                    .await?;
                return super::grpc::call(
                    &self.grpc,
                    &pool,
                    target,
                    auth.as_ref(),
                    &input.idempotency_key,
                )
                .await;
            }
            Target::Http {
                method,
                uri,
                headers,
                query,
                body,
                auth,
            } => Request {
                method: method.to_ascii_uppercase(),
                uri: uri.clone(),
                headers: headers.clone(),
                query: query.clone(),
                body: body.clone(),
                auth: self
                    .tokens
                    .credentials(&self.config, &self.stay, auth.as_ref())
                    .await?,
            },
            Target::Openapi {
                document,
                document_auth,
                revision,
                operation_id,
                parameters,
                auth,
            } => {
                let document_auth = self
                    .tokens
                    .credentials(&self.config, &self.stay, document_auth.as_ref())
                    .await?;
                let doc = self
                    .document(client, document, document_auth.as_ref(), revision)
                    .await?;
                let mut request = doc
                    .request(operation_id, parameters)
                    .map_err(communication)?;
                request.auth = self
                    .tokens
                    .credentials(&self.config, &self.stay, auth.as_ref())
                    .await?;
                request
            }
        };
        send(
            client,
            self.plain.as_ref(),
            request,
            &input.idempotency_key,
            &input.output,
            input.redirect,
        )
        .await
    }

    /// An OpenAPI document, read once per URI and definition revision.
    async fn document(
        &self,
        client: &reqwest::Client,
        uri: &str,
        auth: Option<&Credentials>,
        revision: &str,
    ) -> Result<Arc<Document>, ActivityError> {
        let key = (uri.to_string(), revision.to_string());
        if let Some(doc) = self.documents.get(&key) {
            return Ok(doc);
        }
        let content = fetch(
            client,
            self.plain.as_ref(),
            uri,
            auth,
            "the OpenAPI document",
            "content",
        )
        .await?;
        let doc = Arc::new(
            Document::read(uri, &content)
                .map_err(|e| communication(format!("the OpenAPI document {uri}: {e}")))?,
        );
        self.documents.put(key, doc.clone());
        Ok(doc)
    }
}

impl Caller {
    /// A `.proto`, compiled once per URI and definition revision: fetched over HTTP(S), or
    /// read under the worker's `--grpc-protos` for `file://`.
    async fn proto(
        &self,
        client: &reqwest::Client,
        uri: &str,
        auth: Option<&Credentials>,
        revision: &str,
    ) -> Result<Arc<prost_reflect::DescriptorPool>, ActivityError> {
        let key = (uri.to_string(), revision.to_string());
        if let Some(pool) = self.protos.get(&key) {
            return Ok(pool);
        }
        let source = if uri.starts_with("file://") {
            super::grpc::read_file(self.config.proto_dir.as_deref(), uri)?
        } else {
            let content =
                fetch(client, self.plain.as_ref(), uri, auth, "the .proto", "raw").await?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(content.as_str().unwrap_or_default())
                .map_err(|e| communication(format!("the .proto {uri}: {e}")))?;
            if bytes.len() > super::grpc::MAX_PROTO_BYTES {
                return Err(communication(format!(
                    "the .proto {uri} is larger than {} bytes",
                    super::grpc::MAX_PROTO_BYTES
                )));
            }
            String::from_utf8(bytes)
                .map_err(|_| communication(format!("the .proto {uri} is not UTF-8 text")))?
        };
        let pool = super::grpc::compile(&super::grpc::file_name(uri), &source)
            .map_err(|e| communication(format!("{uri}: {e}")))?;
        let pool = Arc::new(pool);
        self.protos.put(key, pool.clone());
        Ok(pool)
    }
}

/// What a call reads once per URI and definition revision (OpenAPI documents, compiled
/// `.proto`s), the most recent kept.
struct Kept<T>(Mutex<lru::LruCache<(String, String), Arc<T>>>);

impl<T> Kept<T> {
    fn new(kept: NonZeroUsize) -> Self {
        Kept(Mutex::new(lru::LruCache::new(kept)))
    }

    fn get(&self, key: &(String, String)) -> Option<Arc<T>> {
        self.0.lock().ok().and_then(|mut k| k.get(key).cloned())
    }

    fn put(&self, key: (String, String), value: Arc<T>) {
        if let Ok(mut k) = self.0.lock() {
            k.put(key, value);
        }
    }
}

/// GETs what describes a call (`what`: an OpenAPI document, a `.proto`) at `uri`: its
/// content as `output` says (`content` decoded, `raw` base64), or a communication error when
/// it does not answer 2xx.
async fn fetch(
    client: &reqwest::Client,
    plain: Option<&Plain>,
    uri: &str,
    auth: Option<&Credentials>,
    what: &str,
    output: &str,
) -> Result<Value, ActivityError> {
    let request = Request {
        method: "GET".into(),
        uri: uri.to_string(),
        headers: BTreeMap::new(),
        query: BTreeMap::new(),
        body: None,
        auth: auth.cloned(),
    };
    let mut answer = send(client, plain, request, "", output, false).await?;
    let status = answer["statusCode"].as_u64().unwrap_or(0);
    if !(200..300).contains(&status) {
        return Err(communication(format!("{what} {uri} answered {status}")));
    }
    Ok(answer["content"].take())
}

/// `builder` with the call's credentials as its `Authorization` header; credentials not yet
/// resolved (a secret, an OAuth2 policy) are an error.
pub(super) fn authorized(
    builder: reqwest::RequestBuilder,
    auth: Option<&Credentials>,
) -> Result<reqwest::RequestBuilder, ActivityError> {
    match auth {
        Some(Credentials::Basic { username, password }) => {
            Ok(builder.basic_auth(username, Some(password)))
        }
        Some(Credentials::Bearer { token }) => Ok(builder.bearer_auth(token)),
        // Sent without credentials first: the service's challenge says how to answer.
        Some(Credentials::Digest { .. }) => Ok(builder),
        // Resolved before a request is made.
        Some(Credentials::Secret { .. } | Credentials::OAuth2(_)) => Err(
            ActivityError::non_retryable(AUTHORIZATION, "the call's credentials were not resolved"),
        ),
        None => Ok(builder),
    }
}

/// A request ready to send.
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) uri: String,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) query: BTreeMap<String, String>,
    pub(crate) body: Option<Value>,
    pub(crate) auth: Option<Credentials>,
}

/// Sends `request` and reads the answer, at most [`MAX_RESPONSE_BYTES`] of it: `{statusCode,
/// content}` for a success (2xx, or 3xx with `redirect`), and `{request, statusCode, headers,
/// content}` for a failure or with `output` `response`: history keeps what the workflow
/// uses, and a failed call's whole answer goes into its error.
async fn send(
    client: &reqwest::Client,
    plain: Option<&Plain>,
    request: Request,
    idempotency_key: &str,
    output: &str,
    redirect: bool,
) -> Result<Value, ActivityError> {
    let method = reqwest::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| communication(format!("`{}` is not an HTTP method", request.method)))?;
    let mut url = reqwest::Url::parse(&request.uri)
        .map_err(|e| communication(format!("`{}` is not a URL: {e}", request.uri)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(communication(format!(
            "`{}`: a call goes to http or https, not {}",
            request.uri,
            url.scheme()
        )));
    }
    if !request.query.is_empty() {
        url.query_pairs_mut().extend_pairs(&request.query);
    }
    let mut builder = client.request(method.clone(), url.clone());
    let mut has_key = false;
    let mut has_type = false;
    for (name, value) in &request.headers {
        has_key |= name.eq_ignore_ascii_case("idempotency-key");
        has_type |= name.eq_ignore_ascii_case("content-type");
        builder = builder.header(name.as_str(), value.as_str());
    }
    if !has_key && !idempotency_key.is_empty() {
        builder = builder.header("Idempotency-Key", idempotency_key);
    }
    builder = authorized(builder, request.auth.as_ref())?;
    match &request.body {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => {
            if !has_type {
                builder = builder.header("content-type", "text/plain; charset=utf-8");
            }
            builder = builder.body(text.clone());
        }
        Some(other) => {
            if !has_type {
                builder = builder.header("content-type", "application/json");
            }
            let bytes = serde_json::to_vec(other)
                .map_err(|e| communication(format!("the body does not serialize: {e}")))?;
            builder = builder.body(bytes);
        }
    }
    let sent = builder
        .build()
        .map_err(|e| communication(format!("{} {}: {e}", request.method, request.uri)))?;
    let sent_headers = sent.headers().clone();
    let sent_url = sent.url().clone();
    // Digest: the same request again, with the response to the challenge of a 401.
    let again = match &request.auth {
        Some(Credentials::Digest { .. }) => sent.try_clone(),
        _ => None,
    };
    let mut answer = exchange(client, plain, sent, &sent_url, redirect, &request.method).await?;
    if let (Some(mut again), Some(Credentials::Digest { username, password })) =
        (again, &request.auth)
    {
        if answer.status == 401 {
            if let Some(authorization) =
                digest_response(&answer.headers, &again, username, password)?
            {
                again
                    .headers_mut()
                    .insert(reqwest::header::AUTHORIZATION, authorization);
                answer =
                    exchange(client, plain, again, &sent_url, redirect, &request.method).await?;
            }
        }
    }
    let status = answer.status;
    let ok = if redirect { 200..400 } else { 200..300 };
    let whole = output == "response" || !ok.contains(&status);
    let headers = whole.then(|| headers_of(&answer.headers, false));
    let json_content = answer
        .headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    let body = answer.body;
    let content = if output == "raw" {
        Value::String(base64::engine::general_purpose::STANDARD.encode(&body))
    } else {
        decode(&body, json_content)
    };
    Ok(match headers {
        Some(headers) => json!({
            "request": {
                "method": method.as_str(),
                "uri": sent_url.as_str(),
                "headers": headers_of(&sent_headers, true),
            },
            "statusCode": status,
            "headers": headers,
            "content": content,
        }),
        None => json!({"statusCode": status, "content": content}),
    })
}

/// Sends `sent` (to `url`) on the worker's own connections when it is plain HTTP without
/// redirects, through reqwest otherwise, and reads the answer.
async fn exchange(
    client: &reqwest::Client,
    plain: Option<&Plain>,
    sent: reqwest::Request,
    url: &reqwest::Url,
    redirect: bool,
    method: &str,
) -> Result<Answer, ActivityError> {
    match plain {
        Some(plain) if Plain::serves(url, redirect) => plain
            .exchange(sent, USER_AGENT, MAX_RESPONSE_BYTES)
            .await
            .map_err(|failure| match failure {
                Failure::ConnectTimeout(address) => ActivityError::non_retryable(
                    TIMEOUT,
                    format!(
                        "{method} {url}: connecting to {address} took longer than {CONNECT_TIMEOUT:?}"
                    ),
                ),
                Failure::Io(what) => communication(format!("{method} {url}: {what}")),
                Failure::TooLarge => too_large(method, url),
            }),
        _ => through_reqwest(client, sent, method, url).await,
    }
}

/// The `Authorization` that answers the `Digest` challenge among a 401's
/// `WWW-Authenticate` headers, for `request`; `None` when the service offers no digest
/// challenge (the 401 is then the call's answer). A challenge that does not read is the
/// DSL's authorization error.
fn digest_response(
    headers: &reqwest::header::HeaderMap,
    request: &reqwest::Request,
    username: &str,
    password: &str,
) -> Result<Option<reqwest::header::HeaderValue>, ActivityError> {
    let refused = |why: String| ActivityError::non_retryable(AUTHORIZATION, why);
    let url = request.url();
    for value in headers.get_all(reqwest::header::WWW_AUTHENTICATE) {
        let Ok(text) = value.to_str() else { continue };
        for challenge in http_auth::parser::ChallengeParser::new(text) {
            let Ok(challenge) = challenge else { break };
            if !challenge.scheme.eq_ignore_ascii_case("digest") {
                continue;
            }
            let mut client = http_auth::DigestClient::try_from(&challenge)
                .map_err(|why| refused(format!("{url}: its digest challenge: {why}")))?;
            // The request-target as the request line writes it.
            let mut target = url.path().to_string();
            if let Some(query) = url.query() {
                target.push('?');
                target.push_str(query);
            }
            let body = request.body().and_then(reqwest::Body::as_bytes);
            let response = client
                .respond(&http_auth::PasswordParams {
                    username,
                    password,
                    uri: &target,
                    method: request.method().as_str(),
                    body: Some(body.unwrap_or_default()),
                })
                .map_err(|why| refused(format!("{url}: answering its digest challenge: {why}")))?;
            let header = reqwest::header::HeaderValue::from_str(&response)
                .map_err(|_| refused(format!("{url}: the digest response is not a header")))?;
            return Ok(Some(header));
        }
    }
    Ok(None)
}

/// An answer read whole.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) headers: reqwest::header::HeaderMap,
    pub(super) body: Vec<u8>,
}

/// Sends `sent` through reqwest (TLS, proxies, redirects) and reads the answer, at most
/// [`MAX_RESPONSE_BYTES`] of it.
async fn through_reqwest(
    client: &reqwest::Client,
    sent: reqwest::Request,
    method: &str,
    url: &reqwest::Url,
) -> Result<Answer, ActivityError> {
    let mut response = client.execute(sent).await.map_err(|e| {
        let what = if e.is_timeout() {
            TIMEOUT
        } else {
            super::COMMUNICATION
        };
        ActivityError::non_retryable(what, format!("{method} {url}: {}", error_chain(&e)))
    })?;
    if response
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(too_large(method, url));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        communication(format!(
            "{method} {url}: reading the answer: {}",
            error_chain(&e)
        ))
    })? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(too_large(method, url));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status: response.status().as_u16(),
        headers: std::mem::take(response.headers_mut()),
        body,
    })
}

fn too_large(method: &str, url: &reqwest::Url) -> ActivityError {
    communication(format!(
        "{method} {url}: the answer is larger than {MAX_RESPONSE_BYTES} bytes"
    ))
}

/// An error and its causes, which say what failed (connection refused, a bad certificate).
pub(super) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A body as the workflow sees it: JSON decoded when it says it is JSON (or reads as JSON),
/// text as a string, other bytes base64-encoded; nothing as null.
fn decode(body: &[u8], json_content: bool) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    if json_content {
        if let Ok(v) = serde_json::from_slice::<Value>(body) {
            return v;
        }
    }
    match std::str::from_utf8(body) {
        Ok(text) => Value::String(text.to_string()),
        Err(_) => Value::String(base64::engine::general_purpose::STANDARD.encode(body)),
    }
}

/// Headers as an object (repeated ones joined with `, `); credentials left out of a
/// request's.
fn headers_of(headers: &reqwest::header::HeaderMap, request: bool) -> Value {
    let mut out: Map<String, Value> = Map::new();
    for (name, value) in headers {
        if request && SECRET_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match out.get_mut(name.as_str()) {
            Some(Value::String(previous)) => {
                previous.push_str(", ");
                previous.push_str(&value);
            }
            _ => {
                out.insert(name.as_str().to_string(), Value::String(value));
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_decode_as_their_type_says() {
        assert_eq!(decode(b"{\"a\":1}", true), json!({"a": 1}));
        assert_eq!(decode(b"{\"a\":1}", false), json!("{\"a\":1}"));
        assert_eq!(decode(b"", true), Value::Null);
        assert_eq!(decode(&[0xff, 0x00], false), json!("/wA="));
    }

    #[test]
    fn methods_are_known_in_any_case() {
        assert!(is_method("get") && is_method("PATCH"));
        assert!(!is_method("FETCH"));
    }
}
