//! Sign-in under attack, over real HTTP: throttling that an attacker cannot
//! aim at someone else, that holds under a burst of parallel guesses, that
//! costs bounded work and storage, and that never keeps the right password
//! out for good.

mod common;

use std::time::Duration;

use common::{TestApp, location, new_client, spawn_with, visible};
use idem_domain::{Role, sign_in::SignInLimits};
use idem_store::testing::TestDatabase;

/// A client whose requests come through the trusted proxy at 127.0.0.1 on
/// behalf of `address`.
struct From<'a> {
    app: &'a TestApp,
    address: &'a str,
}

impl From<'_> {
    async fn sign_in(&self, name: &str, password: &str) -> reqwest::Response {
        new_client()
            .post(self.app.url("/login"))
            .header("sec-fetch-site", "same-origin")
            .header("x-forwarded-for", self.address)
            .form(&[("username", name), ("password", password), ("next", "/")])
            .send()
            .await
            .expect("the server answers")
    }

    /// Where the attempt sent the person: `in` (signed in), `failed` or `throttled`.
    async fn attempt(&self, name: &str, password: &str) -> &'static str {
        let response = self.sign_in(name, password).await;
        let to = location(&response);
        if to == "/" {
            "in"
        } else if to.starts_with("/login?failed=1") {
            "failed"
        } else if to.starts_with("/login?throttled=1") {
            "throttled"
        } else {
            panic!("{} {to}", response.status())
        }
    }
}

/// Idem behind a proxy at 127.0.0.1 (so tests can speak from any address),
/// with `limits`, on `db`; `admin` and `viewer` exist.
async fn behind_proxy(db: TestDatabase, limits: SignInLimits) -> TestApp {
    let app = spawn_with(
        |c| {
            c.auth.trusted_proxies = idem::auth::TrustedProxies::parse("127.0.0.1").unwrap();
            c.auth.sign_in = limits;
            c.auth.hash_concurrency = 4;
        },
        db,
    )
    .await;
    app.create_user("admin", Role::Admin).await;
    app
}

