//! The accept loop. `axum::serve` offers neither a deadline for a request's
//! head nor a cap on open connections, so a laptop sending headers one byte
//! a second could hold every connection it opens, forever (slowloris). Here
//! each connection holds one of `max_connections` permits (the next client
//! waits in the listen backlog until one is free), one address (an IPv6
//! client's /64) may hold at most `per_client` of them (a connection beyond
//! that is answered 503 and closed; the proxies Idem trusts are exempt, as
//! every client comes through them),
//! and hyper closes a connection whose request head has not arrived within
//! `header_timeout` of its opening or of its previous answer (so an idle
//! keep-alive connection goes after that long too). Holding every slot
//! therefore takes `max_connections / per_client` addresses.
//!
//! HTTP/1.1 only: browsers speak HTTP/2 only over TLS, which a reverse
//! proxy in front terminates. (hyper-util's HTTP/1-or-2 server first waits
//! for a connection's first bytes to tell the two apart, with no deadline:
//! a connection that sends nothing would hold its slot for ever.) The
//! peer's address reaches handlers as `ConnectInfo`; shutdown is graceful.

use std::{sync::Arc, time::Duration};

use axum::{Router, body::Body, extract::ConnectInfo, http::Request};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
};
use tokio::{net::TcpListener, sync::Semaphore};
use tower::ServiceExt;

use crate::per_address::PerAddress;

/// How many connections are served at once, from one address, and how long
/// a head may take.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub per_client: usize,
    pub header_timeout: Duration,
    /// Peers the per-address cap does not apply to (the trusted proxies).
    pub exempt: Vec<crate::auth::TrustedProxies>,
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting, asks every open connection to finish its request in flight
/// and close, and returns once all have.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_client = PerAddress::new(limits.per_client);
    // Refusals being answered at once: past this many, a refused
    // connection is just closed, so a flood costs no more than this.
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_failed(err).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let slot = if limits.exempt.iter().any(|p| p.trusts(peer.ip())) {
            None
        } else {
            match PerAddress::take(&per_client, peer.ip()) {
                Some(slot) => Some(slot),
                None => {
                    tracing::debug!(%peer, "connection refused: its address holds its limit");
                    if let Ok(refusal) = refusing.clone().try_acquire_owned() {
                        tokio::spawn(async move {
                            refuse(stream).await;
                            drop(refusal);
                        });
                    }
                    continue;
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let mut req = req.map(Body::new);
            req.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(req)
        });
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(err) = watcher.watch(connection).await {
                tracing::trace!(error = %err, %peer, "connection ended with an error");
            }
            drop((permit, slot));
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// How many refused connections are answered at once (each for at most a
/// second); the rest are closed unanswered.
const MAX_REFUSING: usize = 256;

/// Answers a connection beyond its address's limit with a bare 503 (after
/// reading what it sends for at most a second, so the client reads an
/// answer rather than a reset) and closes it. Its permit is given back at
/// once: a refused connection holds no slot.
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const ANSWER: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\n\
        Content-Type: text/plain\r\nContent-Length: 51\r\nConnection: close\r\n\r\n\
        Too many connections from your address; try again.\n";
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    let _ = stream.write_all(ANSWER).await;
    let _ = stream.shutdown().await;
}

/// An accept that failed: a client that went away is nothing; running out
/// of file descriptors is waited out for a second (as hyper 0.14 did).
async fn accept_failed(err: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %err, "cannot accept a connection");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
