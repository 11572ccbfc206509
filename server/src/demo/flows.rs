//! The demo's business flows — three teams' consumers — and the facts they
//! produce.

use chrono::{DateTime, Days, Utc};
use rand::{Rng, rngs::StdRng};
use serde_json::json;

/// A consumer of the demo fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flow {
    /// Renewal reminders sent through an external messaging provider.
    Reminders,
    /// Payment webhooks applied to the ledger in the claim's own transaction.
    Payments,
    /// Order events forwarded to an external fulfilment API, with an outbox event.
    Orders,
    /// Invoices issued into the ledger in the claim's own transaction (payments).
    Invoices,
    /// Shipments booked with a carrier's API (fulfilment).
    Shipments,
    /// Stock levels adjusted in the claim's own transaction (fulfilment).
    Stock,
    /// Push notifications sent through a push provider (growth).
    Push,
}

impl Flow {
    pub const ALL: [Flow; 7] = [
        Flow::Reminders,
        Flow::Payments,
        Flow::Orders,
        Flow::Invoices,
        Flow::Shipments,
        Flow::Stock,
        Flow::Push,
    ];

    pub fn consumer(self) -> &'static str {
        match self {
            Flow::Reminders => "reminders",
            Flow::Payments => "payment-webhooks",
            Flow::Orders => "order-events",
            Flow::Invoices => "invoices",
            Flow::Shipments => "shipments",
            Flow::Stock => "stock-levels",
            Flow::Push => "push-notifications",
        }
    }

    pub fn queue(self) -> &'static str {
        match self {
            Flow::Reminders => "reminders.fifo",
            Flow::Payments => "payment-webhooks",
            Flow::Orders => "order-events.fifo",
            Flow::Invoices => "invoices",
            Flow::Shipments => "shipments.fifo",
            Flow::Stock => "stock-levels",
            Flow::Push => "push-notifications",
        }
    }

    pub fn from_consumer(consumer: &str) -> Option<Flow> {
        Flow::ALL.into_iter().find(|f| f.consumer() == consumer)
    }

    /// Whether the effect is an external call (which can end `unknown`) or a
    /// write in the claim's own transaction.
    pub fn is_external(self) -> bool {
        !matches!(self, Flow::Payments | Flow::Invoices | Flow::Stock)
    }

    /// Mean seconds between new facts, live and while writing history.
    pub fn mean_interval_seconds(self, backfill: bool) -> f64 {
        let live = match self {
            Flow::Reminders => 4.0,
            Flow::Payments => 3.0,
            Flow::Orders => 5.0,
            // The newer teams' consumers: quieter, and healthy throughout
            // but for the fleet's own incidents.
            Flow::Invoices => 12.0,
            Flow::Shipments => 10.0,
            Flow::Stock => 8.0,
            Flow::Push => 9.0,
        };
        if backfill { live * 10.0 } else { live }
    }
}

/// One business fact: the deterministic key and the message payload.
#[derive(Debug, Clone)]
pub struct Fact {
    pub flow: Flow,
    pub key: String,
    pub payload: String,
    /// An operator sent it again (a replay or a resolution's retry): a
    /// `failed` claim is tried once more.
    pub redrive: bool,
}

const ORDER_LETTERS: [&str; 8] = ["A", "B", "K", "Ø", "É", "Å", "Ü", "Z"];
const REGIONS: [&str; 4] = ["EU", "US", "APAC", "UK"];

