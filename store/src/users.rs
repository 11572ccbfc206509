//! Users, their roles, origins and password hashes.
//!
//! [`UserRecord`] holds a password hash, so it is never serialisable and its
//! `Debug` leaves the hash out; [`PasswordHash`] can be read only by the code
//! that verifies it.

use idem_domain::{AccountName, AccountOrigin, Rights, Role};

use crate::facets::People;
use crate::{StoreError, StoreResult, dialect::dispatch, store::Store, ts::Ts};

/// An Argon2id PHC string. Never printed, never serialised.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl PasswordHash {
    pub fn new(phc: String) -> Self {
        Self(phc)
    }

    /// The PHC string, for verification only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

/// A user as stored.
#[derive(Clone)]
pub struct UserRecord {
    pub id: i64,
    pub username: String,
    /// The highest role held anywhere.
    pub role: Role,
    /// Where each role is held (`role` everywhere unless limited to teams).
    pub rights: Rights,
    pub disabled: bool,
    /// Sessions created under another epoch are no longer valid.
    pub session_epoch: i64,
    /// `None` for users signed in by an identity proxy.
    pub password_hash: Option<PasswordHash>,
    /// How the account signs in (never both ways).
    pub origin: AccountOrigin,
    /// For an OpenID Connect account: the issuer and `sub` of the person it
    /// was made for (see [`Store::create_oidc_account`]).
    pub subject: Option<String>,
}

impl std::fmt::Debug for UserRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRecord")
            .field("id", &self.id)
            .field("username", &self.username)
            .field("role", &self.role)
            .field("rights", &self.rights)
            .field("disabled", &self.disabled)
            .field("session_epoch", &self.session_epoch)
            .field("origin", &self.origin)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    username: String,
    role: String,
    rights: Option<String>,
    disabled: bool,
    session_epoch: i64,
    password_hash: Option<String>,
    origin: String,
    subject: Option<String>,
}

impl TryFrom<UserRow> for UserRecord {
    type Error = StoreError;
    fn try_from(row: UserRow) -> Result<Self, StoreError> {
        let role: Role = row
            .role
            .parse()
            .map_err(|e: idem_domain::UnknownValue| StoreError::Contract(e.to_string()))?;
        let rights = match row.rights.as_deref() {
            None => Rights::everywhere(role),
            Some(text) => text
                .parse()
                .map_err(|e| StoreError::Contract(format!("rights of {:?}: {e}", row.username)))?,
        };
        Ok(UserRecord {
            role,
            rights,
            id: row.id,
            username: row.username,
            disabled: row.disabled,
            session_epoch: row.session_epoch,
            password_hash: row.password_hash.map(PasswordHash),
            origin: row
                .origin
                .parse()
                .map_err(|e: idem_domain::UnknownValue| StoreError::Contract(e.to_string()))?,
            subject: row.subject,
        })
    }
}

const USER_COLUMNS: &str =
    "id, username, role, rights, disabled, session_epoch, password_hash, origin, subject";

