//! The web console: static files embedded in the binary, served at `/` (the page) and
//! `/console/*` (its scripts and styles). The console is a client of the public API like any
//! other: it holds no privilege, and asks for a token when the server does.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::problem::Problem;

/// The files of `console/`, compiled in.
#[derive(rust_embed::Embed)]
#[folder = "console/"]
struct Files;

/// The console's routes, outside the API's auth (the page itself holds no data).
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", axum::routing::get(|| async { file("index.html") }))
        .route(
            "/console/routes.js",
            axum::routing::get(|| async { routes_js() }),
        )
        .route(
            "/console/{*path}",
            axum::routing::get(|Path(path): Path<String>| async move { file(&path) }),
        )
}

/// The content type of a console file, by its extension.
fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// `routes.js`: the API's route table, written from `ratchet_api::routes::ROUTES`, so the
/// console calls each operation by its name and spells no path itself.
fn routes_js() -> Response {
    let table: serde_json::Map<String, serde_json::Value> = ratchet_api::routes::ROUTES
        .iter()
        .map(|r| {
            let method = r.method.as_str().to_ascii_uppercase();
            (r.operation.to_string(), serde_json::json!([method, r.path]))
        })
        .collect();
    let text = format!(
        "// The API's routes, by operation: written by the server from its own table.\n\
         export const ROUTES = {};\n",
        serde_json::Value::Object(table)
    );
    headers(text.into_bytes(), "routes.js")
}

fn file(path: &str) -> Response {
    let Some(found) = Files::get(path) else {
        return Problem::not_found(format!("the console has no file {path:?}")).into_response();
    };
    headers(found.data.into_owned(), path)
}

/// A console file's answer, with its type and the console's caching and security headers.
fn headers(body: Vec<u8>, path: &str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    // Revalidated on every load, so an upgraded server's console is seen at once; an
    // unchanged file costs a 304-sized answer at most.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
             frame-ancestors 'none'",
        ),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_console_calls_every_operation_it_names_by_the_apis_table() {
        let routes = routes_js();
        let body = axum::body::to_bytes(routes.into_body(), 1 << 20)
            .await
            .unwrap();
        let routes = String::from_utf8_lossy(&body).into_owned();
        assert!(
            routes.contains(r#""instances_show":["GET","/v1/instances/{id}"]"#),
            "{routes}"
        );
        // Every operation a console file names by a literal is in the table, and no file
        // spells an API path itself.
        for name in Files::iter() {
            let text = Files::get(&name).expect("listed");
            let text = String::from_utf8_lossy(&text.data).into_owned();
            for quote in ["read('", "call('", "pathOf('"] {
                for part in text.split(quote).skip(1) {
                    let op = part.split('\'').next().unwrap_or_default();
                    assert!(routes.contains(&format!("\"{op}\"")), "{name} names {op}");
                }
            }
            for line in text
                .lines()
                .filter(|l| l.contains("'/v1/") || l.contains("`/v1/"))
            {
                assert!(line.contains("curl"), "{name} spells a path: {line}");
            }
        }
    }

    #[test]
    fn every_file_the_page_loads_is_embedded() {
        let index = Files::get("index.html").expect("index.html");
        let index = String::from_utf8_lossy(&index.data).into_owned();
        for script in ["style.css", "theme.js", "app.js"] {
            assert!(index.contains(&format!("/console/{script}")), "{script}");
            assert!(Files::get(script).is_some(), "{script}");
        }
        // Each module's imports are embedded too.
        for name in Files::iter() {
            let text = Files::get(&name).expect("listed");
            let text = String::from_utf8_lossy(&text.data).into_owned();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let target = line
                    .rsplit_once("'./")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .map(|(file, _)| file)
                    .unwrap_or_else(|| panic!("{name}: an import not of ./file: {line}"));
                // routes.js is written by the server (see `routes_js`).
                assert!(
                    target == "routes.js" || Files::get(target).is_some(),
                    "{name} imports {target}"
                );
            }
        }
    }
}
