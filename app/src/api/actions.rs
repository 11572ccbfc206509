//! The operator actions, as server functions under `/api/act` (operators
//! only; the guard refuses everyone else before these run, and each checks
//! again). They are `POST`s that work from a plain form: without JavaScript
//! the answer is a redirect back to the page, which shows the answer kept
//! in the person's session (`serving::answer_form`), never text from the address.

use idem_domain::action::ActionOutcome;
use leptos::prelude::*;

use crate::error::AppError;

/// The actions' server-only code: who acts, on what, and how it is answered.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use idem_domain::action::ActionOutcome;
    use idem_store::Actor;

    use crate::{auth::CurrentUser, error::AppError};

    pub struct Acting {
        pub user: CurrentUser,
        pub client: Option<String>,
        /// The consumers this operator may act on; the store checks it
        /// again inside each action's transaction.
        pub scope: idem_domain::Within,
    }

    impl Acting {
        pub fn actor(&self) -> Actor<'_> {
            Actor {
                name: &self.user.username,
                role: self.user.role.as_str(),
                client_addr: self.client.as_deref(),
            }
        }
    }

    /// The operator, or the reason they may not act.
    pub fn operator() -> Result<Acting, AppError> {
        let user = crate::serving::require(idem_domain::Role::Operator)?;
        let client = crate::serving::client_addr();
        let scope = crate::serving::within(idem_domain::Role::Operator)?;
        Ok(Acting {
            user,
            client,
            scope,
        })
    }

    /// Refuses any action on a consumer Idem reads through an adapter.
    pub fn writable(consumer: &str) -> Result<(), AppError> {
        match crate::serving::state()?.read_only.reason(consumer) {
            Some(reason) => Err(AppError::ReadOnly(reason)),
            None => Ok(()),
        }
    }

    /// Refuses a resolution on a consumer Idem reads through an adapter,
    /// unless its adapter writes resolutions back into the team's own table.
    pub async fn resolvable(consumer: &str) -> Result<(), AppError> {
        let state = crate::serving::state()?;
        match state.read_only.reason(consumer) {
            Some(reason)
                if state
                    .store
                    .actions()
                    .resolve_write_back(consumer)
                    .await?
                    .is_none() =>
            {
                Err(AppError::ReadOnly(reason))
            }
            _ => Ok(()),
        }
    }

    /// Refuses an action on a dead letter whose consumer is read-only. The
    /// dead letter is read within the operator's scope: another team's, like
    /// an unknown id, is left for the action to report as missing (the
    /// store reads it within the same scope in the action's transaction).
    pub async fn writable_dead_letter(
        id: idem_domain::DeadLetterId,
        scope: &idem_domain::Within,
    ) -> Result<(), AppError> {
        let state = crate::serving::state()?;
        let claims = state.store.claims();
        if let Some(dead_letter) = claims.dead_letter(id, scope).await? {
            return writable(&dead_letter.consumer);
        }
        // One the person may read but not operate is theirs to see: the
        // refusal says what they lack (a 403 naming its team).
        let readable = crate::serving::within(idem_domain::Role::Viewer)?;
        if readable != *scope
            && let Some(seen) = claims.dead_letter(id, &readable).await?
        {
            crate::serving::require_on(&seen.consumer, idem_domain::Role::Operator).await?;
        }
        Ok(())
    }

    /// A reason as typed: blank is none.
    pub fn reason(text: &str) -> Result<Option<idem_domain::action::Reason>, AppError> {
        Ok(idem_domain::action::Reason::parse(text)?)
    }

    /// Runs an action's body and answers it: a form used twice for
    /// different things is a 409 that says what it did first, and a plain
    /// form post is sent back to its page (see `serving::answer_form`).
    pub async fn act(
        action_id: &str,
        body: impl Future<Output = Result<ActionOutcome, AppError>>,
    ) -> Result<ActionOutcome, AppError> {
        let result = crate::serving::serve(async {
            match body.await? {
                ActionOutcome::FormReused { first } => Err(AppError::FormReused(first)),
                outcome => Ok(outcome),
            }
        })
        .await;
        crate::serving::answer_form(action_id, result).await
    }

    /// An action id as the form carried it: a short token, nothing else.
    pub fn action_id(id: &str) -> Result<idem_domain::action::ActionId, AppError> {
        Ok(idem_domain::action::ActionId::parse(id)?)
    }
}

