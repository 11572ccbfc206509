//! `/checks`: the fleet-wide consistency checks, their counts and one
//! check's findings a page at a time.

use idem_domain::{CappedCount, Check, Finding, Page};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// How many findings one check has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CheckCount {
    pub check: Check,
    pub count: CappedCount,
}

/// Every check's count and, when one is picked, a page of its findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checks {
    pub clock: Clock,
    pub counts: Vec<CheckCount>,
    pub findings: Option<(Check, Page<Finding>)>,
    /// What the checks measure against: the unknown-outcome objective and
    /// the claim retention.
    pub objective_seconds: f64,
    /// The claim retention in words: `30 days; payments 90 days`.
    pub retention: String,
    /// For an operator: the bulk actions the picked check's findings offer.
    #[serde(default)]
    pub bulk: Option<BulkForms>,
}

/// The bulk actions a check's page offers an operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BulkForms {
    /// A fresh id for the forms.
    pub action_id: String,
    /// Dead letters whose key is already sent: what a bulk discard takes
    /// (the oldest 500 of those the person operates).
    pub discard: Option<crate::api::RedriveForm>,
    /// Unknown outcomes (or abandoned leases): the findings shown that the
    /// person may resolve, as the keys the resolve form carries, each at
    /// the version shown.
    pub resolve: Option<ResolveForm>,
}

/// The findings a bulk resolve of the page takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolveForm {
    /// The check whose findings they are.
    pub check: Check,
    /// How many it takes, of how many the page shows (only those of
    /// consumers the person operates and Idem may resolve).
    pub count: usize,
    pub of: usize,
    /// The keys as JSON (`[{consumer, key, version, provider_ref}]`).
    pub keys: String,
}

/// The checks' counts; with `check` (its slug), one page of its findings.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_checks(check: Option<String>, cursor: Option<String>) -> Result<Checks, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let state = crate::serving::state()?;
        let check = check
            .filter(|c| !c.is_empty())
            .map(|slug| {
                Check::from_slug(&slug).ok_or_else(|| {
                    AppError::NotFound(format!("There is no check called “{slug}”."))
                })
            })
            .transpose()?;
        let within = crate::serving::within(idem_domain::Role::Viewer)?;
        let retention = ssr::retention_words(&state.claim_retention, &within);
        let (clock, counts) = ssr::load_counts(&state, within.clone()).await?;
        let findings = match check {
            Some(check) => Some((
                check,
                ssr::load_findings(&state, check, cursor, within).await?,
            )),
            None => None,
        };
        let bulk = match &findings {
            Some((check, page)) => ssr::bulk_forms(*check, page).await?,
            None => None,
        };
        Ok(Checks {
            clock: crate::serving::clock(clock.as_of),
            counts,
            findings,
            objective_seconds: crate::api::ssr::unknown_objective_seconds(&state.slos),
            retention,
            bulk,
        })
    })
    .await
}

