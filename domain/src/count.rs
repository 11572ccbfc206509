//! Counts that stop counting: a list's size is exact when small and shown as
//! "10,000+" when large, so no page ever counts a hundred million rows.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CappedCount {
    /// Exact when `capped` is false; otherwise the cap that was reached.
    pub value: u64,
    pub capped: bool,
}

impl CappedCount {
    /// The cap Idem counts to on dashboard pages.
    pub const DEFAULT_CAP: u64 = 10_000;

    /// Builds a count from a query that counted at most `cap + 1` rows.
    pub fn from_limited(counted: u64, cap: u64) -> Self {
        if counted > cap {
            Self {
                value: cap,
                capped: true,
            }
        } else {
            Self {
                value: counted,
                capped: false,
            }
        }
    }

    /// A count that was not capped (a sum, say), shown the same way.
    pub fn exact(value: u64) -> Self {
        Self {
            value,
            capped: false,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.value == 0 && !self.capped
    }
}

impl fmt::Display for CappedCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.value.to_string();
        let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        f.write_str(&grouped)?;
        if self.capped {
            f.write_str("+")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_counts_are_exact_and_large_ones_say_they_were_capped() {
        assert_eq!(CappedCount::from_limited(0, 10_000).to_string(), "0");
        assert_eq!(CappedCount::from_limited(999, 10_000).to_string(), "999");
        assert_eq!(
            CappedCount::from_limited(1_234, 10_000).to_string(),
            "1,234"
        );
        assert_eq!(
            CappedCount::from_limited(10_000, 10_000).to_string(),
            "10,000"
        );
        assert_eq!(
            CappedCount::from_limited(10_001, 10_000).to_string(),
            "10,000+"
        );
    }
}
