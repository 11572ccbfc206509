//! Sign-in through an identity-aware proxy (oauth2-proxy, Pomerium,
//! Cloudflare Access and the like), the way Grafana's auth proxy works: the
//! proxy authenticates the person and names them in a header; Idem believes
//! that header only on connections from the proxy's own addresses
//! (`IDEM_AUTH_PROXY_ADDRESSES`).
//!
//! A person seen this way for the first time gets an account (no password)
//! with the role their groups map to; on later requests the role follows
//! the groups again, so removing someone from a group in the company's
//! directory takes effect on their next request. Creations and role changes
//! are audited under the proxy's name for the change, `identity-proxy`.

use std::collections::HashMap;

use axum::http::HeaderMap;
use idem_app::auth::CurrentUser;
use idem_domain::{AccountName, AccountOrigin, AuditAction, Rights, Role};
use idem_store::{Store, StoreError, UserRecord};

/// How the proxy says who is asking.
#[derive(Debug, Clone)]
pub struct ProxyAuth {
    /// The identity proxy's own addresses: the header is believed only on
    /// connections from these (a list of its own, narrower than the load
    /// balancers trusted for `X-Forwarded-For`).
    pub addresses: super::TrustedProxies,
    /// The header carrying the user's name (for example `X-Forwarded-User`).
    pub user_header: String,
    /// A header carrying the user's groups, comma-separated.
    pub groups_header: Option<String>,
    /// Group → role (maybe limited to teams: `operator@payments`); a
    /// person in several groups gets each group's rights together.
    pub roles: HashMap<String, Rights>,
    /// The role of a person in no mapped group; `None` refuses them.
    pub default_role: Option<Role>,
}

/// What the proxy's headers say about a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Asserted {
    /// No user header: not a proxy sign-in.
    Nobody,
    /// A user the mapping gives no role to.
    NoRole { username: AccountName },
    /// A user and the rights their groups map to.
    User {
        username: AccountName,
        rights: Rights,
    },
    /// A user header that is not a valid name, or a user or groups header
    /// sent more than once (which one would the proxy have meant?). The
    /// text says which.
    Invalid(&'static str),
}

impl ProxyAuth {
    /// `group=role, group=role@team`: a role everywhere, or on one team.
    pub fn parse_roles(text: &str) -> Result<HashMap<String, Rights>, String> {
        let mut roles: HashMap<String, Rights> = HashMap::new();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (group, grant) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not group=role or group=role@team"))?;
            let rights: Rights = grant.trim().parse().map_err(|e| format!("{pair:?}: {e}"))?;
            // A group named twice holds both grants.
            roles
                .entry(group.trim().to_owned())
                .or_default()
                .merge(&rights);
        }
        Ok(roles)
    }

    /// The rights `groups` map to together; the default role for a person
    /// in no mapped group; `None` when nothing grants one.
    pub fn rights_of<'a>(
        roles: &HashMap<String, Rights>,
        default_role: Option<Role>,
        groups: impl IntoIterator<Item = &'a str>,
    ) -> Option<Rights> {
        let mut rights: Option<Rights> = None;
        for group in groups {
            if let Some(granted) = roles.get(group) {
                rights.get_or_insert_with(Rights::default).merge(granted);
            }
        }
        rights.or_else(|| default_role.map(Rights::everywhere))
    }

    /// Reads the headers (the caller has checked that they come from a
    /// trusted proxy).
    pub fn asserted(&self, headers: &HeaderMap) -> Asserted {
        let repeated = |name: &str| headers.get_all(name).iter().nth(1).is_some();
        if repeated(&self.user_header) || self.groups_header.as_deref().is_some_and(repeated) {
            return Asserted::Invalid(
                "The request named its user or groups more than once. The identity proxy must \
                 send each header once, replacing any the browser sent.",
            );
        }
        let Some(value) = headers.get(self.user_header.as_str()) else {
            return Asserted::Nobody;
        };
        let Some(username) = value
            .to_str()
            .ok()
            .map(str::trim)
            .and_then(|name| idem_domain::AccountName::parse(name).ok())
        else {
            return Asserted::Invalid(
                "The identity proxy sent a user name Idem cannot use (empty, too long, or with \
                 control, invisible or text-direction characters).",
            );
        };
        let groups: Vec<&str> = self
            .groups_header
            .as_deref()
            .and_then(|header| headers.get(header))
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').map(str::trim).collect())
            .unwrap_or_default();
        match Self::rights_of(&self.roles, self.default_role, groups) {
            Some(rights) => Asserted::User { username, rights },
            None => Asserted::NoRole { username },
        }
    }
}

/// Why a proxy-asserted person is not let in.
#[derive(Debug)]
pub enum Refused {
    /// The account exists and is disabled.
    Disabled,
    /// The name belongs to a password (or OpenID Connect) account: the
    /// proxy never signs in as one, nor changes its role (no takeover by name).
    PasswordAccount,
    /// The database could not be asked.
    Store(StoreError),
}

