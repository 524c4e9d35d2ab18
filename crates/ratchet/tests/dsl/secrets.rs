//! Secrets (`use.secrets`) and named authentications (`use.authentications`): a call
//! authenticates with the worker's secret, read when the call is sent, so its value is in no
//! table afterwards; a secret the worker lacks is the DSL's authorization error, naming it.

use std::sync::Arc;

use ratchet::workflow::{CallConfig, Workflow};
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};
use crate::standin::{self, CLIENT_SECRET, PASSWORD, TOKEN};

const SECURED: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: secured, version: '1.0.0'}
use:
  secrets: [login, apiToken, sso, absent]
  authentications:
    store:
      basic:
        use: login
do:
  - withBasic:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication:
            use: store
      export:
        as: '${ {basic: .by} }'
  - withOidc:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication:
            oidc:
              use: sso
  - withTheSameToken:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication:
            oidc:
              use: sso
      export:
        as: '${ $context + {oidc: .by} }'
  - withDigest:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/digest
          authentication:
            digest:
              use: login
      export:
        as: '${ $context + {digest: .by} }'
  - withBearer:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication:
            bearer:
              use: apiToken
        output: response
  - done:
      set: '${ {basic: $context.basic, oidc: $context.oidc, digest: $context.digest, bearer: .content.by, sent: .request.headers} }'
"#;

const MISSING: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: missing, version: '1.0.0'}
use:
  secrets: [absent]
do:
  - call:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication:
            bearer:
              use: absent
"#;

fn calls(standin: &standin::Standin) -> CallConfig {
    let mut config = standin.calls();
    config.secrets.insert(
        "login".into(),
        json!({"username": "ratchet", "password": PASSWORD}),
    );
    config.secrets.insert("apiToken".into(), json!(TOKEN));
    config.secrets.insert(
        "sso".into(),
        json!({"authority": "https://standin.test", "client": {"id": "ratchet", "secret": CLIENT_SECRET}}),
    );
    config
}

/// Runs both workflows; returns what the store shows of them, as text.
async fn run(store: &Arc<dyn Store>) -> String {
    let standin = standin::start().await;
    let r = start(store, |b| {
        b.calls(calls(&standin))
            .workflow(Workflow::compile(SECURED).unwrap(), 1)
            .workflow(Workflow::compile(MISSING).unwrap(), 1)
    })
    .await;
    let c = r.client();
    let out: Value = c
        .start_with("calls/secured", json!({}), StartOptions::id("secured"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out["basic"], "basic");
    assert_eq!(out["bearer"], "bearer");
    // Digest: sent once without credentials, again with the response to the challenge.
    assert_eq!(out["digest"], "digest");
    let digest = standin.seen("/digest");
    assert_eq!(digest.len(), 2, "{digest:?}");
    assert!(!digest[0].headers.contains_key("authorization"));
    assert!(digest[1].headers["authorization"].starts_with("Digest username=\"ratchet\""));
    // OpenID Connect: the token endpoint discovered once, one token for both calls.
    assert_eq!(out["oidc"], "oauth2");
    assert_eq!(standin.tokens_issued(), 1);
    assert_eq!(standin.seen("/.well-known/openid-configuration").len(), 1);
    // The recorded request has no Authorization header.
    assert!(out["sent"].get("authorization").is_none(), "{out}");

    let missing = c
        .start_with("calls/missing", json!({}), StartOptions::id("missing"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(missing.status, InstanceStatus::Failed);
    let error = missing.error.unwrap().details.unwrap();
    assert_eq!(
        error["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/authorization"
    );
    assert_eq!(error["status"], 403);
    assert!(
        error["detail"].as_str().unwrap().contains("`absent`"),
        "{error}"
    );

    let mut seen = String::new();
    for id in ["secured", "missing"] {
        seen.push_str(&format!("{:?}", c.history(id).await.unwrap()));
        seen.push_str(&format!("{:?}", store.instance_get(id).await.unwrap()));
    }
    r.shutdown().await;
    seen
}

fn assert_no_secret(text: &str, where_: &str) {
    for secret in [PASSWORD, TOKEN, CLIENT_SECRET] {
        assert!(!text.contains(secret), "a secret in {where_}");
    }
}

/// Every table of the SQLite file, every column, read after the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_secrets_are_in_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.db");
    let store: Arc<dyn Store> = Arc::new(ratchet::SqliteStore::open(&path).await.unwrap());
    let seen = run(&store).await;
    assert_no_secret(&seen, "the API's view");
    drop(store);
    let db = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(tables.len() > 5, "{tables:?}");
    let mut cells = 0;
    for table in &tables {
        let mut statement = db.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let columns = statement.column_count();
        let mut rows = statement.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            for i in 0..columns {
                let text = match row.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        String::from_utf8_lossy(t).into_owned()
                    }
                    _ => continue,
                };
                cells += 1;
                assert_no_secret(&text, &format!("table {table}"));
            }
        }
    }
    assert!(cells > 10, "{cells}");
}

/// On PostgreSQL, what the API shows of the instances and their histories.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_secrets_are_not_recorded() {
    let Some(store) = crate::harness::postgres().await else {
        return;
    };
    let seen = run(&store).await;
    assert_no_secret(&seen, "the API's view");
}

const INLINE: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: inline-oauth2, version: '1.0.0'}
use:
  authentications:
    sso:
      oauth2:
        authority: https://standin.test
        endpoints:
          token: /oauth2/token
        grant: client_credentials
        client:
          id: ratchet
          secret: ${ $workflow.input.clientSecret }
        scopes: [pets]
do:
  - first:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication: {use: sso}
  - second:
      call: http
      with:
        method: get
        endpoint:
          uri: https://standin.test/secured
          authentication: {use: sso}
"#;

/// An OAuth2 policy written in the definition: a token fetched once and used for both
/// calls; a wrong client secret is the authorization error.
async fn an_oauth2_token_is_fetched_once_and_reused(store: Arc<dyn Store>) {
    let standin = standin::start().await;
    let r = start(&store, |b| {
        b.calls(standin.calls())
            .workflow(Workflow::compile(INLINE).unwrap(), 1)
    })
    .await;
    let c = r.client();
    let run = |id: &'static str, secret: &'static str| {
        let c = c.clone();
        async move {
            c.start_with(
                "calls/inline-oauth2",
                json!({"clientSecret": secret}),
                StartOptions::id(id),
            )
            .await
            .unwrap()
            .wait(WAIT)
            .await
            .unwrap()
        }
    };
    let ok = run("ok", CLIENT_SECRET).await;
    assert_eq!(ok.output, Some(json!({"by": "oauth2"})), "{ok:?}");
    assert_eq!(standin.tokens_issued(), 1);
    let wrong = run("wrong", "not-the-secret").await;
    assert_eq!(wrong.status, InstanceStatus::Failed);
    let error = wrong.error.unwrap().details.unwrap();
    assert_eq!(error["status"], 403, "{error}");
    assert!(
        error["detail"].as_str().unwrap().contains("answered 401"),
        "{error}"
    );
    r.shutdown().await;
}

crate::on_every_backend!(an_oauth2_token_is_fetched_once_and_reused);
