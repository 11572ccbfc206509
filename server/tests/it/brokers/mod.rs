//! Dead letters kept in RabbitMQ, against the real broker: a consumer's
//! worker rejects a message (or its TTL runs out), RabbitMQ dead-letters it,
//! Idem moves it into its dead letters, and an operator's replay is
//! published back to the exchange the message first went to.
//!
//! Needs RabbitMQ on 127.0.0.1:5672 with guest/guest (or
//! `IDEM_TEST_AMQP_URL`). Where none runs: `apt-get install
//! rabbitmq-server && service rabbitmq-server start`. Each test declares
//! its own exchange and queues (named after the test, with a random
//! suffix), which the broker deletes ten minutes after their last use.
//!
//! The tests live in themed modules; the team's topology, its publisher and
//! its worker are here.

mod dead_letters;
mod replays;

use std::time::Duration;

use idem::brokers::{KeySource, RabbitMqDeadLetters};
use idem_store::testing::TestDatabase;
use lapin::{
    BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind,
    options::{
        BasicAckOptions, BasicGetOptions, BasicPublishOptions, BasicRejectOptions,
        ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable, LongString},
};

use crate::common::{TestApp, spawn_with};

pub(super) const HEADER: &str = "idempotency-key";

pub(super) fn amqp_url() -> String {
    std::env::var("IDEM_TEST_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned())
}

/// One consumer's topology, as a team declares it: an exchange, the work
/// queue bound to it (routing key `due`) whose dead letters go to the
/// dead-letter queue through the default exchange.
pub(super) struct Topology {
    _connection: Connection,
    channel: Channel,
    pub(super) exchange: String,
    pub(super) work: String,
    pub(super) dead: String,
}

impl Topology {
    pub(super) async fn declare(name: &str) -> Topology {
        let url = amqp_url();
        let connection = Connection::connect(&url, ConnectionProperties::default())
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "these tests need RabbitMQ at {url} ({e}); start it: \
                     apt-get install rabbitmq-server && service rabbitmq-server start"
                )
            });
        let channel = connection.create_channel().await.unwrap();
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let tag = format!("{name}-{:08x}", rand::random::<u32>());
        let (exchange, work, dead) = (
            format!("idem-test.{tag}"),
            format!("idem-test.{tag}.work"),
            format!("idem-test.{tag}.dead"),
        );
        let expires = |mut args: FieldTable| {
            args.insert("x-expires".into(), AMQPValue::LongInt(600_000));
            args
        };
        channel
            .exchange_declare(
                exchange.as_str().into(),
                ExchangeKind::Direct,
                ExchangeDeclareOptions {
                    auto_delete: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        let mut dead_lettered = FieldTable::default();
        dead_lettered.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString("".into()),
        );
        dead_lettered.insert(
            "x-dead-letter-routing-key".into(),
            AMQPValue::LongString(dead.as_str().into()),
        );
        for (queue, args) in [
            (&work, expires(dead_lettered)),
            (&dead, expires(FieldTable::default())),
        ] {
            channel
                .queue_declare(queue.as_str().into(), QueueDeclareOptions::default(), args)
                .await
                .unwrap();
        }
        channel
            .queue_bind(
                work.as_str().into(),
                exchange.as_str().into(),
                "due".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        Topology {
            _connection: connection,
            channel,
            exchange,
            work,
            dead,
        }
    }

    /// What Idem's brokers file says about this consumer, reaching the
    /// broker at `url`.
    pub(super) fn config(&self, consumer: &str, url: &str) -> RabbitMqDeadLetters {
        RabbitMqDeadLetters {
            consumer: consumer.to_owned(),
            url: url.to_owned(),
            dead_letter_queue: self.dead.clone(),
            key: KeySource::Header(HEADER.to_owned()),
        }
    }

    /// The team's publisher: one message with its key header and message id.
    pub(super) async fn publish(
        &self,
        key: &str,
        message_id: &str,
        body: &str,
        ttl_ms: Option<&str>,
    ) {
        let mut headers = FieldTable::default();
        headers.insert(
            HEADER.into(),
            AMQPValue::LongString(LongString::from(key.as_bytes().to_vec())),
        );
        let mut properties = BasicProperties::default()
            .with_message_id(message_id.into())
            .with_content_type("application/json".into())
            .with_headers(headers);
        if let Some(ttl) = ttl_ms {
            properties = properties.with_expiration(ttl.into());
        }
        self.channel
            .basic_publish(
                self.exchange.as_str().into(),
                "due".into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                properties,
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// The team's worker takes the next message and gives up on it.
    pub(super) async fn reject_next(&self) {
        let message = self
            .channel
            .basic_get(self.work.as_str().into(), BasicGetOptions { no_ack: false })
            .await
            .unwrap()
            .expect("a message to work on");
        message
            .delivery
            .reject(BasicRejectOptions { requeue: false })
            .await
            .unwrap();
    }

    /// Every message now in `queue`, taken and acknowledged.
    pub(super) async fn take_all(&self, queue: &str) -> Vec<lapin::message::Delivery> {
        let mut taken = Vec::new();
        while let Some(message) = self
            .channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: false })
            .await
            .unwrap()
        {
            message
                .delivery
                .ack(BasicAckOptions::default())
                .await
                .unwrap();
            taken.push(message.delivery);
        }
        taken
    }

    /// How many messages `queue` holds.
    pub(super) async fn count(&self, queue: &str) -> u32 {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count()
    }

    pub(super) async fn wait_until_dead(&self, messages: u32) {
        for _ in 0..100 {
            if self.count(&self.dead).await >= messages {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("RabbitMQ did not dead-letter {messages} message(s) within 5 s");
    }
}

/// Idem reading `topology`'s dead-letter queue as `consumer`, through `url`.
pub(super) async fn idem_with_broker(
    topology: &Topology,
    consumer: &str,
    url: &str,
) -> (TestApp, tempfile::TempPath) {
    let config = topology.config(consumer, url);
    let file = brokers_file(&config);
    let path = file.to_path_buf();
    let app = spawn_with(
        move |c| c.brokers_file = Some(path),
        TestDatabase::sqlite().await,
    )
    .await;
    (app, file)
}

fn brokers_file(config: &RabbitMqDeadLetters) -> tempfile::TempPath {
    let KeySource::Header(header) = &config.key else {
        unreachable!("these tests read the key from a header")
    };
    let text = format!(
        "[[rabbitmq]]\nconsumer = {:?}\nurl = {:?}\ndead_letter_queue = {:?}\nkey = {{ header = {:?} }}\n",
        config.consumer, config.url, config.dead_letter_queue, header
    );
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, text.as_bytes()).unwrap();
    file.into_temp_path()
}

/// The dead letters Idem holds with `message_id`, once there are `n`.
pub(super) async fn dead_letters_in_idem(
    app: &TestApp,
    message_id: &str,
    n: usize,
) -> Vec<idem_domain::DeadLetter> {
    for _ in 0..200 {
        let found = app
            .store
            .claims()
            .dead_letters_by_message_id(message_id, &idem_domain::Within::Every, 10)
            .await
            .unwrap();
        if found.len() >= n {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("Idem did not move {n} dead letter(s) “{message_id}” in within 10 s");
}
