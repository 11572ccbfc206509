use chrono::{DateTime, Utc};
use idem_domain::{Claim, DeadLetter, OutboxRow};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// Everything Idem holds about one (consumer, key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyStory {
    pub as_of: DateTime<Utc>,
    pub consumer: String,
    pub key: String,
    pub claim: Option<Claim>,
    pub outbox: Vec<OutboxRow>,
    pub dead_letters: Vec<DeadLetter>,
}

/// What a link carrying only a key finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KeyLookup {
    /// One consumer has the key: its story.
    One(Box<KeyStory>),
    /// Several consumers have it: choose one.
    Several { key: String, claims: Vec<Claim> },
}

/// Claims whose key equals or starts with the query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub as_of: DateTime<Utc>,
    pub query: String,
    pub claims: Vec<Claim>,
    /// More claims match than are shown.
    pub truncated: bool,
}

/// How many claims a key-only link or a search lists.
#[cfg(feature = "ssr")]
const MATCH_LIMIT: i64 = 50;

#[cfg(feature = "ssr")]
async fn story(
    store: &idem_store::Store,
    consumer: String,
    key: String,
) -> Result<Option<KeyStory>, AppError> {
    let claim = store.claim(&consumer, &key).await?;
    let outbox = store.outbox_for_key(&consumer, &key).await?;
    let dead_letters = store.dead_letters_for_key(&consumer, &key).await?;
    if claim.is_none() && outbox.is_empty() && dead_letters.is_empty() {
        return Ok(None);
    }
    Ok(Some(KeyStory {
        as_of: Utc::now(),
        consumer,
        key,
        claim,
        outbox,
        dead_letters,
    }))
}

/// One key's story. Both arguments are URL path segments exactly as they
/// appear in the address bar (percent-encoded); they are decoded once, here.
#[server(input = server_fn::codec::GetUrl)]
pub async fn get_key_story(consumer: String, key: String) -> Result<KeyStory, AppError> {
    use idem_domain::{ConsumerName, IdempotencyKey};
    crate::ssr::serve(async move {
        let consumer = ConsumerName::from_segment(&consumer)?;
        let key = IdempotencyKey::from_segment(&key)?;
        let store = crate::ssr::state()?.store;
        story(&store, consumer.to_string(), key.to_string()).await?.ok_or_else(|| {
            AppError::NotFound(format!("No consumer named “{consumer}” has a claim, outbox row or dead letter for the key “{key}”."))
        })
    })
    .await
}

/// The key of a link that names no consumer (a path segment, as in
/// [`get_key_story`]).
#[server(input = server_fn::codec::GetUrl)]
pub async fn lookup_key(key: String) -> Result<KeyLookup, AppError> {
    use idem_domain::IdempotencyKey;
    crate::ssr::serve(async move {
        let key = IdempotencyKey::from_segment(&key)?;
        let store = crate::ssr::state()?.store;
        let mut claims = store.claims_with_key(key.as_str(), MATCH_LIMIT).await?;
        match claims.len() {
            0 => Err(AppError::NotFound(format!(
                "No consumer has claimed the key “{key}”."
            ))),
            1 => {
                let claim = claims.remove(0);
                let story = story(&store, claim.consumer, claim.key).await?;
                story.map(|s| KeyLookup::One(Box::new(s))).ok_or_else(|| {
                    AppError::NotFound(format!("The key “{key}” vanished while it was read."))
                })
            }
            _ => Ok(KeyLookup::Several {
                key: key.to_string(),
                claims,
            }),
        }
    })
    .await
}

/// Exact and prefix search over keys (the query is matched literally: `%`
/// and `_` are ordinary characters).
#[server(input = server_fn::codec::GetUrl)]
pub async fn search_keys(query: String) -> Result<SearchResults, AppError> {
    use idem_domain::IdempotencyKey;
    crate::ssr::serve(async move {
        let prefix = IdempotencyKey::parse(query)?;
        let store = crate::ssr::state()?.store;
        let mut claims = store
            .claims_with_key_prefix(prefix.as_str(), MATCH_LIMIT + 1)
            .await?;
        let truncated = claims.len() as i64 > MATCH_LIMIT;
        claims.truncate(MATCH_LIMIT as usize);
        Ok(SearchResults {
            as_of: Utc::now(),
            query: prefix.to_string(),
            claims,
            truncated,
        })
    })
    .await
}
