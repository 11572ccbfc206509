use idem_domain::{CappedCount, Claim, DeadLetter, OutboxRow, Page};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// One page of a work list, with the list's (capped) size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListPage<T> {
    pub clock: Clock,
    pub page: Page<T>,
    pub total: CappedCount,
}

/// One page of unknown outcomes, and the objective they are held to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnknownList {
    pub list: ListPage<Claim>,
    /// How soon the SLOs in force want an unknown outcome resolved, in seconds.
    pub objective_seconds: f64,
}

/// One page of dead letters, and whether the person may redrive them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetterList {
    pub list: ListPage<DeadLetter>,
    /// The redrive form, for an operator looking at open letters.
    pub redrive: Option<RedriveForm>,
}

/// What the redrive form offers: read for this page alone (never from a
/// cache someone else filled), so its button names what it will replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveForm {
    /// How many letters it takes (the oldest 500 at most).
    pub count: i64,
    /// The offer's token, which the form sends back (see
    /// `idem_domain::RedriveOffer`).
    pub offer: String,
    /// A fresh id for the form.
    pub action_id: String,
    /// When it takes fewer consumers than the list shows (the person reads
    /// more teams than they operate): the consumers it takes.
    #[serde(default)]
    pub only_of: Option<Vec<String>>,
    /// Consumers it leaves out, being read through an adapter (a bulk
    /// discard over every consumer).
    #[serde(default)]
    pub except: Vec<String>,
}

/// One dead letter and the claim of its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetterDetail {
    pub clock: Clock,
    pub dead_letter: DeadLetter,
    pub claim: Option<Claim>,
    pub verdict: idem_domain::action::Verdict,
    /// The signed-in person may act (operator or admin).
    pub can_act: bool,
    /// A fresh id for the action forms this page shows.
    pub action_id: String,
    /// Read from the read replica, which may lag behind an action just taken.
    pub from_replica: bool,
    /// Why no action can be taken on it from Idem (its consumer is read
    /// through an adapter), if so.
    pub read_only: Option<String>,
    /// A broker's dead letter that was replayed: how Idem's publication of
    /// the replay stands.
    pub publication: Option<idem_domain::ReplayPublication>,
}

/// The lists' server-only code: the part of a list the address asks for,
/// and one page of it through the shared read cache.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use idem_domain::{CappedCount, Page};

    use super::ListPage;
    use crate::{cache::ReadKey, error::AppError, format::Clock};

    /// Reads one page of a list through the shared read cache, then shows it in
    /// the viewer's zone.
    pub async fn cached_page<T, F, Fut>(key: ReadKey, load: F) -> Result<ListPage<T>, AppError>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce(idem_store::Store) -> Fut,
        Fut: Future<Output = Result<(Page<T>, CappedCount), AppError>>,
    {
        let page = crate::serving::reader(&crate::serving::state()?)
            .cached(key, |store| async move {
                let (page, total) = load(store).await?;
                Ok::<_, AppError>(ListPage {
                    clock: Clock::utc(chrono::Utc::now()),
                    page,
                    total,
                })
            })
            .await?;
        Ok(ListPage {
            clock: crate::serving::clock(page.clock.as_of),
            ..page
        })
    }

    /// The part of a list the address asks for (`from`, `to`, `consumer`),
    /// checked: times must parse and a consumer name must be valid — and
    /// the person's (else 403 naming its team); with none named, only the
    /// consumers the person may see.
    pub async fn window(
        from: Option<String>,
        to: Option<String>,
        consumer: Option<String>,
    ) -> Result<idem_store::Window, AppError> {
        let at = |text: Option<String>| -> Result<Option<idem_store::Ts>, AppError> {
            match text.filter(|t| !t.is_empty()) {
                Some(text) => Ok(Some(crate::api::ssr::instant(&text)?.into())),
                None => Ok(None),
            }
        };
        let (consumer, within) = crate::api::ssr::scoped_consumer(consumer.as_deref()).await?;
        Ok(idem_store::Window {
            from: at(from)?,
            to: at(to)?,
            consumer,
            within,
        })
    }

    /// The longest error text a dead-letter filter takes, in bytes.
    const MAX_ERROR_FILTER_BYTES: usize = 256;

    /// The dead letters the address asks for: a [`window`] and a text the
    /// last error contains (trimmed; without control characters).
    pub async fn dead_letter_filter(
        from: Option<String>,
        to: Option<String>,
        consumer: Option<String>,
        error: Option<String>,
    ) -> Result<idem_store::DeadLetterFilter, AppError> {
        let error = error.map(|e| e.trim().to_owned()).filter(|e| !e.is_empty());
        if let Some(error) = &error
            && (error.len() > MAX_ERROR_FILTER_BYTES || error.chars().any(char::is_control))
        {
            return Err(AppError::BadRequest(format!(
                "An error filter is one line of at most {MAX_ERROR_FILTER_BYTES} bytes."
            )));
        }
        Ok(idem_store::DeadLetterFilter {
            window: window(from, to, consumer).await?,
            error,
            except: Vec::new(),
        })
    }

    /// The dead letters of `selection` that the person may act on: its one
    /// consumer if they operate it (else 403 naming its team), or — with
    /// none named — only the consumers they operate, which may be fewer
    /// than those they read.
    pub async fn to_act_on(
        mut selection: idem_store::DeadLetterFilter,
    ) -> Result<idem_store::DeadLetterFilter, AppError> {
        let operator = idem_domain::Role::Operator;
        match &selection.window.consumer {
            Some(consumer) => {
                crate::serving::require_on(consumer.as_str(), operator).await?;
            }
            None => selection.window.within = crate::serving::within(operator)?,
        }
        Ok(selection)
    }

    /// The longest topic name a filter takes, in bytes.
    const MAX_TOPIC_BYTES: usize = 256;

    /// The outbox filter the address asks for (`consumer`, `topic`),
    /// checked: a valid consumer name, a topic without control characters.
    pub async fn outbox_filter(
        consumer: Option<String>,
        topic: Option<String>,
    ) -> Result<idem_store::OutboxFilter, AppError> {
        let topic = topic.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());
        if let Some(topic) = &topic
            && (topic.len() > MAX_TOPIC_BYTES || topic.chars().any(char::is_control))
        {
            return Err(AppError::BadRequest(format!(
                "A topic is at most {MAX_TOPIC_BYTES} bytes long, without line breaks or other control characters."
            )));
        }
        let (consumer, within) = crate::api::ssr::scoped_consumer(consumer.as_deref()).await?;
        Ok(idem_store::OutboxFilter {
            consumer,
            topic,
            within,
        })
    }

    pub fn page_request(cursor: Option<String>) -> idem_store::PageRequest {
        idem_store::PageRequest::new(idem_store::PageRequest::DEFAULT_LIMIT, cursor)
    }
}

