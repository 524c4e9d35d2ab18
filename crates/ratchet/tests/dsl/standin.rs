//! A local stand-in for the services the conformance kit calls (`petstore.swagger.io`,
//! `httpbin.org`), over HTTPS with a certificate of a test CA and over plain HTTP on the same
//! port, and a scripted endpoint for retries. It records every request it sees.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ratchet::workflow::CallConfig;
use serde_json::{json, Value};

/// What `/secured` accepts: basic `ratchet` with this password, this bearer token, or a
/// token `/oauth2/token` issued to client `ratchet` with this secret; `/digest`, digest
/// `ratchet` with this password.
pub const PASSWORD: &str = "pw-7c1e4b9d-never-recorded";
pub const TOKEN: &str = "tok-52aa19f0-never-recorded";
pub const CLIENT_SECRET: &str = "cs-0b3e77c2-never-recorded";

/// The host names the stand-in answers for.
pub const HOSTS: [&str; 3] = ["petstore.swagger.io", "httpbin.org", "standin.test"];

/// A request the stand-in saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HashMap<String, String>,
}

/// What `/script/{name}` answers, one entry per request in order; past the end, the last.
#[derive(Clone, Debug)]
pub enum Step {
    /// Answers this status with a small JSON body.
    Status(u16),
    /// Holds the request this long, then answers 200.
    Hang(Duration),
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    scripts: HashMap<String, (Vec<Step>, usize)>,
    /// Tokens `/oauth2/token` issued.
    issued: Vec<String>,
}

/// A running stand-in.
pub struct Standin {
    pub addr: SocketAddr,
    /// The test CA's certificate (PEM): what a worker must trust.
    pub ca_pem: String,
    state: Arc<Mutex<State>>,
}

impl Standin {
    /// How a worker reaches it: every host of [`HOSTS`] sent to it, its CA trusted.
    pub fn calls(&self) -> CallConfig {
        CallConfig {
            resolve: HOSTS.iter().map(|h| (h.to_string(), self.addr)).collect(),
            root_certificates: vec![self.ca_pem.clone().into_bytes()],
            ..CallConfig::default()
        }
    }

    /// Sets what `/script/{name}` answers.
    pub fn script(&self, name: &str, steps: Vec<Step>) {
        self.state
            .lock()
            .unwrap()
            .scripts
            .insert(name.to_string(), (steps, 0));
    }

    /// How many tokens `/oauth2/token` issued.
    pub fn tokens_issued(&self) -> usize {
        self.state.lock().unwrap().issued.len()
    }

    /// The requests seen so far whose path starts with `prefix`.
    pub fn seen(&self, prefix: &str) -> Vec<Seen> {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.path.starts_with(prefix))
            .cloned()
            .collect()
    }
}

/// Starts a stand-in on a free loopback port, for the life of the test process.
pub async fn start() -> Standin {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Ratchet test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(HOSTS.iter().map(|h| h.to_string()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&leaf_key, &ca, &ca_key)
            .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Mutex::new(State::default()));
    let shared = state.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            let state = shared.clone();
            tokio::spawn(async move {
                // TLS starts with a handshake record (0x16); anything else is plain HTTP.
                let mut first = [0_u8; 1];
                let tls = matches!(tcp.peek(&mut first).await, Ok(1)) && first[0] == 0x16;
                if tls {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(TokioIo::new(tls), state).await;
                    }
                } else {
                    serve(TokioIo::new(tcp), state).await;
                }
            });
        }
    });
    Standin {
        addr,
        ca_pem: ca.pem(),
        state,
    }
}

