//! Reconciliation: a provider's export held against the claims, every
//! class found, and a class applied as a bulk resolve bound to the rows
//! reviewed — a key someone changed since skipped and named.

use idem_domain::{
    ClaimStatus, ExportReader, ItemOutcome, ReconcileClass, Reconciliation, StatusWords,
    slo::Indicator,
};
use idem_store::{
    NewReconciliation, Outcome, Reconciled, ReconciledResolve, RedriveStart, Store, Ts, testing,
};

use super::{
    OLGA, ago,
    bulk::{SENT, claim, pete_resolves, started_run},
    claimed,
    redrive::{operators, run_to_end},
    unknown_claim,
};

idem_store::on_both_backends!(
    a_reconciliation_puts_every_claim_and_record_in_its_class,
    applying_a_class_resolves_its_keys_and_skips_one_changed_since_the_review,
    sending_a_reconciliation_again_keeps_the_first,
);

/// A CSV line of the provider's export, `minutes` ago.
pub(super) fn line(reference: &str, key: &str, status: &str, minutes: i64) -> String {
    let at = ago(minutes).0.to_rfc3339();
    format!(
        "{reference},\"{}\",{status},{at}\n",
        key.replace('"', "\"\"")
    )
}

/// Reads `export` and keeps its reconciliation against `orders` (latency
/// bound five minutes) under the form `form`.
pub(super) async fn reconcile(store: &Store, export: &str, form: &str) -> Reconciliation {
    let mut reader = ExportReader::new(StatusWords::parse("queued=accepted").unwrap());
    let mut out = Vec::new();
    reader.push(export.as_bytes(), &mut out);
    reader.finish(&mut out);
    assert_eq!(reader.refused(), None);
    let reconcile = store.reconcile();
    let mut reconciler =
        reconcile.reconciler(idem_domain::ConsumerName::parse("orders").unwrap(), 300);
    let mut records = Vec::new();
    for r in out {
        match r {
            Ok(record) => records.push(record),
            Err(bad) => reconciler.bad_line(&bad),
        }
    }
    reconciler.feed(&records).await.unwrap();
    let kept = reconciler
        .finish(&NewReconciliation {
            action_id: form,
            actor: OLGA,
            file_name: "messages.csv",
            file_sha256: &format!("{:064x}", export.len()),
            file_bytes: export.len() as i64,
            status_words: "queued=accepted",
        })
        .await
        .unwrap();
    let Reconciled::Kept { id } = kept else {
        panic!("not kept: {kept:?}")
    };
    store
        .reconcile()
        .reconciliation(
            idem_domain::ReconciliationId::of_row(id.get()),
            50,
            &idem_domain::Within::Every,
        )
        .await
        .unwrap()
        .unwrap()
}

/// The keys a reconciliation put in `class`, in order.
pub(super) fn keys_in(r: &Reconciliation, class: ReconcileClass) -> Vec<String> {
    let summary = r.classes.iter().find(|c| c.class == class).unwrap();
    assert_eq!(summary.count as usize, summary.sample.len());
    summary
        .sample
        .iter()
        .map(|row| row.key.clone().unwrap_or_default())
        .collect()
}

