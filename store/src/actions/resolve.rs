//! Resolving an unknown outcome: the operator says whether the provider
//! acted, the claim moves from `unknown` (at the version the form showed) to
//! `sent` or `failed`, and a retry goes back through the outbox. A claim
//! whose worker's lease ran out with no outcome (an abandoned lease) is
//! resolved the same way, once the lease has really expired: until then the
//! worker may still be calling the provider.

use chrono::Utc;
use idem_domain::{
    AuditResult, AuditState, ClaimState, ClaimStatus, OutboxOrigin,
    action::{ActionOutcome, ProviderRef, Resolution},
};

use super::{ResolveRequest, claim_state_before, recovery_seconds, refused, summary};
use crate::{
    NewAuditEntry, StoreResult, consumer::NewOutboxRow, dialect::dispatch, store::Tx, ts::Ts,
    write_backs::WriteBack,
};

/// The claim `req` names, if the actor's scope reaches its consumer: one
/// of another team's reads as one nobody wrote.
async fn claim_in_scope(
    tx: &mut Tx,
    req: &ResolveRequest<'_>,
) -> StoreResult<Option<idem_domain::Claim>> {
    if !req.scope.allows(req.consumer.as_str()) {
        return Ok(None);
    }
    tx.read_claim(req.consumer.as_str(), req.key.as_str()).await
}

/// Resolves the unknown outcome `req` names, inside `tx`, as of `now`.
pub(super) async fn resolve(
    tx: &mut Tx,
    req: &ResolveRequest<'_>,
    now: chrono::DateTime<Utc>,
) -> StoreResult<ActionOutcome> {
    let (reason, provider_ref) = match checked_input(req) {
        Ok(input) => input,
        Err(refusal) => return Ok(refusal),
    };
    let Some(claim) = claim_in_scope(tx, req).await? else {
        return Ok(refused(format!(
            "No consumer named “{}” has a claim for “{}”.",
            req.consumer.as_str(),
            req.key.as_str()
        )));
    };
    let write_back = match may_resolve(tx, req, &claim, now).await? {
        Ok(write_back) => write_back,
        Err(answer) => return Ok(answer),
    };
    let status = req.resolution.status();
    let error = resolved_error(req, reason);
    let changed = tx
        .resolve_claim(
            &claim,
            status,
            provider_ref.map(ProviderRef::as_str),
            error.as_deref(),
            Ts::from(now),
        )
        .await?;
    if !changed {
        return conflict_on_claim(tx, req).await;
    }
    // The team's own table, in the same transaction as the audit row below.
    if let Some(function) = write_back {
        let written = tx
            .write_back_resolution(
                &function,
                req.key.as_str(),
                status,
                provider_ref.map(ProviderRef::as_str),
                error.as_deref(),
            )
            .await?;
        if written == WriteBack::Refused {
            return Ok(refused(format!(
                "“{}”'s own table no longer holds this key as unresolved; nothing was changed. \
                 Reload the page to see what its workers recorded.",
                req.consumer.as_str()
            )));
        }
    }
    observe_outcome(tx, &claim, now).await?;
    let after = state_after(provider_ref, status, claim.version);
    let audit_id = tx
        .append_audit_at(
            &NewAuditEntry {
                action_id: Some(req.action_id.as_str()),
                actor: req.actor.name,
                actor_role: req.actor.role,
                action: req.resolution.action(),
                consumer: Some(req.consumer.as_str()),
                key: Some(req.key.as_str()),
                target: None,
                state_before: Some(claim_state_before(&claim)),
                state_after: Some(after.clone()),
                reason,
                result: AuditResult::Ok,
                client_addr: req.actor.client_addr,
                recovery_seconds: Some(recovery_seconds(claim.unknown_since(), now)),
            },
            Ts::from(now),
        )
        .await?;
    let outbox_id = retry_through_outbox(tx, req, audit_id, now).await?;
    Ok(ActionOutcome::Done {
        audit_id,
        outbox_id,
        summary: summary(req.resolution.action(), None, Some(&after), outbox_id),
    })
}

