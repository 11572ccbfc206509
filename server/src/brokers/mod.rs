//! Dead letters a broker keeps (RabbitMQ's dead-letter queues), not a table.
//!
//! For each consumer configured in `IDEM_BROKERS_FILE`, Idem drains its
//! dead-letter queue into `dead_letters`: each message is taken from the
//! broker, stored (with the broker's facts about its death) in one
//! transaction, and acknowledged to the broker only once that transaction
//! has committed. If Idem dies in between, the broker delivers the message
//! again and the store recognises it (`broker_ref`): nothing is lost and
//! nothing is stored twice. From then on the key page, `/dead-letters`, the
//! checks, the verdict and the redrive treat it as any dead letter.
//!
//! A replay of such a dead letter is an outbox row, as for any other; Idem
//! publishes it itself ([`Brokers`] is the app's `Republish`): once, to the
//! exchange and routing key the message was first published to, with its
//! key and message id, waiting for the broker's confirm. A publish the
//! broker did not confirm is recorded on the row and tried again — by the
//! same replay form submitted again, or by the relay every minute — never
//! as a second replay.
//!
//! The seam for other brokers: a [`DeadLetterQueue`] (take, acknowledge,
//! release — SQS's ReceiveMessage/DeleteMessage/visibility, JetStream's
//! Fetch/Ack/Nak) and a [`ReplayTarget`] (publish and wait for the broker's
//! word — SQS's SendMessage, JetStream's publish ack). [`drain`] and the
//! relay are written once against them.

use std::{collections::HashMap, sync::Arc, time::Duration};

use idem_app::republish::{Publication, Republish};
use idem_store::{BrokerReplay, NewBrokerDeadLetter, Store, StoreError, Ts};
use serde::Deserialize;
use tokio::sync::watch;

pub mod message;
pub mod rabbitmq;

/// Where a message's idempotency key is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeySource {
    /// An AMQP header (its value a string).
    Header(String),
    /// A JSON pointer into the body (`/reminder/id`).
    JsonPointer(String),
}

/// One consumer's RabbitMQ dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitMqDeadLetters {
    /// The consumer Idem shows the dead letters under.
    pub consumer: String,
    /// `amqp://user:password@host:port/vhost`.
    pub url: String,
    pub dead_letter_queue: String,
    pub key: KeySource,
}

/// `IDEM_BROKERS_FILE`: TOML, one `[[rabbitmq]]` table per consumer.
///
/// ```toml
/// [[rabbitmq]]
/// consumer = "reminders"
/// url = "amqp://idem:secret@rabbitmq.internal:5672/%2f"
/// dead_letter_queue = "reminders.dead"
/// key = { header = "idempotency-key" }   # or { json_pointer = "/reminder/id" }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokersConfig {
    #[serde(default)]
    pub rabbitmq: Vec<RabbitMqDeadLetters>,
}

#[derive(Debug, thiserror::Error)]
pub enum BrokersConfigError {
    #[error("cannot read the brokers file {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

impl BrokersConfig {
    /// The file at `path`, checked; no file, no brokers.
    pub fn load(path: Option<&std::path::Path>) -> Result<Self, BrokersConfigError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BrokersConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text).map_err(|reason| BrokersConfigError::Invalid {
            path: shown,
            reason,
        })
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let config: BrokersConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut consumers = std::collections::HashSet::new();
        for q in &config.rabbitmq {
            idem_domain::ConsumerName::parse(&q.consumer).map_err(|e| e.to_string())?;
            if !consumers.insert(q.consumer.as_str()) {
                return Err(format!("the consumer “{}” is configured twice", q.consumer));
            }
            rabbitmq::check_url(&q.url).map_err(|e| format!("{}: {e}", q.consumer))?;
            if q.dead_letter_queue.is_empty() || q.dead_letter_queue.len() > 255 {
                return Err(format!(
                    "{}: a queue name is 1 to 255 bytes long",
                    q.consumer
                ));
            }
            match &q.key {
                KeySource::Header(name) if name.is_empty() || name.len() > 255 => {
                    return Err(format!(
                        "{}: a header name is 1 to 255 bytes long",
                        q.consumer
                    ));
                }
                KeySource::JsonPointer(pointer) if !pointer.starts_with('/') => {
                    return Err(format!(
                        "{}: a JSON pointer starts with “/” (“/reminder/id”)",
                        q.consumer
                    ));
                }
                _ => {}
            }
        }
        Ok(config)
    }

    pub fn is_empty(&self) -> bool {
        self.rabbitmq.is_empty()
    }
}

