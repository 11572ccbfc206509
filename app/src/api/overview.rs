use idem_domain::{CappedCount, Claim, DeadLetter, OutboxRow};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::ConsoleInfo;
use crate::{error::AppError, format::Clock};

/// What the last hour brought, what waits for a person (with counts), and
/// the oldest of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub clock: Clock,
    pub last_hour: LastHour,
    pub unknown: Vec<Claim>,
    pub unknown_count: CappedCount,
    pub dead_letters: Vec<DeadLetter>,
    pub dead_letter_count: CappedCount,
    pub outbox: Vec<OutboxRow>,
    pub outbox_count: CappedCount,
}

/// The hour before the overview's clock. Counted over an hour, not in all:
/// `sent` and `failed` claims stay for their retention and `pending` ones
/// pile up where consumers hold no lease, so totals read "10,000+" at any
/// real size (see `idem_store::OverviewRecords`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastHour {
    /// Effects the providers confirmed (the consumers' `sends` metric).
    pub sent: u64,
    /// Claims that failed in the hour.
    pub failed: CappedCount,
    /// Claims that went pending in the hour and still are.
    pub pending: CappedCount,
}

#[server(prefix = "/api/public", input = server_fn::codec::GetUrl)]
pub async fn get_console_info() -> Result<ConsoleInfo, AppError> {
    // Not through `serving::serve`: this never reads the database, and during
    // an outage it is what says so.
    let state = crate::serving::state()?;
    let zone = crate::serving::viewer_zone();
    Ok(ConsoleInfo {
        database_down_since: state.database.down_since().map(|at| zone.format(at)),
        zone: zone.name,
        user: crate::serving::current_user(),
        ..state.console
    })
}

#[server(prefix = "/api/public", input = server_fn::codec::GetUrl)]
pub async fn get_login_info() -> Result<super::LoginInfo, AppError> {
    crate::serving::serve(async {
        let state = crate::serving::state()?;
        let demo_accounts = if state.console.demo {
            crate::auth::DEMO_ACCOUNTS
                .iter()
                .map(|(name, _)| (*name).to_owned())
                .collect()
        } else {
            Vec::new()
        };
        let any_accounts = state.store.people().any_users().await?;
        let note = match crate::serving::cookie(super::LOGIN_NOTE_COOKIE).as_deref() {
            Some("failed") => Some(super::LoginNote::Failed),
            Some("throttled") => Some(super::LoginNote::Throttled),
            _ => None,
        };
        // Shown once: the page drawn again says nothing.
        if note.is_some()
            && let Some(response) = use_context::<leptos_axum::ResponseOptions>()
            && let Ok(clear) = http::HeaderValue::from_str(&format!(
                "{}=; Max-Age=0; Path=/login; HttpOnly; SameSite=Lax",
                super::LOGIN_NOTE_COOKIE
            ))
        {
            response.append_header(http::header::SET_COOKIE, clear);
        }
        Ok(super::LoginInfo {
            demo_accounts,
            any_accounts,
            password_login: state.password_login,
            oidc_name: state.oidc_name.clone(),
            note,
        })
    })
    .await
}

#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_overview() -> Result<Overview, AppError> {
    crate::serving::serve(async {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let within = crate::serving::within(idem_domain::Role::Viewer)?;
        let overview = ssr::load_overview(&crate::serving::state()?, within).await?;
        Ok(Overview {
            clock: crate::serving::clock(overview.clock.as_of),
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

    use super::{LastHour, Overview};
    use crate::{
        api::{ATTENTION_ROWS, COUNT_CAP},
        cache::ReadKey,
        error::AppError,
        format::Clock,
    };

    /// The overview's reads (clock in UTC) of the consumers `within`
    /// allows, shared by every viewer who may see the same consumers (and
    /// by `/metrics`, every consumer) for the read cache's lifetime.
    pub async fn load_overview(
        state: &crate::serving::AppState,
        within: idem_domain::Within,
    ) -> Result<Overview, AppError> {
        let key = ReadKey::Overview {
            within: within.clone(),
        };
        crate::serving::reader(state)
            .cached(
                key,
                |store| async move { read_overview(&store, &within).await },
            )
            .await
    }

    /// The overview's reads themselves, uncached (what `idem-tools bench` times).
    pub async fn read_overview(
        store: &idem_store::Store,
        within: &idem_domain::Within,
    ) -> Result<Overview, AppError> {
        let now = Utc::now();
        let o = store
            .lists()
            .overview(ATTENTION_ROWS, COUNT_CAP, now.into(), within)
            .await?;
        Ok(Overview {
            clock: Clock::utc(now),
            last_hour: LastHour {
                sent: o.sends_last_hour,
                failed: o.failed_last_hour,
                pending: o.pending_last_hour,
            },
            unknown: o.oldest_unknown,
            unknown_count: o.unknown,
            dead_letters: o.oldest_dead_letters,
            dead_letter_count: o.open_dead_letters,
            outbox: o.oldest_outbox,
            outbox_count: o.unpublished_outbox,
        })
    }
}
