//! `idem user …`: accounts, from the command line of the server's own binary.
//! Passwords come from standard input or a prompt, never from an argument
//! (arguments show up in `ps` and shell history).

use std::io::{BufRead, IsTerminal};

use idem_domain::{Rights, Role};
use idem_store::Store;

use crate::auth::{Passwords, password::MAX_PASSWORD_BYTES};

/// The shortest password accepted for a new account.
pub const MIN_PASSWORD_CHARS: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("{0}")]
    Invalid(String),
    #[error("no user named {0:?}")]
    NoSuchUser(String),
    #[error("no password account named {0:?} (an identity proxy's account has no password)")]
    NoPasswordAccount(String),
    #[error("a user named {0:?} already exists")]
    Exists(String),
    #[error(transparent)]
    Store(#[from] idem_store::StoreError),
    #[error("{0}")]
    Password(#[from] crate::auth::password::PasswordError),
    #[error("cannot read the password: {0}")]
    Io(#[from] std::io::Error),
}

fn valid_name(name: &str) -> Result<idem_domain::AccountName, AccountError> {
    idem_domain::AccountName::parse(name)
        .map_err(|e| AccountError::Invalid(format!("invalid user name: {e}")))
}

/// Reads a new password: a prompt (typed twice, not echoed) on a terminal,
/// else the first line of standard input.
pub fn read_password() -> Result<String, AccountError> {
    let password = if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("New password: ")?;
        let second = rpassword::prompt_password("Again: ")?;
        if first != second {
            return Err(AccountError::Invalid("the two passwords differ".into()));
        }
        first
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    };
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AccountError::Invalid(format!(
            "a password needs at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(AccountError::Invalid(format!(
            "a password may have at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(password)
}

/// `role` everywhere, or only on `teams` when some are named.
pub fn rights(role: Role, teams: &[String]) -> Result<Rights, AccountError> {
    if teams.is_empty() {
        return Ok(Rights::everywhere(role));
    }
    Rights::on_teams(role, teams.iter().map(|t| t.trim()))
        .map_err(|e| AccountError::Invalid(format!("--teams: {e}")))
}

pub async fn add(
    store: &Store,
    name: &str,
    rights: &Rights,
    password: String,
) -> Result<(), AccountError> {
    let name = valid_name(name)?;
    let hash = Passwords::new(1).hash(password).await?;
    match store
        .people()
        .create_account_with(
            &name,
            rights,
            Some(&hash),
            idem_domain::AccountOrigin::Password,
        )
        .await?
    {
        Some(_) => Ok(()),
        None => Err(AccountError::Exists(name.into())),
    }
}

pub async fn set_rights(store: &Store, name: &str, rights: &Rights) -> Result<(), AccountError> {
    store
        .people()
        .set_rights(&valid_name(name)?, rights)
        .await?
        .then_some(())
        .ok_or_else(|| AccountError::NoSuchUser(name.into()))
}

pub async fn reset_password(
    store: &Store,
    name: &str,
    password: String,
) -> Result<(), AccountError> {
    let account = valid_name(name)?;
    let hash = Passwords::new(1).hash(password).await?;
    store
        .people()
        .set_password(&account, &hash)
        .await?
        .then_some(())
        .ok_or_else(|| AccountError::NoPasswordAccount(name.into()))
}

pub async fn set_disabled(store: &Store, name: &str, disabled: bool) -> Result<(), AccountError> {
    store
        .people()
        .set_disabled(&valid_name(name)?, disabled)
        .await?
        .then_some(())
        .ok_or_else(|| AccountError::NoSuchUser(name.into()))
}

/// `name  role  enabled|disabled`, one user a line.
pub async fn list(store: &Store) -> Result<String, AccountError> {
    let users = store.people().users().await?;
    let width = users
        .iter()
        .map(|u| u.username.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!("{:width$}  {:8}  {:9}  rights\n", "name", "role", "state");
    for u in users {
        out.push_str(&format!(
            "{:width$}  {:8}  {:9}  {}\n",
            u.username,
            u.role.as_str(),
            if u.disabled { "disabled" } else { "enabled" },
            if u.rights.is_limited() {
                u.rights.to_string()
            } else {
                "every team".to_owned()
            }
        ));
    }
    Ok(out)
}