/// The outcome is recorded now: it counts in `outcome_latency_seconds`
/// (and so in `reconciled-15m`) from this minute, as a worker's would.
async fn observe_outcome(
    tx: &mut Tx,
    claim: &idem_domain::Claim,
    now: chrono::DateTime<Utc>,
) -> StoreResult<()> {
    let seconds = (now - claim.first_delivery_at).num_milliseconds().max(0) as f64 / 1000.0;
    let metric = idem_domain::Metric::OutcomeLatencySeconds;
    let observed = idem_consumer::MetricSample {
        consumer: claim.consumer.clone(),
        metric,
        at: Ts::from(now),
        bucket: metric.bucket_for(seconds),
        value: 1.0,
    };
    idem_consumer::write_metrics(tx.conn(), &[observed]).await?;
    Ok(())
}

/// Whether `claim` may be resolved as `req` asks at `now`: the function
/// its adapter writes resolutions back with, if any; or the answer that
/// ends the action (a conflict, a lease still held, a retry the consumer's
/// own table cannot take).
async fn may_resolve(
    tx: &mut Tx,
    req: &ResolveRequest<'_>,
    claim: &idem_domain::Claim,
    now: chrono::DateTime<Utc>,
) -> StoreResult<Result<Option<String>, ActionOutcome>> {
    if claim.version != req.version {
        return conflict_on_claim(tx, req).await.map(Err);
    }
    if !claim.is_resolvable(now) {
        return match claim.lease_until.filter(|until| *until >= now) {
            Some(until) if claim.status == ClaimStatus::Pending => Ok(Err(refused(format!(
                "A worker holds this claim until {}: it may still be calling the provider. \
                 Resolve it once the lease has expired.",
                until.format("%Y-%m-%d %H:%M:%S UTC")
            )))),
            _ => conflict_on_claim(tx, req).await.map(Err),
        };
    }
    let write_back = tx.declared_write_back(req.consumer.as_str()).await?;
    if write_back.is_some() && req.resolution == Resolution::FailedRetry {
        return Ok(Err(refused(format!(
            "“{}” keeps its outcomes in its own table: a retry through Idem's outbox would \
             publish where its workers never look. Mark it failed, and retry in its own system.",
            req.consumer.as_str()
        ))));
    }
    Ok(Ok(write_back))
}

/// The request's reason and provider reference (each already checked as
/// it was typed); or the refusal that ends the action before anything is
/// read.
fn checked_input<'r>(
    req: &'r ResolveRequest<'_>,
) -> Result<(Option<&'r str>, Option<&'r ProviderRef>), ActionOutcome> {
    let reason = req.reason.map(|r| r.as_str());
    let provider_ref = match &req.resolution {
        Resolution::Sent { provider_ref } => Some(provider_ref),
        Resolution::FailedPermanently if reason.is_none() => {
            return Err(refused(
                "Marking an outcome failed for good needs a reason.",
            ));
        }
        _ => None,
    };
    Ok((reason, provider_ref))
}

/// The error a resolution to failed records on the claim (none for sent).
fn resolved_error(req: &ResolveRequest<'_>, reason: Option<&str>) -> Option<String> {
    match &req.resolution {
        Resolution::Sent { .. } => None,
        _ => Some(format!(
            "resolved failed by {}: {}",
            req.actor.name,
            reason.unwrap_or("no reason given")
        )),
    }
}

/// The claim's state after the resolution, as the audit row records it.
fn state_after(
    provider_ref: Option<&ProviderRef>,
    status: ClaimStatus,
    version: i64,
) -> AuditState {
    AuditState::Claim(ClaimState {
        provider_ref: provider_ref.map(|r| r.as_str().to_owned()),
        ..ClaimState::at(status, version + 1)
    })
}

