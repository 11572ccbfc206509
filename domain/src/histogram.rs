//! Per-bucket counts keyed by upper bound, and the one place that spells a
//! bound as the `bucket` column's Prometheus `le` label (`0.5`, `300`,
//! `+Inf`) and reads it back.
//!
//! Counts are per bucket, not cumulative: a bucket holds the observations
//! whose value is above the bound before it and at most its own. A counter's
//! row (the empty label) counts as the `+Inf` bucket: it holds everything.

/// How Prometheus spells a bucket bound: `300`, `0.5`, `+Inf`.
pub fn le_label(le: f64) -> String {
    if le.is_infinite() {
        "+Inf".to_owned()
    } else {
        format!("{le}")
    }
}

/// The upper bound a `bucket` label stands for: the number it spells, and
/// infinity for `+Inf`, the empty label of counters and anything that is
/// not a number.
pub fn le_bound(label: &str) -> f64 {
    match label.parse::<f64>() {
        // `+ 0.0` makes `-0` the same bucket as `0`.
        Ok(le) if !le.is_nan() => le + 0.0,
        _ => f64::INFINITY,
    }
}

/// Counts per bucket, in ascending bound order (`+Inf` last). A bucket
/// added with a count of zero is still held: "read, and nothing in it" is
/// not "not read".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    buckets: Vec<(f64, f64)>,
}

impl Histogram {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `count` to the bucket whose upper bound is `le` (`f64::INFINITY`
    /// for `+Inf`; a NaN bound counts there too).
    pub fn add(&mut self, le: f64, count: f64) {
        let le = if le.is_nan() { f64::INFINITY } else { le + 0.0 };
        match self.buckets.binary_search_by(|(b, _)| b.total_cmp(&le)) {
            Ok(i) => self.buckets[i].1 += count,
            Err(i) => self.buckets.insert(i, (le, count)),
        }
    }

    /// Adds `count` to the bucket a `bucket` column label stands for (see [`le_bound`]).
    pub fn add_label(&mut self, label: &str, count: f64) {
        self.add(le_bound(label), count);
    }

    /// Adds every bucket of `other` to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (le, count) in other.iter() {
            self.add(le, count);
        }
    }

    /// The buckets of `histograms` added up.
    pub fn merged<'a>(histograms: impl IntoIterator<Item = &'a Histogram>) -> Histogram {
        let mut all = Histogram::new();
        for h in histograms {
            all.merge(h);
        }
        all
    }

    /// Whether no bucket was added (not even with a zero count).
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// `(upper bound, count)` per bucket, in ascending bound order.
    pub fn iter(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.buckets.iter().copied()
    }

    /// Every observation: the counts of all buckets.
    pub fn total(&self) -> f64 {
        self.buckets.iter().map(|(_, n)| n).sum()
    }

    /// The count of the bucket whose upper bound is exactly `le` (zero when absent).
    pub fn count(&self, le: f64) -> f64 {
        self.buckets
            .iter()
            .find(|(b, _)| *b == le)
            .map_or(0.0, |(_, n)| *n)
    }

    /// The observations at most `le`: the buckets whose bound is at or under it.
    pub fn count_at_most(&self, le: f64) -> f64 {
        self.buckets
            .iter()
            .filter(|(b, _)| *b <= le)
            .map(|(_, n)| n)
            .sum()
    }

    /// The `q` quantile, interpolated linearly inside its bucket as
    /// Prometheus's `histogram_quantile` does, over the bucket scheme
    /// `bounds` (ascending, each bucket's lower edge the bound before it);
    /// in the `+Inf` bucket, the largest finite bound. `None` when empty.
    pub fn quantile(&self, q: f64, bounds: &[f64]) -> Option<f64> {
        let total = self.total();
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut below = 0.0;
        let mut lower = 0.0;
        for bound in bounds {
            let here = self.count(*bound);
            if below + here >= rank && here > 0.0 {
                if bound.is_infinite() {
                    return Some(lower);
                }
                return Some(lower + (bound - lower) * (rank - below) / here);
            }
            below += here;
            if bound.is_finite() {
                lower = *bound;
            }
        }
        Some(lower)
    }
}

