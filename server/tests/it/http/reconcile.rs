//! Reconciling with a provider from the pages, on both backends: an
//! operator uploads an export, reviews its classes, and applies one — a
//! key someone settled since skipped and named; a viewer, a bad field and
//! an unreadable export keep nothing.

use chrono::TimeDelta;
use idem_domain::{ClaimStatus, Role};
use idem_store::{Outcome, Store, Ts, testing::TestDatabase};

use super::{
    common::{TestApp, forms, get, location, post_as_browser, spawn_with, visible},
    ended, payments_claim_at, payments_status,
};

/// A claim of `payments` for `key`, delivered 30 minutes ago, with
/// `outcome` recorded then.
async fn claimed_half_an_hour_ago(store: &Store, key: &str, outcome: Outcome<'_>) {
    payments_claim_at(store, key, outcome, Ts::now() - TimeDelta::minutes(30)).await;
}

/// A multipart form body as a browser sends it: `fields`, then the file.
fn multipart(fields: &[(&str, &str)], file: (&str, &str)) -> (String, Vec<u8>) {
    let boundary = "----idem-test-boundary-7MA4YWxkTrZu0gW";
    let mut body = String::new();
    for (name, value) in fields {
        body.push_str(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    let (file_name, content) = file;
    body.push_str(&format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"export\"; filename=\"{file_name}\"\r\n\
         Content-Type: text/csv\r\n\r\n{content}\r\n--{boundary}--\r\n"
    ));
    (
        format!("multipart/form-data; boundary={boundary}"),
        body.into_bytes(),
    )
}

async fn upload(
    app: &TestApp,
    client: &reqwest::Client,
    fields: &[(&str, &str)],
    file: (&str, &str),
) -> reqwest::Response {
    let (content_type, body) = multipart(fields, file);
    client
        .post(app.url(idem_app::api::RECONCILE_UPLOAD_PATH))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "text/html")
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the server answers")
}

fn line(reference: &str, key: &str, status: &str, minutes_ago: i64) -> String {
    let at = (chrono::Utc::now() - TimeDelta::minutes(minutes_ago)).to_rfc3339();
    format!(
        "{reference},\"{}\",{status},{at}\n",
        key.replace('"', "\"\"")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reconciles_an_export_and_applies_a_class_and_a_settled_key_is_skipped() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        reconcile_and_apply(db).await;
    }
}

async fn reconcile_and_apply(db: TestDatabase) {
    let app = spawn_with(|c| c.redrive_per_second = 100, db).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let unknown = Outcome::Unknown { error: "timeout" };
    let keys = ["<b>pay:1</b>", "pay/2 💶", "pay:3 ‏مرحبا"];
    for key in keys {
        claimed_half_an_hour_ago(&app.store, key, unknown).await;
    }
    claimed_half_an_hour_ago(
        &app.store,
        "pay:4",
        Outcome::Sent {
            provider_ref: Some("ch_4"),
        },
    )
    .await;

    // The form offers the consumers Olga operates.
    let (status, html) = get(&olga, &app.url("/reconcile")).await;
    assert_eq!(status, 200);
    let form = forms(&html)
        .into_iter()
        .find(|f| f.action == idem_app::api::RECONCILE_UPLOAD_PATH)
        .expect("the upload form");
    let action_id = form.field("action_id").unwrap().to_owned();
    assert!(html.contains("<option value=\"payments\">"), "{html}");

    let export = format!(
        "Message-ID,Idempotency Key,Event,Timestamp\n{}{}{}{}{}this line is not a record\n{}",
        line("ch_0", "nobody", "failed", 40),
        line("ch_1", keys[0], "delivered", 30),
        line("ch_2", keys[1], "queued", 30),
        line("ch_4", "pay:4", "delivered", 30),
        line("ch_9", "someone-else's", "delivered", 20),
        line("ch_end", "nobody", "failed", 0),
    );
    let fields = [
        ("action_id", action_id.as_str()),
        ("consumer", "payments"),
        ("latency_seconds", "60"),
        ("status_words", "queued=accepted"),
    ];
    let response = upload(&app, &olga, &fields, ("messages <02:00>.csv", &export)).await;
    assert_eq!(response.status().as_u16(), 303);
    let page_path = location(&response);
    assert!(page_path.starts_with("/reconciliations/"), "{page_path}");
    // Sent again (a double click): the same reconciliation.
    let again = upload(&app, &olga, &fields, ("messages <02:00>.csv", &export)).await;
    assert_eq!(location(&again), page_path);

    let (status, html) = get(&olga, &app.url(&page_path)).await;
    assert_eq!(status, 200);
    let page = visible(&html);
    for says in [
        "Unknown here, accepted there (2)",
        "Unknown here, absent or failed there (1)",
        "Accepted there, not sent here (1)",
        "6 read, 1 bad lines",
        "line 7: expected 4 fields",
        "messages <02:00>.csv",
        "Resolve these 2 as sent",
        // The unreadable line may be its call: shown, not offered.
        "no record there; held back: a line of the export could not be read",
    ] {
        assert!(page.contains(says), "the page says {says:?}: {page}");
    }
    assert!(!html.contains("<b>pay:1"), "keys are text, never markup");
    assert!(!html.contains("messages <02"), "the file name is text");
    assert!(
        !page.contains("Mark these"),
        "nothing to retry that the export proves: {page}"
    );
    // Nothing changed yet.
    assert_eq!(
        payments_status(&app.store, keys[0]).await,
        ClaimStatus::Unknown
    );

    // Someone settles the second by hand while Olga reviews.
    let by_hand = "UPDATE claims SET status = 'failed', version = version + 1 WHERE idempotency_key = 'pay/2 💶'";
    idem_store::testing::execute_raw(&app.store, by_hand, by_hand)
        .await
        .unwrap();

    let apply = forms(&html)
        .into_iter()
        .find(|f| f.field("class") == Some("unknown-accepted"))
        .expect("the apply form of unknown-accepted");
    let fields: Vec<(&str, &str)> = apply
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let response = post_as_browser(&app, &olga, &page_path, &apply.action, &fields).await;
    assert_eq!(response.status().as_u16(), 303);
    let run = location(&response);
    assert!(run.starts_with("/redrives/"), "{run}");
    let run_page = ended(&app, &olga, run.split('?').next().unwrap()).await;
    assert!(run_page.contains("1 resolved, 1 skipped"), "{run_page}");
    assert!(run_page.contains("reconciliation #"), "{run_page}");
    assert_eq!(
        payments_status(&app.store, keys[0]).await,
        ClaimStatus::Sent
    );
    assert_eq!(
        payments_status(&app.store, keys[1]).await,
        ClaimStatus::Failed,
        "the hand's stands"
    );
    assert_eq!(
        payments_status(&app.store, keys[2]).await,
        ClaimStatus::Unknown,
        "another class"
    );
    // Pressed twice: the same run.
    let again = post_as_browser(&app, &olga, &page_path, &apply.action, &fields).await;
    assert_eq!(location(&again).split('?').next(), run.split('?').next());

    // The reconciliation now says what applied it, and the key links to it.
    let (_, html) = get(&olga, &app.url(&page_path)).await;
    let page = visible(&html);
    let run_number = run
        .trim_start_matches("/redrives/")
        .split('?')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        page.contains(&format!("Applied by Bulk resolve #{run_number}")),
        "{page}"
    );
    assert!(
        !page.contains("Resolve these 2 as sent"),
        "nothing left to apply: {page}"
    );
    let key_page = format!("/keys/payments/{}", idem_domain::encode_segment(keys[0]));
    let (_, html) = get(&olga, &app.url(&key_page)).await;
    assert!(
        html.contains(&format!("href=\"{page_path}\"")),
        "the key links its reconciliation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_a_bad_field_and_an_unreadable_export_keep_nothing() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        keep_nothing(db).await;
    }
}

