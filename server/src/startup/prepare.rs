//! What start-up decides once the database answers: migrations, whether
//! the demo runs, the demo's accounts (created, or retired without it), and
//! the secret key fingerprints in the logs are keyed with.

use std::time::Duration;

use idem_store::{DEMO_DATA, Store, StoreError};

use super::StartError;
use crate::{
    auth::AuthContext,
    config::{Config, DemoSetting},
    demo,
};

/// What start-up decides once the database answers.
pub(super) struct Prepared {
    pub(super) demo: Option<demo::Settings>,
    /// What key fingerprints in the logs are keyed with: `IDEM_LOG_KEY_SECRET`,
    /// else this install's own, kept in the database.
    pub(super) log_key_secret: String,
}

/// Migrates, decides whether the demo runs and creates its accounts.
pub(super) async fn prepare(config: &Config, auth: &AuthContext) -> Result<Prepared, StartError> {
    let store = &auth.store;
    store.migrate().await?;
    tracing::info!(database = %config.database.redacted_url(), backend = store.backend(), "database ready");
    let demo = decide_demo(config, store).await?;
    if demo.is_none() && store.system().meta(DEMO_DATA).await?.is_some() {
        retire_demo_accounts(auth).await?;
    }
    if demo.is_some() {
        demo_may_listen(config)?;
        store.system().set_meta(DEMO_DATA, "1").await?;
        ensure_demo_accounts(auth).await?;
    }
    let log_key_secret = match &config.log_key_secret {
        Some(secret) => secret.0.clone(),
        None => {
            let generated = hex::encode(rand::random::<[u8; 32]>());
            store.system().log_fingerprint_secret(&generated).await?
        }
    };
    Ok(Prepared {
        demo,
        log_key_secret,
    })
}

/// The demo's accounts have their names as passwords: the demo listens on
/// a loopback address only, unless `IDEM_DEMO=1` asks for it explicitly
/// (then with a warning).
fn demo_may_listen(config: &Config) -> Result<(), StartError> {
    if config.addr.ip().is_loopback() {
        return Ok(());
    }
    if config.demo != DemoSetting::On {
        return Err(StartError::DemoOffLoopback { addr: config.addr });
    }
    tracing::warn!(
        addr = %config.addr,
        "the demo runs on a non-loopback address: anyone who reaches it can sign in as admin \
         with the password \"admin\""
    );
    eprintln!(
        "\n  WARNING: the demo listens on {}; its accounts (viewer, operator, admin) have their \
         names as passwords.\n",
        config.addr
    );
    Ok(())
}

/// In demo mode (only then), `viewer`, `operator`, `admin` and
/// `payments-oncall` (an operator of the payments team only) exist, each
/// with its own name as password.
async fn ensure_demo_accounts(auth: &AuthContext) -> Result<(), StartError> {
    for (name, rights) in idem_app::auth::DEMO_ACCOUNTS {
        let rights: idem_domain::Rights = rights.parse().map_err(StartError::DemoAccounts)?;
        let account = demo_account(name)?;
        match auth.store.people().user_by_name(&account).await? {
            None => {
                let hash = auth
                    .passwords
                    .hash((*name).to_owned())
                    .await
                    .map_err(|e| StartError::DemoAccounts(e.to_string()))?;
                auth.store
                    .people()
                    .create_account_with(
                        &account,
                        &rights,
                        Some(&hash),
                        idem_domain::AccountOrigin::Password,
                    )
                    .await?;
            }
            // Retired when Idem last ran without the demo: back again.
            Some(user) if user.disabled && has_demo_password(auth, &user).await => {
                auth.store.people().set_disabled(&account, false).await?;
            }
            Some(_) => {}
        }
    }
    println!(
        "\n  Demo accounts (password = name): viewer, operator, admin, payments-oncall \
         (operator of the payments team)"
    );
    Ok(())
}

/// The name of one of the demo's accounts.
fn demo_account(name: &str) -> Result<idem_domain::AccountName, StartError> {
    idem_domain::AccountName::parse(name).map_err(|e| StartError::DemoAccounts(e.to_string()))
}

/// Whether `user` is one of the demo's accounts, its password still its name.
async fn has_demo_password(auth: &AuthContext, user: &idem_store::UserRecord) -> bool {
    idem_app::auth::DEMO_ACCOUNTS
        .iter()
        .any(|(name, _)| *name == user.username)
        && auth
            .passwords
            .verify(user.username.clone(), user.password_hash.clone())
            .await
            .is_ok_and(|(matches, _)| matches)
}

/// Outside demo mode, on a database that once held the demo, the demo's
/// accounts (each name its own password) are disabled: they would let
/// anyone in as admin.
async fn retire_demo_accounts(auth: &AuthContext) -> Result<(), StartError> {
    for (name, _) in idem_app::auth::DEMO_ACCOUNTS {
        let account = demo_account(name)?;
        if let Some(user) = auth.store.people().user_by_name(&account).await?
            && !user.disabled
            && has_demo_password(auth, &user).await
        {
            auth.store.people().set_disabled(&account, true).await?;
            tracing::warn!(
                account = name,
                "the demo is off: its account (password = name) is disabled"
            );
        }
    }
    Ok(())
}

async fn decide_demo(config: &Config, store: &Store) -> Result<Option<demo::Settings>, StoreError> {
    let run = match config.demo {
        DemoSetting::On => true,
        DemoSetting::Off => false,
        DemoSetting::Auto => {
            config.embedded_default
                && (!store.claims().has_claims().await?
                    || store.system().meta(DEMO_DATA).await?.is_some())
        }
    };
    if !run {
        return Ok(None);
    }
    let backfill = if store.claims().has_claims().await? {
        Duration::ZERO
    } else {
        config.demo_backfill
    };
    Ok(Some(demo::Settings {
        seed: config.demo_seed.unwrap_or_else(rand::random),
        backfill,
    }))
}
