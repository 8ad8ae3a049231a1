//! A mergeable quantile sketch (t-digest) for numeric columns: quantiles, CDF, count, min, max.
//!
//! Wraps the `tdigest` crate but stores its own JSON shape, so a stored profile does not depend
//! on that crate's field names and is validated when read back.
//!
//! Non-finite values (NaN, ±∞) are skipped and count for nothing: the digest cannot place them,
//! so callers that want to report them count them before adding.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, Serializer};
use tdigest::{Centroid, TDigest};

pub const DEFAULT_COMPRESSION: usize = 100;

/// Values wait in a buffer and are merged into the digest this many at a time: one sort and one
/// pass over the centroids per chunk instead of per value.
const CHUNK: usize = 4096;

#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "Stored")]
pub struct QuantileSketch {
    digest: TDigest,
    pending: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QuantileError {
    #[error("compression must be at least 1")]
    ZeroCompression,
    #[error(
        "centroid {index} has mean {mean} and weight {weight}; both must be finite, the weight positive"
    )]
    BadCentroid {
        index: usize,
        mean: f64,
        weight: f64,
    },
    #[error("centroid {index} is out of order or outside [min, max]")]
    Misplaced { index: usize },
    #[error("count {count} does not match the centroids' total weight {weight}")]
    CountMismatch { count: u64, weight: f64 },
    #[error(
        "min and max must be finite with min <= max when there are values, and absent when not"
    )]
    BadExtrema,
}

impl Default for QuantileSketch {
    fn default() -> Self {
        Self {
            digest: TDigest::new_with_size(DEFAULT_COMPRESSION),
            pending: Vec::new(),
        }
    }
}

impl PartialEq for QuantileSketch {
    /// Two sketches are equal when they summarize the same way, buffered values included.
    fn eq(&self, other: &Self) -> bool {
        self.flushed() == other.flushed()
    }
}

impl QuantileSketch {
    /// `compression` bounds the number of centroids; more means finer quantiles.
    pub fn new(compression: usize) -> Result<Self, QuantileError> {
        if compression == 0 {
            return Err(QuantileError::ZeroCompression);
        }
        Ok(Self {
            digest: TDigest::new_with_size(compression),
            pending: Vec::new(),
        })
    }

    pub fn compression(&self) -> usize {
        self.digest.max_size()
    }

    /// Adds the finite values; NaN and ±∞ are skipped (see the module docs).
    pub fn add_batch(&mut self, values: &[f64]) {
        for &value in values {
            if value.is_finite() {
                self.pending.push(value);
                if self.pending.len() >= CHUNK {
                    self.flush();
                }
            }
        }
    }

