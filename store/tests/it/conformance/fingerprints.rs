//! Key fingerprints in the logs: one secret per install, and each logged
//! fingerprint leading back to its key.

use idem_store::{Store, Ts};

idem_store::on_both_backends!(
    the_first_secret_stored_is_every_replica_s_secret,
    a_logged_fingerprint_leads_back_to_its_key_and_keeps_its_first_key,
);

async fn the_first_secret_stored_is_every_replica_s_secret(store: &Store) {
    let first = store
        .log_fingerprint_secret("generated-by-a")
        .await
        .unwrap();
    assert_eq!(first, "generated-by-a");
    let second = store
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
            .key_by_fingerprint("kf_0123456789abcdef")
            .await
            .unwrap(),
        None
    );
    store
        .record_key_fingerprint("kf_0123456789abcdef", "payments", key, Ts::now())
        .await
        .unwrap();
    // Stored again (another replica, a restart): nothing changes.
    store
        .record_key_fingerprint("kf_0123456789abcdef", "other", "other", Ts::now())
        .await
        .unwrap();
    assert_eq!(
        store
            .key_by_fingerprint("kf_0123456789abcdef")
            .await
            .unwrap(),
        Some(("payments".to_owned(), key.to_owned()))
    );
}
