//! The API's reads: each calls the server function the page calls (its
//! guard, rights and store code) and answers its records as JSON.

use axum::{
    extract::{Query, Request, State},
    response::Response,
};
use idem_app::{api, error::AppError, serving::AppState};
use serde::{Deserialize, de::DeserializeOwned};
use utoipa::IntoParams;

use super::{
    call::{answer, call},
    problem::Problem,
    types::{
        AuditList, CheckCount, CheckCounts, ClaimList, DeadLetterList, DeadLetterRecord,
        FindingList, KeyRecord, KeySearch, OutboxList, SloReading, SloReadings,
    },
};

/// The query string as `T`; a malformed one is a 400 problem.
pub fn query<T: DeserializeOwned>(req: &Request) -> Result<T, Problem> {
    Query::<T>::try_from_uri(req.uri())
        .map(|Query(q)| q)
        .map_err(|err| Problem::bad_request(err.body_text()))
}

/// The `N` raw (still percent-encoded) segments after `prefix`, as the
/// pages read them: a key's `/` is `%2F` and stays inside its segment.
/// Any other count is a 404 problem.
pub fn segments<const N: usize>(req: &Request, prefix: &str) -> Result<[String; N], Problem> {
    let found: Option<Vec<String>> = req
        .uri()
        .path()
        .strip_prefix(prefix)
        .map(|rest| rest.split('/').map(str::to_owned).collect());
    found
        .and_then(|s| <[String; N]>::try_from(s).ok())
        .ok_or_else(|| {
            Problem::from(&AppError::NotFound(
                "There is no such address in the API.".into(),
            ))
        })
}

/// The value, or the problem answered at once.
macro_rules! try_or_answer {
    ($e:expr) => {
        match $e {
            Ok(value) => value,
            Err(problem) => return super::problem::Problem::answer(&problem),
        }
    };
}
pub(crate) use try_or_answer;

/// One key's whole story: its claim, outbox rows, dead letters and audit.
#[utoipa::path(get, path = "/api/v1/keys/{consumer}/{key}", tag = "keys",
    params(
        ("consumer" = String, Path, description = "The consumer, percent-encoded."),
        ("key" = String, Path, description = "The idempotency key, percent-encoded (its `/` as `%2F`)."),
    ),
    responses((status = 200, body = KeyRecord), super::Problems))]
pub async fn key(State(state): State<AppState>, req: Request) -> Response {
    let [consumer, key] = try_or_answer!(segments(&req, "/api/v1/keys/"));
    let (parts, _) = req.into_parts();
    let story = call(&state, parts, api::get_key_story(consumer, key)).await;
    answer(story.map(|s| KeyRecord {
        as_of: s.clock.as_of,
        consumer: s.consumer,
        key: s.key,
        claim: s.claim,
        outbox: s.outbox,
        dead_letters: s.dead_letters,
        audit: s.audit,
    }))
}

/// The filters of a key search.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct SearchQuery {
    /// A key or the start of keys; a provider reference or message id matches whole.
    pub q: Option<String>,
    pub consumer: Option<String>,
    /// `pending`, `sent`, `failed` or `unknown`.
    pub status: Option<String>,
    pub cursor: Option<String>,
    /// Page size (the store bounds it).
    pub limit: Option<String>,
}

/// Searches keys as the `/keys` page does: the claims whose key is or
/// starts with `q`, newest first, and whose provider reference or dead
/// letters' message id is `q`.
#[utoipa::path(get, path = "/api/v1/keys", tag = "keys", params(SearchQuery),
    responses((status = 200, body = KeySearch), super::Problems))]
pub async fn search(State(state): State<AppState>, req: Request) -> Response {
    let q: SearchQuery = try_or_answer!(query(&req));
    let query = api::KeyQuery {
        q: q.q.unwrap_or_default(),
        consumer: q.consumer.unwrap_or_default(),
        status: q.status.unwrap_or_default(),
        cursor: q.cursor.unwrap_or_default(),
        limit: q.limit.unwrap_or_default(),
    };
    let (parts, _) = req.into_parts();
    let found = call(&state, parts, api::search_keys(query)).await;
    answer(found.map(|r| {
        let mut items = r.exact;
        let more: Vec<_> = r
            .claims
            .into_iter()
            .filter(|c| !items.contains(c))
            .collect();
        items.extend(more);
        KeySearch {
            as_of: r.clock.as_of,
            items,
            next: r.next,
            total: r.matches,
            by_provider_ref: r.by_provider_ref,
            by_message_id: r.by_message_id,
        }
    }))
}

