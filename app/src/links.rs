//! URLs in and out. Keys are percent-encoded as one path segment on the way
//! out and decoded exactly once, on the server, on the way in.
//!
//! The router's own parameter maps decode a second time (a key containing a
//! literal `%2F` would come back as `/`), so pages never read keys or query
//! values from them: they read the raw `pathname`/`search` of the location
//! and hand the raw segments to server functions. Links that carry a key are
//! plain links (`rel="external"`) for the same reason: the router's
//! client-side navigation would decode them on the way through.

use idem_domain::encode_segment;

/// The admins' page of the API's tokens.
pub const TOKENS: &str = "/tokens";

/// `/keys/{consumer}/{key}`
pub fn key_href(consumer: &str, key: &str) -> String {
    format!("/keys/{}/{}", encode_segment(consumer), encode_segment(key))
}

/// `/consumers/{consumer}`
pub fn consumer_href(consumer: &str) -> String {
    format!("/consumers/{}", encode_segment(consumer))
}

/// `/slo/{name}`, or `/slo/{name}/{consumer}` for one consumer's instance
/// of a per-consumer SLO.
pub fn slo_href(name: &str, consumer: Option<&str>) -> String {
    match consumer {
        Some(consumer) => format!("/slo/{name}/{}", encode_segment(consumer)),
        None => format!("/slo/{name}"),
    }
}

/// `/keys/{key}`: the key, whichever consumer has it.
pub fn key_only_href(key: &str) -> String {
    format!("/keys/{}", encode_segment(key))
}

/// `path?name=value&…` with each value form-encoded; empty values are left out.
pub fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        query.append_pair(name, value);
    }
    let query = query.finish();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    }
}

/// The raw (still percent-encoded) segments of `pathname` after `prefix`.
pub fn raw_segments<'a>(pathname: &'a str, prefix: &str) -> Vec<&'a str> {
    pathname
        .strip_prefix(prefix)
        .unwrap_or_default()
        .split('/')
        .filter(|s| !s.is_empty())
        .collect()
}

/// One query parameter from a raw `search` string (with or without `?`),
/// form-decoded once. The last occurrence wins.
pub fn query_param(search: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(search.trim_start_matches('?').as_bytes())
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
        .last()
}

/// The longest `next` Idem follows.
const MAX_NEXT: usize = 2048;

/// Where to send a person back to: `next` when it is a path on this site,
/// else `/`. Refuses anything a browser could read as another site: `//host`,
/// `/\host`, schemes, their percent-encoded forms, control characters and
/// over-long values.
pub fn safe_next(next: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(next).decode_utf8_lossy();
    let suspicious = |s: &str| {
        !s.starts_with('/')
            || s.starts_with("//")
            || s.starts_with("/\\")
            || s.chars().any(char::is_control)
    };
    if next.is_empty() || next.len() > MAX_NEXT || suspicious(next) || suspicious(&decoded) {
        "/".to_owned()
    } else {
        next.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_link_keeps_slashes_percents_and_hashes_inside_one_segment() {
        assert_eq!(
            key_href("orders", "refund:EU/2026/Ø-1842"),
            "/keys/orders/refund:EU%2F2026%2F%C3%98-1842"
        );
        assert_eq!(
            key_href("orders", "x%20y #1"),
            "/keys/orders/x%2520y%20%231"
        );
        assert_eq!(
            raw_segments("/keys/orders/x%2520y%20%231", "/keys/"),
            ["orders", "x%2520y%20%231"]
        );
    }

    #[test]
    fn next_accepts_local_paths_only() {
        for local in [
            "/",
            "/keys/orders/a%2Fb?x=1#t",
            "/unknown?cursor=abc",
            "/keys/orders/C%3A%5Ctemp",
        ] {
            assert_eq!(safe_next(local), local);
        }
        for hostile in [
            "",
            "//evil.example",
            "/\\evil.example",
            "https://evil.example/",
            "javascript:alert(1)",
            "evil.example",
            "/%2F%2Fevil.example",
            "/%5Cevil.example",
            "%2F%2Fevil.example",
            "/\t/evil.example",
            "/ok\n",
            &format!("/{}", "a".repeat(3000)),
        ] {
            assert_eq!(safe_next(hostile), "/", "{hostile:?}");
        }
    }

    #[test]
    fn query_values_are_decoded_once() {
        assert_eq!(
            query_param("?q=a%2525b&q=50%25+off", "q").as_deref(),
            Some("50% off")
        );
        assert_eq!(query_param("q=a%2525b", "q").as_deref(), Some("a%25b"));
        assert_eq!(query_param("", "q"), None);
        assert_eq!(
            with_query("/keys", &[("q", "a b&c"), ("cursor", "")]),
            "/keys?q=a+b%26c"
        );
    }

    proptest::proptest! {
        #[test]
        fn whatever_next_says_the_destination_is_a_local_path(next in ".{0,200}") {
            let path = safe_next(&next);
            proptest::prop_assert!(path.starts_with('/'), "{path}");
            proptest::prop_assert!(!path.starts_with("//") && !path.starts_with("/\\"), "{path}");
        }
    }
}
