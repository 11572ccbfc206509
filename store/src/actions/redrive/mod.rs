//! A guarded redrive: up to [`REDRIVE_MAX`] open dead letters, each
//! replayed through the single replay — its own verdict (only "safe" ones
//! go), compare-and-set and audit row — one step at a time, so a runner can
//! pace it and an operator can stop it between two items.
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

mod step;

pub use idem_domain::REDRIVE_MAX;
use idem_domain::{Redrive, RedriveItem, RedriveOffer, action::ActionId};

use super::Actor;
use crate::{
    DeadLetterFilter, NewAuditEntry, StoreError, StoreResult,
    dialect::dispatch,
    sql::{Sql, bind_all},
    store::{Store, Tx},
    ts::Ts,
};

#[derive(Debug, Clone, Copy)]
pub struct RedriveRequest<'a> {
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
    Started { id: i64, items: i64, audit_id: i64 },
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

const RUN_COLUMNS: &str = "id, actor, actor_role, selection, state, started_at, ended_at, \
     ended_by, end_reason, audit_id";

impl TryFrom<RunRow> for Redrive {
    type Error = StoreError;
    fn try_from(row: RunRow) -> Result<Self, StoreError> {
        Ok(Redrive {
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

/// An item's row, with its dead letter's consumer and key.
#[derive(sqlx::FromRow)]
struct ItemRow {
    position: i64,
    dead_letter_id: i64,
    consumer: String,
    key: String,
    outcome: Option<String>,
    reason: Option<String>,
    audit_id: Option<i64>,
    done_at: Option<Ts>,
}

impl TryFrom<ItemRow> for RedriveItem {
    type Error = StoreError;
    fn try_from(row: ItemRow) -> Result<Self, StoreError> {
        Ok(RedriveItem {
            outcome: row.outcome.as_deref().map(crate::rows::parse).transpose()?,
            position: row.position,
            dead_letter_id: row.dead_letter_id,
            consumer: row.consumer,
            key: row.key,
            reason: row.reason,
            audit_id: row.audit_id,
            done_at: row.done_at.map(|t| t.0),
        })
    }
}

/// The open dead letters `selection` takes, oldest first, up to `last`
/// (inclusive) when given, at most `limit`.
fn candidates(selection: &DeadLetterFilter, last: Option<(Ts, i64)>, limit: i64) -> Sql {
    let mut sql = Sql::default();
    sql.push("SELECT dead_lettered_at, id FROM dead_letters WHERE state = 'open'");
    selection.conditions(&mut sql);
    if let Some((at, id)) = last {
        let (a, i) = (sql.param(at), sql.param(id));
        sql.push(&format!(" AND (dead_lettered_at, id) <= ({a}, {i})"));
    }
    let limit = sql.param(limit);
    sql.push(&format!(" ORDER BY dead_lettered_at, id LIMIT {limit}"));
    sql
}

fn offer_of(letters: &[(Ts, i64)]) -> RedriveOffer {
    RedriveOffer::of(letters.iter().map(|(at, id)| (at.0, *id)))
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

    async fn redrive_candidates(
        &mut self,
        selection: &DeadLetterFilter,
        last: Option<(Ts, i64)>,
        limit: i64,
    ) -> StoreResult<Vec<(Ts, i64)>> {
        let sql = candidates(selection, last, limit);
        let letters = dispatch!(&mut self.inner, tx => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(&mut **tx).await?
        });
        Ok(letters)
    }
}

impl Store {
    /// What a redrive of `selection` would take now (the oldest
    /// [`REDRIVE_MAX`] open letters it matches): what the page's form offers.
    /// Read for each page, never from a cache another person filled.
    pub async fn redrive_offer(&self, selection: &DeadLetterFilter) -> StoreResult<RedriveOffer> {
        let sql = candidates(selection, None, REDRIVE_MAX);
        let letters: Vec<(Ts, i64)> = dispatch!(&self.pools, pool => {
            bind_all!(sqlx::query_as(&sql.text), &sql.binds).fetch_all(pool).await?
        });
        Ok(offer_of(&letters))
    }

    /// Starts a redrive of exactly the open dead letters `req.offer` names:
    /// the run, its items and its summary audit row in one transaction.
    /// Replays happen in [`Store::redrive_step`].
    pub async fn start_redrive(&self, req: &RedriveRequest<'_>) -> StoreResult<RedriveStart> {
        if let Some(first) = self.redrive_by_action(req).await? {
            return Ok(first);
        }
        let mut tx = self.begin().await?;
        let error = match start_in(&mut tx, req).await {
            Ok(started @ RedriveStart::Started { .. }) => match tx.commit().await {
                Ok(()) => return Ok(started),
                Err(err) => err,
            },
            Ok(other) => {
                tx.rollback().await?;
                return Ok(other);
            }
            Err(err) => {
                let _ = tx.rollback().await;
                err
            }
        };
        // A twin submission committed first: its run is this one.
        if error.is_unique_violation() {
            return Ok(self
                .redrive_by_action(req)
                .await?
                .unwrap_or(RedriveStart::FormReused));
        }
        Err(error)
    }

    /// The run `req`'s action id already started, if any: the same run for
    /// the same starter, selection and offer; `FormReused` otherwise.
    async fn redrive_by_action(
        &self,
        req: &RedriveRequest<'_>,
    ) -> StoreResult<Option<RedriveStart>> {
        const SQL: &str = "SELECT r.id, r.actor, r.selection, r.offer, r.audit_id, \
             (SELECT COUNT(*) FROM redrive_items i WHERE i.redrive_id = r.id) \
             FROM redrives r WHERE r.action_id = $1";
        type Found = (i64, String, String, String, i64, i64);
        let found: Option<Found> = dispatch!(&self.pools, pool => {
            sqlx::query_as(SQL).bind(req.action_id.as_str()).fetch_optional(pool).await?
        });
        Ok(found.map(|(id, actor, selection, offer, audit_id, items)| {
            let same = actor == req.actor.name
                && selection == req.selection.describe()
                && offer == req.offer.token();
            if same {
                RedriveStart::Started {
                    id,
                    items,
                    audit_id,
                }
            } else {
                RedriveStart::FormReused
            }
        }))
    }

    /// A run and its items, in order.
    pub async fn redrive(&self, id: i64) -> StoreResult<Option<(Redrive, Vec<RedriveItem>)>> {
        let run_sql = format!("SELECT {RUN_COLUMNS} FROM redrives WHERE id = $1");
        const ITEMS: &str = "SELECT i.position, i.dead_letter_id, d.consumer, \
             d.idempotency_key AS key, i.outcome, i.reason, i.audit_id, i.done_at \
             FROM redrive_items i JOIN dead_letters d ON d.id = i.dead_letter_id \
             WHERE i.redrive_id = $1 ORDER BY i.position";
        let run: Option<RunRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&run_sql).bind(id).fetch_optional(pool).await?
        });
        let Some(run) = run else {
            return Ok(None);
        };
        let items: Vec<ItemRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(ITEMS).bind(id).fetch_all(pool).await?
        });
        Ok(Some((run.try_into()?, crate::rows::convert(items)?)))
    }

    /// The run whose start `audit_id` records, if any.
    pub async fn redrive_of_audit(&self, audit_id: i64) -> StoreResult<Option<i64>> {
        const SQL: &str = "SELECT id FROM redrives WHERE audit_id = $1";
        let id = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(audit_id).fetch_optional(pool).await?
        });
        Ok(id)
    }

    /// The runs still running, oldest first (what a runner paces).
    pub async fn running_redrives(&self) -> StoreResult<Vec<i64>> {
        const SQL: &str = "SELECT id FROM redrives WHERE state = 'running' ORDER BY id";
        let ids = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_all(pool).await?
        });
        Ok(ids)
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

