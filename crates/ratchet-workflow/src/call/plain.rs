//! Plain `http://` calls that follow no redirection, over HTTP/1.1 with hyper's connection
//! API, each exchange driven in the call's own task.
//!
//! A call through reqwest crosses its redirect layer (which parses the URL again), its pool's
//! bookkeeping and a task per connection that the call's task waits on in each direction: in
//! `perf`, about a third of a worker's CPU on a fan-out of calls. Here the call writes the
//! request and reads the answer itself, on a connection it takes from a small pool of idle
//! ones. TLS, proxies and redirects stay with reqwest (see [`Plain::serves`]).

use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Body as _;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::http::{error_chain, Answer};

/// How long a connection may wait for its TCP handshake (reqwest's setting too).
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an idle connection is kept for the next call to its host.
const IDLE_FOR: Duration = Duration::from_secs(90);

/// Idle connections kept at most, all hosts together: more are closed. Bounds the sockets a
/// worker holds however many hosts its workflows call.
const MAX_IDLE: usize = 1024;

type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>;

/// One HTTP/1.1 connection: the handle that sends on it and its I/O, done only while a call
/// uses it.
struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    io: Io,
}

/// The future that does a connection's I/O, dropped when it ends: the requests still queued
/// on it then come back unsent, and the connection is never kept.
struct Io {
    driver: Option<Driver>,
}

impl Io {
    /// True when the connection has ended, the service's close seen without waiting (an
    /// idle connection's I/O is done only when a call takes it).
    fn ended(&mut self) -> bool {
        let Some(driver) = self.driver.as_mut() else {
            return true;
        };
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if driver.as_mut().poll(&mut cx).is_ready() {
            self.driver = None;
        }
        self.driver.is_none()
    }
}

/// Why an exchange gave no answer.
#[derive(Debug)]
pub(super) enum Failure {
    /// Connecting took longer than [`CONNECT_TIMEOUT`].
    ConnectTimeout(SocketAddr),
    /// Connecting, sending or reading failed; what failed, with its causes.
    Io(String),
    /// The answer is larger than the limit.
    TooLarge,
}

/// Sends plain `http://` requests on connections of its own.
pub(super) struct Plain {
    /// `--http-resolve`: host names sent to a fixed address.
    resolve: HashMap<String, SocketAddr>,
    /// Idle connections by host and port, the most recently used last.
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    by_host: HashMap<(String, u16), Vec<(Conn, Instant)>>,
    count: usize,
    /// When connections past their time were last closed.
    swept: Option<Instant>,
}

impl Plain {
    /// A transport for plain calls, sending `resolve`'s host names to their fixed addresses.
    pub(super) fn new(resolve: &[(String, SocketAddr)]) -> Plain {
        Plain {
            resolve: resolve.iter().cloned().collect(),
            idle: Mutex::new(Idle::default()),
        }
    }