/// For a retry, the outbox row that carries the key's last known message
/// again; `None` for any other resolution.
async fn retry_through_outbox(
    tx: &mut Tx,
    req: &ResolveRequest<'_>,
    audit_id: i64,
    now: chrono::DateTime<Utc>,
) -> StoreResult<Option<i64>> {
    Ok(match req.resolution {
        Resolution::FailedRetry => {
            let (topic, payload) = tx
                .last_known_message(req.consumer.as_str(), req.key.as_str())
                .await?;
            Some(
                tx.enqueue(&NewOutboxRow {
                    consumer: req.consumer.as_str(),
                    topic: &topic,
                    key: req.key.as_str(),
                    payload: &payload,
                    origin: OutboxOrigin::Resolution,
                    dead_letter_id: None,
                    audit_id: Some(audit_id),
                    at: Ts::from(now),
                })
                .await?,
            )
        }
        _ => None,
    })
}

/// Who changed the claim first, and to what: the latest resolution of the
/// key in the audit log when it is no older than the claim's change, else
/// the consumer. Other entries about the key (a replay of one of its dead
/// letters, say) touched the key, not the claim.
async fn conflict_on_claim(tx: &mut Tx, req: &ResolveRequest<'_>) -> StoreResult<ActionOutcome> {
    let claim = tx
        .read_claim(req.consumer.as_str(), req.key.as_str())
        .await?;
    let latest = tx
        .latest_resolution_of(req.consumer.as_str(), req.key.as_str())
        .await?;
    Ok(match claim {
        None => refused("The claim no longer exists."),
        Some(claim) => {
            let by_operator = latest.filter(|(_, at, _)| *at >= claim.status_at);
            let now = format!("{} (version {})", claim.status, claim.version);
            match by_operator {
                Some((by, at, _)) => ActionOutcome::Conflict {
                    by,
                    at: Some(at),
                    now,
                },
                None => ActionOutcome::Conflict {
                    by: format!("the consumer {}", claim.consumer),
                    at: Some(claim.status_at),
                    now,
                },
            }
        }
    })
}