impl FromIterator<(f64, f64)> for Histogram {
    fn from_iter<I: IntoIterator<Item = (f64, f64)>>(iter: I) -> Self {
        let mut h = Histogram::new();
        for (le, count) in iter {
            h.add(le, count);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metric;

    #[test]
    fn labels_round_trip_for_every_bound() {
        let gauges = crate::slo::GAUGE_SLICE_BOUNDS.iter();
        let metrics = Metric::ALL.iter().flat_map(|m| m.buckets());
        for le in gauges.chain(metrics) {
            assert_eq!(le_bound(&le_label(*le)), *le, "{le}");
        }
        assert_eq!(le_label(0.5), "0.5");
        assert_eq!(le_label(300.0), "300");
        assert_eq!(le_label(f64::INFINITY), "+Inf");
        assert_eq!(le_bound("300"), 300.0);
        assert_eq!(le_bound("0.5"), 0.5);
        assert_eq!(le_bound("+Inf"), f64::INFINITY);
        assert_eq!(le_bound(""), f64::INFINITY, "a counter's row");
        assert_eq!(le_bound("NaN"), f64::INFINITY);
        assert_eq!(le_bound("soon"), f64::INFINITY);
    }

    #[test]
    fn buckets_add_up_in_bound_order() {
        let mut h = Histogram::new();
        h.add_label("+Inf", 1.0);
        h.add_label("300", 2.0);
        h.add_label("0.5", 3.0);
        h.add_label("300", 4.0);
        h.add_label("-0", 0.0);
        h.add_label("0", 0.0);
        assert_eq!(
            h.iter().collect::<Vec<_>>(),
            [(0.0, 0.0), (0.5, 3.0), (300.0, 6.0), (f64::INFINITY, 1.0)]
        );
        assert!(!h.is_empty(), "a zero count is still a bucket");
        assert!(Histogram::new().is_empty());
        assert_eq!(h.total(), 10.0);
        assert_eq!(h.count(300.0), 6.0);
        assert_eq!(h.count(10.0), 0.0);
        assert_eq!(h.count_at_most(300.0), 9.0);
        assert_eq!(h.count_at_most(299.0), 3.0);
        assert_eq!(h.count_at_most(f64::INFINITY), 10.0);
    }

    #[test]
    fn histograms_merge_bucket_by_bucket() {
        let a: Histogram = [(10.0, 2.0), (300.0, 1.0)].into_iter().collect();
        let b: Histogram = [(10.0, 3.0)].into_iter().collect();
        let all = Histogram::merged([&a, &Histogram::new(), &b]);
        assert_eq!(all, [(10.0, 5.0), (300.0, 1.0)].into_iter().collect());
    }

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let bounds = Metric::OutcomeLatencySeconds.buckets();
        let h: Histogram = [(1.0, 50.0), (5.0, 40.0), (900.0, 9.0), (f64::INFINITY, 1.0)]
            .into_iter()
            .collect();
        // 50 at ≤1 s: the median is the top of the first bucket.
        assert_eq!(h.quantile(0.5, bounds), Some(1.0));
        // p90: rank 90 is the last of the ≤5 s bucket.
        assert_eq!(h.quantile(0.9, bounds), Some(5.0));
        // p95: 5 of 9 into (300, 900].
        let p95 = h.quantile(0.95, bounds).unwrap();
        assert!((p95 - (300.0 + 600.0 * 5.0 / 9.0)).abs() < 1e-9, "{p95}");
        // p100 falls in +Inf: the largest finite bound.
        assert_eq!(h.quantile(1.0, bounds), Some(3600.0));
        assert_eq!(Histogram::new().quantile(0.5, bounds), None);
    }
}
