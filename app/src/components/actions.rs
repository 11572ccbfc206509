//! The confirmation forms of the operator actions, and what they say after.
//!
//! Each form is a plain HTML form posting to its server function: the
//! server answers with a 303 back to the page the form was on, keeping the
//! answer in the person's session, and the page shows it ([`ActionAnswer`])
//! above its data, read again. With JavaScript the same post goes out; the
//! [`SubmitOnce`] island only says it is under way and stops a second press.
//!
//! Every form carries its own action id: the page's fresh id with the
//! form's name added (`…-replay-42`), so two forms on one page never share
//! one. The server binds an id to its action, target and actor when it is
//! first used, so a post repeated after a lost response (the browser's
//! "resubmit") returns the first outcome instead of acting twice.
//!
//! Nothing shown here comes from the page's address: the answer comes from
//! the session, and `?answer=` only names which one; a value Leptos would
//! take from the address (`?__err=`) is ignored.

use idem_domain::{
    Claim, DeadLetter,
    action::{ActionOutcome, Verdict},
};
use leptos::{prelude::*, server_fn::ServerFn};
use leptos_router::hooks::use_location;

use crate::{
    api::{DiscardDeadLetter, ReplayDeadLetter, ResolveUnknown},
    components::{SubmitOnce, Time},
    error::AppError,
    links,
};

/// A form's own action id: the page's id and the form's short name
/// (`replay-42`, `discard-42`, `resolve`).
pub fn form_id(page_id: &str, name: &str) -> String {
    format!("{page_id}-{name}")
}

/// What an outcome says, in a box.
#[component]
pub fn OutcomeNote(outcome: ActionOutcome) -> impl IntoView {
    match outcome {
        ActionOutcome::Done { summary, .. } => {
            view! { <p class="outcome done" role="status">{summary}</p> }.into_any()
        }
        ActionOutcome::Conflict { by, at, now } => view! {
            <p class="outcome conflict" role="alert">
                "Nothing was changed: " <strong>{by}</strong> " got there first"
                {at.map(|at| view! { " at " <Time at/> })}
                ". It is now " <strong>{now}</strong> "."
            </p>
        }
        .into_any(),
        ActionOutcome::Refused { reason } => view! {
            <p class="outcome refused" role="alert">"Not done: " {reason}</p>
        }
        .into_any(),
        ActionOutcome::FormReused { first } => {
            let error = AppError::FormReused(first);
            view! { <p class="outcome refused" role="alert">{error.to_string()}</p> }.into_any()
        }
    }
}

/// The answer to the page's latest action: the one a form post left in the
/// person's session for this page (`?answer=<action id>` names it; the text
/// comes from the server, and is shown once).
#[component]
pub fn ActionAnswer() -> impl IntoView {
    let location = use_location();
    links::query_param(&location.search.get_untracked(), "answer")
        .filter(|id| !id.is_empty() && id.len() <= 64)
        .map(|action_id| {
            let answer = Resource::new(
                || (),
                move |()| crate::api::get_action_answer(action_id.clone()),
            );
            view! {
                <Suspense>
                    {move || Suspend::new(async move {
                        answer_view(answer.await.ok().flatten())
                    })}
                </Suspense>
            }
        })
}

/// An answer: an outcome, or the error that stopped the action.
fn answer_view(result: Option<Result<ActionOutcome, AppError>>) -> AnyView {
    match result {
        None => ().into_any(),
        Some(Ok(outcome)) => view! { <OutcomeNote outcome/> }.into_any(),
        Some(Err(error)) => {
            view! { <p class="outcome refused" role="alert">{error.to_string()}</p> }.into_any()
        }
    }
}

#[component]
pub fn VerdictBox(verdict: Verdict, #[prop(into)] resolve_href: String) -> impl IntoView {
    let class = match verdict {
        Verdict::Safe => "verdict safe",
        Verdict::AlreadySent | Verdict::OutcomeUnknown => "verdict blocked",
        Verdict::NoClaim | Verdict::BeyondRetention { .. } => "verdict caution",
    };
    let resolve = (verdict == Verdict::OutcomeUnknown).then(
        || view! { " " <a href=resolve_href rel="external">"Resolve the outcome first."</a> },
    );
    view! {
        <div class=class>
            <strong>{verdict.title()}</strong>
            <p>{verdict.explanation()} {resolve}</p>
        </div>
    }
}