/// The filters of the lists.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct ListQuery {
    pub consumer: Option<String>,
    /// From this instant (`2026-11-30T14:00Z`).
    pub from: Option<String>,
    /// Before this instant.
    pub to: Option<String>,
    pub cursor: Option<String>,
}

/// The unknown outcomes, oldest first.
#[utoipa::path(get, path = "/api/v1/unknown", tag = "lists", params(ListQuery),
    responses((status = 200, body = ClaimList), super::Problems))]
pub async fn unknown(State(state): State<AppState>, req: Request) -> Response {
    let q: ListQuery = try_or_answer!(query(&req));
    let (parts, _) = req.into_parts();
    let list = call(
        &state,
        parts,
        api::list_unknown(q.cursor, q.from, q.to, q.consumer),
    )
    .await;
    answer(list.map(|u| ClaimList {
        as_of: u.list.clock.as_of,
        items: u.list.page.items,
        next: u.list.page.next,
        total: Some(u.list.total),
    }))
}

/// The filters of the dead-letter list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct DeadLetterQuery {
    /// `open` (the default), `replayed` or `discarded`.
    pub state: Option<String>,
    pub consumer: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// Only letters whose last error contains this text.
    pub error: Option<String>,
    pub cursor: Option<String>,
}

/// Dead letters, oldest first.
#[utoipa::path(get, path = "/api/v1/dead-letters", tag = "lists", params(DeadLetterQuery),
    responses((status = 200, body = DeadLetterList), super::Problems))]
pub async fn dead_letters(State(state): State<AppState>, req: Request) -> Response {
    let q: DeadLetterQuery = try_or_answer!(query(&req));
    let (parts, _) = req.into_parts();
    let call_list = api::list_dead_letters(q.state, q.cursor, q.from, q.to, q.consumer, q.error);
    let list = call(&state, parts, call_list).await;
    answer(list.map(|d| DeadLetterList {
        as_of: d.list.clock.as_of,
        items: d.list.page.items,
        next: d.list.page.next,
        total: Some(d.list.total),
        redrive: d.redrive.map(|form| super::types::RedriveOffer {
            count: form.count,
            offer: form.offer,
            only_of: form.only_of,
        }),
    }))
}

/// One dead letter and its key's claim.
#[utoipa::path(get, path = "/api/v1/dead-letters/{id}", tag = "lists",
    params(("id" = i64, Path, description = "The dead letter's id.")),
    responses((status = 200, body = DeadLetterRecord), super::Problems))]
pub async fn dead_letter(State(state): State<AppState>, req: Request) -> Response {
    let [id] = try_or_answer!(segments(&req, "/api/v1/dead-letters/"));
    let (parts, _) = req.into_parts();
    let detail = call(&state, parts, api::get_dead_letter(id)).await;
    answer(detail.map(|d| DeadLetterRecord {
        as_of: d.clock.as_of,
        dead_letter: d.dead_letter,
        claim: d.claim,
    }))
}

/// The filters of the outbox list.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct OutboxQuery {
    pub consumer: Option<String>,
    pub topic: Option<String>,
    pub cursor: Option<String>,
}

/// Outbox rows not yet published, oldest first.
#[utoipa::path(get, path = "/api/v1/outbox", tag = "lists", params(OutboxQuery),
    responses((status = 200, body = OutboxList), super::Problems))]
pub async fn outbox(State(state): State<AppState>, req: Request) -> Response {
    let q: OutboxQuery = try_or_answer!(query(&req));
    let (parts, _) = req.into_parts();
    let list = call(
        &state,
        parts,
        api::list_outbox(q.cursor, q.consumer, q.topic),
    )
    .await;
    answer(list.map(|o| OutboxList {
        as_of: o.clock.as_of,
        items: o.page.items,
        next: o.page.next,
        total: Some(o.total),
    }))
}

/// The filters of the audit log.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct AuditParams {
    /// Exactly this actor (a token acts as `owner (token name)`).
    pub actor: Option<String>,
    /// Exactly this action: `replay`, `discard`, `resolve:sent`, …
    pub action: Option<String>,
    /// Exactly this idempotency key, under any consumer.
    pub key: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    /// `1`: only recoveries (replays and resolutions, with the time they took).
    pub recoveries: Option<String>,
    pub cursor: Option<String>,
}

