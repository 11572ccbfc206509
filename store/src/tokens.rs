//! Tokens for machines and people's scripts (`/api/v1`): created by an
//! admin, kept as the SHA-256 of their secret, refused once revoked or
//! expired or once their owner's account is disabled. Every check reads the
//! table, so a revocation holds at once on every replica.
//!
//! The secret itself never reaches this module: callers hand in its hash.

use chrono::{DateTime, Utc};
use idem_domain::{AccountName, AuditAction, AuditResult, AuditState, Rights, Role, TokenName};

use crate::facets::Tokens;
use crate::{StoreError, StoreResult, audit::NewAuditEntry, dialect::dispatch, ts::Ts};

/// How often a token's "last used" is written: at most once a minute, so a
/// busy script does not write on every request.
pub const TOKEN_USE_RESOLUTION_SECONDS: i64 = 60;

/// A token as listed (never its secret or hash).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenRecord {
    pub id: i64,
    pub name: String,
    /// The account answerable for the token.
    pub owner: String,
    /// The highest role it holds anywhere.
    pub role: Role,
    /// Where each role holds (`role` everywhere unless limited to teams).
    pub rights: Rights,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenRecord {
    /// Whether the token opens the API at `now` (its owner's account aside).
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|until| until > now)
    }
}

/// A live token as the API checks it: the token, and what its owner's
/// account holds now (read in the same statement).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveToken {
    pub token: TokenRecord,
    pub owner_id: i64,
    pub owner_rights: Rights,
}

/// A token to create.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    pub name: &'a TokenName,
    pub owner: &'a AccountName,
    pub rights: &'a Rights,
    /// SHA-256 of the secret, hex.
    pub secret_sha256: &'a str,
    pub expires_at: Option<Ts>,
    /// Who creates it, as the audit log names them.
    pub created_by: &'a str,
    pub client_addr: Option<&'a str>,
}

/// What [`Store::create_token`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCreated {
    Created {
        id: i64,
    },
    /// Another token has this name (live, revoked or expired: names are
    /// never reused, so an audit row names one token).
    NameTaken,
    /// No enabled account has the owner's name.
    NoSuchOwner,
}

#[derive(sqlx::FromRow)]
struct TokenRow {
    id: i64,
    name: String,
    owner: String,
    role: String,
    rights: Option<String>,
    created_by: String,
    created_at: Ts,
    expires_at: Option<Ts>,
    last_used_at: Option<Ts>,
    revoked_at: Option<Ts>,
}

impl TryFrom<TokenRow> for TokenRecord {
    type Error = StoreError;
    fn try_from(row: TokenRow) -> Result<Self, StoreError> {
        let role: Role = row
            .role
            .parse()
            .map_err(|e: idem_domain::UnknownValue| StoreError::Contract(e.to_string()))?;
        let rights = match row.rights.as_deref() {
            None => Rights::everywhere(role),
            Some(text) => text.parse().map_err(|e| {
                StoreError::Contract(format!("rights of token {:?}: {e}", row.name))
            })?,
        };
        Ok(TokenRecord {
            id: row.id,
            name: row.name,
            owner: row.owner,
            role,
            rights,
            created_by: row.created_by,
            created_at: row.created_at.0,
            expires_at: row.expires_at.map(|t| t.0),
            last_used_at: row.last_used_at.map(|t| t.0),
            revoked_at: row.revoked_at.map(|t| t.0),
        })
    }
}

#[derive(sqlx::FromRow)]
struct LiveRow {
    #[sqlx(flatten)]
    token: TokenRow,
    owner_id: i64,
    owner_role: String,
    owner_rights: Option<String>,
}

impl TryFrom<LiveRow> for LiveToken {
    type Error = StoreError;
    fn try_from(row: LiveRow) -> Result<Self, StoreError> {
        let role: Role = row
            .owner_role
            .parse()
            .map_err(|e: idem_domain::UnknownValue| StoreError::Contract(e.to_string()))?;
        let owner_rights = match row.owner_rights.as_deref() {
            None => Rights::everywhere(role),
            Some(text) => text
                .parse()
                .map_err(|e| StoreError::Contract(format!("rights of a token's owner: {e}")))?,
        };
        Ok(LiveToken {
            token: row.token.try_into()?,
            owner_id: row.owner_id,
            owner_rights,
        })
    }
}

const TOKEN_COLUMNS: &str = "t.id, t.name, t.owner, t.role, t.rights, t.created_by, t.created_at, \
     t.expires_at, t.last_used_at, t.revoked_at";

