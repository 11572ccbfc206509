//! Accounts: the demo's, the command line's, and passwords kept out of
//! debug output and arguments.

use std::time::Duration;

use idem_store::testing::TestDatabase;

use super::{
    common::{get, new_client, spawn_bare, spawn_with, visible},
    location, logs, sign_in_with,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_mode_and_only_demo_mode_has_the_three_demo_accounts() {
    logs();
    let quiet = spawn_with(|_| {}, TestDatabase::sqlite().await).await;
    let names: Vec<String> = quiet
        .store
        .people()
        .users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.username)
        .collect();
    assert_eq!(
        names,
        ["viewer"],
        "outside demo mode only the accounts someone created exist"
    );

    let demo = spawn_bare(
        |c| {
            c.demo = idem::config::DemoSetting::On;
            c.demo_backfill = Duration::ZERO;
        },
        TestDatabase::sqlite().await,
    )
    .await;
    for name in ["viewer", "operator", "admin"] {
        let response = sign_in_with(&demo, &new_client(), name, name, "/").await;
        assert_eq!(location(&response), "/", "{name} / {name}");
    }
    let login_page = get(&new_client(), &demo.url("/login")).await.1;
    assert!(visible(&login_page).contains("Demo accounts"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_refuses_to_listen_beyond_loopback_unless_asked_for_by_name() {
    logs();
    let db = TestDatabase::sqlite().await;
    let beyond = |demo| {
        let mut config = idem::Config::for_tests(&db.url);
        // An address of no machine here (TEST-NET-1): refused before binding.
        config.addr = "192.0.2.1:0".parse().unwrap();
        config.embedded_default = true;
        config.demo = demo;
        config.demo_backfill = Duration::ZERO;
        config
    };
    let refused = idem::Application::build(beyond(idem::config::DemoSetting::Auto))
        .await
        .err()
        .expect("the demo is refused on a non-loopback address");
    let said = refused.to_string();
    assert!(
        said.contains("IDEM_DEMO=1") && said.contains("192.0.2.1"),
        "{said}"
    );
    // Asked for by name, start-up goes on (and here fails only to bind).
    let asked = idem::Application::build(beyond(idem::config::DemoSetting::On))
        .await
        .err()
        .expect("192.0.2.1 is not this machine's");
    assert!(
        matches!(asked, idem::startup::StartError::Bind { .. }),
        "{asked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_s_accounts_are_disabled_when_its_database_is_served_without_the_demo() {
    logs();
    let db = TestDatabase::sqlite().await;
    let start = |demo| {
        let mut config = idem::Config::for_tests(&db.url);
        config.demo = demo;
        config.demo_backfill = Duration::ZERO;
        idem::Application::build(config)
    };
    drop(start(idem::config::DemoSetting::On).await.unwrap());
    // Someone else's account named like a demo one keeps working.
    db.store
        .people()
        .set_password(
            &idem_store::testing::account("viewer"),
            &idem::auth::Passwords::new(1)
                .hash("a real one".into())
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    drop(start(idem::config::DemoSetting::Off).await.unwrap());
    let disabled = |name: &'static str| {
        let store = db.store.clone();
        async move {
            store
                .people()
                .user_by_name(&idem_store::testing::account(name))
                .await
                .unwrap()
                .unwrap()
                .disabled
        }
    };
    assert!(disabled("admin").await, "admin / admin would let anyone in");
    assert!(disabled("operator").await);
    assert!(
        !disabled("viewer").await,
        "its password is no longer its name"
    );
    // The demo back on brings its accounts back.
    drop(start(idem::config::DemoSetting::On).await.unwrap());
    assert!(!disabled("admin").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_s_debug_output_never_holds_the_database_password() {
    let url = "postgres://idem:s3cr3t-pa55@127.0.0.1:1/idem";
    let store = idem_store::Store::connect(&idem_store::StoreConfig::new(url)).unwrap();
    let state = idem_app::serving::AppState::new(
        leptos::prelude::LeptosOptions::builder()
            .output_name("idem")
            .build(),
        store.clone(),
        idem_app::api::ConsoleInfo {
            demo: false,
            backend: "postgres".into(),
            zone: "UTC".into(),
            user: None,
            database_down_since: None,
        },
        Duration::ZERO,
    );
    for printed in [
        format!("{store:?}"),
        format!("{state:?}"),
        format!("{state:#?}"),
    ] {
        assert!(!printed.contains("s3cr3t-pa55"), "{printed}");
    }
    assert!(format!("{store:?}").contains("postgres"));
}

fn idem(database_url: &str, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the idem binary runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_line_manages_accounts_and_never_takes_a_password_as_an_argument() {
    logs();
    let db = TestDatabase::sqlite().await;
    let url = db.url.clone();
    let ok = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        )
    };

    ok(&idem(
        &url,
        &["user", "add", "alice", "--role", "admin"],
        "a long enough secret\n",
    ));
    let refused = idem(
        &url,
        &[
            "user",
            "add",
            "mallory",
            "--role",
            "viewer",
            "--password",
            "x",
        ],
        "",
    );
    assert!(!refused.status.success(), "there is no --password argument");
    let short = idem(
        &url,
        &["user", "add", "shorty", "--role", "viewer"],
        "short\n",
    );
    assert!(
        !short.status.success()
            && String::from_utf8_lossy(&short.stderr).contains("at least 12 characters")
    );
    let taken = idem(
        &url,
        &["user", "add", "alice", "--role", "viewer"],
        "another long secret\n",
    );
    assert!(String::from_utf8_lossy(&taken.stderr).contains("already exists"));

    let app = spawn_with(|_| {}, db).await;
    let response = sign_in_with(&app, &new_client(), "alice", "a long enough secret", "/").await;
    assert_eq!(location(&response), "/");

    ok(&idem(&url, &["user", "role", "alice", "operator"], ""));
    ok(&idem(
        &url,
        &["user", "reset-password", "alice"],
        "a brand new secret!\n",
    ));
    let response = sign_in_with(&app, &new_client(), "alice", "a brand new secret!", "/").await;
    assert_eq!(location(&response), "/");
    ok(&idem(&url, &["user", "disable", "alice"], ""));
    // A role on some teams only, said back as it is kept.
    ok(&idem(
        &url,
        &[
            "user",
            "role",
            "alice",
            "operator",
            "--teams",
            "payments,growth",
        ],
        "",
    ));
    let admin_of_a_team = idem(
        &url,
        &["user", "role", "alice", "admin", "--teams", "payments"],
        "",
    );
    assert!(
        !admin_of_a_team.status.success()
            && String::from_utf8_lossy(&admin_of_a_team.stderr).contains("admin cannot be limited"),
        "{}",
        String::from_utf8_lossy(&admin_of_a_team.stderr)
    );
    let bad_team = idem(
        &url,
        &["user", "role", "alice", "viewer", "--teams", "Pay Ments"],
        "",
    );
    assert!(!bad_team.status.success());
    let list = idem(&url, &["user", "list"], "");
    let listed = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(
        listed.contains("alice") && listed.contains("operator") && listed.contains("disabled"),
        "{listed}"
    );
    assert!(
        listed.contains("operator@growth operator@payments"),
        "{listed}"
    );
    assert!(!listed.contains("argon2"), "hashes are never printed");
}
