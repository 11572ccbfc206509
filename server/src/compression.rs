//! Pages, server-function answers and `/metrics` compressed on the fly for
//! clients that ask: brotli when `Accept-Encoding` names `br`, else gzip.
//!
//! The levels were chosen by measurement (`idem-tools compression` on the
//! pages as served; docs/BENCHMARKS.md, 2026-12-03): past them the bytes
//! shrink by a percent or two while the CPU per page grows severalfold, and
//! on one core CPU per page is what bounds Idem's throughput.
//!
//! Two layers, brotli inside gzip: a response the inner one compressed
//! carries `Content-Encoding`, which the outer one never compresses again
//! (nor the embedded assets, compressed at build time). So a client naming
//! both gets brotli whatever weights it gives them. A body is flushed to
//! the client whenever the page's stream waits (async-compression flushes
//! when its input is pending), so a page streamed out of order stays
//! streamed.
//!
//! No page carries a secret the person viewing it does not already know
//! (the cross-site check needs no token in the page; the session cookie is
//! never in a body), which is what a compression side channel such as
//! BREACH would need to be worth anything.

use axum::Router;
use tower_http::compression::{CompressionLayer, CompressionLevel};

/// Brotli's quality for responses compressed per request. At 4 (tower-http's
/// default, nginx's) brotli took 55% of a key page's instructions, more
/// than rendering it; at 1 the overview's 173 KB become 16 KB instead of
/// 12.7 KB for a third of the CPU.
pub const BROTLI_QUALITY: i32 = 1;
/// Gzip's level, for clients that do not accept brotli (curl, Prometheus):
/// the overview in 22.7 KB at 0.26 ms, where level 6 takes 15.1 KB and
/// 1.5 ms.
pub const GZIP_LEVEL: i32 = 1;

/// `router` with both layers around it.
pub fn compress<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .layer(
            CompressionLayer::new()
                .no_deflate()
                .no_gzip()
                .no_zstd()
                .quality(CompressionLevel::Precise(BROTLI_QUALITY)),
        )
        .layer(
            CompressionLayer::new()
                .no_br()
                .no_deflate()
                .no_zstd()
                .quality(CompressionLevel::Precise(GZIP_LEVEL)),
        )
}