    /// Merges buffered values into the digest. Queries work without it, but each one then
    /// pays for a temporary merge.
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            self.digest = self
                .digest
                .merge_unsorted(std::mem::take(&mut self.pending));
        }
    }

    /// One sketch summarizing all inputs; its compression is the largest of theirs.
    pub fn merge<'a>(sketches: impl IntoIterator<Item = &'a QuantileSketch>) -> QuantileSketch {
        let digests: Vec<TDigest> = sketches
            .into_iter()
            .map(|sketch| sketch.flushed().into_owned())
            .collect();
        let compression = digests
            .iter()
            .map(TDigest::max_size)
            .max()
            .unwrap_or(DEFAULT_COMPRESSION);
        let digest = if digests.is_empty() {
            TDigest::new_with_size(compression)
        } else {
            TDigest::merge_digests(digests)
        };
        Self {
            digest,
            pending: Vec::new(),
        }
    }

    /// Number of finite values added.
    pub fn count(&self) -> u64 {
        self.digest.count() as u64 + self.pending.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    pub fn min(&self) -> Option<f64> {
        let pending = self.pending.iter().copied().reduce(f64::min);
        [self.digest.min(), pending]
            .into_iter()
            .flatten()
            .reduce(f64::min)
    }

    pub fn max(&self) -> Option<f64> {
        let pending = self.pending.iter().copied().reduce(f64::max);
        [self.digest.max(), pending]
            .into_iter()
            .flatten()
            .reduce(f64::max)
    }

    pub fn mean(&self) -> Option<f64> {
        self.flushed().mean()
    }

    /// The estimated value at quantile `q`; q is clamped to [0, 1], so 0 gives the min and 1 the
    /// max. `None` when the sketch is empty or q is NaN.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if q.is_nan() {
            return None;
        }
        self.flushed().estimate_quantile(q.clamp(0.0, 1.0))
    }

    /// Estimated fraction of values ≤ x, interpolated between centroids: 0 at or below the min,
    /// 1 at or above the max, non-decreasing in x. `None` when the sketch is empty or x is NaN.
    pub fn cdf(&self, x: f64) -> Option<f64> {
        if x.is_nan() {
            return None;
        }
        self.flushed().estimate_rank(x)
    }

    /// Estimated fraction of values ≤ x, with every centroid whose mean is exactly x counted
    /// whole. On a repeated value (a discrete column's ties) `cdf` lands in the middle of the
    /// tie, at a point that depends on how the digest happened to cut the tie into centroids,
    /// and jumps to 1 when x is the max: two samples of one distribution then disagree by most
    /// of the tie's mass. Here a tie is a point mass, as it is in the data. Between centroids
    /// it interpolates as `cdf` does. `None` when the sketch is empty or x is NaN.
    pub fn cdf_at_or_below(&self, x: f64) -> Option<f64> {
        self.rank_with_ties(x, true)
    }

    /// Estimated fraction of values < x: [`Self::cdf_at_or_below`] without the tie at x.
    pub fn cdf_below(&self, x: f64) -> Option<f64> {
        self.rank_with_ties(x, false)
    }

    fn rank_with_ties(&self, x: f64, with_x: bool) -> Option<f64> {
        if x.is_nan() {
            return None;
        }
        let digest = self.flushed();
        let (min, max) = (digest.min()?, digest.max()?);
        if x > max || (with_x && x == max) {
            return Some(1.0);
        }
        if x < min || (!with_x && x == min) {
            return Some(0.0);
        }
        let centroids = digest.centroids();
        if centroids.iter().any(|c| c.mean() == x) {
            let counted: f64 = centroids
                .iter()
                .take_while(|c| c.mean() < x || (with_x && c.mean() == x))
                .map(|c| c.weight())
                .sum();
            return Some((counted / digest.count()).clamp(0.0, 1.0));
        }
        digest.estimate_rank(x)
    }

    fn flushed(&self) -> Cow<'_, TDigest> {
        if self.pending.is_empty() {
            Cow::Borrowed(&self.digest)
        } else {
            Cow::Owned(self.digest.merge_unsorted(self.pending.clone()))
        }
    }
}

/// Stored as `{"compression", "count", "sum", "min", "max", "centroids": [[mean, weight], ...]}`.
/// `sum` is null when it overflowed to ±∞ (JSON has no infinity); reading it back then rebuilds
/// it from the centroids.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    compression: usize,
    count: u64,
    sum: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    centroids: Vec<(f64, f64)>,
}

impl Serialize for QuantileSketch {
    /// Serializes the flushed state, so buffered values are never lost.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let digest = self.flushed();
        Stored {
            compression: digest.max_size(),
            count: digest.count() as u64,
            sum: Some(digest.sum()).filter(|sum| sum.is_finite()),
            min: digest.min(),
            max: digest.max(),
            centroids: digest
                .centroids()
                .iter()
                .map(|c| (c.mean(), c.weight()))
                .collect(),
        }
        .serialize(serializer)
    }
}

impl TryFrom<Stored> for QuantileSketch {
    type Error = QuantileError;

