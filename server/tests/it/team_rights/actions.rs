//! What a person limited to payments does: replays payments', is refused
//! growth's, and redrives only what they operate.

use idem_store::testing::TestDatabase;

use super::{OURS_FAILED, app_of_two_teams, filled, growth_in, payments_letter, with_rights};
use crate::common::{self, text, visible};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_of_payments_replays_payments_dead_letter_and_finds_growth_s_missing() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (app, fixture, ours, _dir) = app_of_two_teams(db).await;
        let pam = app.sign_in("pam").await;

        // Growth's dead letter answers as an id nobody has: the same status
        // and words, no key, no team.
        let theirs = fixture.dead_letter;
        let missing = theirs + 10_000;
        let (status, html) = common::get(&pam, &app.url(&format!("/dead-letters/{theirs}"))).await;
        assert_eq!(status, 404);
        let page = text(&visible(&html)).replace(&theirs.to_string(), "ID");
        let (status, html_missing) =
            common::get(&pam, &app.url(&format!("/dead-letters/{missing}"))).await;
        assert_eq!(status, 404);
        let page_missing = text(&visible(&html_missing)).replace(&missing.to_string(), "ID");
        assert_eq!(page, page_missing);
        assert!(!page.contains("growth"), "{page}");
        assert_eq!(growth_in(&html), Vec::<&str>::new());

        // Payments' own: the replay form is there and works, once.
        let (status, html) = common::get(&pam, &app.url(&format!("/dead-letters/{ours}"))).await;
        assert_eq!(status, 200, "{html:.400}");
        assert!(text(&visible(&html)).contains(OURS_FAILED));
        let replay = common::forms(&html)
            .into_iter()
            .find(|f| f.action.contains("replay_dead_letter"))
            .expect("a replay form for payments' own dead letter");
        let page = format!("/dead-letters/{ours}");
        let reason = ("reason", "the bank confirmed nothing happened");
        let fields = filled(&replay, &[reason]);
        let response = common::post_as_browser(&app, &pam, &page, &replay.action, &fields).await;
        assert_eq!(response.status().as_u16(), 303);
        let letter = app.store.letter(ours).await;
        assert_eq!(letter.state, idem_domain::DeadLetterState::Replayed);

        // The same form aimed at growth's dead letter is refused as one
        // that does not exist.
        let growth_id = fixture.dead_letter.to_string();
        let aimed = filled(
            &replay,
            &[
                reason,
                ("id", &growth_id),
                ("action_id", "pam-aimed-elsewhere-1"),
            ],
        );
        let response = common::post_as_browser(&app, &pam, &page, &replay.action, &aimed).await;
        let shown = match response.status().as_u16() {
            303 => {
                let (_, html) = common::get(&pam, &app.url(&common::location(&response))).await;
                common::answer_shown(&html).unwrap_or_default()
            }
            status => format!("{status}: {}", response.text().await.unwrap()),
        };
        assert!(
            shown.contains(&format!("There is no dead letter {growth_id}.")),
            "{shown}"
        );
        assert!(!shown.contains("growth"), "{shown}");
        super::still_open(&app.store, fixture.dead_letter).await;

        // Vera reads every team and operates payments: growth's letters are
        // listed, and the redrive takes only payments' (the form says so).
        with_rights(&app.store, "vera", "viewer operator@payments").await;
        let vera = app.sign_in("vera").await;
        payments_letter(&app.store, "pay:later 💶").await;
        let (_, html) = common::get(&vera, &app.url("/dead-letters")).await;
        let page = text(&visible(&html));
        assert!(
            page.contains(&fixture.key),
            "growth's letters are listed to a viewer of growth"
        );
        assert!(
            page.contains("Redrive the one of your consumers"),
            "{page:.2000}"
        );
        let only = page
            .find("Only the dead letters")
            .map_or("", |at| &page[at..]);
        assert!(
            only.starts_with(
                "Only the dead letters of the consumers you operate are taken: ledger"
            ),
            "{only:.300}"
        );
        let redrive = common::forms(&html)
            .into_iter()
            .find(|f| f.action.contains("start_redrive"))
            .expect("a redrive form");
        let fields = filled(&redrive, &[]);
        let started =
            common::post_as_browser(&app, &vera, "/dead-letters", &redrive.action, &fields).await;
        assert_eq!(started.status().as_u16(), 303);
        let run = common::location(&started);
        assert!(run.starts_with("/redrives/"), "{run}");
        let (_, html) = common::get(&vera, &app.url(&run)).await;
        let page = text(&visible(&html));
        assert!(
            page.contains("pay:later 💶") && !page.contains(&fixture.key),
            "{page:.2000}"
        );

        // The header says what pam may do.
        let (_, html) = common::get(&pam, &app.url("/")).await;
        let page = text(&visible(&html));
        let at = page.find("Signed in as").unwrap_or(0);
        assert!(
            page[at..].starts_with("Signed in as pam ( operator of payments )"),
            "{}",
            &page[at..]
        );
    }
}
