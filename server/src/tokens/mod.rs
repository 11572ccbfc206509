//! `idem token …`: tokens for the API (`crate::api`), from the command
//! line of the server's own binary. A new token's secret is printed once;
//! only its hash is kept. Creating and revoking are audited.

use idem_domain::Rights;
use idem_store::{Store, TokenCreated, Ts};

use crate::accounts::AccountError;

mod page;

pub use page::create_from_page;

/// Who the audit log says created or revoked a token from the command line.
pub const COMMAND_LINE: &str = "idem token (command line)";

/// An expiry as typed: a number of days (`30d`) or hours (`12h`).
pub fn lifetime(text: &str) -> Result<chrono::TimeDelta, AccountError> {
    let invalid = || {
        AccountError::Invalid(format!(
            "--expires {text:?}: write a number of days or hours, such as 30d or 12h"
        ))
    };
    let (number, per): (&str, fn(i64) -> chrono::TimeDelta) =
        match (text.strip_suffix('d'), text.strip_suffix('h')) {
            (Some(days), _) => (days, chrono::TimeDelta::days),
            (_, Some(hours)) => (hours, chrono::TimeDelta::hours),
            _ => return Err(invalid()),
        };
    let number: i64 = number.parse().map_err(|_| invalid())?;
    if !(1..=3650).contains(&number) {
        return Err(invalid());
    }
    Ok(per(number))
}

/// A token's name as typed ([`idem_domain::TokenName`]).
pub fn token_name(text: &str) -> Result<idem_domain::TokenName, AccountError> {
    idem_domain::TokenName::parse(text).map_err(|e| AccountError::Invalid(e.to_string()))
}

/// What to create.
pub struct Request<'a> {
    pub name: &'a str,
    pub owner: &'a str,
    pub rights: &'a Rights,
    pub expires: Option<chrono::TimeDelta>,
}

/// Creates a token from the command line; the secret, to be shown once.
pub async fn create(store: &Store, req: &Request<'_>) -> Result<String, AccountError> {
    create_as(store, req, COMMAND_LINE, None).await
}

/// Creates a token as `created_by` (audited); the secret, to be shown once.
pub async fn create_as(
    store: &Store,
    req: &Request<'_>,
    created_by: &str,
    client_addr: Option<&str>,
) -> Result<String, AccountError> {
    let name = token_name(req.name)?;
    let owner = idem_domain::AccountName::parse(req.owner)
        .map_err(|_| AccountError::NoSuchUser(req.owner.to_owned()))?;
    let secret = crate::api::new_secret();
    let hash = crate::api::secret_hash(&secret);
    let created = store
        .tokens()
        .create_token(&idem_store::NewToken {
            name: &name,
            owner: &owner,
            rights: req.rights,
            secret_sha256: &hash,
            expires_at: req.expires.map(|after| Ts::now() + after),
            created_by,
            client_addr,
        })
        .await?;
    match created {
        TokenCreated::Created { .. } => Ok(secret),
        TokenCreated::NameTaken => Err(AccountError::Invalid(format!(
            "a token named \"{name}\" exists or existed; names are never reused"
        ))),
        TokenCreated::NoSuchOwner => Err(AccountError::NoSuchUser(req.owner.to_owned())),
    }
}

/// Revokes a live token.
pub async fn revoke(store: &Store, name: &str) -> Result<(), AccountError> {
    store
        .tokens()
        .revoke_token(&token_name(name)?, COMMAND_LINE, None)
        .await?
        .map(|_| ())
        .ok_or_else(|| AccountError::Invalid(format!("no live token named {name:?}")))
}

/// `name  owner  rights  state  expires  last used`, one token a line.
pub async fn list(store: &Store) -> Result<String, AccountError> {
    let tokens = store.tokens().list().await?;
    let now = chrono::Utc::now();
    let day = |t: Option<chrono::DateTime<chrono::Utc>>, none: &str| {
        t.map_or(none.to_owned(), |t| t.format("%Y-%m-%d %H:%M").to_string())
    };
    let mut out = String::from("name\towner\trights\tstate\texpires\tlast used\n");
    for t in tokens {
        let state = match (t.revoked_at, t.is_live(now)) {
            (Some(_), _) => "revoked",
            (None, false) => "expired",
            (None, true) => "live",
        };
        out.push_str(&format!(
            "{}\t{}\t{}\t{state}\t{}\t{}\n",
            t.name,
            t.owner,
            t.rights,
            day(t.expires_at, "never"),
            day(t.last_used_at, "never"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{lifetime, token_name};

    #[test]
    fn a_token_name_is_short_plain_text() {
        for good in ["deploy-bot", "nightly.reconcile", "ci_2"] {
            assert_eq!(token_name(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "Deploy",
            "-bot",
            "a b",
            "<script>",
            "bot/1",
            &"x".repeat(65),
        ] {
            assert!(token_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_lifetime_is_days_or_hours() {
        assert_eq!(lifetime("30d").unwrap(), chrono::TimeDelta::days(30));
        assert_eq!(lifetime("12h").unwrap(), chrono::TimeDelta::hours(12));
        for bad in ["", "d", "0d", "30", "30m", "-1d", "99999d", "1é", "é"] {
            assert!(lifetime(bad).is_err(), "{bad:?}");
        }
    }
}
