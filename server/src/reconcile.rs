//! Taking a provider's export in: `POST /reconcile/upload` (the
//! `/reconcile` page's multipart form) and `POST /api/v1/reconciliations`
//! (a token; the export is the body). Both stream it — read a chunk at a
//! time, parsed a line at a time, looked up a batch at a time, hashed as it
//! passes — so an export is never held whole; it may be up to
//! [`EXPORT_MAX_BYTES`] (the body layers leave these two paths alone,
//! `limits::read_body`). Nothing in the claims changes: the reconciliation
//! is kept, with its audit row, for a person to review and apply.

use axum::{
    Extension,
    extract::{Multipart, State, multipart::Field},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use idem_app::{
    auth::{ClientAddr, CurrentUser},
    serving::AppState,
};
use idem_domain::{ConsumerName, ExportReader, ProviderRecord, Role, StatusWords};
use idem_store::{NewReconciliation, Reconciled, Reconciler, Store};
use sha2::{Digest, Sha256};

/// The largest export taken, in bytes.
pub const EXPORT_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The largest body an export's upload may send: the export and the
/// form's other fields.
pub const UPLOAD_BODY_LIMIT: usize = EXPORT_MAX_BYTES + 1024 * 1024;

/// The `/reconcile` page's own routes: the upload, and the demo provider's
/// message log.
pub fn page_routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route(
            idem_app::api::RECONCILE_UPLOAD_PATH,
            axum::routing::post(upload_from_page)
                .layer(axum::extract::DefaultBodyLimit::max(UPLOAD_BODY_LIMIT)),
        )
        .route(
            idem_app::api::DEMO_PROVIDER_LOG_PATH,
            axum::routing::get(crate::demo::provider_log),
        )
}

/// The paths whose bodies are streamed to a reconciliation.
pub fn is_upload(path: &str) -> bool {
    path == idem_app::api::RECONCILE_UPLOAD_PATH || path == "/api/v1/reconciliations"
}

/// How many records are read before they are looked up.
const BATCH: usize = 2_000;

/// Why an export was not reconciled.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("the export is larger than {} MiB; reconcile it in parts", EXPORT_MAX_BYTES / 1024 / 1024)]
    TooLarge,
    /// The request is wrong, or the export cannot be read (the text says why).
    #[error("{0}")]
    Refused(String),
    /// The person may not reconcile this consumer.
    #[error("{0}")]
    Forbidden(String),
    /// The action id kept another file's reconciliation (named when it
    /// was this person's).
    #[error("this form already reconciled another file{}; reload the page", .0.map(|id| format!(" (reconciliation #{id})")).unwrap_or_default())]
    FormReused(Option<idem_domain::ReconciliationId>),
    #[error("the export could not be read to its end")]
    Broken,
    #[error(transparent)]
    Store(#[from] idem_store::StoreError),
}

