//! Key search and browsing: newest activity first, keyset-paginated, never a
//! scan of the claims table.
//!
//! How each filter stays bounded:
//! - **prefix**: the matching keys are a range of the key index. At most
//!   [`SEARCH_CANDIDATES`] of them (in key order) are read and then ordered by
//!   activity; when more match, the result says so and asks for a longer prefix;
//! - **status** `pending`, `failed` or `unknown` (without a prefix): read from
//!   that status's partial index, newest *status change* first;
//! - **consumer** (without a prefix or small status): the consumer's activity index;
//! - nothing (or `sent`): the activity index.

use idem_domain::{CappedCount, Claim, ClaimStatus, ConsumerName, Page};

use crate::facets::Claims;
use crate::{
    StoreResult,
    cursor::{self, PageRequest, paginate},
    dialect::dispatch,
    reads::prefix_upper_bound,
    rows::{ClaimRow, DeadLetterRow, claim_columns, convert, dead_letter_columns},
    sql::{Bind, Sql, bind_all},
    store::Store,
};

/// How many keys a prefix search considers at most.
pub const SEARCH_CANDIDATES: u64 = 10_000;

/// What to look for; every part is optional.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimSearch {
    /// Keys starting with this text, matched literally and byte for byte.
    pub prefix: Option<String>,
    pub consumer: Option<ConsumerName>,
    pub status: Option<ClaimStatus>,
    /// The consumers the reader may see (rights limited to teams).
    pub within: idem_domain::Within,
    /// How many prefix matches are considered ([`SEARCH_CANDIDATES`]).
    pub candidates: u64,
}

impl Default for ClaimSearch {
    fn default() -> Self {
        Self {
            prefix: None,
            consumer: None,
            status: None,
            within: idem_domain::Within::Every,
            candidates: SEARCH_CANDIDATES,
        }
    }
}

/// Which time a result page is ordered by (newest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SearchOrder {
    /// The key's last delivery.
    Activity,
    /// When the claim's status last changed.
    StatusChange,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub page: Page<Claim>,
    pub order: SearchOrder,
    /// For a prefix search: how many keys match, up to [`SEARCH_CANDIDATES`];
    /// when capped, the page is the newest among the first matches in key order.
    pub matches: Option<CappedCount>,
}

impl Sql {
    /// ` AND …` for the search's filters but its consumers (empty when
    /// there are none). The status is an enum, so it is spelled as a
    /// literal: that is what lets a partial index serve it.
    fn filters(&mut self, search: &ClaimSearch) -> String {
        let mut filters = String::new();
        if let Some(prefix) = &search.prefix {
            let lower = self.param(Bind::Text(prefix.clone()));
            filters += &format!(" AND idempotency_key >= {lower}");
            if let Some(upper) = prefix_upper_bound(prefix) {
                let upper = self.param(Bind::Text(upper));
                filters += &format!(" AND idempotency_key < {upper}");
            }
        }
        if let Some(status) = search.status {
            filters += &format!(" AND status = '{}'", status.as_str());
        }
        filters
    }
}

impl ClaimSearch {
    /// The consumers it reaches: its one consumer if the reader may see
    /// it, else those they may.
    fn reach(&self) -> idem_domain::Within {
        self.within.narrowed_to(self.consumer.as_ref())
    }
}

impl SearchOrder {
    /// The order a search's page comes in: a small status without a prefix
    /// reads its partial index, newest status change first.
    fn of(search: &ClaimSearch) -> Self {
        let small_status = search.status.filter(|s| *s != ClaimStatus::Sent);
        if search.prefix.is_none() && small_status.is_some() {
            SearchOrder::StatusChange
        } else {
            SearchOrder::Activity
        }
    }

    /// The time column this order reads, and the name of its cursors' list.
    fn column_and_list(self) -> (&'static str, &'static str) {
        match self {
            SearchOrder::Activity => ("last_delivery_at", "keys/activity"),
            SearchOrder::StatusChange => ("status_at", "keys/status"),
        }
    }
}

