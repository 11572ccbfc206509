use chrono::{DateTime, Utc};
use idem_domain::{CappedCount, Claim, ClaimStatus, DeadLetter, OutboxRow};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use super::ConsoleInfo;
use crate::error::AppError;

/// Counts per claim status and the oldest items that need a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    pub as_of: DateTime<Utc>,
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

#[server(input = server_fn::codec::GetUrl)]
pub async fn get_console_info() -> Result<ConsoleInfo, AppError> {
    crate::ssr::serve(async { Ok(crate::ssr::state()?.console) }).await
}

#[server(input = server_fn::codec::GetUrl)]
pub async fn get_overview() -> Result<Overview, AppError> {
    use idem_domain::DeadLetterState;
    use idem_store::PageRequest;

    use super::{ATTENTION_ROWS, COUNT_CAP};

    crate::ssr::serve(async {
        let store = crate::ssr::state()?.store;
        let as_of = Utc::now();
        let first = PageRequest::first(ATTENTION_ROWS);
        let mut statuses = Vec::with_capacity(ClaimStatus::ALL.len());
        for status in ClaimStatus::ALL {
            let count = store.count_claims(*status, COUNT_CAP).await?;
            statuses.push(StatusCount {
                status: *status,
                count,
            });
        }
        let unknown_count = statuses
            .iter()
            .find(|s| s.status == ClaimStatus::Unknown)
            .map(|s| s.count)
            .unwrap_or(CappedCount {
                value: 0,
                capped: false,
            });
        Ok(Overview {
            as_of,
            statuses,
            unknown: store.unknown_claims(&first).await?.items,
            unknown_count,
            dead_letters: store
                .dead_letters(DeadLetterState::Open, &first)
                .await?
                .items,
            dead_letter_count: store
                .count_dead_letters(DeadLetterState::Open, COUNT_CAP)
                .await?,
            outbox: store.unpublished_outbox(&first).await?.items,
            outbox_count: store.count_unpublished_outbox(COUNT_CAP).await?,
        })
    })
    .await
}
