//! `idem-tools load`: HTTP load at a fixed rate, with latency measured from
//! when each request was due, not from when it was sent.
//!
//! A closed-loop generator (wrk, or a loop that sends the next request when
//! the last one answers) waits out a slow answer before asking again, so the
//! requests that would have queued behind it are never sent and never
//! counted: its percentiles describe the server at its best moments
//! ("coordinated omission"). Here request `i` is due at `start + i / rate`,
//! whatever happened before; it waits for one of `connections` connections
//! if all are busy, and its latency runs from when it was due to the last
//! byte of the answer. Requests rotate over many paths (many keys, not one
//! hot key), so caches see what production traffic would show them.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use tokio::{sync::Semaphore, task::JoinSet};

/// What Chromium sends over HTTPS.
pub const BROWSER_ACCEPT_ENCODING: &str = "gzip, deflate, br, zstd";

/// What to load and how hard.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `http://127.0.0.1:3950`: loopback only.
    pub base: String,
    /// Paths to request, in turn.
    pub paths: Vec<String>,
    /// A `Cookie` header value (a signed-in session), if any.
    pub cookie: Option<String>,
    /// Requests per second.
    pub rate: f64,
    pub duration: Duration,
    /// At most this many requests in flight (connections).
    pub connections: usize,
}

/// One round's outcome.
#[derive(Debug, Clone)]
pub struct Round {
    pub requests: usize,
    /// Answers that were not 2xx, and requests that got no answer.
    pub failures: usize,
    /// What the failures were: a status code, or "no answer".
    pub failed_as: std::collections::BTreeMap<String, usize>,
    /// Requests completed per second of the round.
    pub achieved: f64,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
}

/// Runs one round of `options`.
pub async fn round(options: &LoadOptions) -> Result<Round, String> {
    if !is_loopback(&options.base) {
        return Err(format!("{}: load only a server on loopback", options.base));
    }
    if options.paths.is_empty() || options.rate <= 0.0 || options.connections == 0 {
        return Err("nothing to load: no paths, no rate or no connections".into());
    }
    // As a browser asks: the server compresses what it sends (the bytes
    // are read, not unpacked; unpacking is the browser's work, not Idem's).
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::ACCEPT_ENCODING,
        reqwest::header::HeaderValue::from_static(BROWSER_ACCEPT_ENCODING),
    );
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(options.connections)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let permits = Arc::new(Semaphore::new(options.connections));
    let total = (options.rate * options.duration.as_secs_f64()).round() as usize;
    let start = Instant::now() + Duration::from_millis(100);
    let mut requests = JoinSet::new();
    for i in 0..total {
        let due = start + Duration::from_secs_f64(i as f64 / options.rate);
        tokio::time::sleep_until(due.into()).await;
        let url = format!("{}{}", options.base, options.paths[i % options.paths.len()]);
        let mut request = client.get(url);
        if let Some(cookie) = &options.cookie {
            request = request.header(reqwest::header::COOKIE, cookie);
        }
        let permits = permits.clone();
        requests.spawn(async move {
            let _connection = permits.acquire_owned().await;
            let failed = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    match response.bytes().await {
                        Ok(_) if status.is_success() => None,
                        Ok(_) => Some(status.as_u16().to_string()),
                        Err(_) => Some("no answer".to_owned()),
                    }
                }
                Err(_) => Some("no answer".to_owned()),
            };
            (due.elapsed(), failed)
        });
    }
    let mut latencies = Vec::with_capacity(total);
    let mut failed_as = std::collections::BTreeMap::new();
    while let Some(done) = requests.join_next().await {
        let (latency, failed) = done.map_err(|e| e.to_string())?;
        latencies.push(latency);
        if let Some(what) = failed {
            *failed_as.entry(what).or_insert(0) += 1;
        }
    }
    let failures = failed_as.values().sum();
    let elapsed = start.elapsed().as_secs_f64();
    latencies.sort_unstable();
    Ok(Round {
        requests: total,
        failures,
        failed_as,
        achieved: total as f64 / elapsed,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        p999: percentile(&latencies, 0.999),
        max: latencies.last().copied().unwrap_or_default(),
    })
}

/// The `q` quantile of `sorted` (nearest rank).
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn is_loopback(base: &str) -> bool {
    url::Url::parse(base)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .is_some_and(|host| host == "localhost" || host.starts_with("127.") || host == "[::1]")
}

/// Median and range of `values`, as `median (min–max)`.
pub fn median_and_range(values: &[f64], format: impl Fn(f64) -> String) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match (sorted.first(), sorted.last()) {
        (Some(low), Some(high)) => format!(
            "{} ({}–{})",
            format(sorted[sorted.len() / 2]),
            format(*low),
            format(*high)
        ),
        _ => "—".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let sorted: Vec<Duration> = (1..=1000).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 0.50), Duration::from_millis(500));
        assert_eq!(percentile(&sorted, 0.99), Duration::from_millis(990));
        assert_eq!(percentile(&sorted, 0.999), Duration::from_millis(999));
        assert_eq!(percentile(&sorted[..1], 0.999), Duration::from_millis(1));
    }

    #[test]
    fn only_loopback_is_loaded() {
        assert!(is_loopback("http://127.0.0.1:3950"));
        assert!(is_loopback("http://localhost:3950"));
        assert!(!is_loopback("http://10.0.0.1:3950"));
        assert!(!is_loopback("https://idem.example.com"));
    }

    #[test]
    fn the_median_and_range_of_three_rounds() {
        let shown = median_and_range(&[3.0, 1.0, 2.0], |v| format!("{v:.0}"));
        assert_eq!(shown, "2 (1–3)");
    }

    #[tokio::test]
    async fn refusals_are_counted_by_their_status() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { (axum::http::StatusCode::SERVICE_UNAVAILABLE, "busy") }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let options = LoadOptions {
            base,
            paths: vec!["/".into()],
            cookie: None,
            rate: 100.0,
            duration: Duration::from_millis(200),
            connections: 4,
        };
        let round = round(&options).await.unwrap();
        assert_eq!(round.failures, 20);
        assert_eq!(round.failed_as, [("503".to_owned(), 20)].into());
    }

    /// A server that answers after `stall` for the first request and at
    /// once after that: a closed loop would count one slow request; here
    /// every request due during the stall waited for it.
    #[tokio::test]
    async fn requests_due_during_a_stall_count_the_time_they_waited() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let first = first.clone();
                async move {
                    if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    "ok"
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let options = LoadOptions {
            base,
            paths: vec!["/".into()],
            cookie: None,
            rate: 100.0,
            duration: Duration::from_secs(1),
            connections: 1,
        };
        let round = round(&options).await.unwrap();
        assert_eq!((round.requests, round.failures), (100, 0));
        // About 50 requests were due while the first one stalled on the one
        // connection: far more than 1% of them waited over 100 ms.
        assert!(round.p99 > Duration::from_millis(300), "{round:?}");
        assert!(round.p50 < Duration::from_millis(300), "{round:?}");
    }
}