pub fn random_fact(flow: Flow, at: DateTime<Utc>, rng: &mut StdRng) -> Fact {
    match flow {
        Flow::Reminders => {
            // Many accounts: two reminders for one account and date are rare,
            // as they are in life (a collision would count as a duplicate).
            let account = format!("account-{}", rng.random_range(10_000..1_000_000));
            reminder(&account, &renewal_date(at))
        }
        Flow::Payments => {
            let id: String = (0..12)
                .map(|_| {
                    char::from(b"0123456789abcdefghijklmnopqrstuvwxyz"[rng.random_range(0..36)])
                })
                .collect();
            let prefix = if rng.random_bool(0.2) { "pay" } else { "evt" };
            payment(&format!("{prefix}_{id}"), rng.random_range(500..250_000))
        }
        Flow::Orders => {
            let kind =
                ["ship", "ship", "ship", "refund", "return", "cancel"][rng.random_range(0..6)];
            let order = format!(
                "{}/{}/{}-{}",
                REGIONS[rng.random_range(0..REGIONS.len())],
                at.format("%Y"),
                ORDER_LETTERS[rng.random_range(0..ORDER_LETTERS.len())],
                rng.random_range(1000..100_000)
            );
            order_event(kind, &order)
        }
        Flow::Invoices => {
            let number = rng.random_range(100_000..1_000_000);
            fact(
                flow,
                format!("inv:{}-{number}", at.format("%Y")),
                json!({ "invoice": number, "amount": rng.random_range(500..90_000), "currency": "EUR" }),
            )
        }
        Flow::Shipments => {
            let parcel = rng.random_range(1_000_000..9_999_999);
            let region = REGIONS[rng.random_range(0..REGIONS.len())];
            fact(
                flow,
                format!("ship:{region}/{parcel}"),
                json!({ "parcel": parcel, "region": region, "carrier": "example-post" }),
            )
        }
        Flow::Stock => {
            let sku = format!("SKU-{}", rng.random_range(1000..99_999));
            let delta = rng.random_range(-5..20);
            fact(
                flow,
                format!("stock:{sku}:{}", rng.random_range(0..u32::MAX)),
                json!({ "sku": sku, "delta": delta }),
            )
        }
        Flow::Push => {
            let device = rng.random_range(10_000..1_000_000);
            fact(
                flow,
                format!("push:device-{device}:{}", at.format("%Y-%m-%dT%H")),
                json!({ "device": device, "template": "cart-reminder" }),
            )
        }
    }
}

fn fact(flow: Flow, key: String, payload: serde_json::Value) -> Fact {
    Fact {
        flow,
        key,
        payload: payload.to_string(),
        redrive: false,
    }
}

/// The renewal date a reminder sent at `at` is about: thirty days on.
pub fn renewal_date(at: DateTime<Utc>) -> String {
    (at + Days::new(30)).format("%Y-%m-%d").to_string()
}

pub fn reminder(account: &str, date: &str) -> Fact {
    Fact {
        flow: Flow::Reminders,
        key: format!("renewal:{account}:{date}"),
        payload: json!({ "account": account, "renewal_date": date, "channel": "email", "template": "renewal-30d" }).to_string(),
        redrive: false,
    }
}

pub fn payment(event_id: &str, amount_cents: u32) -> Fact {
    Fact {
        flow: Flow::Payments,
        key: event_id.to_owned(),
        payload: json!({ "event_id": event_id, "type": "payment_intent.succeeded", "amount": amount_cents, "currency": "EUR" }).to_string(),
        redrive: false,
    }
}

pub fn order_event(kind: &str, order: &str) -> Fact {
    Fact {
        flow: Flow::Orders,
        key: format!("{kind}:{order}"),
        payload: json!({ "kind": kind, "order_id": order }).to_string(),
        redrive: false,
    }
}

/// The payload with one field changed: what a publisher that re-serialises
/// (or re-reads mutable state) sends under the same key.
pub fn drifted(payload: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(payload) {
        Ok(serde_json::Value::Object(mut map)) => {
            map.insert("republished".into(), json!(true));
            serde_json::Value::Object(map).to_string()
        }
        _ => format!("{payload} "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_a_consumer_name_finds_its_flow() {
        assert_eq!(
            reminder("account-1842", "2026-04-13").key,
            "renewal:account-1842:2026-04-13"
        );
        assert_eq!(payment("pay_7f3", 4_200).key, "pay_7f3");
        assert_eq!(
            order_event("ship", "EU/2026/K-2210").key,
            "ship:EU/2026/K-2210"
        );
        for flow in Flow::ALL {
            assert_eq!(Flow::from_consumer(flow.consumer()), Some(flow));
        }
        assert_eq!(Flow::from_consumer("nobody"), None);
    }

    #[test]
    fn a_renewal_is_thirty_days_on() {
        let at = DateTime::parse_from_rfc3339("2026-03-14T23:59:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(renewal_date(at), "2026-04-13");
    }

    #[test]
    fn a_drifted_payload_keeps_its_fields_and_differs() {
        let fact = order_event("refund", "EU/2026/Ø-1842");
        let drifted = drifted(&fact.payload);
        assert_ne!(drifted, fact.payload);
        let value: serde_json::Value = serde_json::from_str(&drifted).unwrap();
        assert_eq!(value["order_id"], "EU/2026/Ø-1842");
        assert_eq!(value["republished"], true);
        assert_eq!(super::drifted("not json"), "not json ");
    }
}