/// [`Store::start_redrive`] inside `tx`: the starter's standing, then the
/// letters, compared with the offer, then the run.
async fn start_in(tx: &mut Tx, req: &RedriveRequest<'_>) -> StoreResult<RedriveStart> {
    let name = req.via_token.map_or(req.actor.name, |t| t.owner);
    let Some((role, disabled, epoch, rights)) = tx.account_standing(name).await? else {
        return Ok(RedriveStart::NotAllowed(format!(
            "there is no account {name}"
        )));
    };
    if let Some(why) = cannot_act(name, &role, disabled) {
        return Ok(RedriveStart::NotAllowed(why));
    }
    if let Some(expected) = req.rights
        && !same_rights(expected, &role, rights.as_deref())
    {
        return Ok(RedriveStart::NotAllowed(format!(
            "{name}'s rights changed after the page was drawn"
        )));
    }
    let last = req.offer.last.map(|(at, id)| (Ts::from(at), id));
    let letters = match last {
        Some(last) => {
            tx.redrive_candidates(req.selection, Some(last), REDRIVE_MAX + 1)
                .await?
        }
        None => Vec::new(),
    };
    if offer_of(&letters) != *req.offer {
        let now = tx
            .redrive_candidates(req.selection, None, REDRIVE_MAX)
            .await?;
        return Ok(match now.is_empty() {
            true => RedriveStart::NothingToRedrive,
            false => RedriveStart::Changed {
                now: offer_of(&now),
            },
        });
    }
    if letters.is_empty() {
        return Ok(RedriveStart::NothingToRedrive);
    }
    let (id, audit_id) = insert_run(tx, req, epoch, &letters).await?;
    Ok(RedriveStart::Started {
        id,
        audit_id,
        items: letters.len() as i64,
    })
}