fn short_window(seconds: u64) -> SignInLimits {
    SignInLimits {
        window: Duration::from_secs(seconds),
        ..SignInLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attacker_cannot_lock_someone_out_from_another_address() {
    let app = behind_proxy(TestDatabase::sqlite().await, SignInLimits::default()).await;
    let attacker = From {
        app: &app,
        address: "203.0.113.66",
    };
    for _ in 0..5 {
        assert_eq!(attacker.attempt("admin", "guess").await, "failed");
    }
    for _ in 0..20 {
        assert_eq!(
            attacker.attempt("admin", "admin-password").await,
            "throttled",
            "the attacker's own address is throttled, even with the right password"
        );
    }
    let admin = From {
        app: &app,
        address: "198.51.100.7",
    };
    assert_eq!(
        admin.attempt("admin", "admin-password").await,
        "in",
        "the real admin, from their own address, is not locked out"
    );
    let page = visible(
        &common::get(&new_client(), &app.url("/login?throttled=1"))
            .await
            .1,
    );
    assert!(page.contains("Too many failed sign-ins"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_an_address_it_signed_in_from_before_the_right_password_gets_in_after_a_short_wait() {
    let app = behind_proxy(TestDatabase::sqlite().await, SignInLimits::default()).await;
    // Everyone behind one NAT, or a proxy Idem was not told about.
    let office = From {
        app: &app,
        address: "192.0.2.10",
    };
    assert_eq!(office.attempt("admin", "admin-password").await, "in");
    for _ in 0..5 {
        assert_eq!(office.attempt("admin", "typo").await, "failed");
    }
    // Over the limit, a known-good client is checked again at once, then
    // after 1 s, 2 s, … — never refused for the rest of the window.
    assert_eq!(office.attempt("admin", "typo").await, "failed");
    assert_eq!(office.attempt("admin", "admin-password").await, "throttled");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(office.attempt("admin", "admin-password").await, "in");

    // Twenty typos by others at the same address lock out newcomers there,
    // not the people who signed in from it before.
    for n in 0..20 {
        office.attempt(&format!("nobody-{n}"), "x").await;
    }
    app.create_user("newcomer", Role::Viewer).await;
    assert_eq!(
        office.attempt("newcomer", "newcomer-password").await,
        "throttled"
    );
    assert_eq!(office.attempt("admin", "admin-password").await, "in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_while_throttled_do_not_extend_the_window() {
    let app = behind_proxy(TestDatabase::sqlite().await, short_window(3)).await;
    let client = From {
        app: &app,
        address: "198.51.100.9",
    };
    let started = std::time::Instant::now();
    for _ in 0..5 {
        assert_eq!(client.attempt("admin", "wrong").await, "failed");
    }
    // Keep knocking for the rest of the window: each is refused, uncounted.
    while started.elapsed() < Duration::from_millis(2700) {
        assert_eq!(client.attempt("admin", "wrong").await, "throttled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(
        Duration::from_secs(3).saturating_sub(started.elapsed()) + Duration::from_millis(200),
    )
    .await;
    assert_eq!(
        client.attempt("admin", "admin-password").await,
        "in",
        "the window ended three seconds after the first failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_parallel_guesses_get_no_more_checks_than_the_limit_on_sqlite() {
    parallel_guesses_get_no_more_checks_than_the_limit(TestDatabase::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_parallel_guesses_get_no_more_checks_than_the_limit_on_postgres() {
    parallel_guesses_get_no_more_checks_than_the_limit(TestDatabase::postgres().await).await;
}

async fn parallel_guesses_get_no_more_checks_than_the_limit(db: TestDatabase) {
    let app = std::sync::Arc::new(behind_proxy(db, SignInLimits::default()).await);
    let before = app.passwords.checks();
    let guesses: Vec<_> = (0..200)
        .map(|n| {
            let app = app.clone();
            tokio::spawn(async move {
                let response = new_client()
                    .post(app.url("/login"))
                    .header("sec-fetch-site", "same-origin")
                    .header("x-forwarded-for", "203.0.113.66")
                    .form(&[
                        ("username", "admin"),
                        ("password", format!("guess-{n}").as_str()),
                        ("next", "/"),
                    ])
                    .send()
                    .await
                    .unwrap();
                (response.status().as_u16(), location(&response))
            })
        })
        .collect();
    let mut answers = std::collections::HashMap::<String, usize>::new();
    for guess in guesses {
        let (status, to) = guess.await.unwrap();
        let kind = match status {
            303 => to.split('=').next().unwrap_or_default().to_owned(),
            other => other.to_string(),
        };
        *answers.entry(kind).or_default() += 1;
    }
    let checked = app.passwords.checks() - before;
    assert!(
        checked <= 5,
        "{checked} guesses were checked against the hash; answers: {answers:?}"
    );
    assert_eq!(
        answers.get("/login?failed").copied().unwrap_or(0),
        checked as usize,
        "every checked guess failed and every other one was throttled (or busy): {answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_failures_costs_no_hashing_one_row_and_one_audit_entry_per_window() {
    let app = behind_proxy(TestDatabase::sqlite().await, short_window(2)).await;
    let attacker = From {
        app: &app,
        address: "203.0.113.66",
    };
    for _ in 0..5 {
        attacker.attempt("admin", "guess").await;
    }
    let before = app.passwords.checks();
    for _ in 0..100 {
        assert_eq!(attacker.attempt("admin", "guess").await, "throttled");
    }
    assert_eq!(
        app.passwords.checks(),
        before,
        "a throttled attempt computes no hash"
    );
    let rows = idem_store::testing::count_rows(&app.store, "login_failures").await;
    assert_eq!(rows, 2, "one counter for the pair and one for the address");
    let audited = |app: &TestApp| {
        let store = app.store.clone();
        async move {
            store
                .latest_audit(500)
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.action == "login" && e.actor == "admin")
                .collect::<Vec<_>>()
        }
    };
    assert!(
        audited(&app).await.is_empty(),
        "failures are summed up when their window closes, not one row each"
    );

    // When the window has ended, the sweeper closes it: the rows go, and
    // one audit entry sums them up.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let closed = app
        .store
        .close_sign_in_windows(&short_window(2), idem_store::Ts::now())
        .await
        .unwrap();
    assert_eq!(closed, 2);
    assert_eq!(
        idem_store::testing::count_rows(&app.store, "login_failures").await,
        0
    );
    let entries = audited(&app).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let reason = entries[0].reason.clone().unwrap_or_default();
    assert!(
        reason.contains("5 failed sign-ins") && reason.contains("100 attempts refused"),
        "{reason}"
    );
    assert_eq!(entries[0].client_addr.as_deref(), Some("203.0.113.66"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sign_in_refused_because_hashing_is_busy_says_busy_and_is_not_counted() {
    let app = std::sync::Arc::new(
        spawn_with(
            |c| {
                c.auth.hash_concurrency = 1;
                c.auth.hash_wait = Duration::ZERO;
                c.auth.trusted_proxies = idem::auth::TrustedProxies::parse("127.0.0.1").unwrap();
            },
            TestDatabase::sqlite().await,
        )
        .await,
    );
    // Ten people at once, one hash at a time and no waiting for it.
    let attempts: Vec<_> = (0..10)
        .map(|n| {
            let app = app.clone();
            tokio::spawn(async move {
                let response = new_client()
                    .post(app.url("/login"))
                    .header("sec-fetch-site", "same-origin")
                    .header("x-forwarded-for", format!("198.51.100.{n}"))
                    .form(&[("username", "viewer"), ("password", "viewer-password")])
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                (status, visible(&response.text().await.unwrap()))
            })
        })
        .collect();
    let mut busy = 0;
    for attempt in attempts {
        let (status, page) = attempt.await.unwrap();
        if status == 503 {
            busy += 1;
            assert!(page.contains("Sign-in is busy"), "{page}");
            assert!(!page.contains("cannot reach its database"), "{page}");
        } else {
            assert_eq!(status, 303, "{page}");
        }
    }
    assert!(
        busy > 0,
        "some of ten simultaneous sign-ins found hashing busy"
    );
    // A busy attempt was never checked, so it left no failure behind.
    assert_eq!(
        idem_store::testing::count_rows(&app.store, "login_failures where failures > 0").await,
        0
    );
}
