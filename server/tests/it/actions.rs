//! Operator actions over real HTTP, as a person uses them: two actions from
//! one page, each reaching the database and each answer naming its own
//! target; a form used twice for different things refused with a 409; the
//! answer a page shows coming from the server, never from its address.

use crate::common;
use crate::common::{
    Form, TestApp, forms, location, post_as_browser, server_fn, spawn_app, visible,
};
use base64::Engine;
use idem_app::links::key_href;
use idem_domain::{ClaimStatus, DeadLetterState, Role};
use idem_store::{
    Delivery, NewDeadLetter, Outcome, Store, Ts,
    testing::{self, TestDatabase},
};

pub(crate) const CONSUMER: &str = "order-events";
/// A key with every character a URL can trip on.
const KEY: &str = "refund:EU/2026/Ø-PO #7 50%";

/// A claim for `key` ending in `outcome`, and `letters` open dead letters for it.
async fn key_with(store: &Store, key: &str, outcome: Outcome<'_>, letters: usize) -> Vec<i64> {
    let now = Ts::now();
    let mut tx = store.begin().await.unwrap();
    tx.claim(&Delivery {
        consumer: CONSUMER,
        key,
        payload_hash: None,
        at: now,
    })
    .await
    .unwrap();
    tx.lease(CONSUMER, key, now, now).await.unwrap();
    tx.record(CONSUMER, key, outcome, now).await.unwrap();
    let mut ids = Vec::new();
    for n in 0..letters {
        let message = format!("m-{n}");
        ids.push(
            tx.dead_letter(&NewDeadLetter {
                consumer: CONSUMER,
                queue: "order-events.fifo",
                key,
                message_id: &message,
                payload: "{}",
                delivery_count: 3,
                first_failure_at: now,
                last_error: Some("429 Too Many Requests"),
                at: now,
            })
            .await
            .unwrap(),
        );
    }
    tx.commit().await.unwrap();
    ids
}

/// Idem on `db` with `olga` (an operator) signed in, and `key` claimed,
/// ending in `outcome`, with `letters` open dead letters.
pub(crate) struct Scene {
    pub(crate) app: TestApp,
    pub(crate) olga: reqwest::Client,
    pub(crate) letters: Vec<i64>,
}

impl Scene {
    pub(crate) async fn new(
        db: TestDatabase,
        key: &str,
        outcome: Outcome<'_>,
        letters: usize,
    ) -> Scene {
        let app = spawn_app(db).await;
        app.create_user("olga", Role::Operator).await;
        let olga = app.sign_in("olga").await;
        let letters = key_with(&app.store, key, outcome, letters).await;
        Scene { app, olga, letters }
    }

    /// The forms olga sees on `key`'s page.
    async fn forms_on(&self, key: &str) -> Vec<Form> {
        let html = common::get(&self.olga, &self.app.url(&key_href(CONSUMER, key)))
            .await
            .1;
        forms(&html)
    }
}

const FAILED: Outcome<'static> = Outcome::Permanent {
    error: "400 from the provider",
};

