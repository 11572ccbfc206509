use idem_domain::{AuditEntry, Claim, DeadLetter, OutboxRow, story::Story};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// Everything Idem holds about one (consumer, key), and its story.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyStory {
    pub clock: Clock,
    pub consumer: String,
    pub key: String,
    pub claim: Option<Claim>,
    pub outbox: Vec<OutboxRow>,
    pub dead_letters: Vec<DeadLetter>,
    pub audit: Vec<AuditEntry>,
    pub story: Story,
    /// The signed-in person may act (operator or admin).
    pub can_act: bool,
    /// A fresh id for the action forms this page shows.
    pub action_id: String,
    /// The replay verdict of each open dead letter.
    pub verdicts: Vec<(i64, idem_domain::action::Verdict)>,
    /// Read from the read replica, which may lag behind an action just taken.
    pub from_replica: bool,
    /// Why no action can be taken on this consumer's keys from Idem (it is
    /// read through an adapter), if so.
    pub read_only: Option<String>,
    /// For a read-only consumer whose adapter writes resolutions back into
    /// its own table: the function that does (so resolving is offered).
    pub resolve_writes_back: Option<String>,
    /// How Idem's logs name this key, when they carry a fingerprint of it
    /// rather than the key (`IDEM_LOG_KEYS`).
    pub log_fingerprint: Option<String>,
    /// The consumer's provider contract, when the catalogue names it: the
    /// resolution form says what it means for a retry.
    pub contract: Option<idem_domain::ProviderContract>,
}

/// What a link carrying only a key finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KeyLookup {
    /// One consumer has the key: its story.
    One(Box<KeyStory>),
    /// Several consumers have it: choose one.
    Several {
        clock: Clock,
        key: String,
        claims: Vec<Claim>,
    },
}

/// One page of a key search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub clock: Clock,
    /// The claims whose key is exactly the query (first page only).
    pub exact: Vec<Claim>,
    pub claims: Vec<Claim>,
    pub next: Option<String>,
    /// Ordered by the status change (a small-status filter) rather than the last delivery.
    pub by_status_change: bool,
    /// For a prefix search: how many keys match (capped).
    pub matches: Option<idem_domain::CappedCount>,
    /// The query was a fingerprint from Idem's logs: `exact` is its key.
    pub from_fingerprint: bool,
    /// The claims whose provider reference is exactly the query (first page only).
    pub by_provider_ref: Vec<Claim>,
    /// The dead letters whose message id is exactly the query (first page only).
    pub by_message_id: Vec<DeadLetter>,
}

/// The filters of `/keys`, as typed (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyQuery {
    pub q: String,
    pub consumer: String,
    pub status: String,
    pub cursor: String,
    /// Page size; empty for the default, bounded by the store.
    pub limit: String,
}