/// Unknown outcomes, oldest first; with `from`/`to`/`consumer`, only those
/// that became unknown in that span for that consumer. With them, the
/// objective the SLOs in force hold them to.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn list_unknown(
    cursor: Option<String>,
    from: Option<String>,
    to: Option<String>,
    consumer: Option<String>,
) -> Result<UnknownList, AppError> {
    use idem_domain::ClaimStatus;
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let window = ssr::window(from, to, consumer).await?;
        let key = crate::cache::ReadKey::Unknown {
            cursor: cursor.clone(),
            window: window.clone(),
        };
        let list = ssr::cached_page(key, |store| async move {
            let page = store
                .lists()
                .unknown_claims_in(&ssr::page_request(cursor), &window)
                .await?;
            let total = if window.is_all() {
                store
                    .lists()
                    .count_claims(ClaimStatus::Unknown, super::COUNT_CAP)
                    .await?
            } else {
                store
                    .lists()
                    .count_unknown_in(&window, super::COUNT_CAP)
                    .await?
            };
            Ok((page, total))
        })
        .await?;
        let slos = crate::serving::state()?.slos;
        Ok(UnknownList {
            list,
            objective_seconds: super::ssr::unknown_objective_seconds(&slos),
        })
    })
    .await
}

/// Dead letters in one state (`open` by default), oldest first; with
/// `from`/`to`/`consumer`/`error`, only those dead-lettered in that span for
/// that consumer whose last error contains that text.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn list_dead_letters(
    state: Option<String>,
    cursor: Option<String>,
    from: Option<String>,
    to: Option<String>,
    consumer: Option<String>,
    #[server(default)] error: Option<String>,
) -> Result<DeadLetterList, AppError> {
    use idem_domain::DeadLetterState;
    crate::serving::serve(async move {
        let user = crate::serving::require(idem_domain::Role::Viewer)?;
        let state = match state.as_deref() {
            None | Some("") => DeadLetterState::Open,
            Some(state) => state
                .parse()
                .map_err(|e: idem_domain::UnknownValue| AppError::BadRequest(e.to_string()))?,
        };
        let filter = ssr::dead_letter_filter(from, to, consumer, error).await?;
        let key = crate::cache::ReadKey::DeadLetters {
            state,
            cursor: cursor.clone(),
            filter: filter.clone(),
        };
        let listed = filter.clone();
        let list = ssr::cached_page(key, |store| async move {
            let filter = listed;
            let page = store
                .lists()
                .dead_letters_in(state, &ssr::page_request(cursor), &filter)
                .await?;
            let total = if filter.is_all() {
                store
                    .lists()
                    .count_dead_letters(state, super::COUNT_CAP)
                    .await?
            } else {
                store
                    .lists()
                    .count_dead_letters_in(state, &filter, super::COUNT_CAP)
                    .await?
            };
            Ok((page, total))
        })
        .await?;
        // What a redrive would take: only letters of consumers the person
        // operates (starting takes the same).
        let catalogue = crate::serving::state()?.catalogue;
        let may_redrive = match &filter.window.consumer {
            Some(c) => user
                .rights
                .check(&catalogue, c.as_str(), idem_domain::Role::Operator)
                .is_ok(),
            None => user.role.includes(idem_domain::Role::Operator),
        };
        let redrive = match may_redrive && state == DeadLetterState::Open {
            // The primary: the offer is what starting compares with.
            true => {
                let listed = filter.window.within.clone();
                let selection = ssr::to_act_on(filter).await?;
                let offer = crate::serving::state()?
                    .store
                    .runs()
                    .redrive_offer(&selection)
                    .await?;
                let only_of = match &selection.window.within {
                    idem_domain::Within::Only(names) if selection.window.within != listed => {
                        Some(names.iter().map(ToString::to_string).collect())
                    }
                    _ => None,
                };
                (offer.count > 0).then(|| RedriveForm {
                    count: offer.count,
                    offer: offer.token(),
                    action_id: crate::serving::new_action_id(),
                    only_of,
                    except: Vec::new(),
                })
            }
            false => None,
        };
        Ok(DeadLetterList { list, redrive })
    })
    .await
}

