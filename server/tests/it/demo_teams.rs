//! The demo as an organisation: three teams' consumers, one team's incident
//! open while the others are healthy, each team's objectives evaluated.

use std::sync::Arc;

use idem_domain::slo::{AlertState, Scope};
use idem_store::Ts;

use super::demo::{write_hours_of_history, yesterday_at};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_is_three_teams_and_only_growth_s_incident_is_open_at_its_end() {
    let end = yesterday_at(16);
    let db = idem_store::testing::TestDatabase::sqlite().await;
    write_hours_of_history(&db.store, 24, end).await;
    let catalogue = idem::consumers_config::demo();
    assert_eq!(catalogue.entries().len(), 8);
    assert_eq!(catalogue.teams(), ["fulfilment", "growth", "payments"]);

    // Every consumer the demo plays delivered; the open unknown outcomes are
    // growth's email provider's, and a tour key or two left for people.
    let seen = db
        .store
        .metrics()
        .claiming_consumers(100, &idem_domain::Within::Every)
        .await
        .unwrap();
    let names: Vec<idem_domain::ConsumerName> =
        catalogue.entries().iter().map(|e| e.name.clone()).collect();
    let open = db
        .store
        .lists()
        .open_by_consumer(&names, 10_000)
        .await
        .unwrap();
    let unknown = |consumer: &str| open.unknown(consumer).value;
    for entry in catalogue.entries() {
        let name = entry.name.as_str();
        if name == "reminders-rabbitmq" {
            continue; // the browser tests play it, not the demo
        }
        assert!(
            seen.iter().any(|c| c == name),
            "{name} has claims: {seen:?}"
        );
    }
    assert!(
        unknown("reminders") >= 5,
        "the open incident: {}",
        unknown("reminders")
    );
    for healthy in [
        "payment-webhooks",
        "invoices",
        "shipments",
        "stock-levels",
        "push-notifications",
    ] {
        assert!(
            unknown(healthy) <= 1,
            "{healthy} is healthy at the end: {} open",
            unknown(healthy)
        );
    }

    // Each team's objectives, as /slo shows them: the payments and
    // fulfilment teams' are met; every consumer of each has data.
    let board = idem_app::api::evaluate_slos(
        db.store.clone(),
        Arc::new(idem::slo_config::demo()),
        Arc::new(catalogue),
        Ts(end),
    )
    .await
    .unwrap();
    let of_team = |team: &'static str| {
        board
            .statuses
            .iter()
            .filter(move |s| s.scope.team() == Some(team) && s.scope != Scope::Fleet)
    };
    let show = |s: &idem_domain::slo::SloStatus| {
        let burns: Vec<_> = s
            .tiers
            .iter()
            .map(|t| (t.long_burn, t.short_burn, t.long.valid, t.firing))
            .collect();
        format!(
            "{} {:?} {} sli {:?} of {} {burns:?}",
            s.slo.name,
            s.scope,
            s.alert.as_str(),
            s.sli,
            s.window.valid
        )
    };
    for team in ["payments", "fulfilment"] {
        let states: Vec<String> = of_team(team).map(show).collect();
        assert!(!states.is_empty(), "{team} has objectives");
        assert!(
            of_team(team).all(|s| matches!(s.alert, AlertState::Ok | AlertState::TooFewEvents)),
            "{team}'s objectives are met: {states:#?}"
        );
    }
    let consumers: Vec<&str> = of_team("payments")
        .filter_map(|s| s.scope.consumer())
        .collect();
    assert_eq!(consumers.len(), 3, "{consumers:?}");
    assert!(
        of_team("growth")
            .all(|s| s.alert != AlertState::NoData
                || s.scope.consumer() == Some("reminders-rabbitmq"))
    );
}
