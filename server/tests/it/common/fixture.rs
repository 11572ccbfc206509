//! Rows to act on: dead letters and a claim whose outcome is unknown.

use idem_store::{Store, testing};

/// A dead letter for `key` of `orders`, written as a consumer would; its id.
pub async fn dead_letter(store: &Store, key: &str) -> i64 {
    dead_letter_with(store, key, "503 from the provider").await
}

/// An open dead letter of `orders` for `key` whose last error is `error`.
pub async fn dead_letter_with(store: &Store, key: &str, error: &str) -> i64 {
    let now = idem_store::Ts::now();
    let mut tx = store.begin().await.unwrap();
    let id = tx
        .dead_letter(&idem_store::NewDeadLetter {
            consumer: "orders",
            queue: "orders.fifo",
            key,
            message_id: key,
            payload: "{}",
            delivery_count: 3,
            first_failure_at: now,
            last_error: Some(error),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// What the valid calls below act on: a claim `key-…` of `orders` whose
/// outcome is unknown, an open dead letter of it, and a second dead letter
/// whose key `sent-…` is sent (one that may be discarded); a third dead
/// letter of the key, with an error naming it, and a redrive of it.
pub struct Fixture {
    pub key: String,
    pub unknown_version: i64,
    pub dead_letter: i64,
    pub discardable: i64,
    pub redrive: i64,
    /// A reconciliation of `orders` in which nothing differs.
    pub reconciliation: i64,
}

impl Fixture {
    /// The fixture on `key-1` and `sent-1`.
    pub async fn write(store: &Store) -> Fixture {
        Fixture::write_named(store, "1").await
    }

    /// A fixture of its own: `key-{tag}` and `sent-{tag}`.
    pub async fn write_named(store: &Store, tag: &str) -> Fixture {
        use idem_store::{Delivery, Outcome, Ts};
        let now = Ts::now();
        let key = format!("key-{tag}");
        let sent = format!("sent-{tag}");
        let mut tx = store.begin().await.unwrap();
        for (key, outcome) in [
            (key.as_str(), Outcome::Unknown { error: "timeout" }),
            (
                sent.as_str(),
                Outcome::Sent {
                    provider_ref: Some("pi_1"),
                },
            ),
        ] {
            tx.claim(&Delivery {
                consumer: "orders",
                key,
                payload_hash: None,
                at: now,
            })
            .await
            .unwrap();
            tx.lease("orders", key, now, now).await.unwrap();
            tx.record("orders", key, outcome, now).await.unwrap();
        }
        tx.commit().await.unwrap();
        let unknown_version = store
            .claims()
            .claim(&testing::consumer("orders"), &testing::key(&key))
            .await
            .unwrap()
            .unwrap()
            .version;
        let discardable = dead_letter(store, &sent).await;
        let dead_letter = dead_letter(store, &key).await;
        dead_letter_with(store, &key, &Fixture::redrive_error(&key)).await;
        let selection = idem_store::DeadLetterFilter {
            error: Some(Fixture::redrive_error(&key)),
            ..Default::default()
        };
        // A redrive acts with its starter's rights, read from their account.
        store
            .people()
            .create_user(
                &idem_store::testing::account("fixture"),
                idem_domain::Role::Operator,
                None,
            )
            .await
            .unwrap();
        let offer = store.runs().redrive_offer(&selection).await.unwrap();
        let started = store
            .runs()
            .start_redrive(&idem_store::RedriveRequest {
                kind: idem_store::LetterRun::Replay,
                selection: &selection,
                offer: &offer,
                action_id: &idem_domain::action::ActionId::parse(
                    &format!("fixture-{key}").replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
                )
                .unwrap(),
                actor: idem_store::Actor {
                    name: "fixture",
                    role: "operator",
                    client_addr: None,
                },
                rights: None,
                via_token: None,
            })
            .await
            .unwrap();
        let idem_store::RedriveStart::Started { id: redrive, .. } = started else {
            panic!("the fixture's redrive starts: {started:?}");
        };
        let reconciliation = reconciliation(store, &key, &sent).await;
        Fixture {
            unknown_version,
            dead_letter,
            discardable,
            redrive: redrive.get(),
            reconciliation,
            key,
        }
    }

    /// The error of the dead letter only the fixture's redrives take (its
    /// key in brackets, so `key-1` is not found in `key-10`).
    fn redrive_error(key: &str) -> String {
        format!("redrive me: «{key}»")
    }

    /// Every server function by name, with arguments that are all valid:
    /// a call that is allowed answers 200. `tag` keeps action ids apart
    /// between callers.
    pub fn valid_calls(&self, tag: &str) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
        let id = |what: &str| format!("{tag}-0123456789-{what}");
        let none = String::new;
        vec![
            ("get_console_info", vec![]),
            ("get_login_info", vec![]),
            ("get_overview", vec![]),
            ("get_slos", vec![]),
            ("get_slo", vec![("name", "duplicate-claim-rate".into())]),
            (
                "get_charts",
                vec![("range", "24h".into()), ("consumer", "orders".into())],
            ),
            (
                "get_slo_charts",
                vec![("name", "duplicate-claim-rate".into())],
            ),
            (
                "get_key_story",
                vec![("consumer", "orders".into()), ("key", self.key.clone())],
            ),
            ("lookup_key", vec![("key", self.key.clone())]),
            (
                "search_keys",
                vec![
                    ("query[q]", "key".into()),
                    ("query[consumer]", "orders".into()),
                    ("query[status]", "unknown".into()),
                    ("query[cursor]", none()),
                    ("query[limit]", "10".into()),
                ],
            ),
            ("list_unknown", vec![("consumer", "orders".into())]),
            (
                "list_dead_letters",
                vec![("state", "open".into()), ("consumer", "orders".into())],
            ),
            (
                "get_dead_letter",
                vec![("id", self.dead_letter.to_string())],
            ),
            (
                "list_outbox",
                vec![
                    ("consumer", "orders".into()),
                    ("topic", "order.shipped".into()),
                ],
            ),
            ("get_checks", vec![("check", "payload-drift".into())]),
            (
                "get_consumers",
                vec![("team", "payments".into()), ("sort", "unknown".into())],
            ),
            ("get_consumer", vec![("name", "orders".into())]),
            (
                "list_audit",
                vec![
                    ("query[actor]", "olga".into()),
                    ("query[action]", "replay".into()),
                    ("query[key]", self.key.clone()),
                    ("query[from]", "2026-11-30T14:00Z".into()),
                    ("query[to]", none()),
                    ("query[recoveries]", "1".into()),
                    ("query[cursor]", none()),
                ],
            ),
            ("get_action_answer", vec![("action_id", id("replay"))]),
            (
                "replay_dead_letter",
                vec![
                    ("id", self.dead_letter.to_string()),
                    ("action_id", id("replay")),
                    ("override_verdict", "on".into()),
                    ("reason", "checked with the provider".into()),
                ],
            ),
            (
                "discard_dead_letter",
                vec![
                    ("id", self.discardable.to_string()),
                    ("action_id", id("discard")),
                    ("reason", "already sent".into()),
                ],
            ),
            (
                "resolve_unknown",
                vec![
                    ("consumer", "orders".into()),
                    ("key", self.key.clone()),
                    ("version", self.unknown_version.to_string()),
                    ("action_id", id("resolve")),
                    ("outcome", "sent".into()),
                    ("provider_ref", "pi_2".into()),
                    ("reason", "found in the provider's dashboard".into()),
                ],
            ),
            ("get_redrive", vec![("id", self.redrive.to_string())]),
            (
                "start_redrive",
                // A filter nothing matches, and the offer of a page that
                // showed nothing: answered (200) with nothing to redrive,
                // however often it is sent.
                vec![
                    ("action_id", id("redrive")),
                    ("offer", idem_domain::RedriveOffer::of([]).token()),
                    ("consumer", "orders".into()),
                    (
                        "error",
                        format!("nothing matches {}", Fixture::redrive_error(&self.key)),
                    ),
                    ("from", "2026-01-01T00:00Z".into()),
                    ("to", none()),
                ],
            ),
            (
                "stop_redrive",
                vec![("id", self.redrive.to_string()), ("action_id", id("stop"))],
            ),
            (
                "start_bulk_discard",
                // The offer of a page that showed nothing: answered (200)
                // with nothing to discard, however often it is sent.
                vec![
                    ("action_id", id("bulk-discard")),
                    ("offer", idem_domain::RedriveOffer::of([]).token()),
                    ("consumer", "orders".into()),
                    ("reason", "already sent, INC-7".into()),
                ],
            ),
            (
                "start_bulk_resolve",
                // A key with no claim: a run starts and skips it, saying so.
                vec![
                    ("action_id", id("bulk-resolve")),
                    ("resolve_as", "failed-retry".into()),
                    ("reason", "the provider's log has none of them".into()),
                    (
                        "keys",
                        r#"[{"consumer":"orders","key":"no claim here","version":1}]"#.into(),
                    ),
                    ("references", none()),
                    ("shown_on", "unknown-past-objective".into()),
                ],
            ),
            ("get_reconcile_home", vec![]),
            (
                "get_reconciliation",
                vec![("id", self.reconciliation.to_string())],
            ),
            (
                "apply_reconciliation",
                // Nothing differs, so nothing is left to apply: answered
                // (200) with that, however often it is sent.
                vec![
                    ("action_id", id("apply")),
                    ("id", self.reconciliation.to_string()),
                    ("class", "unknown-absent".into()),
                    ("shown", "1".into()),
                    ("reason", "the provider's log of 02:00".into()),
                ],
            ),
            ("list_tokens", vec![]),
            (
                "revoke_token",
                vec![
                    ("name", "no-such-token".into()),
                    ("action_id", id("revoke")),
                ],
            ),
        ]
    }
}

/// A reconciliation of `orders` by "fixture": an export an hour old whose
/// one record is `sent`'s, so nothing differs.
async fn reconciliation(store: &Store, key: &str, sent: &str) -> i64 {
    let mut reconciler = store.reconcile().reconciler(testing::consumer("orders"), 0);
    let record = idem_domain::ProviderRecord {
        line: 2,
        reference: Some("pi_1".into()),
        key: Some(testing::key(sent)),
        status: idem_domain::ProviderStatus::Accepted,
        at: chrono::Utc::now() - chrono::TimeDelta::hours(1),
    };
    reconciler.feed(&[record]).await.unwrap();
    let action_id =
        format!("fixture-reconcile-{key}").replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let kept = reconciler
        .finish(&idem_store::NewReconciliation {
            action_id: &action_id,
            actor: idem_store::Actor {
                name: "fixture",
                role: "operator",
                client_addr: None,
            },
            file_name: "fixture.csv",
            file_sha256: &"0".repeat(64),
            file_bytes: 64,
            status_words: "",
        })
        .await
        .unwrap();
    let idem_store::Reconciled::Kept { id } = kept else {
        panic!("the fixture's reconciliation is kept: {kept:?}");
    };
    id.get()
}
