//! Key fingerprints in the logs: one secret per install, and each logged
//! fingerprint leading back to its key.

use idem_store::{Store, Ts};

idem_store::on_both_backends!(
    the_first_secret_stored_is_every_replica_s_secret,
    a_logged_fingerprint_leads_back_to_its_key_and_keeps_its_first_key,
    a_fingerprint_not_logged_for_a_month_is_deleted_and_one_still_logged_stays,
);

async fn the_first_secret_stored_is_every_replica_s_secret(store: &Store) {
    let first = store
        .system()
        .log_fingerprint_secret("generated-by-a")
        .await
        .unwrap();
    assert_eq!(first, "generated-by-a");
    let second = store
        .system()
        .log_fingerprint_secret("generated-by-b")
        .await
        .unwrap();
    assert_eq!(
        second, "generated-by-a",
        "a second replica gets the first secret"
    );
}

async fn a_logged_fingerprint_leads_back_to_its_key_and_keeps_its_first_key(store: &Store) {
    let key = "refund:EU/2026/%Ø #1 🧾 עברית";
    assert_eq!(
        store
            .claims()
            .key_by_fingerprint("kf_0123456789abcdef")
            .await
            .unwrap(),
        None
    );
    store
        .system()
        .record_key_fingerprint("kf_0123456789abcdef", "payments", key, Ts::now())
        .await
        .unwrap();
    // Stored again (another replica, a restart): nothing changes.
    store
        .system()
        .record_key_fingerprint("kf_0123456789abcdef", "other", "other", Ts::now())
        .await
        .unwrap();
    assert_eq!(
        store
            .claims()
            .key_by_fingerprint("kf_0123456789abcdef")
            .await
            .unwrap(),
        Some(("payments".to_owned(), key.to_owned()))
    );
}

async fn a_fingerprint_not_logged_for_a_month_is_deleted_and_one_still_logged_stays(store: &Store) {
    let now = Ts::now();
    let days_ago = |days: i64| Ts::from(now.0 - chrono::TimeDelta::days(days));
    store
        .system()
        .record_key_fingerprint("kf_00000000000000aa", "orders", "old", days_ago(40))
        .await
        .unwrap();
    store
        .system()
        .record_key_fingerprint("kf_00000000000000bb", "orders", "read", days_ago(40))
        .await
        .unwrap();
    // Read again last week: its row is kept, with its first key.
    store
        .system()
        .record_key_fingerprint("kf_00000000000000bb", "orders", "other", days_ago(7))
        .await
        .unwrap();
    assert_eq!(store.system().prune_key_fingerprints(now).await.unwrap(), 1);
    assert_eq!(
        store
            .claims()
            .key_by_fingerprint("kf_00000000000000aa")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .claims()
            .key_by_fingerprint("kf_00000000000000bb")
            .await
            .unwrap(),
        Some(("orders".to_owned(), "read".to_owned()))
    );
    assert_eq!(store.system().prune_key_fingerprints(now).await.unwrap(), 0);
}