    /// True when the environment names a proxy for plain HTTP (reqwest honours `HTTP_PROXY`
    /// and `ALL_PROXY`): then every call goes through reqwest.
    pub(super) fn proxied() -> bool {
        ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|p| !p.is_empty()))
    }

    /// True when this transport sends `url`'s request: plain `http`, no redirection to
    /// follow.
    pub(super) fn serves(url: &reqwest::Url, redirect: bool) -> bool {
        url.scheme() == "http" && !redirect && url.host().is_some()
    }

    /// Sends `request` (built by reqwest's builder, so that both transports send the same
    /// headers) and reads its answer, at most `limit` bytes of body.
    pub(super) async fn exchange(
        &self,
        mut request: reqwest::Request,
        user_agent: &str,
        limit: usize,
    ) -> Result<Answer, Failure> {
        let sent_headers = std::mem::take(request.headers_mut());
        let url = request.url();
        let written_host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let mut target = url.path().to_string();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let authority = match url.port() {
            Some(p) => format!("{written_host}:{p}"),
            None => written_host.to_string(),
        };
        let mut builder = http::Request::builder()
            .method(request.method().clone())
            .uri(if target.is_empty() { "/" } else { &target });
        if let Some(headers) = builder.headers_mut() {
            *headers = sent_headers;
            // The host by its name (a request that sets its own keeps it, as with reqwest).
            if !headers.contains_key(http::header::HOST) {
                let host = http::HeaderValue::from_str(&authority)
                    .map_err(|e| Failure::Io(format!("the host `{authority}`: {e}")))?;
                headers.insert(http::header::HOST, host);
            }
            if !headers.contains_key(http::header::USER_AGENT) {
                if let Ok(v) = http::HeaderValue::from_str(user_agent) {
                    headers.insert(http::header::USER_AGENT, v);
                }
            }
            if !headers.contains_key(http::header::ACCEPT) {
                headers.insert(http::header::ACCEPT, http::HeaderValue::from_static("*/*"));
            }
        }
        let body = match request.body() {
            None => Bytes::new(),
            Some(body) => body.as_bytes().map(Bytes::copy_from_slice).ok_or_else(|| {
                Failure::Io("a streamed body is not sent on a plain connection".into())
            })?,
        };
        let mut message = builder
            .body(Full::new(body))
            .map_err(|e| Failure::Io(format!("the request does not build: {e}")))?;
        let key = (written_host.to_ascii_lowercase(), port);

        // An idle connection the server closed meanwhile refuses the request unsent (or is
        // seen closed before it): it goes out on the next idle one, or on a new one. A new
        // connection that refuses it is the failure.
        let (mut conn, response) = loop {
            let (mut conn, reused) = match self.take(&key) {
                Some(conn) => (conn, true),
                None => (self.connect(&key, url.port().is_some()).await?, false),
            };
            match driven(&mut conn.io, conn.sender.ready()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) if reused => continue,
                Ok(Err(e)) => return Err(Failure::Io(error_chain(&e))),
                Err(e) => return Err(e),
            }
            let sent = conn.sender.try_send_request(message);
            match driven(&mut conn.io, sent).await? {
                Ok(response) => break (conn, response),
                Err(mut e) => match e.take_message() {
                    Some(back) if reused => message = back,
                    _ => return Err(Failure::Io(error_chain(e.error()))),
                },
            }
        };

        let status = response.status().as_u16();
        let (parts, mut incoming) = response.into_parts();
        if incoming.size_hint().lower() > limit as u64 {
            return Err(Failure::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(frame) = driven(&mut conn.io, incoming.frame()).await? {
            let frame = frame
                .map_err(|e| Failure::Io(format!("reading the answer: {}", error_chain(&e))))?;
            if let Ok(data) = frame.into_data() {
                if body.len() + data.len() > limit {
                    return Err(Failure::TooLarge);
                }
                body.extend_from_slice(&data);
            }
        }
        self.give_back(key, conn);
        Ok(Answer {
            status,
            headers: parts.headers,
            body,
        })
    }

    /// A new connection to `key`'s host: its IP, its fixed address, or what DNS gives, the
    /// first that accepts within [`CONNECT_TIMEOUT`]. `port_named`: the URL gives the port.
    async fn connect(&self, key: &(String, u16), port_named: bool) -> Result<Conn, Failure> {
        let (host, port) = (key.0.as_str(), key.1);
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<SocketAddr> = match (literal.parse::<IpAddr>(), self.resolve.get(host)) {
            (Ok(ip), _) => vec![SocketAddr::new(ip, port)],
            // The fixed address's port, unless the URL names one (as reqwest does).
            (Err(_), Some(fixed)) => {
                let mut fixed = *fixed;
                if port_named || fixed.port() == 0 {
                    fixed.set_port(port);
                }
                vec![fixed]
            }
            (Err(_), None) => tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| Failure::Io(format!("looking up {host}: {e}")))?
                .collect(),
        };
        let deadline = tokio::time::Instant::now() + CONNECT_TIMEOUT;
        let mut last = Failure::Io(format!("{host} has no address"));
        for address in addresses {
            match tokio::time::timeout_at(deadline, TcpStream::connect(address)).await {
                Err(_) => return Err(Failure::ConnectTimeout(address)),
                Ok(Err(e)) => last = Failure::Io(format!("connecting to {address}: {e}")),
                Ok(Ok(tcp)) => {
                    // Requests go out at once (reqwest's default too).
                    let _ = tcp.set_nodelay(true);
                    let (sender, driver) = http1::handshake(TokioIo::new(tcp))
                        .await
                        .map_err(|e| Failure::Io(error_chain(&e)))?;
                    return Ok(Conn {
                        sender,
                        io: Io {
                            driver: Some(Box::pin(driver)),
                        },
                    });
                }
            }
        }
        Err(last)
    }

    /// The most recently used idle connection to `key`, if one is young enough.
    fn take(&self, key: &(String, u16)) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        let Idle { by_host, count, .. } = &mut *idle;
        let list = by_host.get_mut(key)?;
        let mut found = None;
        while let Some((mut conn, since)) = list.pop() {
            *count -= 1;
            if since.elapsed() < IDLE_FOR && !conn.io.ended() && !conn.sender.is_closed() {
                found = Some(conn);
                break;
            }
        }
        if list.is_empty() {
            by_host.remove(key);
        }
        found
    }

    /// Keeps `conn` for the next call to `key`, when it can take another request and room
    /// is left.
    fn give_back(&self, key: (String, u16), mut conn: Conn) {
        if conn.io.ended() || conn.sender.is_closed() {
            return;
        }
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        // Connections past their time, to hosts no longer called too, are closed by the
        // next call that ends once that time has passed since the last sweep.
        if idle.count >= MAX_IDLE || idle.swept.is_none_or(|at| at.elapsed() >= IDLE_FOR) {
            idle.sweep(IDLE_FOR);
            if idle.count >= MAX_IDLE {
                return;
            }
        }
        idle.count += 1;
        idle.by_host
            .entry(key)
            .or_default()
            .push((conn, Instant::now()));
    }
}

