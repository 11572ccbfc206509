//! A guarded redrive: up to [`REDRIVE_MAX`] open dead letters, each
//! replayed through the single replay — its own verdict (only "safe" ones
//! go), compare-and-set and audit row — one step at a time, so a runner can
//! pace it and an operator can stop it between two items.
//!
//! The bulk actions are runs of the same machinery with another
//! [`RunKind`]: a bulk discard takes the open dead letters whose key is
//! already sent (bound to the check's offer, as a redrive is to the list's)
//! and discards each through the single discard; a bulk resolve takes the
//! keys it was given, each at the claim version its starter saw, and
//! resolves each through the single resolution (`bulk`). Whatever the kind,
//! the start, the steps, the stop and the guards below are the same code.
//!
//! What happens when:
//! - **the list changes between the page and the press**: the form carries
//!   what the page offered ([`RedriveOffer`]: how many letters, the last
//!   one, a digest of their ids). Starting takes the open letters that
//!   match the filter up to that last one; letters that arrived later are
//!   not taken, and if the set is not the one offered (one was replayed
//!   meanwhile, an older one appeared) nothing starts and the answer is
//!   [`RedriveStart::Changed`] with what the page would offer now;
//! - **the person presses twice**: the run is bound to the form's action
//!   id, its starter and what it offered; the same form again answers with
//!   the run it started;
//! - **the same action id comes with another selection or from another
//!   person**: [`RedriveStart::FormReused`], nothing starts;
//! - **someone stops it midway**: each item is replayed in one transaction
//!   that first locks the run and finds it still running, and a Stop takes
//!   the same lock, so a Stop waits for the item in flight and nothing is
//!   replayed once it has answered; times are read under the locks, so the
//!   audit log's order is the commits' order (see `step`);
//! - **the starter loses their rights midway**: before each item the
//!   starter's account is read again, locked; disabled, demoted below
//!   operator or signed out everywhere (a new session epoch), the run stops
//!   with that reason, audited. A run started through the API reads its
//!   token's owner's account, and stops too once the token is revoked or
//!   expired;
//! - **a Stop is sent twice**: it is bound to its action id, so the second
//!   answers the first Stop's outcome;
//! - **an anonymous client sends any of it a thousand times**: the guard
//!   refuses it before anything is read or written (`server/src/auth`).

mod bulk;
pub(crate) mod item;
mod reconciled;
mod start;
mod step;

pub use bulk::BulkResolveRequest;
pub use idem_domain::REDRIVE_MAX;
use idem_domain::{
    Redrive, RedriveItem, RedriveOffer, RunId, RunKind, Within,
    action::{ActionId, Reason},
};
pub use reconciled::ReconciledResolve;

use super::Actor;
use crate::facets::Runs;
use crate::{
    DeadLetterFilter, StoreError, StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::{Store, Tx},
    ts::Ts,
};

#[derive(Debug, Clone, Copy)]
pub struct RedriveRequest<'a> {
    /// What the run does with each letter.
    pub kind: LetterRun<'a>,
    pub selection: &'a DeadLetterFilter,
    /// What the page offered (its form's token): exactly these are taken.
    pub offer: &'a RedriveOffer,
    /// The form's action id.
    pub action_id: &'a ActionId,
    pub actor: Actor<'a>,
    /// The rights the selection was narrowed under (a person limited to
    /// teams): the start is refused if the account's rights are others by
    /// the time its transaction runs. `None`: not checked (tools, tests).
    pub rights: Option<&'a idem_domain::Rights>,
    /// Started through the API with a token: its owner's account is the one
    /// read again (for the start and each step), and each step needs the
    /// token still live. `rights` are then the owner's.
    pub via_token: Option<ViaToken<'a>>,
}

/// What a run over dead letters does with each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LetterRun<'a> {
    /// A redrive: replays each letter whose verdict is "safe".
    Replay,
    /// A bulk discard of the letters whose key is already sent, each
    /// audited with this reason.
    Discard { reason: &'a Reason },
}

