//! The guarded bulk actions, started from the check pages (and the API):
//! discard the open dead letters whose key is already sent, and resolve
//! unknown outcomes — as sent with a provider reference per key, or as
//! failed. Each starts a run on the redrive's machinery (`redrives`): bound
//! to what was shown, paced, stoppable, each item through the single action
//! with its own compare-and-set and audit row.

use idem_domain::action::ActionOutcome;
use leptos::prelude::*;

use crate::error::AppError;

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use idem_domain::{BulkKey, ResolveAs, RunKind, action::ActionOutcome};
    use idem_store::RedriveStart;

    use crate::{api::actions::ssr::Acting, error::AppError};

    /// The most bad lines an answer lists (the rest are counted).
    const BAD_LINES_SHOWN: usize = 20;

    /// The rights a run is bound to, and the token it was started with.
    pub fn starter(
        acting: &Acting,
    ) -> (
        Option<&idem_domain::Rights>,
        Option<idem_store::ViaToken<'_>>,
    ) {
        let user = &acting.user;
        let rights = match &user.via_token {
            Some(token) => &token.owner_rights,
            None => &user.rights,
        };
        let via = user.via_token.as_ref().map(|t| idem_store::ViaToken {
            id: t.id,
            owner: &t.owner,
        });
        (Some(rights), via)
    }

    /// What a start answers: the run's page for a plain form (its number
    /// in the summary), or why nothing started.
    pub fn started(
        kind: RunKind,
        started: RedriveStart,
        offered: &str,
    ) -> Result<ActionOutcome, AppError> {
        let (title, name) = (kind.title(), kind.title().to_lowercase());
        match started {
            RedriveStart::Started {
                id,
                items,
                audit_id,
            } => {
                crate::serving::answer_on(&format!("/redrives/{id}"));
                let what = kind.items();
                let what = if items == 1 {
                    what.trim_end_matches('s')
                } else {
                    what
                };
                let order = match kind {
                    RunKind::Resolve => "in the order given",
                    RunKind::Replay | RunKind::Discard => "oldest first",
                };
                Ok(ActionOutcome::Done {
                    audit_id,
                    outbox_id: None,
                    summary: format!(
                        "{title} #{id} started: {items} {what} to go through, {order}."
                    ),
                })
            }
            RedriveStart::Changed { now } => Err(AppError::Changed(format!(
                "The list changed after the page was drawn: it offered {offered}, and now {} \
                 {}. Nothing was started; the list below is as it stands, press again to \
                 take it.",
                now.count,
                if now.count == 1 { "matches" } else { "match" },
            ))),
            RedriveStart::NothingToRedrive => Ok(ActionOutcome::Refused {
                reason: match kind {
                    RunKind::Discard => "no open dead letter whose key is sent is left, so there is nothing to discard.",
                    RunKind::Replay | RunKind::Resolve => "no open dead letter matches this filter, so there is nothing to redrive.",
                }
                .into(),
            }),
            RedriveStart::NotAllowed(why) => Ok(ActionOutcome::Refused {
                reason: format!("{why}, so no {name} was started."),
            }),
            RedriveStart::FormReused => Ok(ActionOutcome::FormReused {
                first: format!("started a {name} of another selection"),
            }),
        }
    }

    /// Starts a run over the open dead letters `selection` takes, exactly
    /// those the form's `offer` names (a redrive, a bulk discard), as
    /// `acting`; the answer [`started`] gives.
    pub async fn start_letters(
        acting: &Acting,
        kind: idem_store::LetterRun<'_>,
        selection: &idem_store::DeadLetterFilter,
        offer: &str,
        action_id: &str,
    ) -> Result<ActionOutcome, AppError> {
        let offered = idem_domain::RedriveOffer::parse(offer)
            .map_err(|e| AppError::BadRequest(e.to_string()))?;
        // A token's run reads its owner's account again.
        let (rights, via_token) = starter(acting);
        let start = crate::serving::state()?
            .store
            .runs()
            .start_redrive(&idem_store::RedriveRequest {
                kind,
                selection,
                offer: &offered,
                action_id: &crate::api::actions::ssr::action_id(action_id)?,
                actor: acting.actor(),
                rights,
                via_token,
            })
            .await?;
        started(kind.kind(), start, &offered.to_string())
    }

    /// The keys a bulk resolve form or call sends: `keys`, a JSON list
    /// (the rows a page showed, or an API body's), or `references`, a
    /// pasted `consumer,key,reference` list. Every bad line is a 400 that
    /// names it; nothing starts.
    pub fn keys(
        resolve_as: ResolveAs,
        keys: Option<String>,
        references: Option<String>,
    ) -> Result<(Vec<BulkKey>, String), AppError> {
        let given = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.trim().is_empty());
        let (keys, source) = match (given(&keys), given(&references)) {
            (true, false) => {
                let keys: Vec<BulkKey> = serde_json::from_str(keys.as_deref().unwrap_or_default())
                    .map_err(|e| {
                        AppError::BadRequest(format!("The list of keys is not one: {e}."))
                    })?;
                (keys, "keys as listed".to_owned())
            }
            (false, true) => {
                let pasted = references.unwrap_or_default();
                if resolve_as != ResolveAs::Sent {
                    return Err(AppError::BadRequest(
                        "A pasted list of references resolves outcomes as sent.".into(),
                    ));
                }
                let keys = idem_domain::parse_references(&pasted).map_err(bad_lines)?;
                (keys, "a pasted list of references".to_owned())
            }
            (true, true) => {
                return Err(AppError::BadRequest(
                    "Send either the keys or a pasted list of references, not both.".into(),
                ));
            }
            (false, false) => {
                return Err(AppError::BadRequest("No key is listed.".into()));
            }
        };
        idem_domain::check_keys(resolve_as, &keys).map_err(bad_lines)?;
        Ok((keys, source))
    }

    fn bad_lines(bad: Vec<idem_domain::BadLine>) -> AppError {
        let mut lines: Vec<String> = bad
            .iter()
            .take(BAD_LINES_SHOWN)
            .map(ToString::to_string)
            .collect();
        if bad.len() > BAD_LINES_SHOWN {
            lines.push(format!("and {} more", bad.len() - BAD_LINES_SHOWN));
        }
        AppError::BadRequest(format!(
            "Nothing was started; fix these lines and send the list again: {}.",
            lines.join("; ")
        ))
    }

    /// What a bulk discard takes: the open dead letters of `consumer` (which
    /// must be one Idem may act on), or — with none named — of every
    /// consumer the person operates except those read through an adapter.
    /// The check page's offer and the start read it the same way, so they
    /// agree.
    pub async fn discard_selection(
        consumer: Option<String>,
    ) -> Result<idem_store::DeadLetterFilter, AppError> {
        let selection =
            crate::api::lists::ssr::dead_letter_filter(None, None, consumer, None).await?;
        let mut selection = crate::api::lists::ssr::to_act_on(selection).await?;
        match &selection.window.consumer {
            Some(consumer) => crate::api::actions::ssr::writable(consumer.as_str())?,
            None => {
                let state = crate::serving::state()?;
                let within = &selection.window.within;
                selection.except = state
                    .read_only
                    .names()
                    .filter(|c| within.allows(c))
                    .filter_map(|c| idem_domain::ConsumerName::parse(c).ok())
                    .collect();
            }
        }
        Ok(selection)
    }

    /// The person operates every consumer `keys` name, and Idem may resolve
    /// outcomes there (else the first refusal).
    pub async fn may_resolve(keys: &[BulkKey]) -> Result<(), AppError> {
        let mut consumers: Vec<&str> = keys.iter().map(|k| k.consumer.as_str()).collect();
        consumers.sort_unstable();
        consumers.dedup();
        for consumer in consumers {
            crate::serving::require_on(consumer, idem_domain::Role::Operator).await?;
            crate::api::actions::ssr::resolvable(consumer).await?;
        }
        Ok(())
    }
}