async fn a_reconciliation_puts_every_claim_and_record_in_its_class(store: &Store) {
    for k in ["u-accepted 💶", "u-failed", "u-absent/%#", "u-late"] {
        if k != "u-late" {
            unknown_claim(store, k).await;
        }
    }
    let mut tx = store.begin().await.unwrap();
    for (k, outcome) in [
        (
            "s-matched",
            Outcome::Sent {
                provider_ref: Some("msg_sm"),
            },
        ),
        (
            "s-lost",
            Outcome::Sent {
                provider_ref: Some("msg_sl"),
            },
        ),
        ("s-lost-no-ref", Outcome::Sent { provider_ref: None }),
        ("f-accepted", Outcome::Permanent { error: "400" }),
        (
            "d-1",
            Outcome::Sent {
                provider_ref: Some("msg_dup"),
            },
        ),
    ] {
        claimed(&mut tx, k, outcome).await;
    }
    // A worker still holds this one; and one became unknown two minutes
    // ago, within the latency bound: the export cannot speak for it yet.
    super::leased(
        &mut tx,
        "p-accepted",
        Ts::from(chrono::Utc::now() + chrono::TimeDelta::minutes(5)),
    )
    .await;
    super::unknown_since(&mut tx, "u-late", 3, 2).await;
    tx.commit().await.unwrap();

    let export = format!(
        "Message-ID,Key,Event,Timestamp\n{}{}{}{}{}{}{}{}{}not,a,line\n",
        line("msg_first", "nobody-1", "failed", 40),
        line("msg_ua", "u-accepted 💶", "queued", 29),
        line("msg_uf", "u-failed", "bounced", 29),
        line("msg_sm", "", "delivered", 29),
        line("", "f-accepted", "delivered", 29),
        line("msg_foreign", "stranger", "delivered", 20),
        line("msg_dup", "d-2", "delivered", 19),
        line("msg_pa", "p-accepted", "delivered", 10),
        line("msg_last", "nobody-2", "failed", 0),
    );
    let r = reconcile(store, &export, "reconcile-0001").await;
    assert_eq!((r.records, r.bad_lines), (9, 1));
    assert!(
        r.bad_sample[0].starts_with("line 11: "),
        "{:?}",
        r.bad_sample
    );
    use ReconcileClass::*;
    assert_eq!(keys_in(&r, UnknownAccepted), ["u-accepted 💶"]);
    assert_eq!(keys_in(&r, UnknownAbsent), ["u-failed", "u-absent/%#"]);
    assert_eq!(keys_in(&r, SentAbsent), ["s-lost", "s-lost-no-ref"]);
    assert_eq!(keys_in(&r, AcceptedUnclaimed), ["p-accepted", "stranger"]);
    assert_eq!(keys_in(&r, SharedReference), ["d-2"]);
    assert_eq!(keys_in(&r, FailedAccepted), ["f-accepted"]);
    let row = |class| &r.classes.iter().find(|c| c.class == class).unwrap().sample[0];
    assert_eq!(row(UnknownAccepted).provider_ref.as_deref(), Some("msg_ua"));
    assert_eq!(row(UnknownAccepted).line, Some(3));
    assert_eq!(
        row(SharedReference).note.as_deref(),
        Some("also on the key “d-1”")
    );
    let summary = |class| r.classes.iter().find(|c| c.class == class).unwrap();
    assert_eq!(summary(UnknownAccepted).to_apply, 1);
    // The one with no record is held back: the unreadable line may be its call.
    assert_eq!(summary(UnknownAbsent).to_apply, 1);
    let absent = &summary(UnknownAbsent).sample;
    assert!(!absent[0].held && absent[1].held, "{absent:?}");
    assert_eq!(
        absent[1].note.as_deref(),
        Some("no record there; held back: a line of the export could not be read")
    );
    assert_eq!(summary(SentAbsent).to_apply, 0, "flagged, not applied");
    // Nothing changed: a reconciliation only reads the claims.
    assert_eq!(
        claim(store, "u-accepted 💶").await.status,
        ClaimStatus::Unknown
    );
    assert_eq!(claim(store, "u-late").await.status, ClaimStatus::Unknown);
    let audit = store.latest_audit(1).await.unwrap();
    assert_eq!(audit[0].action, idem_domain::AuditAction::Reconcile);
    assert_eq!(audit[0].actor, "olga");
    let found = store
        .reconcile()
        .key_reconciliations("orders", "u-failed")
        .await
        .unwrap();
    assert_eq!(found, [(r.id, UnknownAbsent, None)]);

    // The failure there is applied as a retry (its reference is not a
    // sent one's); the held key is left alone.
    operators(store).await;
    let form = testing::action_id("apply-absent-1");
    let start = store
        .runs()
        .apply_reconciliation(&ReconciledResolve {
            reconciliation: idem_domain::ReconciliationId::of_row(r.id),
            class: UnknownAbsent,
            shown: 1,
            reason: None,
            action_id: &form,
            actor: OLGA,
            rights: None,
            via_token: None,
        })
        .await
        .unwrap();
    let run = started_run(store, start).await;
    assert_eq!(run_to_end(store, run).await, 1);
    assert_eq!(claim(store, "u-failed").await.status, ClaimStatus::Failed);
    assert_eq!(
        claim(store, "u-absent/%#").await.status,
        ClaimStatus::Unknown
    );
}

