use chrono::{DateTime, Utc};
use idem_domain::{CappedCount, Claim, DeadLetter, OutboxRow, Page};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// One page of a work list, with the list's (capped) size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListPage<T> {
    pub as_of: DateTime<Utc>,
    pub page: Page<T>,
    pub total: CappedCount,
}

/// One dead letter and the claim of its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetterDetail {
    pub as_of: DateTime<Utc>,
    pub dead_letter: DeadLetter,
    pub claim: Option<Claim>,
}

#[cfg(feature = "ssr")]
fn page_request(cursor: Option<String>) -> idem_store::PageRequest {
    idem_store::PageRequest::new(idem_store::PageRequest::DEFAULT_LIMIT, cursor)
}

/// Unknown outcomes, oldest first.
#[server(input = server_fn::codec::GetUrl)]
pub async fn list_unknown(cursor: Option<String>) -> Result<ListPage<Claim>, AppError> {
    use idem_domain::ClaimStatus;
    crate::ssr::serve(async move {
        let store = crate::ssr::state()?.store;
        Ok(ListPage {
            as_of: Utc::now(),
            page: store.unknown_claims(&page_request(cursor)).await?,
            total: store
                .count_claims(ClaimStatus::Unknown, super::COUNT_CAP)
                .await?,
        })
    })
    .await
}

/// Dead letters in one state (`open` by default), oldest first.
#[server(input = server_fn::codec::GetUrl)]
pub async fn list_dead_letters(
    state: Option<String>,
    cursor: Option<String>,
) -> Result<ListPage<DeadLetter>, AppError> {
    use idem_domain::DeadLetterState;
    crate::ssr::serve(async move {
        let state = match state.as_deref() {
            None | Some("") => DeadLetterState::Open,
            Some(state) => state
                .parse()
                .map_err(|e: idem_domain::UnknownValue| AppError::BadRequest(e.to_string()))?,
        };
        let store = crate::ssr::state()?.store;
        Ok(ListPage {
            as_of: Utc::now(),
            page: store.dead_letters(state, &page_request(cursor)).await?,
            total: store.count_dead_letters(state, super::COUNT_CAP).await?,
        })
    })
    .await
}

/// One dead letter (the id as it appears in the URL).
#[server(input = server_fn::codec::GetUrl)]
pub async fn get_dead_letter(id: String) -> Result<DeadLetterDetail, AppError> {
    crate::ssr::serve(async move {
        let id: i64 = id.parse().map_err(|_| {
            AppError::BadRequest(format!("“{id}” is not a dead letter id (a whole number)."))
        })?;
        let store = crate::ssr::state()?.store;
        let dead_letter = store
            .dead_letter(id)
            .await?
            .ok_or_else(|| AppError::NotFound(format!("There is no dead letter {id}.")))?;
        let claim = store.claim(&dead_letter.consumer, &dead_letter.key).await?;
        Ok(DeadLetterDetail {
            as_of: Utc::now(),
            dead_letter,
            claim,
        })
    })
    .await
}

/// Unpublished outbox rows, oldest first.
#[server(input = server_fn::codec::GetUrl)]
pub async fn list_outbox(cursor: Option<String>) -> Result<ListPage<OutboxRow>, AppError> {
    crate::ssr::serve(async move {
        let store = crate::ssr::state()?.store;
        Ok(ListPage {
            as_of: Utc::now(),
            page: store.unpublished_outbox(&page_request(cursor)).await?,
            total: store.count_unpublished_outbox(super::COUNT_CAP).await?,
        })
    })
    .await
}
