//! The floor for `make bench`'s HTTP load: a bare axum + sqlx handler that
//! does the key page's lookup (one claim by consumer and key) and returns
//! the row as JSON. No sessions, no rendering, no middleware: what this
//! stack serves when it does nothing but the query.
//!
//! `DATABASE_URL=postgres://… BARE_ADDR=127.0.0.1:3951 cargo run --release -p idem-tools --example bare_key_page`

use axum::{
    Json, Router,
    extract::{Path, State},
    http::StatusCode,
    routing::get,
};
use sqlx::PgPool;

#[derive(serde::Serialize, sqlx::FromRow)]
struct ClaimRow {
    consumer: String,
    idempotency_key: String,
    status: String,
    delivery_count: i64,
    attempts: i64,
    provider_ref: Option<String>,
    last_error: Option<String>,
    version: i64,
}

async fn key_page(
    State(pool): State<PgPool>,
    Path((consumer, key)): Path<(String, String)>,
) -> Result<Json<ClaimRow>, StatusCode> {
    sqlx::query_as(
        "SELECT consumer, idempotency_key, status, delivery_count, attempts, provider_ref, \
         last_error, version FROM claims WHERE consumer = $1 AND idempotency_key = $2",
    )
    .bind(consumer)
    .bind(key)
    .fetch_optional(&pool)
    .await
    .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?
    .map(Json)
    .ok_or(StatusCode::NOT_FOUND)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let addr = std::env::var("BARE_ADDR").unwrap_or_else(|_| "127.0.0.1:3951".into());
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(10)
        .connect(&url)
        .await?;
    let app = Router::new()
        .route("/keys/{consumer}/{key}", get(key_page))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("bare key page on http://{addr}");
    axum::serve(listener, app).await?;
    Ok(())
}
