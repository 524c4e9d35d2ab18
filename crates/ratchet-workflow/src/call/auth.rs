//! Credentials as a call sends them: a worker's secrets read when the call is sent, and
//! OAuth2 client-credentials tokens, fetched once and kept until shortly before they expire.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ratchet_core::ActivityError;
use serde_json::Value;

use super::{CallConfig, Credentials, OAuth2, AUTHORIZATION};

/// Tokens kept per process, at most (the oldest are forgotten first when full).
const TOKENS_KEPT: usize = 1024;

/// The largest answer a token endpoint (or an OpenID Connect discovery document) may give.
const MAX_TOKEN_ANSWER: usize = 1 << 20;

/// How long a token without `expires_in` is kept.
const DEFAULT_TOKEN_LIFE: Duration = Duration::from_secs(300);

fn refused(why: String) -> ActivityError {
    ActivityError::non_retryable(AUTHORIZATION, why)
}

/// A process's tokens and discovered token endpoints.
#[derive(Default)]
pub(crate) struct Tokens {
    tokens: Mutex<HashMap<OAuth2, (String, Instant)>>,
    endpoints: Mutex<HashMap<String, String>>,
}

impl Tokens {
    /// The credentials to send for `auth`: basic or bearer, secrets read and tokens fetched.
    /// What is missing, malformed or refused is the DSL's authorization error, which names a
    /// secret, never its value.
    pub(crate) async fn credentials(
        &self,
        config: &CallConfig,
        client: &reqwest::Client,
        auth: Option<&Credentials>,
    ) -> Result<Option<Credentials>, ActivityError> {
        let policy = match auth {
            None => return Ok(None),
            Some(Credentials::OAuth2(p)) => (**p).clone(),
            Some(Credentials::Secret { scheme, secret }) => {
                let refused_secret = |why: &str| refused(format!("the secret `{secret}` {why}"));
                let value = config
                    .secret(secret)
                    .ok_or_else(|| refused_secret("is not one of this worker's secrets"))?;
                let field = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
                match scheme.as_str() {
                    "bearer" => {
                        let token = value
                            .as_str()
                            .map(str::to_string)
                            .or_else(|| field("token"))
                            .ok_or_else(|| refused_secret("has no `token`"))?;
                        return Ok(Some(Credentials::Bearer { token }));
                    }
                    "basic" | "digest" => {
                        return match (field("username"), field("password")) {
                            (Some(username), Some(password)) if scheme == "basic" => {
                                Ok(Some(Credentials::Basic { username, password }))
                            }
                            (Some(username), Some(password)) => {
                                Ok(Some(Credentials::Digest { username, password }))
                            }
                            _ => Err(refused_secret("has no `username` and `password`")),
                        }
                    }
                    "oauth2" | "oidc" => policy_of(&value, scheme == "oidc").ok_or_else(|| {
                        refused_secret("is not an OAuth2 policy (`authority`, `client.id`)")
                    })?,
                    other => return Err(refused_secret(&format!("is for `{other}`"))),
                }
            }
            Some(other) => return Ok(Some(other.clone())),
        };
        let token = self.token(client, &policy).await?;
        Ok(Some(Credentials::Bearer { token }))
    }

