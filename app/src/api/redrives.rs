//! Guarded redrives: starting one from the dead-letter list, reading one's
//! progress, and stopping it. Starting and stopping are operator actions
//! under `/api/act` (see `actions`); the replays themselves happen in the
//! server's background work, one item at a time, each through the single
//! replay with its own verdict, compare-and-set and audit row.

use idem_domain::{ItemOutcome, Redrive, RedriveItem, action::ActionOutcome};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// One run, as its page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveDetail {
    pub clock: Clock,
    pub run: Redrive,
    pub items: Vec<RedriveItem>,
    /// The signed-in person may stop it (operator or admin).
    pub can_act: bool,
    /// A fresh id for the stop form.
    pub action_id: String,
}

impl RedriveDetail {
    /// How many items ended with `outcome`.
    pub fn count(&self, outcome: ItemOutcome) -> usize {
        self.items
            .iter()
            .filter(|i| i.outcome == Some(outcome))
            .count()
    }

    /// Items not taken yet.
    pub fn waiting(&self) -> usize {
        self.items.iter().filter(|i| i.outcome.is_none()).count()
    }
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use super::RedriveDetail;
    use crate::error::AppError;

    /// A run id as the address carries it.
    pub fn run_id(id: &str) -> Result<idem_domain::RunId, AppError> {
        idem_domain::RunId::parse(id).map_err(|_| {
            AppError::BadRequest(format!("“{id}” is not a redrive number (a whole number)."))
        })
    }

    /// Every consumer the selection may reach can be acted on: its own
    /// consumer, or — without one — every consumer it may take (`within`),
    /// so none of those may be read-only.
    pub fn writable(selection: &idem_store::DeadLetterFilter) -> Result<(), AppError> {
        if let Some(consumer) = &selection.window.consumer {
            return crate::api::actions::ssr::writable(consumer.as_str());
        }
        let state = crate::serving::state()?;
        let within = &selection.window.within;
        let read_only: Vec<&str> = state
            .read_only
            .names()
            .filter(|c| within.allows(c))
            .collect();
        if read_only.is_empty() {
            return Ok(());
        }
        Err(AppError::ReadOnly(format!(
            "Choose one consumer: {} {} read through an adapter, and Idem does not \
             replay or discard their dead letters.",
            read_only.join(", "),
            if read_only.len() == 1 { "is" } else { "are" }
        )))
    }

    pub fn detail(
        (run, items): (idem_domain::Redrive, Vec<idem_domain::RedriveItem>),
        clock: crate::format::Clock,
    ) -> RedriveDetail {
        // Stop is offered to whoever may stop it: an operator of every
        // consumer its items belong to.
        let can_act = crate::serving::current_user().is_some_and(|u| {
            let catalogue = crate::serving::state()
                .map(|s| s.catalogue)
                .unwrap_or_default();
            items.iter().all(|i| {
                u.rights
                    .check(&catalogue, &i.consumer, idem_domain::Role::Operator)
                    .is_ok()
            })
        });
        RedriveDetail {
            clock,
            run,
            items,
            can_act,
            action_id: crate::serving::new_action_id(),
        }
    }
}

/// One redrive and each of its items (the number as it appears in the URL).
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_redrive(id: String) -> Result<RedriveDetail, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let id = ssr::run_id(&id)?;
        // The primary: a run's progress is what the page is for. A run
        // that touched another team's consumer reads as no run at all.
        let scope = crate::serving::within(idem_domain::Role::Viewer)?;
        let found = crate::serving::state()?
            .store
            .runs()
            .redrive(id, &scope)
            .await?;
        let found =
            found.ok_or_else(|| AppError::NotFound(format!("There is no redrive {id}.")))?;
        Ok(ssr::detail(
            found,
            crate::serving::clock(chrono::Utc::now()),
        ))
    })
    .await
}

/// Starts a guarded redrive of exactly the open dead letters the list
/// offered for `consumer`, `error`, `from` and `to` (`offer`, the form's
/// token: the oldest 500 at most): the server replays them one by one, each
/// only when its verdict is "safe", and the person is sent to the run's
/// page. If the matching letters are no longer the ones offered, nothing
/// starts: a 409 that says how many match now, shown on the list.
#[server(prefix = "/api/act")]
pub async fn start_redrive(
    action_id: String,
    #[server(default)] offer: String,
    #[server(default)] consumer: Option<String>,
    #[server(default)] error: Option<String>,
    #[server(default)] from: Option<String>,
    #[server(default)] to: Option<String>,
) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        let selection =
            crate::api::lists::ssr::dead_letter_filter(from, to, consumer, error).await?;
        let selection = crate::api::lists::ssr::to_act_on(selection).await?;
        ssr::writable(&selection)?;
        let kind = idem_store::LetterRun::Replay;
        crate::api::bulk::ssr::start_letters(&acting, kind, &selection, &offer, &action_id).await
    })
    .await
}

/// Stops a running redrive between two items (after the one in flight):
/// those not yet taken stay open dead letters. The same Stop sent again
/// answers what the first one did.
#[server(prefix = "/api/act")]
pub async fn stop_redrive(id: String, action_id: String) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        let action = crate::api::actions::ssr::action_id(&action_id)?;
        let id = ssr::run_id(&id)?;
        let state = crate::serving::state()?;
        let outcome = state
            .store
            .runs()
            .stop_redrive(id, &acting.scope, &action, acting.actor())
            .await?;
        match outcome {
            ActionOutcome::Refused { reason } => Err(AppError::NotFound(reason)),
            outcome => Ok(outcome),
        }
    })
    .await
}
