//! One message a RabbitMQ dead-letter queue held, as Idem stores it: its
//! key (from a header or a JSON pointer into the body), the broker's facts
//! about its death (`x-death`), what a replay publishes again, and a name
//! for the message that stays the same when the broker delivers it again.
//! Pure: the tests give it properties and a body, no broker.

use base64::Engine;
use chrono::{DateTime, Utc};
use idem_domain::IdempotencyKey;
use idem_store::{NewBrokerDeadLetter, Ts};
use lapin::{
    BasicProperties,
    types::{AMQPValue, FieldTable, ShortString},
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::KeySource;

/// The headers RabbitMQ writes when it dead-letters a message; a replay
/// leaves them out (the message is published as it first was).
const DEATH_HEADERS: [&str; 7] = [
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
];

/// What a replay publishes besides the payload, as `dead_letters.properties`
/// keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    pub properties: BasicProperties,
    /// The body was not UTF-8, so the payload column holds it in base64.
    #[serde(default)]
    pub body_base64: bool,
}

/// The latest death `x-death` records (RabbitMQ puts it first).
#[derive(Debug, Clone, Default, PartialEq)]
struct Death {
    queue: Option<String>,
    reason: Option<String>,
    exchange: Option<String>,
    routing_key: Option<String>,
    count: Option<i64>,
    at: Option<DateTime<Utc>>,
}

/// A message from the dead-letter queue `queue`, for `consumer`, read at `now`.
pub fn dead_letter_of(
    consumer: &str,
    queue: &str,
    key_source: &KeySource,
    properties: &BasicProperties,
    body: &[u8],
    now: DateTime<Utc>,
) -> NewBrokerDeadLetter {
    let headers = properties.headers().clone().unwrap_or_default();
    let death = latest_death(&headers);
    let broker_ref = broker_ref(properties, &death, body);
    let message_id = properties
        .message_id()
        .as_ref()
        .map(|id| id.as_str().to_owned())
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("amqp:{}", &broker_ref[..16]));
    let (key, key_problem) = match key_of(key_source, &headers, body) {
        Ok(key) => (key, None),
        Err(problem) => (format!("amqp:{message_id}"), Some(problem)),
    };
    let (payload, body_base64) = match std::str::from_utf8(body) {
        Ok(text) => (text.to_owned(), false),
        Err(_) => (base64::engine::general_purpose::STANDARD.encode(body), true),
    };
    let kept = Kept {
        properties: replayable(properties, &headers),
        body_base64,
    };
    let died_at = death.at.unwrap_or(now);
    let mut last_error = death_words(&death, queue);
    if let Some(problem) = key_problem {
        last_error = format!("{last_error} {problem}");
    }
    NewBrokerDeadLetter {
        consumer: consumer.to_owned(),
        broker: "rabbitmq".to_owned(),
        broker_ref,
        queue: death.queue.clone().unwrap_or_else(|| queue.to_owned()),
        key,
        message_id,
        payload,
        delivery_count: death.count.unwrap_or(1).max(1),
        first_failure_at: Ts::from(died_at),
        dead_lettered_at: Ts::from(died_at),
        last_error,
        death_exchange: death.exchange,
        death_routing_key: death.routing_key,
        death_reason: death.reason,
        death_count: death.count,
        death_at: death.at.map(Ts::from),
        properties: serde_json::to_string(&kept).unwrap_or_else(|_| "{}".to_owned()),
    }
}

/// The message's key, or why it has none Idem can use.
fn key_of(source: &KeySource, headers: &FieldTable, body: &[u8]) -> Result<String, String> {
    let raw = match source {
        KeySource::Header(name) => headers
            .inner()
            .get(name.as_str())
            .and_then(text)
            .ok_or_else(|| format!("It carries no “{name}” header, so its key is unknown."))?,
        KeySource::JsonPointer(pointer) => {
            let json: serde_json::Value = serde_json::from_slice(body).map_err(|_| {
                "Its body is not JSON, so its key could not be read from it.".to_owned()
            })?;
            match json.pointer(pointer) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                _ => {
                    return Err(format!(
                        "Its body has no text at {pointer}, so its key is unknown."
                    ));
                }
            }
        }
    };
    IdempotencyKey::parse(&raw)
        .map(|key| key.as_str().to_owned())
        .map_err(|e| format!("Its key is not one Idem can hold ({e})."))
}

