//! The tour: stories with fixed keys written at the start of the history,
//! so the demo (and its tests) always have one of each case to open.

use std::collections::VecDeque;

use chrono::{DateTime, TimeDelta, Utc};

use super::{
    flows::{self, Fact},
    provider::Call,
};

/// Reminder account whose renewal is sent, then published again six
/// minutes later: a duplicate outside a five-minute FIFO window.
pub const LATE_DUPLICATE_ACCOUNT: &str = "account-1842";
/// Webhook delivered twice within 40 seconds.
pub const WEBHOOK_DUPLICATE: &str = "pay_7f3";
/// Reminder account whose worker crashes after the provider accepted.
pub const CRASHED_ACCOUNT: &str = "account-2210";
/// Order event rate limited three times, then dead-lettered; a replay succeeds.
pub const DEAD_LETTERED: &str = "refund:EU/2026/Ø-1842";
/// Order event dead-lettered, then redriven by the team's own queue
/// tooling and sent: an open dead letter whose key is already sent.
pub const DEAD_LETTER_ALREADY_SENT: &str = "ship:EU/2026/K-2210";
/// Order event whose response is lost.
pub const LOST_RESPONSE: &str = "return:DK/2026/Ø-PO #7 50%";
/// Order event rate limited into the dead-letter queue twice (the team
/// redrove it once in between): two open dead letters on one key page.
pub const TWO_DEAD_LETTERS: &str = "refund:EU/2026/Ø-1843";
/// Order event rate limited into the dead-letter queue, then redriven
/// by the team and its response lost: an unknown outcome beside an open
/// dead letter.
pub const UNKNOWN_BESIDE_DEAD_LETTER: &str = "charge:EU/2026/Ø-77";

/// When the tour begins in a history from `start` to `end`: three hours
/// before the end (its stories take an hour and a half), or ten
/// minutes after the start of a shorter one — recent, so the overview's
/// oldest unknown outcomes are not days old.
pub fn starts_at(start: DateTime<Utc>, end: DateTime<Utc>) -> DateTime<Utc> {
    (start + TimeDelta::minutes(10)).max(end - TimeDelta::hours(3))
}

/// One scripted publication of a tour's fact.
#[derive(Debug, Clone)]
pub(super) struct Publication {
    pub(super) at: DateTime<Utc>,
    pub(super) fact: Fact,
    /// A publisher's retry (or the team's redrive), not a new fact.
    pub(super) retry: bool,
}

/// What the tour needs of the simulation: the provider's scripted answers
/// for its keys, and its publications, in the order they are scheduled.
#[derive(Debug, Default)]
pub(super) struct Plan {
    pub(super) scripts: Vec<(String, VecDeque<Call>)>,
    pub(super) publications: Vec<Publication>,
}

impl Plan {
    fn script(&mut self, fact: &Fact, calls: VecDeque<Call>) {
        self.scripts.push((fact.key.clone(), calls));
    }

    fn publish(&mut self, at: DateTime<Utc>, fact: Fact, retry: bool) {
        self.publications.push(Publication { at, fact, retry });
    }

    /// The team's own queue tooling redrives a dead-lettered message
    /// (outside Idem): a redrive, so the failed claim is tried again.
    fn redrive(&mut self, at: DateTime<Utc>, fact: Fact) {
        let fact = Fact {
            redrive: true,
            ..fact
        };
        self.publish(at, fact, true);
    }
}

fn accepted(reference: &str) -> Call {
    Call::Accepted {
        provider_ref: reference.to_owned(),
    }
}

fn rate_limited(retry_after_seconds: u32) -> Call {
    Call::RateLimited {
        retry_after_seconds,
    }
}

/// Three 429s (into the dead-letter queue), then what comes after.
pub(super) fn three_429s_then(then: impl IntoIterator<Item = Call>) -> VecDeque<Call> {
    let mut script = VecDeque::from([rate_limited(20), rate_limited(30), rate_limited(30)]);
    script.extend(then);
    script
}