/// Starts a guarded bulk discard of exactly the open dead letters whose
/// key is already sent that the check offered (`offer`; for `consumer`, or
/// every consumer the person operates but those read through an adapter):
/// each is discarded in turn through
/// the single discard, audited with `reason`. A set that changed since the
/// page was drawn is a 409 and starts nothing.
#[server(prefix = "/api/act")]
pub async fn start_bulk_discard(
    action_id: String,
    #[server(default)] offer: String,
    #[server(default)] consumer: Option<String>,
    #[server(default)] reason: String,
) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        let selection = ssr::discard_selection(consumer).await?;
        let Some(reason) = crate::api::actions::ssr::reason(&reason)? else {
            return Err(AppError::BadRequest(
                "Discarding needs a reason: it is recorded on every letter's audit row.".into(),
            ));
        };
        let kind = idem_store::LetterRun::Discard { reason: &reason };
        ssr::start_letters(&acting, kind, &selection, &offer, &action_id).await
    })
    .await
}

/// Starts a guarded bulk resolve of exactly the keys given — `keys`, a
/// JSON list of `{consumer, key, version, provider_ref}` (the rows a page
/// showed; `shown_on` names its check), or `references`, a pasted
/// `consumer,key,reference` list — all
/// as `resolve_as` (`sent`, `failed-retry`, `failed`). Each key is resolved
/// in turn through the single resolution, only while its claim is at the
/// version bound (the one shown, or for a pasted list the one it has when
/// the run starts) and still unresolved; a key changed meanwhile is skipped
/// and listed with who changed it.
#[server(prefix = "/api/act")]
pub async fn start_bulk_resolve(
    action_id: String,
    resolve_as: String,
    #[server(default)] reason: String,
    #[server(default)] keys: Option<String>,
    #[server(default)] references: Option<String>,
    #[server(default)] shown_on: Option<String>,
) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        let how: idem_domain::ResolveAs = resolve_as
            .parse()
            .map_err(|e: idem_domain::UnknownValue| AppError::BadRequest(e.to_string()))?;
        let (keys, mut source) = ssr::keys(how, keys, references)?;
        // The page's own form names the check whose findings it showed.
        if let Some(slug) = shown_on.filter(|s| !s.is_empty()) {
            let check = idem_domain::Check::from_slug(&slug).ok_or_else(|| {
                AppError::BadRequest(format!("There is no check called “{slug}”."))
            })?;
            source = format!("{} keys from the page of “{}”", keys.len(), check.title());
        }
        ssr::may_resolve(&keys).await?;
        let reason = crate::api::actions::ssr::reason(&reason)?;
        let (rights, via_token) = ssr::starter(&acting);
        let started = crate::serving::state()?
            .store
            .runs()
            .start_bulk_resolve(&idem_store::BulkResolveRequest {
                keys: &keys,
                resolve_as: how,
                reason: reason.as_ref(),
                source: &source,
                action_id: &crate::api::actions::ssr::action_id(&action_id)?,
                actor: acting.actor(),
                rights,
                via_token,
            })
            .await?;
        let offered = format!("{} keys", keys.len());
        ssr::started(idem_domain::RunKind::Resolve, started, &offered)
    })
    .await
}
