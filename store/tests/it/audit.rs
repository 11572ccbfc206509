//! Reading the audit log back, on both backends: newest first, filtered by
//! actor, action and key, keyset-paginated.

use idem_domain::AuditEntry;
use idem_store::{AuditFilter, NewAuditEntry, PageRequest, Store, StoreError};

idem_store::on_both_backends!(
    the_audit_log_lists_newest_first_in_pages_without_skipping_or_repeating,
    the_audit_log_filters_by_actor_action_and_key_exactly,
    an_audit_cursor_from_another_list_is_refused,
    the_audit_log_narrows_to_a_time_window_and_to_recoveries,
);

async fn the_audit_log_narrows_to_a_time_window_and_to_recoveries(store: &Store) {
    let recovery =
        |actor: &'static str, action: &'static str, seconds: Option<f64>| NewAuditEntry {
            consumer: Some("orders"),
            key: Some(KEY),
            recovery_seconds: seconds,
            ..NewAuditEntry::new(
                actor,
                "operator",
                action.parse().unwrap(),
                idem_domain::AuditResult::Ok,
            )
        };
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(5));
    store
        .audit()
        .append_audit(&recovery("olga", "replay", Some(60.0)))
        .await
        .unwrap();
    pause().await;
    let from = idem_store::Ts::now();
    store
        .audit()
        .append_audit(&recovery("olga", "login", None))
        .await
        .unwrap();
    store
        .audit()
        .append_audit(&recovery("pete", "resolve:sent", Some(900.0)))
        .await
        .unwrap();
    pause().await;
    let to = idem_store::Ts::now();
    store
        .audit()
        .append_audit(&recovery("pete", "replay", Some(30.0)))
        .await
        .unwrap();

    let window = AuditFilter {
        from: Some(from),
        to: Some(to),
        ..AuditFilter::default()
    };
    let (inside, _) = page_of(store, &window, 50, None).await;
    assert_eq!(inside, ["pete resolve:sent", "olga login"]);
    let recoveries = AuditFilter {
        recoveries: true,
        ..AuditFilter::default()
    };
    let (all, _) = page_of(store, &recoveries, 50, None).await;
    assert_eq!(all, ["pete replay", "pete resolve:sent", "olga replay"]);
    let (both, _) = page_of(
        store,
        &AuditFilter {
            recoveries: true,
            ..window
        },
        50,
        None,
    )
    .await;
    assert_eq!(both, ["pete resolve:sent"]);
}

const KEY: &str = "inv:2026/11#7 ✓ 100% شهر";

/// Appends `(actor, action, key)` entries in order (the later, the newer).
async fn append(store: &Store, entries: &[(&str, &str, Option<&str>)]) {
    for (actor, action, key) in entries {
        store
            .audit()
            .append_audit(&NewAuditEntry {
                consumer: key.map(|_| "orders"),
                key: *key,
                client_addr: Some("192.0.2.9"),
                ..NewAuditEntry::new(
                    actor,
                    "operator",
                    action.parse().unwrap(),
                    idem_domain::AuditResult::Ok,
                )
            })
            .await
            .unwrap();
    }
}

async fn page_of(
    store: &Store,
    filter: &AuditFilter,
    limit: u32,
    cursor: Option<String>,
) -> (Vec<String>, Option<String>) {
    let page = store
        .audit()
        .audit_log(filter, &PageRequest::new(limit, cursor))
        .await
        .unwrap();
    let described = page
        .items
        .iter()
        .map(|e| format!("{} {}", e.actor, e.action))
        .collect();
    (described, page.next)
}

async fn the_audit_log_lists_newest_first_in_pages_without_skipping_or_repeating(store: &Store) {
    append(store, &[("early", "login", None)]).await;
    // Seven entries in one microsecond: only the id orders them, so a page
    // boundary inside the tie must neither skip nor repeat one.
    let at = chrono::Utc::now() + chrono::TimeDelta::seconds(1);
    let tied: Vec<AuditEntry> = (0..7)
        .map(|i| AuditEntry {
            id: 0,
            action_id: None,
            at,
            actor: format!("user{i}"),
            actor_role: "operator".into(),
            action: idem_domain::AuditAction::Login,
            consumer: None,
            key: None,
            target: None,
            state_before: None,
            state_after: None,
            reason: None,
            result: idem_domain::AuditResult::Ok,
            client_addr: None,
            recovery_seconds: None,
        })
        .collect();
    store.bulk_insert_audit(&tied).await.unwrap();

    let all = AuditFilter::default();
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .audit()
            .audit_log(&all, &PageRequest::new(3, cursor))
            .await
            .unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let ids: Vec<i64> = seen.iter().map(|e| e.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "newest first, each once: {ids:?}"
    );
    let actors: Vec<&str> = seen.iter().map(|e| e.actor.as_str()).collect();
    assert_eq!(
        actors,
        [
            "user6", "user5", "user4", "user3", "user2", "user1", "user0", "early"
        ]
    );
}

