//! The library writes through the caller's own sqlx transaction: the claim,
//! the outcome and the business row commit together or not at all.

use chrono::Utc;
use idem_consumer::{ClaimStatus, Consumer, Decision, derive_key};
use idem_store::{
    Store,
    testing::{self, execute_raw},
};

idem_store::on_both_backends!(the_claim_commits_and_rolls_back_with_the_callers_own_business_write);

const TABLE: &str =
    "CREATE TABLE invoices_paid (invoice TEXT PRIMARY KEY, amount_cents BIGINT NOT NULL)";

async fn the_claim_commits_and_rolls_back_with_the_callers_own_business_write(store: &Store) {
    execute_raw(store, TABLE, TABLE).await.unwrap();
    let consumer = Consumer::new("payment-webhooks").unwrap();
    let key = derive_key("payment", &["INV-1842"]).unwrap();
    const PAY: &str = "INSERT INTO invoices_paid (invoice, amount_cents) VALUES ($1, $2)";

    // `attempt` runs the whole delivery in one plain sqlx transaction on
    // the service's own pool and commits only when asked to.
    let attempt = |commit: bool| {
        let (store, consumer, key) = (store.clone(), consumer.clone(), key.clone());
        async move {
            let now = Utc::now();
            macro_rules! deliver {
                ($pool:expr) => {{
                    let mut tx = $pool.begin().await.unwrap();
                    let claim = consumer.claim(&mut *tx, &key, None, now).await.unwrap();
                    assert_eq!(claim.decision, Decision::Proceed);
                    sqlx::query(PAY)
                        .bind("INV-1842")
                        .bind(4200_i64)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    consumer
                        .record_sent(&mut *tx, &key, Some("ledger-1842"), now)
                        .await
                        .unwrap();
                    if commit {
                        tx.commit().await.unwrap();
                    } else {
                        tx.rollback().await.unwrap();
                    }
                }};
            }
            match (store.postgres_pool(), store.sqlite_pool()) {
                (Some(pool), _) => deliver!(pool),
                (None, Some(pool)) => deliver!(pool),
                (None, None) => unreachable!("a store has one pool"),
            }
        }
    };

    attempt(false).await;
    let webhooks = testing::consumer("payment-webhooks");
    assert_eq!(
        store.claims().claim(&webhooks, &key).await.unwrap(),
        None,
        "a rolled-back delivery leaves no claim"
    );
    attempt(true).await;
    let claim = store
        .claims()
        .claim(&webhooks, &key)
        .await
        .unwrap()
        .expect("the committed delivery left its claim");
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.provider_ref.as_deref(), Some("ledger-1842"));
    assert_eq!(
        claim.delivery_count, 1,
        "the rolled-back delivery was never counted"
    );
}