impl Sql {
    /// The query for one page of a search in `order`, after the page's
    /// cursor: each consumer's part (its primary key's range for a prefix,
    /// its activity or status index otherwise), then the page of them all.
    fn page_query(
        search: &ClaimSearch,
        page: &PageRequest,
        order: SearchOrder,
    ) -> StoreResult<Sql> {
        let (time_column, list) = order.column_and_list();
        let after = match &page.after {
            Some(after) => {
                let (at, consumer, key): (i64, String, String) = cursor::decode(list, after)?;
                Some((cursor::instant(at)?, consumer, key))
            }
            None => None,
        };
        let newest = format!("ORDER BY {time_column} DESC, consumer DESC, idempotency_key DESC");
        let mut sql = Sql::default();
        let limit = sql.param(Bind::Int(page.limit + 1));
        let keyset = |sql: &mut Sql| match &after {
            Some((at, consumer, key)) => {
                let (a, c, k) = (
                    sql.param(Bind::Ts(*at)),
                    sql.param(Bind::Text(consumer.clone())),
                    sql.param(Bind::Text(key.clone())),
                );
                format!(" AND ({time_column}, consumer, idempotency_key) < ({a}, {c}, {k})")
            }
            None => String::new(),
        };
        let source = if search.prefix.is_some() {
            // The candidates: the first matches in key order (each
            // consumer's a range of its primary key, then the first of all).
            let cap = sql.param(Bind::Int(
                i64::try_from(search.candidates).unwrap_or(i64::MAX),
            ));
            let parts = sql.each_consumer(&search.reach(), "consumer", |sql, only| {
                let filtered = sql.filters(search);
                format!(
                    "SELECT {} FROM claims WHERE 1 = 1{filtered}{only} \
                     ORDER BY idempotency_key, consumer LIMIT {cap}",
                    claim_columns!()
                )
            });
            let candidates = format!(
                "SELECT * FROM ({parts}) AS matched ORDER BY idempotency_key, consumer LIMIT {cap}"
            );
            let keyset = keyset(&mut sql);
            format!("SELECT * FROM ({candidates}) AS candidates WHERE 1 = 1{keyset}")
        } else {
            sql.each_consumer(&search.reach(), "consumer", |sql, only| {
                let filtered = sql.filters(search);
                let keyset = keyset(sql);
                format!(
                    "SELECT {} FROM claims WHERE 1 = 1{filtered}{only}{keyset} {newest} LIMIT {limit}",
                    claim_columns!()
                )
            })
        };
        sql.text = format!("SELECT * FROM ({source}) AS found {newest} LIMIT {limit}");
        Ok(sql)
    }

    /// The count of a prefix search's matches, capped one past its
    /// candidates: each consumer's range of its primary key, ordered by key
    /// so the count walks an index range, never the table.
    fn prefix_count(search: &ClaimSearch) -> Sql {
        let mut count = Sql::default();
        let cap = count.param(Bind::Int(
            i64::try_from(search.candidates.saturating_add(1)).unwrap_or(i64::MAX),
        ));
        let parts = count.each_consumer(&search.reach(), "consumer", |sql, only| {
            let filtered = sql.filters(search);
            format!(
                "SELECT 1 FROM claims WHERE 1 = 1{filtered}{only} ORDER BY idempotency_key LIMIT {cap}"
            )
        });
        count.text = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM ({parts}) AS matched LIMIT {cap}) AS capped"
        );
        count
    }
}