    /// A token for `policy`: the one kept, or a new one from its token endpoint.
    async fn token(
        &self,
        client: &reqwest::Client,
        policy: &OAuth2,
    ) -> Result<String, ActivityError> {
        if let Some((token, until)) = self.tokens.lock().ok().and_then(|t| t.get(policy).cloned()) {
            if Instant::now() < until {
                return Ok(token);
            }
        }
        let url = self.token_url(client, policy).await?;
        let mut form: Vec<(&str, String)> = vec![("grant_type", "client_credentials".into())];
        if !policy.scopes.is_empty() {
            form.push(("scope", policy.scopes.join(" ")));
        }
        for audience in &policy.audiences {
            form.push(("audience", audience.clone()));
        }
        let mut request = client.post(&url);
        if policy.client_basic {
            request = request.basic_auth(&policy.client_id, policy.client_secret.as_deref());
        } else {
            form.push(("client_id", policy.client_id.clone()));
            if let Some(secret) = &policy.client_secret {
                form.push(("client_secret", secret.clone()));
            }
        }
        let answer = read_json(request.form(&form), &url).await?;
        let token = answer
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or_else(|| refused(format!("the token endpoint {url} gave no access_token")))?
            .to_string();
        let life = answer
            .get("expires_in")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_TOKEN_LIFE, Duration::from_secs);
        // Renewed a little before it expires: a tenth of its life, at most 30 s.
        let until = Instant::now() + life - (life / 10).min(Duration::from_secs(30));
        if let Ok(mut tokens) = self.tokens.lock() {
            if tokens.len() >= TOKENS_KEPT {
                tokens.clear();
            }
            tokens.insert(policy.clone(), (token.clone(), until));
        }
        Ok(token)
    }

    /// The token endpoint: given (absolute, or relative to the authority), `/oauth2/token` on
    /// the authority, or for OpenID Connect the one its discovery document names (read once
    /// per authority).
    async fn token_url(
        &self,
        client: &reqwest::Client,
        policy: &OAuth2,
    ) -> Result<String, ActivityError> {
        let authority = policy.authority.trim_end_matches('/');
        if !policy.oidc {
            let path = policy.token.as_deref().unwrap_or("/oauth2/token");
            return Ok(
                if path.starts_with("http://") || path.starts_with("https://") {
                    path.to_string()
                } else {
                    format!("{authority}/{}", path.trim_start_matches('/'))
                },
            );
        }
        if let Some(url) = self
            .endpoints
            .lock()
            .ok()
            .and_then(|e| e.get(authority).cloned())
        {
            return Ok(url);
        }
        let discovery = format!("{authority}/.well-known/openid-configuration");
        let document = read_json(client.get(&discovery), &discovery).await?;
        let url = document
            .get("token_endpoint")
            .and_then(Value::as_str)
            .ok_or_else(|| refused(format!("{discovery} names no token_endpoint")))?
            .to_string();
        if let Ok(mut endpoints) = self.endpoints.lock() {
            if endpoints.len() >= TOKENS_KEPT {
                endpoints.clear();
            }
            endpoints.insert(authority.to_string(), url.clone());
        }
        Ok(url)
    }
}

/// Sends `request` and reads a JSON answer of at most [`MAX_TOKEN_ANSWER`] bytes; anything
/// else is the authorization error.
async fn read_json(request: reqwest::RequestBuilder, url: &str) -> Result<Value, ActivityError> {
    let response = request
        .send()
        .await
        .map_err(|e| refused(format!("{url}: {e}")))?;
    let status = response.status();
    if response
        .content_length()
        .is_some_and(|n| n > MAX_TOKEN_ANSWER as u64)
    {
        return Err(refused(format!("{url}: the answer is too large")));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| refused(format!("{url}: {e}")))?;
    if !status.is_success() {
        return Err(refused(format!("{url} answered {}", status.as_u16())));
    }
    if body.len() > MAX_TOKEN_ANSWER {
        return Err(refused(format!("{url}: the answer is too large")));
    }
    serde_json::from_slice(&body).map_err(|_| refused(format!("{url}: the answer is not JSON")))
}

/// An OAuth2 policy kept in a secret, written as in a definition: `{authority, endpoints:
/// {token}, client: {id, secret, authentication}, scopes, audiences}`.
fn policy_of(value: &Value, oidc: bool) -> Option<OAuth2> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    let list = |key: &str| -> Vec<String> {
        value
            .get(key)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let client = value.get("client")?;
    Some(OAuth2 {
        oidc,
        authority: text(value.get("authority"))?,
        token: text(value.get("endpoints").and_then(|e| e.get("token"))),
        client_id: text(client.get("id"))?,
        client_secret: text(client.get("secret")),
        client_basic: text(client.get("authentication")).as_deref() == Some("client_secret_basic"),
        scopes: list("scopes"),
        audiences: list("audiences"),
    })
}
