//! Server-drawn charts over real HTTP.

mod common;

use chrono::TimeDelta;
use common::{spawn_app, visible};
use idem_domain::Metric;
use idem_store::{MetricSample, Ts, testing::TestDatabase};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_charts_duplicate_delays_against_the_five_minute_window() {
    let app = spawn_app(TestDatabase::sqlite().await).await;
    let at = Ts::now() - TimeDelta::minutes(10);
    let observed = |delay: f64, count: f64| MetricSample {
        consumer: "payments".into(),
        metric: Metric::DuplicateDelaySeconds,
        at,
        bucket: Metric::DuplicateDelaySeconds.bucket_for(delay),
        value: count,
    };
    app.store
        .record_metrics(&[
            observed(4.0, 45.0),
            observed(200.0, 30.0),
            observed(7200.0, 25.0),
        ])
        .await
        .unwrap();

    let (status, html) = app.get("/?range=1h").await;
    assert_eq!(status, 200);
    assert!(
        html.contains("<svg"),
        "the chart is in the page, drawn on the server"
    );
    assert!(html.contains("<title>Duplicate delays, last 1h</title>"));
    let page = visible(&html);
    assert!(
        page.contains("25 of 100 duplicates (25.0%) arrived more than five minutes after"),
        "{page}"
    );
    assert!(page.contains("FIFO dedupe window (5 min)"));

    // Another range reads another window: nothing older than the data here.
    let (_, html) = app.get("/?range=28d").await;
    assert!(visible(&html).contains("25 of 100 duplicates"));

    let (_, html) = app.get("/?range=forever").await;
    assert!(
        visible(&html).contains("The range must be one of 1h, 6h, 24h, 7d, 28d."),
        "a bad range says which ranges exist"
    );
}
