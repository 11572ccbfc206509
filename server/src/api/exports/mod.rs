//! Exports: a filtered list as CSV or JSON, streamed a page at a time, for
//! an incident review. Each page is the list's own server function (its
//! rights, its filters, its keyset cursor), so an export shows exactly what
//! the list would, and never holds more than a page in memory.
//!
//! Bounded at [`EXPORT_MAX_ROWS`] rows. The JSON says where to go on when
//! it stopped at the bound (`next`: sent back as `cursor`, the export goes
//! on from there); a CSV just ends there (the README says so).
//!
//! Served twice: `/exports/{list}.{csv|json}` for a signed-in person (the
//! guard's session, as a page), `/api/v1/exports/{list}.{csv|json}` for a
//! token.

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderValue, StatusCode, header, request::Parts},
    response::{IntoResponse, Response},
};
use idem_app::{api, error::AppError, serving::AppState};
use serde::Serialize;

mod rows;

pub use rows::csv_cell;
use rows::{Row, csv_line};

use super::{
    call::call,
    problem::Problem,
    reads::{AuditParams, DeadLetterQuery, ListQuery, OutboxQuery, query, segments},
};

/// The most rows one export holds.
pub const EXPORT_MAX_ROWS: usize = 100_000;

/// The lists that export, by their name in the address.
const LISTS: &[&str] = &["unknown", "dead-letters", "outbox", "audit"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Csv,
    Json,
}

/// One page of a list: its rows, and the cursor of the next.
type Page<T> = Result<(Vec<T>, Option<String>), AppError>;

/// Where an export stands between two pages.
struct Progress<F> {
    state: AppState,
    parts: Parts,
    fetch: F,
    /// The cursor of the next page.
    cursor: Option<String>,
    /// The cursor the page being written was read from.
    page_start: Option<String>,
    rows: usize,
    /// Nothing more to read (the list ended, the bound was reached, or a
    /// page failed).
    done: bool,
}

/// Streams a list: the first page is read before answering (so a refusal
/// or a bad filter is a problem with its status); the others as the client
/// reads.
async fn stream<T, F, Fut>(
    state: AppState,
    parts: Parts,
    format: Format,
    name: &str,
    start: Option<String>,
    fetch: F,
) -> Response
where
    T: Row,
    F: Fn(Option<String>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Page<T>> + Send,
{
    let first = call(&state, parts.clone(), fetch(start.clone())).await;
    let (rows, next) = match first {
        Ok(page) => page,
        Err(err) => return Problem::from(&err).answer(),
    };
    let mut progress = Progress {
        state,
        parts,
        fetch,
        cursor: next,
        page_start: start,
        rows: 0,
        done: false,
    };
    let opening = render(format, &mut progress, rows, true);
    let rest = futures_util::stream::unfold(progress, move |mut progress| async move {
        if progress.done {
            return None;
        }
        // Each page is read for someone who may still read it: a token
        // revoked, or a person disabled or demoted, mid-export ends it.
        if let Err(why) = still_allowed(&progress.state, &progress.parts).await {
            tracing::warn!(why, "an export stopped: its reader may no longer read");
            progress.done = true;
            return Some((
                Err(std::io::Error::other("the reader may no longer read")),
                progress,
            ));
        }
        progress.page_start = progress.cursor.clone();
        let page = call(
            &progress.state,
            progress.parts.clone(),
            (progress.fetch)(progress.cursor.clone()),
        )
        .await;
        let chunk = match page {
            Ok((rows, next)) => {
                progress.cursor = next;
                render(format, &mut progress, rows, false)
            }
            Err(err) => {
                tracing::warn!(error = %err, "an export stopped: a page could not be read");
                progress.done = true;
                return Some((
                    Err(std::io::Error::other("an export page failed")),
                    progress,
                ));
            }
        };
        Some((Ok::<_, std::io::Error>(Bytes::from(chunk)), progress))
    });
    // Fused: the layers around the body may ask once more after its end.
    let body = futures_util::stream::once(async move { Ok(Bytes::from(opening)) })
        .chain(rest)
        .fuse();
    let (kind, ext) = match format {
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
        Format::Json => ("application/json", "json"),
    };
    let mut response = Body::from_stream(body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    if let Ok(disposition) =
        HeaderValue::from_str(&format!("attachment; filename=\"idem-{name}.{ext}\""))
    {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

use futures_util::StreamExt as _;

/// Whether the person or token an export is for may still read (the
/// first page was read under the guard or the token check).
async fn still_allowed(state: &AppState, parts: &Parts) -> Result<(), &'static str> {
    let Some(user) = parts.extensions.get::<idem_app::auth::CurrentUser>() else {
        return Err("nobody is signed in");
    };
    let now = idem_store::Ts::now();
    match &user.via_token {
        Some(token) => match state.store.tokens().token_is_live(token.id, now).await {
            Ok(true) => Ok(()),
            Ok(false) => Err("its token was revoked or expired, or its owner disabled"),
            Err(_) => Err("the token could not be checked"),
        },
        None => match state.store.people().user_by_id(user.id).await {
            Ok(Some(account))
                if !account.disabled
                    && account.role == user.role
                    && account.rights == user.rights =>
            {
                Ok(())
            }
            Ok(_) => Err("the account was disabled, removed or given other rights"),
            Err(_) => Err("the account could not be checked"),
        },
    }
}

/// A page's rows as text; the opening (`first`) and the ending too.
fn render<T: Row, F>(
    format: Format,
    progress: &mut Progress<F>,
    rows: Vec<T>,
    first: bool,
) -> String {
    let room = EXPORT_MAX_ROWS - progress.rows;
    let mut rows = rows;
    let cut = rows.len() > room;
    rows.truncate(room);
    let mut out = String::new();
    if first {
        match format {
            Format::Csv => out.push_str(&csv_line(T::HEADER.iter().map(|h| (*h).to_owned()))),
            Format::Json => out.push_str("{\"items\":["),
        }
    }
    for row in &rows {
        match format {
            Format::Csv => out.push_str(&csv_line(row.cells())),
            Format::Json => {
                if progress.rows > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(row).unwrap_or_else(|_| "null".into()));
            }
        }
        progress.rows += 1;
    }
    let bounded = cut || (progress.rows == EXPORT_MAX_ROWS && progress.cursor.is_some());
    if bounded || progress.cursor.is_none() {
        progress.done = true;
        if format == Format::Json {
            // Where to go on from, when the bound stopped it: after this
            // page, or, for a page the bound cut, from its start (its first
            // rows come again rather than its last ones never).
            let next = match (bounded, cut) {
                (false, _) => None,
                (true, false) => progress.cursor.clone(),
                (true, true) => progress.page_start.clone(),
            };
            out.push_str(&format!(
                "],\"next\":{},\"limit\":{EXPORT_MAX_ROWS}}}",
                serde_json::to_string(&next).unwrap_or_else(|_| "null".into())
            ));
        }
    }
    out
}

/// An export as JSON: the rows, and where to go on when the bound cut it.
#[derive(Debug, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Exported {
    /// The list's rows, as its own operation answers them.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<serde_json::Value>,
    /// Set when the export stopped at `limit` rows: send it as `cursor`.
    pub next: Option<String>,
    pub limit: u64,
}

/// A list as CSV or JSON, every page of it (up to 100,000 rows), with the
/// list's own filters (`consumer`, `from`, `to`, `state`, `error`,
/// `topic`, `actor`, `action`, `key`, `cursor`) and rights.
#[utoipa::path(get, path = "/api/v1/exports/{file}", tag = "lists",
    params(
        ("file" = String, Path, pattern = r"^(unknown|dead-letters|outbox|audit)\.(csv|json)$",
            description = "The list and the format: `unknown.csv`, `dead-letters.json`, …"),
        ListQuery,
    ),
    responses(
        (status = 200, content((String = "text/csv"), (Exported = "application/json"))),
        super::Problems,
    ))]
