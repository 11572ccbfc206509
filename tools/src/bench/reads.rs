//! The dashboard's reads, each timed beside the naive form of the same
//! question: one row of the report each.

use chrono::Utc;
use idem_domain::{ConsumerName, DeadLetterState, IdempotencyKey};
use idem_store::{ClaimSearch, PageRequest};

use super::{BenchOptions, Naive, Row, Target, time_idem, time_naive};

/// `SELECT * … LIMIT … OFFSET …`: how a naive console pages.
fn page_sql(table: &str, filter: &str, order: &str, offset: u64, limit: u32) -> String {
    format!("SELECT * FROM {table} WHERE {filter} ORDER BY {order} LIMIT {limit} OFFSET {offset}")
}

/// Each dashboard read timed beside its naive form, one row each.
pub(super) struct Reads<'a> {
    pub(super) target: &'a Target,
    pub(super) options: &'a BenchOptions,
}

impl Reads<'_> {
    async fn naive(&self, statements: Vec<String>) -> Result<Naive, String> {
        time_naive(
            &self.target.naive_pool,
            self.options.naive_runs,
            &statements,
        )
        .await
    }

    pub(super) async fn overview(&self) -> Result<Row, String> {
        eprintln!("  overview");
        let store = &self.target.store;
        Ok(Row {
            name: "overview (all its reads)",
            idem: time_idem(self.options.runs, || {
                idem_app::api::overview::read_overview(store, &idem_domain::Within::Every)
            })
            .await?,
            naive: self
                .naive(vec![
                    "SELECT status, count(*) FROM claims GROUP BY status".into(),
                ])
                .await?,
        })
    }

    /// The three work lists' first pages; a naive console shows "page 1 of
    /// N": a total count, then OFFSET.
    pub(super) async fn lists(&self) -> Result<Vec<Row>, String> {
        let (store, runs) = (&self.target.store, self.options.runs);
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let lists: [(&'static str, &str, &str, &str); 3] = [
            (
                "/unknown first page",
                "claims",
                "status = 'unknown'",
                "status_at, consumer, idempotency_key",
            ),
            (
                "/dead-letters first page",
                "dead_letters",
                "state = 'open'",
                "dead_lettered_at, id",
            ),
            (
                "/outbox first page",
                "outbox",
                "published_at IS NULL",
                "created_at, id",
            ),
        ];
        let mut rows = Vec::new();
        let (everywhere, letters, outbox) = (
            idem_store::Window::default(),
            idem_store::DeadLetterFilter::default(),
            idem_store::OutboxFilter::default(),
        );
        for (name, table, filter, order) in lists {
            eprintln!("  {name}");
            let idem = match table {
                "claims" => {
                    time_idem(runs, || {
                        store.lists().unknown_claims_in(&first, &everywhere)
                    })
                    .await?
                }
                "dead_letters" => {
                    time_idem(runs, || {
                        store
                            .lists()
                            .dead_letters_in(DeadLetterState::Open, &first, &letters)
                    })
                    .await?
                }
                _ => {
                    time_idem(runs, || {
                        store.lists().unpublished_outbox_in(&first, &outbox)
                    })
                    .await?
                }
            };
            let naive = self
                .naive(vec![
                    format!("SELECT count(*) FROM {table} WHERE {filter}"),
                    page_sql(table, filter, order, 0, PageRequest::DEFAULT_LIMIT),
                ])
                .await?;
            rows.push(Row { name, idem, naive });
        }
        Ok(rows)
    }

    pub(super) async fn deep_page(&self) -> Result<Row, String> {
        let Target {
            store, depth, deep, ..
        } = self.target;
        eprintln!("  keyset page {depth} rows deep");
        let deep_page = PageRequest::new(PageRequest::MAX_LIMIT, deep.clone());
        let everything = ClaimSearch::default();
        Ok(Row {
            name: "/keys newest activity, 1M rows deep",
            idem: time_idem(self.options.runs, || {
                store.claims().search_claims(&everything, &deep_page)
            })
            .await?,
            naive: self
                .naive(vec![page_sql(
                    "claims",
                    "true",
                    "last_delivery_at DESC, consumer DESC, idempotency_key DESC",
                    *depth,
                    PageRequest::MAX_LIMIT,
                )])
                .await?,
        })
    }

    pub(super) async fn key_page(&self) -> Result<Row, String> {
        eprintln!("  key page");
        let Target { store, sample, .. } = self.target;
        let consumer = ConsumerName::parse(sample.consumer.as_str()).map_err(|e| e.to_string())?;
        let key = IdempotencyKey::parse(sample.key.as_str()).map_err(|e| e.to_string())?;
        let (consumer, key) = (&consumer, &key);
        Ok(Row {
            name: "key page (all its reads)",
            idem: time_idem(self.options.runs, || {
                store
                    .claims()
                    .key_records(consumer, key, &idem_domain::Within::Every)
            })
            .await?,
            naive: Naive::None,
        })
    }

    /// Every chart's reads at a day and at four weeks.
    pub(super) async fn charts(&self) -> Result<Vec<Row>, String> {
        let store = &self.target.store;
        let metrics = idem_app::api::charts::CHART_METRICS
            .iter()
            .map(|m| format!("'{}'", m.name()))
            .collect::<Vec<_>>()
            .join(", ");
        let mut rows = Vec::new();
        for (name, range, interval, days) in [
            ("charts, 24h (every metric)", "24h", "15 minutes", 1),
            ("charts, 28d (every metric)", "28d", "6 hours", 28),
        ] {
            eprintln!("  {name}");
            let now = Utc::now();
            let idem = time_idem(self.options.runs, || {
                idem_app::api::charts::chart_reads(store, range, now)
            })
            .await?;
            let naive = self
                .naive(vec![format!(
                    "SELECT metric, date_bin('{interval}', minute, TIMESTAMPTZ '2000-01-01') AS t, \
                     bucket, sum(value) FROM consumer_metrics WHERE metric IN ({metrics}) \
                     AND minute >= now() - interval '{days} days' AND minute < now() \
                     GROUP BY 1, 2, 3"
                )])
                .await?;
            rows.push(Row { name, idem, naive });
        }
        // The same charts read and drawn (SVG), without the per-interval
        // cache the pages use: a chart's cost when its interval turns over.
        for (name, range) in [
            ("charts, 24h, read and drawn (cold)", "24h"),
            ("charts, 28d, read and drawn (cold)", "28d"),
        ] {
            eprintln!("  {name}");
            let now = Utc::now();
            let idem = time_idem(self.options.runs, || {
                idem_app::api::charts::charts_drawn(store, range, now)
            })
            .await?;
            rows.push(Row {
                name,
                idem,
                naive: Naive::None,
            });
        }
        Ok(rows)
    }
}