/// The run, its items and its summary audit row.
async fn insert_run(
    tx: &mut Tx,
    req: &RedriveRequest<'_>,
    starter_epoch: i64,
    letters: &[(Ts, i64)],
) -> StoreResult<(i64, i64)> {
    const RUN: &str = "INSERT INTO redrives (action_id, actor, actor_role, selection, offer, \
         starter_epoch, state, started_at, audit_id, account, token_id) \
         VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9, $10) RETURNING id";
    const ITEM: &str = "INSERT INTO redrive_items (redrive_id, position, dead_letter_id) \
         VALUES ($1, $2, $3)";
    let now = Ts::now();
    let selection = req.selection.describe();
    let reason = format!("{} dead letters: {selection}", letters.len());
    let consumer = req.selection.window.consumer.as_ref().map(|c| c.as_str());
    let audit_id = tx
        .append_audit_at(
            &NewAuditEntry {
                actor: req.actor.name,
                actor_role: req.actor.role,
                action: "redrive",
                consumer,
                state_after: Some("running"),
                reason: Some(&reason),
                result: "ok",
                client_addr: req.actor.client_addr,
                ..Default::default()
            },
            now,
        )
        .await?;
    let id: i64 = dispatch!(&mut tx.inner, tx => {
        sqlx::query_scalar(RUN).bind(req.action_id.as_str()).bind(req.actor.name)
            .bind(req.actor.role).bind(&selection).bind(req.offer.token())
            .bind(starter_epoch).bind(now).bind(audit_id)
            .bind(req.via_token.map(|t| t.owner)).bind(req.via_token.map(|t| t.id))
            .fetch_one(&mut **tx).await?
    });
    for (position, (_, dead_letter)) in letters.iter().enumerate() {
        let position = position as i64 + 1;
        dispatch!(&mut tx.inner, tx => {
            sqlx::query(ITEM).bind(id).bind(position).bind(*dead_letter)
                .execute(&mut **tx).await?;
        });
    }
    Ok((id, audit_id))
}
