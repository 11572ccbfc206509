//! RabbitMQ (AMQP 0.9.1, through `lapin`): a consumer's dead-letter queue
//! drained into Idem's dead letters, and replays published back to the
//! exchange and routing key the message was first published to.

use std::time::Duration;

use chrono::Utc;
use idem_store::{BrokerReplay, NewBrokerDeadLetter, Store};
use lapin::{
    BasicProperties, Channel, Confirmation, Connection, ConnectionProperties,
    message::Delivery,
    options::{
        BasicAckOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions,
        ConfirmSelectOptions,
    },
    types::{AMQPValue, LongString},
};
use tokio::sync::watch;

use super::{
    BrokerError, DeadLetterQueue, KeySource, RabbitMqDeadLetters, ReplayTarget,
    message::{Kept, dead_letter_of},
};

/// How often an empty dead-letter queue is looked at again.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// The longest wait between attempts to reach a broker that does not answer.
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// Whether `url` is an address Idem can reach a broker at.
pub fn check_url(url: &str) -> Result<(), String> {
    if url.starts_with("amqps://") {
        return Err(
            "amqps:// is not supported: this build of Idem speaks plain AMQP only. Reach the \
             broker over a private network or a local TLS tunnel (stunnel, a sidecar), \
             and name it amqp://"
                .to_owned(),
        );
    }
    if !url.starts_with("amqp://") {
        return Err("a RabbitMQ address starts with amqp://".to_owned());
    }
    url.parse::<lapin::uri::AMQPUri>()
        .map(drop)
        .map_err(|e| format!("not an AMQP address: {e}"))
}

/// `url` with its password left out, for logs and answers.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("…"));
            parsed.to_string()
        }
        Ok(parsed) => parsed.to_string(),
        Err(_) => "an AMQP address".to_owned(),
    }
}

/// A connection to the broker at `url`, named `idem` in its management UI.
pub async fn connect(url: &str) -> Result<Connection, BrokerError> {
    Connection::connect(
        url,
        ConnectionProperties::default().with_connection_name("idem".into()),
    )
    .await
    .map_err(|e| BrokerError::Broker(format!("cannot reach RabbitMQ at {}: {e}", redacted(url))))
}

fn broker(e: lapin::Error) -> BrokerError {
    BrokerError::Broker(format!("RabbitMQ: {e}"))
}

/// One consumer's dead-letter queue, over one channel.
pub struct Queue {
    channel: Channel,
    config: RabbitMqDeadLetters,
}

impl Queue {
    pub async fn open(
        connection: &Connection,
        config: &RabbitMqDeadLetters,
    ) -> Result<Queue, BrokerError> {
        Ok(Queue {
            channel: connection.create_channel().await.map_err(broker)?,
            config: config.clone(),
        })
    }
}

#[async_trait::async_trait]
impl DeadLetterQueue for Queue {
    type Taken = Delivery;

    async fn take(&self) -> Result<Option<(Delivery, NewBrokerDeadLetter)>, BrokerError> {
        let got = self
            .channel
            .basic_get(
                self.config.dead_letter_queue.as_str().into(),
                BasicGetOptions { no_ack: false },
            )
            .await
            .map_err(broker)?;
        Ok(got.map(|message| {
            let delivery = message.delivery;
            let dead_letter = dead_letter_of(
                &self.config.consumer,
                &self.config.dead_letter_queue,
                &self.config.key,
                &delivery.properties,
                &delivery.data,
                Utc::now(),
            );
            (delivery, dead_letter)
        }))
    }

    async fn acknowledge(&self, taken: Delivery) -> Result<(), BrokerError> {
        taken
            .ack(BasicAckOptions::default())
            .await
            .map(drop)
            .map_err(broker)
    }

    async fn release(&self, taken: Delivery) -> Result<(), BrokerError> {
        taken
            .nack(BasicNackOptions {
                multiple: false,
                requeue: true,
            })
            .await
            .map(drop)
            .map_err(broker)
    }
}