/// The replay form for dead letter `id` on a page.
fn replay_form(page: &[Form], id: i64) -> Form {
    page.iter()
        .find(|f| f.action.contains("replay_dead_letter") && f.field("id") == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no replay form for dead letter {id} in {page:?}"))
        .clone()
}

/// Sends `form` as it stands, with `extra` fields, as a browser without
/// JavaScript: the answer is a redirect back to `page`; returns the answer
/// the page then shows.
async fn submit(
    app: &TestApp,
    client: &reqwest::Client,
    page: &str,
    form: &Form,
    extra: &[(&str, &str)],
) -> String {
    let mut fields: Vec<(&str, &str)> = form
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    fields.extend_from_slice(extra);
    let response = post_as_browser(app, client, page, &form.action, &fields).await;
    assert_eq!(response.status().as_u16(), 303, "a plain form is sent back");
    let back = location(&response);
    assert!(
        back.starts_with(page) && back.contains("answer="),
        "back to the page it came from, naming the answer: {back}"
    );
    let (status, html) = common::get(client, &app.url(&back)).await;
    assert_eq!(status, 200, "{back}");
    common::answer_shown(&html).unwrap_or_else(|| panic!("no answer shown on {back}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replays_from_one_key_page_each_replay_their_own_dead_letter_on_sqlite() {
    two_replays_from_one_key_page_each_replay_their_own_dead_letter(TestDatabase::sqlite().await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replays_from_one_key_page_each_replay_their_own_dead_letter_on_postgres() {
    two_replays_from_one_key_page_each_replay_their_own_dead_letter(TestDatabase::postgres().await)
        .await;
}

async fn two_replays_from_one_key_page_each_replay_their_own_dead_letter(db: TestDatabase) {
    let Scene {
        app,
        olga,
        letters: ids,
    } = Scene::new(db, KEY, FAILED, 2).await;
    let page = key_href(CONSUMER, KEY);
    let shown = forms(&common::get(&olga, &app.url(&page)).await.1);
    let (first, second) = (replay_form(&shown, ids[0]), replay_form(&shown, ids[1]));
    assert_ne!(
        first.field("action_id"),
        second.field("action_id"),
        "each form carries its own action id"
    );

    let said = submit(&app, &olga, &page, &first, &[]).await;
    assert!(
        said.contains(&format!("Dead letter #{} replayed", ids[0])),
        "{said}"
    );
    // The second form, from the same page as it was first shown.
    let said = submit(&app, &olga, &page, &second, &[]).await;
    assert!(
        said.contains(&format!("Dead letter #{} replayed", ids[1])),
        "the second answer names the second dead letter: {said}"
    );
    assert!(
        !said.contains(&format!("Dead letter #{} replayed", ids[0])),
        "{said}"
    );

    let (consumer, key) = (testing::consumer(CONSUMER), testing::key(KEY));
    let letters = app
        .store
        .claims()
        .dead_letters_for_key(&consumer, &key)
        .await
        .unwrap();
    assert!(
        letters.iter().all(|d| d.state == DeadLetterState::Replayed),
        "both are replayed: {letters:?}"
    );
    let outbox = app
        .store
        .claims()
        .outbox_for_key(&consumer, &key)
        .await
        .unwrap();
    let mut replayed: Vec<_> = outbox.iter().filter_map(|o| o.dead_letter_id).collect();
    replayed.sort();
    assert_eq!(replayed, ids, "one outbox row for each dead letter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolving_then_replaying_from_one_key_page_does_both() {
    let unknown = Outcome::Unknown {
        error: "connection reset after send",
    };
    let scene = Scene::new(TestDatabase::sqlite().await, KEY, unknown, 1).await;
    let shown = scene.forms_on(KEY).await;
    let Scene {
        app,
        olga,
        letters: ids,
    } = scene;
    let page = key_href(CONSUMER, KEY);
    let resolve = shown
        .iter()
        .find(|f| f.action.contains("resolve_unknown"))
        .expect("a resolve form")
        .clone();
    let replay = replay_form(&shown, ids[0]);
    assert_ne!(resolve.field("action_id"), replay.field("action_id"));

    let said = submit(
        &app,
        &olga,
        &page,
        &resolve,
        &[
            ("outcome", "failed"),
            ("reason", "the provider has no record of it"),
        ],
    )
    .await;
    assert!(said.contains("Outcome resolved: failed"), "{said}");
    let said = submit(&app, &olga, &page, &replay, &[]).await;
    assert!(
        said.contains(&format!("Dead letter #{} replayed", ids[0])),
        "the replay's own answer: {said}"
    );
    assert!(!said.contains("Outcome resolved"), "{said}");

    let (consumer, key) = (testing::consumer(CONSUMER), testing::key(KEY));
    let claim = app
        .store
        .claims()
        .claim(&consumer, &key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.status, ClaimStatus::Failed);
    let letter = app.store.letter(ids[0]).await;
    assert_eq!(letter.state, DeadLetterState::Replayed);
    let audit = app
        .store
        .claims()
        .audit_for_key(&consumer, &key)
        .await
        .unwrap();
    let mut actions: Vec<_> = audit.iter().map(|e| e.action.as_str()).collect();
    actions.sort();
    assert_eq!(actions, ["replay", "resolve:failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_id_sent_again_for_another_dead_letter_is_a_409_that_names_the_first() {
    let Scene {
        app,
        olga,
        letters: ids,
    } = Scene::new(TestDatabase::sqlite().await, KEY, FAILED, 2).await;
    let post = |id: i64| {
        olga.post(app.url(server_fn("replay_dead_letter")))
            .header("sec-fetch-site", "same-origin")
            .header("accept", "application/json")
            .form(&[
                ("id", id.to_string().as_str()),
                ("action_id", "0123456789abcdef-form"),
            ])
            .send()
    };
    let first = post(ids[0]).await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    let again = post(ids[0]).await.unwrap();
    assert_eq!(
        again.status().as_u16(),
        200,
        "the same form again is the same action"
    );
    let reused = post(ids[1]).await.unwrap();
    assert_eq!(reused.status().as_u16(), 409);
    let body = reused.text().await.unwrap();
    assert!(body.contains("FormReused"), "{body}");
    assert!(
        body.contains(&format!("Dead letter #{} replayed", ids[0])),
        "{body}"
    );
    assert_eq!(
        app.store.letter(ids[1]).await.state,
        DeadLetterState::Open,
        "the second dead letter is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_shows_an_answer_once_and_only_the_one_the_server_kept() {
    let scene = Scene::new(TestDatabase::sqlite().await, KEY, FAILED, 1).await;
    let form = replay_form(&scene.forms_on(KEY).await, scene.letters[0]);
    let Scene { app, olga, .. } = scene;
    let page = key_href(CONSUMER, KEY);
    let response = post_as_browser(
        &app,
        &olga,
        &page,
        &form.action,
        &form
            .fields
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
    )
    .await;
    let back = location(&response);
    // Someone else's session holds no answer for that id (asked first, while
    // olga's answer still waits).
    app.create_user("pete", Role::Operator).await;
    let pete = app.sign_in("pete").await;
    assert_eq!(
        common::answer_shown(&common::get(&pete, &app.url(&back)).await.1),
        None
    );
    let first = common::answer_shown(&common::get(&olga, &app.url(&back)).await.1);
    assert!(first.is_some_and(|a| a.contains("replayed through outbox")));
    let again = common::answer_shown(&common::get(&olga, &app.url(&back)).await.1);
    assert_eq!(again, None, "shown once");

    // Words in a crafted link are never shown as an answer.
    let done = serde_json::json!({
        "Done": { "audit_id": 1, "outbox_id": null, "summary": "All refunds were sent. HACKED" }
    });
    let outcome = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(done.to_string());
    let error = serde_json::json!({ "BadRequest": "Call +1 555 0100 now. HACKED" });
    let err = base64::engine::general_purpose::URL_SAFE.encode(error.to_string());
    for crafted in [
        format!("{page}?outcome={outcome}"),
        format!("{page}?answer=HACKED"),
        format!(
            "{page}?__path={}&__err={err}",
            server_fn("replay_dead_letter")
        ),
    ] {
        let (status, html) = common::get(&olga, &app.url(&crafted)).await;
        assert_eq!(status, 200, "{crafted}");
        assert_eq!(common::answer_shown(&html), None, "{crafted}");
        assert!(
            !visible(&html).contains("HACKED"),
            "{crafted} showed its own words"
        );
    }
}

/// The action commits, then the session that would carry its answer to the
/// form's page cannot be written (here a trigger refuses every update of a
/// session): the person gets a page that says what was done, with a
/// warning, never a blank 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_the_session_cannot_keep_is_a_page_that_says_what_was_done() {
    let app = spawn_app(TestDatabase::postgres().await).await;
    app.create_user("olga", Role::Operator).await;
    let olga = app.sign_in("olga").await;
    let failed = Outcome::Retryable { error: "429" };
    let letter = key_with(&app.store, KEY, failed, 1).await[0];
    let page = format!("/dead-letters/{letter}");
    let form = forms(&common::get(&olga, &app.url(&page)).await.1)
        .into_iter()
        .find(|f| f.action.contains("replay_dead_letter"))
        .expect("a replay form");
    testing::execute_raw(
        &app.store,
        "",
        "CREATE FUNCTION refuse_session_writes() RETURNS trigger AS $$ \
         BEGIN RAISE EXCEPTION 'sessions are read-only in this test'; END $$ LANGUAGE plpgsql; \
         CREATE TRIGGER refuse_session_writes BEFORE UPDATE ON sessions \
         FOR EACH ROW EXECUTE FUNCTION refuse_session_writes();",
    )
    .await
    .unwrap();
    let fields: Vec<(&str, &str)> = form
        .fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .chain([("reason", "the provider is back")])
        .collect();
    let answer = post_as_browser(&app, &olga, &page, &form.action, &fields).await;
    let status = answer.status().as_u16();
    let shown = visible(&answer.text().await.unwrap());
    assert_eq!(status, 200, "{shown}");
    assert!(
        shown.contains(&format!("Dead letter #{letter} replayed")),
        "{shown}"
    );
    assert!(shown.contains("could not keep this answer"), "{shown}");
    assert_eq!(
        app.store.letter(letter).await.state,
        DeadLetterState::Replayed
    );
}