/// The string in a header value, whichever string type the publisher used.
fn text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        AMQPValue::LongString(s) => String::from_utf8(s.as_bytes().to_vec()).ok(),
        AMQPValue::ByteArray(b) => String::from_utf8(b.as_slice().to_vec()).ok(),
        _ => None,
    }
}

fn number(value: &AMQPValue) -> Option<i64> {
    match value {
        AMQPValue::LongLongInt(n) => Some(*n),
        AMQPValue::LongInt(n) => Some(i64::from(*n)),
        AMQPValue::LongUInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortInt(n) => Some(i64::from(*n)),
        AMQPValue::ShortUInt(n) => Some(i64::from(*n)),
        AMQPValue::Timestamp(n) => i64::try_from(*n).ok(),
        _ => None,
    }
}

fn latest_death(headers: &FieldTable) -> Death {
    let Some(AMQPValue::FieldArray(deaths)) = headers.inner().get("x-death") else {
        return Death::default();
    };
    let Some(AMQPValue::FieldTable(latest)) = deaths.as_slice().first() else {
        return Death::default();
    };
    let field = |name: &str| latest.inner().get(name);
    let routing_key = match field("routing-keys") {
        Some(AMQPValue::FieldArray(keys)) => keys.as_slice().first().and_then(text),
        _ => None,
    };
    Death {
        queue: field("queue").and_then(text),
        reason: field("reason").and_then(text),
        exchange: field("exchange").and_then(text),
        routing_key,
        count: field("count").and_then(number),
        at: field("time")
            .and_then(number)
            .and_then(|seconds| DateTime::from_timestamp(seconds, 0)),
    }
}

/// Names the message and its death: the same when the broker delivers the
/// same dead letter again (Idem died before acknowledging it), different
/// when the message dies again after a replay (a later death time).
fn broker_ref(properties: &BasicProperties, death: &Death, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    let message_id = properties.message_id().as_ref().map(ShortString::as_str);
    part(message_id.unwrap_or("").as_bytes());
    part(&properties.timestamp().unwrap_or(0).to_be_bytes());
    part(death.queue.as_deref().unwrap_or("").as_bytes());
    part(death.reason.as_deref().unwrap_or("").as_bytes());
    part(&death.count.unwrap_or(0).to_be_bytes());
    part(&death.at.map_or(0, |at| at.timestamp()).to_be_bytes());
    part(body);
    hex::encode(hash.finalize())
}

/// The message's properties as a replay publishes them: the broker's death
/// headers and the publisher's user id (the broker checks it against the
/// connection's user) left out.
fn replayable(properties: &BasicProperties, headers: &FieldTable) -> BasicProperties {
    let mut kept = FieldTable::default();
    for (name, value) in headers {
        if !DEATH_HEADERS.contains(&name.as_str()) {
            kept.insert(name.clone(), value.clone());
        }
    }
    let mut replayed = BasicProperties::default().with_headers(kept);
    macro_rules! copy {
        ($($get:ident => $with:ident),+ $(,)?) => {
            $(if let Some(value) = properties.$get().clone() {
                replayed = replayed.$with(value);
            })+
        };
    }
    copy!(
        content_type => with_content_type,
        content_encoding => with_content_encoding,
        delivery_mode => with_delivery_mode,
        priority => with_priority,
        correlation_id => with_correlation_id,
        reply_to => with_reply_to,
        expiration => with_expiration,
        message_id => with_message_id,
        timestamp => with_timestamp,
        kind => with_type,
        app_id => with_app_id,
    );
    replayed
}