/// Drains `config`'s dead-letter queue into `store` until `stop`: a message
/// at a time, acknowledged after its row committed; the queue looked at
/// again every second when empty; a broker or a database that does not
/// answer waited for, with the outage logged once when it starts and once
/// when it ends.
pub async fn ingest(config: RabbitMqDeadLetters, store: Store, mut stop: watch::Receiver<bool>) {
    let mut backoff = POLL_EVERY;
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        let mut stopping = stop.clone();
        let drained = async {
            let connection = connect(&config.url).await?;
            let queue = Queue::open(&connection, &config).await?;
            if let Some(since) = down_since.take() {
                tracing::info!(consumer = %config.consumer, seconds = since.elapsed().as_secs(),
                    "RabbitMQ dead-letter queue readable again");
            }
            backoff = POLL_EVERY;
            loop {
                let stored = super::drain(&queue, &store).await?;
                if stored > 0 {
                    tracing::info!(consumer = %config.consumer, stored, "dead letters moved from RabbitMQ");
                }
                tokio::select! {
                    () = tokio::time::sleep(POLL_EVERY) => {}
                    _ = stopping.changed() => {
                        let _ = connection.close(200, "Idem is stopping".into()).await;
                        return Ok::<(), BrokerError>(());
                    }
                }
            }
        };
        let failed = tokio::select! {
            result = drained => match result {
                Ok(()) => return,
                Err(err) => err,
            },
            _ = stop.changed() => return,
        };
        if down_since.is_none() {
            tracing::warn!(consumer = %config.consumer, queue = %config.dead_letter_queue,
                error = %failed, "RabbitMQ dead-letter queue not readable; trying again");
            down_since = Some(std::time::Instant::now());
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(MOST_BACKOFF);
    }
}

/// Publishes a consumer's replays to its broker: a connection per attempt
/// (a replay is rare, and a broker restarted since the last one is met
/// afresh), publisher confirms, and `mandatory`, so a message no queue
/// would receive comes back as undelivered instead of vanishing.
pub struct Publisher {
    url: String,
    key: KeySource,
}

impl Publisher {
    pub fn new(config: &RabbitMqDeadLetters) -> Self {
        Self {
            url: config.url.clone(),
            key: config.key.clone(),
        }
    }

    /// The original message: its body, its properties as first published,
    /// its message id, and its key where the consumer reads it.
    fn message(&self, replay: &BrokerReplay) -> Result<(Vec<u8>, BasicProperties), String> {
        let kept: Kept = serde_json::from_str(&replay.properties)
            .map_err(|_| "its properties were not kept in a form Idem reads".to_owned())?;
        let body = if kept.body_base64 {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(&replay.payload)
                .map_err(|_| "its body was not kept in a form Idem reads".to_owned())?
        } else {
            replay.payload.clone().into_bytes()
        };
        let mut properties = kept
            .properties
            .with_message_id(replay.message_id.as_str().into());
        if let KeySource::Header(name) = &self.key {
            let mut headers = properties.headers().clone().unwrap_or_default();
            headers.insert(
                name.as_str().into(),
                AMQPValue::LongString(LongString::from(replay.key.as_bytes().to_vec())),
            );
            properties = properties.with_headers(headers);
        }
        Ok((body, properties))
    }
}

#[async_trait::async_trait]
impl ReplayTarget for Publisher {
    fn describe(&self, replay: &BrokerReplay) -> String {
        let exchange = if replay.exchange.is_empty() {
            "RabbitMQ's default exchange".to_owned()
        } else {
            format!("RabbitMQ exchange “{}”", replay.exchange)
        };
        format!("{exchange} (routing key “{}”)", replay.routing_key)
    }

    async fn publish(&self, replay: &BrokerReplay) -> Result<(), String> {
        let (body, properties) = self.message(replay)?;
        let connection = connect(&self.url).await.map_err(|e| e.to_string())?;
        let sent = async {
            let channel = connection.create_channel().await?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await?;
            channel
                .basic_publish(
                    replay.exchange.as_str().into(),
                    replay.routing_key.as_str().into(),
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    &body,
                    properties,
                )
                .await?
                .await
        }
        .await;
        let _ = connection.close(200, "replay published".into()).await;
        match sent.map_err(|e| format!("RabbitMQ: {e}"))? {
            Confirmation::Ack(None) => Ok(()),
            Confirmation::Ack(Some(_)) => Err(
                "the broker took it, but no queue is bound to receive it there; nothing was delivered"
                    .to_owned(),
            ),
            Confirmation::Nack(_) => Err("the broker refused it".to_owned()),
            Confirmation::NotRequested => Err("the broker was not asked to confirm it".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_never_leaves_in_words() {
        let shown = redacted("amqp://idem:s3cret@rabbit.internal:5672/%2f");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("idem") && shown.contains("rabbit.internal:5672"),
            "{shown}"
        );
        assert!(check_url("amqp://guest:guest@127.0.0.1:5672/%2f").is_ok());
    }
}
