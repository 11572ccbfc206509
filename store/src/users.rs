//! Users, their roles and password hashes, and failed sign-ins.
//!
//! [`UserRecord`] holds a password hash, so it is never serialisable and its
//! `Debug` leaves the hash out; [`PasswordHash`] can be read only by the code
//! that verifies it.

use idem_domain::Role;

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
    pub role: Role,
    pub disabled: bool,
    /// Sessions created under another epoch are no longer valid.
    pub session_epoch: i64,
    /// `None` for users signed in by an identity proxy.
    pub password_hash: Option<PasswordHash>,
}

impl std::fmt::Debug for UserRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRecord")
            .field("id", &self.id)
            .field("username", &self.username)
            .field("role", &self.role)
            .field("disabled", &self.disabled)
            .field("session_epoch", &self.session_epoch)
            .finish_non_exhaustive()
    }
}

#[derive(sqlx::FromRow)]
struct UserRow {
    id: i64,
    username: String,
    role: String,
    disabled: bool,
    session_epoch: i64,
    password_hash: Option<String>,
}

impl TryFrom<UserRow> for UserRecord {
    type Error = StoreError;
    fn try_from(row: UserRow) -> Result<Self, StoreError> {
        Ok(UserRecord {
            role: row
                .role
                .parse()
                .map_err(|e: idem_domain::UnknownValue| StoreError::Contract(e.to_string()))?,
            id: row.id,
            username: row.username,
            disabled: row.disabled,
            session_epoch: row.session_epoch,
            password_hash: row.password_hash.map(PasswordHash),
        })
    }
}

const USER_COLUMNS: &str = "id, username, role, disabled, session_epoch, password_hash";

impl Store {
    pub async fn user_by_name(&self, username: &str) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE username = $1");
        let row: Option<UserRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(username).fetch_optional(pool).await?
        });
        row.map(UserRecord::try_from).transpose()
    }

    pub async fn user_by_id(&self, id: i64) -> StoreResult<Option<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users WHERE id = $1");
        let row: Option<UserRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(id).fetch_optional(pool).await?
        });
        row.map(UserRecord::try_from).transpose()
    }

    pub async fn users(&self) -> StoreResult<Vec<UserRecord>> {
        let sql = format!("SELECT {USER_COLUMNS} FROM users ORDER BY username");
        let rows: Vec<UserRow> =
            dispatch!(&self.pools, pool => { sqlx::query_as(&sql).fetch_all(pool).await? });
        rows.into_iter().map(UserRecord::try_from).collect()
    }

    /// Creates a user; `Ok(None)` when the name is taken.
    pub async fn create_user(
        &self,
        username: &str,
        role: Role,
        hash: Option<&PasswordHash>,
    ) -> StoreResult<Option<i64>> {
        const SQL: &str = "INSERT INTO users (username, role, password_hash, disabled, created_at, updated_at) \
             VALUES ($1, $2, $3, FALSE, $4, $4) ON CONFLICT (username) DO NOTHING RETURNING id";
        let now = Ts::now();
        let id: Option<i64> = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(username).bind(role.as_str()).bind(hash.map(PasswordHash::expose))
                .bind(now).fetch_optional(pool).await?
        });
        Ok(id)
    }

    /// Changes a user's role and ends their sessions; `false` when no such user.
    pub async fn set_role(&self, username: &str, role: Role) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET role = $2, session_epoch = session_epoch + 1, updated_at = $3 WHERE username = $1";
        self.update_user(SQL, username, role.as_str()).await
    }

    /// Sets a new password and ends the user's sessions.
    pub async fn set_password(&self, username: &str, hash: &PasswordHash) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET password_hash = $2, session_epoch = session_epoch + 1, updated_at = $3 WHERE username = $1";
        self.update_user(SQL, username, hash.expose()).await
    }

    /// Disables (or re-enables) a user; disabling ends their sessions.
    pub async fn set_disabled(&self, username: &str, disabled: bool) -> StoreResult<bool> {
        const SQL: &str = "UPDATE users SET disabled = $2, session_epoch = session_epoch + 1, updated_at = $3 WHERE username = $1";
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(SQL).bind(username).bind(disabled).bind(now).execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Replaces a hash with a stronger one after a successful sign-in; the
    /// user's sessions stay valid.
    pub async fn upgrade_password_hash(&self, id: i64, hash: &PasswordHash) -> StoreResult<()> {
        const SQL: &str = "UPDATE users SET password_hash = $2 WHERE id = $1";
        dispatch!(&self.pools, pool => { sqlx::query(SQL).bind(id).bind(hash.expose()).execute(pool).await?; });
        Ok(())
    }

    async fn update_user(
        &self,
        sql: &'static str,
        username: &str,
        value: &str,
    ) -> StoreResult<bool> {
        let now = Ts::now();
        let done = dispatch!(&self.pools, pool => {
            sqlx::query(sql).bind(username).bind(value).bind(now).execute(pool).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Remembers a failed sign-in against each subject (`account:…`, `address:…`).
    pub async fn record_login_failure(&self, subjects: &[&str], at: Ts) -> StoreResult<()> {
        const SQL: &str = "INSERT INTO login_failures (subject, at) VALUES ($1, $2)";
        let mut tx = self.begin().await?;
        for subject in subjects {
            dispatch!(&mut tx.inner, tx => { sqlx::query(SQL).bind(*subject).bind(at).execute(&mut **tx).await?; });
        }
        tx.commit().await
    }

    /// Failed sign-ins against `subject` since `since`, counting no further than `cap`.
    pub async fn login_failures_since(
        &self,
        subject: &str,
        since: Ts,
        cap: i64,
    ) -> StoreResult<i64> {
        const SQL: &str = "SELECT COUNT(*) FROM (SELECT 1 FROM login_failures WHERE subject = $1 AND at >= $2 LIMIT $3) AS recent";
        let n: i64 = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(subject).bind(since).bind(cap).fetch_one(pool).await?
        });
        Ok(n)
    }
}
