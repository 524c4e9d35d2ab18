//! A server that asks for no token, on a loopback address, answers this machine's own
//! clients only. A web page its operator visits could otherwise drive it: by DNS
//! rebinding (a name of the page's own resolved to 127.0.0.1, so the browser sends the
//! page's requests, with its `Host`, here) or by a cross-site request (a form or a `fetch`
//! the browser sends without reading the answer). So every request must name the server by
//! a loopback address or `localhost` with its port, and a change (any method but GET, HEAD
//! and OPTIONS) sent from a page must come from a page of that same origin: the console.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;
use crate::state::ServerState;

/// Refuses requests for another host, and changes sent from another origin, when the server
/// serves loopback without tokens ([`ServerState::local_only`]).
pub(crate) async fn check(
    State(state): State<ServerState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(port) = state.local_port else {
        return next.run(request).await;
    };
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if !host.is_some_and(|h| names_this_server(h, port, None)) {
        return forbidden(
            "forbidden-host",
            format!(
                "this server answers requests for 127.0.0.1:{port} or localhost:{port} only \
                 (it asks for no token, so it serves this machine's own clients)"
            ),
        );
    }
    let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
    if !reads.contains(request.method()) && !same_origin(&request, port) {
        return forbidden(
            "forbidden-origin",
            "a change sent by a page of another origin is refused (this server asks for no \
             token, so only its own pages may change anything)",
        );
    }
    next.run(request).await
}

fn forbidden(kind: &str, detail: impl Into<String>) -> Response {
    Problem::new(StatusCode::FORBIDDEN, kind, "Forbidden", detail).into_response()
}

/// Whether a change comes from this server's own pages, or from no page at all (a client
/// that is not a browser sends no `Origin` and no `Sec-Fetch-Site`).
fn same_origin(request: &Request, port: u16) -> bool {
    let headers = request.headers();
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    if matches!(site.as_deref(), Some("cross-site" | "same-site")) {
        return false;
    }
    match headers.get(header::ORIGIN) {
        None => true,
        Some(origin) => origin.to_str().ok().is_some_and(|origin| {
            let (default_port, rest) = if let Some(rest) = origin.strip_prefix("http://") {
                (80, rest)
            } else if let Some(rest) = origin.strip_prefix("https://") {
                (443, rest)
            } else {
                // `null` (a sandboxed page, a file) and anything else.
                return false;
            };
            names_this_server(rest, port, Some(default_port))
        }),
    }
}

/// Whether `host` (`name[:port]`, an IPv6 address in brackets) is a loopback address or
/// `localhost` with `port`. Without a port it means the scheme's: `default_port` when known,
/// else 80 or 443.
fn names_this_server(host: &str, port: u16, default_port: Option<u16>) -> bool {
    let (name, given) = match host.rsplit_once(':') {
        // An IPv6 address without brackets has colons but no port.
        Some((name, p)) if !name.contains(':') || name.ends_with(']') => (name, Some(p)),
        _ => (host, None),
    };
    let port_matches = match given {
        Some(p) => p.parse::<u16>() == Ok(port),
        None => match default_port {
            Some(d) => d == port,
            None => port == 80 || port == 443,
        },
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let local = name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    port_matches && local
}

#[cfg(test)]
mod tests {
    use super::names_this_server;

    #[test]
    fn only_loopback_names_with_the_port_name_this_server() {
        for good in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
            "127.9.9.9:8080",
        ] {
            assert!(names_this_server(good, 8080, None), "{good}");
        }
        for bad in [
            "evil.example.com:8080",
            "evil.example.com",
            "localhost",
            "localhost:8081",
            "localhost.evil.example.com:8080",
            "[::2]:8080",
            "0.0.0.0:8080",
            "127.0.0.1:8080:8080",
            "::1",
            "",
        ] {
            assert!(!names_this_server(bad, 8080, None), "{bad}");
        }
        assert!(names_this_server("localhost", 80, None));
        assert!(names_this_server("127.0.0.1", 443, Some(443)));
        assert!(!names_this_server("127.0.0.1", 443, Some(80)));
    }
}
