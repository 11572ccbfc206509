//! One timestamp type for both backends.
//!
//! Postgres stores `timestamptz`. SQLite has no time type, so Idem stores
//! integer microseconds since the Unix epoch there: they sort, index and
//! compare as numbers, and lose nothing Postgres keeps (both have microsecond
//! precision). Every query binds and reads [`Ts`], so the same SQL text works
//! on both.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use sqlx::{
    Decode, Encode, Postgres, Sqlite, Type,
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
    sqlite::{SqliteArgumentValue, SqliteTypeInfo, SqliteValueRef},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ts(pub DateTime<Utc>);

impl Ts {
    pub fn now() -> Self {
        Self::from(Utc::now())
    }

    /// Truncated to whole microseconds, the precision both backends keep, so
    /// a value read back equals the value written.
    pub fn micros(self) -> i64 {
        self.0.timestamp_micros()
    }

    pub fn from_micros(micros: i64) -> Option<Self> {
        DateTime::from_timestamp_micros(micros).map(Ts)
    }

    /// Rounded down to a whole number of `step`s since the epoch (rollup
    /// blocks and chart intervals are aligned so); a step under a
    /// microsecond leaves the instant as it is.
    pub fn floor(self, step: TimeDelta) -> Self {
        match step.num_microseconds() {
            Some(step) if step > 0 => {
                Ts::from_micros(self.micros().div_euclid(step) * step).unwrap_or(self)
            }
            _ => self,
        }
    }

    /// The start of the minute this instant falls in (metric rows are keyed by it).
    pub fn minute(self) -> Self {
        Ts(self
            .0
            .duration_trunc(TimeDelta::minutes(1))
            .unwrap_or(self.0))
    }

    /// The start of the hour this instant falls in (hourly rollups are keyed by it).
    pub fn hour(self) -> Self {
        Ts(self.0.duration_trunc(TimeDelta::hours(1)).unwrap_or(self.0))
    }

    /// The first hour boundary at or after this instant.
    pub fn next_hour(self) -> Self {
        let floor = self.hour();
        if floor == self {
            floor
        } else {
            floor + TimeDelta::hours(1)
        }
    }
}

impl std::ops::Add<TimeDelta> for Ts {
    type Output = Ts;
    fn add(self, rhs: TimeDelta) -> Ts {
        Ts(self.0 + rhs)
    }
}

impl std::ops::Sub<TimeDelta> for Ts {
    type Output = Ts;
    fn sub(self, rhs: TimeDelta) -> Ts {
        Ts(self.0 - rhs)
    }
}

impl From<DateTime<Utc>> for Ts {
    fn from(value: DateTime<Utc>) -> Self {
        // Drop sub-microsecond precision up front: what is bound is what is read back.
        Ts::from_micros(value.timestamp_micros()).unwrap_or(Ts(value))
    }
}

impl From<Ts> for DateTime<Utc> {
    fn from(value: Ts) -> Self {
        value.0
    }
}

impl Type<Sqlite> for Ts {
    fn type_info() -> SqliteTypeInfo {
        <i64 as Type<Sqlite>>::type_info()
    }
    fn compatible(ty: &SqliteTypeInfo) -> bool {
        <i64 as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for Ts {
    fn encode_by_ref(&self, buf: &mut Vec<SqliteArgumentValue<'q>>) -> Result<IsNull, BoxDynError> {
        <i64 as Encode<'q, Sqlite>>::encode(self.micros(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Ts {
    fn decode(value: SqliteValueRef<'r>) -> Result<Self, BoxDynError> {
        let micros = <i64 as Decode<'r, Sqlite>>::decode(value)?;
        Ts::from_micros(micros).ok_or_else(|| format!("timestamp out of range: {micros}").into())
    }
}

impl Type<Postgres> for Ts {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }
}

impl Encode<'_, Postgres> for Ts {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<'_, Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Ts {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<'r, Postgres>>::decode(value).map(Ts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minute_truncates_to_the_start_of_the_minute() {
        let t = Ts::from(
            DateTime::parse_from_rfc3339("2026-11-30T14:02:59.999999Z")
                .unwrap()
                .to_utc(),
        );
        assert_eq!(t.minute().0.to_rfc3339(), "2026-11-30T14:02:00+00:00");
    }

    fn at(rfc3339: &str) -> Ts {
        Ts::from(DateTime::parse_from_rfc3339(rfc3339).unwrap().to_utc())
    }

    #[test]
    fn floor_aligns_on_whole_steps_since_the_epoch() {
        let six_hours = TimeDelta::hours(6);
        assert_eq!(
            at("2026-11-30T17:59:59.5Z").floor(six_hours),
            at("2026-11-30T12:00:00Z")
        );
        assert_eq!(
            at("2026-11-30T18:00:00Z").floor(six_hours),
            at("2026-11-30T18:00:00Z")
        );
        // Before the epoch it still rounds down, not towards zero.
        assert_eq!(
            at("1969-12-31T23:00:00Z").floor(six_hours),
            at("1969-12-31T18:00:00Z")
        );
        assert_eq!(
            at("2026-11-30T17:59:59Z").floor(TimeDelta::zero()),
            at("2026-11-30T17:59:59Z")
        );
    }
}
