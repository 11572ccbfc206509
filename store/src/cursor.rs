//! Keyset pagination: opaque cursors and bounded page sizes.
//!
//! A cursor is the sort key of the last row of a page, tagged with the list
//! it belongs to, as base64url JSON. It is opaque to people (the format may
//! change) and checked on the way back in: a cursor from another list, or one
//! that was edited, is a [`StoreError::BadCursor`] (a 400), never a query.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde::{Serialize, de::DeserializeOwned};

use crate::{StoreError, StoreResult};

/// Which page of a list to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub(crate) limit: i64,
    pub(crate) after: Option<String>,
}

impl PageRequest {
    /// The largest page any list serves.
    pub const MAX_LIMIT: u32 = 200;
    pub const DEFAULT_LIMIT: u32 = 50;

    /// `limit` is clamped to `1..=MAX_LIMIT`; `after` is the `next` cursor of
    /// the previous page.
    pub fn new(limit: u32, after: Option<String>) -> Self {
        Self {
            limit: i64::from(limit.clamp(1, Self::MAX_LIMIT)),
            after: after.filter(|c| !c.is_empty()),
        }
    }

    pub fn first(limit: u32) -> Self {
        Self::new(limit, None)
    }
}

/// The longest cursor Idem ever issues is far below this; anything longer was
/// not issued by Idem.
const MAX_CURSOR_LEN: usize = 2048;

pub(crate) fn encode<T: Serialize>(list: &str, position: &T) -> String {
    let json = serde_json::to_vec(&(list, position)).expect("cursor positions serialize");
    URL_SAFE_NO_PAD.encode(json)
}

pub(crate) fn decode<T: DeserializeOwned>(list: &str, cursor: &str) -> StoreResult<T> {
    if cursor.len() > MAX_CURSOR_LEN {
        return Err(StoreError::BadCursor);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| StoreError::BadCursor)?;
    let (tag, position): (String, T) =
        serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
    if tag != list {
        return Err(StoreError::BadCursor);
    }
    Ok(position)
}

/// The instant a cursor carries (microseconds since the epoch). Idem only
/// issues cursors for stored times, after 1970 and before the year 10000;
/// anything else was forged, and Postgres would refuse it as out of range
/// (an error, not an empty page) had it reached the query.
pub(crate) fn instant(micros: i64) -> StoreResult<crate::ts::Ts> {
    const LAST: i64 = 253_402_300_799_999_999; // 9999-12-31T23:59:59.999999Z
    if !(0..=LAST).contains(&micros) {
        return Err(StoreError::BadCursor);
    }
    crate::ts::Ts::from_micros(micros).ok_or(StoreError::BadCursor)
}

/// The `(time, id)` position after which `page` of `list` starts (lists
/// ordered by a time and their id), or `None` for a first page.
pub(crate) fn time_and_id(
    list: &str,
    page: &PageRequest,
) -> StoreResult<Option<(crate::ts::Ts, i64)>> {
    match &page.after {
        None => Ok(None),
        Some(after) => {
            let (at, id): (i64, i64) = decode(list, after)?;
            Ok(Some((instant(at)?, id)))
        }
    }
}

/// Splits a fetched `limit + 1` rows into a page and the next cursor.
pub(crate) fn paginate<T, P: Serialize>(
    mut items: Vec<T>,
    limit: i64,
    list: &str,
    position: impl Fn(&T) -> P,
) -> idem_domain::Page<T> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(|last| encode(list, &position(last)))
    } else {
        None
    };
    idem_domain::Page { items, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_only_for_its_own_list() {
        let c = encode("dead_letters", &(1_700_000_000_000_000i64, 42i64));
        assert_eq!(
            decode::<(i64, i64)>("dead_letters", &c).unwrap(),
            (1_700_000_000_000_000, 42)
        );
        assert!(matches!(
            decode::<(i64, i64)>("outbox", &c),
            Err(StoreError::BadCursor)
        ));
    }

    #[test]
    fn edited_or_foreign_cursors_are_refused() {
        for bad in ["", "%%%", "bm90IGpzb24", &"A".repeat(5000), "WyJ4Il0"] {
            assert!(
                matches!(
                    decode::<(i64, i64)>("outbox", bad),
                    Err(StoreError::BadCursor)
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_cursor_instant_outside_stored_times_is_refused() {
        assert!(instant(1_764_547_200_000_000).is_ok());
        assert!(instant(0).is_ok());
        for forged in [
            -1,
            -100_000_000_000_000_000,
            253_402_300_800_000_000,
            i64::MAX,
            i64::MIN,
        ] {
            assert!(
                matches!(instant(forged), Err(StoreError::BadCursor)),
                "{forged}"
            );
        }
    }

    #[test]
    fn page_size_is_bounded() {
        assert_eq!(PageRequest::new(0, None).limit, 1);
        assert_eq!(PageRequest::new(10_000, None).limit, 200);
    }

    proptest::proptest! {
        #[test]
        fn any_text_as_a_cursor_is_a_position_or_refused(cursor in ".{0,300}") {
            match decode::<(i64, String, String)>("unknown", &cursor) {
                Ok(_) | Err(StoreError::BadCursor) => {}
                Err(other) => proptest::prop_assert!(false, "{other:?}"),
            }
        }

        #[test]
        fn a_position_round_trips_through_its_cursor(at: i64, consumer in ".{0,40}", key in ".{0,80}") {
            let cursor = encode("unknown", &(at, &consumer, &key));
            let back: (i64, String, String) = decode("unknown", &cursor).unwrap();
            proptest::prop_assert_eq!(back, (at, consumer, key));
        }
    }
}
