//! The consumer table's figures: what each consumer did in the last hour,
//! how old its queue is, and what of it waits for a person — for the
//! consumers a reader may see, in a few statements however many there are.

use std::collections::BTreeMap;

use idem_domain::{CappedCount, ConsumerName, Metric, Within};

use crate::facets::{Lists, Metrics};
use crate::{
    StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    ts::Ts,
};

/// Open work per consumer, each counted on its own up to a cap: a
/// consumer's count is exact below it, and "n+" at it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenByConsumer {
    unknown: BTreeMap<String, CappedCount>,
    dead_letters: BTreeMap<String, CappedCount>,
}

impl OpenByConsumer {
    /// `consumer`'s open unknown outcomes.
    pub fn unknown(&self, consumer: &str) -> CappedCount {
        self.unknown.get(consumer).copied().unwrap_or_default()
    }

    /// `consumer`'s open dead letters.
    pub fn dead_letters(&self, consumer: &str) -> CappedCount {
        self.dead_letters.get(consumer).copied().unwrap_or_default()
    }
}

/// How many consumers one statement counts.
const CONSUMERS_PER_STATEMENT: usize = 100;

impl Lists<'_> {
    /// Each of `consumers`' open unknown outcomes and open dead letters,
    /// each counted to `cap` on its own range of `claims_unknown_by_consumer`
    /// and `dead_letters_open_by_consumer`: what one consumer's backlog
    /// holds never changes another's count, nor what it costs.
    pub async fn open_by_consumer(
        self,
        consumers: &[ConsumerName],
        cap: u64,
    ) -> StoreResult<OpenByConsumer> {
        let mut open = OpenByConsumer::default();
        for batch in consumers.chunks(CONSUMERS_PER_STATEMENT) {
            let mut sql = Sql::default();
            let limit = super::lists::capped_limit(&mut sql, cap);
            let parts: Vec<String> = batch
                .iter()
                .map(|consumer| {
                    let c = sql.param(consumer.as_str());
                    format!(
                        "SELECT {c} AS consumer, \
                         (SELECT COUNT(*) FROM (SELECT 1 FROM claims WHERE status = 'unknown' \
                          AND consumer = {c} LIMIT {limit}) AS u) AS unknown, \
                         (SELECT COUNT(*) FROM (SELECT 1 FROM dead_letters WHERE state = 'open' \
                          AND consumer = {c} LIMIT {limit}) AS d) AS dead_letters"
                    )
                })
                .collect();
            sql.text = parts.join(" UNION ALL ");
            let rows: Vec<(String, i64, i64)> = dispatch!(&self.pools, pool => {
                bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
            });
            let capped = |n: i64| CappedCount::from_limited(u64::try_from(n).unwrap_or(0), cap);
            for (consumer, unknown, dead_letters) in rows {
                open.unknown.insert(consumer.clone(), capped(unknown));
                open.dead_letters.insert(consumer, capped(dead_letters));
            }
        }
        Ok(open)
    }
}

impl Metrics<'_> {
    /// The largest value of `gauge` per consumer `within` allows over the
    /// minutes in `[from, to)`: a range of the `(metric, minute)` index.
    pub async fn gauge_max_by_consumer(
        self,
        gauge: Metric,
        from: Ts,
        to: Ts,
        within: &Within,
    ) -> StoreResult<BTreeMap<String, f64>> {
        let mut sql = Sql::default();
        let (metric, from, to) = (sql.param(gauge.name()), sql.param(from), sql.param(to));
        sql.push(&format!(
            "SELECT consumer, MAX(value) FROM consumer_metrics \
             WHERE metric = {metric} AND minute >= {from} AND minute < {to}"
        ));
        sql.and_within(within, "consumer");
        sql.push(" GROUP BY consumer");
        let rows: Vec<(String, f64)> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(rows.into_iter().collect())
    }
}