/// "Replay dead letter #42 with the same key": the verdict, and the form.
#[component]
pub fn ReplayForm(dead_letter: DeadLetter, verdict: Verdict, action_id: String) -> impl IntoView {
    let action_id = form_id(&action_id, &format!("replay-{}", dead_letter.id));
    let needs_override = verdict.needs_override();
    let resolve_href = format!(
        "{}#resolve",
        links::key_href(&dead_letter.consumer, &dead_letter.key)
    );
    view! {
        <section class="action-form" aria-labelledby=format!("replay-{}", dead_letter.id)>
            <h3 id=format!("replay-{}", dead_letter.id)>"Replay dead letter #" {dead_letter.id}</h3>
            <VerdictBox verdict=verdict.clone() resolve_href/>
            <SubmitOnce>
                <form method="post" action=ReplayDeadLetter::PATH>
                    <input type="hidden" name="id" value=dead_letter.id.to_string()/>
                    <input type="hidden" name="action_id" value=action_id/>
                    {needs_override.then(|| view! {
                        <label class="override">
                            <input type="checkbox" name="override_verdict" value="on"/>
                            " Replay anyway (override the verdict)"
                        </label>
                    })}
                    <label>
                        {if needs_override { "Reason (required for an override)" } else { "Reason (optional)" }}
                        <textarea name="reason" rows="2" maxlength="2000"></textarea>
                    </label>
                    <button type="submit" data-busy="Replaying…">"Replay with the same key"</button>
                </form>
            </SubmitOnce>
        </section>
    }
}

/// "Discard dead letter #42": only offered when the key is already sent.
#[component]
pub fn DiscardForm(dead_letter_id: i64, action_id: String) -> impl IntoView {
    let action_id = form_id(&action_id, &format!("discard-{dead_letter_id}"));
    view! {
        <section class="action-form" aria-labelledby=format!("discard-{dead_letter_id}")>
            <h3 id=format!("discard-{dead_letter_id}")>"Discard dead letter #" {dead_letter_id}</h3>
            <p>"The key is already sent: its effect happened, so this message need not be replayed."</p>
            <SubmitOnce>
                <form method="post" action=DiscardDeadLetter::PATH>
                    <input type="hidden" name="id" value=dead_letter_id.to_string()/>
                    <input type="hidden" name="action_id" value=action_id/>
                    <label>"Reason (required)" <textarea name="reason" rows="2" maxlength="2000" required></textarea></label>
                    <button type="submit" data-busy="Discarding…">"Discard"</button>
                </form>
            </SubmitOnce>
        </section>
    }
}

/// What the consumer's provider contract means for a retry, beside the
/// resolution form.
#[component]
fn ContractNote(contract: Option<idem_domain::ProviderContract>) -> impl IntoView {
    match contract {
        Some(contract) => view! {
            <p class="contract-advice">
                <strong>{format!("Provider contract: {}. ", contract.label())}</strong>
                {contract.retry_advice()}
            </p>
        }
        .into_any(),
        None => view! {
            <p class="contract-advice">
                <strong>"Provider contract: not in the catalogue. "</strong>
                "Idem does not know whether this provider honours the key or keeps a reference: "
                "find out before choosing a retry."
            </p>
        }
        .into_any(),
    }
}

/// "Resolve the unknown outcome": sent (with the reference), failed and
/// retry, or failed for good — only while the claim is still at the version shown.
#[component]
pub fn ResolveForm(
    claim: Claim,
    action_id: String,
    /// Whether "failed, and retry through the outbox" is offered.
    #[prop(default = true)]
    retry: bool,
    /// The consumer's provider contract from the catalogue (`None`: not in it).
    #[prop(default = None)]
    contract: Option<idem_domain::ProviderContract>,
) -> impl IntoView {
    let action_id = form_id(&action_id, "resolve");
    // An abandoned lease is resolved as an unknown outcome is: nobody knows
    // whether the dead worker's call reached the provider.
    let abandoned = claim.status == idem_domain::ClaimStatus::Pending;
    let (heading, still) = if abandoned {
        (
            "Resolve the abandoned attempt",
            "still pending with its lease expired",
        )
    } else {
        ("Resolve the unknown outcome", "still unknown")
    };
    view! {
        <section class="action-form" id="resolve" aria-labelledby="resolve-heading">
            <h3 id="resolve-heading">{heading}</h3>
            <p>
                "Check with the provider (by the key or the time of the attempt), then record what happened. "
                "Only a claim " {still} " at version " {claim.version} " is changed."
            </p>
            <ContractNote contract/>
            <SubmitOnce>
                <form method="post" action=ResolveUnknown::PATH>
                    <input type="hidden" name="consumer" value=claim.consumer.clone()/>
                    <input type="hidden" name="key" value=claim.key.clone()/>
                    <input type="hidden" name="version" value=claim.version.to_string()/>
                    <input type="hidden" name="action_id" value=action_id/>
                    <fieldset>
                        <legend>"The provider…"</legend>
                        <label><input type="radio" name="outcome" value="sent" required/>" acted: mark sent, with its reference "</label>
                        <input type="text" name="provider_ref" maxlength="256" placeholder="provider reference, e.g. msg_01J8…" aria-label="Provider reference"/>
                        {retry.then(|| view! {
                            <label><input type="radio" name="outcome" value="failed-retry"/>" did not act: mark failed and retry (same key, through the outbox)"</label>
                        })}
                        <label><input type="radio" name="outcome" value="failed"/>" did not act, and it must not be retried: mark failed"</label>
                    </fieldset>
                    <label>"Reason (required for “failed” without a retry)" <textarea name="reason" rows="2" maxlength="2000"></textarea></label>
                    <button type="submit" data-busy="Recording…">"Record the outcome"</button>
                </form>
            </SubmitOnce>
        </section>
    }
}