impl LetterRun<'_> {
    pub fn kind(self) -> RunKind {
        match self {
            LetterRun::Replay => RunKind::Replay,
            LetterRun::Discard { .. } => RunKind::Discard,
        }
    }
}

/// The token a redrive was started with, and its owner.
#[derive(Debug, Clone, Copy)]
pub struct ViaToken<'a> {
    pub id: i64,
    pub owner: &'a str,
}

/// What starting a redrive did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedriveStart {
    /// A run with this many dead letters (or the run this form already
    /// started, for a resubmission).
    Started {
        id: RunId,
        items: i64,
        audit_id: i64,
    },
    /// The letters that match are not the ones the page offered: nothing
    /// was started; `now` is what the page offers now.
    Changed { now: RedriveOffer },
    /// Nothing matches: no run was started.
    NothingToRedrive,
    /// The action id was used for another selection or by someone else:
    /// nothing was started.
    FormReused,
    /// The starter may not start a redrive (the text says why).
    NotAllowed(String),
}

/// What one step did.
#[derive(Debug, Clone, PartialEq)]
pub enum RedriveStep {
    /// One item settled: replayed, or skipped with the reason.
    Item(RedriveItem),
    /// Nothing left to do: the run has ended (finished or stopped now, or
    /// before).
    Ended,
}

/// A run's row.
#[derive(sqlx::FromRow)]
struct RunRow {
    id: i64,
    kind: String,
    resolve_as: Option<String>,
    reason: Option<String>,
    actor: String,
    actor_role: String,
    selection: String,
    state: String,
    started_at: Ts,
    ended_at: Option<Ts>,
    ended_by: Option<String>,
    end_reason: Option<String>,
    audit_id: i64,
}

const RUN_COLUMNS: &str = "id, kind, resolve_as, reason, actor, actor_role, selection, state, \
     started_at, ended_at, ended_by, end_reason, audit_id";

impl TryFrom<RunRow> for Redrive {
    type Error = StoreError;
    fn try_from(row: RunRow) -> Result<Self, StoreError> {
        Ok(Redrive {
            kind: crate::rows::parse(&row.kind)?,
            resolve_as: row
                .resolve_as
                .as_deref()
                .map(crate::rows::parse)
                .transpose()?,
            reason: row.reason,
            state: crate::rows::parse(&row.state)?,
            id: row.id,
            actor: row.actor,
            actor_role: row.actor_role,
            selection: row.selection,
            started_at: row.started_at.0,
            ended_at: row.ended_at.map(|t| t.0),
            ended_by: row.ended_by,
            end_reason: row.end_reason,
            audit_id: row.audit_id,
        })
    }
}

/// An item's row.
#[derive(sqlx::FromRow)]
struct ItemRow {
    position: i64,
    dead_letter_id: Option<i64>,
    consumer: String,
    idempotency_key: String,
    version: Option<i64>,
    provider_ref: Option<String>,
    outcome: Option<String>,
    reason: Option<String>,
    audit_id: Option<i64>,
    done_at: Option<Ts>,
}

const ITEM_COLUMNS: &str = "position, dead_letter_id, consumer, idempotency_key, version, \
     provider_ref, outcome, reason, audit_id, done_at";

impl TryFrom<ItemRow> for RedriveItem {
    type Error = StoreError;
    fn try_from(row: ItemRow) -> Result<Self, StoreError> {
        Ok(RedriveItem {
            outcome: row.outcome.as_deref().map(crate::rows::parse).transpose()?,
            position: row.position,
            dead_letter_id: row.dead_letter_id,
            consumer: row.consumer,
            key: row.idempotency_key,
            version: row.version,
            provider_ref: row.provider_ref,
            reason: row.reason,
            audit_id: row.audit_id,
            done_at: row.done_at.map(|t| t.0),
        })
    }
}

/// An open dead letter a run may take: its time, id, consumer and key.
type Letter = (Ts, i64, String, String);

