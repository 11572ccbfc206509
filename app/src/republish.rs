//! Replays Idem publishes itself. A dead letter Idem moved out of a broker's
//! dead-letter queue has no relay of the team's to publish its replay: the
//! server (`idem::brokers`) publishes it to the broker, with the broker's
//! confirm, right after the replay's transaction commits — and again when a
//! person submits the same replay form a second time, or the background
//! relay finds it still unpublished. The replay itself (audit row, outbox
//! row, the dead letter marked replayed) is written once, as for any dead
//! letter; only its publication is retried.

use std::{future::Future, pin::Pin, sync::Arc};

/// What became of publishing one replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publication {
    /// Not a broker's dead letter: the consumer's own relay publishes it.
    NotIdems,
    /// The broker confirmed it (now, or an earlier attempt did).
    Confirmed { to: String, earlier: bool },
    /// Another attempt is publishing it right now.
    InProgress,
    /// The broker did not confirm it; nothing says it was delivered.
    NotConfirmed { to: String, reason: String },
}

impl Publication {
    /// The sentence the action's answer adds about the publication.
    pub fn describe(&self) -> Option<String> {
        match self {
            Publication::NotIdems => None,
            Publication::Confirmed { to, earlier: false } => {
                Some(format!("Published to {to}; the broker confirmed it."))
            }
            Publication::Confirmed { to, earlier: true } => Some(format!(
                "It was already published to {to} and confirmed; it was not sent again."
            )),
            Publication::InProgress => Some(
                "Another attempt is publishing it right now; reload the key's page in a moment."
                    .to_owned(),
            ),
            Publication::NotConfirmed { to, reason } => Some(format!(
                "Not published: {to} did not confirm it ({reason}). Submit the same form \
                 again to publish this replay again (it is not replayed twice), or leave it: \
                 Idem tries again every minute."
            )),
        }
    }

    /// `summary` with the publication's sentence after it.
    pub fn extend(&self, summary: String) -> String {
        match self.describe() {
            Some(sentence) => format!("{summary} {sentence}"),
            None => summary,
        }
    }
}

/// Publishes the replay in one outbox row, if it is Idem's to publish.
pub trait Republish: Send + Sync {
    fn publish(&self, outbox_id: i64) -> Pin<Box<dyn Future<Output = Publication> + Send + '_>>;
}

/// The server's publisher, if it has one (tests and a console without
/// brokers have none: every replay is then a consumer's to publish).
#[derive(Clone, Default)]
pub struct Republisher(Option<Arc<dyn Republish>>);

impl std::fmt::Debug for Republisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Republisher(brokers)"
        } else {
            "Republisher(none)"
        })
    }
}

impl Republisher {
    pub fn new(publisher: Arc<dyn Republish>) -> Self {
        Self(Some(publisher))
    }

    pub async fn publish(&self, outbox_id: i64) -> Publication {
        match &self.0 {
            Some(publisher) => publisher.publish(outbox_id).await,
            None => Publication::NotIdems,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unconfirmed_publication_says_what_to_do() {
        let not = Publication::NotConfirmed {
            to: "RabbitMQ exchange “reminders” (routing key “due”)".into(),
            reason: "connection refused".into(),
        };
        let text = not.extend("Replayed dead letter #7 through outbox row #9.".into());
        assert!(text.starts_with("Replayed dead letter #7"));
        assert!(text.contains("did not confirm it (connection refused)"));
        assert!(text.contains("Submit the same form again"));
        assert_eq!(
            Publication::NotIdems.extend("Replayed.".into()),
            "Replayed."
        );
    }
}
