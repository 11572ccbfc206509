//! Authentication and the hardened session, over real HTTP: every rule is
//! checked on the server.
//!
//! The tests live in themed modules; the log capture and sign-in helpers they
//! share are here.

// The harness every server test binary shares, one folder up.
use crate::common;

mod accounts;
mod csrf_and_roles;
mod headers;
mod sessions;
mod sign_in;

use std::sync::{Arc, Mutex, OnceLock};

use common::{TestApp, spawn_with};
use idem_store::testing::TestDatabase;

/// Log lines of this test binary, to check what errors write (and never write).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || Writer(writer.clone()))
            .try_init();
        buffer
    })
    .clone()
}

struct Writer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn app() -> TestApp {
    logs();
    spawn_with(|_| {}, TestDatabase::sqlite().await).await
}

fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

fn session_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

async fn sign_in_with(
    app: &TestApp,
    client: &reqwest::Client,
    name: &str,
    password: &str,
    next: &str,
) -> reqwest::Response {
    app.post_form(
        client,
        "/login",
        &[("username", name), ("password", password), ("next", next)],
    )
    .await
}

fn cookie_value(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap().to_owned()
}
