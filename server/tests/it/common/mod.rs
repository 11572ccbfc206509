//! The test harness: Idem on port 0 with its own database, and HTTP clients
//! signed in with a role.

mod calls;
mod fixture;
mod forms;
mod gate;
mod process;
mod wiretap;

pub use calls::{call, replay, replay_at, server_fn};
pub use fixture::{Fixture, dead_letter, dead_letter_with};
pub use forms::{Form, answer_shown, forms, location, post_as_browser};
pub use gate::Gate;
pub use process::{Process, lease_holder};
pub use wiretap::Wiretap;

use idem::{Application, Config};
use idem_domain::Role;
use idem_store::{Store, testing::TestDatabase};

pub struct TestApp {
    pub base: String,
    pub store: Store,
    /// The server's password checker (to count what sign-in computed).
    pub passwords: idem::auth::Passwords,
    /// Signed in as `viewer` (no redirects followed, cookies kept).
    pub client: reqwest::Client,
    pub _db: TestDatabase,
}

/// A client that keeps cookies and never follows redirects (tests look at them).
pub fn new_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap()
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        get(&self.client, &self.url(path)).await
    }

    /// Creates `name` with `role` (password `{name}-password`).
    pub async fn create_user(&self, name: &str, role: Role) {
        create_user(&self.store, name, role).await;
    }

    /// A same-origin form post, as the browser sends it.
    pub async fn post_form(
        &self,
        client: &reqwest::Client,
        path: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        client
            .post(self.url(path))
            .header("sec-fetch-site", "same-origin")
            .form(form)
            .send()
            .await
            .expect("the server answers")
    }

    /// A new client signed in as `name` (who must exist).
    pub async fn sign_in(&self, name: &str) -> reqwest::Client {
        let client = new_client();
        let password = format!("{name}-password");
        let response = self
            .post_form(
                &client,
                "/login",
                &[("username", name), ("password", &password), ("next", "/")],
            )
            .await;
        assert_eq!(response.status().as_u16(), 303, "signing in as {name}");
        assert_eq!(response.headers()["location"], "/", "signed in as {name}");
        client
    }
}

/// Creates `name` with `role` and the password `{name}-password` in `store`.
pub async fn create_user(store: &Store, name: &str, role: Role) {
    let hash = idem::auth::Passwords::new(1)
        .hash(format!("{name}-password"))
        .await
        .unwrap();
    store
        .people()
        .create_user(&idem_store::testing::account(name), role, Some(&hash))
        .await
        .unwrap()
        .expect("a new user");
}

pub async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let response = client.get(url).send().await.expect("the server answers");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// Idem with `adjust`ed settings; `client` is not signed in.
pub async fn spawn_bare(adjust: impl FnOnce(&mut Config), db: TestDatabase) -> TestApp {
    let mut config = Config::for_tests(&db.url);
    adjust(&mut config);
    let app = Application::build(config).await.expect("Idem starts");
    let base = format!("http://{}", app.local_addr());
    let store = app.store().clone();
    let passwords = app.passwords().clone();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    TestApp {
        base,
        store,
        passwords,
        client: new_client(),
        _db: db,
    }
}

/// Idem with `adjust`ed settings, and a `viewer` signed in.
pub async fn spawn_with(adjust: impl FnOnce(&mut Config), db: TestDatabase) -> TestApp {
    let mut app = spawn_bare(adjust, db).await;
    app.create_user("viewer", Role::Viewer).await;
    app.client = app.sign_in("viewer").await;
    app
}

pub async fn spawn_app(db: TestDatabase) -> TestApp {
    spawn_with(|_| {}, db).await
}

/// The markup with its escapes undone (for finding a key with `<` or `&` in it).
pub fn text(html: &str) -> String {
    // `<!>` are Leptos's hydration markers, not content.
    html.replace("<!>", "")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// What a person reads: tags and hydration markers removed, escapes undone,
/// whitespace collapsed.
pub fn visible(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    text(&out).split_whitespace().collect::<Vec<_>>().join(" ")
}
