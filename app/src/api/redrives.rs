//! Guarded redrives: starting one from the dead-letter list, reading one's
//! progress, and stopping it. Starting and stopping are operator actions
//! under `/api/act` (see `actions`); the replays themselves happen in the
//! server's background work, one item at a time, each through the single
//! replay with its own verdict, compare-and-set and audit row.

use chrono::{DateTime, Utc};
use idem_domain::action::ActionOutcome;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// One run, as its page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveDetail {
    pub clock: Clock,
    pub id: i64,
    pub actor: String,
    /// What it took, in words.
    pub selection: String,
    /// `running`, `finished` or `stopped`.
    pub state: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub ended_by: Option<String>,
    pub audit_id: i64,
    pub items: Vec<RedriveRow>,
    /// The signed-in person may stop it (operator or admin).
    pub can_act: bool,
    /// A fresh id for the stop form.
    pub action_id: String,
}

impl RedriveDetail {
    pub fn is_running(&self) -> bool {
        self.state == "running"
    }

    /// How many items ended with `outcome`.
    pub fn count(&self, outcome: &str) -> usize {
        self.items
            .iter()
            .filter(|i| i.outcome.as_deref() == Some(outcome))
            .count()
    }

    /// Items not taken yet.
    pub fn waiting(&self) -> usize {
        self.items.iter().filter(|i| i.outcome.is_none()).count()
    }
}

/// One dead letter of a run, and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedriveRow {
    pub position: i64,
    pub dead_letter_id: i64,
    pub consumer: String,
    pub key: String,
    /// `replayed`, `skipped`, or `None` while waiting.
    pub outcome: Option<String>,
    /// Why it was skipped.
    pub reason: Option<String>,
    /// The replay's audit row.
    pub audit_id: Option<i64>,
}

#[cfg(feature = "ssr")]
mod ssr {
    use super::{RedriveDetail, RedriveRow};
    use crate::error::AppError;

    /// A run id as the address carries it.
    pub fn run_id(id: &str) -> Result<i64, AppError> {
        id.parse().map_err(|_| {
            AppError::BadRequest(format!("“{id}” is not a redrive number (a whole number)."))
        })
    }

    /// Every consumer the selection may reach can be acted on: its own
    /// consumer, or — without one — every consumer, so none may be read-only.
    pub fn writable(consumer: Option<&idem_domain::ConsumerName>) -> Result<(), AppError> {
        if let Some(consumer) = consumer {
            return crate::api::actions::ssr::writable(consumer.as_str());
        }
        let state = crate::ssr::state()?;
        let read_only: Vec<&str> = state.read_only.names().collect();
        if read_only.is_empty() {
            return Ok(());
        }
        Err(AppError::ReadOnly(format!(
            "Choose one consumer to redrive: {} {} read through an adapter, and Idem does not \
             replay those dead letters.",
            read_only.join(", "),
            if read_only.len() == 1 { "is" } else { "are" }
        )))
    }

    pub fn detail(
        (run, items): (idem_store::Redrive, Vec<idem_store::RedriveItem>),
        clock: crate::format::Clock,
    ) -> RedriveDetail {
        RedriveDetail {
            clock,
            id: run.id,
            actor: run.actor,
            selection: run.selection,
            state: run.state,
            started_at: run.started_at.0,
            ended_at: run.ended_at.map(|t| t.0),
            ended_by: run.ended_by,
            audit_id: run.audit_id,
            items: items
                .into_iter()
                .map(|i| RedriveRow {
                    position: i.position,
                    dead_letter_id: i.dead_letter_id,
                    consumer: i.consumer,
                    key: i.key,
                    outcome: i.outcome,
                    reason: i.reason,
                    audit_id: i.audit_id,
                })
                .collect(),
            can_act: crate::ssr::current_user()
                .is_some_and(|u| u.role.includes(idem_domain::Role::Operator)),
            action_id: crate::ssr::new_action_id(),
        }
    }
}

/// One redrive and each of its items (the number as it appears in the URL).
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_redrive(id: String) -> Result<RedriveDetail, AppError> {
    crate::ssr::serve(async move {
        crate::ssr::require(idem_domain::Role::Viewer)?;
        let id = ssr::run_id(&id)?;
        // The primary: a run's progress is what the page is for.
        let found = crate::ssr::state()?.store.redrive(id).await?;
        let found =
            found.ok_or_else(|| AppError::NotFound(format!("There is no redrive {id}.")))?;
        Ok(ssr::detail(found, crate::ssr::clock(Utc::now())))
    })
    .await
}

/// Starts a guarded redrive of the open dead letters the list shows for
/// `consumer`, `error`, `from` and `to` (the oldest 500 at most): the server
/// replays them one by one, each only when its verdict is "safe", and the
/// person is sent to the run's page.
#[server(prefix = "/api/act")]
pub async fn start_redrive(
    action_id: String,
    #[server(default)] consumer: Option<String>,
    #[server(default)] error: Option<String>,
    #[server(default)] from: Option<String>,
    #[server(default)] to: Option<String>,
) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        let selection = crate::api::lists::ssr::dead_letter_filter(from, to, consumer, error)?;
        ssr::writable(selection.window.consumer.as_ref())?;
        let state = crate::ssr::state()?;
        let started = state
            .store
            .start_redrive(&idem_store::RedriveRequest {
                selection: &selection,
                action_id: &crate::api::actions::ssr::action_id(&action_id)?,
                actor: acting.actor(),
            })
            .await?;
        Ok(match started {
            idem_store::RedriveStart::Started {
                id,
                items,
                audit_id,
            } => {
                crate::ssr::answer_on(&format!("/redrives/{id}"));
                ActionOutcome::Done {
                    audit_id,
                    outbox_id: None,
                    summary: format!(
                        "Redrive #{id} started: {items} dead letter{} to go through, oldest first.",
                        if items == 1 { "" } else { "s" }
                    ),
                }
            }
            idem_store::RedriveStart::NothingToRedrive => ActionOutcome::Refused {
                reason: "no open dead letter matches this filter, so there is nothing to redrive."
                    .into(),
            },
            idem_store::RedriveStart::FormReused => ActionOutcome::FormReused {
                first: "started a redrive".into(),
            },
        })
    })
    .await
}

/// Stops a running redrive between two items: those not yet taken stay
/// open dead letters.
#[server(prefix = "/api/act")]
pub async fn stop_redrive(id: String, action_id: String) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        crate::api::actions::ssr::action_id(&action_id)?;
        let id = ssr::run_id(&id)?;
        let state = crate::ssr::state()?;
        let stopped = state.store.stop_redrive(id, acting.actor()).await?;
        // Ended already (or never was): say how, as the run now stands.
        let Some((run, _)) = state.store.redrive(id).await? else {
            return Err(AppError::NotFound(format!("There is no redrive {id}.")));
        };
        Ok(match stopped {
            Some(audit_id) => ActionOutcome::Done {
                audit_id,
                outbox_id: None,
                summary: format!(
                    "Redrive #{id} stopped: the dead letters it had not taken stay open."
                ),
            },
            None => ActionOutcome::Conflict {
                by: run.ended_by.unwrap_or_else(|| "the redrive itself".into()),
                at: run.ended_at.map(|t| t.0),
                now: run.state,
            },
        })
    })
    .await
}