async fn the_audit_log_filters_by_actor_action_and_key_exactly(store: &Store) {
    append(
        store,
        &[
            ("olga", "login", None),
            ("olga", "replay", Some(KEY)),
            ("pete", "resolve:sent", Some(KEY)),
            ("pete", "replay", Some("inv:2026/11#8")),
            ("olga", "logout", None),
        ],
    )
    .await;
    let filtered = |actor: Option<&str>, action: Option<&str>, key: Option<&str>| AuditFilter {
        actor: actor.map(str::to_owned),
        action: action.map(|a| a.parse().unwrap()),
        key: key.map(str::to_owned),
        ..AuditFilter::default()
    };

    let (olga, _) = page_of(store, &filtered(Some("olga"), None, None), 50, None).await;
    assert_eq!(olga, ["olga logout", "olga replay", "olga login"]);

    let (replays, _) = page_of(store, &filtered(None, Some("replay"), None), 50, None).await;
    assert_eq!(replays, ["pete replay", "olga replay"]);

    let (key, _) = page_of(store, &filtered(None, None, Some(KEY)), 50, None).await;
    assert_eq!(key, ["pete resolve:sent", "olga replay"]);
    let entry = &store
        .audit()
        .audit_log(&filtered(None, None, Some(KEY)), &PageRequest::first(1))
        .await
        .unwrap()
        .items[0];
    assert_eq!(
        (entry.consumer.as_deref(), entry.key.as_deref()),
        (Some("orders"), Some(KEY)),
        "the key comes back byte for byte"
    );

    let (both, _) = page_of(
        store,
        &filtered(Some("pete"), Some("replay"), None),
        50,
        None,
    )
    .await;
    assert_eq!(both, ["pete replay"]);

    // Exact, not a prefix or a pattern.
    let (prefix, _) = page_of(store, &filtered(Some("ol"), None, None), 50, None).await;
    assert!(prefix.is_empty());
    // An action is one of the log's own: a family of them is no action.
    assert!("resolve".parse::<idem_domain::AuditAction>().is_err());
    let (pattern, _) = page_of(store, &filtered(None, None, Some("inv:%")), 50, None).await;
    assert!(pattern.is_empty());
}

async fn an_audit_cursor_from_another_list_is_refused(store: &Store) {
    append(store, &[("olga", "login", None), ("olga", "logout", None)]).await;
    // A cursor of the unknown-outcome list, `["unknown",[1,2]]`.
    let forged = "WyJ1bmtub3duIixbMSwyXV0".to_owned();
    let refused = store
        .audit()
        .audit_log(&AuditFilter::default(), &PageRequest::new(1, Some(forged)))
        .await;
    assert!(matches!(refused, Err(StoreError::BadCursor)), "{refused:?}");
    let edited = store
        .audit()
        .audit_log(
            &AuditFilter::default(),
            &PageRequest::new(1, Some("not a cursor".to_owned())),
        )
        .await;
    assert!(matches!(edited, Err(StoreError::BadCursor)));
    // This list's own shape, with a time no stored entry can have (before
    // 4713 BC, out of Postgres's range): refused, not a database error.
    // `["audit_log",[-100000000000000000,1]]`
    let out_of_range = "WyJhdWRpdF9sb2ciLFstMTAwMDAwMDAwMDAwMDAwMDAwLDFdXQ".to_owned();
    let refused = store
        .audit()
        .audit_log(
            &AuditFilter::default(),
            &PageRequest::new(1, Some(out_of_range)),
        )
        .await;
    assert!(matches!(refused, Err(StoreError::BadCursor)), "{refused:?}");
}
