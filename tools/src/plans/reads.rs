//! The reads `plans` measures, one family at a time: every dashboard read
//! Idem makes, against the sample key the database holds.

use idem_domain::{ClaimStatus, ConsumerName, DeadLetterState, IdempotencyKey};
use idem_store::{
    AuditFilter, ClaimSearch, DeadLetterFilter, PageRequest, Store, StoreError, StoreResult, Ts,
};

use super::{Measured, deep_cursor, measure, notices::Notices};

/// The newest claim, whose key page and searches are measured.
pub(super) struct SampleKey {
    pub(super) consumer: ConsumerName,
    pub(super) key: IdempotencyKey,
    pub(super) provider_ref: String,
    /// The key's first 12 characters, for a prefix search.
    pub(super) prefix: String,
}

/// Every dashboard read, measured one family at a time.
pub(super) struct Reads<'a> {
    pub(super) store: &'a Store,
    pub(super) notices: &'a Notices,
}

impl Reads<'_> {
    pub(super) async fn overview(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let every = idem_domain::Within::Every;
        let team = self.a_team().await?;
        Ok(vec![
            measure(
                notices,
                "overview: every count and list (one connection)",
                || store.lists().overview(5, 10_000, Ts::now(), &every),
            )
            .await?,
            measure(
                notices,
                "overview of a team's ten consumers (rights limited to a team)",
                || store.lists().overview(5, 10_000, Ts::now(), &team),
            )
            .await?,
        ])
    }

    /// Ten consumers, as a team a person's rights are limited to.
    async fn a_team(&self) -> StoreResult<idem_domain::Within> {
        let names = self
            .store
            .metrics()
            .consumers(10, &idem_domain::Within::Every)
            .await?;
        Ok(idem_domain::Within::Only(
            names
                .into_iter()
                .filter_map(|n| idem_domain::ConsumerName::parse(n).ok())
                .collect(),
        ))
    }

    /// The consumer table's reads: every consumer's open work, last hour
    /// and queue age, and the names of every consumer.
    pub(super) async fn consumer_table(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let to = Ts::now();
        let every = idem_domain::Within::Every;
        let team = self.a_team().await?;
        let names: Vec<idem_domain::ConsumerName> = store
            .metrics()
            .claiming_consumers(1_000, &every)
            .await?
            .into_iter()
            .filter_map(|n| idem_domain::ConsumerName::parse(n).ok())
            .collect();
        Ok(vec![
            measure(notices, "/consumers: open work per consumer", || {
                store
                    .lists()
                    .open_by_consumer(&names, idem_domain::CappedCount::DEFAULT_CAP)
            })
            .await?,
            measure(notices, "/consumers: every consumer with claims", || {
                store.metrics().claiming_consumers(1_000, &every)
            })
            .await?,
            measure(
                notices,
                "/consumers: a team's consumers with claims",
                || store.metrics().claiming_consumers(1_000, &team),
            )
            .await?,
            measure(notices, "/consumers: every consumer with metrics", || {
                store.metrics().consumers(1_000, &every)
            })
            .await?,
            measure(
                notices,
                "/consumers: every consumer with dead letters",
                || store.metrics().dead_lettering_consumers(1_000, &every),
            )
            .await?,
            measure(notices, "/consumers: the last hour per consumer", || {
                store.metrics().sums_by_consumer(
                    &[
                        idem_domain::Metric::Deliveries,
                        idem_domain::Metric::DuplicateClaims,
                    ],
                    to - chrono::TimeDelta::hours(1),
                    to,
                    &every,
                )
            })
            .await?,
            measure(notices, "/consumers: queue age per consumer", || {
                store.metrics().gauge_max_by_consumer(
                    idem_domain::Metric::QueueOldestAgeSeconds,
                    to - chrono::TimeDelta::minutes(5),
                    to,
                    &every,
                )
            })
            .await?,
        ])
    }

    /// The work lists' first pages, and pages as deep as a person could go.
    pub(super) async fn lists(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let (everywhere, letters, outbox) = (
            idem_store::Window::default(),
            DeadLetterFilter::default(),
            idem_store::OutboxFilter::default(),
        );
        let (everywhere, letters, outbox) = (&everywhere, &letters, &outbox);
        let unknown_deep = deep_cursor(25, |p| async move {
            store.lists().unknown_claims_in(&p, everywhere).await
        })
        .await?;
        let dead_deep = deep_cursor(10, |p| async move {
            store
                .lists()
                .dead_letters_in(DeadLetterState::Open, &p, letters)
                .await
        })
        .await?;
        let unknown_deep = PageRequest::new(PageRequest::DEFAULT_LIMIT, unknown_deep);
        let dead_deep = PageRequest::new(PageRequest::DEFAULT_LIMIT, dead_deep);
        let open = DeadLetterState::Open;
        // What a redrive takes has this shape too (the open ones, filtered).
        let rate_limited = DeadLetterFilter {
            error: Some("429".into()),
            ..DeadLetterFilter::default()
        };
        let every_letter = DeadLetterFilter::default();
        Ok(vec![
            measure(notices, "/unknown first page", || {
                store.lists().unknown_claims_in(&first, everywhere)
            })
            .await?,
            measure(notices, "/unknown page 5,000 rows deep", || {
                store.lists().unknown_claims_in(&unknown_deep, everywhere)
            })
            .await?,
            measure(notices, "/dead-letters first page", || {
                store.lists().dead_letters_in(open, &first, letters)
            })
            .await?,
            measure(notices, "/dead-letters page 2,000 rows deep", || {
                store.lists().dead_letters_in(open, &dead_deep, letters)
            })
            .await?,
            measure(
                notices,
                "/dead-letters whose error contains 429, first page",
                || store.lists().dead_letters_in(open, &first, &rate_limited),
            )
            .await?,
            measure(
                notices,
                "/dead-letters whose error contains 429, counted",
                || {
                    store
                        .lists()
                        .count_dead_letters_in(open, &rate_limited, 10_000)
                },
            )
            .await?,
            // A bulk discard's offer, and its start's read: the open letters
            // (a range of their partial index), each probing its claim by
            // primary key for `sent`; never a range of `claims`.
            measure(
                notices,
                "a bulk discard's offer (open letters whose key is sent)",
                || store.runs().discard_offer(&every_letter),
            )
            .await?,
            measure(notices, "/outbox first page", || {
                store.lists().unpublished_outbox_in(&first, outbox)
            })
            .await?,
            // The broker relay, every five seconds on each replica.
            measure(notices, "broker replays due (the relay)", || {
                store
                    .brokers()
                    .broker_replays_due(idem_store::Ts::now(), 20)
            })
            .await?,
        ])
    }

    pub(super) async fn key_page(&self, sample: &SampleKey) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let SampleKey {
            consumer,
            key,
            provider_ref,
            ..
        } = sample;
        let (every, team) = (idem_domain::Within::Every, self.a_team().await?);
        Ok(vec![
            measure(notices, "key page: every read (one connection)", || {
                store.claims().key_records(consumer, key, &every)
            })
            .await?,
            measure(notices, "key page: claim", || {
                store.claims().claim(consumer, key)
            })
            .await?,
            measure(notices, "key page: outbox rows", || {
                store.claims().outbox_for_key(consumer, key)
            })
            .await?,
            measure(notices, "key page: dead letters", || {
                store.claims().dead_letters_for_key(consumer, key)
            })
            .await?,
            measure(notices, "key page: audit entries", || {
                store.claims().audit_for_key(consumer, key)
            })
            .await?,
            measure(notices, "key page: same provider reference", || {
                store
                    .claims()
                    .claims_by_provider_ref(provider_ref, &idem_domain::Within::Every, 5)
            })
            .await?,
            measure(notices, "/keys/{key}: every consumer", || {
                store.claims().claims_with_key(key, 50, &every)
            })
            .await?,
            measure(notices, "/keys/{key}: a team's consumers", || {
                store.claims().claims_with_key(key, 50, &team)
            })
            .await?,
        ])
    }

    /// `/keys` with each kind of filter, and newest activity paged deep.
    pub(super) async fn searches(&self, sample: &SampleKey) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let browse_deep = deep_cursor(25, |p| async move {
            Ok(store
                .claims()
                .search_claims(&ClaimSearch::default(), &p)
                .await?
                .page)
        })
        .await?;
        let search =
            |prefix: Option<&str>, consumer: bool, status: Option<ClaimStatus>| ClaimSearch {
                prefix: prefix.map(str::to_owned),
                consumer: consumer.then(|| sample.consumer.clone()),
                status,
                ..Default::default()
            };
        let searches = [
            ("/keys newest activity", ClaimSearch::default()),
            (
                "/keys?q= (12-character prefix)",
                search(Some(&sample.prefix), false, None),
            ),
            (
                "/keys?q=renewal: (10,000+ matches, capped)",
                search(Some("renewal:"), false, None),
            ),
            ("/keys?consumer=", search(None, true, None)),
            (
                "/keys?status=unknown",
                search(None, false, Some(ClaimStatus::Unknown)),
            ),
            (
                "/keys?status=failed&consumer=",
                search(None, true, Some(ClaimStatus::Failed)),
            ),
        ];
        let mut rows = Vec::new();
        for (name, search) in searches {
            rows.push(
                measure(notices, name, || {
                    store.claims().search_claims(&search, &first)
                })
                .await?,
            );
        }
        let deep = PageRequest::new(PageRequest::DEFAULT_LIMIT, browse_deep);
        let everything = ClaimSearch::default();
        rows.push(
            measure(notices, "/keys newest activity, 5,000 rows deep", || {
                store.claims().search_claims(&everything, &deep)
            })
            .await?,
        );
        // What support quotes, matched whole on its own index.
        rows.push(
            measure(notices, "/keys?q= a provider reference", || {
                store.claims().claims_by_provider_ref(
                    &sample.provider_ref,
                    &idem_domain::Within::Every,
                    50,
                )
            })
            .await?,
        );
        rows.push(
            measure(notices, "/keys?q= a dead letter's message id", || {
                store
                    .claims()
                    .dead_letters_by_message_id("m-1", &idem_domain::Within::Every, 50)
            })
            .await?,
        );
        Ok(rows)
    }
}

