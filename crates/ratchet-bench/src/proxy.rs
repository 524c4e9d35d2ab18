//! A TCP proxy that delays every chunk by half a round trip in each direction, so that a
//! distant database can be measured on one machine. Order is kept; bandwidth is not limited.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A running proxy; stops when dropped.
pub(crate) struct Proxy {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`, adding `rtt` to every
    /// round trip.
    pub(crate) async fn start(upstream: SocketAddr, rtt: Duration) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the proxy")?;
        let addr = listener.local_addr()?;
        let one_way = rtt / 2;
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Err(e) = forward(client, upstream, one_way).await {
                        tracing::debug!(error = %e, "proxy connection ended");
                    }
                });
            }
        });
        Ok(Self { addr, task })
    }

    /// Where clients connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

async fn forward(client: TcpStream, upstream: SocketAddr, delay: Duration) -> anyhow::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = tokio::spawn(pump(client_read, server_write, delay));
    let down = tokio::spawn(pump(server_read, client_write, delay));
    let _ = tokio::join!(up, down);
    Ok(())
}

/// Reads chunks as they come and writes each `delay` after it arrived.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}
