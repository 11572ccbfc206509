//! A store read through an adapter: its unknown outcomes are shown and
//! resolved in its own table (the adapter's write-back); its dead letters are
//! its own system's to replay.

use idem_app::links::key_href;
use idem_domain::{ClaimStatus, Role};
use idem_store::testing::{self, TestDatabase};

use super::{
    common::{self, visible},
    install, spawn_read_only, team_pool,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reminder_store_s_unknown_outcome_is_resolved_in_its_own_table_and_nothing_else_is_written()
 {
    let db = TestDatabase::postgres().await;
    let pool = team_pool(&db.url).await;
    sqlx::raw_sql(
        "CREATE TABLE reminder_sends (reminder_id text PRIMARY KEY, status text NOT NULL,
             provider_message_id text, last_error text, attempts integer NOT NULL DEFAULT 0,
             created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now());",
    )
    .execute(&pool)
    .await
    .unwrap();
    install(&db.url, "reminder_store.sql").await;

    // The store's worker: claim as pending, call the provider, record what it said.
    let send = |reminder: &'static str,
                answer: Result<&'static str, (&'static str, &'static str)>| {
        let pool = pool.clone();
        async move {
            let claimed = sqlx::query(
                "INSERT INTO reminder_sends (reminder_id, status) VALUES ($1, 'pending') ON CONFLICT DO NOTHING",
            )
            .bind(reminder)
            .execute(&pool)
            .await
            .unwrap()
            .rows_affected()
                == 1;
            if !claimed {
                return;
            }
            let (status, reference, error) = match answer {
                Ok(reference) => ("sent", Some(reference), None),
                Err((status, error)) => (status, None, Some(error)),
            };
            sqlx::query(
                "UPDATE reminder_sends SET status = $2, provider_message_id = $3, last_error = $4, \
                 attempts = attempts + 1, updated_at = now() WHERE reminder_id = $1",
            )
            .bind(reminder)
            .bind(status)
            .bind(reference)
            .bind(error)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    send("renewal:account-1842:2026-09-30", Ok("sms_0001")).await;
    send("renewal:account-1842:2026-09-30", Ok("sms_0002")).await;
    send(
        "renewal:account-2210:2026-09-30",
        Err(("unknown", "no response within 30 s")),
    )
    .await;
    send(
        "renewal:account-3001:2026-09-30",
        Err(("failed", "400 Bad Request: invalid number")),
    )
    .await;

    let app = spawn_read_only(db, "reminders-legacy").await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;

    let (status, html) = common::get(&olga, &app.url("/unknown")).await;
    assert_eq!(status, 200);
    let list = visible(&html);
    assert!(list.contains("renewal:account-2210:2026-09-30"), "{list}");
    assert!(list.contains("no response within 30 s"), "{list}");

    let legacy = testing::consumer("reminders-legacy");
    let sent = app
        .store
        .claims()
        .claim(&legacy, &testing::key("renewal:account-1842:2026-09-30"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sent.status, ClaimStatus::Sent);
    assert_eq!(
        sent.provider_ref.as_deref(),
        Some("sms_0001"),
        "the duplicate did not send again"
    );
    assert_eq!(sent.duplicate_count, 1);
    let failed = app
        .store
        .claims()
        .claim(&legacy, &testing::key("renewal:account-3001:2026-09-30"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(failed.status, ClaimStatus::Failed);

    // The page says the consumer is read through an adapter, and that a
    // resolution is written into the team's own table; no retry is offered.
    let unknown_key = "renewal:account-2210:2026-09-30";
    let typed_key = testing::key(unknown_key);
    let (status, html) =
        common::get(&olga, &app.url(&key_href("reminders-legacy", unknown_key))).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    assert!(
        page.contains("is read through an adapter over its own tables"),
        "{page}"
    );
    assert!(
        page.contains("idem_reminder_sends_resolve"),
        "the page names the function that writes back: {page}"
    );
    assert!(
        html.contains("name=\"outcome\""),
        "a resolve form is offered"
    );
    assert!(
        !html.contains("value=\"failed-retry\""),
        "no retry through Idem's outbox is offered"
    );

    let unknown = app
        .store
        .claims()
        .claim(&legacy, &typed_key)
        .await
        .unwrap()
        .unwrap();
    let resolve = |action_id: &'static str, outcome: &'static str, reference: &'static str| {
        let version = unknown.version.to_string();
        let olga = olga.clone();
        let url = app.url(common::server_fn("resolve_unknown"));
        async move {
            olga.post(url)
                .header("sec-fetch-site", "same-origin")
                .header("accept", "application/json")
                .form(&[
                    ("consumer", "reminders-legacy"),
                    ("key", unknown_key),
                    ("version", version.as_str()),
                    ("action_id", action_id),
                    ("outcome", outcome),
                    ("provider_ref", reference),
                    ("reason", "the provider's dashboard shows it delivered"),
                ])
                .send()
                .await
                .unwrap()
        }
    };
    let team_row = |key: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (String, Option<String>)>(
                "SELECT status, provider_message_id FROM reminder_sends WHERE reminder_id = $1",
            )
            .bind(key)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };

    // A retry sent by hand is refused, and changes nothing anywhere.
    // (A refusal is the action's answer, shown on the form's page.)
    let refused = resolve("resolve-legacy-retry", "failed-retry", "").await;
    assert_eq!(refused.status().as_u16(), 200);
    let said = refused.text().await.unwrap();
    assert!(
        said.contains("Refused") && said.contains("retry in its own system"),
        "{said}"
    );
    assert_eq!(
        app.store
            .claims()
            .claim(&legacy, &typed_key)
            .await
            .unwrap()
            .unwrap(),
        unknown
    );
    assert_eq!(team_row(unknown_key).await, ("unknown".to_owned(), None));

    // Resolved as sent: the team's table holds it, Idem shows it, one audit row.
    let done = resolve("resolve-legacy-2210", "sent", "sms_0003").await;
    assert_eq!(
        done.status().as_u16(),
        200,
        "{}",
        done.text().await.unwrap()
    );
    assert_eq!(
        team_row(unknown_key).await,
        ("sent".to_owned(), Some("sms_0003".to_owned())),
        "the store's workers see the outcome in their own table"
    );
    let resolved = app
        .store
        .claims()
        .claim(&legacy, &typed_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resolved.status, ClaimStatus::Sent);
    assert_eq!(resolved.provider_ref.as_deref(), Some("sms_0003"));
    let audit = app
        .store
        .claims()
        .audit_for_key(&legacy, &typed_key)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");

    // Pressed twice: the same answer, nothing written twice.
    let again = resolve("resolve-legacy-2210", "sent", "sms_0003").await;
    assert_eq!(again.status().as_u16(), 200);
    assert_eq!(
        app.store
            .claims()
            .audit_for_key(&legacy, &typed_key)
            .await
            .unwrap()
            .len(),
        1
    );

    // The team's table and Idem's mirror disagree (a worker that wrote with
    // the mirror's trigger switched off): the team's outcome is not
    // overwritten, Idem's mirror is not changed, and nothing is audited.
    let raced_key = "renewal:account-4100:2026-09-30";
    send(raced_key, Err(("unknown", "no response within 30 s"))).await;
    let raced = app
        .store
        .claims()
        .claim(&legacy, &testing::key(raced_key))
        .await
        .unwrap()
        .unwrap();
    sqlx::raw_sql(
        "ALTER TABLE reminder_sends DISABLE TRIGGER USER; \
         UPDATE reminder_sends SET status = 'failed', last_error = 'worker gave up' \
         WHERE reminder_id = 'renewal:account-4100:2026-09-30'; \
         ALTER TABLE reminder_sends ENABLE TRIGGER USER;",
    )
    .execute(&pool)
    .await
    .unwrap();
    let refused = olga
        .post(app.url(common::server_fn("resolve_unknown")))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[
            ("consumer", "reminders-legacy"),
            ("key", raced_key),
            ("version", &raced.version.to_string()),
            ("action_id", "resolve-legacy-4100"),
            ("outcome", "sent"),
            ("provider_ref", "sms_0009"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 200);
    let said = refused.text().await.unwrap();
    assert!(
        said.contains("Refused") && said.contains("no longer holds this key as unresolved"),
        "{said}"
    );
    assert_eq!(
        team_row(raced_key).await,
        ("failed".to_owned(), None),
        "the worker's outcome stands"
    );
    assert_eq!(
        app.store
            .claims()
            .claim(&legacy, &testing::key(raced_key))
            .await
            .unwrap()
            .unwrap(),
        raced,
        "the refused resolution was rolled back"
    );
    assert!(
        app.store
            .claims()
            .audit_for_key(&legacy, &testing::key(raced_key))
            .await
            .unwrap()
            .is_empty(),
        "nothing was done, so nothing is audited"
    );

    // A dead letter of a read-only consumer (its team's relay never reads
    // Idem's outbox) cannot be replayed from Idem either.
    let now = idem_store::Ts::now();
    let mut tx = app.store.begin().await.unwrap();
    let letter = tx
        .dead_letter(&idem_store::NewDeadLetter {
            consumer: "reminders-legacy",
            queue: "reminders-dlq",
            key: unknown_key,
            message_id: "m-9",
            payload: "{}",
            delivery_count: 3,
            first_failure_at: now,
            last_error: Some("no response within 30 s"),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let (status, html) = common::get(&olga, &app.url(&format!("/dead-letters/{letter}"))).await;
    assert_eq!(status, 200);
    assert!(visible(&html).contains("is read through an adapter"));
    let refused = common::replay(&app, &olga, letter, "replay-legacy-9").await;
    assert_eq!(refused.status().as_u16(), 409);
    let still = app.store.letter(letter).await;
    assert_eq!(still.state, idem_domain::DeadLetterState::Open);
    // Nor redriven: not as that consumer's, nor among every consumer's.
    for (consumer, says) in [
        ("reminders-legacy", "read through an adapter"),
        ("", "Choose one consumer: "),
    ] {
        let refused = common::call(
            &app,
            &olga,
            "start_redrive",
            &[
                ("action_id", format!("redrive-legacy-{}", consumer.len())),
                ("consumer", consumer.into()),
            ],
        )
        .await;
        assert_eq!(refused.status().as_u16(), 409, "{consumer:?}");
        let body = refused.text().await.unwrap();
        assert!(body.contains(says), "{consumer:?}: {body}");
    }
    // Nor discarded in bulk: not as that consumer's; over every consumer,
    // its letters are left out rather than the whole discard refused.
    let bulk = |consumer: &'static str| {
        let (app, olga) = (&app, &olga);
        async move {
            let response = common::call(
                app,
                olga,
                "start_bulk_discard",
                &[
                    (
                        "action_id",
                        format!("bulk-discard-legacy-{}", consumer.len()),
                    ),
                    ("consumer", consumer.into()),
                    ("offer", idem_domain::RedriveOffer::of([]).token()),
                    ("reason", "sent already".into()),
                ],
            )
            .await;
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, body) = bulk("reminders-legacy").await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("read through an adapter"), "{body}");
    let (status, body) = bulk("").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("nothing to discard"), "{body}");
    assert!(
        app.store
            .runs()
            .running_redrives()
            .await
            .unwrap()
            .is_empty(),
        "no redrive was started"
    );

    // When the team resolves an outcome in their own store, Idem follows.
    let theirs = "renewal:account-5200:2026-09-30";
    send(theirs, Err(("unknown", "no response within 30 s"))).await;
    let typed = testing::key(theirs);
    let before = app
        .store
        .claims()
        .claim(&legacy, &typed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before.status, ClaimStatus::Unknown);
    sqlx::query("UPDATE reminder_sends SET status = 'sent', provider_message_id = 'sms_0004' WHERE reminder_id = $1")
        .bind(theirs)
        .execute(&pool)
        .await
        .unwrap();
    let followed = app
        .store
        .claims()
        .claim(&legacy, &typed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(followed.status, ClaimStatus::Sent);
    assert!(followed.version > before.version);
    // The store did not move updated_at; the change is dated all the same.
    assert!(followed.status_at > before.status_at);
    assert_eq!(followed.provider_ref.as_deref(), Some("sms_0004"));
}