/// The open dead letters `selection` takes for a run of `kind` (a bulk
/// discard: only those whose key is already sent), oldest first, up to
/// `last` (inclusive) when given, at most `limit`.
fn candidates(
    selection: &DeadLetterFilter,
    kind: RunKind,
    last: Option<(Ts, i64)>,
    limit: i64,
) -> Sql {
    const ORDER: &str = "ORDER BY dead_lettered_at, id";
    let mut sql = Sql::default();
    let limit = sql.param(limit);
    let parts = selection.scoped(&mut sql, |sql, only, conditions| {
        let sent = match kind {
            RunKind::Discard => {
                " AND EXISTS (SELECT 1 FROM claims c WHERE c.consumer = dead_letters.consumer \
                 AND c.idempotency_key = dead_letters.idempotency_key AND c.status = 'sent')"
            }
            RunKind::Replay | RunKind::Resolve => "",
        };
        let up_to = match last {
            Some((at, id)) => {
                let (a, i) = (sql.param(at), sql.param(id));
                format!(" AND (dead_lettered_at, id) <= ({a}, {i})")
            }
            None => String::new(),
        };
        format!(
            "SELECT dead_lettered_at, id, consumer, idempotency_key FROM dead_letters \
             WHERE state = 'open'{only}{sent}{conditions}{up_to} {ORDER} LIMIT {limit}"
        )
    });
    sql.text = format!(
        "SELECT dead_lettered_at, id, consumer, idempotency_key FROM ({parts}) AS scoped \
         {ORDER} LIMIT {limit}"
    );
    sql
}

/// `i.consumer NOT IN (…)`: an item of a consumer `scope` does not reach
/// (`None` when it reaches every consumer; every item when it reaches none).
fn outside(sql: &mut Sql, scope: &Within) -> Option<String> {
    match scope {
        Within::Every => None,
        Within::Only(names) if names.is_empty() => Some("1 = 1".to_owned()),
        Within::Only(names) => {
            let params: Vec<String> = names.iter().map(|n| sql.param(n.as_str())).collect();
            Some(format!("i.consumer NOT IN ({})", params.join(", ")))
        }
    }
}

fn offer_of(letters: &[Letter]) -> RedriveOffer {
    RedriveOffer::of(letters.iter().map(|(at, id, _, _)| (at.0, *id)))
}

/// Why `role` and `disabled` do not let an account drive a redrive, if
/// they do not.
fn cannot_act(name: &str, role: &str, disabled: bool) -> Option<String> {
    let operator = role
        .parse::<idem_domain::Role>()
        .is_ok_and(|r| r.includes(idem_domain::Role::Operator));
    if disabled {
        Some(format!("{name}'s account is disabled"))
    } else if !operator {
        Some(format!("{name} is no longer an operator (now {role})"))
    } else {
        None
    }
}

/// Whether an account's stored role and rights are `expected`.
fn same_rights(expected: &idem_domain::Rights, role: &str, rights: Option<&str>) -> bool {
    let stored = match rights {
        Some(text) => text.parse().ok(),
        None => role.parse().ok().map(idem_domain::Rights::everywhere),
    };
    stored.as_ref() == Some(expected)
}

impl Tx {
    /// The role, disabled flag, session epoch and rights (`NULL`: the role
    /// on every team) of the account `name`, locked until this transaction
    /// ends (a change to it waits).
    async fn account_standing(
        &mut self,
        name: &str,
    ) -> StoreResult<Option<(String, bool, i64, Option<String>)>> {
        let sql = self
            .locking("SELECT role, disabled, session_epoch, rights FROM users WHERE username = $1");
        let found = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(&sql).bind(name).fetch_optional(&mut **tx).await?
        });
        Ok(found)
    }

    async fn run_candidates(
        &mut self,
        selection: &DeadLetterFilter,
        kind: RunKind,
        last: Option<(Ts, i64)>,
        limit: i64,
    ) -> StoreResult<Vec<Letter>> {
        let sql = candidates(selection, kind, last, limit);
        let letters = dispatch!(&mut self.inner, tx => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(&mut **tx).await?
        });
        Ok(letters)
    }

    /// The session epoch of the account that starts a run (`name`, locked),
    /// or why it may not: no such account, not an operator, or rights other
    /// than `expected` (those the selection was narrowed under).
    async fn starter_epoch(
        &mut self,
        name: &str,
        expected: Option<&idem_domain::Rights>,
    ) -> StoreResult<Result<i64, RedriveStart>> {
        let Some((role, disabled, epoch, rights)) = self.account_standing(name).await? else {
            return Ok(Err(RedriveStart::NotAllowed(format!(
                "there is no account {name}"
            ))));
        };
        if let Some(why) = cannot_act(name, &role, disabled) {
            return Ok(Err(RedriveStart::NotAllowed(why)));
        }
        if let Some(expected) = expected
            && !same_rights(expected, &role, rights.as_deref())
        {
            return Ok(Err(RedriveStart::NotAllowed(format!(
                "{name}'s rights changed after the page was drawn"
            ))));
        }
        Ok(Ok(epoch))
    }
}

