//! The named spans a chart may cover, and the longest one asked for by
//! dates (both builds: the pages offer them, the server reads them).

/// The time ranges a chart can show (`?range=`), with the interval each is
/// drawn in (at most 120 intervals per chart).
pub const RANGES: &[(&str, i64)] = &[
    ("1h", 3600),
    ("6h", 6 * 3600),
    ("24h", 24 * 3600),
    ("7d", 7 * 86_400),
    ("28d", 28 * 86_400),
];

/// The range charts show when the address names none.
pub const DEFAULT_RANGE: &str = "24h";

/// The longest span `from`/`to` may cover.
pub const MAX_SPAN_DAYS: i64 = 90;
