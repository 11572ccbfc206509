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

use idem_domain::{CappedCount, Claim, ClaimStatus, ConsumerName, IdempotencyKey, Page};

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
    /// `WHERE …` for the search's filters (empty when there are none). The
    /// status is an enum, so it is spelled as a literal: that is what lets a
    /// partial index serve it.
    fn filters(&mut self, search: &ClaimSearch) -> String {
        let mut filters = Vec::new();
        if let Some(prefix) = &search.prefix {
            let lower = self.param(Bind::Text(prefix.clone()));
            filters.push(format!("idempotency_key >= {lower}"));
            if let Some(upper) = prefix_upper_bound(prefix) {
                let upper = self.param(Bind::Text(upper));
                filters.push(format!("idempotency_key < {upper}"));
            }
        }
        if let Some(consumer) = &search.consumer {
            let p = self.param(consumer.as_str());
            filters.push(format!("consumer = {p}"));
        }
        if let Some(status) = search.status {
            filters.push(format!("status = '{}'", status.as_str()));
        }
        if let Some(within) = self.within(&search.within, "consumer") {
            filters.push(within);
        }
        if filters.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", filters.join(" AND "))
        }
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
    /// The query for one page of a search in `order`, after the page's cursor.
    fn page_query(
        search: &ClaimSearch,
        page: &PageRequest,
        order: SearchOrder,
    ) -> StoreResult<Sql> {
        let (time_column, list) = order.column_and_list();
        let mut sql = Sql::default();
        let filtered = sql.filters(search);
        let (source, mut conditions) = if search.prefix.is_some() {
            // The candidates: the first matches in key order (a range of the key index).
            let cap = sql.param(Bind::Int(
                i64::try_from(search.candidates).unwrap_or(i64::MAX),
            ));
            let source = format!(
                "(SELECT {} FROM claims{filtered} ORDER BY idempotency_key, consumer LIMIT {cap}) AS candidates",
                claim_columns!()
            );
            (source, Vec::new())
        } else {
            let conditions = filtered
                .strip_prefix(" WHERE ")
                .map(|f| vec![f.to_owned()])
                .unwrap_or_default();
            ("claims".to_owned(), conditions)
        };
        if let Some(after) = &page.after {
            let (at, consumer, key): (i64, String, String) = cursor::decode(list, after)?;
            let at = cursor::instant(at)?;
            let (a, c, k) = (
                sql.param(Bind::Ts(at)),
                sql.param(Bind::Text(consumer)),
                sql.param(Bind::Text(key)),
            );
            conditions.push(format!(
                "({time_column}, consumer, idempotency_key) < ({a}, {c}, {k})"
            ));
        }
        let limit = sql.param(Bind::Int(page.limit + 1));
        let condition = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        sql.text = format!(
            "SELECT {} FROM {source}{condition} \
             ORDER BY {time_column} DESC, consumer DESC, idempotency_key DESC LIMIT {limit}",
            claim_columns!()
        );
        Ok(sql)
    }

    /// The count of a prefix search's matches, capped one past its candidates.
    fn prefix_count(search: &ClaimSearch) -> Sql {
        let mut count = Sql::default();
        let filtered = count.filters(search);
        let cap = count.param(Bind::Int(
            i64::try_from(search.candidates.saturating_add(1)).unwrap_or(i64::MAX),
        ));
        // Ordered by key so the count walks the key index (the range), never the table.
        count.text = format!(
            "SELECT COUNT(*) FROM (SELECT 1 FROM claims{filtered} ORDER BY idempotency_key LIMIT {cap}) AS capped"
        );
        count
    }
}

impl Store {
    pub async fn search_claims(
        &self,
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

    /// The claims whose provider reference is exactly `provider_ref` (what a
    /// provider's support quotes), at most `limit`; of
    /// one consumer when given, in key order. A range of `claims_by_provider_ref`.
    pub async fn claims_by_provider_ref(
        &self,
        provider_ref: &str,
        consumer: Option<&ConsumerName>,
        limit: i64,
    ) -> StoreResult<Vec<Claim>> {
        let mut sql = Sql::default();
        let r = sql.param(Bind::Text(provider_ref.to_owned()));
        let mut text = format!(
            "SELECT {} FROM claims WHERE provider_ref = {r}",
            claim_columns!()
        );
        if let Some(consumer) = consumer {
            let c = sql.param(consumer.as_str());
            text.push_str(&format!(" AND consumer = {c}"));
        }
        let limit = sql.param(Bind::Int(limit));
        text.push_str(&format!(
            " ORDER BY consumer, idempotency_key LIMIT {limit}"
        ));
        sql.text = text;
        let rows: Vec<ClaimRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// The dead letters whose message id is exactly `message_id`, at most
    /// `limit`, newest first; of one consumer when given. A range of
    /// `dead_letters_by_message_id`.
    pub async fn dead_letters_by_message_id(
        &self,
        message_id: &str,
        consumer: Option<&ConsumerName>,
        limit: i64,
    ) -> StoreResult<Vec<idem_domain::DeadLetter>> {
        let mut sql = Sql::default();
        let m = sql.param(Bind::Text(message_id.to_owned()));
        let mut text = format!(
            "SELECT {} FROM dead_letters WHERE message_id = {m}",
            dead_letter_columns!()
        );
        if let Some(consumer) = consumer {
            let c = sql.param(consumer.as_str());
            text.push_str(&format!(" AND consumer = {c}"));
        }
        let limit = sql.param(Bind::Int(limit));
        text.push_str(&format!(" ORDER BY id DESC LIMIT {limit}"));
        sql.text = text;
        let rows: Vec<DeadLetterRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        convert(rows)
    }

    /// Other claims that record `provider_ref` (at most `limit`).
    pub async fn claims_with_provider_ref(
        &self,
        provider_ref: &str,
        except: (&ConsumerName, &IdempotencyKey),
        limit: i64,
    ) -> StoreResult<Vec<(String, String)>> {
        let except = (except.0.as_str(), except.1.as_str());
        const SQL: &str = "SELECT consumer, idempotency_key FROM claims WHERE provider_ref = $1 \
             AND NOT (consumer = $2 AND idempotency_key = $3) ORDER BY consumer, idempotency_key LIMIT $4";
        let rows: Vec<(String, String)> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(provider_ref).bind(except.0).bind(except.1).bind(limit).fetch_all(pool).await?
        });
        Ok(rows)
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
                "SELECT {columns} FROM (SELECT {columns} FROM claims \
                 WHERE idempotency_key >= $1 AND idempotency_key < $2 AND consumer = $3 \
                 ORDER BY idempotency_key, consumer LIMIT $4) AS candidates \
                 ORDER BY last_delivery_at DESC, consumer DESC, idempotency_key DESC LIMIT $5",
                columns = claim_columns!()
            )
        );
        assert_eq!(sql.binds.len(), 5);
        let count = Sql::prefix_count(&search);
        assert!(
            count
                .text
                .ends_with("ORDER BY idempotency_key LIMIT $4) AS capped")
        );
        assert!(matches!(count.binds[3], Bind::Int(51)));
    }
}
