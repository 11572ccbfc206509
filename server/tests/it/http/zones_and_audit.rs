//! The viewer's time zone, and the audit page.

use idem_app::links::key_href;
use idem_domain::Role;
use idem_store::{Outcome, testing::TestDatabase};

use super::{
    claim,
    common::{self, get, spawn_app, text, visible},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_zone_changes_the_times_and_only_known_zones_and_local_paths_are_accepted() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    claim(
        &app.store,
        "reminders",
        "renewal:z",
        Some(Outcome::Unknown { error: "timeout" }),
    )
    .await;
    let (_, utc) = app.get("/unknown").await;
    assert!(visible(&utc).contains(" UTC"));

    let response = app
        .post_form(
            &app.client,
            "/preferences/zone",
            &[("tz", "Asia/Kolkata"), ("next", "/unknown")],
        )
        .await;
    assert_eq!(response.status().as_u16(), 303);
    assert_eq!(response.headers()["location"], "/unknown");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(cookie, "idem_tz=Asia/Kolkata");

    let (_, ist) = app.get("/unknown").await;
    assert!(
        visible(&ist).contains(" IST"),
        "times are shown in the chosen zone"
    );
    assert!(
        ist.contains(r#"<option value="Asia/Kolkata" selected"#),
        "the zone is named on screen"
    );

    let unknown_zone = app
        .post_form(
            &app.client,
            "/preferences/zone",
            &[("tz", "Mars/Olympus_Mons"), ("next", "/")],
        )
        .await;
    assert_eq!(unknown_zone.status().as_u16(), 400);
    let away = app
        .post_form(
            &app.client,
            "/preferences/zone",
            &[("tz", "UTC"), ("next", "//evil.example/")],
        )
        .await;
    assert_eq!(
        away.headers()["location"],
        "/",
        "never a redirect to another site"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_page_shows_who_replayed_a_key_and_filters_by_actor_action_key_time_and_recoveries()
 {
    use idem_app::links::with_query;
    let app = spawn_app(TestDatabase::sqlite().await).await;
    app.create_user("olga", idem_domain::Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let key = "refund:9 / ✓ #% مفتاح";
    let id = common::dead_letter(&app.store, key).await;
    assert_eq!(
        common::replay(&app, &olga, id, "audit-page-1")
            .await
            .status()
            .as_u16(),
        200
    );

    // A viewer may not read it: addresses and failed sign-ins are in it.
    let (status, html) = app.get("/audit").await;
    assert_eq!(status, 403);
    assert!(visible(&html).contains("Not allowed"), "{}", visible(&html));
    let get = |path: String| {
        let olga = olga.clone();
        let url = app.url(&path);
        async move { common::get(&olga, &url).await }
    };

    // Unfiltered: the replay and both sign-ins, newest first.
    let (status, html) = get("/audit".to_owned()).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    let replay = page
        .find("olga operator replay")
        .expect("the replay is listed");
    let olga_login = page.find("olga operator login").expect("olga's sign-in");
    let viewer_login = page
        .find("viewer viewer login")
        .expect("the viewer's sign-in");
    assert!(
        replay < olga_login && olga_login < viewer_login,
        "newest first: {page}"
    );
    assert!(
        page.contains(&format!("{key} orders")),
        "the replayed key and its consumer are in the table: {page}"
    );
    assert!(page.contains("open → replayed"), "{page}");
    assert!(
        text(&html).contains(&key_href("orders", key)),
        "the key links to its page"
    );

    for filter in [("key", key), ("actor", "olga"), ("action", "replay")] {
        let (status, html) = get(with_query("/audit", &[filter])).await;
        assert_eq!(status, 200, "{filter:?}");
        let page = visible(&html);
        assert!(page.contains("olga operator replay"), "{filter:?}: {page}");
        assert!(!page.contains("viewer viewer login"), "{filter:?}: {page}");
    }
    let (_, html) = get(with_query(
        "/audit",
        &[("actor", "olga"), ("action", "logout")],
    ))
    .await;
    assert!(visible(&html).contains("No audit entry matches."));

    // Recoveries only: the replay, with how long the letter waited; no sign-in.
    let (_, html) = get("/audit?recoveries=1".to_owned()).await;
    let page = visible(&html);
    assert!(page.contains("olga operator replay"), "{page}");
    assert!(page.contains("ok · recovered after"), "{page}");
    assert!(!page.contains("olga operator login"), "{page}");
    // A window: the replay is inside the last hour, not in the one before.
    let hour = |h: i64| {
        (chrono::Utc::now() + chrono::TimeDelta::hours(h))
            .format("%Y-%m-%dT%H:%MZ")
            .to_string()
    };
    let inside = with_query(
        "/audit",
        &[("from", &hour(-1)), ("to", &hour(1)), ("recoveries", "1")],
    );
    assert!(visible(&get(inside).await.1).contains("olga operator replay"));
    let before = with_query("/audit", &[("from", &hour(-3)), ("to", &hour(-2))]);
    assert!(visible(&get(before).await.1).contains("No audit entry matches."));

    for (path, says) in [
        ("/audit?from=yesterday".to_owned(), "is not a time"),
        ("/audit?actor=ol%00ga".to_owned(), "control character"),
        (
            format!("/audit?action={}", "a".repeat(300)),
            "300 bytes long",
        ),
        (format!("/audit?key={}", "k".repeat(513)), "513 bytes long"),
        (
            "/audit?cursor=bm90LWEtY3Vyc29y".to_owned(),
            "That page link is invalid or out of date",
        ),
    ] {
        let (status, html) = get(path.clone()).await;
        assert_eq!(status, 400, "{path}");
        assert!(visible(&html).contains(says), "{path} says {says:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_navigation_offers_each_person_only_what_their_role_opens() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    for page in ["/", "/keys", "/dead-letters"] {
        let (status, html) = app.get(page).await;
        assert_eq!(status, 200);
        assert!(
            !html.contains("href=\"/audit\""),
            "a viewer is not offered the audit log on {page}"
        );
        let (_, html) = get(&olga, &app.url(page)).await;
        assert!(
            html.contains("href=\"/audit\""),
            "an operator is, on {page}"
        );
    }
    assert_eq!(app.get("/audit").await.0, 403, "and it stays refused");
}