/// The key pages' server-only code: one key's story, read whole.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use idem_domain::{
        Claim, ConsumerName, IdempotencyKey,
        story::{Sources, assemble},
    };

    use super::KeyStory;
    use crate::error::AppError;

    /// How many claims a key-only link lists.
    pub const MATCH_LIMIT: i64 = 50;

    /// What the person may see and do on a key page of `consumer`: their
    /// role (the audit rule), whether they may act on its key, and the
    /// consumers they may read.
    fn standing(
        consumer: &str,
    ) -> Result<(idem_domain::Role, bool, idem_domain::Within), AppError> {
        let user = crate::serving::current_user();
        let catalogue = crate::serving::state()?.catalogue;
        // The role held on this consumer (a viewer of it who operates
        // another team reads its audit rows as a viewer).
        let team = catalogue.get(consumer).map(|e| e.team.as_str());
        let role = user
            .as_ref()
            .and_then(|u| u.rights.role_on(team))
            .unwrap_or(idem_domain::Role::Viewer);
        let can_act = user.is_some_and(|u| {
            u.rights
                .check(&catalogue, consumer, idem_domain::Role::Operator)
                .is_ok()
        });
        Ok((
            role,
            can_act,
            crate::serving::within(idem_domain::Role::Viewer)?,
        ))
    }

    /// Everything `reader`'s database holds about `key` of `consumer`, and
    /// its story; `None` when it holds nothing.
    pub async fn story(
        reader: &crate::cache::Reader,
        consumer: &idem_domain::ConsumerName,
        key: &idem_domain::IdempotencyKey,
    ) -> Result<Option<KeyStory>, AppError> {
        let store = &reader.store;
        let (role, can_act, readable) = standing(consumer.as_str())?;
        // Another team's key reads as one nobody wrote; the keys sharing
        // its provider reference are those of the reader's consumers.
        let records = store.claims().key_records(consumer, key, &readable).await?;
        if records.is_empty() {
            return Ok(None);
        }
        let idem_store::KeyRecords {
            claim,
            shared_ref,
            outbox,
            dead_letters,
            audit,
        } = records;
        let clock = crate::serving::clock(chrono::Utc::now());
        let retention = crate::serving::state()?
            .claim_retention
            .of(consumer.as_str());
        let verdicts = dead_letters
            .iter()
            .filter(|d| d.state == idem_domain::DeadLetterState::Open)
            .map(|d| {
                (
                    d.id,
                    idem_domain::action::Verdict::of(claim.as_ref(), retention, clock.as_of),
                )
            })
            .collect();
        // The audit rule, as on /audit: what a viewer may read of each row.
        let audit: Vec<idem_domain::AuditEntry> =
            audit.into_iter().map(|a| a.as_seen_by(role)).collect();
        let story = assemble(
            Sources {
                claim: claim.as_ref(),
                outbox: &outbox,
                dead_letters: &dead_letters,
                audit: &audit,
                shared_ref: &shared_ref,
            },
            clock.as_of,
            &clock.zone,
        );
        let state = crate::serving::state()?;
        let read_only = state.read_only.reason(consumer.as_str());
        // A read-only consumer whose adapter writes resolutions back.
        let resolve_writes_back = match &read_only {
            Some(_) => {
                state
                    .store
                    .actions()
                    .resolve_write_back(consumer.as_str())
                    .await?
            }
            None => None,
        };
        state
            .log_keys
            .remember(&state.store, consumer.as_str(), key.as_str());
        let log_fingerprint = match state.log_keys.logged(consumer.as_str(), key.as_str()) {
            crate::fingerprint::Logged::Fingerprint(fingerprint) => Some(fingerprint),
            _ => None,
        };
        Ok(Some(KeyStory {
            clock,
            consumer: consumer.to_string(),
            key: key.to_string(),
            claim,
            outbox,
            dead_letters,
            audit,
            story,
            can_act,
            action_id: crate::serving::new_action_id(),
            verdicts,
            from_replica: reader.is_replica(),
            read_only,
            resolve_writes_back,
            log_fingerprint,
            contract: state.catalogue.get(consumer.as_str()).map(|e| e.contract),
        }))
    }

    /// The exact matches of a whole key as people quote it.
    #[derive(Default)]
    pub struct Quoted {
        /// Claims whose key it is.
        pub exact: Vec<Claim>,
        /// Claims whose provider reference it is.
        pub by_provider_ref: Vec<Claim>,
        /// Dead letters whose message id it is.
        pub by_message_id: Vec<idem_domain::DeadLetter>,
    }

    /// `q` matched whole as a key, a provider reference and a message id,
    /// each on its own index, narrowed to `consumer` and `status` when given
    /// (a dead letter has no claim status: with one, none is listed).
    pub async fn quoted(
        store: &idem_store::Store,
        q: &IdempotencyKey,
        consumer: Option<&ConsumerName>,
        status: Option<idem_domain::ClaimStatus>,
        within: &idem_domain::Within,
    ) -> Result<Quoted, AppError> {
        // The reader's scope, narrowed to the consumer asked for, is in each
        // statement (before its limit); the status is a filter on the few.
        let reach = within.narrowed_to(consumer);
        let wanted = |c: &Claim| status.is_none_or(|want| c.status == want);
        let claims = store.claims();
        let exact = claims.claims_with_key(q, MATCH_LIMIT, &reach).await?;
        let by_ref = claims
            .claims_by_provider_ref(q.as_str(), &reach, MATCH_LIMIT)
            .await?;
        let by_message_id = match status {
            None => {
                claims
                    .dead_letters_by_message_id(q.as_str(), &reach, MATCH_LIMIT)
                    .await?
            }
            Some(_) => Vec::new(),
        };
        Ok(Quoted {
            exact: exact.into_iter().filter(wanted).collect(),
            by_provider_ref: by_ref.into_iter().filter(wanted).collect(),
            by_message_id,
        })
    }

    /// What a search for a fingerprint from Idem's logs finds: its key's
    /// claims, if `q` is one that Idem logged.
    pub async fn fingerprint_search(q: &str) -> Result<Option<super::SearchResults>, AppError> {
        if !crate::fingerprint::looks_like(q) {
            return Ok(None);
        }
        let store = crate::serving::reader(&crate::serving::state()?).store;
        let readable = crate::serving::within(idem_domain::Role::Viewer)?;
        Ok(by_fingerprint(&store, q, &readable)
            .await?
            .map(|exact| super::SearchResults {
                clock: crate::serving::clock(chrono::Utc::now()),
                exact,
                claims: Vec::new(),
                next: None,
                by_status_change: false,
                matches: None,
                from_fingerprint: true,
                by_provider_ref: Vec::new(),
                by_message_id: Vec::new(),
            }))
    }

    /// The claims of the key a fingerprint from Idem's logs stands for, if
    /// Idem logged it.
    async fn by_fingerprint(
        store: &idem_store::Store,
        fingerprint: &str,
        within: &idem_domain::Within,
    ) -> Result<Option<Vec<idem_domain::Claim>>, AppError> {
        let Some((consumer, key)) = store.claims().key_by_fingerprint(fingerprint).await? else {
            return Ok(None);
        };
        let key = idem_domain::IdempotencyKey::parse(key)?;
        // A link naming no consumer was fingerprinted without one.
        let reach = match consumer.as_str() {
            "" => within.clone(),
            name => match ConsumerName::parse(name) {
                Ok(name) => within.narrowed_to(Some(&name)),
                Err(_) => return Ok(Some(Vec::new())),
            },
        };
        let claims = store
            .claims()
            .claims_with_key(&key, MATCH_LIMIT, &reach)
            .await?;
        // A fingerprint of another team's key reads as one never logged.
        Ok(Some(claims).filter(|c| !c.is_empty()))
    }
}

