//! What a person limited to payments reads: every server function, and
//! every page.

use idem_store::{Ts, testing::TestDatabase};

use super::{OURS, app_of_two_teams, growth_in};
use crate::common::{self, text, visible};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_of_payments_never_receives_growth_s_keys_counts_or_chart_points() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (app, fixture, _, _dir) = app_of_two_teams(db).await;
        let pam = app.sign_in("pam").await;
        let olga = app.sign_in("olga").await;

        // Every server function, with arguments that name growth's
        // consumer, key, dead letter and redrive where it takes them.
        for (name, fields) in fixture.valid_calls("pam") {
            let response = common::call(&app, &pam, name, &fields).await;
            let status = response.status().as_u16();
            let body = response.text().await.unwrap();
            // The admins' functions (tokens) are refused by role, whatever the team.
            if common::server_fn(name).starts_with(idem_app::auth::prefix::ADMIN) {
                assert_eq!(status, 403, "{name}: {body:.400}");
                continue;
            }
            // An answer may repeat the key pam typed (which it did not
            // find); nothing that was read is in it.
            let typed_key = fields.iter().any(|(_, v)| *v == fixture.key);
            let read = match typed_key || name == "lookup_key" {
                true => body.replace(&fixture.key, ""),
                false => body.clone(),
            };
            assert_eq!(growth_in(&read), Vec::<&str>::new(), "{name}: {body:.400}");
            // Growth's objects by id read and act as missing ones.
            let by_id = matches!(
                name,
                "get_dead_letter"
                    | "replay_dead_letter"
                    | "discard_dead_letter"
                    | "get_redrive"
                    | "stop_redrive"
                    | "get_reconciliation"
                    | "apply_reconciliation"
            );
            // (A bulk resolve names its keys' consumers in its pasted list.)
            let names_growth =
                fields.iter().any(|(_, v)| v == "orders") || name == "start_bulk_resolve";
            // Fleet-wide objectives count growth's consumers too.
            let fleet_slo = matches!(name, "get_slo" | "get_slo_charts");
            if by_id {
                assert!(
                    body.contains("There is no"),
                    "answered as missing: {name}: {status} {body:.400}"
                );
                assert!(!body.contains("growth"), "{name}: {body:.400}");
            } else if fleet_slo {
                assert_eq!(status, 403, "{name}: {body:.400}");
                assert!(
                    body.contains("counts the consumers of teams your rights do not cover"),
                    "{name}: {body:.400}"
                );
            } else if names_growth {
                // Read by name: what a consumer nobody has reads (nothing);
                // a form acting on it is refused for what pam lacks there.
                match status {
                    200 => {}
                    403 => assert!(body.contains("belongs to the team"), "{name}: {body:.400}"),
                    404 => assert!(!body.contains("growth"), "{name}: {body:.400}"),
                    _ => panic!("{name}: {status} {body:.400}"),
                }
            } else if name == "lookup_key" {
                assert_eq!(status, 404, "{name}: {body:.400}");
                assert!(body.contains("No consumer of your teams"), "{body}");
            } else {
                assert_eq!(status, 200, "{name}: {body:.400}");
            }
        }

        // The same reads without a consumer named: only payments' rows.
        let read =
            |client: &reqwest::Client, name: &'static str, fields: Vec<(&'static str, String)>| {
                let app = &app;
                let client = client.clone();
                async move {
                    let response = common::call(app, &client, name, &fields).await;
                    assert_eq!(response.status().as_u16(), 200, "{name}");
                    response.text().await.unwrap()
                }
            };
        let search = |q: &str| {
            vec![
                ("query[q]", q.to_owned()),
                ("query[consumer]", String::new()),
                ("query[status]", String::new()),
                ("query[cursor]", String::new()),
                ("query[limit]", "50".to_owned()),
            ]
        };
        let audit = vec![
            ("query[actor]", String::new()),
            ("query[action]", String::new()),
            ("query[key]", String::new()),
            ("query[from]", String::new()),
            ("query[to]", String::new()),
            ("query[recoveries]", String::new()),
            ("query[cursor]", String::new()),
        ];
        let reads: Vec<(&'static str, Vec<(&'static str, String)>)> = vec![
            ("get_overview", vec![]),
            ("list_unknown", vec![]),
            ("list_dead_letters", vec![("state", "open".into())]),
            ("list_outbox", vec![]),
            ("search_keys", search("key")),
            ("search_keys", search("sent-1")),
            (
                "get_checks",
                vec![("check", "dead-letter-already-sent".into())],
            ),
            ("get_consumers", vec![]),
            ("list_audit", audit),
            ("get_charts", vec![("range", "24h".into())]),
            ("get_slos", vec![]),
        ];
        for (name, fields) in reads {
            let mine = read(&pam, name, fields.clone()).await;
            assert_eq!(growth_in(&mine), Vec::<&str>::new(), "{name}: {mine:.600}");
            // Olga, whose rights are not limited, sees growth's rows: the
            // assertion above could fail.
            let everyone = read(&olga, name, fields).await;
            assert!(
                !growth_in(&everyone).is_empty(),
                "{name} as olga shows growth's rows: {everyone:.600}"
            );
        }
        let board = read(&pam, "get_slos", vec![]).await;
        assert!(board.contains("payments-ledger-delivered"), "{board:.600}");
        let unknown = read(&pam, "list_unknown", vec![]).await;
        assert!(
            unknown.contains("\"ledger\""),
            "payments' own list: {unknown:.400}"
        );
        let overview = read(&pam, "get_overview", vec![]).await;
        let overview: serde_json::Value = serde_json::from_str(&overview).unwrap();
        assert_eq!(overview["unknown_count"]["value"], 1, "{overview}");
        assert_eq!(overview["last_hour"]["sent"], 11, "{overview}");
        let charts = read(&pam, "get_charts", vec![("range", "24h".into())]).await;
        assert!(
            charts.contains("one consumer at a time: ledger"),
            "{charts:.600}"
        );

        // Nothing of growth's was changed by the refused actions.
        let orders = idem_store::testing::consumer("orders");
        let claim = app
            .store
            .claims()
            .claim(&orders, &idem_store::testing::key(&fixture.key))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claim.status, idem_domain::ClaimStatus::Unknown);
        super::still_open(&app.store, fixture.dead_letter).await;

        // The refusals are audited: one row per reason once its window ends.
        app.store
            .people()
            .close_refusal_windows(Ts::now() + idem_store::REFUSAL_WINDOW * 2)
            .await
            .unwrap();
        let log = app
            .store
            .audit()
            .audit_log(
                &idem_store::AuditFilter {
                    actor: Some("pam".into()),
                    ..Default::default()
                },
                &idem_store::PageRequest::first(50),
            )
            .await
            .unwrap();
        assert!(
            log.items
                .iter()
                .any(|e| e.action == idem_domain::AuditAction::Denied
                    && e.state_after
                        .as_ref()
                        .map(ToString::to_string)
                        .as_deref()
                        .unwrap_or_default()
                        .contains("team growth")
                    || format!("{e:?}").contains("operator on team growth")),
            "{:#?}",
            log.items
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_shows_a_person_limited_to_payments_only_payments() {
    for db in [TestDatabase::sqlite().await, TestDatabase::postgres().await] {
        let (app, fixture, ours, _dir) = app_of_two_teams(db).await;
        let pam = app.sign_in("pam").await;
        let our_key = idem_app::links::key_href("ledger", OURS);
        for path in [
            "/",
            "/keys?q=key",
            "/unknown",
            "/dead-letters",
            "/outbox",
            "/consumers",
            "/slo",
            "/audit",
            "/checks",
            "/checks/dead-letter-already-sent",
            &format!("/dead-letters/{ours}"),
            &our_key,
        ] {
            let (status, html) = common::get(&pam, &app.url(path)).await;
            assert_eq!(status, 200, "{path}");
            assert_eq!(growth_in(&html), Vec::<&str>::new(), "{path}");
        }
        let (_, unknown) = common::get(&pam, &app.url("/unknown")).await;
        assert!(text(&visible(&unknown)).contains(OURS), "payments' own key");

        // Growth's objects answer as missing ones: each page reads, word
        // for word, as the page of an object nobody has.
        let missing = 9_999_999;
        for (path, nobody, typed) in [
            (
                idem_app::links::key_href("orders", &fixture.key),
                idem_app::links::key_href("orders", "no-such-key"),
                (fixture.key.clone(), "no-such-key".to_owned()),
            ),
            (
                "/consumers/orders".to_owned(),
                "/consumers/nobody-has-it".to_owned(),
                ("orders".to_owned(), "nobody-has-it".to_owned()),
            ),
            (
                format!("/dead-letters/{}", fixture.dead_letter),
                format!("/dead-letters/{missing}"),
                (fixture.dead_letter.to_string(), missing.to_string()),
            ),
            (
                format!("/redrives/{}", fixture.redrive),
                format!("/redrives/{missing}"),
                (fixture.redrive.to_string(), missing.to_string()),
            ),
        ] {
            let (status, html) = common::get(&pam, &app.url(&path)).await;
            let (status_missing, html_missing) = common::get(&pam, &app.url(&nobody)).await;
            assert_eq!((status, status_missing), (404, 404), "{path}");
            // What the page says, after its head and menus.
            let said = |html: &str, typed: &str| {
                let page = text(&visible(html));
                let main = page.rsplit("Change -->").next().unwrap_or_default();
                main.replace(typed, "TYPED")
            };
            let page = said(&html, &typed.0);
            let page_missing = said(&html_missing, &typed.1);
            assert_eq!(page, page_missing, "{path}");
            // The address pam typed may be repeated; nothing that was read is.
            let read = html.replace(&fixture.key, "");
            assert_eq!(growth_in(&read), Vec::<&str>::new(), "{path}");
            assert!(!html.contains("503 from the provider"), "{path}");
            assert!(!page.contains("growth"), "{path}: {page:.300}");
        }
        // A fleet-wide objective counts growth too: refused for what it is.
        let (status, _) = common::get(&pam, &app.url("/slo/duplicate-claim-rate")).await;
        assert_eq!(status, 403);
    }
}
