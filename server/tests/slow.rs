//! A slow database is not an outage, and a slow client is not a free hold
//! on the server: a saturated pool leaves readiness and the pages' outage
//! banner alone; stale permissions are used only in a declared outage and
//! never for actions; a sign-out during an outage takes effect when the
//! database returns; slow senders are cut off; timeouts answer as promised;
//! the background work runs on one replica, which stops it when it cannot
//! renew its lease and hands it over when it is killed.

mod common;

use std::time::{Duration, Instant};

use common::{Gate, Process, TestApp, dead_letter, new_client, replay, spawn_with, visible};
use idem_domain::{DeadLetterState, Role};
use idem_store::{
    StoreConfig,
    testing::{TestDatabase, count_rows, occupy_pool},
};
use sqlx::{Connection, Executor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BANNER: &str = "Database unavailable since";

async fn busy_pool_is_not_an_outage(db: TestDatabase) {
    let app = spawn_with(
        |c| {
            c.database.max_connections = 3;
            c.database.acquire_timeout = Duration::from_millis(1500);
        },
        db,
    )
    .await;
    let held = occupy_pool(&app.store, 3).await;
    // Longer than the background check needs to declare an outage (two
    // failed checks a second apart).
    let until = Instant::now() + Duration::from_secs(4);
    let mut busy = 0;
    while Instant::now() < until {
        let started = Instant::now();
        let (ready, _) = app.get("/readyz").await;
        assert_eq!(ready, 200, "a busy pool is not unreadiness");
        assert!(
            started.elapsed() < Duration::from_millis(1000),
            "readyz waited {:?} (for a pool connection?)",
            started.elapsed()
        );
        let (status, html) = app.get("/").await;
        let page = visible(&html);
        assert!(
            !page.contains(BANNER),
            "a busy pool is not an outage: {page:.300}"
        );
        match status {
            503 => {
                busy += 1;
                assert!(page.contains("Idem is busy"), "{page:.300}");
            }
            other => assert_eq!(other, 200, "{page:.300}"),
        }
    }
    assert!(busy > 0, "the pool was never busy: the test held nothing");
    drop(held);
    assert_eq!(app.get("/").await.0, 200, "free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saturated_pool_is_busy_not_down_on_sqlite() {
    busy_pool_is_not_an_outage(TestDatabase::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_saturated_pool_is_busy_not_down_on_postgres() {
    busy_pool_is_not_an_outage(TestDatabase::postgres().await).await;
}

/// Runs `locking` in a transaction on `url` from another connection and
/// holds what it locked for `hold`.
async fn hold_lock(url: &str, locking: &str, hold: Duration) -> tokio::task::JoinHandle<()> {
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    connection.execute("BEGIN").await.unwrap();
    connection.execute(locking).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        connection.execute("COMMIT").await.unwrap();
    })
}

/// Holds `LOCK TABLE table` (even reads of it wait) for `hold`.
async fn lock_table(url: &str, table: &str, hold: Duration) -> tokio::task::JoinHandle<()> {
    hold_lock(
        url,
        &format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"),
        hold,
    )
    .await
}

/// Locks dead letter `id`'s row as another writer would: reads go on,
/// a change waits.
async fn lock_dead_letter(url: &str, id: i64, hold: Duration) -> tokio::task::JoinHandle<()> {
    hold_lock(
        url,
        &format!("SELECT id FROM dead_letters WHERE id = {id} FOR UPDATE"),
        hold,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_demoted_operator_cannot_replay_while_the_database_is_slow() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| c.database.statement_timeout = Some(Duration::from_millis(700)),
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let letter = dead_letter(&app.store, "refund:42").await;
    // Idem has seen olga as an operator a moment ago.
    assert_eq!(common::get(&olga, &app.url("/dead-letters")).await.0, 200);

    assert!(app.store.set_role("olga", Role::Viewer).await.unwrap());
    // The accounts table is slow to answer (not down: everything else is).
    let lock = lock_table(&url, "users", Duration::from_secs(2)).await;
    let answer = replay(&app, &olga, letter, "demoted-replay").await;
    let status = answer.status().as_u16();
    assert!(
        status == 503 || status == 403 || status == 401,
        "a demoted operator's replay answered {status}: {}",
        answer.text().await.unwrap_or_default()
    );
    lock.await.unwrap();
    assert_eq!(
        app.store.dead_letter(letter).await.unwrap().unwrap().state,
        DeadLetterState::Open,
        "nothing was replayed"
    );
    // Once the database answers, the demotion holds.
    let answer = replay(&app, &olga, letter, "demoted-replay-2").await;
    assert_ne!(answer.status().as_u16(), 200);
    assert_eq!(
        app.store.dead_letter(letter).await.unwrap().unwrap().state,
        DeadLetterState::Open
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn signing_out_during_an_outage_ends_the_session_when_the_database_returns() {
    let db = TestDatabase::postgres().await;
    let direct = db.store.clone();
    let (gate, through_gate) = Gate::to_postgres(&db.url).await;
    let app = spawn_with(
        |c| {
            c.database = StoreConfig::new(&through_gate);
            c.database.acquire_timeout = Duration::from_secs(1);
        },
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let client = new_client();
    let signed_in = app
        .post_form(
            &client,
            "/login",
            &[("username", "olga"), ("password", "olga-password")],
        )
        .await;
    let cookie = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("idem_session="))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned();
    assert_eq!(common::get(&client, &app.url("/")).await.0, 200);
    // The viewer was seen too: during the outage their pages show the banner.
    assert_eq!(app.get("/").await.0, 200);
    let sessions_before = count_rows(&direct, "sessions").await;

    gate.close().await;
    wait_until(Duration::from_secs(5), || async {
        visible(&app.get("/").await.1).contains(BANNER)
    })
    .await;
    let out = app.post_form(&client, "/logout", &[]).await;
    assert_eq!(
        out.status().as_u16(),
        303,
        "sign-out answers during an outage"
    );
    assert_eq!(common::location(&out), "/login");
    let with_old_cookie = || async {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(app.url("/"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(
        with_old_cookie().await,
        303,
        "the session ended at once here: the old cookie leads to the sign-in page"
    );

    gate.open();
    wait_until(Duration::from_secs(10), || async {
        count_rows(&direct, "sessions").await == sessions_before - 1
    })
    .await;
    assert_eq!(
        with_old_cookie().await,
        303,
        "after the outage the old cookie leads to the sign-in page"
    );
}

async fn wait_until<F, Fut>(within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_action_cut_off_by_the_request_timeout_is_rolled_back_and_says_it_may_have_happened() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(|c| c.limits.request_timeout = Duration::from_secs(1), db).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let letter = dead_letter(&app.store, "refund:7").await;
    // The dead letter's row is locked: the replay's transaction reads it,
    // then waits to change it.
    let lock = lock_dead_letter(&url, letter, Duration::from_secs(3)).await;
    let page = format!("/dead-letters/{letter}");
    let started = Instant::now();
    let response = common::post_as_browser(
        &app,
        &olga,
        &page,
        common::server_fn("replay_dead_letter"),
        &[
            ("id", &letter.to_string()),
            ("action_id", "0123456789-timeout"),
        ],
    )
    .await;
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    let html = response.text().await.unwrap();
    let text = visible(&html);
    assert!(text.contains("may have happened"), "{text}");
    assert!(!text.contains("Nothing was changed"), "{text}");
    assert!(
        html.contains(&format!("href=\"{page}\"")),
        "links to the page it came from: {html}"
    );
    lock.await.unwrap();
    // It was rolled back: nothing changed, and the same form works now.
    assert_eq!(
        app.store.dead_letter(letter).await.unwrap().unwrap().state,
        DeadLetterState::Open
    );
    assert!(
        app.store
            .audit_for_key("orders", "refund:7")
            .await
            .unwrap()
            .is_empty()
    );
    let again = replay(&app, &olga, letter, "0123456789-timeout").await;
    assert_eq!(again.status().as_u16(), 200);
    assert_eq!(
        app.store.dead_letter(letter).await.unwrap().unwrap().state,
        DeadLetterState::Replayed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_statement_over_the_postgres_statement_timeout_is_a_503_and_changes_nothing() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| c.database.statement_timeout = Some(Duration::from_millis(500)),
        db,
    )
    .await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let letter = dead_letter(&app.store, "refund:8").await;
    let lock = lock_dead_letter(&url, letter, Duration::from_secs(3)).await;
    let started = Instant::now();
    let response = replay(&app, &olga, letter, "0123456789-statement").await;
    let took = started.elapsed();
    assert_eq!(response.status().as_u16(), 503);
    assert!(response.headers().contains_key("retry-after"));
    assert!(took < Duration::from_millis(2500), "took {took:?}");
    let body = response.text().await.unwrap();
    assert!(body.contains("Unavailable"), "{body}");
    lock.await.unwrap();
    assert_eq!(
        app.store.dead_letter(letter).await.unwrap().unwrap().state,
        DeadLetterState::Open
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn health_probes_are_answered_while_admission_refuses_everything_else() {
    let app = std::sync::Arc::new(
        spawn_with(
            |c| {
                c.limits.max_in_flight = 2;
                c.database.max_connections = 1;
                c.database.acquire_timeout = Duration::from_secs(3);
                c.read_cache_ttl = Duration::ZERO;
            },
            TestDatabase::sqlite().await,
        )
        .await,
    );
    let held = occupy_pool(&app.store, 1).await;
    // Two requests wait for the pool: every admission permit is taken.
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { app.get("/").await.0 })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app.get("/dead-letters").await.0, 503, "admission is full");
    for probe in ["/livez", "/readyz"] {
        let started = Instant::now();
        assert_eq!(app.get(probe).await.0, 200, "{probe}");
        // Not the pool's three-second wait.
        assert!(started.elapsed() < Duration::from_millis(1000), "{probe}");
    }
    drop(held);
    for request in waiting {
        request.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_with_sigkill_loses_the_background_work_to_the_other_after_the_lease() {
    let db = TestDatabase::postgres().await;
    let lease = [("IDEM_BACKGROUND_LEASE_SECONDS", "2")];
    let a = Process::start(&db.url, &lease);
    let b = Process::start(&db.url, &lease);
    let runs = |holder: &str, p: &Process| holder.contains(&format!("-{}-", p.child.id()));
    let first = common::lease_holder(&db.store).await;
    let (mut killed, other) = if runs(&first, &a) { (a, b) } else { (b, a) };
    // No chance to release the lease: it must expire.
    killed.child.kill().unwrap();
    killed.child.wait().unwrap();
    let started = Instant::now();
    loop {
        if runs(&common::lease_holder(&db.store).await, &other) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(6),
            "the other replica did not take over within the lease and a renewal"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "taken over at once: the killed replica cannot have released it"
    );
}

/// This replica's `idem_background_work_running`, from its `/metrics`.
async fn runs_background_work(app: &TestApp) -> bool {
    let text = new_client()
        .get(app.url("/metrics"))
        .bearer_auth("scrape")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("idem_background_work_running "))
        .unwrap_or_else(|| panic!("no background gauge in {text:.300}"))
        .trim()
        == "1"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_that_cannot_renew_its_lease_stops_its_background_work() {
    let db = TestDatabase::postgres().await;
    let url = db.url.clone();
    let app = spawn_with(
        |c| {
            c.metrics_token = Some(idem::metrics::MetricsToken::new("scrape".into()));
            c.background_lease = Duration::from_secs(2);
        },
        db,
    )
    .await;
    wait_until(Duration::from_secs(5), || runs_background_work(&app)).await;
    // Renewals now hang (the lease table is locked) while the database
    // answers everything else.
    let lock = lock_table(&url, "idem_leases", Duration::from_secs(4)).await;
    let started = Instant::now();
    wait_until(Duration::from_secs(3), || async {
        !runs_background_work(&app).await
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "stopped within the lease's life, before anyone else could take it ({:?})",
        started.elapsed()
    );
    lock.await.unwrap();
    wait_until(Duration::from_secs(5), || runs_background_work(&app)).await;
}