impl Claims<'_> {
    pub async fn search_claims(
        self,
        search: &ClaimSearch,
        page: &PageRequest,
    ) -> StoreResult<SearchResult> {
        let order = SearchOrder::of(search);
        let (_, list) = order.column_and_list();
        let sql = Sql::page_query(search, page, order)?;
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        let page = paginate(convert(rows)?, page.limit, list, |c: &Claim| {
            let at = match order {
                SearchOrder::Activity => c.last_delivery_at,
                SearchOrder::StatusChange => c.status_at,
            };
            (at.timestamp_micros(), c.consumer.clone(), c.key.clone())
        });
        let matches = match search.prefix {
            Some(_) => Some(self.count_prefix_matches(search).await?),
            None => None,
        };
        Ok(SearchResult {
            page,
            order,
            matches,
        })
    }

    /// The claims whose provider reference is exactly `provider_ref` (what a
    /// provider's support quotes) of the consumers `reach` allows, at most
    /// `limit`, in key order. A range of `claims_by_provider_ref`.
    pub async fn claims_by_provider_ref(
        self,
        provider_ref: &str,
        reach: &idem_domain::Within,
        limit: i64,
    ) -> StoreResult<Vec<Claim>> {
        let mut sql = Sql::default();
        let r = sql.param(Bind::Text(provider_ref.to_owned()));
        sql.push(&format!(
            "SELECT {} FROM claims WHERE provider_ref = {r}",
            claim_columns!()
        ));
        sql.and_within(reach, "consumer");
        let limit = sql.param(Bind::Int(limit));
        sql.push(&format!(
            " ORDER BY consumer, idempotency_key LIMIT {limit}"
        ));
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The dead letters whose message id is exactly `message_id` of the
    /// consumers `reach` allows, at most `limit`, newest first. A range of
    /// `dead_letters_by_message_id`.
    pub async fn dead_letters_by_message_id(
        self,
        message_id: &str,
        reach: &idem_domain::Within,
        limit: i64,
    ) -> StoreResult<Vec<idem_domain::DeadLetter>> {
        let mut sql = Sql::default();
        let m = sql.param(Bind::Text(message_id.to_owned()));
        sql.push(&format!(
            "SELECT {} FROM dead_letters WHERE message_id = {m}",
            dead_letter_columns!()
        ));
        sql.and_within(reach, "consumer");
        let limit = sql.param(Bind::Int(limit));
        sql.push(&format!(" ORDER BY id DESC LIMIT {limit}"));
        let rows: Vec<DeadLetterRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        convert(rows)
    }
}

impl Store {
    /// How many keys a prefix search matches, up to its candidates.
    async fn count_prefix_matches(&self, search: &ClaimSearch) -> StoreResult<CappedCount> {
        let count = Sql::prefix_count(search);
        let counted: i64 = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_scalar(&count.text), &count.binds).fetch_one(pool).await?
        });
        Ok(CappedCount::from_limited(
            u64::try_from(counted).unwrap_or(0),
            search.candidates,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_status_without_a_prefix_is_ordered_by_status_change() {
        let search = |prefix: Option<&str>, status| ClaimSearch {
            prefix: prefix.map(str::to_owned),
            status,
            ..ClaimSearch::default()
        };
        let order = |s: &ClaimSearch| SearchOrder::of(s);
        assert_eq!(
            order(&search(None, Some(ClaimStatus::Unknown))),
            SearchOrder::StatusChange
        );
        assert_eq!(
            order(&search(None, Some(ClaimStatus::Sent))),
            SearchOrder::Activity
        );
        assert_eq!(
            order(&search(Some("renewal:"), Some(ClaimStatus::Unknown))),
            SearchOrder::Activity
        );
        assert_eq!(order(&search(None, None)), SearchOrder::Activity);
    }

    #[test]
    fn a_prefix_search_reads_its_candidates_then_orders_them_by_activity() {
        let search = ClaimSearch {
            prefix: Some("renewal:".into()),
            consumer: Some(ConsumerName::parse("reminders").unwrap()),
            candidates: 50,
            ..ClaimSearch::default()
        };
        let page = PageRequest {
            after: None,
            limit: 20,
        };
        let sql = Sql::page_query(&search, &page, SearchOrder::Activity).unwrap();
        assert_eq!(
            sql.text,
            format!(
                "SELECT * FROM (SELECT * FROM (SELECT * FROM (SELECT * FROM (SELECT {columns} \
                 FROM claims WHERE 1 = 1 AND idempotency_key >= $4 AND idempotency_key < $5 \
                 AND consumer = $3 ORDER BY idempotency_key, consumer LIMIT $2) AS part0) \
                 AS matched ORDER BY idempotency_key, consumer LIMIT $2) AS candidates \
                 WHERE 1 = 1) AS found \
                 ORDER BY last_delivery_at DESC, consumer DESC, idempotency_key DESC LIMIT $1",
                columns = claim_columns!()
            )
        );
        assert_eq!(sql.binds.len(), 5);
        let count = Sql::prefix_count(&search);
        assert!(
            count.text.ends_with(
                "ORDER BY idempotency_key LIMIT $1) AS part0) AS matched LIMIT $1) AS capped"
            ),
            "{}",
            count.text
        );
        assert!(matches!(count.binds[0], Bind::Int(51)));
    }
}
