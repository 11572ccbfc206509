//! The test harness: Idem on port 0 with its own database, and HTTP clients
//! signed in with a role.
#![allow(dead_code)]

use idem::{Application, Config};
use idem_domain::Role;
use idem_store::{Store, testing::TestDatabase};

pub struct TestApp {
    pub base: String,
    pub store: Store,
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
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    TestApp {
        base,
        store,
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
            path.rsplit('/')
                .next()
                .is_some_and(|last| last.starts_with(name))
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