impl Runs<'_> {
    /// What a redrive of `selection` would take now (the oldest
    /// [`REDRIVE_MAX`] open letters it matches): what the page's form offers.
    /// Read for each page, never from a cache another person filled.
    pub async fn redrive_offer(self, selection: &DeadLetterFilter) -> StoreResult<RedriveOffer> {
        self.run_offer(selection, RunKind::Replay).await
    }

    /// What a bulk discard of `selection` would take now: the oldest
    /// [`REDRIVE_MAX`] open letters it matches whose key is already sent.
    pub async fn discard_offer(self, selection: &DeadLetterFilter) -> StoreResult<RedriveOffer> {
        self.run_offer(selection, RunKind::Discard).await
    }

    /// A run and its items, in order, if every item is of a consumer
    /// `scope` reaches (a run that touched another's consumer is, for
    /// whoever may not read it, no run at all).
    pub async fn redrive(
        self,
        id: RunId,
        scope: &Within,
    ) -> StoreResult<Option<(Redrive, Vec<RedriveItem>)>> {
        let id = id.get();
        let mut run_sql = Sql::default();
        let p = run_sql.param(id);
        run_sql.push(&format!(
            "SELECT {RUN_COLUMNS} FROM redrives WHERE id = {p}"
        ));
        if let Some(outside) = outside(&mut run_sql, scope) {
            run_sql.push(&format!(
                " AND NOT EXISTS (SELECT 1 FROM redrive_items i WHERE i.redrive_id = {p} AND {outside})"
            ));
        }
        let items_sql = format!(
            "SELECT {ITEM_COLUMNS} FROM redrive_items WHERE redrive_id = $1 ORDER BY position"
        );
        let run: Option<RunRow> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&run_sql.text), &run_sql.binds).fetch_optional(pool).await?
        });
        let Some(run) = run else {
            return Ok(None);
        };
        let items: Vec<ItemRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&items_sql).bind(id).fetch_all(pool).await?
        });
        Ok(Some((run.try_into()?, crate::rows::convert(items)?)))
    }

    /// The run whose start `audit_id` records, if any.
    pub async fn redrive_of_audit(self, audit_id: i64) -> StoreResult<Option<RunId>> {
        const SQL: &str = "SELECT id FROM redrives WHERE audit_id = $1";
        let id: Option<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(audit_id).fetch_optional(pool).await?
        });
        Ok(id.map(RunId::of_row))
    }

    /// The runs still running, oldest first (what a runner paces).
    pub async fn running_redrives(self) -> StoreResult<Vec<RunId>> {
        const SQL: &str = "SELECT id FROM redrives WHERE state = 'running' ORDER BY id";
        let ids: Vec<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_all(pool).await?
        });
        Ok(ids.into_iter().map(RunId::of_row).collect())
    }
}

impl Store {
    async fn run_offer(
        &self,
        selection: &DeadLetterFilter,
        kind: RunKind,
    ) -> StoreResult<RedriveOffer> {
        let sql = candidates(selection, kind, None, REDRIVE_MAX);
        let letters: Vec<Letter> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(offer_of(&letters))
    }
}
