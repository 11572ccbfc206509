//! Reads narrowed to the consumers a person may see (rights limited to
//! teams): every list, count, search, check and audit page keeps to them,
//! and "none" means nothing, not everything.

use idem_domain::{ConsumerName, DeadLetterState, Within};
use idem_store::{
    AuditFilter, CheckLimits, ClaimSearch, DeadLetterFilter, NewAuditEntry, OutboxFilter, Outcome,
    PageRequest, Store, Ts, Window, testing,
};

use super::{at, claim_once, dead_letter, delivery, outbox_row, settle};

idem_store::on_both_backends!(
    every_read_keeps_to_the_consumers_a_reader_may_see,
    a_reader_who_may_see_no_consumer_gets_nothing_rather_than_everything,
);

/// Two consumers of two teams, each with an unknown outcome, a dead letter
/// whose key is already sent, an unpublished outbox row and an audit row;
/// the keys say whose they are.
async fn two_teams(store: &Store) {
    for consumer in ["ledger", "orders"] {
        let unknown = format!("{consumer}:unknown");
        let sent = format!("{consumer}:sent");
        claim_once(store, delivery(consumer, &unknown, 10)).await;
        settle(
            store,
            consumer,
            &unknown,
            Outcome::Unknown { error: "timeout" },
            10,
        )
        .await;
        claim_once(store, delivery(consumer, &sent, 20)).await;
        settle(
            store,
            consumer,
            &sent,
            Outcome::Sent {
                provider_ref: Some("ref-1"),
            },
            20,
        )
        .await;
        let mut tx = store.begin().await.unwrap();
        tx.dead_letter(&idem_store::NewDeadLetter {
            consumer,
            ..dead_letter(&sent, 100)
        })
        .await
        .unwrap();
        tx.enqueue(&idem_store::NewOutboxRow {
            consumer,
            ..outbox_row(&unknown, 30)
        })
        .await
        .unwrap();
        tx.commit().await.unwrap();
        store
            .audit()
            .append_audit(&NewAuditEntry {
                consumer: Some(consumer),
                key: Some(&sent),
                ..NewAuditEntry::new(
                    "olga",
                    "operator",
                    idem_domain::AuditAction::Replay,
                    idem_domain::AuditResult::Ok,
                )
            })
            .await
            .unwrap();
        // What each confirmed in the last hour: ledger 5, orders 7.
        let sends = if consumer == "ledger" { 5.0 } else { 7.0 };
        store
            .metrics()
            .record_metrics(&[idem_store::MetricSample {
                consumer: consumer.into(),
                metric: idem_domain::Metric::Sends,
                at: Ts::now() - chrono::TimeDelta::minutes(3),
                bucket: String::new(),
                value: sends,
            }])
            .await
            .unwrap();
    }
    // An entry about no consumer (a sign-in).
    store
        .audit()
        .append_audit(&NewAuditEntry {
            ..NewAuditEntry::new(
                "olga",
                "operator",
                idem_domain::AuditAction::Login,
                idem_domain::AuditResult::Ok,
            )
        })
        .await
        .unwrap();
}

fn only(names: &[&str]) -> Within {
    Within::Only(names.iter().map(|n| testing::consumer(n)).collect())
}

/// Whose rows these are, by their keys' prefix, each once, in order.
fn owners<'a>(keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut owners: Vec<String> = keys
        .into_iter()
        .map(|k| k.split(':').next().unwrap_or_default().to_owned())
        .collect();
    owners.sort();
    owners.dedup();
    owners
}