impl Idle {
    /// Closes the connections idle for `longer_than`.
    fn sweep(&mut self, longer_than: Duration) {
        self.swept = Some(Instant::now());
        let mut count = 0;
        self.by_host.retain(|_, list| {
            list.retain(|(_, since)| since.elapsed() < longer_than);
            count += list.len();
            !list.is_empty()
        });
        self.count = count;
    }
}

/// Waits for `work` while doing the connection's I/O (reading the answer, writing the
/// request). When the connection ends first, its I/O is dropped, which gives `work` its
/// outcome (hyper answers every request it drops, one still queued with the request back);
/// otherwise the connection's end is the failure.
async fn driven<F: Future>(io: &mut Io, work: F) -> Result<F::Output, Failure> {
    let mut work = std::pin::pin!(work);
    poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        let Some(driver) = io.driver.as_mut() else {
            return Poll::Ready(Err(Failure::Io("the connection closed".into())));
        };
        let Poll::Ready(end) = driver.as_mut().poll(cx) else {
            // The I/O just done may have answered `work` (the answer's head, a frame of its
            // body): take it now rather than after a wake-up of this task.
            return work.as_mut().poll(cx).map(Ok);
        };
        io.driver = None;
        match work.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Ok(out)),
            Poll::Pending => Poll::Ready(Err(Failure::Io(match end {
                Ok(()) => "the connection closed".to_string(),
                Err(e) => error_chain(&e),
            }))),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the retry on a stale connection rests on: a request queued on a connection whose
    /// service closed it comes back unsent once the connection's end is seen.
    #[tokio::test]
    async fn a_request_on_a_closed_connection_comes_back_unsent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let plain = Plain::new(&[]);
        let key = (addr.ip().to_string(), addr.port());
        let (conn, accepted) = tokio::join!(plain.connect(&key, true), listener.accept());
        let mut conn = conn.unwrap();
        drop(accepted.unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let request = http::Request::builder()
            .uri("/")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let sent = conn.sender.try_send_request(request);
        let answer = driven(&mut conn.io, sent).await.unwrap();
        let mut refused = answer.err().unwrap();
        assert!(refused.take_message().is_some());
        assert!(conn.io.ended());
    }

    /// Serves `answer` to every connection, after reading the request's head, and returns
    /// the URL to call.
    async fn answering(answer: Vec<u8>) -> reqwest::Url {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0_u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = socket.write_all(&answer).await;
                });
            }
        });
        reqwest::Url::parse(&format!("http://{addr}/x")).unwrap()
    }

    async fn exchange(answer: &[u8]) -> Result<Answer, Failure> {
        let url = answering(answer.to_vec()).await;
        let plain = Plain::new(&[]);
        let request = reqwest::Request::new(reqwest::Method::GET, url);
        plain.exchange(request, "ratchet/test", 1 << 20).await
    }

    /// What a service answers cannot take the worker down: each bad answer is an error that
    /// says what was wrong.
    #[tokio::test]
    async fn bad_answers_are_errors() {
        let ok = exchange(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi").await;
        let ok = ok.unwrap_or_else(|_| panic!("a good answer failed"));
        assert_eq!((ok.status, ok.body.as_slice()), (200, &b"hi"[..]));

        let garbage = exchange(b"NOT HTTP AT ALL\r\n\r\n").await;
        assert!(
            matches!(&garbage, Err(Failure::Io(m)) if m.contains("invalid")),
            "{garbage:?}"
        );

        let mut flood = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..20_000 {
            flood.extend_from_slice(format!("x-{i}: {}\r\n", "y".repeat(50)).as_bytes());
        }
        flood.extend_from_slice(b"content-length: 0\r\n\r\n");
        let flooded = exchange(&flood).await;
        assert!(matches!(&flooded, Err(Failure::Io(_))), "{flooded:?}");

        let declared = exchange(b"HTTP/1.1 200 OK\r\ncontent-length: 20971520\r\n\r\n").await;
        assert!(matches!(declared, Err(Failure::TooLarge)), "{declared:?}");

        let cut = exchange(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhi").await;
        assert!(
            matches!(&cut, Err(Failure::Io(m)) if m.contains("reading the answer")),
            "{cut:?}"
        );
    }

    /// Idle connections past their time are closed, and the count follows.
    #[tokio::test]
    async fn idle_connections_are_swept() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let plain = Plain::new(&[]);
        let key = (addr.ip().to_string(), addr.port());
        // The service keeps its ends open.
        let mut served = Vec::new();
        for _ in 0..2 {
            let (conn, accepted) = tokio::join!(plain.connect(&key, true), listener.accept());
            served.push(accepted.unwrap());
            plain.give_back(key.clone(), conn.unwrap());
        }
        {
            let mut idle = plain.idle.lock().unwrap();
            assert_eq!(idle.count, 2);
            idle.sweep(Duration::from_secs(60));
            assert_eq!(idle.count, 2);
            idle.sweep(Duration::ZERO);
            assert_eq!((idle.count, idle.by_host.len()), (0, 0));
        }
        assert!(plain.take(&key).is_none());
    }
}
