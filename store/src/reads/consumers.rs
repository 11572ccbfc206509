//! The consumer table's figures: what each consumer did in the last hour,
//! how old its queue is, and what of it waits for a person — for every
//! consumer at once, in a fixed number of statements however many there are.

use std::collections::BTreeMap;

use idem_domain::{CappedCount, Metric};

use crate::{StoreResult, dialect::dispatch, store::Store, ts::Ts};

/// Open work per consumer, from one walk of each open set that stops after
/// `cap` entries in all: a consumer's count is exact unless the walk
/// stopped, and then a lower bound (shown "n+").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenByConsumer {
    unknown: BTreeMap<String, u64>,
    unknown_capped: bool,
    dead_letters: BTreeMap<String, u64>,
    dead_letters_capped: bool,
}

impl OpenByConsumer {
    /// `consumer`'s open unknown outcomes.
    pub fn unknown(&self, consumer: &str) -> CappedCount {
        of(&self.unknown, self.unknown_capped, consumer)
    }

    /// `consumer`'s open dead letters.
    pub fn dead_letters(&self, consumer: &str) -> CappedCount {
        of(&self.dead_letters, self.dead_letters_capped, consumer)
    }

    /// Every consumer with any open work, by name.
    pub fn consumers(&self) -> impl Iterator<Item = &str> {
        self.unknown
            .keys()
            .chain(self.dead_letters.keys())
            .map(String::as_str)
    }
}

fn of(counts: &BTreeMap<String, u64>, capped: bool, consumer: &str) -> CappedCount {
    CappedCount {
        value: counts.get(consumer).copied().unwrap_or(0),
        capped,
    }
}

impl Store {
    /// Each consumer's open unknown outcomes and open dead letters: the
    /// partial indexes `claims_unknown_since` and `dead_letters_open`, each
    /// walked for at most `cap + 1` entries.
    pub async fn open_by_consumer(&self, cap: u64) -> StoreResult<OpenByConsumer> {
        const UNKNOWN: &str = "SELECT consumer, COUNT(*) FROM \
             (SELECT consumer FROM claims WHERE status = 'unknown' LIMIT $1) AS open \
             GROUP BY consumer";
        const DEAD_LETTERS: &str = "SELECT consumer, COUNT(*) FROM \
             (SELECT consumer FROM dead_letters WHERE state = 'open' LIMIT $1) AS open \
             GROUP BY consumer";
        let limit = i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX);
        let (unknown, unknown_capped) = self.grouped(UNKNOWN, limit).await?;
        let (dead_letters, dead_letters_capped) = self.grouped(DEAD_LETTERS, limit).await?;
        Ok(OpenByConsumer {
            unknown,
            unknown_capped,
            dead_letters,
            dead_letters_capped,
        })
    }

    async fn grouped(&self, sql: &str, limit: i64) -> StoreResult<(BTreeMap<String, u64>, bool)> {
        let rows: Vec<(String, i64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(sql).bind(limit).fetch_all(pool).await?
        });
        let walked: i64 = rows.iter().map(|(_, n)| n).sum();
        let counts = rows
            .into_iter()
            .map(|(consumer, n)| (consumer, u64::try_from(n).unwrap_or(0)))
            .collect();
        Ok((counts, walked >= limit))
    }

    /// The largest value of `gauge` per consumer over the minutes in
    /// `[from, to)`: a range of the `(metric, minute)` index.
    pub async fn gauge_max_by_consumer(
        &self,
        gauge: Metric,
        from: Ts,
        to: Ts,
    ) -> StoreResult<BTreeMap<String, f64>> {
        const SQL: &str = "SELECT consumer, MAX(value) FROM consumer_metrics \
             WHERE metric = $1 AND minute >= $2 AND minute < $3 GROUP BY consumer";
        let rows: Vec<(String, f64)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(gauge.name()).bind(from).bind(to).fetch_all(pool).await?
        });
        Ok(rows.into_iter().collect())
    }
}
