//! What every page shows about the console itself (the shell's banners and
//! who is signed in) and what the sign-in page needs to say: wire types the
//! server fills and the pages read.

use serde::{Deserialize, Serialize};

/// Facts about this console that every page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleInfo {
    /// The database holds data written by the demo simulator.
    pub demo: bool,
    /// "sqlite" or "postgres".
    pub backend: String,
    /// The zone the viewer's times are shown in (an IANA name).
    pub zone: String,
    /// Who is signed in (nobody on the sign-in page).
    pub user: Option<crate::auth::CurrentUser>,
    /// When the database stopped answering, in the viewer's zone, while it
    /// is down.
    pub database_down_since: Option<String>,
}

/// What the sign-in page needs to say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoginInfo {
    /// Demo mode's accounts (each with its own name as password); empty otherwise.
    pub demo_accounts: Vec<String>,
    /// Whether any account exists yet (a new install has none).
    pub any_accounts: bool,
    /// Password sign-in is on (off when only the identity proxy signs in).
    pub password_login: bool,
    /// Sign-in through an OpenID provider, by this name, is offered.
    pub oidc_name: Option<String>,
    /// What the last sign-in from this browser came to, when the server
    /// said so (its cookie): `failed` or `throttled`.
    pub note: Option<LoginNote>,
}

/// Why the sign-in form is shown again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoginNote {
    Failed,
    Throttled,
}

/// The cookie the server's sign-in sets beside `?failed=1` or
/// `?throttled=1`; the page believes that, never the address alone.
pub const LOGIN_NOTE_COOKIE: &str = "idem_login_note";