#[cfg(feature = "ssr")]
pub use ssr::load_counts as load_check_counts;

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use chrono::{TimeDelta, Utc};
    use idem_domain::{Check, Finding, Page, Within};
    use idem_store::CheckLimits;
    #[allow(unused_imports)]
    use leptos::prelude::*;

    use super::CheckCount;
    use crate::{
        api::COUNT_CAP, cache::ReadKey, error::AppError, format::Clock, serving::AppState,
    };

    /// `30 days; payments 90 days`: the horizon, then each consumer's own
    /// (of the consumers `within` allows).
    pub fn retention_words(retention: &idem_domain::ClaimRetention, within: &Within) -> String {
        let days = |d: TimeDelta| format!("{} days", d.num_days());
        std::iter::once(days(retention.default_horizon()))
            .chain(
                retention
                    .overrides()
                    .filter(|(c, _)| within.allows(c))
                    .map(|(c, d)| format!("{c} {}", days(d))),
            )
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// What the checks measure against now, from the settings in force.
    /// What the checks measure against now, from the settings in force,
    /// over the consumers the person may see.
    fn limits(state: &AppState, within: Within) -> CheckLimits {
        let objective = crate::api::ssr::unknown_objective_seconds(&state.slos);
        CheckLimits {
            now: Utc::now().into(),
            unknown_objective: TimeDelta::milliseconds((objective * 1000.0) as i64),
            claim_retention: state.claim_retention.clone(),
            within,
        }
    }

    /// Every check's count over the consumers `within` allows (through the
    /// short-lived read cache), and when they were read.
    pub async fn load_counts(
        state: &AppState,
        within: Within,
    ) -> Result<(Clock, Vec<CheckCount>), AppError> {
        let limits = limits(state, within);
        let key = ReadKey::CheckCounts {
            within: limits.within.clone(),
        };
        crate::serving::reader(state)
            .cached(key, |store| async move {
                let counts = store
                    .checks()
                    .count_check_findings(&limits, COUNT_CAP)
                    .await?;
                let counts = counts
                    .into_iter()
                    .map(|(check, count)| CheckCount { check, count })
                    .collect();
                Ok::<_, AppError>((Clock::utc(limits.now.0), counts))
            })
            .await
    }

    /// The bulk actions `check`'s page offers, for an operator: a discard
    /// of the dead letters already sent (read for this page alone, from the
    /// primary: the offer is what starting compares with), or a resolve of
    /// the unknown outcomes `page` shows on consumers they operate.
    pub async fn bulk_forms(
        check: Check,
        page: &Page<Finding>,
    ) -> Result<Option<super::BulkForms>, AppError> {
        let Some(user) = crate::serving::current_user() else {
            return Ok(None);
        };
        if !user.role.includes(idem_domain::Role::Operator) {
            return Ok(None);
        }
        let state = crate::serving::state()?;
        let (discard, resolve) = match check {
            Check::DeadLetterAlreadySent => {
                let listed = crate::serving::within(idem_domain::Role::Viewer)?;
                let selection = crate::api::bulk::ssr::discard_selection(None).await?;
                let offer = state.store.runs().discard_offer(&selection).await?;
                let only_of = match &selection.window.within {
                    Within::Only(names) if selection.window.within != listed => {
                        Some(names.iter().map(ToString::to_string).collect())
                    }
                    _ => None,
                };
                let form = (offer.count > 0).then(|| crate::api::RedriveForm {
                    count: offer.count,
                    offer: offer.token(),
                    action_id: crate::serving::new_action_id(),
                    only_of,
                    except: selection.except.iter().map(ToString::to_string).collect(),
                });
                (form, None)
            }
            Check::UnknownPastObjective | Check::AbandonedLease => {
                let keys: Vec<idem_domain::BulkKey> = page
                    .items
                    .iter()
                    .filter(|f| {
                        user.rights
                            .check(&state.catalogue, &f.consumer, idem_domain::Role::Operator)
                            .is_ok()
                            && state.read_only.reason(&f.consumer).is_none()
                    })
                    .filter_map(|f| {
                        Some(idem_domain::BulkKey {
                            consumer: idem_domain::ConsumerName::parse(f.consumer.as_str()).ok()?,
                            key: idem_domain::IdempotencyKey::parse(f.key.as_str()).ok()?,
                            version: Some(f.version?),
                            provider_ref: None,
                        })
                    })
                    .collect();
                let form = (!keys.is_empty()).then(|| super::ResolveForm {
                    check,
                    count: keys.len(),
                    of: page.items.len(),
                    keys: serde_json::to_string(&keys).unwrap_or_default(),
                });
                (None, form)
            }
            _ => (None, None),
        };
        Ok(Some(super::BulkForms {
            action_id: crate::serving::new_action_id(),
            discard,
            resolve,
        }))
    }

    /// One page of a check's findings.
    pub async fn load_findings(
        state: &AppState,
        check: Check,
        cursor: Option<String>,
        within: Within,
    ) -> Result<Page<Finding>, AppError> {
        let limits = limits(state, within);
        let key = ReadKey::CheckFindings {
            check,
            cursor: cursor.clone(),
            within: limits.within.clone(),
        };
        crate::serving::reader(state)
            .cached(key, |store| async move {
                let page = crate::api::lists::ssr::page_request(cursor);
                Ok::<_, AppError>(store.checks().check_findings(check, &limits, &page).await?)
            })
            .await
    }
}