impl Reads<'_> {
    /// The chart and SLO reads over thirty days of metrics, the audit log's
    /// first pages and sign-in's reads.
    pub(super) async fn charts_slos_audit_sign_in(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let now = chrono::Utc::now();
        let app = |e: idem_app::error::AppError| StoreError::Contract(e.to_string());
        let slos = idem_domain::slo::SloSet::default();
        let indicators: Vec<_> = slos.slos.iter().map(|s| &s.sli).collect();
        let to = Ts::from(now);
        let froms: Vec<Ts> = [30 * 24, 6, 1]
            .map(|hours| to - chrono::TimeDelta::hours(hours))
            .to_vec();
        let mut rows = vec![
            measure(notices, "charts, 24h: every metric", || async {
                idem_app::api::charts::chart_reads(store, "24h", now)
                    .await
                    .map_err(app)
            })
            .await?,
            measure(notices, "charts, 28d: every metric", || async {
                idem_app::api::charts::chart_reads(store, "28d", now)
                    .await
                    .map_err(app)
            })
            .await?,
            measure(notices, "SLO board: every indicator, 30d/6h/1h", || {
                store
                    .metrics()
                    .indicator_events_since(&indicators, &froms, to)
            })
            .await?,
            measure(notices, "SLO board per consumer, 30d/6h/1h", || async {
                let of = store
                    .metrics()
                    .consumers(1_000, &idem_domain::Within::Every)
                    .await?;
                store
                    .metrics()
                    .indicator_events_by_consumer(&indicators, &froms, to, &of)
                    .await
            })
            .await?,
            measure(
                notices,
                "/metrics: consumer counters of a settled minute",
                || {
                    let settled = (to - chrono::TimeDelta::minutes(5)).minute();
                    store
                        .metrics()
                        .counter_sums(settled - chrono::TimeDelta::minutes(1), settled)
                },
            )
            .await?,
        ];
        rows.extend(self.audit_and_sign_in(to).await?);
        Ok(rows)
    }

    /// The audit log's first pages and sign-in's reads.
    async fn audit_and_sign_in(&self, to: Ts) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let everyone = AuditFilter::default();
        let by_actor = AuditFilter {
            actor: Some("operator".into()),
            ..AuditFilter::default()
        };
        let recoveries = AuditFilter {
            from: Some(to - chrono::TimeDelta::days(1)),
            recoveries: true,
            ..AuditFilter::default()
        };
        let limits = idem_domain::sign_in::SignInLimits::default();
        let operator = idem_domain::AccountName::of_row("operator".to_owned());
        Ok(vec![
            measure(notices, "/audit first page", || {
                store.audit().audit_log(&everyone, &first)
            })
            .await?,
            measure(notices, "/audit by actor", || {
                store.audit().audit_log(&by_actor, &first)
            })
            .await?,
            measure(notices, "/audit recoveries of the last day", || {
                store.audit().audit_log(&recoveries, &first)
            })
            .await?,
            measure(notices, "sign-in: the account", || {
                store.people().user_by_name(&operator)
            })
            .await?,
            measure(notices, "sign-in: a known device", || {
                store.people().known_device(&limits, "operator", "0000", to)
            })
            .await?,
        ])
    }
}