/// One key's story. Both arguments are URL path segments exactly as they
/// appear in the address bar (percent-encoded); they are decoded once, here.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_key_story(consumer: String, key: String) -> Result<KeyStory, AppError> {
    use idem_domain::{ConsumerName, IdempotencyKey};
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let consumer = ConsumerName::from_segment(&consumer)?;
        let key = IdempotencyKey::from_segment(&key)?;
        // Another team's key answers as a missing one (`story` reads in the
        // reader's scope).
        let reader = crate::serving::reader(&crate::serving::state()?);
        ssr::story(&reader, &consumer, &key).await?.ok_or_else(|| {
            AppError::NotFound(format!(
                "No consumer named “{consumer}” has a claim, outbox row or dead letter for the key “{key}”."
            ))
        })
    })
    .await
}

/// The key of a link that names no consumer (a path segment, as in
/// [`get_key_story`]).
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn lookup_key(key: String) -> Result<KeyLookup, AppError> {
    use idem_domain::IdempotencyKey;
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let key = IdempotencyKey::from_segment(&key)?;
        let reader = crate::serving::reader(&crate::serving::state()?);
        let readable = crate::serving::within(idem_domain::Role::Viewer)?;
        let mut claims = reader
            .store
            .claims()
            .claims_with_key(&key, ssr::MATCH_LIMIT, &readable)
            .await?;
        match claims.len() {
            0 if !readable.is_every() => Err(AppError::NotFound(format!(
                "No consumer of your teams has claimed the key “{key}”."
            ))),
            0 => Err(AppError::NotFound(format!(
                "No consumer has claimed the key “{key}”."
            ))),
            1 => {
                let claim = claims.remove(0);
                let consumer = idem_domain::ConsumerName::parse(claim.consumer)?;
                let state = crate::serving::state()?;
                state.log_keys.remember(&state.store, "", key.as_str());
                let story = ssr::story(&reader, &consumer, &key).await?;
                story.map(|s| KeyLookup::One(Box::new(s))).ok_or_else(|| {
                    AppError::NotFound(format!("The key “{key}” vanished while it was read."))
                })
            }
            _ => Ok({
                // The log of this request names the key without a consumer.
                let state = crate::serving::state()?;
                state.log_keys.remember(&state.store, "", key.as_str());
                KeyLookup::Several {
                    clock: crate::serving::clock(chrono::Utc::now()),
                    key: key.to_string(),
                    claims,
                }
            }),
        }
    })
    .await
}