/// One dead letter (the id as it appears in the URL).
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_dead_letter(id: String) -> Result<DeadLetterDetail, AppError> {
    crate::serving::serve(async move {
        let user = crate::serving::require(idem_domain::Role::Viewer)?;
        let id = idem_domain::DeadLetterId::parse(&id).map_err(|_| {
            AppError::BadRequest(format!("“{id}” is not a dead letter id (a whole number)."))
        })?;
        let reader = crate::serving::reader(&crate::serving::state()?);
        let store = &reader.store;
        // Another team's dead letter answers as a missing one.
        let scope = crate::serving::within(idem_domain::Role::Viewer)?;
        let dead_letter = store
            .claims()
            .dead_letter(id, &scope)
            .await?
            .ok_or_else(|| AppError::NotFound(format!("There is no dead letter {id}.")))?;
        // The key as stored; one the domain would refuse has no claim to read.
        let claim = match (
            idem_domain::ConsumerName::parse(dead_letter.consumer.as_str()),
            idem_domain::IdempotencyKey::parse(dead_letter.key.as_str()),
        ) {
            (Ok(consumer), Ok(key)) => store.claims().claim(&consumer, &key).await?,
            _ => None,
        };
        let clock = crate::serving::clock(chrono::Utc::now());
        let retention = crate::serving::state()?
            .claim_retention
            .of(&dead_letter.consumer);
        let verdict = idem_domain::action::Verdict::of(claim.as_ref(), retention, clock.as_of);
        let can_act = user
            .rights
            .check(
                &crate::serving::state()?.catalogue,
                &dead_letter.consumer,
                idem_domain::Role::Operator,
            )
            .is_ok();
        let read_only = crate::serving::state()?
            .read_only
            .reason(&dead_letter.consumer);
        let publication = match (&dead_letter.broker, dead_letter.replay_outbox_id) {
            (Some(_), Some(outbox_id)) => store
                .brokers()
                .broker_replay(outbox_id)
                .await?
                .map(|replay| replay.publication()),
            _ => None,
        };
        Ok(DeadLetterDetail {
            read_only,
            publication,
            clock,
            dead_letter,
            claim,
            verdict,
            can_act,
            from_replica: reader.is_replica(),
            action_id: crate::serving::new_action_id(),
        })
    })
    .await
}

/// Unpublished outbox rows, oldest first.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn list_outbox(
    cursor: Option<String>,
    consumer: Option<String>,
    topic: Option<String>,
) -> Result<ListPage<OutboxRow>, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let filter = ssr::outbox_filter(consumer, topic).await?;
        let key = crate::cache::ReadKey::Outbox {
            cursor: cursor.clone(),
            filter: filter.clone(),
        };
        ssr::cached_page(key, |store| async move {
            let page = store
                .lists()
                .unpublished_outbox_in(&ssr::page_request(cursor), &filter)
                .await?;
            let total = store
                .lists()
                .count_unpublished_outbox_in(&filter, super::COUNT_CAP)
                .await?;
            Ok((page, total))
        })
        .await
    })
    .await
}
