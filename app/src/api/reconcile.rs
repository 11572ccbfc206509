//! Reconciling with a provider: the upload page's data, one kept
//! reconciliation with its classes, and applying a class. The export itself
//! is uploaded to the server's own route (`RECONCILE_UPLOAD_PATH`), which
//! streams it; applying a class starts a bulk resolve (`bulk`) bound to the
//! rows the reconciliation kept.

use idem_domain::{Reconciliation, action::ActionOutcome};
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::{error::AppError, format::Clock};

/// Where the upload form posts the export (a multipart form).
pub const RECONCILE_UPLOAD_PATH: &str = "/reconcile/upload";

/// Where the demo's email provider offers its message log.
pub const DEMO_PROVIDER_LOG_PATH: &str = "/reconcile/demo-provider-log.csv";

/// How many rows of each class a reconciliation's page shows.
pub const CLASS_SAMPLE: i64 = 50;

/// The reconcile page: the upload form and the latest reconciliations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconcileHome {
    pub clock: Clock,
    /// The consumers the person may reconcile (operates), by name.
    pub consumers: Vec<String>,
    pub recent: Vec<Reconciliation>,
    /// A fresh id for the upload form.
    pub action_id: String,
    /// The demo's email provider offers its message log.
    pub demo: bool,
}

/// One kept reconciliation, as its page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconciliationDetail {
    pub clock: Clock,
    pub reconciliation: Reconciliation,
    /// The person may apply its classes (operates its consumer).
    pub can_apply: bool,
    /// A fresh id for the apply forms.
    pub action_id: String,
}

#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use crate::error::AppError;

    use idem_domain::ReconciliationId;

    /// A reconciliation number as the address carries it.
    pub fn reconciliation_id(id: &str) -> Result<ReconciliationId, AppError> {
        Ok(ReconciliationId::parse(id)?)
    }

    /// The answer for a reconciliation that is not there — or is another
    /// team's: the two read alike.
    pub fn missing(id: ReconciliationId) -> AppError {
        AppError::NotFound(format!("There is no reconciliation {id}."))
    }

    /// Reconciliation `id`, read within the consumers the person holds
    /// `needed` on.
    pub async fn readable(
        id: ReconciliationId,
        needed: idem_domain::Role,
    ) -> Result<idem_domain::Reconciliation, AppError> {
        let scope = crate::serving::within(needed)?;
        crate::serving::state()?
            .store
            .reconcile()
            .reconciliation(id, super::CLASS_SAMPLE, &scope)
            .await?
            .ok_or_else(|| missing(id))
    }
}

/// The reconcile page: the consumers the person may reconcile and the
/// latest reconciliations of the consumers they may read.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_reconcile_home() -> Result<ReconcileHome, AppError> {
    crate::serving::serve(async move {
        let readable = crate::serving::within(idem_domain::Role::Viewer)?;
        let state = crate::serving::state()?;
        let consumers = match crate::serving::within(idem_domain::Role::Operator) {
            Ok(operated) => state
                .store
                .metrics()
                .claiming_consumers(500, &operated)
                .await?
                .into_iter()
                .filter(|c| state.read_only.reason(c).is_none())
                .collect(),
            Err(_) => Vec::new(),
        };
        Ok(ReconcileHome {
            clock: crate::serving::clock(chrono::Utc::now()),
            consumers,
            recent: state
                .store
                .reconcile()
                .reconciliations(&readable, 20)
                .await?,
            action_id: crate::serving::new_action_id(),
            demo: state.console.demo,
        })
    })
    .await
}

/// One reconciliation: who ran it on which file, and each class with its
/// count and first rows.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_reconciliation(id: String) -> Result<ReconciliationDetail, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        let id = ssr::reconciliation_id(&id)?;
        let reconciliation = ssr::readable(id, idem_domain::Role::Viewer).await?;
        let can_apply = crate::serving::current_user().is_some_and(|u| {
            let catalogue = crate::serving::state()
                .map(|s| s.catalogue)
                .unwrap_or_default();
            u.rights
                .check(
                    &catalogue,
                    &reconciliation.consumer,
                    idem_domain::Role::Operator,
                )
                .is_ok()
        });
        Ok(ReconciliationDetail {
            clock: crate::serving::clock(chrono::Utc::now()),
            reconciliation,
            can_apply,
            action_id: crate::serving::new_action_id(),
        })
    })
    .await
}

/// Applies one class of reconciliation `id` — `unknown-accepted` (resolved
/// as sent, each with the provider's reference) or `unknown-absent`
/// (failed, retried through the outbox with the same key) — as a guarded
/// bulk resolve of exactly the rows the page offered (`shown` of them, at
/// most 500, each key at the version the reconciliation read). A key
/// someone changed since is skipped and named on the run's page.
#[server(prefix = "/api/act")]
pub async fn apply_reconciliation(
    action_id: String,
    id: String,
    class: String,
    shown: String,
    #[server(default)] reason: String,
) -> Result<ActionOutcome, AppError> {
    crate::api::actions::ssr::act(&action_id, async {
        let acting = crate::api::actions::ssr::operator()?;
        let id = ssr::reconciliation_id(&id)?;
        let class: idem_domain::ReconcileClass = class
            .parse()
            .map_err(|e: idem_domain::UnknownValue| AppError::BadRequest(e.to_string()))?;
        let shown: i64 = shown
            .trim()
            .parse()
            .map_err(|_| AppError::BadRequest(format!("“{shown}” is not a number of rows.")))?;
        let reason = crate::api::actions::ssr::reason(&reason)?;
        // Its consumer only: the apply reads the rows it takes itself.
        let consumer = crate::serving::state()?
            .store
            .reconcile()
            .reconciliation_consumer(id, &acting.scope)
            .await?
            .ok_or_else(|| ssr::missing(id))?;
        crate::api::actions::ssr::resolvable(&consumer).await?;
        let (rights, via_token) = crate::api::bulk::ssr::starter(&acting);
        let started = crate::serving::state()?
            .store
            .runs()
            .apply_reconciliation(&idem_store::ReconciledResolve {
                reconciliation: id,
                class,
                shown,
                reason: reason.as_ref(),
                action_id: &crate::api::actions::ssr::action_id(&action_id)?,
                actor: acting.actor(),
                rights,
                via_token,
            })
            .await?;
        let offered = format!("{shown} rows");
        crate::api::bulk::ssr::started(idem_domain::RunKind::Resolve, started, &offered)
    })
    .await
}
