//! Sign-in under attack, over real HTTP: throttling that an attacker cannot
//! aim at someone else, that holds under a burst of parallel guesses, that
//! costs bounded work and storage, and that never keeps the right password
//! out for good.

use crate::common;
use std::time::Duration;

use crate::common::{TestApp, location, new_client, spawn_with, visible};
use idem_domain::{Role, sign_in::SignInLimits};
use idem_store::testing::TestDatabase;

/// A client whose requests come through the trusted proxy at 127.0.0.1 on
/// behalf of `address`.
struct From<'a> {
    app: &'a TestApp,
    address: &'a str,
}

impl From<'_> {
    /// Signs in from `browser`, which keeps its cookies (a device cookie
    /// among them).
    async fn sign_in_with(
        &self,
        browser: &reqwest::Client,
        name: &str,
        password: &str,
    ) -> reqwest::Response {
        browser
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
        self.attempt_with(&new_client(), name, password).await
    }

    async fn attempt_with(
        &self,
        browser: &reqwest::Client,
        name: &str,
        password: &str,
    ) -> &'static str {
        let response = self.sign_in_with(browser, name, password).await;
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
    // The page a throttled attempt is sent to says so only to the browser
    // the server answered; the same address in a link says nothing.
    let page = visible(
        &common::get(&new_client(), &app.url("/login?throttled=1"))
            .await
            .1,
    );
    assert!(!page.contains("Too many failed sign-ins"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_signed_in_before_gets_in_while_its_shared_address_is_throttled() {
    let app = behind_proxy(TestDatabase::sqlite().await, SignInLimits::default()).await;
    // Everyone behind one NAT, or a proxy Idem was not told about.
    let office = From {
        app: &app,
        address: "192.0.2.10",
    };
    let admins_browser = new_client();
    assert_eq!(
        office
            .attempt_with(&admins_browser, "admin", "admin-password")
            .await,
        "in"
    );
    // Someone else there guesses admin's password, and types twenty names.
    for _ in 0..30 {
        office.attempt("admin", "guess").await;
    }
    for n in 0..20 {
        office.attempt(&format!("nobody-{n}"), "x").await;
    }
    assert_eq!(office.attempt("admin", "admin-password").await, "throttled");
    app.create_user("newcomer", Role::Viewer).await;
    assert_eq!(
        office.attempt("newcomer", "newcomer-password").await,
        "throttled",
        "a browser new to its account shares its address's limit"
    );
    // Admin's own browser is counted on its own: nothing the others did
    // slows it down, however often they keep trying.
    for _ in 0..3 {
        office.attempt("admin", "guess").await;
        assert_eq!(
            office
                .attempt_with(&admins_browser, "admin", "admin-password")
                .await,
            "in"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_browser_over_its_own_limit_waits_a_growing_delay_never_the_window() {
    let limits = SignInLimits {
        first_delay: Duration::from_secs(4),
        ..SignInLimits::default()
    };
    let app = behind_proxy(TestDatabase::sqlite().await, limits).await;
    let home = From {
        app: &app,
        address: "198.51.100.20",
    };
    let browser = new_client();
    assert_eq!(
        home.attempt_with(&browser, "admin", "admin-password").await,
        "in"
    );
    for _ in 0..5 {
        assert_eq!(home.attempt_with(&browser, "admin", "typo").await, "failed");
    }
    // Over the limit: checked once more at once, then after 4 s, 8 s, …
    assert_eq!(home.attempt_with(&browser, "admin", "typo").await, "failed");
    assert_eq!(
        home.attempt_with(&browser, "admin", "admin-password").await,
        "throttled"
    );
    tokio::time::sleep(Duration::from_millis(4200)).await;
    assert_eq!(
        home.attempt_with(&browser, "admin", "admin-password").await,
        "in",
        "the right password, after the delay and long before the window ends"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_while_throttled_do_not_extend_the_window() {
    let app = behind_proxy(TestDatabase::sqlite().await, short_window(6)).await;
    let client = From {
        app: &app,
        address: "198.51.100.9",
    };
    let started = std::time::Instant::now();
    for _ in 0..5 {
        assert_eq!(client.attempt("admin", "wrong").await, "failed");
    }
    // Keep knocking for the rest of the window: each is refused, uncounted.
    let mut knocks = 0;
    while started.elapsed() < Duration::from_millis(5500) {
        assert_eq!(client.attempt("admin", "wrong").await, "throttled");
        knocks += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(knocks >= 5, "only {knocks} attempts while throttled");
    tokio::time::sleep(
        Duration::from_secs(6).saturating_sub(started.elapsed()) + Duration::from_millis(300),
    )
    .await;
    assert_eq!(
        client.attempt("admin", "admin-password").await,
        "in",
        "the window ended six seconds after the first failure"
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
    assert_eq!(
        checked, 5,
        "guesses checked against the hash (the limit, no more and no fewer); answers: {answers:?}"
    );
    assert_eq!(
        answers.get("/login?failed").copied().unwrap_or(0),
        checked as usize,
        "every checked guess failed and every other one was throttled (or busy): {answers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_failures_costs_no_hashing_one_row_and_one_audit_entry_per_window() {
    let limits = short_window(60);
    let app = behind_proxy(TestDatabase::sqlite().await, limits).await;
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
    // And a thousand other names from the same address, once it is over
    // its limit: no row each, no audit entry each.
    for n in 0..15 {
        attacker.attempt(&format!("name-{n}"), "guess").await;
    }
    for n in 15..1000 {
        assert_eq!(
            attacker.attempt(&format!("name-{n}"), "guess").await,
            "throttled"
        );
    }
    let rows = idem_store::testing::count_rows(&app.store, "login_failures").await;
    assert_eq!(
        rows,
        1 + 1 + 15,
        "one counter for the address, one for each name it was checked for"
    );
    let audited = |actor: &'static str| {
        let store = app.store.clone();
        async move {
            store
                .latest_audit(500)
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.action.as_str() == "login" && e.actor == actor)
                .collect::<Vec<_>>()
        }
    };
    assert!(
        audited("admin").await.is_empty(),
        "failures are summed up when their window closes, not one row each"
    );

    // When the windows have ended, the sweeper closes them: the rows go,
    // and one audit entry for each sums it up.
    let after_the_window =
        idem_store::Ts::from(chrono::Utc::now() + chrono::TimeDelta::seconds(61));
    let closed = app
        .store
        .people()
        .close_sign_in_windows(&limits, after_the_window)
        .await
        .unwrap();
    assert_eq!(closed, 17);
    assert_eq!(
        idem_store::testing::count_rows(&app.store, "login_failures").await,
        0
    );
    let entries = audited("admin").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let reason = entries[0].reason.clone().unwrap_or_default();
    assert!(
        reason.contains("5 failed sign-ins") && reason.contains("100 attempts refused"),
        "{reason}"
    );
    let any_name = audited("(any name)").await;
    assert_eq!(any_name.len(), 1, "{any_name:?}");
    assert!(
        any_name[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("985 attempts refused")),
        "{any_name:?}"
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