pub async fn export(State(state): State<AppState>, req: Request) -> Response {
    let prefix = if req.uri().path().starts_with("/api/v1/") {
        "/api/v1/exports/"
    } else {
        "/exports/"
    };
    let [file] = match segments::<1>(&req, prefix) {
        Ok(file) => file,
        Err(problem) => return problem.answer(),
    };
    let (name, format) = match file.rsplit_once('.') {
        Some((name, "csv")) => (name.to_owned(), Format::Csv),
        Some((name, "json")) => (name.to_owned(), Format::Json),
        _ => return not_a_list(&file),
    };
    // Boxed: a list's first page is a whole server function's future,
    // too large for the stack of a debug build behind the page layers.
    let answer = match name.as_str() {
        "unknown" => Box::pin(unknown(state, req, format)).await,
        "dead-letters" => Box::pin(dead_letters(state, req, format)).await,
        "outbox" => Box::pin(outbox(state, req, format)).await,
        "audit" => Box::pin(audit(state, req, format)).await,
        _ => return not_a_list(&file),
    };
    answer.unwrap_or_else(|problem| problem.answer())
}

async fn unknown(state: AppState, req: Request, format: Format) -> Result<Response, Problem> {
    let q: ListQuery = query(&req)?;
    let (parts, _) = req.into_parts();
    let start = q.cursor.clone();
    let page = move |cursor| {
        let list = api::list_unknown(cursor, q.from.clone(), q.to.clone(), q.consumer.clone());
        async move { list.await.map(|u| (u.list.page.items, u.list.page.next)) }
    };
    Ok(stream(state, parts, format, "unknown", start, page).await)
}

async fn dead_letters(state: AppState, req: Request, format: Format) -> Result<Response, Problem> {
    let q: DeadLetterQuery = query(&req)?;
    let (parts, _) = req.into_parts();
    let start = q.cursor.clone();
    let page = move |cursor| {
        let (from, to, consumer) = (q.from.clone(), q.to.clone(), q.consumer.clone());
        let list =
            api::list_dead_letters(q.state.clone(), cursor, from, to, consumer, q.error.clone());
        async move { list.await.map(|d| (d.list.page.items, d.list.page.next)) }
    };
    Ok(stream(state, parts, format, "dead-letters", start, page).await)
}

async fn outbox(state: AppState, req: Request, format: Format) -> Result<Response, Problem> {
    let q: OutboxQuery = query(&req)?;
    let (parts, _) = req.into_parts();
    let start = q.cursor.clone();
    let page = move |cursor| {
        let list = api::list_outbox(cursor, q.consumer.clone(), q.topic.clone());
        async move { list.await.map(|o| (o.page.items, o.page.next)) }
    };
    Ok(stream(state, parts, format, "outbox", start, page).await)
}

async fn audit(state: AppState, req: Request, format: Format) -> Result<Response, Problem> {
    let q: AuditParams = query(&req)?;
    let (parts, _) = req.into_parts();
    let start = q.cursor.clone();
    let page = move |cursor| {
        let list = api::list_audit(q.as_query(cursor));
        async move { list.await.map(|l| (l.page.items, l.page.next)) }
    };
    Ok(stream(state, parts, format, "audit", start, page).await)
}

fn not_a_list(file: &str) -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        format!(
            "“{file}” is not an export: ask for {}, each as .csv or .json.",
            LISTS.join(", ")
        ),
    )
    .answer()
}
