//! Fleet-wide consistency checks: a fleet with one of each inconsistency
//! among healthy keys, and what each check lists and counts.

use chrono::TimeDelta;
use idem_domain::{CappedCount, Check, ClaimRetention, Finding};
use idem_store::{
    CheckLimits, Delivery, NewDeadLetter, Outcome, PageRequest, Store, StoreError, Ts, testing,
};

use super::{at, claim_once, delivery, settle};

idem_store::on_both_backends!(
    each_check_finds_its_own_keys_and_no_healthy_one,
    a_check_pages_oldest_first_and_refuses_another_checks_cursor,
    the_shared_reference_sweep_finds_new_outcomes_once_and_prunes_what_no_longer_holds,
);

/// A key with every character a key may carry: `:`, `/`, `%`, `#`, a space,
/// an emoji and right-to-left text.
const ODD_KEY: &str = "refund:EU/2026/%Ø #1 🧾 עברית";

fn limits() -> CheckLimits {
    CheckLimits {
        now: Ts::now(),
        unknown_objective: TimeDelta::minutes(15),
        // The fleet below is a day old: its claims are past a one-hour retention.
        claim_retention: ClaimRetention::new(TimeDelta::hours(1)),
        within: idem_domain::Within::Every,
    }
}

fn letter<'a>(consumer: &'a str, key: &'a str, seconds: i64) -> NewDeadLetter<'a> {
    NewDeadLetter {
        consumer,
        queue: "q",
        key,
        message_id: "m-1",
        payload: "{}",
        delivery_count: 3,
        first_failure_at: at(seconds - 60),
        last_error: Some("503 Service Unavailable"),
        at: at(seconds),
    }
}

async fn dead_letter(store: &Store, consumer: &str, key: &str, seconds: i64) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let id = tx
        .dead_letter(&letter(consumer, key, seconds))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

async fn sent(store: &Store, consumer: &str, key: &str, provider_ref: Option<&str>, seconds: i64) {
    claim_once(store, delivery(consumer, key, seconds)).await;
    settle(
        store,
        consumer,
        key,
        Outcome::Sent { provider_ref },
        seconds,
    )
    .await;
}

/// One of each inconsistency, each beside a healthy key of the same kind.
/// Returns the ids of the dead letters the checks should find.
async fn fleet(store: &Store) -> (i64, i64, i64) {
    sent(store, "payments", "healthy", Some("pi_1"), 0).await;
    sent(store, "payments", "no-ref", None, 10).await;
    sent(store, "payments", "refund-a", Some("re_shared"), 20).await;
    sent(store, "refunds", "refund-b", Some("re_shared"), 30).await;

    // Crashed mid-call: the lease ran out a day ago, no outcome.
    claim_once(store, delivery("payments", "crashed", 40)).await;
    let mut tx = store.begin().await.unwrap();
    tx.lease("payments", "crashed", at(70), at(40))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Still working: the lease runs for another hour.
    claim_once(store, delivery("payments", "working", 50)).await;
    let mut tx = store.begin().await.unwrap();
    let until = Ts::from(Ts::now().0 + TimeDelta::hours(1));
    tx.lease("payments", "working", until, at(50))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // Unknown for a day, and unknown for a few minutes only.
    claim_once(store, delivery("payments", "lost-reply", 60)).await;
    let unknown = Outcome::Unknown { error: "timeout" };
    settle(store, "payments", "lost-reply", unknown, 60).await;
    let recent = 86_400 - 300;
    claim_once(store, delivery("payments", "fresh-unknown", recent)).await;
    settle(store, "payments", "fresh-unknown", unknown, recent).await;

    // The same key again with other content.
    claim_once(store, delivery("orders", ODD_KEY, 70)).await;
    let again = Delivery {
        payload_hash: Some("h2"),
        ..delivery("orders", ODD_KEY, 80)
    };
    claim_once(store, again).await;

    // Dead letters: one for a key already sent; one whose failed claim is a
    // day old; one whose claim is gone; one whose failed claim is recent.
    let already_sent = dead_letter(store, "payments", "healthy", 100).await;
    claim_once(store, delivery("payments", "failed-old", 110)).await;
    let permanent = Outcome::Permanent { error: "400" };
    settle(store, "payments", "failed-old", permanent, 110).await;
    let old = dead_letter(store, "payments", "failed-old", 120).await;
    let gone = dead_letter(store, "payments", "gone", 90).await;
    claim_once(store, delivery("payments", "failed-new", recent)).await;
    settle(store, "payments", "failed-new", permanent, recent).await;
    dead_letter(store, "payments", "failed-new", recent + 10).await;

    // Swept as of an hour ago, so a test can record outcomes after it.
    let an_hour_ago = Ts::from(Ts::now().0 - TimeDelta::hours(1));
    store
        .checks()
        .sweep_shared_provider_refs(an_hour_ago)
        .await
        .unwrap();
    (already_sent, gone, old)
}

async fn all_findings(store: &Store, check: Check) -> Vec<Finding> {
    let page = PageRequest::first(PageRequest::MAX_LIMIT);
    let found = store
        .checks()
        .check_findings(check, &limits(), &page)
        .await
        .unwrap();
    assert!(found.next.is_none());
    found.items
}

fn keys(findings: &[Finding]) -> Vec<(&str, &str)> {
    findings
        .iter()
        .map(|f| (f.consumer.as_str(), f.key.as_str()))
        .collect()
}

