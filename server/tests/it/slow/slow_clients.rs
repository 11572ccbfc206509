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

/// Opens a connection from `local` and posts a sign-in form whose body
/// comes one byte every `pace`; returns what the server answered (empty if
/// nothing within `patience`).
async fn slow_body(
    addr: std::net::SocketAddr,
    local: &str,
    pace: Duration,
    patience: Duration,
) -> String {
    let body = b"username=olga&password=correct+horse+battery+staple+42&next=%2F";
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: idem\r\nSec-Fetch-Site: same-origin\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    let Ok(stream) = socket.connect(addr).await else {
        return String::new();
    };
    let (mut reader, mut writer) = stream.into_split();
    let write = async {
        if writer.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for byte in body {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(pace).await;
        }
        std::future::pending::<()>().await;
    };
    let answer = async {
        let mut answer = Vec::new();
        let mut buffer = [0u8; 1024];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => return String::from_utf8_lossy(&answer).into_owned(),
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
    };
    tokio::select! {
        answer = answer => answer,
        () = write => String::new(),
        () = tokio::time::sleep(patience) => String::new(),
    }
}

/// 64 sign-in posts from one address, each sending its body a byte every
/// two seconds (all the connections that address may open): everyone else
/// is still served, and each slow one is answered 408 when its body's
/// deadline passes. Before bodies were read ahead of admission, they held
/// every in-flight slot and everyone else was told "Idem is busy".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_slow_bodies_from_one_address_do_not_stall_anyone_else() {
    let app = spawn_with(
        |c| {
            c.limits.body_timeout = Duration::from_secs(5);
            c.limits.header_timeout = Duration::from_secs(60);
        },
        TestDatabase::sqlite().await,
    )
    .await;
    let addr = base_addr(&app);
    let slow: Vec<_> = (0..64)
        .map(|_| {
            tokio::spawn(slow_body(
                addr,
                "127.0.0.4",
                Duration::from_secs(2),
                Duration::from_secs(20),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Someone else, at another address, reads pages while they dribble.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 5]))
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let mut answered = 0;
    let tries = 40;
    for _ in 0..tries {
        let response = elsewhere.get(app.url("/login")).send().await;
        if response.is_ok_and(|r| r.status().as_u16() == 200) {
            answered += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("{answered} of {tries} answered while the slow bodies were sent");
    assert!(
        answered * 10 >= tries * 9,
        "{answered} of {tries} answered while the slow bodies were sent"
    );
    for sender in slow {
        let answer = sender.await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 408"),
            "a slow body is answered 408: {answer:?}"
        );
    }
}

/// One address with many requests waiting on a slow database takes at most
/// its share of the in-flight slots (the rest answered 429 at once), so
/// another address is still admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_takes_at_most_its_share_of_the_requests_in_flight() {
    let app = spawn_with(
        |c| {
            c.limits.max_in_flight = 8;
            c.limits.max_in_flight_per_client = 3;
            c.database.max_connections = 2;
            c.database.acquire_timeout = Duration::from_secs(2);
        },
        TestDatabase::sqlite().await,
    )
    .await;
    let held = idem_store::testing::occupy_pool(&app.store, 2).await;
    let from = |last: u8| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from([127, 0, 0, last]))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    };
    let (busy, other) = (from(6), from(7));
    let requests: Vec<_> = (0..8)
        .map(|_| tokio::spawn(busy.get(app.url("/login")).send()))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let elsewhere = other.get(app.url("/login")).send().await.unwrap();
    let status = elsewhere.status().as_u16();
    let text = elsewhere.text().await.unwrap();
    assert!(
        !(status == 429 || text.contains("Too many requests are being served right now")),
        "another address is admitted (then waits for the database like everyone): {status} {text}"
    );
    drop(held);
    let mut refused = 0;
    for request in requests {
        let response = request.await.unwrap().unwrap();
        if response.status().as_u16() == 429 {
            assert!(response.headers().contains_key("retry-after"));
            refused += 1;
        }
    }
    assert_eq!(refused, 5, "three admitted, the other five refused at once");
}
