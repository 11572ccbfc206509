//! The numbers Idem's own rows go by in addresses and forms: a dead
//! letter's, a run's, a reconciliation's. Each is its own type, so one is
//! never handed where another is meant, and each parses the text of an
//! address once, into a 400 that says what it is not.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A number that does not name a row of its kind (not a whole number
/// from 1): the text says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("“{text}” is not a {what} (a whole number from 1).")]
pub struct BadId {
    pub what: &'static str,
    pub text: String,
}

macro_rules! row_id {
    ($(#[$meta:meta])* $name:ident, $what:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub struct $name(i64);

        impl $name {
            /// What the number is, in a person's words.
            pub const WHAT: &'static str = $what;

            /// The id a row of the database holds (which is never checked
            /// again: the row exists).
            pub const fn of_row(id: i64) -> Self {
                Self(id)
            }

            /// The id an address or a form carries: a whole number from 1.
            pub fn parse(text: &str) -> Result<Self, BadId> {
                text.trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|id| *id >= 1)
                    .map(Self)
                    .ok_or_else(|| BadId {
                        what: $what,
                        text: text.chars().take(40).filter(|c| !c.is_control()).collect(),
                    })
            }

            pub const fn get(self) -> i64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

row_id!(
    /// A dead letter's number (`/dead-letters/42`).
    DeadLetterId,
    "dead letter id"
);
row_id!(
    /// A run's number: a redrive, a bulk discard or a bulk resolve (`/redrives/7`).
    RunId,
    "run number"
);
row_id!(
    /// A reconciliation's number (`/reconciliations/3`).
    ReconciliationId,
    "reconciliation number"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_a_whole_number_from_one_and_anything_else_says_what_it_is_not() {
        assert_eq!(DeadLetterId::parse("42").unwrap().get(), 42);
        assert_eq!(RunId::parse(" 7 ").unwrap(), RunId::of_row(7));
        for bad in ["0", "-1", "4.2", "", "x", "99999999999999999999", "1e3"] {
            let err = DeadLetterId::parse(bad).unwrap_err();
            assert!(err.to_string().contains("dead letter id"), "{bad}: {err}");
        }
        assert_eq!(
            ReconciliationId::parse("abc").unwrap_err().to_string(),
            "“abc” is not a reconciliation number (a whole number from 1)."
        );
        assert_eq!(serde_json::to_string(&RunId::of_row(3)).unwrap(), "3");
    }
}