/// The tour's stories, starting at `base`, for reminders of `date`.
pub(super) fn plan(base: DateTime<Utc>, date: &str) -> Plan {
    let minutes = |m: i64| base + TimeDelta::minutes(m);
    let mut plan = Plan::default();

    // Sent, then a publisher retry six minutes later: outside a FIFO dedupe window.
    let renewal = flows::reminder(LATE_DUPLICATE_ACCOUNT, date);
    plan.script(&renewal, VecDeque::from([accepted("msg_01J8Q3Z6")]));
    plan.publish(minutes(0), renewal.clone(), false);
    plan.publish(minutes(6) + TimeDelta::seconds(10), renewal, true);

    // A webhook delivered twice within 40 seconds: inside the window.
    let webhook = flows::payment(WEBHOOK_DUPLICATE, 4_200);
    plan.publish(minutes(10), webhook.clone(), false);
    plan.publish(minutes(10) + TimeDelta::seconds(40), webhook, true);

    // The worker crashes after the provider accepted: unknown on redelivery.
    let crashed = flows::reminder(CRASHED_ACCOUNT, date);
    plan.script(&crashed, VecDeque::from([Call::CrashAfterAcceptance]));
    plan.publish(minutes(20), crashed, false);

    // Rate limited three times: dead-lettered, key kept; a replay of it goes through.
    let refund = flows::order_event("refund", "EU/2026/Ø-1842");
    debug_assert_eq!(refund.key, DEAD_LETTERED);
    plan.script(&refund, three_429s_then([accepted("ful_replayed01")]));
    plan.publish(minutes(30), refund, false);

    // Dead-lettered, then redriven by the team and sent: Idem's dead
    // letter is safe to discard.
    let shipped = flows::order_event("ship", "EU/2026/K-2210");
    debug_assert_eq!(shipped.key, DEAD_LETTER_ALREADY_SENT);
    plan.script(&shipped, three_429s_then([accepted("ful_second01")]));
    plan.publish(minutes(45), shipped.clone(), false);
    plan.redrive(minutes(60), shipped);

    // Rate limited into the dead-letter queue, redriven by the team, and
    // rate limited into it again: two open dead letters. A replay meets
    // one more 429 (30 s), then goes through.
    let twice = flows::order_event("refund", "EU/2026/Ø-1843");
    debug_assert_eq!(twice.key, TWO_DEAD_LETTERS);
    let then = three_429s_then([rate_limited(30)]);
    let then = then
        .into_iter()
        .chain([accepted("ful_twice01"), accepted("ful_twice02")]);
    plan.script(&twice, three_429s_then(then));
    plan.publish(minutes(50), twice.clone(), false);
    plan.redrive(minutes(65), twice);

    // Rate limited into the dead-letter queue, then the team's redrive
    // loses its response: unknown, with the dead letter still open.
    let charge = flows::order_event("charge", "EU/2026/Ø-77");
    debug_assert_eq!(charge.key, UNKNOWN_BESIDE_DEAD_LETTER);
    plan.script(&charge, three_429s_then([Call::LostResponse]));
    plan.publish(minutes(55), charge.clone(), false);
    plan.redrive(minutes(70), charge);

    // The response is lost: unknown at once.
    let lost = flows::order_event("return", "DK/2026/Ø-PO #7 50%");
    debug_assert_eq!(lost.key, LOST_RESPONSE);
    plan.script(&lost, VecDeque::from([Call::LostResponse]));
    plan.publish(minutes(40), lost, false);
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-14T12:00:00Z")
            .unwrap()
            .to_utc()
    }

    fn script(plan: &Plan, key: &str) -> Vec<Call> {
        let (_, calls) = plan.scripts.iter().find(|(k, _)| k == key).unwrap();
        calls.iter().cloned().collect()
    }

    #[test]
    fn the_tour_starts_three_hours_before_the_end_or_soon_after_a_short_start() {
        let end = base();
        let long = end - TimeDelta::hours(48);
        assert_eq!(starts_at(long, end), end - TimeDelta::hours(3));
        let short = end - TimeDelta::hours(2);
        assert_eq!(starts_at(short, end), short + TimeDelta::minutes(10));
    }

    #[test]
    fn every_scripted_key_of_the_tour_is_published_within_its_hour_and_a_half() {
        let plan = plan(base(), "2026-04-13");
        assert_eq!(plan.scripts.len(), 7);
        assert_eq!(plan.publications.len(), 13);
        for (key, _) in &plan.scripts {
            assert!(
                plan.publications.iter().any(|p| &p.fact.key == key),
                "{key}"
            );
        }
        for p in &plan.publications {
            assert!(p.at >= base() && p.at <= base() + TimeDelta::minutes(90));
        }
        let keys: Vec<&str> = plan
            .publications
            .iter()
            .map(|p| p.fact.key.as_str())
            .collect();
        for key in [
            DEAD_LETTERED,
            DEAD_LETTER_ALREADY_SENT,
            LOST_RESPONSE,
            TWO_DEAD_LETTERS,
            UNKNOWN_BESIDE_DEAD_LETTER,
            WEBHOOK_DUPLICATE,
        ] {
            assert!(keys.contains(&key), "{key}");
        }
        let late = format!("renewal:{LATE_DUPLICATE_ACCOUNT}:2026-04-13");
        assert!(keys.contains(&late.as_str()));
    }

    #[test]
    fn the_late_duplicate_is_outside_a_five_minute_window_and_the_webhook_inside() {
        let plan = plan(base(), "2026-04-13");
        let times = |key: &str| -> Vec<(DateTime<Utc>, bool)> {
            let hits = plan.publications.iter().filter(|p| p.fact.key == key);
            hits.map(|p| (p.at, p.retry)).collect()
        };
        let late = times(&format!("renewal:{LATE_DUPLICATE_ACCOUNT}:2026-04-13"));
        assert_eq!(late.len(), 2);
        assert!(!late[0].1 && late[1].1);
        assert!(late[1].0 - late[0].0 > TimeDelta::minutes(5));
        let webhook = times(WEBHOOK_DUPLICATE);
        assert_eq!(webhook[1].0 - webhook[0].0, TimeDelta::seconds(40));
    }

    #[test]
    fn redrives_are_retries_marked_as_redrives() {
        let plan = plan(base(), "2026-04-13");
        let redriven: Vec<&str> = plan
            .publications
            .iter()
            .filter(|p| p.fact.redrive)
            .map(|p| {
                assert!(p.retry);
                p.fact.key.as_str()
            })
            .collect();
        assert_eq!(
            redriven,
            [
                DEAD_LETTER_ALREADY_SENT,
                TWO_DEAD_LETTERS,
                UNKNOWN_BESIDE_DEAD_LETTER
            ]
        );
    }

    #[test]
    fn the_scripts_say_what_each_story_needs_of_the_provider() {
        let plan = plan(base(), "2026-04-13");
        let limited = |s: u32| rate_limited(s);
        assert_eq!(
            script(&plan, DEAD_LETTERED),
            [
                limited(20),
                limited(30),
                limited(30),
                accepted("ful_replayed01")
            ]
        );
        assert_eq!(
            script(&plan, TWO_DEAD_LETTERS),
            [
                limited(20),
                limited(30),
                limited(30),
                limited(20),
                limited(30),
                limited(30),
                limited(30),
                accepted("ful_twice01"),
                accepted("ful_twice02"),
            ]
        );
        assert_eq!(
            script(&plan, UNKNOWN_BESIDE_DEAD_LETTER),
            [limited(20), limited(30), limited(30), Call::LostResponse]
        );
        assert_eq!(script(&plan, LOST_RESPONSE), [Call::LostResponse]);
    }
}