impl Reads<'_> {
    /// `/checks`: every check's count in one statement, and each check's
    /// first page, against the default objective and retention.
    pub(super) async fn checks(&self) -> StoreResult<Vec<Measured>> {
        let (store, notices) = (self.store, self.notices);
        let limits = idem_store::CheckLimits {
            now: Ts::now(),
            unknown_objective: chrono::TimeDelta::minutes(15),
            claim_retention: idem_domain::ClaimRetention::days(30)
                .with("payments", chrono::TimeDelta::days(90)),
            within: idem_domain::Within::Every,
        };
        let for_a_team = idem_store::CheckLimits {
            within: self.a_team().await?,
            ..limits.clone()
        };
        let first = PageRequest::first(PageRequest::DEFAULT_LIMIT);
        let mut rows = vec![
            measure(
                notices,
                "/checks of a team's ten consumers: every count",
                || store.checks().count_check_findings(&for_a_team, 10_000),
            )
            .await?,
            measure(notices, "/checks: every count", || {
                store.checks().count_check_findings(&limits, 10_000)
            })
            .await?,
        ];
        for check in idem_domain::Check::ALL {
            let name = format!("/checks/{check} first page");
            rows.push(
                measure(notices, &name, || {
                    store.checks().check_findings(check, &limits, &first)
                })
                .await?,
            );
        }
        Ok(rows)
    }
}
