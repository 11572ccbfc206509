//! What happens next in the simulation: events, in the order of their time.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};

use super::{
    flows::{Fact, Flow},
    provider::Call,
};

pub(super) enum Event {
    NextFact(Flow),
    Publish {
        fact: Fact,
        retry: bool,
    },
    Deliver(u64),
    /// The queue hands one message's two copies to two workers at the same instant.
    DeliverTwins(u64, u64),
    Complete {
        message: u64,
        generation: u32,
        /// What was called for, so the outcome is recorded even when the
        /// message has meanwhile been given up on.
        flow: Flow,
        key: String,
        payload: String,
        call: Call,
    },
    VisibilityTimeout {
        message: u64,
        generation: u32,
    },
    Relay,
    Flush,
    /// The on-call settles a key's unknown outcome with the provider.
    Settle {
        flow: Flow,
        key: String,
    },
    /// The on-call replays a dead letter.
    Replay(i64),
}

/// An event and when it happens; `seq` orders events at the same instant
/// as they were scheduled.
pub(super) struct Scheduled {
    pub(super) at: DateTime<Utc>,
    pub(super) seq: u64,
    pub(super) event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Earliest first (the heap is a max-heap).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BinaryHeap;

    use chrono::TimeDelta;

    use super::*;

    #[test]
    fn the_heap_hands_out_the_earliest_event_first_and_ties_in_scheduling_order() {
        let t0 = DateTime::parse_from_rfc3339("2026-03-14T12:00:00Z")
            .unwrap()
            .to_utc();
        let mut heap = BinaryHeap::new();
        for (seq, seconds) in [(1, 30), (2, 10), (3, 10), (4, 0), (5, 20)] {
            heap.push(Scheduled {
                at: t0 + TimeDelta::seconds(seconds),
                seq,
                event: Event::Deliver(seq),
            });
        }
        let order: Vec<u64> = std::iter::from_fn(|| heap.pop().map(|s| s.seq)).collect();
        assert_eq!(order, [4, 2, 3, 5, 1]);
    }
}
