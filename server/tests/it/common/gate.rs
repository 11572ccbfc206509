//! A TCP gate that cuts Idem off from its Postgres (or its broker) and
//! lets it back.

/// A TCP gate between Idem and a server on loopback: while open it
/// forwards every connection; `close` refuses new ones and cuts the open
/// ones, as a database or a broker that went away does; `open` lets them
/// through again on the same port.
pub struct Gate {
    pub addr: std::net::SocketAddr,
    target: String,
    running: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Gate {
    /// A gate to the Postgres that `url` names, and `url` rewritten to go through it.
    pub async fn to_postgres(url: &str) -> (Gate, String) {
        Gate::to(url, 5432)
    }

    /// A gate to the RabbitMQ that `url` names, and `url` rewritten to go through it.
    pub async fn to_rabbitmq(url: &str) -> (Gate, String) {
        Gate::to(url, 5672)
    }

    fn to(url: &str, default_port: u16) -> (Gate, String) {
        let mut through = url::Url::parse(url).expect("a server's URL");
        let target = format!(
            "{}:{}",
            through.host_str().expect("a host"),
            through.port().unwrap_or(default_port)
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
