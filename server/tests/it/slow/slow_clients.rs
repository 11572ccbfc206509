//! Slow clients: slow senders are cut off, and connections are capped overall
//! and per address.

use std::time::{Duration, Instant};

use idem_store::testing::TestDatabase;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::common::{self, TestApp, new_client, spawn_with};

/// Opens a connection and sends `head` one byte every `pace`; returns how
/// long after opening the server closed it (or `None` if it never did
/// within `patience`).
async fn slow_sender(
    addr: std::net::SocketAddr,
    pace: Duration,
    patience: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
        return Some(started.elapsed());
    };
    let (mut reader, mut writer) = stream.into_split();
    let head = b"GET /livez HTTP/1.1\r\nHost: idem\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let write = async {
        for byte in head {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(pace).await;
        }
        std::future::pending::<()>().await;
    };
    let closed = async {
        let mut buffer = [0u8; 512];
        // Whatever the server says (a 408, or nothing), it ends with a close.
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => return started.elapsed(),
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        at = closed => Some(at),
        () = write => None,
        () = tokio::time::sleep(patience) => None,
    }
}

fn base_addr(app: &TestApp) -> std::net::SocketAddr {
    app.base
        .trim_start_matches("http://")
        .parse()
        .expect("the test server's address")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_slow_senders_are_cut_off_while_a_normal_request_is_answered() {
    let app = spawn_with(
        |c| {
            c.limits.header_timeout = Duration::from_secs(2);
            // All from one address: the header timeout alone cuts them off.
            c.limits.max_connections_per_client = 1000;
        },
        TestDatabase::sqlite().await,
    )
    .await;
    let addr = base_addr(&app);
    let senders: Vec<_> = (0..200)
        .map(|_| {
            tokio::spawn(slow_sender(
                addr,
                Duration::from_secs(1),
                Duration::from_secs(8),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    assert_eq!(app.get("/").await.0, 200, "a person still gets a page");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "and at once ({:?})",
        started.elapsed()
    );
    for sender in senders {
        let closed = sender.await.unwrap();
        let at = closed.expect("a slow sender was never cut off");
        assert!(at < Duration::from_secs(4), "cut off after {at:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_beyond_the_cap_wait_for_a_free_one() {
    let app = spawn_with(
        |c| {
            c.limits.header_timeout = Duration::from_secs(2);
            c.limits.max_connections = 10;
        },
        TestDatabase::sqlite().await,
    )
    .await;
    let addr = base_addr(&app);
    // Ten connections that send nothing hold every slot.
    let mut idle = Vec::new();
    for _ in 0..10 {
        idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let (status, _) = common::get(&new_client(), &app.url("/livez")).await;
    let waited = started.elapsed();
    assert_eq!(status, 200);
    assert!(
        waited > Duration::from_millis(1000),
        "the eleventh connection was served at once ({waited:?}): no cap"
    );
    assert!(waited < Duration::from_secs(4), "it waited {waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_cannot_take_every_connection() {
    let app = spawn_with(
        |c| {
            c.limits.max_connections = 10;
            c.limits.max_connections_per_client = 4;
            // Longer than the test: a kept connection is not cut (and its
            // slot given to the next) while the test still counts.
            c.limits.header_timeout = Duration::from_secs(120);
        },
        TestDatabase::sqlite().await,
    )
    .await;
    let addr = base_addr(&app);
    // One address opens twenty connections and sends nothing: four are
    // kept (until the header timeout), the rest answered 503 and closed.
    let mut kept = 0;
    let mut held = Vec::new();
    for _ in 0..20 {
        // From 127.0.0.3: the test's own clients use 127.0.0.1.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.3:0".parse().unwrap()).unwrap();
        let mut stream = socket.connect(addr).await.unwrap();
        // Still silent after a moment and a half: kept. A refused one
        // reads its 503 after a second.
        let mut answer = Vec::new();
        match tokio::time::timeout(Duration::from_millis(1500), stream.read_to_end(&mut answer))
            .await
        {
            Err(_) => {
                kept += 1;
                held.push(stream);
            }
            Ok(_) => {
                let answer = String::from_utf8_lossy(&answer);
                assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
                assert!(answer.contains("Retry-After: 2"), "{answer}");
            }
        }
    }
    assert_eq!(kept, 4, "connections one address may hold");
    // Someone at another address is served at once.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let started = Instant::now();
    let (status, _) = common::get(&elsewhere, &app.url("/livez")).await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}