async fn keep_nothing(db: TestDatabase) {
    let app = spawn_with(|_| {}, db).await;
    app.create_user("olga", Role::Operator).await;
    app.create_user("vera", Role::Viewer).await;
    let (olga, vera) = (app.sign_in("olga").await, app.sign_in("vera").await);
    claimed_half_an_hour_ago(&app.store, "pay:1", Outcome::Unknown { error: "timeout" }).await;
    let export = format!(
        "reference,key,status,time\n{}",
        line("ch_1", "pay:1", "delivered", 30)
    );
    let good = [
        ("action_id", "reconcile-0123456789-a"),
        ("consumer", "payments"),
        ("latency_seconds", "60"),
    ];

    // Nobody signed in, however often: refused, nothing kept.
    for _ in 0..20 {
        let response = upload(&app, &app.client, &good, ("m.csv", &export)).await;
        assert_eq!(response.status().as_u16(), 403);
    }
    assert_eq!(kept(&app).await, 0);

    let (_, html) = get(&vera, &app.url("/reconcile")).await;
    assert!(
        !html.contains("enctype=\"multipart/form-data\""),
        "a viewer is offered no upload"
    );
    let response = upload(&app, &vera, &good, ("m.csv", &export)).await;
    assert_eq!(response.status().as_u16(), 403);

    for (fields, file, status, says) in [
        (
            vec![
                ("action_id", "reconcile-0123456789-b"),
                ("consumer", "payments"),
                ("latency_seconds", "soon"),
            ],
            export.clone(),
            400,
            "The latency bound “soon”",
        ),
        (
            vec![
                ("action_id", "reconcile-0123456789-c"),
                ("consumer", "payments"),
                ("status_words", "queued"),
            ],
            export.clone(),
            400,
            "word=accepted",
        ),
        (
            vec![
                ("action_id", "reconcile-0123456789-d"),
                ("consumer", "<script>x</script>"),
            ],
            export.clone(),
            400,
            "no claim of a consumer named “<script>x</script>”",
        ),
        (
            good.to_vec(),
            "reference,when\nch_1,2026-12-05T01:00:00Z\n".to_owned(),
            400,
            "no status column",
        ),
        (good.to_vec(), String::new(), 400, "No export was sent"),
    ] {
        let response = upload(&app, &olga, &fields, ("m.csv", &file)).await;
        assert_eq!(response.status().as_u16(), status, "{says}");
        let html = response.text().await.unwrap();
        assert!(visible(&html).contains(says), "{says}: {}", visible(&html));
        assert!(!html.contains("<script>x"), "shown as text");
    }
    assert_eq!(kept(&app).await, 0, "nothing kept");

    // Larger than an export may be: refused while it streams in.
    let huge = "x".repeat(idem::reconcile::EXPORT_MAX_BYTES + 10);
    let response = upload(&app, &olga, &good, ("huge.csv", &huge)).await;
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(kept(&app).await, 0, "nothing kept");
}

/// How many reconciliations `app` keeps.
async fn kept(app: &TestApp) -> usize {
    let every = idem_domain::Within::Every;
    app.store
        .reconcile()
        .reconciliations(&every, 10)
        .await
        .unwrap()
        .len()
}
