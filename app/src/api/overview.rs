use idem_domain::{CappedCount, Claim, ClaimStatus, DeadLetter, OutboxRow};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::ConsoleInfo;
use crate::{error::AppError, format::Clock};

/// Counts per claim status that needs a person (pending, failed, unknown),
/// what the providers confirmed in the last hour, and the oldest items that
/// need a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub clock: Clock,
    pub statuses: Vec<StatusCount>,
    /// Effects the providers confirmed in the hour before `clock` (the
    /// consumers' `sends` metric). `sent` claims are not counted: they are
    /// nearly the whole table.
    pub sends_last_hour: u64,
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
    use idem_domain::ClaimStatus;

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
        let now = Utc::now();
        let o = store
            .overview(ATTENTION_ROWS, COUNT_CAP, now.into())
            .await?;
        let statuses = [
            (ClaimStatus::Pending, o.pending),
            (ClaimStatus::Failed, o.failed),
            (ClaimStatus::Unknown, o.unknown),
        ]
        .into_iter()
        .map(|(status, count)| StatusCount { status, count })
        .collect();
        Ok(Overview {
            clock: Clock::utc(now),
            statuses,
            sends_last_hour: o.sends_last_hour,
            unknown: o.oldest_unknown,
            unknown_count: o.unknown,
            dead_letters: o.oldest_dead_letters,
            dead_letter_count: o.open_dead_letters,
            outbox: o.oldest_outbox,
            outbox_count: o.unpublished_outbox,
        })
    }
}
