//! The account of a person the provider signed in: made on first sign-in,
//! its role brought in line with the claims at every sign-in, never a
//! password or proxy account of the same name.

use idem_domain::{AccountName, AccountOrigin, AuditAction, Rights};
use idem_store::{Store, StoreError, UserRecord};

/// The name the provider's changes are audited under.
pub const ACTOR: &str = "openid-connect";

/// Why a signed-in person is not let in.
#[derive(Debug)]
pub enum Refused {
    /// The account exists and is disabled.
    Disabled,
    /// The name belongs to a password or proxy account (no takeover by name).
    OtherOrigin(AccountOrigin),
    /// The name belongs to an account made for another subject (the
    /// directory reused a name, or the provider changed).
    OtherSubject,
    /// The database could not be asked.
    Store(StoreError),
}

/// The account for the person the provider calls `subject`: the one made
/// for them (found by subject, so a changed email still finds it, under
/// the name it was made with), else the account named `username`, else a
/// new one. Its role is brought in line with `role`; creation and change
/// are audited, and a changed role ends the account's other sessions (the
/// store bumps its epoch).
pub async fn account(
    store: &Store,
    username: &AccountName,
    subject: &str,
    rights: Rights,
    client: &str,
) -> Result<UserRecord, Refused> {
    let user = match store
        .people()
        .user_by_subject(subject)
        .await
        .map_err(Refused::Store)?
    {
        Some(user) => user,
        None => named(store, username, subject, &rights, client).await?,
    };
    if user.origin != AccountOrigin::Oidc {
        return Err(Refused::OtherOrigin(user.origin));
    }
    if user.subject.as_deref() != Some(subject) {
        return Err(Refused::OtherSubject);
    }
    if user.disabled {
        return Err(Refused::Disabled);
    }
    if user.rights == rights {
        return Ok(user);
    }
    // Two sign-ins at once change the rights once (and end sessions once).
    let account = AccountName::of_row(user.username.clone());
    let changed = store
        .people()
        .change_rights(&account, &user.rights, &rights)
        .await
        .map_err(Refused::Store)?;
    if changed {
        audit(
            store,
            &account,
            AuditAction::RoleChangedByOidc,
            &user.rights.to_string(),
            &rights,
            client,
        )
        .await;
    }
    store
        .people()
        .user_by_id(user.id)
        .await
        .map_err(Refused::Store)?
        .ok_or(Refused::OtherSubject)
}

/// The account named `username`, made (for `subject`) if there is none.
async fn named(
    store: &Store,
    username: &AccountName,
    subject: &str,
    rights: &Rights,
    client: &str,
) -> Result<UserRecord, Refused> {
    if let Some(user) = store
        .people()
        .user_by_name(username)
        .await
        .map_err(Refused::Store)?
    {
        return Ok(user);
    }
    let created = store
        .people()
        .create_oidc_account(username, rights, subject)
        .await
        .map_err(Refused::Store)?;
    if created.is_some() {
        audit(
            store,
            username,
            AuditAction::UserCreatedByOidc,
            "none",
            rights,
            client,
        )
        .await;
    }
    // Made just now, by this sign-in or a concurrent one.
    store
        .people()
        .user_by_name(username)
        .await
        .map_err(Refused::Store)?
        .ok_or(Refused::OtherSubject)
}

/// The claims give `username` no role any more: its sessions end (the
/// account stays, for its audit trail). Only an account made for `subject`;
/// its id, when there is one.
pub async fn no_role(
    store: &Store,
    username: &AccountName,
    subject: &str,
) -> Result<Option<i64>, StoreError> {
    match store.people().user_by_name(username).await? {
        Some(user)
            if user.origin == AccountOrigin::Oidc && user.subject.as_deref() == Some(subject) =>
        {
            store.people().end_sessions(username).await?;
            Ok(Some(user.id))
        }
        _ => Ok(None),
    }
}

async fn audit(
    store: &Store,
    username: &AccountName,
    action: AuditAction,
    before: &str,
    after: &Rights,
    client: &str,
) {
    crate::auth::audit_account_change(store, ACTOR, username, action, before, after, client).await;
}
