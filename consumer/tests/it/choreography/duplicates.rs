//! The same key delivered again, later, or by two workers at once: the
//! provider is called once.

use std::sync::Arc;

use idem_consumer::ClaimStatus;
use idem_store::Store;
use tokio::sync::Barrier;

use super::{Handled, Provider, at, claim, deliver, reminders, renewal_key};

idem_store::on_both_backends!(
    the_same_key_twice_within_five_minutes_calls_the_provider_once,
    the_same_key_again_after_six_minutes_calls_the_provider_once,
    two_workers_claiming_one_key_at_once_call_the_provider_once,
);

async fn the_same_key_twice_within_five_minutes_calls_the_provider_once(store: &Store) {
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(0)).await,
        Handled::Sent
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(90)).await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 1);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.provider_ref.as_deref(), Some("msg_0001"));
    assert_eq!((claim.delivery_count, claim.duplicate_count), (2, 1));
}

async fn the_same_key_again_after_six_minutes_calls_the_provider_once(store: &Store) {
    // Past a FIFO queue's five-minute deduplication window the broker lets
    // the repeat through; the durable claim still stops it.
    let (consumer, provider, key) = (reminders(), Provider::default(), renewal_key());
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(0)).await,
        Handled::Sent
    );
    assert_eq!(
        deliver(store, &consumer, &provider, &key, 1, at(6 * 60)).await,
        Handled::Suppressed(ClaimStatus::Sent)
    );
    assert_eq!(provider.calls(), 1);
    let claim = claim(store, &key).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!(claim.duplicate_count, 1);
    assert_eq!(claim.last_delivery_at, at(6 * 60));
}

async fn two_workers_claiming_one_key_at_once_call_the_provider_once(store: &Store) {
    let provider = Arc::new(Provider::default());
    let barrier = Arc::new(Barrier::new(2));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (store, provider, barrier) = (store.clone(), provider.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                deliver(&store, &reminders(), &provider, &renewal_key(), 1, at(0)).await
            })
        })
        .collect();
    let mut handled = Vec::new();
    for worker in workers {
        handled.push(worker.await.unwrap());
    }
    assert_eq!(provider.calls(), 1, "{handled:?}");
    assert!(handled.contains(&Handled::Sent), "{handled:?}");
    // The loser either saw the winner's lease or, if the winner had already
    // recorded, its outcome: never a second call.
    assert!(
        handled.contains(&Handled::Busy)
            || handled.contains(&Handled::Suppressed(ClaimStatus::Sent)),
        "{handled:?}"
    );
    let claim = claim(store, &renewal_key()).await;
    assert_eq!(claim.status, ClaimStatus::Sent);
    assert_eq!((claim.delivery_count, claim.attempts), (2, 1));
}
