//! Who is signed in, as pages and server functions see it.
//!
//! The server's auth middleware authenticates every request (session cookie)
//! and puts a [`CurrentUser`] into the request; server functions read it with
//! [`require`](crate::serving::require), which refuses by default.

use idem_domain::Role;

use serde::{Deserialize, Serialize};

/// A signed-in person. Holds nothing secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentUser {
    pub id: i64,
    pub username: String,
    /// The highest role held anywhere (what a path's prefix needs).
    pub role: Role,
    /// Where each role is held: `role` on every consumer unless limited to
    /// teams (`serving::require_on` and `serving::within` read it).
    #[serde(default)]
    pub rights: idem_domain::Rights,
    /// Calling the API with a token (`None`: a person's session). Its
    /// owner's account is the one whose standing long work (a redrive)
    /// reads again.
    #[serde(default)]
    pub via_token: Option<ViaToken>,
    /// Signed in through an OpenID provider that offers to sign out there
    /// too (RP-initiated logout).
    #[serde(default)]
    pub provider_sign_out: bool,
    /// Signed in through an OpenID provider that is due to confirm the
    /// sign-in but cannot be reached: Idem goes on with the role last
    /// confirmed, within a grace, and pages say so.
    #[serde(default)]
    pub recheck_pending: bool,
}

/// The demo's accounts (each one's password is its name) and their
/// rights: one of each role, and an operator of the payments team only.
pub const DEMO_ACCOUNTS: &[(&str, &str)] = &[
    ("viewer", "viewer"),
    ("operator", "operator"),
    ("admin", "admin"),
    ("payments-oncall", "operator@payments"),
];

/// The token an API request came with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViaToken {
    pub id: i64,
    /// The account answerable for it.
    pub owner: String,
    /// What the owner's account holds (the token holds no more).
    pub owner_rights: idem_domain::Rights,
}

/// The client's address (after trusted proxies), put in the request by the guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddr(pub String);

/// Where each kind of server function lives: the auth middleware grants
/// `/api/read` to viewers, `/api/audit` (reading the audit log, which holds
/// client addresses and names typed into failed sign-ins) and `/api/act` to
/// operators, `/api/admin` to admins, `/api/public` to anyone, and refuses
/// every other `/api` path.
pub mod prefix {
    pub const PUBLIC: &str = "/api/public";
    pub const READ: &str = "/api/read";
    pub const AUDIT: &str = "/api/audit";
    pub const ACT: &str = "/api/act";
    pub const ADMIN: &str = "/api/admin";
}

/// The role a path under `/api` needs; `None` when the path is open to
/// anyone, `Err(())` when no rule covers it (refused).
#[allow(clippy::result_unit_err)]
pub fn role_for_api_path(path: &str) -> Result<Option<Role>, ()> {
    let under = |p: &str| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.starts_with('/'))
    };
    if under(prefix::PUBLIC) {
        Ok(None)
    } else if under(prefix::READ) {
        Ok(Some(Role::Viewer))
    } else if under(prefix::AUDIT) || under(prefix::ACT) {
        Ok(Some(Role::Operator))
    } else if under(prefix::ADMIN) {
        Ok(Some(Role::Admin))
    } else {
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_paths_need_the_role_of_their_prefix_and_unknown_ones_are_refused() {
        assert_eq!(role_for_api_path("/api/public/get_login_info123"), Ok(None));
        assert_eq!(
            role_for_api_path("/api/read/get_overview123"),
            Ok(Some(Role::Viewer))
        );
        assert_eq!(
            role_for_api_path("/api/act/replay123"),
            Ok(Some(Role::Operator))
        );
        assert_eq!(
            role_for_api_path("/api/audit/list_audit123"),
            Ok(Some(Role::Operator))
        );
        assert_eq!(role_for_api_path("/api/admin/users"), Ok(Some(Role::Admin)));
        assert_eq!(role_for_api_path("/api/get_overview123"), Err(()));
        assert_eq!(role_for_api_path("/api/readers/x"), Err(()));
        assert_eq!(role_for_api_path("/api/read"), Err(()));
    }
}
