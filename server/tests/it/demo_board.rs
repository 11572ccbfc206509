//! `make run`'s two days as `/slo` shows them at their end: most
//! objectives met, the open incident paging.

use chrono::TimeDelta;
use idem_domain::slo::AlertState;
use idem_store::Ts;

use crate::demo::{slo_states_at, write_hours_of_history, yesterday_at};

/// `make run`'s two days, seen on `/slo` at their end: most objectives
/// met, and the incident still open paging — what a normal day with one bad
/// hour looks like, not a board on fire.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_days_of_demo_history_end_with_most_slos_ok_and_the_open_incident_paging() {
    for hour in [16, 3] {
        let end = yesterday_at(hour);
        let db = idem_store::testing::TestDatabase::sqlite().await;
        write_hours_of_history(&db.store, 48, end).await;
        let states = slo_states_at(&db.store, end).await;
        let board: Vec<String> = states
            .iter()
            .map(|s| {
                format!(
                    "{} {} budget {:?} sli {:?} of {}",
                    s.slo.name,
                    s.alert.as_str(),
                    s.budget_remaining.map(|b| (b * 1000.0).round() / 10.0),
                    s.sli,
                    s.window.valid
                )
            })
            .collect();
        let mut board = board.join("\n");
        // Where each unmet objective's bad events fell, hour by hour.
        for status in states.iter().filter(|s| s.alert != AlertState::Ok) {
            let mut hours = Vec::new();
            for h in (1..=48).rev() {
                let from = end - TimeDelta::hours(h);
                let e = db
                    .store
                    .indicator_events(&status.slo.sli, Ts(from), Ts(from + TimeDelta::hours(1)))
                    .await
                    .unwrap();
                if e.valid > e.good {
                    hours.push(format!("-{h}h:{}/{}", e.valid - e.good, e.valid));
                }
            }
            board += &format!("\n  {}: {}", status.slo.name, hours.join(" "));
        }
        let state = |name: &str| states.iter().find(|s| s.slo.name == name).unwrap().alert;
        let ok = states.iter().filter(|s| s.alert == AlertState::Ok).count();
        assert!(ok >= 5, "ending at {hour}:00, {ok} of 8 ok:\n{board}");
        assert_eq!(state("unknown-resolved-15m"), AlertState::Page, "{board}");
        assert!(
            states.iter().all(|s| s.alert != AlertState::NoData),
            "{board}"
        );
    }
}
