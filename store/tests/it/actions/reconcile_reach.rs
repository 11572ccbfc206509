//! Reconciliation where the export's reach is in question: one taken after
//! its last record, records that name no key, an attempt older than the
//! export; and two people applying one class at once.

use idem_domain::{ExportReader, ReconcileClass, StatusWords};
use idem_store::{NewReconciliation, Reconciled, ReconciledResolve, RedriveStart, Store, testing};

use super::{
    OLGA, ago,
    reconcile::{keys_in, line, reconcile},
    redrive::operators,
    unknown_claim,
};

idem_store::on_both_backends!(
    an_export_taken_after_its_last_record_covers_the_calls_since,
    records_without_a_key_and_an_attempt_older_than_the_export_are_not_called_absent,
    two_people_applying_one_class_at_once_start_one_run,
);

async fn an_export_taken_after_its_last_record_covers_the_calls_since(store: &Store) {
    // Unknown since 29 minutes ago; the export's last record is 40 minutes
    // old, but it was taken just now and holds no record of the call.
    unknown_claim(store, "pay:quiet").await;
    let export = format!(
        "reference,key,status,time\n{}{}",
        line("r1", "other-1", "failed", 60),
        line("r2", "other-2", "failed", 40)
    );
    let by_records = reconcile(store, &export, "reconcile-0004").await;
    assert_eq!(
        keys_in(&by_records, ReconcileClass::UnknownAbsent),
        Vec::<String>::new()
    );

    let consumer = idem_domain::ConsumerName::parse("orders").unwrap();
    let mut reader = ExportReader::new(StatusWords::default());
    let mut out = Vec::new();
    reader.push(export.as_bytes(), &mut out);
    reader.finish(&mut out);
    let records: Vec<_> = out.into_iter().map(Result::unwrap).collect();
    let reconcile = store.reconcile();
    let mut taken_now = reconcile
        .reconciler(consumer, 300)
        .covering_until(chrono::Utc::now());
    taken_now.feed(&records).await.unwrap();
    let kept = taken_now
        .finish(&NewReconciliation {
            action_id: "reconcile-0005",
            actor: OLGA,
            file_name: "messages.csv",
            file_sha256: "taken now",
            file_bytes: 1,
            status_words: "",
        })
        .await
        .unwrap();
    let Reconciled::Kept { id } = kept else {
        panic!("{kept:?}")
    };
    let r = store
        .reconcile()
        .reconciliation(
            idem_domain::ReconciliationId::of_row(id.get()),
            50,
            &idem_domain::Within::Every,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(keys_in(&r, ReconcileClass::UnknownAbsent), ["pay:quiet"]);
    assert!(r.span_to.unwrap() > chrono::Utc::now() - chrono::TimeDelta::minutes(1));
}

async fn records_without_a_key_and_an_attempt_older_than_the_export_are_not_called_absent(
    store: &Store,
) {
    unknown_claim(store, "pay:plain").await;
    // First delivered an hour ago, before the export's first record; its
    // last attempt became unknown within the export's span.
    let mut tx = store.begin().await.unwrap();
    super::unknown_since(&mut tx, "pay:old", 60, 29).await;
    tx.commit().await.unwrap();

    let keyed = format!(
        "reference,key,status,time\n{}{}",
        line("r1", "other-1", "failed", 40),
        line("r2", "other-2", "failed", 0)
    );
    let r = reconcile(store, &keyed, "reconcile-0006").await;
    assert_eq!(
        keys_in(&r, ReconcileClass::UnknownAbsent),
        ["pay:plain"],
        "not pay:old"
    );
    assert_eq!(r.classes[1].to_apply, 1);

    // An export that names no key: its records may be any unknown call.
    let at = |m: i64| ago(m).0.to_rfc3339();
    let keyless = format!(
        "reference,status,time\nr1,failed,{}\nr9,delivered,{}\n",
        at(40),
        at(0)
    );
    let r = reconcile(store, &keyless, "reconcile-0007").await;
    let absent = &r
        .classes
        .iter()
        .find(|c| c.class == ReconcileClass::UnknownAbsent)
        .unwrap();
    assert_eq!(absent.count, 1);
    assert_eq!(absent.to_apply, 0, "held back");
    assert!(
        absent.sample[0]
            .note
            .as_deref()
            .unwrap()
            .contains("2 records name no key"),
        "{absent:?}"
    );
}

async fn two_people_applying_one_class_at_once_start_one_run(store: &Store) {
    operators(store).await;
    for k in ["pay:1", "pay:2"] {
        unknown_claim(store, k).await;
    }
    let export = format!(
        "reference,key,status,time\n{}{}{}",
        line("ch_1", "pay:1", "succeeded", 40),
        line("ch_2", "pay:2", "succeeded", 29),
        line("ch_9", "elsewhere", "failed", 0),
    );
    let r = reconcile(store, &export, "reconcile-0008").await;
    let (olga_form, pete_form) = (
        testing::action_id("apply-olga"),
        testing::action_id("apply-pete"),
    );
    let apply = |form, actor| ReconciledResolve {
        reconciliation: idem_domain::ReconciliationId::of_row(r.id),
        class: ReconcileClass::UnknownAccepted,
        shown: 2,
        reason: None,
        action_id: form,
        actor,
        rights: None,
        via_token: None,
    };
    let (olga, pete) = (apply(&olga_form, OLGA), apply(&pete_form, super::PETE));
    let runs = store.runs();
    let (a, b) = tokio::join!(
        runs.apply_reconciliation(&olga),
        runs.apply_reconciliation(&pete)
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let started = [&a, &b]
        .iter()
        .filter(|s| matches!(s, RedriveStart::Started { .. }))
        .count();
    assert_eq!(started, 1, "one run takes the class: {a:?} {b:?}");
    let other = if matches!(a, RedriveStart::Started { .. }) {
        &b
    } else {
        &a
    };
    assert!(
        matches!(other, RedriveStart::NotAllowed(why) if why.contains("left to apply")),
        "{other:?}"
    );
}