async fn applying_a_class_resolves_its_keys_and_skips_one_changed_since_the_review(store: &Store) {
    operators(store).await;
    let first = unknown_claim(store, "pay:1").await;
    let second = unknown_claim(store, "pay:2 مرحبا").await;
    unknown_claim(store, "pay:3").await;
    let export = format!(
        "reference,key,status,time\n{}{}{}",
        line("ch_1", "pay:1", "succeeded", 40),
        line("ch_2", "pay:2 مرحبا", "succeeded", 29),
        line("ch_9", "elsewhere", "failed", 0),
    );
    let r = reconcile(store, &export, "reconcile-0002").await;
    let accepted = ReconcileClass::UnknownAccepted;
    assert_eq!(keys_in(&r, accepted), ["pay:1", "pay:2 مرحبا"]);
    assert_eq!(keys_in(&r, ReconcileClass::UnknownAbsent), ["pay:3"]);
    // Pete settles the second by hand between the review and the apply.
    pete_resolves(store, "pay:2 مرحبا", second).await;
    let before = reconciled_outcomes(store).await;

    let form = testing::action_id("apply-0001");
    let apply = |shown, form| ReconciledResolve {
        reconciliation: idem_domain::ReconciliationId::of_row(r.id),
        class: accepted,
        shown,
        reason: Some(idem_store::testing::reason("provider export of 03:00")),
        action_id: form,
        actor: OLGA,
        rights: None,
        via_token: None,
    };
    let wrong = store
        .runs()
        .apply_reconciliation(&apply(3, &form))
        .await
        .unwrap();
    assert!(
        matches!(wrong, RedriveStart::NotAllowed(ref why) if why.contains("not the 3 shown")),
        "{wrong:?}"
    );
    let start = store
        .runs()
        .apply_reconciliation(&apply(2, &form))
        .await
        .unwrap();
    let run = started_run(store, start.clone()).await;
    assert_eq!(
        store
            .runs()
            .apply_reconciliation(&apply(2, &form))
            .await
            .unwrap(),
        start,
        "pressed twice"
    );
    assert_eq!(run_to_end(store, run).await, 2);

    let (_, items) = store
        .runs()
        .redrive(idem_domain::RunId::of_row(run), &idem_domain::Within::Every)
        .await
        .unwrap()
        .unwrap();
    let outcomes: Vec<_> = items.iter().map(|i| i.outcome.unwrap()).collect();
    assert_eq!(outcomes, [ItemOutcome::Resolved, ItemOutcome::Skipped]);
    assert!(
        items[1].reason.as_deref().unwrap().contains("pete"),
        "{:?}",
        items[1].reason
    );
    let c = claim(store, "pay:1").await;
    assert_eq!(
        (c.status, c.provider_ref.as_deref()),
        (ClaimStatus::Sent, Some("ch_1"))
    );
    assert!(c.version > first);
    assert_eq!(
        claim(store, "pay:2 مرحبا").await.status,
        ClaimStatus::Failed,
        "Pete's stands"
    );
    let audit = store.latest_audit(10).await.unwrap();
    let resolved = audit
        .iter()
        .find(|a| a.action == idem_domain::AuditAction::ResolveSent)
        .unwrap();
    let why = resolved.reason.as_deref().unwrap();
    assert!(
        why.contains(&format!(
            "reconciliation #{}: provider export of 03:00",
            r.id
        )),
        "{why}"
    );
    // Counted as an outcome recorded now, in reconciled-15m's histogram.
    assert_eq!(reconciled_outcomes(store).await, before + 1.0);

    let after = store
        .reconcile()
        .reconciliation(
            idem_domain::ReconciliationId::of_row(r.id),
            50,
            &idem_domain::Within::Every,
        )
        .await
        .unwrap()
        .unwrap();
    let class = after.classes.iter().find(|c| c.class == accepted).unwrap();
    assert_eq!((class.to_apply, class.applied_runs.clone()), (0, vec![run]));
    assert_eq!(class.sample[0].applied_run, Some(run));
    let again = testing::action_id("apply-0002");
    let nothing = store
        .runs()
        .apply_reconciliation(&apply(0, &again))
        .await
        .unwrap();
    assert!(
        matches!(nothing, RedriveStart::NotAllowed(ref why) if why.contains("left to apply")),
        "{nothing:?}"
    );
    assert_eq!(
        store
            .reconcile()
            .key_reconciliations("orders", "pay:1")
            .await
            .unwrap(),
        [(r.id, accepted, Some(run))]
    );
}

/// Outcomes counted in `outcome_latency_seconds` over the last hour.
async fn reconciled_outcomes(store: &Store) -> f64 {
    let indicator = Indicator::Histogram {
        histogram: idem_domain::Metric::OutcomeLatencySeconds,
        at_most_seconds: 3600.0,
    };
    let now = chrono::Utc::now();
    let events = store
        .metrics()
        .indicator_events_since(
            &[&indicator],
            &[Ts::from(now - chrono::TimeDelta::hours(1))],
            Ts::from(now + chrono::TimeDelta::minutes(1)),
        )
        .await
        .unwrap();
    events[0][0].valid
}

async fn sending_a_reconciliation_again_keeps_the_first(store: &Store) {
    let mut tx = store.begin().await.unwrap();
    claimed(&mut tx, "pay:1", SENT).await;
    tx.commit().await.unwrap();
    let export = line("msg_1", "pay:1", "delivered", 29);
    let export = format!("reference,key,status,time\n{export}");
    let first = reconcile(store, &export, "reconcile-0003").await;
    let again = reconcile(store, &export, "reconcile-0003").await;
    assert_eq!(first.id, again.id);
    assert!(
        first.classes.iter().all(|c| c.count == 0),
        "nothing differs"
    );
    let reconcile = store.reconcile();
    let mut other = reconcile.reconciler(idem_domain::ConsumerName::parse("orders").unwrap(), 0);
    other.feed(&[]).await.unwrap();
    let reused = other
        .finish(&NewReconciliation {
            action_id: "reconcile-0003",
            actor: OLGA,
            file_name: "other.csv",
            file_sha256: "another file",
            file_bytes: 1,
            status_words: "",
        })
        .await
        .unwrap();
    assert_eq!(
        reused,
        Reconciled::FormReused {
            id: Some(idem_domain::ReconciliationId::of_row(first.id))
        }
    );
    assert_eq!(
        store
            .reconcile()
            .reconciliations(&idem_domain::Within::Every, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}
