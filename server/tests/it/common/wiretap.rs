//! A TCP tap between Idem and its Postgres that counts round trips.

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Forwards every connection to Postgres unchanged and counts, in what
/// clients send, the messages that wait for the server's answer: `Sync`
/// (the end of each extended-protocol exchange: a statement, a prepare, a
/// ping) and `Query` (a simple statement). One of those is one round trip.
pub struct Wiretap {
    round_trips: Arc<AtomicU64>,
}

impl Wiretap {
    /// A tap to the Postgres `url` names, and `url` rewritten to go through
    /// it (without TLS, so the messages can be read).
    pub async fn to_postgres(url: &str) -> (Wiretap, String) {
        let mut through = url::Url::parse(url).expect("a Postgres URL");
        let target = format!(
            "{}:{}",
            through.host_str().expect("a host"),
            through.port().unwrap_or(5432)
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        through.set_host(Some("127.0.0.1")).unwrap();
        through
            .set_port(Some(listener.local_addr().unwrap().port()))
            .unwrap();
        through.query_pairs_mut().append_pair("sslmode", "disable");
        let round_trips = Arc::new(AtomicU64::new(0));
        let counter = round_trips.clone();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (target, counter) = (target.clone(), counter.clone());
                tokio::spawn(async move {
                    if let Ok(outbound) = tokio::net::TcpStream::connect(&target).await {
                        pipe(inbound, outbound, counter).await;
                    }
                });
            }
        });
        (Wiretap { round_trips }, through.to_string())
    }

    /// Round trips so far, over every connection.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }

    /// The fewest round trips `run` cost in `times` runs (other work of the
    /// server — the health check, the rollups — only ever adds to one run).
    pub async fn fewest<F, Fut>(&self, times: usize, mut run: F) -> u64
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let mut fewest = u64::MAX;
        for _ in 0..times {
            let before = self.round_trips();
            run().await;
            // sqlx pings a connection as it goes back to the pool, after
            // the answer: wait for that to be counted too.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            fewest = fewest.min(self.round_trips() - before);
        }
        fewest
    }
}

async fn pipe(
    inbound: tokio::net::TcpStream,
    outbound: tokio::net::TcpStream,
    counter: Arc<AtomicU64>,
) {
    let (mut client_reads, mut client_writes) = inbound.into_split();
    let (mut server_reads, mut server_writes) = outbound.into_split();
    let answers = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_reads, &mut client_writes).await;
    });
    let mut messages = ClientMessages::default();
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match client_reads.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let waits = messages.feed(&buffer[..read]);
        counter.fetch_add(waits, Ordering::SeqCst);
        if server_writes.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
    answers.abort();
}

/// The client's side of the protocol, read as it passes.
#[derive(Default)]
struct ClientMessages {
    pending: Vec<u8>,
    /// Past the untyped start-up messages (an SSL request, the start-up).
    started: bool,
}

impl ClientMessages {
    /// Takes the next bytes; returns how many of the messages completed in
    /// them wait for an answer.
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.pending.extend_from_slice(bytes);
        let mut waits = 0;
        loop {
            let header = if self.started { 5 } else { 4 };
            if self.pending.len() < header {
                return waits;
            }
            let at = header - 4;
            let length = u32::from_be_bytes(self.pending[at..at + 4].try_into().unwrap()) as usize;
            let total = at + length;
            if self.pending.len() < total {
                return waits;
            }
            if self.started {
                waits += u64::from(matches!(self.pending[0], b'S' | b'Q'));
            } else {
                // An SSL or GSS encryption request is followed by the
                // start-up message proper; anything else was it.
                let code = u32::from_be_bytes(self.pending[4..8].try_into().unwrap());
                self.started = !matches!(code, 80_877_103 | 80_877_104);
            }
            self.pending.drain(..total);
        }
    }
}