impl Tokens<'_> {
    /// Creates a token for an enabled account, audited in the same
    /// transaction (`token created`, naming the token, its owner and rights).
    pub async fn create_token(self, new: &NewToken<'_>) -> StoreResult<TokenCreated> {
        const OWNER: &str = "SELECT COUNT(*) FROM users WHERE username = $1 AND NOT disabled";
        const INSERT: &str = "INSERT INTO api_tokens (name, owner, role, rights, secret_sha256, \
             created_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (name) DO NOTHING RETURNING id";
        let role = new
            .rights
            .highest()
            .ok_or_else(|| StoreError::Contract("a token holds no role".into()))?;
        let limited = new.rights.is_limited().then(|| new.rights.to_string());
        let now = Ts::now();
        let mut tx = self.begin().await?;
        let owners: i64 = dispatch!(&mut tx.inner, t => {
            sqlx::query_scalar(OWNER).bind(new.owner.as_str()).fetch_one(&mut **t).await?
        });
        if owners == 0 {
            return Ok(TokenCreated::NoSuchOwner);
        }
        let id: Option<i64> = dispatch!(&mut tx.inner, t => {
            sqlx::query_scalar(INSERT).bind(new.name.as_str()).bind(new.owner.as_str()).bind(role.as_str())
                .bind(limited.as_deref()).bind(new.secret_sha256).bind(new.created_by)
                .bind(now).bind(new.expires_at).fetch_optional(&mut **t).await?
        });
        let Some(id) = id else {
            return Ok(TokenCreated::NameTaken);
        };
        let expires = new.expires_at.map_or("never expires".to_owned(), |t| {
            format!("expires {}", t.0.to_rfc3339())
        });
        let state = format!("{} of {}, {expires}", new.rights, new.owner);
        tx.append_audit(&NewAuditEntry {
            target: Some(new.name.as_str()),
            state_after: Some(AuditState::Words(state)),
            client_addr: new.client_addr,
            ..NewAuditEntry::new(
                new.created_by,
                Role::Admin.as_str(),
                AuditAction::TokenCreated,
                AuditResult::Created,
            )
        })
        .await?;
        tx.commit().await?;
        Ok(TokenCreated::Created { id })
    }

    /// Every token, live or not, by name.
    pub async fn list(self) -> StoreResult<Vec<TokenRecord>> {
        let sql = format!("SELECT {TOKEN_COLUMNS} FROM api_tokens t ORDER BY t.name");
        let rows: Vec<TokenRow> =
            dispatch!(&self.pools, pool => { sqlx::query_as(&sql).fetch_all(pool).await? });
        rows.into_iter().map(TokenRecord::try_from).collect()
    }

    /// Revokes a live token, audited in the same transaction: the audit
    /// row's id; `None` when no token of that name is live (unknown, or
    /// revoked already).
    pub async fn revoke_token(
        self,
        name: &TokenName,
        by: &str,
        client_addr: Option<&str>,
    ) -> StoreResult<Option<i64>> {
        const REVOKE: &str =
            "UPDATE api_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL";
        let now = Ts::now();
        let mut tx = self.begin().await?;
        let done = dispatch!(&mut tx.inner, t => {
            sqlx::query(REVOKE).bind(name.as_str()).bind(now).execute(&mut **t).await?.rows_affected()
        });
        if done == 0 {
            return Ok(None);
        }
        let audit_id = tx
            .append_audit(&NewAuditEntry {
                target: Some(name.as_str()),
                client_addr,
                ..NewAuditEntry::new(
                    by,
                    Role::Admin.as_str(),
                    AuditAction::TokenRevoked,
                    AuditResult::Revoked,
                )
            })
            .await?;
        tx.commit().await?;
        Ok(Some(audit_id))
    }

    /// Whether the token `id` still opens the API at `now`: live, and its
    /// owner's account enabled (long work, such as an export, asks again).
    pub async fn token_is_live(self, id: i64, now: Ts) -> StoreResult<bool> {
        const SQL: &str = "SELECT COUNT(*) FROM api_tokens t JOIN users u ON u.username = t.owner \
             WHERE t.id = $1 AND t.revoked_at IS NULL AND NOT u.disabled \
             AND (t.expires_at IS NULL OR t.expires_at > $2)";
        let live: i64 = dispatch!(&self.pools, pool => {
            sqlx::query_scalar(SQL).bind(id).bind(now).fetch_one(pool).await?
        });
        Ok(live == 1)
    }

    /// The live token whose secret hashes to `secret_sha256`, if its owner's
    /// account is enabled, with what that account holds, in one statement
    /// (every API request asks); its last use is recorded (at most once a
    /// minute). `None` for anything else: unknown, revoked, expired, or an
    /// owner disabled or gone.
    pub async fn token_by_secret(
        self,
        secret_sha256: &str,
        now: Ts,
    ) -> StoreResult<Option<LiveToken>> {
        const TOUCH: &str = "UPDATE api_tokens SET last_used_at = $2 WHERE id = $1 \
             AND (last_used_at IS NULL OR last_used_at < $3)";
        let sql = format!(
            "SELECT {TOKEN_COLUMNS}, u.id AS owner_id, u.role AS owner_role, \
             u.rights AS owner_rights FROM api_tokens t JOIN users u ON u.username = t.owner \
             WHERE t.secret_sha256 = $1 AND t.revoked_at IS NULL AND NOT u.disabled \
             AND (t.expires_at IS NULL OR t.expires_at > $2)"
        );
        let row: Option<LiveRow> = dispatch!(&self.pools, pool => {
            sqlx::query_as(&sql).bind(secret_sha256).bind(now).fetch_optional(pool).await?
        });
        let Some(live) = row.map(LiveToken::try_from).transpose()? else {
            return Ok(None);
        };
        let stale = now - chrono::TimeDelta::seconds(TOKEN_USE_RESOLUTION_SECONDS);
        if live.token.last_used_at.is_none_or(|at| at < stale.0) {
            dispatch!(&self.pools, pool => {
                sqlx::query(TOUCH).bind(live.token.id).bind(now).bind(stale).execute(pool).await?;
            });
        }
        Ok(Some(live))
    }
}