impl AuditParams {
    /// The page's filter, reading from `cursor`.
    pub fn as_query(&self, cursor: Option<String>) -> api::AuditQuery {
        api::AuditQuery {
            actor: self.actor.clone().unwrap_or_default(),
            action: self.action.clone().unwrap_or_default(),
            key: self.key.clone().unwrap_or_default(),
            from: self.from.clone().unwrap_or_default(),
            to: self.to.clone().unwrap_or_default(),
            recoveries: self.recoveries.clone().unwrap_or_default(),
            cursor: cursor.unwrap_or_default(),
        }
    }
}

/// The audit log, newest first (operators and admins).
#[utoipa::path(get, path = "/api/v1/audit", tag = "lists", params(AuditParams),
    responses((status = 200, body = AuditList), super::Problems))]
pub async fn audit(State(state): State<AppState>, req: Request) -> Response {
    let q: AuditParams = try_or_answer!(query(&req));
    let filter = q.as_query(q.cursor.clone());
    let (parts, _) = req.into_parts();
    let log = call(&state, parts, api::list_audit(filter)).await;
    answer(log.map(|l| AuditList {
        as_of: l.clock.as_of,
        items: l.page.items,
        next: l.page.next,
        total: None,
    }))
}

/// Every consistency check and how many findings it has.
#[utoipa::path(get, path = "/api/v1/checks", tag = "checks",
    responses((status = 200, body = CheckCounts), super::Problems))]
pub async fn checks(State(state): State<AppState>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let checks = call(&state, parts, api::get_checks(None, None)).await;
    answer(checks.map(|c| {
        CheckCounts {
            as_of: c.clock.as_of,
            checks: c
                .counts
                .into_iter()
                .map(|n| CheckCount {
                    check: n.check.slug().to_owned(),
                    title: n.check.title().to_owned(),
                    count: n.count,
                })
                .collect(),
        }
    }))
}

/// The page of findings to read.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(default)]
pub struct FindingsQuery {
    pub cursor: Option<String>,
}

/// One check's findings, a page at a time.
#[utoipa::path(get, path = "/api/v1/checks/{check}", tag = "checks",
    params(("check" = String, Path, description = "The check's name: `dead-letter-already-sent`, …"), FindingsQuery),
    responses((status = 200, body = FindingList), super::Problems))]
pub async fn findings(State(state): State<AppState>, req: Request) -> Response {
    let q: FindingsQuery = try_or_answer!(query(&req));
    let [check] = try_or_answer!(segments(&req, "/api/v1/checks/"));
    let (parts, _) = req.into_parts();
    let checks = call(&state, parts, api::get_checks(Some(check), q.cursor)).await;
    answer(checks.and_then(|c| {
        let (check, page) = c
            .findings
            .ok_or_else(|| AppError::NotFound("No findings.".into()))?;
        let total = c.counts.iter().find(|n| n.check == check).map(|n| n.count);
        let discard = c
            .bulk
            .and_then(|b| b.discard)
            .map(|form| super::types::RedriveOffer {
                count: form.count,
                offer: form.offer,
                only_of: form.only_of,
            });
        Ok(FindingList {
            as_of: c.clock.as_of,
            items: page.items.into_iter().map(Into::into).collect(),
            next: page.next,
            total,
            discard,
        })
    }))
}

/// Every objective the caller may read, as it stands.
#[utoipa::path(get, path = "/api/v1/slo", tag = "checks",
    responses((status = 200, body = SloReadings), super::Problems))]
pub async fn slos(State(state): State<AppState>, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let board = call(&state, parts, api::get_slos(None)).await;
    answer(board.map(|b| {
        SloReadings {
            as_of: b.clock.as_of,
            slos: b
                .statuses
                .into_iter()
                .map(|s| SloReading {
                    consumer: match &s.scope {
                        idem_domain::slo::Scope::Consumer { name, .. } => Some(name.clone()),
                        _ => None,
                    },
                    scope: s.scope.label(),
                    name: s.slo.name,
                    description: s.slo.description,
                    objective: s.slo.objective.get(),
                    sli: s.sli,
                    budget_remaining: s.budget_remaining,
                    alert: s.alert.as_str().to_owned(),
                })
                .collect(),
        }
    }))
}
