//! The test harness: Idem on port 0 with its own database, and HTTP clients
//! signed in with a role.
#![allow(dead_code)]

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
        .create_user(name, role, Some(&hash))
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

/// A TCP gate between Idem and its Postgres on loopback: while open it
/// forwards every connection; `close` refuses new ones and cuts the open
/// ones, as a database that went away does; `open` lets them through again
/// on the same port.
pub struct Gate {
    pub addr: std::net::SocketAddr,
    target: String,
    running: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Gate {
    /// A gate to the Postgres that `url` names, and `url` rewritten to go through it.
    pub async fn to_postgres(url: &str) -> (Gate, String) {
        let mut through = url::Url::parse(url).expect("a Postgres URL");
        let target = format!(
            "{}:{}",
            through.host_str().expect("a host"),
            through.port().unwrap_or(5432)
        );
        let listener = Gate::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let addr = listener.local_addr().unwrap();
        through.set_host(Some("127.0.0.1")).unwrap();
        through.set_port(Some(addr.port())).unwrap();
        let gate = Gate {
            addr,
            target,
            running: std::sync::Mutex::new(None),
        };
        gate.serve(listener);
        (gate, through.to_string())
    }

    fn bind(addr: std::net::SocketAddr) -> tokio::net::TcpListener {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(addr).unwrap();
        socket.listen(64).unwrap()
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let target = self.target.clone();
        let task = tokio::spawn(async move {
            let mut pipes = tokio::task::JoinSet::new();
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                let target = target.clone();
                pipes.spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        *self.running.lock().unwrap() = Some(task);
    }

    /// Refuses new connections and cuts every open one.
    pub async fn close(&self) {
        let running = self.running.lock().unwrap().take();
        if let Some(task) = running {
            // Aborting drops the listener and the JoinSet, which aborts every pipe.
            task.abort();
            let _ = task.await;
        }
    }

    /// Forwards again, on the same port.
    pub fn open(&self) {
        let listener = Gate::bind(self.addr);
        self.serve(listener);
    }
}

/// A dead letter for `key` of `orders`, written as a consumer would; its id.
pub async fn dead_letter(store: &Store, key: &str) -> i64 {
    let now = idem_store::Ts::now();
    let mut tx = store.begin().await.unwrap();
    let id = tx
        .dead_letter(&idem_store::NewDeadLetter {
            consumer: "orders",
            queue: "orders.fifo",
            key,
            message_id: key,
            payload: "{}",
            delivery_count: 3,
            first_failure_at: now,
            last_error: Some("503 from the provider"),
            at: now,
        })
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// Asks Idem to replay dead letter `id` under `action_id`, as the page's
/// own code does (the answer is data, not a redirect).
pub async fn replay(
    app: &TestApp,
    client: &reqwest::Client,
    id: i64,
    action_id: &str,
) -> reqwest::Response {
    replay_at(client, &app.base, id, action_id)
        .await
        .expect("the server answers")
}

/// The same, to the server (or proxy) at `base`; an error if nothing answers.
pub async fn replay_at(
    client: &reqwest::Client,
    base: &str,
    id: i64,
    action_id: &str,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(format!("{base}{}", server_fn("replay_dead_letter")))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .form(&[("id", id.to_string().as_str()), ("action_id", action_id)])
        .send()
        .await
}

/// The registered path of the server function whose name is `name`.
pub fn server_fn(name: &str) -> &'static str {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path)
        .find(|path| {
            // The name, then the hash Leptos adds (digits): `get_slo` is not
            // `get_slo_charts`.
            path.rsplit('/').next().is_some_and(|last| {
                last.strip_prefix(name)
                    .is_some_and(|hash| hash.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .unwrap_or_else(|| panic!("no server function named {name}"))
}

/// The real `idem` binary, started on a free port over `database_url` with
/// the demo off and `settings` added to its environment.
pub struct Process {
    pub child: std::process::Child,
    pub base: String,
}

impl Process {
    pub fn start(database_url: &str, settings: &[(&str, &str)]) -> Process {
        use std::io::BufRead;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
            .env("DATABASE_URL", database_url)
            .env("IDEM_ADDR", format!("127.0.0.1:{port}"))
            .env("IDEM_DEMO", "0")
            .env("RUST_LOG", "warn")
            .envs(settings.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the idem binary starts");
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for line in stdout.by_ref() {
            if line.unwrap().contains("Idem is running at") {
                break;
            }
        }
        // Keep reading, so the process never writes into a closed pipe.
        std::thread::spawn(move || stdout.for_each(drop));
        Process {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Sends SIGTERM, as systemd or Kubernetes does to stop it.
    pub fn terminate(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One form of a page as the browser would send it: where it posts and the
/// values of its inputs (hidden ones included, escapes undone).
#[derive(Debug, Clone)]
pub struct Form {
    pub action: String,
    pub fields: Vec<(String, String)>,
}

impl Form {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The value of `name="…"` inside one tag's text.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(text(&tag[start..end]))
}

/// Every `<form>` of a page, with its action and its inputs' values.
pub fn forms(html: &str) -> Vec<Form> {
    html.split("<form")
        .skip(1)
        .filter_map(|chunk| {
            let body = chunk.split("</form>").next()?;
            let head = &body[..body.find('>')?];
            let action = attribute(head, "action")?;
            // Choices (radio buttons, check boxes) are the person's to make:
            // left out, as a browser leaves out what is not ticked.
            let fields = body
                .split("<input")
                .skip(1)
                .filter_map(|input| {
                    let tag = &input[..input.find('>')?];
                    let kind = attribute(tag, "type").unwrap_or_default();
                    if kind == "radio" || kind == "checkbox" {
                        return None;
                    }
                    Some((
                        attribute(tag, "name")?,
                        attribute(tag, "value").unwrap_or_default(),
                    ))
                })
                .collect();
            Some(Form { action, fields })
        })
        .collect()
}

/// Posts `fields` to `action` the way a browser without JavaScript does
/// from the page at `page` (a path): it asks for HTML and names the page.
pub async fn post_as_browser(
    app: &TestApp,
    client: &reqwest::Client,
    page: &str,
    action: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client
        .post(app.url(action))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "text/html,application/xhtml+xml")
        .header("referer", app.url(page))
        .form(fields)
        .send()
        .await
        .expect("the server answers")
}

/// The text of the action answer a page shows (`.outcome`), if any.
pub fn answer_shown(html: &str) -> Option<String> {
    let start = html.find("class=\"outcome ")?;
    let body = &html[start..];
    let end = body.find("</p>")?;
    let open = body.find('>')? + 1;
    Some(visible(&body[open..end]))
}

/// Where a redirect points.
pub fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// What the valid calls below act on: a claim `key-…` of `orders` whose
/// outcome is unknown, an open dead letter of it, and a second dead letter
/// whose key `sent-…` is sent (one that may be discarded).
pub struct Fixture {
    pub key: String,
    pub unknown_version: i64,
    pub dead_letter: i64,
    pub discardable: i64,
}

impl Fixture {
    /// The fixture on `key-1` and `sent-1`.
    pub async fn write(store: &Store) -> Fixture {
        Fixture::write_named(store, "1").await
    }

    /// A fixture of its own: `key-{tag}` and `sent-{tag}`.
    pub async fn write_named(store: &Store, tag: &str) -> Fixture {
        use idem_store::{Delivery, Outcome, Ts};
        let now = Ts::now();
        let key = format!("key-{tag}");
        let sent = format!("sent-{tag}");
        let mut tx = store.begin().await.unwrap();
        for (key, outcome) in [
            (key.as_str(), Outcome::Unknown { error: "timeout" }),
            (
                sent.as_str(),
                Outcome::Sent {
                    provider_ref: Some("pi_1"),
                },
            ),
        ] {
            tx.claim(&Delivery {
                consumer: "orders",
                key,
                payload_hash: None,
                at: now,
            })
            .await
            .unwrap();
            tx.lease("orders", key, now, now).await.unwrap();
            tx.record("orders", key, outcome, now).await.unwrap();
        }
        tx.commit().await.unwrap();
        let unknown_version = store.claim("orders", &key).await.unwrap().unwrap().version;
        Fixture {
            unknown_version,
            dead_letter: dead_letter(store, &key).await,
            discardable: dead_letter(store, &sent).await,
            key,
        }
    }

    /// Every server function by name, with arguments that are all valid:
    /// a call that is allowed answers 200. `tag` keeps action ids apart
    /// between callers.
    pub fn valid_calls(&self, tag: &str) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
        let id = |what: &str| format!("{tag}-0123456789-{what}");
        let none = String::new;
        vec![
            ("get_console_info", vec![]),
            ("get_login_info", vec![]),
            ("get_overview", vec![]),
            ("get_slos", vec![]),
            ("get_slo", vec![("name", "duplicate-claim-rate".into())]),
            (
                "get_charts",
                vec![("range", "24h".into()), ("consumer", "orders".into())],
            ),
            (
                "get_slo_charts",
                vec![("name", "duplicate-claim-rate".into())],
            ),
            (
                "get_key_story",
                vec![("consumer", "orders".into()), ("key", self.key.clone())],
            ),
            ("lookup_key", vec![("key", self.key.clone())]),
            (
                "search_keys",
                vec![
                    ("query[q]", "key".into()),
                    ("query[consumer]", "orders".into()),
                    ("query[status]", "unknown".into()),
                    ("query[cursor]", none()),
                    ("query[limit]", "10".into()),
                ],
            ),
            ("list_unknown", vec![("consumer", "orders".into())]),
            (
                "list_dead_letters",
                vec![("state", "open".into()), ("consumer", "orders".into())],
            ),
            (
                "get_dead_letter",
                vec![("id", self.dead_letter.to_string())],
            ),
            ("list_outbox", vec![]),
            (
                "list_audit",
                vec![
                    ("query[actor]", "olga".into()),
                    ("query[action]", "replay".into()),
                    ("query[key]", self.key.clone()),
                    ("query[cursor]", none()),
                ],
            ),
            ("get_action_answer", vec![("action_id", id("replay"))]),
            (
                "replay_dead_letter",
                vec![
                    ("id", self.dead_letter.to_string()),
                    ("action_id", id("replay")),
                    ("override_verdict", "on".into()),
                    ("reason", "checked with the provider".into()),
                ],
            ),
            (
                "discard_dead_letter",
                vec![
                    ("id", self.discardable.to_string()),
                    ("action_id", id("discard")),
                    ("reason", "already sent".into()),
                ],
            ),
            (
                "resolve_unknown",
                vec![
                    ("consumer", "orders".into()),
                    ("key", self.key.clone()),
                    ("version", self.unknown_version.to_string()),
                    ("action_id", id("resolve")),
                    ("outcome", "sent".into()),
                    ("provider_ref", "pi_2".into()),
                    ("reason", "found in the provider's dashboard".into()),
                ],
            ),
        ]
    }
}

/// Calls the server function `name` with `fields`, as the page's own code
/// does (a GET with the query, or a same-origin form post).
pub async fn call(
    app: &TestApp,
    client: &reqwest::Client,
    name: &str,
    fields: &[(&str, String)],
) -> reqwest::Response {
    let path = server_fn(name);
    let method = leptos::server_fn::axum::server_fn_paths()
        .find(|(p, _)| *p == path)
        .map(|(_, m)| m)
        .expect("a registered function");
    let request = if method == axum::http::Method::GET {
        client.get(app.url(path)).query(fields)
    } else {
        client.request(method, app.url(path)).form(fields)
    };
    request
        .header("sec-fetch-site", "same-origin")
        .header("accept", "application/json")
        .send()
        .await
        .expect("the server answers")
}

/// The background lease's holder, once someone holds it (within 10 s).
pub async fn lease_holder(store: &Store) -> String {
    let started = std::time::Instant::now();
    loop {
        if let Some((holder, _)) = store
            .lease_holder(idem_store::BACKGROUND_LEASE)
            .await
            .unwrap()
        {
            return holder;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "nobody took the lease"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
