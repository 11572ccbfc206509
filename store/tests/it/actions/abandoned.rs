//! An abandoned lease (a worker claimed the key, took the lease, and never
//! recorded an outcome) is resolved like an unknown outcome — but only once
//! the lease has really run out: until then the worker may still be calling
//! the provider.

use idem_domain::{
    ClaimStatus,
    action::{ActionOutcome, Resolution},
};
use idem_store::{ResolveRequest, Store, Ts, testing};

use super::{OLGA, PETE, ago};

idem_store::on_both_backends!(
    a_lease_still_held_cannot_be_resolved,
    an_abandoned_lease_is_resolved_once_and_counted_from_its_expiry,
);

/// Claims `key` for `orders` half an hour ago, leased until `until`, with
/// no outcome recorded; its version.
async fn leased(store: &Store, key: &str, until: Ts) -> i64 {
    let mut tx = store.begin().await.unwrap();
    let claim = super::leased(&mut tx, key, until).await;
    tx.commit().await.unwrap();
    assert_eq!(claim.status, ClaimStatus::Pending);
    claim.version
}

async fn a_lease_still_held_cannot_be_resolved(store: &Store) {
    let key = "charge:7 / 🔒 held";
    let version = leased(store, key, ago(-10)).await;
    let (orders, typed) = (testing::consumer("orders"), testing::key(key));
    let action_id = testing::action_id("resolve-held");
    let before = store
        .claims()
        .claim(&orders, &typed)
        .await
        .unwrap()
        .unwrap();
    let answer = store
        .actions()
        .resolve_unknown(&ResolveRequest {
            scope: &idem_domain::Within::Every,
            consumer: &orders,
            key: &typed,
            version,
            resolution: Resolution::Sent {
                provider_ref: idem_store::testing::provider_ref("ch_7"),
            },
            action_id: &action_id,
            actor: OLGA,
            reason: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(&answer, ActionOutcome::Refused { reason } if reason.contains("A worker holds this claim until")),
        "{answer:?}"
    );
    assert_eq!(
        store
            .claims()
            .claim(&orders, &typed)
            .await
            .unwrap()
            .unwrap(),
        before
    );
    assert!(
        store
            .claims()
            .audit_for_key(&orders, &typed)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn an_abandoned_lease_is_resolved_once_and_counted_from_its_expiry(store: &Store) {
    let key = "charge:8 / ⌛ abandoned";
    let version = leased(store, key, ago(5)).await;
    let (orders, typed) = (testing::consumer("orders"), testing::key(key));
    let (first, second) = (
        testing::action_id("resolve-abandoned-1"),
        testing::action_id("resolve-abandoned-2"),
    );
    let sent = ResolveRequest {
        scope: &idem_domain::Within::Every,
        consumer: &orders,
        key: &typed,
        version,
        resolution: Resolution::Sent {
            provider_ref: idem_store::testing::provider_ref("ch_8"),
        },
        action_id: &first,
        actor: OLGA,
        reason: Some(idem_store::testing::reason(
            "the provider's dashboard shows the charge",
        )),
    };
    let answer = store.actions().resolve_unknown(&sent).await.unwrap();
    assert!(matches!(answer, ActionOutcome::Done { .. }), "{answer:?}");
    let claim = store
        .claims()
        .claim(&orders, &typed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.provider_ref.as_deref(), Some("ch_8"));
    assert_eq!(claim.lease_until, None, "the lease is released");

    let audit = store.claims().audit_for_key(&orders, &typed).await.unwrap();
    assert_eq!(audit.len(), 1);
    let before = audit[0].state_before.as_ref().unwrap().to_string();
    assert!(
        before.starts_with("pending, lease expired")
            && before.ends_with(&format!("(version {version})")),
        "{before}"
    );
    // Counted from the lease's expiry five minutes ago, not the claim's
    // half hour: that is when nobody was working on it any more.
    let recovery = audit[0].recovery_seconds.unwrap();
    assert!((290.0..400.0).contains(&recovery), "{recovery}");

    // Another operator on the page from before: told, not applied twice.
    let late = store
        .actions()
        .resolve_unknown(&ResolveRequest {
            resolution: Resolution::FailedPermanently,
            action_id: &second,
            actor: PETE,
            reason: Some(idem_store::testing::reason("never arrived")),
            ..sent.clone()
        })
        .await
        .unwrap();
    assert!(matches!(late, ActionOutcome::Conflict { .. }), "{late:?}");
    assert_eq!(
        store
            .claims()
            .audit_for_key(&orders, &typed)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .claims()
            .claim(&orders, &typed)
            .await
            .unwrap()
            .unwrap()
            .status,
        ClaimStatus::Sent
    );
}