/// The account for `username` with `rights`: created on first sight, its
/// rights brought in line with the groups otherwise; both audited.
pub async fn account(
    store: &Store,
    username: &AccountName,
    rights: Rights,
    client: &str,
) -> Result<CurrentUser, Refused> {
    let existing = store
        .people()
        .user_by_name(username)
        .await
        .map_err(Refused::Store)?;
    let user: UserRecord = match existing {
        Some(user) if user.origin != AccountOrigin::Proxy => {
            return Err(Refused::PasswordAccount);
        }
        Some(user) if user.disabled => return Err(Refused::Disabled),
        Some(user) if user.rights == rights => user,
        Some(user) => {
            store
                .people()
                .set_rights(username, &rights)
                .await
                .map_err(Refused::Store)?;
            audit(
                store,
                username,
                AuditAction::RoleChangedByProxy,
                &user.rights.to_string(),
                &rights,
                client,
            )
            .await;
            store
                .people()
                .user_by_name(username)
                .await
                .map_err(Refused::Store)?
                .ok_or(Refused::Store(StoreError::Contract(
                    "an account changed a moment ago is gone".into(),
                )))?
        }
        None => {
            // A concurrent first request may have created it: either way it exists now.
            if store
                .people()
                .create_account_with(username, &rights, None, AccountOrigin::Proxy)
                .await
                .map_err(Refused::Store)?
                .is_some()
            {
                audit(
                    store,
                    username,
                    AuditAction::UserCreatedByProxy,
                    "none",
                    &rights,
                    client,
                )
                .await;
            }
            let user = store
                .people()
                .user_by_name(username)
                .await
                .map_err(Refused::Store)?
                .ok_or(Refused::Store(StoreError::Contract(
                    "a user created a moment ago is gone".into(),
                )))?;
            // Someone made a password account of that name at the same moment.
            if user.origin != AccountOrigin::Proxy {
                return Err(Refused::PasswordAccount);
            }
            user
        }
    };
    Ok(CurrentUser {
        id: user.id,
        username: user.username,
        role: user.role,
        rights: user.rights,
        via_token: None,
        provider_sign_out: false,
        recheck_pending: false,
    })
}

async fn audit(
    store: &Store,
    username: &AccountName,
    action: AuditAction,
    before: &str,
    after: &Rights,
    client: &str,
) {
    crate::auth::audit_account_change(
        store,
        "identity-proxy",
        username,
        action,
        before,
        after,
        client,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn proxy() -> ProxyAuth {
        ProxyAuth {
            addresses: crate::auth::TrustedProxies::parse("10.0.0.5").unwrap(),
            user_header: "x-forwarded-user".into(),
            groups_header: Some("x-forwarded-groups".into()),
            roles: ProxyAuth::parse_roles("sre=operator, idem-admins=admin").unwrap(),
            default_role: Some(Role::Viewer),
        }
    }

    fn headers(user: &str, groups: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-user", HeaderValue::from_str(user).unwrap());
        h.insert("x-forwarded-groups", HeaderValue::from_str(groups).unwrap());
        h
    }

    #[test]
    fn the_highest_role_of_the_mapped_groups_wins_and_others_get_the_default() {
        let p = proxy();
        let user = |groups| p.asserted(&headers("alice@example.com", groups));
        let as_role = |role| Asserted::User {
            username: AccountName::parse("alice@example.com").unwrap(),
            rights: Rights::everywhere(role),
        };
        assert_eq!(user("sre, idem-admins"), as_role(Role::Admin));
        assert_eq!(user("payments,sre"), as_role(Role::Operator));
        assert_eq!(user("payments"), as_role(Role::Viewer));
        let strict = ProxyAuth {
            default_role: None,
            ..proxy()
        };
        assert_eq!(
            strict.asserted(&headers("bob", "payments")),
            Asserted::NoRole {
                username: AccountName::parse("bob").unwrap()
            }
        );
    }

    #[test]
    fn team_groups_limit_a_role_to_their_teams_and_add_up() {
        let p = ProxyAuth {
            roles: ProxyAuth::parse_roles(
                "payments-oncall=operator@payments, growth-oncall=operator@growth, staff=viewer",
            )
            .unwrap(),
            default_role: None,
            ..proxy()
        };
        let rights = |groups| match p.asserted(&headers("bob", groups)) {
            Asserted::User { rights, .. } => rights.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(rights("payments-oncall"), "operator@payments");
        assert_eq!(
            rights("growth-oncall, payments-oncall"),
            "operator@growth operator@payments"
        );
        assert_eq!(rights("staff,payments-oncall"), "viewer operator@payments");
        assert!(ProxyAuth::parse_roles("admins=admin@payments").is_err());
    }

    #[test]
    fn no_header_is_nobody_and_an_unusable_name_is_invalid() {
        assert_eq!(proxy().asserted(&HeaderMap::new()), Asserted::Nobody);
        assert!(matches!(
            proxy().asserted(&headers("   ", "sre")),
            Asserted::Invalid(_)
        ));
        assert!(ProxyAuth::parse_roles("sre=root").is_err());
    }

    #[test]
    fn a_user_or_groups_header_sent_twice_is_refused_not_first_wins() {
        let mut twice = headers("alice", "payments");
        twice.append("x-forwarded-user", HeaderValue::from_static("admin"));
        assert!(matches!(proxy().asserted(&twice), Asserted::Invalid(_)));
        let mut groups_twice = headers("alice", "payments");
        groups_twice.append(
            "x-forwarded-groups",
            HeaderValue::from_static("idem-admins"),
        );
        assert!(matches!(
            proxy().asserted(&groups_twice),
            Asserted::Invalid(_)
        ));
        assert!(ProxyAuth::parse_roles("sre").is_err());
    }
}
