//! Who may call what: cross-site posts are refused, and each server function
//! answers only the roles it is for.

use idem_domain::Role;

use super::{
    app,
    common::{self, new_client},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_site_post_is_refused_and_a_same_origin_post_accepted() {
    let app = app().await;
    let form = [
        ("username", "viewer"),
        ("password", "viewer-password"),
        ("next", "/"),
    ];
    let post = |headers: &[(&'static str, &'static str)]| {
        let mut request = new_client().post(app.url("/login")).form(&form);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        request.send()
    };
    assert_eq!(
        post(&[("sec-fetch-site", "cross-site")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        post(&[("sec-fetch-site", "same-site")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        post(&[("origin", "https://evil.example")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        post(&[]).await.unwrap().status().as_u16(),
        403,
        "no proof of origin at all"
    );
    assert_eq!(
        post(&[("sec-fetch-site", "same-origin")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    // Without Sec-Fetch-Site, an Origin equal to the public origin is enough.
    assert_eq!(
        post(&[("origin", "http://127.0.0.1")])
            .await
            .unwrap()
            .status()
            .as_u16(),
        303
    );
    // Sign-out is a state change too.
    let out = app
        .client
        .post(app.url("/logout"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(out.status().as_u16(), 403);
    assert_eq!(app.get("/").await.0, 200, "still signed in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_server_function_called_properly_answers_its_role_and_refuses_the_others() {
    let app = app().await;
    app.create_user("olga", Role::Operator).await;
    app.create_user("ada", Role::Admin).await;
    let operator = app.sign_in("olga").await;
    let admin = app.sign_in("ada").await;
    let anonymous = new_client();
    let fixture = common::Fixture::write(&app.store).await;
    // An audit row of the fixture's key with a client address: the audit
    // rule (as on /audit) keeps it from viewers, whichever function
    // returns the row.
    const CLIENT: &str = "203.0.113.77";
    app.store
        .audit()
        .append_audit(&idem_store::NewAuditEntry {
            consumer: Some("orders"),
            key: Some(&fixture.key),
            client_addr: Some(CLIENT),
            ..idem_store::NewAuditEntry::new(
                "pete",
                "operator",
                idem_domain::AuditAction::Replay,
                idem_domain::AuditResult::Ok,
            )
        })
        .await
        .unwrap();
    let mut addresses_shown = 0;

    // The table of valid calls covers every registered function.
    let mut registered: Vec<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.to_owned())
        .collect();
    let mut covered: Vec<String> = fixture
        .valid_calls("any")
        .iter()
        .map(|(name, _)| common::server_fn(name).to_owned())
        .collect();
    registered.sort();
    covered.sort();
    assert_eq!(
        registered, covered,
        "a server function without valid arguments to test"
    );

    for (who, client, role) in [
        ("anonymous", &anonymous, None),
        ("viewer", &app.client, Some(Role::Viewer)),
        ("operator", &operator, Some(Role::Operator)),
        ("admin", &admin, Some(Role::Admin)),
    ] {
        for (name, fields) in fixture.valid_calls(who) {
            let path = common::server_fn(name);
            let needed = idem_app::auth::role_for_api_path(path).unwrap_or_else(|()| {
                panic!("{path} is under no authorization rule: it would be refused to everyone")
            });
            let response = common::call(&app, client, name, &fields).await;
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            let expected = match (needed, role) {
                (None, _) => 200,
                (Some(_), None) => 401,
                (Some(needed), Some(role)) if role.includes(needed) => 200,
                (Some(_), Some(_)) => 403,
            };
            assert_eq!(status, expected, "{name} as {who}: {body:.300}");
            if role.is_some_and(|r| r.includes(Role::Operator)) {
                addresses_shown += usize::from(body.contains(CLIENT));
            } else {
                assert!(
                    !body.contains(CLIENT),
                    "{name} gives the {who} a client address: {body:.300}"
                );
            }
        }
    }
    assert!(
        addresses_shown >= 2,
        "the key's story shows operators and admins where each action came from"
    );
    // The calls did what they say: the operator's replay and resolution
    // reached the database (the admin's came second and found them done).
    let audit = app
        .store
        .claims()
        .audit_for_key(
            &idem_store::testing::consumer("orders"),
            &idem_store::testing::key("key-1"),
        )
        .await
        .unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.action.as_str() == "replay" && e.actor == "olga")
            && audit
                .iter()
                .any(|e| e.action.as_str() == "resolve:sent" && e.actor == "olga"),
        "{audit:?}"
    );

    // A path no rule covers is refused even to an admin (deny by default),
    // and a viewer calling an operator action is refused and audited.
    let call = |client: &reqwest::Client, path: &str| {
        client
            .post(app.url(path))
            .header("sec-fetch-site", "same-origin")
            .send()
    };
    assert_eq!(
        call(&admin, "/api/new_function_without_a_rule")
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        call(&app.client, "/api/act/replay_dead_letter")
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    // Counted, and audited once its window has ended: a viewer pressing
    // on a forbidden path a hundred times adds one row, not a hundred.
    for _ in 0..99 {
        call(&app.client, "/api/act/replay_dead_letter")
            .await
            .unwrap();
    }
    let audit = app.store.latest_audit(10).await.unwrap();
    assert!(
        !audit.iter().any(|e| e.action.as_str() == "denied"),
        "{audit:?}"
    );
    let later = idem_store::Ts::from(chrono::Utc::now() + idem_store::REFUSAL_WINDOW);
    app.store
        .people()
        .close_refusal_windows(later)
        .await
        .unwrap();
    let audit = app.store.latest_audit(10).await.unwrap();
    // One row per reason: the operators' functions, and the admins'.
    let denied: Vec<_> = audit
        .iter()
        .filter(|e| e.action.as_str() == "denied" && e.actor == "viewer")
        .filter(|e| {
            e.reason
                .as_deref()
                .is_some_and(|r| r.contains("needs operator"))
        })
        .collect();
    assert_eq!(denied.len(), 1, "one row for all of them: {audit:?}");
    assert!(
        audit.iter().any(|e| e.action.as_str() == "denied"
            && e.actor == "viewer"
            && e.reason
                .as_deref()
                .is_some_and(|r| r.contains("(forbidden: needs admin)"))),
        "{audit:?}"
    );
    let reason = denied[0].reason.as_deref().unwrap();
    let (refused, rest) = reason.split_once(' ').unwrap();
    assert!(refused.parse::<u32>().unwrap() >= 100, "{reason}");
    assert!(
        rest.starts_with("requests refused (forbidden: needs operator), between "),
        "{reason}"
    );
}