/// Why a broker could not be read from or published to, in words for the
/// log and for the person whose replay it was (never with a password).
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("{0}")]
    Broker(String),
    #[error("Idem's database did not answer")]
    Store(#[from] StoreError),
}

/// A broker's dead-letter queue, as Idem drains it.
#[async_trait::async_trait]
pub trait DeadLetterQueue: Send + Sync {
    /// The broker's handle on one message taken (to acknowledge or release).
    type Taken: Send;
    /// The next message, as a dead letter to store; `None` when the queue is empty.
    async fn take(&self) -> Result<Option<(Self::Taken, NewBrokerDeadLetter)>, BrokerError>;
    /// The message is stored: the broker may forget it.
    async fn acknowledge(&self, taken: Self::Taken) -> Result<(), BrokerError>;
    /// The message could not be stored: the broker keeps it for later.
    async fn release(&self, taken: Self::Taken) -> Result<(), BrokerError>;
}

/// Where replays of a consumer's dead letters are published.
#[async_trait::async_trait]
pub trait ReplayTarget: Send + Sync {
    /// Where `replay` goes, in words (“RabbitMQ exchange “x”, routing key “k””).
    fn describe(&self, replay: &BrokerReplay) -> String;
    /// Publishes it once; `Ok` only when the broker confirmed it.
    async fn publish(&self, replay: &BrokerReplay) -> Result<(), String>;
}

/// Stores every message `queue` holds, acknowledging each only after its
/// row committed; how many it stored anew (a message stored before, by a
/// run that died before acknowledging it, is acknowledged, not stored again).
pub async fn drain<Q: DeadLetterQueue>(queue: &Q, store: &Store) -> Result<usize, BrokerError> {
    let mut stored = 0;
    while let Some((taken, dead_letter)) = queue.take().await? {
        match store
            .brokers()
            .record_broker_dead_letter(&dead_letter, Ts::now())
            .await
        {
            Ok((_, new)) => {
                queue.acknowledge(taken).await?;
                stored += usize::from(new);
            }
            Err(err) => {
                // Not stored: the broker keeps it, and it comes back.
                let _ = queue.release(taken).await;
                return Err(err.into());
            }
        }
    }
    Ok(stored)
}

/// How long a publish may wait for the broker's confirm.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// When the relay tries an unconfirmed replay again.
pub const RETRY_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(1);

/// How often the relay looks for replays to publish.
const RELAY_EVERY: Duration = Duration::from_secs(5);

/// The brokers Idem reads dead letters from and publishes replays to.
pub struct Brokers {
    store: Store,
    config: BrokersConfig,
    targets: HashMap<String, Arc<dyn ReplayTarget>>,
}

