//! The confirmation forms of the operator actions, and what they say after.
//!
//! Each form is a plain HTML form posting to its server function, so it
//! works without JavaScript (the server sends the person back, and the page
//! shows the answer the server kept in their session). With JavaScript,
//! `ActionForm` submits in place: the button shows the pending state, the
//! page's data is read again, and the outcome appears at the top of the page
//! ([`ActionAnswer`]) — it has to live outside the data, because re-reading
//! the data re-creates the forms (and removes them once the item needs no
//! action).
//!
//! Every form carries its own action id: the page's fresh id with the
//! form's name added (`…-replay-42`), so two forms on one page never share
//! one. The server binds an id to its action, target and actor when it is
//! first used. A form's id is kept until its action has an answer: a retry
//! after a lost response reuses it, so the server can tell it is the same
//! action.
//!
//! Nothing shown here comes from the page's address: the answer of a plain
//! form post comes from the session, and a value Leptos would take from the
//! address (`?__err=`) is ignored — only submissions made on this page count.

use std::collections::HashMap;

use idem_domain::{
    Claim, DeadLetter,
    action::{ActionOutcome, Verdict},
};
use leptos::prelude::*;
use leptos_router::hooks::use_location;

use crate::{
    api::{DiscardDeadLetter, ReplayDeadLetter, ResolveUnknown},
    components::Time,
    error::AppError,
    links,
};

/// The action ids of a page's forms, kept across re-reads of the page's data.
#[derive(Clone, Copy)]
pub struct ActionIds(StoredValue<HashMap<String, String>>);

/// The page's latest in-page answer, kept across re-reads of the page's data.
#[derive(Clone, Copy)]
struct LastAnswer(RwSignal<Option<Result<ActionOutcome, AppError>>>);

impl ActionIds {
    /// Provides the page's action ids and its latest answer; call once,
    /// outside the data it renders.
    pub fn provide() -> Self {
        let ids = ActionIds(StoredValue::new(HashMap::new()));
        provide_context(ids);
        provide_context(LastAnswer(RwSignal::new(None)));
        ids
    }

    fn get() -> Option<Self> {
        use_context::<ActionIds>()
    }

    /// The id for `form`: the one already chosen, else the page's `fresh`
    /// id (from the server) with the form's short `name` added.
    fn id_for(form: &str, name: &str, fresh: &str) -> String {
        let fresh = form_id(fresh, name);
        match Self::get() {
            Some(ids) => ids
                .0
                .try_update_value(|map| {
                    map.entry(form.to_owned())
                        .or_insert_with(|| fresh.clone())
                        .clone()
                })
                .unwrap_or(fresh),
            None => fresh,
        }
    }

    /// Forgets `form`'s id once its action has an answer.
    fn answered(form: &str) {
        if let Some(ids) = Self::get() {
            ids.0.update_value(|map| {
                map.remove(form);
            });
        }
    }
}

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

/// The answer to the page's latest action: from an in-page submission, else
/// the one a plain form post left in the person's session for this page
/// (`?answer=<action id>` names it; the text comes from the server).
#[component]
pub fn ActionAnswer() -> impl IntoView {
    let location = use_location();
    let from_form = links::query_param(&location.search.get_untracked(), "answer")
        .filter(|id| !id.is_empty() && id.len() <= 64)
        .map(|action_id| {
            Resource::new(
                || (),
                move |()| crate::api::get_action_answer(action_id.clone()),
            )
        });
    let last = use_context::<LastAnswer>();
    let kept = move || {
        from_form.map(|answer| {
            view! {
                <Suspense>
                    {move || Suspend::new(async move {
                        answer_view(answer.await.ok().flatten())
                    })}
                </Suspense>
            }
        })
    };
    move || match last.and_then(|l| l.0.get()) {
        Some(answer) => answer_view(Some(answer)),
        None => kept().into_any(),
    }
}

/// The answer of an in-page submission: an outcome, or — when the response
/// was lost — a warning that the action may have happened.
fn answer_view(result: Option<Result<ActionOutcome, AppError>>) -> AnyView {
    match result {
        None => ().into_any(),
        Some(Ok(outcome)) => view! { <OutcomeNote outcome/> }.into_any(),
        Some(Err(AppError::Transport(_))) => view! {
            <p class="outcome conflict" role="alert">
                "The server's answer was lost: the action may have happened. The page below shows the current state; "
                "if it did not happen, submit again — the form keeps the same action id, so it cannot happen twice."
            </p>
        }
        .into_any(),
        Some(Err(error)) => view! { <p class="outcome refused" role="alert">{error.to_string()}</p> }.into_any(),
    }
}