async fn every_read_keeps_to_the_consumers_a_reader_may_see(store: &Store) {
    two_teams(store).await;
    let page = PageRequest::first(50);
    for (within, expected, sends) in [
        (Within::Every, vec!["ledger", "orders"], 12),
        (only(&["ledger"]), vec!["ledger"], 5),
        (only(&["orders", "not-a-consumer"]), vec!["orders"], 7),
    ] {
        let window = Window {
            within: within.clone(),
            ..Window::default()
        };
        let unknown = store
            .lists()
            .unknown_claims_in(&page, &window)
            .await
            .unwrap();
        assert_eq!(
            owners(unknown.items.iter().map(|c| c.key.as_str())),
            expected,
            "unknown outcomes of {within:?}"
        );
        let count = store.lists().count_unknown_in(&window, 100).await.unwrap();
        assert_eq!(count.value as usize, expected.len());

        let letters = DeadLetterFilter {
            window: window.clone(),
            ..Default::default()
        };
        let open = store
            .lists()
            .dead_letters_in(DeadLetterState::Open, &page, &letters)
            .await
            .unwrap();
        assert_eq!(owners(open.items.iter().map(|d| d.key.as_str())), expected);
        let counted = store
            .lists()
            .count_dead_letters_in(DeadLetterState::Open, &letters, 100)
            .await
            .unwrap();
        assert_eq!(counted.value as usize, expected.len());
        // A redrive offered to this reader takes only their letters.
        assert_eq!(
            store.runs().redrive_offer(&letters).await.unwrap().count as usize,
            expected.len()
        );

        let outbox = OutboxFilter {
            within: within.clone(),
            ..Default::default()
        };
        let rows = store
            .lists()
            .unpublished_outbox_in(&page, &outbox)
            .await
            .unwrap();
        assert_eq!(owners(rows.items.iter().map(|o| o.key.as_str())), expected);

        let search = ClaimSearch {
            within: within.clone(),
            ..Default::default()
        };
        let found = store.claims().search_claims(&search, &page).await.unwrap();
        assert_eq!(
            owners(found.page.items.iter().map(|c| c.key.as_str())),
            expected,
            "search of {within:?}"
        );

        let limits = CheckLimits {
            now: Ts::now(),
            unknown_objective: chrono::TimeDelta::minutes(15),
            claim_retention: idem_domain::ClaimRetention::days(30),
            within: within.clone(),
        };
        let check = idem_domain::Check::DeadLetterAlreadySent;
        let findings = store
            .checks()
            .check_findings(check, &limits, &page)
            .await
            .unwrap();
        assert_eq!(
            owners(findings.items.iter().map(|f| f.key.as_str())),
            expected
        );
        let counts = store
            .checks()
            .count_check_findings(&limits, 100)
            .await
            .unwrap();
        let already_sent = counts.iter().find(|(c, _)| *c == check).unwrap().1;
        assert_eq!(already_sent.value as usize, expected.len());

        let audit = store
            .audit()
            .audit_log(
                &AuditFilter {
                    within: within.clone(),
                    ..Default::default()
                },
                &page,
            )
            .await
            .unwrap();
        let about: Vec<&str> = audit
            .items
            .iter()
            .filter_map(|e| e.key.as_deref())
            .collect();
        assert_eq!(owners(about), expected);
        // A sign-in belongs to no team: only a reader of every consumer sees it.
        assert_eq!(
            audit
                .items
                .iter()
                .any(|e| e.action == idem_domain::AuditAction::Login),
            within.is_every()
        );

        let overview = store
            .lists()
            .overview(5, 100, Ts::now(), &within)
            .await
            .unwrap();
        assert_eq!(overview.unknown.value as usize, expected.len());
        assert_eq!(overview.sends_last_hour, sends, "sends of {within:?}");
        assert_eq!(overview.open_dead_letters.value as usize, expected.len());
        assert_eq!(overview.unpublished_outbox.value as usize, expected.len());
        assert_eq!(
            owners(overview.oldest_unknown.iter().map(|c| c.key.as_str())),
            expected
        );
        assert_eq!(
            owners(overview.oldest_dead_letters.iter().map(|d| d.key.as_str())),
            expected
        );
    }
    let _ = at(0);
}

async fn a_reader_who_may_see_no_consumer_gets_nothing_rather_than_everything(store: &Store) {
    two_teams(store).await;
    let nobody = Within::Only(Vec::<ConsumerName>::new());
    let page = PageRequest::first(50);
    let window = Window {
        within: nobody.clone(),
        ..Window::default()
    };
    assert!(
        store
            .lists()
            .unknown_claims_in(&page, &window)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let search = ClaimSearch {
        within: nobody.clone(),
        ..Default::default()
    };
    assert!(
        store
            .claims()
            .search_claims(&search, &page)
            .await
            .unwrap()
            .page
            .items
            .is_empty()
    );
    let overview = store
        .lists()
        .overview(5, 100, Ts::now(), &nobody)
        .await
        .unwrap();
    assert_eq!(overview.unknown.value, 0);
    assert_eq!(overview.sends_last_hour, 0);
    let audit = store
        .audit()
        .audit_log(
            &AuditFilter {
                within: nobody,
                ..Default::default()
            },
            &page,
        )
        .await
        .unwrap();
    assert!(audit.items.is_empty());
}