async fn each_check_finds_its_own_keys_and_no_healthy_one(store: &Store) {
    let (already_sent, gone, old) = fleet(store).await;

    let crashed = all_findings(store, Check::AbandonedLease).await;
    assert_eq!(keys(&crashed), [("payments", "crashed")]);
    assert_eq!(crashed[0].lease_until, Some(at(70).0));

    let unknown = all_findings(store, Check::UnknownPastObjective).await;
    assert_eq!(keys(&unknown), [("payments", "lost-reply")]);
    assert_eq!(unknown[0].last_error.as_deref(), Some("timeout"));

    let letters = all_findings(store, Check::DeadLetterAlreadySent).await;
    assert_eq!(keys(&letters), [("payments", "healthy")]);
    assert_eq!(letters[0].dead_letter_id, Some(already_sent));
    assert_eq!(letters[0].provider_ref.as_deref(), Some("pi_1"));

    let beyond = all_findings(store, Check::DeadLetterBeyondRetention).await;
    assert_eq!(
        keys(&beyond),
        [("payments", "gone"), ("payments", "failed-old")]
    );
    let ids: Vec<_> = beyond.iter().map(|f| f.dead_letter_id).collect();
    assert_eq!(ids, [Some(gone), Some(old)]);

    let shared = all_findings(store, Check::SharedProviderRef).await;
    assert_eq!(
        keys(&shared),
        [("payments", "refund-a"), ("refunds", "refund-b")]
    );
    assert!(
        shared
            .iter()
            .all(|f| f.provider_ref.as_deref() == Some("re_shared"))
    );

    let no_ref = all_findings(store, Check::SentWithoutProviderRef).await;
    assert_eq!(keys(&no_ref), [("payments", "no-ref")]);

    let drift = all_findings(store, Check::PayloadDrift).await;
    assert_eq!(keys(&drift), [("orders", ODD_KEY)]);
    assert_eq!(drift[0].payload_hashes, Some(("h1".into(), "h2".into())));

    let counts = store
        .checks()
        .count_check_findings(&limits(), 100)
        .await
        .unwrap();
    let count = |check: Check| counts.iter().find(|(c, _)| *c == check).unwrap().1;
    for check in Check::ALL {
        let expected = all_findings(store, check).await.len() as u64;
        assert_eq!(
            count(check),
            CappedCount::from_limited(expected, 100),
            "{check}"
        );
    }
    // A consumer that keeps its claims for 90 days has none past it.
    let longer = CheckLimits {
        claim_retention: ClaimRetention::new(TimeDelta::hours(1))
            .with("payments", TimeDelta::days(90)),
        ..limits()
    };
    let page = PageRequest::first(10);
    let kept = store
        .checks()
        .check_findings(Check::DeadLetterBeyondRetention, &longer, &page)
        .await
        .unwrap();
    assert!(kept.items.is_empty(), "{:?}", kept.items);
    // A count stops at its cap and says so.
    let capped = store
        .checks()
        .count_check_findings(&limits(), 1)
        .await
        .unwrap();
    let beyond = capped
        .iter()
        .find(|(c, _)| *c == Check::DeadLetterBeyondRetention);
    assert_eq!(
        beyond.unwrap().1,
        CappedCount {
            value: 1,
            capped: true
        }
    );
}

async fn a_check_pages_oldest_first_and_refuses_another_checks_cursor(store: &Store) {
    fleet(store).await;
    for (check, expected) in [
        (Check::DeadLetterBeyondRetention, ["gone", "failed-old"]),
        (Check::SharedProviderRef, ["refund-a", "refund-b"]),
    ] {
        let first = store
            .checks()
            .check_findings(check, &limits(), &PageRequest::first(1))
            .await
            .unwrap();
        let next = first.next.clone().expect("a second page");
        let second = store
            .checks()
            .check_findings(check, &limits(), &PageRequest::new(1, Some(next.clone())))
            .await
            .unwrap();
        let seen: Vec<_> = first
            .items
            .iter()
            .chain(&second.items)
            .map(|f| f.key.as_str())
            .collect();
        assert_eq!(seen, expected, "{check}");
        assert_eq!(second.next, None);

        let elsewhere = store
            .checks()
            .check_findings(
                Check::PayloadDrift,
                &limits(),
                &PageRequest::new(1, Some(next)),
            )
            .await;
        assert!(matches!(elsewhere, Err(StoreError::BadCursor)), "{check}");
    }
}

async fn the_shared_reference_sweep_finds_new_outcomes_once_and_prunes_what_no_longer_holds(
    store: &Store,
) {
    fleet(store).await;
    let an_hour_ago = Ts::from(Ts::now().0 - TimeDelta::hours(1));
    let again = store
        .checks()
        .sweep_shared_provider_refs(an_hour_ago)
        .await
        .unwrap();
    assert_eq!(again.found, 0, "nothing new since the last sweep");
    assert_eq!(all_findings(store, Check::SharedProviderRef).await.len(), 2);

    // A third key records the same reference half an hour ago: the next
    // sweep adds it.
    let lately = 86_400 - 1800;
    sent(store, "refunds", "refund-c", Some("re_shared"), lately).await;
    let swept = store
        .checks()
        .sweep_shared_provider_refs(Ts::now())
        .await
        .unwrap();
    assert_eq!(swept.found, 1);
    assert_eq!(all_findings(store, Check::SharedProviderRef).await.len(), 3);

    // Two keys stop recording it: the one left alone is no finding either.
    for key in ["refund-b", "refund-c"] {
        testing::execute_raw(
            store,
            &format!("UPDATE claims SET provider_ref = 're_{key}' WHERE idempotency_key = '{key}'"),
            &format!("UPDATE claims SET provider_ref = 're_{key}' WHERE idempotency_key = '{key}'"),
        )
        .await
        .unwrap();
    }
    let pruned = store
        .checks()
        .sweep_shared_provider_refs(Ts::now())
        .await
        .unwrap();
    assert_eq!(pruned.pruned, 3);
    assert!(
        all_findings(store, Check::SharedProviderRef)
            .await
            .is_empty()
    );
}