/// After an in-page submission: re-read the page and, unless the answer was
/// lost, let the next submission carry a new action id. Only answers to
/// submissions made on this page count (`version` > 0): the value Leptos
/// takes from an address's `?__err=` is not one.
fn settle<S>(form: String, action: ServerAction<S>, reload: Callback<()>)
where
    S: leptos::server_fn::ServerFn<Output = ActionOutcome, Error = AppError>
        + Clone
        + Send
        + Sync
        + 'static,
{
    let last = use_context::<LastAnswer>();
    Effect::new(move |_| {
        let submitted = action.version().get() > 0;
        if let Some(result) = action.value().get().filter(|_| submitted) {
            if !matches!(result, Err(AppError::Transport(_))) {
                ActionIds::answered(&form);
            }
            if let Some(last) = last {
                last.0.set(Some(result));
            }
            reload.run(());
        }
    });
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
pub fn ReplayForm(
    dead_letter: DeadLetter,
    verdict: Verdict,
    action_id: String,
    reload: Callback<()>,
) -> impl IntoView {
    let form = format!("replay:{}", dead_letter.id);
    let action_id = ActionIds::id_for(&form, &format!("replay-{}", dead_letter.id), &action_id);
    let replay = ServerAction::<ReplayDeadLetter>::new();
    settle(form, replay, reload);
    let needs_override = verdict.needs_override();
    let pending = replay.pending();
    let resolve_href = format!(
        "{}#resolve",
        links::key_href(&dead_letter.consumer, &dead_letter.key)
    );
    view! {
        <section class="action-form" aria-labelledby=format!("replay-{}", dead_letter.id)>
            <h3 id=format!("replay-{}", dead_letter.id)>"Replay dead letter #" {dead_letter.id}</h3>
            <VerdictBox verdict=verdict.clone() resolve_href/>
            <ActionForm action=replay>
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
                <button type="submit" disabled=move || pending.get()>
                    {move || if pending.get() { "Replaying…" } else { "Replay with the same key" }}
                </button>
            </ActionForm>
        </section>
    }
}

/// "Discard dead letter #42": only offered when the key is already sent.
#[component]
pub fn DiscardForm(dead_letter_id: i64, action_id: String, reload: Callback<()>) -> impl IntoView {
    let form = format!("discard:{dead_letter_id}");
    let action_id = ActionIds::id_for(&form, &format!("discard-{dead_letter_id}"), &action_id);
    let discard = ServerAction::<DiscardDeadLetter>::new();
    settle(form, discard, reload);
    let pending = discard.pending();
    view! {
        <section class="action-form" aria-labelledby=format!("discard-{dead_letter_id}")>
            <h3 id=format!("discard-{dead_letter_id}")>"Discard dead letter #" {dead_letter_id}</h3>
            <p>"The key is already sent: its effect happened, so this message need not be replayed."</p>
            <ActionForm action=discard>
                <input type="hidden" name="id" value=dead_letter_id.to_string()/>
                <input type="hidden" name="action_id" value=action_id/>
                <label>"Reason (required)" <textarea name="reason" rows="2" maxlength="2000" required></textarea></label>
                <button type="submit" disabled=move || pending.get()>
                    {move || if pending.get() { "Discarding…" } else { "Discard" }}
                </button>
            </ActionForm>
        </section>
    }
}

/// "Resolve the unknown outcome": sent (with the reference), failed and
/// retry, or failed for good — only while the claim is still at the version shown.
#[component]
pub fn ResolveForm(claim: Claim, action_id: String, reload: Callback<()>) -> impl IntoView {
    let form = format!("resolve:{}:{}", claim.consumer, claim.key);
    let action_id = ActionIds::id_for(&form, "resolve", &action_id);
    let resolve = ServerAction::<ResolveUnknown>::new();
    settle(form, resolve, reload);
    let pending = resolve.pending();
    view! {
        <section class="action-form" id="resolve" aria-labelledby="resolve-heading">
            <h3 id="resolve-heading">"Resolve the unknown outcome"</h3>
            <p>
                "Check with the provider (by the key or the time of the attempt), then record what happened. "
                "Only a claim still unknown at version " {claim.version} " is changed."
            </p>
            <ActionForm action=resolve>
                <input type="hidden" name="consumer" value=claim.consumer.clone()/>
                <input type="hidden" name="key" value=claim.key.clone()/>
                <input type="hidden" name="version" value=claim.version.to_string()/>
                <input type="hidden" name="action_id" value=action_id/>
                <fieldset>
                    <legend>"The provider…"</legend>
                    <label><input type="radio" name="outcome" value="sent" required/>" acted: mark sent, with its reference "</label>
                    <input type="text" name="provider_ref" maxlength="256" placeholder="provider reference, e.g. msg_01J8…" aria-label="Provider reference"/>
                    <label><input type="radio" name="outcome" value="failed-retry"/>" did not act: mark failed and retry (same key, through the outbox)"</label>
                    <label><input type="radio" name="outcome" value="failed"/>" did not act, and it must not be retried: mark failed"</label>
                </fieldset>
                <label>"Reason (required for “failed” without a retry)" <textarea name="reason" rows="2" maxlength="2000"></textarea></label>
                <button type="submit" disabled=move || pending.get()>
                    {move || if pending.get() { "Recording…" } else { "Record the outcome" }}
                </button>
            </ActionForm>
        </section>
    }
}