impl Tx {
    /// One claim, read inside this transaction.
    pub async fn read_claim(
        &mut self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<Option<idem_domain::Claim>> {
        use crate::rows::{ClaimRow, claim_columns};
        const SQL: &str = concat!(
            "SELECT ",
            claim_columns!(),
            " FROM claims WHERE consumer = $1 AND idempotency_key = $2"
        );
        let row: Option<ClaimRow> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(SQL).bind(consumer).bind(key).fetch_optional(&mut **tx).await?
        });
        row.map(idem_domain::Claim::try_from).transpose()
    }

    /// Compare-and-set: only a claim still at the version seen, and still
    /// `unknown` or pending with its lease expired at `at`.
    async fn resolve_claim(
        &mut self,
        seen: &idem_domain::Claim,
        status: ClaimStatus,
        provider_ref: Option<&str>,
        error: Option<&str>,
        at: Ts,
    ) -> StoreResult<bool> {
        const SQL: &str = "UPDATE claims SET status = $3, status_at = $4, outcome_at = $4, \
             provider_ref = COALESCE($5, provider_ref), last_error = $6, lease_until = NULL, version = version + 1 \
             WHERE consumer = $1 AND idempotency_key = $2 AND version = $7 \
             AND (status = 'unknown' OR (status = 'pending' AND lease_until IS NOT NULL AND lease_until < $4))";
        let changed = dispatch!(&mut self.inner, tx => {
            sqlx::query(SQL).bind(&seen.consumer).bind(&seen.key).bind(status.as_str()).bind(at)
                .bind(provider_ref).bind(error).bind(seen.version).execute(&mut **tx).await?.rows_affected()
        });
        Ok(changed == 1)
    }

    async fn latest_resolution_of(
        &mut self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<Option<(String, chrono::DateTime<Utc>, Option<String>)>> {
        let sql = format!(
            "SELECT actor, at, state_after FROM audit_log \
             WHERE consumer = $1 AND idempotency_key = $2 AND {} \
             ORDER BY at DESC, id DESC LIMIT 1",
            crate::audit::resolutions("action")
        );
        let row: Option<(String, Ts, Option<String>)> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(&sql).bind(consumer).bind(key).fetch_optional(&mut **tx).await?
        });
        Ok(row.map(|(actor, at, after)| (actor, at.0, after)))
    }

    /// The topic and payload a retry of this key should carry: the latest
    /// dead letter's or outbox row's, else an envelope that names the key so
    /// the consumer can re-read the business fact.
    async fn last_known_message(
        &mut self,
        consumer: &str,
        key: &str,
    ) -> StoreResult<(String, String)> {
        const SQL: &str = "SELECT topic, payload, at FROM ( \
             SELECT queue AS topic, payload, dead_lettered_at AS at FROM dead_letters WHERE consumer = $1 AND idempotency_key = $2 \
             UNION ALL \
             SELECT topic, payload, created_at AS at FROM outbox WHERE consumer = $1 AND idempotency_key = $2 AND origin <> 'application' \
             ) AS known ORDER BY at DESC LIMIT 1";
        let row: Option<(String, String, Ts)> = dispatch!(&mut self.inner, tx => {
            sqlx::query_as(SQL).bind(consumer).bind(key).fetch_optional(&mut **tx).await?
        });
        Ok(match row {
            Some((topic, payload, _)) => (topic, payload),
            None => (
                consumer.to_owned(),
                serde_json::json!({ "idempotency_key": key, "redrive": "resolution" }).to_string(),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    use idem_domain::{
        ConsumerName, IdempotencyKey, Within,
        action::{ActionId, Reason},
    };

    use crate::Actor;

    fn request(resolution: Resolution, reason: Option<&Reason>) -> ResolveRequest<'_> {
        static CONSUMER: LazyLock<ConsumerName> =
            LazyLock::new(|| ConsumerName::parse("reminders").unwrap());
        static KEY: LazyLock<IdempotencyKey> =
            LazyLock::new(|| IdempotencyKey::parse("k").unwrap());
        static ACTION: LazyLock<ActionId> = LazyLock::new(|| ActionId::parse("action-1").unwrap());
        ResolveRequest {
            consumer: &CONSUMER,
            key: &KEY,
            version: 3,
            resolution,
            action_id: &ACTION,
            actor: Actor {
                name: "olga",
                role: "operator",
                client_addr: None,
            },
            scope: &Within::Every,
            reason,
        }
    }

    fn refusal(req: &ResolveRequest<'_>) -> String {
        match checked_input(req) {
            Err(ActionOutcome::Refused { reason }) => reason,
            other => panic!("not refused: {other:?}"),
        }
    }

    fn sent(r: &str) -> Resolution {
        Resolution::Sent {
            provider_ref: ProviderRef::parse(r).unwrap().unwrap(),
        }
    }

    #[test]
    fn a_resolution_needs_what_it_records() {
        let checked = Reason::parse("  checked  ").unwrap();
        let req = request(sent(" msg_1 "), checked.as_ref());
        let (reason, reference) = checked_input(&req).unwrap();
        assert_eq!(
            (reason, reference.map(ProviderRef::as_str)),
            (Some("checked"), Some("msg_1"))
        );
        assert!(refusal(&request(Resolution::FailedPermanently, None)).contains("needs a reason"));
        assert_eq!(
            checked_input(&request(Resolution::FailedRetry, None)).unwrap(),
            (None, None)
        );
    }

    #[test]
    fn a_failed_resolution_records_who_and_why() {
        let req = request(Resolution::FailedRetry, None);
        assert_eq!(
            resolved_error(&req, None).as_deref(),
            Some("resolved failed by olga: no reason given")
        );
        let sent_one = request(sent("msg_1"), None);
        assert_eq!(resolved_error(&sent_one, Some("x")), None);
        let reference = ProviderRef::parse("msg_1").unwrap();
        assert_eq!(
            state_after(reference.as_ref(), ClaimStatus::Sent, 3).to_string(),
            "sent (provider reference msg_1, version 4)"
        );
        assert_eq!(
            state_after(None, ClaimStatus::Failed, 3).to_string(),
            "failed (version 4)"
        );
    }
}