    fn try_from(stored: Stored) -> Result<Self, QuantileError> {
        if stored.compression == 0 {
            return Err(QuantileError::ZeroCompression);
        }
        let (min, max) = match (stored.min, stored.max, stored.centroids.is_empty()) {
            (None, None, true) if stored.count == 0 => {
                return Self::new(stored.compression);
            }
            (Some(min), Some(max), false) if min.is_finite() && max.is_finite() && min <= max => {
                (min, max)
            }
            _ => return Err(QuantileError::BadExtrema),
        };
        let mut previous = min;
        let mut weight = 0.0;
        for (index, &(mean, w)) in stored.centroids.iter().enumerate() {
            if !mean.is_finite() || !w.is_finite() || w <= 0.0 {
                return Err(QuantileError::BadCentroid {
                    index,
                    mean,
                    weight: w,
                });
            }
            if mean < previous || mean > max {
                return Err(QuantileError::Misplaced { index });
            }
            previous = mean;
            weight += w;
        }
        // Weights are sums of integer counts, so they match the count up to float rounding.
        if (weight - stored.count as f64).abs() > 1e-9 * weight.max(1.0) {
            return Err(QuantileError::CountMismatch {
                count: stored.count,
                weight,
            });
        }
        let sum = stored
            .sum
            .unwrap_or_else(|| stored.centroids.iter().map(|(m, w)| m * w).sum());
        let centroids = stored
            .centroids
            .iter()
            .map(|&(mean, w)| Centroid::new(mean, w))
            .collect();
        Ok(Self {
            digest: TDigest::new(
                centroids,
                sum,
                stored.count as f64,
                Some(max),
                Some(min),
                stored.compression,
            ),
            pending: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::SplitMix64;
    use proptest::prelude::*;

    fn uniform(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n).map(|_| rng.next_f64()).collect()
    }

    /// Standard normal draws by Box–Muller.
    fn normal(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let u = 1.0 - rng.next_f64();
                let v = rng.next_f64();
                (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect()
    }

    fn sketch_of(values: &[f64]) -> QuantileSketch {
        let mut sketch = QuantileSketch::default();
        sketch.add_batch(values);
        sketch
    }

    /// The largest gap between the asked quantile and the true rank of the estimate.
    fn max_rank_error(sketch: &QuantileSketch, values: &[f64]) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        (1..100)
            .map(|i| {
                let q = f64::from(i) / 100.0;
                let estimate = sketch.quantile(q).expect("not empty");
                let rank = sorted.partition_point(|v| *v <= estimate) as f64 / n;
                (rank - q).abs()
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn quantiles_within_one_percent_rank_error() {
        for values in [uniform(100_000, 1), normal(100_000, 2)] {
            let sketch = sketch_of(&values);
            assert_eq!(sketch.count(), 100_000);
            let error = max_rank_error(&sketch, &values);
            assert!(error < 0.01, "rank error {error}");
        }
    }

    #[test]
    fn merged_parts_match_the_whole() {
        let values = normal(100_000, 3);
        let parts: Vec<QuantileSketch> = values.chunks(7_000).map(sketch_of).collect();
        let merged = QuantileSketch::merge(&parts);
        let whole = sketch_of(&values);
        assert_eq!(merged.count(), whole.count());
        assert_eq!(merged.min(), whole.min());
        assert_eq!(merged.max(), whole.max());
        assert!(max_rank_error(&merged, &values) < 0.01);
        for q in [0.01, 0.1, 0.5, 0.9, 0.99] {
            let (a, b) = (merged.quantile(q), whole.quantile(q));
            let (a, b) = (a.expect("not empty"), b.expect("not empty"));
            assert!((a - b).abs() < 0.03, "q = {q}: merged {a}, whole {b}");
        }
    }

    #[test]
    fn non_finite_values_are_skipped() {
        let sketch = sketch_of(&[1.0, f64::NAN, 2.0, f64::INFINITY, f64::NEG_INFINITY, 3.0]);
        assert_eq!(sketch.count(), 3);
        assert_eq!((sketch.min(), sketch.max()), (Some(1.0), Some(3.0)));
        assert_eq!(sketch.quantile(0.5), Some(2.0));
    }

    #[test]
    fn empty_sketch_answers_none() {
        let sketch = QuantileSketch::default();
        assert!(sketch.is_empty());
        assert_eq!(sketch.quantile(0.5), None);
        assert_eq!(sketch.cdf(0.0), None);
        assert_eq!((sketch.min(), sketch.max()), (None, None));
        assert!(QuantileSketch::merge([]).is_empty());
    }

    #[test]
    fn cdf_tracks_the_empirical_distribution() {
        let values = uniform(50_000, 4);
        let sketch = sketch_of(&values);
        for x in [0.05, 0.25, 0.5, 0.75, 0.95] {
            let cdf = sketch.cdf(x).expect("not empty");
            assert!((cdf - x).abs() < 0.01, "cdf({x}) = {cdf}");
        }
        assert_eq!(sketch.cdf(-1.0), Some(0.0));
        assert_eq!(sketch.cdf(2.0), Some(1.0));
    }

    /// A discrete column (loan terms in months, a handful of values with heavy ties): the tie's
    /// whole mass is at or below its value, whatever the max and however the digest cut it.
    #[test]
    fn cdf_at_or_below_counts_a_tie_whole() {
        let terms = [6.0, 12.0, 24.0, 36.0, 48.0, 60.0];
        let weights = [1, 4, 8, 21, 20, 46];
        let mut rng = SplitMix64::new(9);
        let draw = |rng: &mut SplitMix64| {
            let mut u = (rng.next_f64() * 100.0) as u32;
            let mut i = 0;
            while u >= weights[i] {
                u -= weights[i];
                i += 1;
            }
            terms[i]
        };
        let values: Vec<f64> = (0..5_000).map(|_| draw(&mut rng)).collect();
        // The same draws plus one longer term: `cdf` jumps to 1 at the max of the first only.
        let mut longer = values.clone();
        longer.push(72.0);
        let (a, b) = (sketch_of(&values), sketch_of(&longer));
        for term in terms {
            let exact = values.iter().filter(|v| **v <= term).count() as f64 / 5_000.0;
            let below = values.iter().filter(|v| **v < term).count() as f64 / 5_000.0;
            for sketch in [&a, &b] {
                // A centroid may still mix two neighbouring terms: at most its weight is counted
                // on the wrong side.
                let digest = sketch.flushed();
                let largest = digest
                    .centroids()
                    .iter()
                    .map(|c| c.weight())
                    .fold(0.0, f64::max);
                let bound = largest / digest.count();
                assert!(bound < 0.04, "{bound}");
                let got = sketch.cdf_at_or_below(term).expect("not empty");
                assert!((got - exact).abs() <= bound, "{term}: {got} vs {exact}");
                let got = sketch.cdf_below(term).expect("not empty");
                assert!((got - below).abs() <= bound, "{term}: {got} vs {below}");
            }
        }
        let (mid_tie, at_max) = (b.cdf(60.0).unwrap(), a.cdf(60.0).unwrap());
        assert!(
            at_max - mid_tie > 0.2,
            "{mid_tie} {at_max}: the bug this avoids"
        );
        assert_eq!(a.cdf_at_or_below(5.0), Some(0.0));
        assert_eq!(a.cdf_below(6.0), Some(0.0));
        assert_eq!(a.cdf_below(61.0), Some(1.0));
        assert_eq!(a.cdf_at_or_below(f64::NAN), None);
        assert_eq!(QuantileSketch::default().cdf_at_or_below(1.0), None);
        // Between values it interpolates like `cdf`.
        let smooth = sketch_of(&uniform(10_000, 8));
        assert_eq!(smooth.cdf_at_or_below(0.37), smooth.cdf(0.37));
    }

    #[test]
    fn unflushed_queries_see_buffered_values() {
        let mut sketch = sketch_of(&uniform(10_000, 5));
        sketch.add_batch(&[100.0]);
        assert_eq!(sketch.max(), Some(100.0));
        assert_eq!(sketch.quantile(1.0), Some(100.0));
        let before = sketch.quantile(0.3);
        sketch.flush();
        assert_eq!(sketch.quantile(0.3), before);
    }

    #[test]
    fn serde_round_trip_keeps_every_answer() {
        let mut sketch = sketch_of(&normal(20_000, 6));
        sketch.add_batch(&[42.0]);
        let json = serde_json::to_string(&sketch).expect("serializes");
        let back: QuantileSketch = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, sketch);
        assert_eq!(back.count(), 20_001);
        assert_eq!(back.max(), Some(42.0));
        for q in [0.0, 0.1, 0.5, 0.9, 1.0] {
            assert_eq!(back.quantile(q), sketch.quantile(q));
        }
        let empty = serde_json::to_string(&QuantileSketch::default()).expect("serializes");
        assert_eq!(
            empty,
            r#"{"compression":100,"count":0,"sum":0.0,"min":null,"max":null,"centroids":[]}"#
        );
        let back: QuantileSketch = serde_json::from_str(&empty).expect("deserializes");
        assert!(back.is_empty());
        let overflowed = r#"{"compression":100,"count":2,"sum":null,"min":1.0,"max":3.0,"centroids":[[1.0,1.0],[3.0,1.0]]}"#;
        let back: QuantileSketch = serde_json::from_str(overflowed).expect("deserializes");
        assert_eq!(back.mean(), Some(2.0));
    }

    #[test]
    fn deserialize_rejects_inconsistent_state() {
        let cases = [
            (
                r#"{"compression":100,"count":3,"sum":3.0,"min":1.0,"max":2.0,"centroids":[[1.0,1.0],[2.0,1.0]]}"#,
                "does not match",
            ),
            (
                r#"{"compression":100,"count":2,"sum":3.0,"min":1.0,"max":2.0,"centroids":[[2.0,1.0],[1.0,1.0]]}"#,
                "out of order",
            ),
            (
                r#"{"compression":100,"count":1,"sum":1.0,"min":1.0,"max":2.0,"centroids":[[1.0,-1.0]]}"#,
                "weight -1",
            ),
            (
                r#"{"compression":100,"count":0,"sum":0.0,"min":1.0,"max":null,"centroids":[]}"#,
                "min and max",
            ),
        ];
        for (json, message) in cases {
            let err = serde_json::from_str::<QuantileSketch>(json).expect_err(json);
            assert!(err.to_string().contains(message), "{json}: {err}");
        }
    }

    proptest! {
        #[test]
        fn cdf_is_monotone_and_bounded(
            values in proptest::collection::vec(-1e6f64..1e6, 1..2000),
            mut xs in proptest::collection::vec(-2e6f64..2e6, 2..50),
        ) {
            let sketch = sketch_of(&values);
            xs.sort_by(f64::total_cmp);
            let cdfs: Vec<f64> = xs.iter().map(|x| sketch.cdf(*x).expect("not empty")).collect();
            prop_assert!(cdfs.iter().all(|c| (0.0..=1.0).contains(c)));
            prop_assert!(cdfs.windows(2).all(|w| w[0] <= w[1]), "{:?}", cdfs);
        }

        #[test]
        fn quantiles_stay_within_min_and_max(
            values in proptest::collection::vec(-1e6f64..1e6, 1..2000),
            q in 0.0f64..=1.0,
        ) {
            let sketch = sketch_of(&values);
            let estimate = sketch.quantile(q).expect("not empty");
            let (min, max) = (sketch.min().expect("min"), sketch.max().expect("max"));
            prop_assert!(min <= estimate && estimate <= max);
        }
    }
}
