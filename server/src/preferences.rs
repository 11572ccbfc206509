//! Viewer preferences that live in a cookie, not in the database.

use axum::{
    Form,
    http::{StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use idem_app::{links::safe_next, zones};
use serde::Deserialize;

#[derive(Deserialize)]
pub struct ZoneForm {
    tz: String,
    #[serde(default)]
    next: String,
}

/// `POST /preferences/zone`: remembers the zone times are shown in and goes
/// back to the page the form was on.
pub async fn set_zone(Form(form): Form<ZoneForm>) -> Response {
    let Some(zone) = zones::resolve(&form.tz) else {
        return (
            StatusCode::BAD_REQUEST,
            format!(
                "“{}” is not a time zone Idem knows (use an IANA name such as Europe/Berlin).",
                form.tz
            ),
        )
            .into_response();
    };
    let cookie = format!(
        "{}={}; Path=/; Max-Age=31536000; SameSite=Lax; HttpOnly",
        zones::COOKIE,
        zone.name
    );
    (
        [(header::SET_COOKIE, cookie)],
        Redirect::to(&safe_next(&form.next)),
    )
        .into_response()
}