/// Answers the requests of one connection.
async fn serve<I>(io: I, state: Arc<Mutex<State>>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let state = state.clone();
        async move { Ok::<_, Infallible>(answer(&state, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(io, service)
        .await;
}

fn json_response(status: u16, body: Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn pet(id: u64, status: &str) -> Value {
    let names = ["Rex", "Milou", "Idefix"];
    json!({
        "id": id,
        "name": names[(id as usize) % names.len()],
        "status": status,
        "category": {"id": 1, "name": "dogs"},
        "photoUrls": [],
    })
}

async fn answer(state: &Mutex<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or_default().to_string();
    let headers: HashMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    let step = {
        let mut s = state.lock().unwrap();
        s.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            headers: headers.clone(),
        });
        path.strip_prefix("/script/").and_then(|name| {
            let (steps, next) = s.scripts.get_mut(name)?;
            let step = steps.get(*next).or(steps.last()).cloned();
            *next += 1;
            step
        })
    };
    if let Some(step) = step {
        return match step {
            Step::Status(code) => json_response(code, json!({"status": code})),
            Step::Hang(d) => {
                tokio::time::sleep(d).await;
                json_response(200, json!({"status": 200, "late": true}))
            }
        };
    }
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["v2", "swagger.json"]) => json_response(200, swagger()),
        ("GET", ["v2", "pet", "findByStatus"]) => {
            let status = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("status="))
                .unwrap_or("available");
            json_response(200, json!([pet(1, status), pet(2, status), pet(3, status)]))
        }
        ("GET", ["v2", "pet", id]) => match id.parse::<u64>() {
            Ok(id) if id < 1000 => json_response(200, pet(id, "available")),
            _ => json_response(
                404,
                json!({"code": 1, "type": "error", "message": "Pet not found"}),
            ),
        },
        ("GET", [".well-known", "openid-configuration"]) => json_response(
            200,
            json!({"issuer": "https://standin.test", "token_endpoint": "https://standin.test/oauth2/token"}),
        ),
        ("POST", ["oauth2", "token"]) => {
            let form: HashMap<&str, &str> = body
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .collect();
            let client_ok = form.get("client_id") == Some(&"ratchet")
                && form.get("client_secret") == Some(&CLIENT_SECRET);
            if form.get("grant_type") != Some(&"client_credentials") || !client_ok {
                return json_response(401, json!({"error": "invalid_client"}));
            }
            let mut s = state.lock().unwrap();
            let token = format!("issued-{}", s.issued.len());
            s.issued.push(token.clone());
            json_response(
                200,
                json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600}),
            )
        }
        ("GET", ["secured"]) => {
            let basic = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("ratchet:{PASSWORD}"))
            );
            let bearer = format!("Bearer {TOKEN}");
            let issued = state.lock().unwrap().issued.clone();
            match headers.get("authorization") {
                Some(a) if *a == basic => json_response(200, json!({"by": "basic"})),
                Some(a) if *a == bearer => json_response(200, json!({"by": "bearer"})),
                Some(a) if issued.iter().any(|t| *a == format!("Bearer {t}")) => {
                    json_response(200, json!({"by": "oauth2"}))
                }
                _ => json_response(401, json!({"authenticated": false})),
            }
        }
        // Digest (RFC 7616, SHA-256, qop auth) for user `ratchet` with [`PASSWORD`].
        (_, ["digest"]) => match headers.get("authorization") {
            Some(a) if digest_valid(a, &method) => json_response(200, json!({"by": "digest"})),
            _ => {
                let mut refused = json_response(401, json!({"authenticated": false}));
                refused.headers_mut().insert(
                    "www-authenticate",
                    format!(
                        "Basic realm=\"standin\", Digest realm=\"standin\", qop=\"auth\", \
                         algorithm=SHA-256, nonce=\"{DIGEST_NONCE}\", opaque=\"o-1\""
                    )
                    .parse()
                    .unwrap(),
                );
                refused
            }
        },
        ("GET", ["basic-auth", user, password]) => {
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            );
            if headers.get("authorization") == Some(&expected) {
                json_response(200, json!({"authenticated": true, "user": user}))
            } else {
                json_response(401, json!({"authenticated": false}))
            }
        }
        _ => json_response(404, json!({"message": "no such resource"})),
    }
}

/// The nonce of `/digest`'s challenges.
const DIGEST_NONCE: &str = "4f1e-standin-nonce";

/// True when `authorization` answers `/digest`'s challenge for `method`: user `ratchet`, its
/// password [`PASSWORD`], the challenge's realm, nonce and opaque, qop `auth`, SHA-256.
fn digest_valid(authorization: &str, method: &str) -> bool {
    use sha2::Digest as _;
    let Some(params) = authorization.strip_prefix("Digest ") else {
        return false;
    };
    // `key=value` or `key="value"`, comma-separated (no commas inside these values).
    let fields: HashMap<&str, &str> = params
        .split(',')
        .filter_map(|kv| kv.trim().split_once('='))
        .map(|(k, v)| (k, v.trim_matches('"')))
        .collect();
    let field = |k: &str| fields.get(k).copied().unwrap_or_default();
    let hash = |text: String| hex(&sha2::Sha256::digest(text.as_bytes()));
    let ha1 = hash(format!("ratchet:standin:{PASSWORD}"));
    let ha2 = hash(format!("{method}:{}", field("uri")));
    let expected = hash(format!(
        "{ha1}:{DIGEST_NONCE}:{}:{}:auth:{ha2}",
        field("nc"),
        field("cnonce")
    ));
    field("username") == "ratchet"
        && field("realm") == "standin"
        && field("nonce") == DIGEST_NONCE
        && field("opaque") == "o-1"
        && field("qop") == "auth"
        && field("algorithm") == "SHA-256"
        && !field("cnonce").is_empty()
        && field("response") == expected
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The part of the Swagger Petstore's document (Swagger 2.0) the kit's calls use.
fn swagger() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Swagger Petstore", "version": "1.0.7"},
        "host": "petstore.swagger.io",
        "basePath": "/v2",
        "schemes": ["https", "http"],
        "paths": {
            "/pet/findByStatus": {"get": {
                "operationId": "findPetsByStatus",
                "produces": ["application/json"],
                "parameters": [{"name": "status", "in": "query", "required": true,
                    "type": "array", "items": {"type": "string"}, "collectionFormat": "multi"}],
                "responses": {"200": {"description": "successful operation"}}
            }},
            "/pet/{petId}": {"get": {
                "operationId": "getPetById",
                "produces": ["application/json"],
                "parameters": [{"name": "petId", "in": "path", "required": true,
                    "type": "integer", "format": "int64"}],
                "responses": {"200": {"description": "successful operation"},
                    "404": {"description": "Pet not found"}}
            }}
        }
    })
}