/// The death in words, as the dead letter's last error.
fn death_words(death: &Death, dlq: &str) -> String {
    let why = match death.reason.as_deref() {
        Some(reason) => idem_domain::BrokerDeath::reason_in_words(reason)
            .map_or_else(|| reason.to_owned(), str::to_owned),
        None => format!("found in the dead-letter queue {dlq} without an x-death header"),
    };
    match (&death.queue, death.count) {
        (Some(queue), Some(count)) if count > 1 => {
            format!("RabbitMQ dead-lettered it from {queue}: {why} ({count} times).")
        }
        (Some(queue), _) => format!("RabbitMQ dead-lettered it from {queue}: {why}."),
        (None, _) => format!("RabbitMQ: {why}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};

    fn long(s: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(s.as_bytes().to_vec()))
    }

    /// A message RabbitMQ dead-lettered once, by rejection, from `reminders`.
    fn rejected(key_header: Option<&str>, time: u64) -> BasicProperties {
        let mut death = FieldTable::default();
        death.insert("count".into(), AMQPValue::LongLongInt(1));
        death.insert("reason".into(), long("rejected"));
        death.insert("queue".into(), long("reminders"));
        death.insert("time".into(), AMQPValue::Timestamp(time));
        death.insert("exchange".into(), long("reminders.x"));
        death.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![long("due")])),
        );
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
        );
        headers.insert("x-first-death-reason".into(), long("rejected"));
        if let Some(key) = key_header {
            headers.insert("idempotency-key".into(), long(key));
        }
        BasicProperties::default()
            .with_headers(headers)
            .with_message_id("m-1842".into())
            .with_user_id("guest".into())
    }

    const HEADER: fn() -> KeySource = || KeySource::Header("idempotency-key".into());

    #[test]
    fn a_rejected_message_keeps_its_key_and_the_broker_s_facts() {
        let key = "renewal:account-1842:2026-09-30 🧾 עברית";
        let props = rejected(Some(key), 1_764_720_000);
        let dl = dead_letter_of(
            "reminders",
            "reminders.dead",
            &HEADER(),
            &props,
            b"{}",
            Utc::now(),
        );
        assert_eq!(dl.key, key);
        assert_eq!(dl.message_id, "m-1842");
        assert_eq!(dl.queue, "reminders");
        assert_eq!(dl.death_exchange.as_deref(), Some("reminders.x"));
        assert_eq!(dl.death_routing_key.as_deref(), Some("due"));
        assert_eq!(dl.death_reason.as_deref(), Some("rejected"));
        assert_eq!(dl.death_count, Some(1));
        assert_eq!(dl.dead_lettered_at.0.timestamp(), 1_764_720_000);
        assert!(
            dl.last_error.contains("rejected by a consumer"),
            "{}",
            dl.last_error
        );
        // A replay publishes the message as it was first published.
        let kept: Kept = serde_json::from_str(&dl.properties).unwrap();
        let headers = kept.properties.headers().clone().unwrap();
        assert!(headers.contains_key("idempotency-key"));
        assert!(!headers.contains_key("x-death"));
        assert!(!headers.contains_key("x-first-death-reason"));
        assert_eq!(kept.properties.user_id(), &None);
        assert_eq!(
            kept.properties
                .message_id()
                .as_ref()
                .map(ShortString::as_str),
            Some("m-1842")
        );
    }

    #[test]
    fn the_same_death_delivered_again_has_the_same_name_and_a_later_death_another() {
        let at = |time| {
            dead_letter_of(
                "r",
                "d",
                &HEADER(),
                &rejected(Some("k"), time),
                b"{}",
                Utc::now(),
            )
            .broker_ref
        };
        assert_eq!(at(1_764_720_000), at(1_764_720_000));
        assert_ne!(at(1_764_720_000), at(1_764_720_060));
    }

    #[test]
    fn a_key_read_from_the_body_by_a_json_pointer() {
        let source = KeySource::JsonPointer("/reminder/id".into());
        let body = br#"{"reminder": {"id": "renewal:7"}}"#;
        let dl = dead_letter_of("r", "d", &source, &rejected(None, 1), body, Utc::now());
        assert_eq!(dl.key, "renewal:7");
        let numeric = br#"{"reminder": {"id": 42}}"#;
        let dl = dead_letter_of("r", "d", &source, &rejected(None, 1), numeric, Utc::now());
        assert_eq!(dl.key, "42");
    }

    #[test]
    fn a_message_without_a_usable_key_is_kept_and_says_why() {
        let dl = dead_letter_of(
            "r",
            "d",
            &HEADER(),
            &rejected(None, 1),
            b"\xff\xfe",
            Utc::now(),
        );
        assert_eq!(dl.key, "amqp:m-1842");
        assert!(
            dl.last_error.contains("no “idempotency-key” header"),
            "{}",
            dl.last_error
        );
        // A body that is not text is kept whole, in base64.
        let kept: Kept = serde_json::from_str(&dl.properties).unwrap();
        assert!(kept.body_base64);
        assert_eq!(dl.payload, "//4=");
        let control = rejected(Some("bad\u{7}key"), 1);
        let dl = dead_letter_of("r", "d", &HEADER(), &control, b"{}", Utc::now());
        assert!(
            dl.last_error.contains("not one Idem can hold"),
            "{}",
            dl.last_error
        );
    }
}