impl Brokers {
    pub fn new(store: Store, config: BrokersConfig) -> Self {
        let targets = config
            .rabbitmq
            .iter()
            .map(|q| {
                let target: Arc<dyn ReplayTarget> = Arc::new(rabbitmq::Publisher::new(q));
                (q.consumer.clone(), target)
            })
            .collect();
        Self {
            store,
            config,
            targets,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.config.is_empty()
    }

    /// Drains every dead-letter queue and publishes due replays until `stop`.
    pub async fn run(self: Arc<Self>, stop: watch::Receiver<bool>) {
        if self.is_empty() {
            return;
        }
        let mut tasks = tokio::task::JoinSet::new();
        for q in self.config.rabbitmq.clone() {
            tasks.spawn(rabbitmq::ingest(q, self.store.clone(), stop.clone()));
        }
        tasks.spawn(self.clone().relay(stop));
        while tasks.join_next().await.is_some() {}
    }

    /// Publishes, every few seconds, the replays the broker has not yet
    /// confirmed whose next attempt is due (a redrive's, a failed one's).
    async fn relay(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            match self.store.brokers().broker_replays_due(Ts::now(), 20).await {
                Ok(due) => {
                    for replay in due {
                        self.publish_replay(replay.outbox_id).await;
                    }
                }
                Err(err) => tracing::debug!(
                    error = %idem_app::error::cause_chain(&err),
                    "replays to publish could not be read"
                ),
            }
            tokio::select! {
                () = tokio::time::sleep(RELAY_EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// One attempt to publish the replay in outbox row `outbox_id`.
    async fn publish_replay(&self, outbox_id: i64) -> Publication {
        let unconfirmed = |to: &str, reason: String| Publication::NotConfirmed {
            to: to.to_owned(),
            reason,
        };
        let replay = match self.store.brokers().broker_replay(outbox_id).await {
            Ok(Some(replay)) => replay,
            Ok(None) => return Publication::NotIdems,
            Err(_) => return unconfirmed("the broker", "Idem's database did not answer".into()),
        };
        let Some(target) = self.targets.get(&replay.consumer) else {
            return unconfirmed(
                "the broker",
                format!(
                    "no broker is configured for “{}” (IDEM_BROKERS_FILE)",
                    replay.consumer
                ),
            );
        };
        let to = target.describe(&replay);
        if replay.published_at.is_some() {
            return Publication::Confirmed { to, earlier: true };
        }
        match self
            .store
            .brokers()
            .lease_publication(outbox_id, Ts::now())
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return match self.store.brokers().broker_replay(outbox_id).await {
                    Ok(Some(r)) if r.published_at.is_some() => {
                        Publication::Confirmed { to, earlier: true }
                    }
                    _ => Publication::InProgress,
                };
            }
            Err(_) => return unconfirmed(&to, "Idem's database did not answer".into()),
        }
        let published = match tokio::time::timeout(PUBLISH_TIMEOUT, target.publish(&replay)).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "no confirm within {} seconds",
                PUBLISH_TIMEOUT.as_secs()
            )),
        };
        match published {
            Ok(()) => match self
                .store
                .brokers()
                .publication_confirmed(outbox_id, Ts::now())
                .await
            {
                Ok(()) => Publication::Confirmed { to, earlier: false },
                // Published, but not recorded: the lease runs out and the
                // relay may publish it again; the consumer's claim
                // deduplicates the copy (same key, same message id).
                Err(_) => unconfirmed(
                    &to,
                    "published, but Idem's database did not record it".into(),
                ),
            },
            Err(reason) => {
                tracing::warn!(
                    consumer = %replay.consumer,
                    outbox_id,
                    %reason,
                    "a replay was not confirmed by the broker"
                );
                let next = Ts::from(Ts::now().0 + RETRY_AFTER);
                let _ = self
                    .store
                    .brokers()
                    .publication_failed(outbox_id, &reason, next)
                    .await;
                unconfirmed(&to, reason)
            }
        }
    }
}

impl Republish for Brokers {
    fn publish(
        &self,
        outbox_id: i64,
    ) -> std::pin::Pin<Box<dyn Future<Output = Publication> + Send + '_>> {
        Box::pin(self.publish_replay(outbox_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brokers_file_names_each_consumer_s_queue_and_where_its_key_is() {
        let config = BrokersConfig::parse(
            r#"
            [[rabbitmq]]
            consumer = "reminders"
            url = "amqp://guest:guest@127.0.0.1:5672/%2f"
            dead_letter_queue = "reminders.dead"
            key = { header = "idempotency-key" }

            [[rabbitmq]]
            consumer = "payments"
            url = "amqp://127.0.0.1"
            dead_letter_queue = "payments.dead"
            key = { json_pointer = "/payment/id" }
            "#,
        )
        .unwrap();
        assert_eq!(config.rabbitmq.len(), 2);
        assert_eq!(
            config.rabbitmq[1].key,
            KeySource::JsonPointer("/payment/id".into())
        );
    }

    #[test]
    fn a_brokers_file_that_cannot_work_is_refused_with_the_reason() {
        let refused = |text: &str| BrokersConfig::parse(text).unwrap_err();
        let one = |url: &str, key: &str| {
            format!(
                "[[rabbitmq]]\nconsumer = \"reminders\"\nurl = \"{url}\"\n\
                 dead_letter_queue = \"q\"\nkey = {key}\n"
            )
        };
        assert!(
            refused(&one("amqps://h", "{ header = \"k\" }")).contains("amqps"),
            "TLS is refused in words"
        );
        assert!(refused(&one("http://h", "{ header = \"k\" }")).contains("amqp://"));
        assert!(refused(&one("amqp://h", "{ json_pointer = \"id\" }")).contains("starts with"));
        assert!(refused(&one("amqp://h", "{ colour = \"k\" }")).contains("colour"));
        let twice = format!(
            "{}{}",
            one("amqp://h", "{ header = \"k\" }"),
            one("amqp://h", "{ header = \"k\" }")
        );
        assert!(refused(&twice).contains("twice"));
    }
}
