//! The real `idem` binary as a process, and the background lease replicas
//! share.

use idem_store::Store;

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
