use idem_domain::{CappedCount, Claim, ClaimStatus, DeadLetter, OutboxRow};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::ConsoleInfo;
use crate::{error::AppError, format::Clock};

/// Counts per claim status and the oldest items that need a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub clock: Clock,
    pub statuses: Vec<StatusCount>,
    pub unknown: Vec<Claim>,
    pub unknown_count: CappedCount,
    pub dead_letters: Vec<DeadLetter>,
    pub dead_letter_count: CappedCount,
    pub outbox: Vec<OutboxRow>,
    pub outbox_count: CappedCount,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusCount {
    pub status: ClaimStatus,
    pub count: CappedCount,
}

#[server(prefix = "/api/public", input = server_fn::codec::GetUrl)]
pub async fn get_console_info() -> Result<ConsoleInfo, AppError> {
    // Not through `ssr::serve`: this never reads the database, and during
    // an outage it is what says so.
    let state = crate::ssr::state()?;
    let zone = crate::ssr::viewer_zone();
    Ok(ConsoleInfo {
        database_down_since: state.database.down_since().map(|at| zone.format(at)),
        zone: zone.name,
        user: crate::ssr::current_user(),
        ..state.console
    })
}

#[server(prefix = "/api/public", input = server_fn::codec::GetUrl)]
pub async fn get_login_info() -> Result<super::LoginInfo, AppError> {
    crate::ssr::serve(async {
        let state = crate::ssr::state()?;
        let demo_accounts = if state.console.demo {
            idem_domain::Role::ALL
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect()
        } else {
            Vec::new()
        };
        let any_accounts = !state.store.users().await?.is_empty();
        Ok(super::LoginInfo {
            demo_accounts,
            any_accounts,
            password_login: state.password_login,
        })
    })
    .await
}

#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_overview() -> Result<Overview, AppError> {
    crate::ssr::serve(async {
        crate::ssr::require(idem_domain::Role::Viewer)?;
        let overview = ssr::load_overview(&crate::ssr::state()?).await?;
        Ok(Overview {
            clock: crate::ssr::clock(overview.clock.as_of),
            ..overview
        })
    })
    .await
}

#[cfg(feature = "ssr")]
pub use ssr::{load_overview, read_overview};

/// The overview's server-only code: its reads, cached and uncached.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use chrono::Utc;
    use idem_domain::{CappedCount, ClaimStatus, DeadLetterState};
    use idem_store::PageRequest;

    use super::{Overview, StatusCount};
    use crate::{
        api::{ATTENTION_ROWS, COUNT_CAP},
        cache::ReadKey,
        error::AppError,
        format::Clock,
    };

    /// The overview's reads (clock in UTC), shared by every viewer and by
    /// `/metrics` for the read cache's lifetime.
    pub async fn load_overview(state: &crate::ssr::AppState) -> Result<Overview, AppError> {
        crate::ssr::reader(state)
            .cached(ReadKey::Overview, |store| async move {
                read_overview(&store).await
            })
            .await
    }

    /// The overview's reads themselves, uncached (what `idem-tools bench` times).
    pub async fn read_overview(store: &idem_store::Store) -> Result<Overview, AppError> {
        let first = PageRequest::first(ATTENTION_ROWS);
        let count = |status: ClaimStatus| async move {
            let count = store.count_claims(status, COUNT_CAP).await?;
            Ok::<_, AppError>(StatusCount { status, count })
        };
        // Three connections at once, each with about a third of the work: the
        // capped counts dominate, and Postgres runs them on separate cores.
        let (counts_a, counts_b, lists) = tokio::try_join!(
            async {
                Ok::<_, AppError>([
                    count(ClaimStatus::Pending).await?,
                    count(ClaimStatus::Sent).await?,
                ])
            },
            async {
                Ok::<_, AppError>([
                    count(ClaimStatus::Failed).await?,
                    count(ClaimStatus::Unknown).await?,
                ])
            },
            async {
                Ok::<_, AppError>((
                    store.unknown_claims(&first).await?.items,
                    store
                        .dead_letters(DeadLetterState::Open, &first)
                        .await?
                        .items,
                    store
                        .count_dead_letters(DeadLetterState::Open, COUNT_CAP)
                        .await?,
                    store.unpublished_outbox(&first).await?.items,
                    store.count_unpublished_outbox(COUNT_CAP).await?,
                ))
            },
        )?;
        let mut statuses: Vec<StatusCount> = counts_a.into_iter().chain(counts_b).collect();
        statuses.sort_by_key(|s| ClaimStatus::ALL.iter().position(|x| *x == s.status));
        let unknown_count = statuses
            .iter()
            .find(|s| s.status == ClaimStatus::Unknown)
            .map_or(
                CappedCount {
                    value: 0,
                    capped: false,
                },
                |s| s.count,
            );
        let (unknown, dead_letters, dead_letter_count, outbox, outbox_count) = lists;
        Ok(Overview {
            clock: Clock::utc(Utc::now()),
            statuses,
            unknown,
            unknown_count,
            dead_letters,
            dead_letter_count,
            outbox,
            outbox_count,
        })
    }
}