impl People<'_> {
    pub async fn user_by_name(self, username: &AccountName) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE username = $1");
        let row: Option<UserRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(username.as_str()).fetch_optional(pool).await?
        });
        row.map(UserRecord::try_from).transpose()
    }

    /// The account made for an OpenID Connect subject (issuer and `sub`).
    pub async fn user_by_subject(self, subject: &str) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE subject = $1");
        let row: Option<UserRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(subject).fetch_optional(pool).await?
        });
        row.map(UserRecord::try_from).transpose()
    }

    pub async fn user_by_id(self, id: i64) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        let row: Option<UserRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(id).fetch_optional(pool).await?
        });
        row.map(UserRecord::try_from).transpose()
    }

    /// Whether any account exists (the sign-in page says how to make the
    /// first one when none does).
    pub async fn any_users(self) -> StoreResult<bool> {
        const SQL: &str = "SELECT EXISTS (SELECT 1 FROM users)";
        let any: bool = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).fetch_one(pool).await?
        });
        Ok(any)
    }

    pub async fn users(self) -> StoreResult<Vec<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY username");
        let rows: Vec<UserRow> =
            dispatch!(&self.pools, pool => { sqlx::query_as(&sql).fetch_all(pool).await? });
        rows.into_iter().map(UserRecord::try_from).collect()
    }

    /// Creates a password account; `Ok(None)` when the name is taken.
    pub async fn create_user(
        self,
        username: &AccountName,
        role: Role,
        hash: Option<&PasswordHash>,
    ) -> StoreResult<Option<i64>> {
        self.create_account(username, role, hash, AccountOrigin::Password)
            .await
    }

    /// Creates an account of `origin` (a proxy account has no password);
    /// `Ok(None)` when the name is taken, by an account of either origin.
    pub async fn create_account(
        self,
        username: &AccountName,
        role: Role,
        hash: Option<&PasswordHash>,
        origin: AccountOrigin,
    ) -> StoreResult<Option<i64>> {
        self.create_account_with(username, &Rights::everywhere(role), hash, origin)
            .await
    }

    /// [`Self::create_account`] with rights that may be limited to teams.
    pub async fn create_account_with(
        self,
        username: &AccountName,
        rights: &Rights,
        hash: Option<&PasswordHash>,
        origin: AccountOrigin,
    ) -> StoreResult<Option<i64>> {
        const SQL: &str = "INSERT INTO users (username, role, rights, password_hash, disabled, created_at, updated_at, origin) \
             VALUES ($1, $2, $3, $4, FALSE, $5, $5, $6) ON CONFLICT (username) DO NOTHING RETURNING id";
        let (role, limited) = stored(rights)?;
        let now = Ts::now();
        let id: Option<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(username.as_str()).bind(role).bind(limited.as_deref())
                .bind(hash.map(PasswordHash::expose)).bind(now).bind(origin.as_str())
                .fetch_optional(pool).await?
        });
        Ok(id)
    }

    /// Creates an account for a person an OpenID provider signed in, bound
    /// to their `subject` (issuer and `sub`); `Ok(None)` when the name or
    /// the subject already has an account.
    pub async fn create_oidc_account(
        self,
        username: &AccountName,
        rights: &Rights,
        subject: &str,
    ) -> StoreResult<Option<i64>> {
        const SQL: &str = "INSERT INTO users (username, role, rights, password_hash, disabled, created_at, updated_at, origin, subject) \
             VALUES ($1, $2, $3, NULL, FALSE, $4, $4, 'oidc', $5) ON CONFLICT DO NOTHING RETURNING id";
        let (role, limited) = stored(rights)?;
        let now = Ts::now();
        let id: Option<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(username.as_str()).bind(role).bind(limited.as_deref()).bind(now).bind(subject)
                .fetch_optional(pool).await?
        });
        Ok(id)
    }

    /// Changes a user's role (on every consumer) and ends their sessions;
    /// `false` when no such user.
    pub async fn set_role(self, username: &AccountName, role: Role) -> StoreResult<bool> {
        self.set_rights(username, &Rights::everywhere(role)).await
    }

    /// Changes a user's rights (a role, maybe limited to teams) and ends
    /// their sessions; `false` when no such user.
    pub async fn set_rights(self, username: &AccountName, rights: &Rights) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET role = $2, rights = $3, session_epoch = session_epoch + 1, \
             updated_at = $4 WHERE username = $1";
        let (role, limited) = stored(rights)?;
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(username.as_str()).bind(role).bind(limited.as_deref()).bind(now)
                .execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Sets a new password and ends the user's sessions; `false` when no
    /// password account has the name (an identity proxy's account never
    /// gets a password).
    pub async fn set_password(
        self,
        username: &AccountName,
        hash: &PasswordHash,
    ) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET password_hash = $2, session_epoch = session_epoch + 1, updated_at = $3 \
             WHERE username = $1 AND origin = 'password'";
        self.update_user(SQL, username, hash.expose()).await
    }

    /// Changes a user's rights from `from` to `to` and ends their sessions,
    /// only if they still are `from` (two sign-ins at once change them
    /// once); `false` when they were not.
    pub async fn change_rights(
        self,
        username: &AccountName,
        from: &Rights,
        to: &Rights,
    ) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET role = $4, rights = $5, session_epoch = session_epoch + 1, \
             updated_at = $6 WHERE username = $1 AND role = $2 AND COALESCE(rights, '') = $3";
        let (from_role, from_limited) = stored(from)?;
        let (role, limited) = stored(to)?;
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(username.as_str()).bind(from_role).bind(from_limited.unwrap_or_default())
                .bind(role).bind(limited.as_deref()).bind(now)
                .execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Ends every session of a user (their role stays); `false` when no such user.
    pub async fn end_sessions(self, username: &AccountName) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET session_epoch = session_epoch + 1, updated_at = $2 WHERE username = $1";
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(username.as_str()).bind(now).execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Disables (or re-enables) a user; disabling ends their sessions.
    pub async fn set_disabled(self, username: &AccountName, disabled: bool) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET disabled = $2, session_epoch = session_epoch + 1, updated_at = $3 WHERE username = $1";
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(username.as_str()).bind(disabled).bind(now).execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Replaces a hash with a stronger one after a successful sign-in; the
    /// user's sessions stay valid.
    pub async fn upgrade_password_hash(self, id: i64, hash: &PasswordHash) -> StoreResult<()> {
        const SQL: &str = "UPDATE users SET password_hash = $2 WHERE id = $1";
        dispatch!(&self.pools, pool => { sqlx::query(SQL).bind(id).bind(hash.expose()).execute(pool).await?; });
        Ok(())
    }
}

impl Store {
    async fn update_user(
        &self,
        sql: &'static str,
        username: &AccountName,
        value: &str,
    ) -> StoreResult<bool> {
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(sql).bind(username.as_str()).bind(value).bind(now).execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }
}

/// Rights as stored: the highest role, and the rights in words when they
/// are limited to teams (`NULL` otherwise, as every account before teams).
fn stored(rights: &Rights) -> StoreResult<(&'static str, Option<String>)> {
    let role = rights
        .highest()
        .ok_or_else(|| StoreError::Contract("an account holds no role".into()))?;
    Ok((
        role.as_str(),
        rights.is_limited().then(|| rights.to_string()),
    ))
}