/// Key search: exact and prefix (matched literally: `%` and `_` are ordinary
/// characters), filtered by consumer and status, newest activity first,
/// keyset-paginated.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn search_keys(query: KeyQuery) -> Result<SearchResults, AppError> {
    use idem_domain::{ClaimStatus, IdempotencyKey};
    use idem_store::{ClaimSearch, PageRequest, SearchOrder};

    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        // A fingerprint from Idem's logs finds the key it stands for.
        if let Some(found) = ssr::fingerprint_search(&query.q).await? {
            return Ok(found);
        }
        // A prefix is checked as a key would be; a whole key also lists
        // that key's exact matches.
        let whole_key = match query.q.as_str() {
            "" => None,
            q => Some(IdempotencyKey::parse(q)?),
        };
        let prefix = whole_key.as_ref().map(IdempotencyKey::to_string);
        let (consumer, within) =
            crate::api::ssr::scoped_consumer(Some(query.consumer.as_str())).await?;
        let status = match query.status.as_str() {
            "" => None,
            s => Some(
                s.parse::<ClaimStatus>()
                    .map_err(|e| AppError::BadRequest(e.to_string()))?,
            ),
        };
        let limit = match query.limit.as_str() {
            "" => PageRequest::DEFAULT_LIMIT,
            l => l.parse().map_err(|_| {
                AppError::BadRequest(format!(
                    "“{l}” is not a page size (a whole number up to {}).",
                    PageRequest::MAX_LIMIT
                ))
            })?,
        };
        let cursor = Some(query.cursor).filter(|c| !c.is_empty());
        let first_page = cursor.is_none();
        let store = crate::serving::reader(&crate::serving::state()?).store;
        let search = ClaimSearch {
            prefix: prefix.clone(),
            consumer: consumer.clone(),
            status,
            within: within.clone(),
            ..Default::default()
        };
        let found = store
            .claims()
            .search_claims(&search, &PageRequest::new(limit, cursor))
            .await?;
        // What support quotes: the key itself, a provider's reference, a
        // message id; each an exact match on its own index, first page only.
        let quoted = match (&whole_key, first_page) {
            (Some(key), true) => {
                ssr::quoted(&store, key, consumer.as_ref(), status, &within).await?
            }
            _ => ssr::Quoted::default(),
        };
        let ssr::Quoted {
            exact,
            by_provider_ref,
            by_message_id,
        } = quoted;
        Ok(SearchResults {
            clock: crate::serving::clock(chrono::Utc::now()),
            exact,
            claims: found.page.items,
            next: found.page.next,
            by_status_change: found.order == SearchOrder::StatusChange,
            matches: found.matches,
            from_fingerprint: false,
            by_provider_ref,
            by_message_id,
        })
    })
    .await
}
