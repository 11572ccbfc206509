//! The site's assets (the WASM, its JS glue and the CSS) when they are
//! compiled into the binary (`make release`; see `build.rs`): served from
//! memory under `/pkg/<hash>/`, a name that changes with their content, so
//! browsers may keep them for a year; brotli or gzip, compressed at build
//! time, to clients that accept it.
//!
//! A build without embedded assets (development, the tests) serves them
//! from `LEPTOS_SITE_ROOT` on disk as `cargo xtask site` wrote them.

use axum::{
    extract::Path,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

/// One embedded file of `site/pkg`.
pub struct Asset {
    pub name: &'static str,
    pub raw: &'static [u8],
    pub gzip: &'static [u8],
    pub brotli: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/site_assets.rs"));

/// Whether this binary carries its assets.
pub fn embedded() -> bool {
    !ASSETS.is_empty()
}

/// The directory the pages link assets under: `pkg/<hash>` when embedded.
pub fn pkg_dir() -> Option<String> {
    embedded().then(|| format!("pkg/{ASSET_HASH}"))
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("wasm") => "application/wasm",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// `GET /pkg/{hash}/{name}`.
pub async fn serve(Path((hash, name)): Path<(String, String)>, headers: HeaderMap) -> Response {
    let Some(asset) = (hash == ASSET_HASH)
        .then(|| ASSETS.iter().find(|a| a.name == name))
        .flatten()
    else {
        // Another build's asset (a page cached across a deployment): gone.
        return (
            StatusCode::NOT_FOUND,
            "No such asset in this build of Idem.\n",
        )
            .into_response();
    };
    let accepts = |wanted: &str| {
        headers
            .get_all(header::ACCEPT_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|coding| accepted(coding, wanted))
    };
    let (body, encoding) = if accepts("br") {
        (asset.brotli, Some("br"))
    } else if accepts("gzip") {
        (asset.gzip, Some("gzip"))
    } else {
        (asset.raw, None)
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(asset.name)),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Some(encoding) = encoding {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding));
    }
    response
}

/// Whether one entry of `Accept-Encoding` (`br`, `gzip;q=0.8`) accepts
/// `wanted`: named, and not with `q=0`.
fn accepted(entry: &str, wanted: &str) -> bool {
    let mut parts = entry.split(';').map(str::trim);
    let named = parts.next().is_some_and(|c| c.eq_ignore_ascii_case(wanted));
    let refused = parts.any(|p| {
        p.strip_prefix("q=")
            .and_then(|q| q.trim().parse::<f32>().ok())
            .is_some_and(|q| q == 0.0)
    });
    named && !refused
}

#[cfg(test)]
mod tests {
    use super::accepted;

    #[test]
    fn an_encoding_is_accepted_when_named_without_a_zero_weight() {
        assert!(accepted(" br", "br"));
        assert!(accepted("gzip;q=0.8", "gzip"));
        assert!(accepted("BR", "br"));
        assert!(!accepted("br;q=0", "br"));
        assert!(!accepted("gzip", "br"));
        assert!(!accepted("brotli", "br"));
    }
}
