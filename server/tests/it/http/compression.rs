//! Pages and answers travel compressed when the client asks (brotli, else
//! gzip), read the same once unpacked, and a streamed page still arrives
//! part by part.

use std::{convert::Infallible, io::Write, sync::Arc, time::Duration};

use axum::{Router, body::Body, routing::get};
use idem_domain::Role;
use idem_store::testing::TestDatabase;
use tokio::sync::{Mutex, mpsc};

use super::{claim, spawn_app};
use crate::common::{call, server_fn, spawn_with};
use idem::metrics::MetricsToken;

/// What a browser sends over HTTPS.
const BROWSER: &str = "gzip, deflate, br, zstd";

fn unbrotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = brotli::DecompressorWriter::new(Vec::new(), 4096);
    out.write_all(bytes).expect("a brotli stream");
    out.flush().unwrap();
    out.get_ref().clone()
}

fn ungzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = flate2::write::GzDecoder::new(Vec::new());
    out.write_all(bytes).expect("a gzip stream");
    out.flush().unwrap();
    out.get_ref().clone()
}

/// The answer's status, `Content-Encoding`, `Vary` and body as sent.
async fn fetch(
    client: &reqwest::Client,
    url: &str,
    accept: Option<&str>,
) -> (u16, Option<String>, String, Vec<u8>) {
    let mut request = client.get(url);
    if let Some(accept) = accept {
        request = request.header("accept-encoding", accept);
    }
    let response = request.send().await.expect("the server answers");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (encoding, vary) = (
        header("content-encoding"),
        header("vary").unwrap_or_default(),
    );
    let status = response.status().as_u16();
    (
        status,
        encoding,
        vary,
        response.bytes().await.unwrap().to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_comes_compressed_to_a_browser_that_asks_and_reads_the_same() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let key = "refund:EU/2026/Ø-1842 #7 ‏שלום";
    claim(&app.store, "order-events", key, None).await;
    let page = app.url("/keys/order-events/refund%3AEU%2F2026%2F%C3%98-1842%20%237%20%E2%80%8F%D7%A9%D7%9C%D7%95%D7%9D");

    let (status, encoding, _, plain) = fetch(&app.client, &page, None).await;
    assert_eq!(
        (status, encoding),
        (200, None),
        "no Accept-Encoding, no compression"
    );
    let plain = String::from_utf8(plain).unwrap();
    assert!(
        crate::common::text(&plain).contains(key),
        "the key's own page"
    );

    let (status, encoding, vary, sent) = fetch(&app.client, &page, Some(BROWSER)).await;
    assert_eq!(
        (status, encoding.as_deref()),
        (200, Some("br")),
        "a browser gets brotli"
    );
    assert!(
        vary.to_ascii_lowercase().contains("accept-encoding"),
        "caches keep both forms apart: {vary}"
    );
    let unpacked = String::from_utf8(unbrotli(&sent)).unwrap();
    assert!(unpacked.starts_with("<!DOCTYPE html>"));
    assert!(
        crate::common::text(&unpacked).contains(key),
        "the same page once unpacked"
    );
    assert!(
        sent.len() * 2 < plain.len(),
        "{} bytes compressed of {} is not worth the CPU",
        sent.len(),
        plain.len()
    );

    let (status, encoding, _, sent) = fetch(&app.client, &page, Some("gzip")).await;
    assert_eq!(
        (status, encoding.as_deref()),
        (200, Some("gzip")),
        "no brotli, then gzip"
    );
    assert!(crate::common::text(&String::from_utf8(ungzip(&sent)).unwrap()).contains(key));

    let (_, encoding, _, _) = fetch(&app.client, &page, Some("identity")).await;
    assert_eq!(
        encoding, None,
        "a client that refuses both gets the page as it is"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_streamed_pages_answers_and_metrics_are_compressed_too() {
    let token = "scrape-token-for-tests";
    let app = spawn_with(
        |config| config.metrics_token = Some(MetricsToken::new(token.into())),
        TestDatabase::sqlite().await,
    )
    .await;
    claim(&app.store, "order-events", "o-1", None).await;
    app.create_user("operator", Role::Operator).await;
    let operator = app.sign_in("operator").await;
    // The audit page streams (out of order); the others render whole.
    for path in ["/", "/unknown", "/audit", "/slo"] {
        let (status, encoding, _, sent) = fetch(&operator, &app.url(path), Some(BROWSER)).await;
        assert_eq!((status, encoding.as_deref()), (200, Some("br")), "{path}");
        let unpacked = String::from_utf8(unbrotli(&sent)).unwrap();
        assert!(
            unpacked.contains("</html>"),
            "{path} arrives whole once unpacked"
        );
    }

    // A server function's JSON answer, as a script calls it.
    let charts = call(
        &app,
        &app.client,
        "get_charts",
        &[("range", "24h".to_owned())],
    )
    .await;
    assert_eq!(charts.status().as_u16(), 200);
    let url = format!("{}?range=24h", app.url(server_fn("get_charts")));
    let (status, encoding, _, sent) = fetch(&app.client, &url, Some("gzip, br")).await;
    assert_eq!((status, encoding.as_deref()), (200, Some("br")));
    let answer: serde_json::Value = serde_json::from_slice(&unbrotli(&sent)).expect("JSON");
    assert!(answer.is_object() || answer.is_array(), "{answer}");

    // Prometheus asks for gzip.
    let scrape = reqwest::Client::new()
        .get(app.url("/metrics"))
        .bearer_auth(token)
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status().as_u16(), 200);
    assert_eq!(scrape.headers()["content-encoding"], "gzip");
    let sent = scrape.bytes().await.unwrap();
    assert!(
        String::from_utf8(ungzip(&sent))
            .unwrap()
            .contains("# TYPE idem_")
    );
}

/// A page whose stream waits between its parts: the first part reaches
/// the client, compressed and readable, before the second exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_page_reaches_the_browser_compressed_part_by_part() {
    for (accept, unpack) in [("br", unbrotli as fn(&[u8]) -> Vec<u8>), ("gzip", ungzip)] {
        let (parts, stream) = mpsc::channel::<&'static str>(4);
        let stream = Arc::new(Mutex::new(Some(stream)));
        let page = get(move || {
            let stream = stream.clone();
            async move {
                let stream = stream.lock().await.take().expect("one request");
                let html = [(axum::http::header::CONTENT_TYPE, "text/html; charset=utf-8")];
                let parts = futures_util::stream::unfold(stream, |mut rx| async move {
                    rx.recv().await.map(|part| (Ok::<_, Infallible>(part), rx))
                });
                // Fused: the encoder asks once more after the end.
                (
                    html,
                    Body::from_stream(futures_util::StreamExt::fuse(parts)),
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let router = idem::compression::compress(Router::new().route("/", page));
        tokio::spawn(async move { axum::serve(listener, router).await });

        let first = "<!DOCTYPE html><html><body><p>The shell, sent at once.</p>";
        let second = "<p>What a slow read filled in later.</p></body></html>";
        parts.send(first).await.unwrap();
        let mut response = reqwest::Client::new()
            .get(&base)
            .header("accept-encoding", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["content-encoding"], accept);
        let mut sent = Vec::new();
        while !String::from_utf8_lossy(&unpack(&sent)).contains("sent at once") {
            let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
                .await
                .unwrap_or_else(|_| panic!("{accept}: the first part was held back"))
                .unwrap()
                .expect("more of the page");
            sent.extend_from_slice(&chunk);
        }
        parts.send(second).await.unwrap();
        drop(parts);
        while let Some(chunk) = response.chunk().await.unwrap() {
            sent.extend_from_slice(&chunk);
        }
        assert_eq!(
            String::from_utf8(unpack(&sent)).unwrap(),
            format!("{first}{second}")
        );
    }
}