/// Replays one dead letter through the outbox with the same key.
#[server(prefix = "/api/act")]
pub async fn replay_dead_letter(
    id: i64,
    action_id: String,
    #[server(default)] override_verdict: Option<String>,
    #[server(default)] reason: String,
) -> Result<ActionOutcome, AppError> {
    ssr::act(&action_id, async {
        let acting = ssr::operator()?;
        let reason = ssr::reason(&reason)?;
        let id = idem_domain::DeadLetterId::of_row(id);
        ssr::writable_dead_letter(id, &acting.scope).await?;
        let state = crate::serving::state()?;
        let outcome = state
            .store
            .actions()
            .replay_dead_letter(&idem_store::ReplayRequest {
                scope: &acting.scope,
                dead_letter_id: id,
                action_id: &ssr::action_id(&action_id)?,
                actor: acting.actor(),
                override_verdict: override_verdict.is_some(),
                reason: reason.as_ref(),
                retention: &state.claim_retention,
            })
            .await?;
        // A broker's dead letter: Idem publishes the replay itself, now and
        // whenever the same form comes back (the replay is not repeated).
        Ok(match outcome {
            ActionOutcome::Done {
                audit_id,
                outbox_id: Some(outbox_id),
                summary,
            } => ActionOutcome::Done {
                audit_id,
                outbox_id: Some(outbox_id),
                summary: state.republisher.publish(outbox_id).await.extend(summary),
            },
            other => other,
        })
    })
    .await
}

/// Discards one dead letter whose key is already sent.
#[server(prefix = "/api/act")]
pub async fn discard_dead_letter(
    id: i64,
    action_id: String,
    #[server(default)] reason: String,
) -> Result<ActionOutcome, AppError> {
    ssr::act(&action_id, async {
        let acting = ssr::operator()?;
        let Some(reason) = ssr::reason(&reason)? else {
            return Ok(ActionOutcome::Refused {
                reason: "Discarding needs a reason.".into(),
            });
        };
        let id = idem_domain::DeadLetterId::of_row(id);
        ssr::writable_dead_letter(id, &acting.scope).await?;
        let state = crate::serving::state()?;
        Ok(state
            .store
            .actions()
            .discard_dead_letter(&idem_store::DiscardRequest {
                scope: &acting.scope,
                dead_letter_id: id,
                action_id: &ssr::action_id(&action_id)?,
                actor: acting.actor(),
                reason: &reason,
            })
            .await?)
    })
    .await
}

/// Resolves one unknown outcome: `sent` (with the provider reference),
/// `failed-retry` (and retry through the outbox, same key) or `failed`.
#[server(prefix = "/api/act")]
pub async fn resolve_unknown(
    consumer: String,
    key: String,
    version: i64,
    action_id: String,
    outcome: String,
    #[server(default)] provider_ref: String,
    #[server(default)] reason: String,
) -> Result<ActionOutcome, AppError> {
    use idem_domain::{ConsumerName, IdempotencyKey, action::Resolution};
    ssr::act(&action_id, async {
        let acting = ssr::operator()?;
        let consumer = ConsumerName::parse(consumer)?;
        let key = IdempotencyKey::parse(key)?;
        let reason = ssr::reason(&reason)?;
        let provider_ref = idem_domain::action::ProviderRef::parse(&provider_ref)?;
        // Another team's key is left for the store to answer as missing;
        // only the person's own consumers can say they are read-only.
        if acting.scope.allows(consumer.as_str()) {
            ssr::resolvable(consumer.as_str()).await?;
        }
        let resolution = match outcome.as_str() {
            "sent" => match provider_ref {
                Some(provider_ref) => Resolution::Sent { provider_ref },
                None => {
                    return Ok(ActionOutcome::Refused {
                        reason: "Marking an outcome sent needs the provider's reference.".into(),
                    });
                }
            },
            "failed-retry" => Resolution::FailedRetry,
            "failed" => Resolution::FailedPermanently,
            other => {
                return Err(AppError::BadRequest(format!(
                    "“{other}” is not a resolution (sent, failed-retry or failed)."
                )));
            }
        };
        let state = crate::serving::state()?;
        Ok(state
            .store
            .actions()
            .resolve_unknown(&idem_store::ResolveRequest {
                scope: &acting.scope,
                consumer: &consumer,
                key: &key,
                version,
                resolution,
                action_id: &ssr::action_id(&action_id)?,
                actor: acting.actor(),
                reason: reason.as_ref(),
            })
            .await?)
    })
    .await
}

/// The answer to the action `action_id` that a plain form post left in the
/// signed-in person's session, if that is the action it names; shown once.
#[server(prefix = "/api/read", input = server_fn::codec::GetUrl)]
pub async fn get_action_answer(
    action_id: String,
) -> Result<Option<Result<ActionOutcome, AppError>>, AppError> {
    crate::serving::serve(async move {
        crate::serving::require(idem_domain::Role::Viewer)?;
        Ok(crate::serving::take_answer(&action_id).await)
    })
    .await
}
