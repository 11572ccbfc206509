//! Who opens the API: a live token, never a session cookie; and a token
//! opens no page.

use idem_domain::Role;

use super::{app_with_token, bare, get, on_both_backends, problem, token_of};
use crate::common::spawn_app;

on_both_backends!(
    a_token_opens_the_api_and_a_session_cookie_does_not,
    a_token_opens_no_page,
    a_revoked_or_expired_token_is_refused_at_the_next_request,
    a_token_holds_no_more_than_its_owner_holds_now,
    a_viewer_token_cannot_replay_a_dead_letter,
    a_token_limited_to_a_team_finds_another_teams_key_missing_and_its_team_unnamed,
);

async fn a_token_opens_the_api_and_a_session_cookie_does_not(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    let (status, _, json) = get(&app, &secret, "/api/v1/unknown").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["items"][0]["key"], "key-1");

    // `app.client` holds a viewer's session cookie.
    let response = app
        .client
        .get(app.url("/api/v1/unknown"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"idem\""
    );
    let (_, kind, json) = super::answer(response).await;
    assert_eq!(problem(&kind, &json), "/api/v1/problems/unauthorized");
    assert!(
        json["detail"]
            .as_str()
            .unwrap()
            .contains("idem token create")
    );

    for wrong in ["idem_not-a-token", "Basic b2xnYTpwYXNz", ""] {
        let response = bare()
            .get(app.url("/api/v1/unknown"))
            .header("authorization", format!("Bearer {wrong}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 401, "{wrong:?}");
    }
}

async fn a_token_opens_no_page(db: idem_store::testing::TestDatabase) {
    let (app, _, secret) = app_with_token(db).await;
    for page in ["/", "/unknown", "/keys/orders/key-1"] {
        let response = bare()
            .get(app.url(page))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 303, "{page} sends to sign-in");
        assert!(
            response.headers()["location"]
                .to_str()
                .unwrap()
                .starts_with("/login")
        );
    }
    let server_fn = bare()
        .get(app.url("/api/read/get_overview"))
        .bearer_auth(&secret)
        .send()
        .await
        .unwrap();
    assert_eq!(
        server_fn.status().as_u16(),
        401,
        "the pages' functions want a session"
    );
}

async fn a_revoked_or_expired_token_is_refused_at_the_next_request(
    db: idem_store::testing::TestDatabase,
) {
    let (app, _, secret) = app_with_token(db).await;
    assert_eq!(get(&app, &secret, "/api/v1/unknown").await.0, 200);
    idem::tokens::revoke(&app.store, "deploy-bot")
        .await
        .unwrap();
    let (status, kind, json) = get(&app, &secret, "/api/v1/unknown").await;
    assert_eq!(status, 401);
    assert!(
        json["detail"].as_str().unwrap().contains("revoked"),
        "{json}"
    );
    assert_eq!(problem(&kind, &json), "/api/v1/problems/unauthorized");

    let rights = "viewer".parse().unwrap();
    let short = idem::tokens::create(
        &app.store,
        &idem::tokens::Request {
            name: "brief",
            owner: "olga",
            rights: &rights,
            expires: Some(chrono::TimeDelta::hours(1)),
        },
    )
    .await
    .unwrap();
    assert_eq!(get(&app, &short, "/api/v1/unknown").await.0, 200);
    let expire = "UPDATE api_tokens SET expires_at = created_at WHERE name = 'brief'";
    idem_store::testing::execute_raw(&app.store, expire, expire)
        .await
        .unwrap();
    assert_eq!(get(&app, &short, "/api/v1/unknown").await.0, 401, "expired");

    let listed = idem::tokens::list(&app.store).await.unwrap();
    assert!(
        listed.contains("deploy-bot\tolga\toperator\trevoked"),
        "{listed}"
    );
    assert!(listed.contains("brief\tolga\tviewer\texpired"), "{listed}");
    assert!(!listed.contains(&secret) && !listed.contains(&short));
}

async fn a_token_holds_no_more_than_its_owner_holds_now(db: idem_store::testing::TestDatabase) {
    let (app, fixture, secret) = app_with_token(db).await;
    app.store
        .people()
        .set_role(&idem_store::testing::account("olga"), Role::Viewer)
        .await
        .unwrap();
    let path = format!("/api/v1/dead-letters/{}/replay", fixture.dead_letter);
    let (status, kind, json) =
        super::post(&app, &secret, &path, "k-demoted", &serde_json::json!({})).await;
    assert_eq!(status, 403, "{json}");
    assert_eq!(problem(&kind, &json), "/api/v1/problems/forbidden");
    assert!(
        json["detail"].as_str().unwrap().contains("needs operator"),
        "{json}"
    );
    let letter = app.store.letter(fixture.dead_letter).await;
    assert_eq!(
        letter.state,
        idem_domain::DeadLetterState::Open,
        "nothing replayed"
    );

    app.store
        .people()
        .set_disabled(&idem_store::testing::account("olga"), true)
        .await
        .unwrap();
    assert_eq!(
        get(&app, &secret, "/api/v1/unknown").await.0,
        401,
        "owner disabled"
    );
}

async fn a_viewer_token_cannot_replay_a_dead_letter(db: idem_store::testing::TestDatabase) {
    let app = spawn_app(db).await;
    let fixture = crate::common::Fixture::write(&app.store).await;
    let secret = token_of(&app.store, "reader", "vera", "operator", "viewer").await;
    let path = format!("/api/v1/dead-letters/{}/replay", fixture.dead_letter);
    let (status, _, json) = super::post(&app, &secret, &path, "k-1", &serde_json::json!({})).await;
    assert_eq!(status, 403, "{json}");
    assert_eq!(
        json["detail"], "Your role (viewer) may not do this; it needs operator.",
        "the pages' words"
    );
    let letter = app.store.letter(fixture.dead_letter).await;
    assert_eq!(letter.state, idem_domain::DeadLetterState::Open);
    assert_eq!(
        get(&app, &secret, "/api/v1/audit").await.0,
        403,
        "the audit log is for operators"
    );
}

async fn a_token_limited_to_a_team_finds_another_teams_key_missing_and_its_team_unnamed(
    db: idem_store::testing::TestDatabase,
) {
    let (app, fixture, _, _dir) = crate::team_rights::app_of_two_teams(db).await;
    let secret = token_of(
        &app.store,
        "payments-bot",
        "olga",
        "operator",
        "operator@payments",
    )
    .await;
    let (status, kind, theirs) = get(&app, &secret, "/api/v1/keys/orders/key-1").await;
    assert_eq!(status, 404, "{theirs}");
    assert_eq!(problem(&kind, &theirs), "/api/v1/problems/not-found");
    let (status, _, missing) = get(&app, &secret, "/api/v1/keys/orders/key-none").await;
    assert_eq!(status, 404);
    assert_eq!(
        theirs["detail"].as_str().unwrap().replace("key-1", "KEY"),
        missing["detail"]
            .as_str()
            .unwrap()
            .replace("key-none", "KEY"),
        "another team's key reads as one nobody wrote"
    );
    assert!(!theirs.to_string().contains("growth"), "{theirs}");

    let (status, _, json) = get(&app, &secret, "/api/v1/unknown").await;
    assert_eq!(status, 200);
    let consumers: Vec<&str> = json["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["consumer"].as_str().unwrap())
        .collect();
    assert!(
        !consumers.is_empty() && consumers.iter().all(|c| *c == "ledger"),
        "{consumers:?}"
    );

    // Discarding growth's letter answers as discarding one nobody has.
    let discard = |id: i64, key: &'static str| {
        let (app, secret) = (&app, &secret);
        async move {
            let path = format!("/api/v1/dead-letters/{id}/discard");
            let body = serde_json::json!({"reason": "sent"});
            let (status, _, json) = super::post(app, secret, &path, key, &body).await;
            let words = json["detail"].as_str().unwrap_or_default();
            (status, words.replace(&id.to_string(), "ID"))
        }
    };
    let theirs = discard(fixture.discardable, "k-1").await;
    let missing = discard(fixture.discardable + 10_000, "k-2").await;
    assert_eq!(theirs, missing);
    assert!(
        theirs.1.contains("There is no dead letter ID."),
        "{theirs:?}"
    );
    let letter = app.store.letter(fixture.discardable).await;
    assert_eq!(
        letter.state,
        idem_domain::DeadLetterState::Open,
        "growth's letter is untouched"
    );
}
