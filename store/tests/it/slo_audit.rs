//! The indicators read from the audit log: recoveries and resolutions,
//! counted from the entries of the window.

use chrono::TimeDelta;
use idem_domain::{
    Metric,
    slo::{Events, Indicator},
};
use idem_store::{MetricSample, NewAuditEntry, Store, Ts};

idem_store::on_both_backends!(recovery_and_resolution_indicators_count_audit_entries,);

async fn recovery_and_resolution_indicators_count_audit_entries(store: &Store) {
    let now = Ts::now();
    let window_start = now - TimeDelta::hours(1);
    // Four unknown outcomes recorded in the window.
    store
        .metrics()
        .record_metrics(&[MetricSample {
            consumer: "orders".into(),
            metric: Metric::UnknownOutcomes,
            at: now - TimeDelta::minutes(30),
            bucket: String::new(),
            value: 4.0,
        }])
        .await
        .unwrap();
    let entry = |action, recovery_seconds, result| NewAuditEntry {
        recovery_seconds,
        ..NewAuditEntry::new("olga", "operator", action, result)
    };
    for e in [
        entry(
            idem_domain::AuditAction::ResolveSent,
            Some(300.0),
            idem_domain::AuditResult::Ok,
        ),
        entry(
            idem_domain::AuditAction::ResolveFailed,
            Some(1800.0),
            idem_domain::AuditResult::Ok,
        ),
        entry(
            idem_domain::AuditAction::Replay,
            Some(600.0),
            idem_domain::AuditResult::Ok,
        ),
        entry(
            idem_domain::AuditAction::Replay,
            Some(7200.0),
            idem_domain::AuditResult::Ok,
        ),
        // Neither a refused action nor a sign-in is a recovery.
        entry(
            idem_domain::AuditAction::ResolveSent,
            Some(10.0),
            idem_domain::AuditResult::Refused,
        ),
        entry(
            idem_domain::AuditAction::Login,
            None,
            idem_domain::AuditResult::Ok,
        ),
    ] {
        store.audit().append_audit(&e).await.unwrap();
    }
    let until = now + TimeDelta::minutes(1);

    let unknown = store
        .indicator_events(
            &Indicator::UnknownResolved {
                within_seconds: 900.0,
            },
            window_start,
            until,
        )
        .await
        .unwrap();
    assert_eq!(
        unknown,
        Events::new(1.0, 4.0),
        "one of four resolved within 15 min"
    );

    let recovery = store
        .indicator_events(
            &Indicator::Recovery {
                within_seconds: 3600.0,
            },
            window_start,
            until,
        )
        .await
        .unwrap();
    assert_eq!(
        recovery,
        Events::new(3.0, 4.0),
        "three of four recoveries within 60 min"
    );

    // Before the window, nothing.
    let earlier = store
        .indicator_events(
            &Indicator::Recovery {
                within_seconds: 3600.0,
            },
            window_start - TimeDelta::hours(1),
            window_start,
        )
        .await
        .unwrap();
    assert_eq!(earlier, Events::default());
}