impl IntakeError {
    pub fn status(&self) -> StatusCode {
        match self {
            IntakeError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            IntakeError::Refused(_) | IntakeError::Broken => StatusCode::BAD_REQUEST,
            IntakeError::Forbidden(_) => StatusCode::FORBIDDEN,
            IntakeError::FormReused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            IntakeError::Store(err) if err.is_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
            IntakeError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// What a reconciliation is of, before its export is read.
#[derive(Debug)]
pub struct Request {
    pub consumer: ConsumerName,
    pub latency_seconds: i64,
    pub words: StatusWords,
    pub file_name: String,
    pub action_id: String,
    /// When the export was taken, if said: it covers every call up to then.
    pub covers_until: Option<chrono::DateTime<chrono::Utc>>,
}

impl Request {
    /// The request from its fields as typed (`latency` in seconds, blank
    /// for five minutes), checked.
    pub fn parse(
        consumer: &str,
        latency: &str,
        words: &str,
        file_name: &str,
        action_id: String,
    ) -> Result<Self, IntakeError> {
        let consumer = ConsumerName::parse(consumer.trim())
            .map_err(|e| IntakeError::Refused(format!("The consumer: {e}.")))?;
        let latency_seconds = match latency.trim() {
            "" => 300,
            text => text
                .parse::<i64>()
                .ok()
                .filter(|s| (0..=86_400).contains(s))
                .ok_or_else(|| {
                    IntakeError::Refused(format!(
                        "The latency bound “{text}” is not a number of seconds from 0 to 86400."
                    ))
                })?,
        };
        let words = StatusWords::parse(words)
            .map_err(|e| IntakeError::Refused(format!("The status words: {e}.")))?;
        let file_name: String = file_name
            .trim()
            .chars()
            .filter(|c| !c.is_control() && !idem_domain::is_invisible_or_bidi(*c))
            .take(200)
            .collect();
        Ok(Request {
            consumer,
            latency_seconds,
            words,
            file_name: if file_name.is_empty() {
                "pasted export".into()
            } else {
                file_name
            },
            action_id,
            covers_until: None,
        })
    }
}

impl Request {
    /// The form's status words, then those the catalogue gives the
    /// consumer's provider.
    pub fn with_catalogue(mut self, catalogue: &idem_domain::Catalogue) -> Self {
        if let Some(words) = catalogue
            .get(self.consumer.as_str())
            .and_then(|entry| StatusWords::parse(&entry.provider_status_words).ok())
        {
            self.words = self.words.or(&words);
        }
        self
    }
}

/// The person may reconcile `consumer`: an operator of it, and Idem may
/// resolve its outcomes.
pub async fn may_reconcile(
    state: &AppState,
    user: &CurrentUser,
    consumer: &str,
) -> Result<(), IntakeError> {
    // A token's person holds what both the token and its owner hold now.
    if let Err(other) = user
        .rights
        .check(&state.catalogue, consumer, Role::Operator)
    {
        let refusal = idem_store::Refusal {
            actor: &user.username,
            actor_role: user.role.as_str(),
            reason: "forbidden: operator to reconcile",
            target: consumer,
            client_addr: None,
        };
        if let Err(err) = state
            .store
            .people()
            .count_refusal(&refusal, idem_store::Ts::now())
            .await
        {
            tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not count a refusal");
        }
        return Err(IntakeError::Forbidden(other.to_string()));
    }
    if !state.store.reconcile().has_claims_of(consumer).await? {
        return Err(IntakeError::Refused(format!(
            "Idem holds no claim of a consumer named “{consumer}”"
        )));
    }
    if let Some(reason) = state.read_only.reason(consumer)
        && state
            .store
            .actions()
            .resolve_write_back(consumer)
            .await?
            .is_none()
    {
        return Err(IntakeError::Forbidden(reason));
    }
    Ok(())
}

/// An export being read into a reconciliation.
pub struct Intake<'s> {
    reader: ExportReader,
    reconciler: Reconciler<'s>,
    read: Vec<Result<ProviderRecord, idem_domain::BadLine>>,
    hash: Sha256,
    bytes: usize,
}

impl<'s> Intake<'s> {
    pub fn new(store: &'s Store, request: &Request) -> Self {
        Intake {
            reader: ExportReader::new(request.words.clone()),
            reconciler: match request.covers_until {
                Some(at) => store
                    .reconcile()
                    .reconciler(request.consumer.clone(), request.latency_seconds)
                    .covering_until(at),
                None => store
                    .reconcile()
                    .reconciler(request.consumer.clone(), request.latency_seconds),
            },
            read: Vec::new(),
            hash: Sha256::new(),
            bytes: 0,
        }
    }

    /// Bytes taken so far.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes the next chunk of the export.
    pub async fn push(&mut self, chunk: &[u8]) -> Result<(), IntakeError> {
        self.bytes += chunk.len();
        if self.bytes > EXPORT_MAX_BYTES {
            return Err(IntakeError::TooLarge);
        }
        self.hash.update(chunk);
        self.reader.push(chunk, &mut self.read);
        if let Some(why) = self.reader.refused() {
            return Err(IntakeError::Refused(why.to_owned()));
        }
        if self.read.len() >= BATCH {
            self.look_up().await?;
        }
        Ok(())
    }

    async fn look_up(&mut self) -> Result<(), IntakeError> {
        if let Some(why) = self.reader.refused() {
            return Err(IntakeError::Refused(why.to_owned()));
        }
        let mut records = Vec::with_capacity(self.read.len());
        for read in self.read.drain(..) {
            match read {
                Ok(record) => records.push(record),
                Err(bad) => self.reconciler.bad_line(&bad),
            }
        }
        self.reconciler.feed(&records).await?;
        Ok(())
    }

    /// Reads the export's end and keeps the reconciliation as `actor`.
    pub async fn finish(
        mut self,
        request: &Request,
        actor: idem_store::Actor<'_>,
    ) -> Result<idem_domain::ReconciliationId, IntakeError> {
        self.reader.finish(&mut self.read);
        self.look_up().await?;
        if self.reader.records() == 0 {
            return Err(IntakeError::Refused(
                "No record of the export could be read: check its header (reference or key, \
                 status, time) and its status words"
                    .into(),
            ));
        }
        let sha = hex::encode(self.hash.finalize());
        let kept = self
            .reconciler
            .finish(&NewReconciliation {
                action_id: &request.action_id,
                actor,
                file_name: &request.file_name,
                file_sha256: &sha,
                file_bytes: self.bytes as i64,
                status_words: &request.words.to_text(),
            })
            .await?;
        match kept {
            Reconciled::Kept { id } => Ok(id),
            Reconciled::FormReused { id } => Err(IntakeError::FormReused(id)),
            Reconciled::TooManyDifferences { rows } => Err(IntakeError::Refused(format!(
                "{rows} rows differ, more than one reconciliation keeps ({}): is it the right \
                 consumer and the right export? Reconcile it in parts",
                idem_store::RECONCILIATION_ROWS_MAX
            ))),
        }
    }
}

/// The small fields of the upload form, read before the export.
#[derive(Default)]
struct FormFields {
    action_id: String,
    consumer: String,
    latency: String,
    words: String,
    /// "The export covers every call up to now" was ticked.
    covers_now: bool,
}

/// `POST /reconcile/upload`: the form's fields, then the export (a file,
/// or pasted text) streamed into a reconciliation; 303 to its page.
pub async fn upload_from_page(
    State(state): State<AppState>,
    Extension(user): Extension<CurrentUser>,
    client: Option<Extension<ClientAddr>>,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let client = client.as_ref().map(|c| c.0.0.clone());
    let answer = match multipart {
        Ok(multipart) => from_form(&state, &user, client.as_deref(), multipart).await,
        Err(rejection) => Err(IntakeError::Refused(rejection.body_text())),
    };
    match answer {
        Ok(id) => Redirect::to(&format!("/reconciliations/{id}")).into_response(),
        Err(err) => {
            if matches!(err, IntakeError::Store(_)) {
                tracing::error!(error = %idem_app::error::cause_chain(&err), "a reconciliation failed");
            }
            let message = match &err {
                IntakeError::Store(e) if e.is_unavailable() => {
                    "The database is unavailable; nothing was kept. Try again shortly.".to_owned()
                }
                IntakeError::Store(_) => "Something went wrong; nothing was kept.".to_owned(),
                other => format!("{}. Nothing was kept.", capitalised(&other.to_string())),
            };
            crate::refusal::refusal_with_link(
                err.status(),
                "Not reconciled",
                &message,
                "/reconcile",
                "Back to reconcile",
            )
        }
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

async fn from_form(
    state: &AppState,
    user: &CurrentUser,
    client: Option<&str>,
    mut multipart: Multipart,
) -> Result<idem_domain::ReconciliationId, IntakeError> {
    if !user.role.includes(Role::Operator) {
        return Err(IntakeError::Forbidden(format!(
            "your role ({}) may not reconcile; it needs operator",
            user.role
        )));
    }
    let mut fields = FormFields::default();
    let broken = |_| IntakeError::Broken;
    while let Some(field) = multipart.next_field().await.map_err(broken)? {
        let name = field.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "export" | "pasted" => {
                let file_name = match name.as_str() {
                    "export" => field.file_name().unwrap_or_default().to_owned(),
                    _ => String::new(),
                };
                if let Some(id) =
                    stream_field(state, user, client, &fields, &file_name, field).await?
                {
                    return Ok(id);
                }
            }
            _ => {
                let text = small_text(field).await?;
                match name.as_str() {
                    "action_id" => fields.action_id = text,
                    "consumer" => fields.consumer = text,
                    "latency_seconds" => fields.latency = text,
                    "status_words" => fields.words = text,
                    "covers_now" => fields.covers_now = !text.is_empty(),
                    _ => {}
                }
            }
        }
    }
    Err(IntakeError::Refused(
        "No export was sent: choose a file, or paste it".into(),
    ))
}

/// A small field's text (at most 4 KiB).
async fn small_text(mut field: Field<'_>) -> Result<String, IntakeError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(|_| IntakeError::Broken)? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > 4096 {
            return Err(IntakeError::Refused(
                "A form field is longer than 4 KiB".into(),
            ));
        }
    }
    String::from_utf8(bytes)
        .map_err(|_| IntakeError::Refused("A form field is not UTF-8 text".into()))
}

/// Streams `field` into a reconciliation; `None` if it was empty (no file
/// chosen, nothing pasted).
async fn stream_field(
    state: &AppState,
    user: &CurrentUser,
    client: Option<&str>,
    fields: &FormFields,
    file_name: &str,
    mut field: Field<'_>,
) -> Result<Option<idem_domain::ReconciliationId>, IntakeError> {
    // The first bytes that are not empty (a part may start with an empty chunk).
    let first = loop {
        match field.chunk().await.map_err(|_| IntakeError::Broken)? {
            Some(chunk) if chunk.is_empty() => continue,
            Some(chunk) => break chunk,
            None => return Ok(None),
        }
    };
    if first.iter().all(u8::is_ascii_whitespace) && file_name.is_empty() {
        // Nothing pasted (a textarea sends its empty text); read the rest.
        while let Some(chunk) = field.chunk().await.map_err(|_| IntakeError::Broken)? {
            if !chunk.iter().all(u8::is_ascii_whitespace) {
                return Err(IntakeError::Refused(
                    "The pasted export starts with a blank block".into(),
                ));
            }
        }
        return Ok(None);
    }
    if fields.consumer.is_empty() {
        return Err(IntakeError::Refused(
            "Send the consumer before the export".into(),
        ));
    }
    idem_domain::action::ActionId::parse(&fields.action_id)
        .map_err(|e| IntakeError::Refused(format!("The form's id: {e}")))?;
    let request = Request::parse(
        &fields.consumer,
        &fields.latency,
        &fields.words,
        file_name,
        fields.action_id.clone(),
    )?;
    let mut request = request.with_catalogue(&state.catalogue);
    if fields.covers_now {
        request.covers_until = Some(chrono::Utc::now());
    }
    may_reconcile(state, user, request.consumer.as_str()).await?;
    let mut intake = Intake::new(&state.store, &request);
    intake.push(&first).await?;
    while let Some(chunk) = field.chunk().await.map_err(|_| intake_broken(&intake))? {
        intake.push(&chunk).await?;
    }
    let actor = idem_store::Actor {
        name: &user.username,
        role: user.role.as_str(),
        client_addr: client,
    };
    intake.finish(&request, actor).await.map(Some)
}

/// A body cut off: too large once past the limit, else broken.
pub fn intake_broken(intake: &Intake<'_>) -> IntakeError {
    if intake.bytes() >= EXPORT_MAX_BYTES {
        IntakeError::TooLarge
    } else {
        IntakeError::Broken
    }
}
