//! `POST /tokens/create`, the `/tokens` page's form: the token made as the
//! signed-in admin (audited), answered with a page that shows its secret
//! this once, never stored, never cached.

use axum::{
    Extension, Form,
    extract::{State, rejection::FormRejection},
    http::{HeaderValue, StatusCode, header},
    response::Response,
};
use idem_app::{
    auth::{ClientAddr, CurrentUser},
    serving::AppState,
};
use idem_store::Ts;

use super::{Request, create_as, lifetime};
use crate::accounts::AccountError;

/// The token form of the `/tokens` page, as posted.
#[derive(Debug, serde::Deserialize)]
pub struct CreateForm {
    name: String,
    owner: String,
    role: String,
    #[serde(default)]
    teams: String,
    #[serde(default)]
    expires: String,
}

/// The answer page, linking back to the tokens.
fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let mut page = crate::refusal::refusal_with_link(
        status,
        title,
        message,
        idem_app::links::TOKENS,
        "Back to the tokens",
    );
    page.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    page
}

/// Makes the token the form describes as `admin`; its name and secret.
async fn make(
    state: &AppState,
    form: CreateForm,
    admin: &CurrentUser,
    client: Option<&str>,
) -> Result<(String, String), AccountError> {
    let role: idem_domain::Role = form
        .role
        .parse()
        .map_err(|e: idem_domain::UnknownValue| AccountError::Invalid(e.to_string()))?;
    let teams: Vec<String> = form
        .teams
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let rights = crate::accounts::rights(role, &teams)?;
    let expires = match form.expires.trim() {
        "" => None,
        text => Some(lifetime(text)?),
    };
    let name = form.name.trim();
    let request = Request {
        name,
        owner: form.owner.trim(),
        rights: &rights,
        expires,
    };
    let secret = create_as(&state.store, &request, &admin.username, client).await?;
    Ok((name.to_owned(), secret))
}

/// `POST /tokens/create` (admins only; the guard and the cross-site check
/// ran first, and the refusal of anyone else is counted like every other).
pub async fn create_from_page(
    State(state): State<AppState>,
    Extension(admin): Extension<CurrentUser>,
    client: Option<Extension<ClientAddr>>,
    form: Result<Form<CreateForm>, FormRejection>,
) -> Response {
    let client = client.as_ref().map(|c| c.0.0.as_str());
    if admin.role != idem_domain::Role::Admin {
        let refusal = idem_store::Refusal {
            actor: &admin.username,
            actor_role: admin.role.as_str(),
            reason: "forbidden: needs admin",
            target: idem_app::CREATE_TOKEN_PATH,
            client_addr: client,
        };
        if let Err(err) = state
            .store
            .people()
            .count_refusal(&refusal, Ts::now())
            .await
        {
            tracing::warn!(error = %idem_app::error::cause_chain(&err), "could not count a refusal");
        }
        let text = format!(
            "Your role ({}) may not do this; it needs admin.",
            admin.role
        );
        return page(StatusCode::FORBIDDEN, "Not allowed", &text);
    }
    let made = match form {
        Ok(Form(form)) => make(&state, form, &admin, client).await,
        Err(rejection) => Err(AccountError::Invalid(rejection.body_text())),
    };
    match made {
        Ok((name, secret)) => page(
            StatusCode::CREATED,
            "Token created",
            &format!(
                "Copy the secret of “{name}” now: Idem keeps only its hash and cannot show it \
                 again. {secret}"
            ),
        ),
        Err(AccountError::Store(err)) => {
            let shown = idem_app::error::AppError::from(err);
            let status =
                StatusCode::from_u16(shown.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            page(status, shown.title(), &shown.to_string())
        }
        Err(err) => page(StatusCode::BAD_REQUEST, "No token made", &err.to_string()),
    }
}
