//! Drift between a previous and a current snapshot of a column, from their stored sketches.

use std::collections::BTreeMap;

use crate::sketch::quantiles::QuantileSketch;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriftError {
    #[error("the {0} sketch is empty, so it has no distribution to compare")]
    Empty(&'static str),
    #[error("needs at least one bin")]
    NoBins,
}

/// Jensen–Shannon divergence, log base 2 so it lies in [0, 1], between the two distributions
/// binned at the previous sketch's quantiles.
///
/// Edges are the previous quantiles at 0, 1/bins, …, 1 (equal edges merged, so a column with
/// few distinct values gets fewer bins), plus two open bins below the first and above the last
/// edge that catch current values outside the previous range. Each bin's mass comes from each
/// sketch's `cdf`.
///
/// No epsilon smoothing: unlike KL, JS needs none, because the mixture m = (p + q)/2 is positive
/// wherever p or q is, and empty bins contribute 0·log 0 = 0. Smoothing would only pull
/// disjoint distributions below 1.
pub fn jensen_shannon_numeric(
    previous: &QuantileSketch,
    current: &QuantileSketch,
    bins: usize,
) -> Result<f64, DriftError> {
    if bins == 0 {
        return Err(DriftError::NoBins);
    }
    let mut edges: Vec<f64> = (0..=bins)
        .filter_map(|i| previous.quantile(i as f64 / bins as f64))
        .collect();
    if edges.is_empty() {
        return Err(DriftError::Empty("previous"));
    }
    if current.is_empty() {
        return Err(DriftError::Empty("current"));
    }
    edges.sort_by(f64::total_cmp);
    edges.dedup();
    let p = bin_masses(previous, &edges);
    let q = bin_masses(current, &edges);
    let divergence: f64 = p
        .iter()
        .zip(&q)
        .map(|(&p, &q)| {
            let m = (p + q) / 2.0;
            (plogp_over(p, m) + plogp_over(q, m)) / 2.0
        })
        .sum();
    Ok(divergence.clamp(0.0, 1.0))
}

/// Mass below the first edge, between consecutive edges, and above the last.
fn bin_masses(sketch: &QuantileSketch, edges: &[f64]) -> Vec<f64> {
    // Both sketches are non-empty and edges are finite, so cdf always answers.
    let cdf: Vec<f64> = edges
        .iter()
        .map(|&edge| sketch.cdf(edge).unwrap_or(0.0))
        .collect();
    let mut masses = Vec::with_capacity(edges.len() + 1);
    masses.push(cdf[0]);
    // max(0) absorbs rounding; the cdf itself never decreases.
    masses.extend(cdf.windows(2).map(|w| (w[1] - w[0]).max(0.0)));
    masses.push((1.0 - cdf[cdf.len() - 1]).max(0.0));
    masses
}

/// p·log2(p/m), taking 0·log 0 = 0.
fn plogp_over(p: f64, m: f64) -> f64 {
    if p > 0.0 { p * (p / m).log2() } else { 0.0 }
}

/// The largest absolute difference between the two category frequencies (each count over its
/// map's total), and the category where it occurs (the smallest key on ties; `None` when the
/// distributions are identical). An empty map counts as all frequencies zero.
pub fn l_infinity(
    previous: &BTreeMap<String, u64>,
    current: &BTreeMap<String, u64>,
) -> (f64, Option<String>) {
    let (before_total, after_total) = (total(previous), total(current));
    let mut worst: (f64, Option<&String>) = (0.0, None);
    for key in previous.keys().chain(current.keys()) {
        let before = frequency(previous, before_total, key);
        let difference = (frequency(current, after_total, key) - before).abs();
        let smaller_tie = worst.1.is_some_and(|k| key < k);
        if difference > worst.0 || (difference == worst.0 && difference > 0.0 && smaller_tie) {
            worst = (difference, Some(key));
        }
    }
    (worst.0, worst.1.cloned())
}

fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

fn frequency(counts: &BTreeMap<String, u64>, total: u64, key: &str) -> f64 {
    match counts.get(key) {
        Some(&n) if total > 0 => n as f64 / total as f64,
        _ => 0.0,
    }
}

/// The share of current rows whose category never appeared in the previous counts; 0 when the
/// current counts are empty. If the previous counts were truncated, keys folded into `other`
/// look new here, so the share is an upper bound.
pub fn new_category_share(
    previous: &BTreeMap<String, u64>,
    current: &BTreeMap<String, u64>,
) -> f64 {
    let total = total(current);
    if total == 0 {
        return 0.0;
    }
    let new: u64 = current
        .iter()
        .filter(|(key, _)| !previous.contains_key(*key))
        .map(|(_, n)| n)
        .sum();
    new as f64 / total as f64
}

/// The estimated share of current values below `previous_min` or above `previous_max`; exactly
/// 0 when the current min and max lie within them, and 0 for an empty current sketch.
pub fn out_of_range_share(previous_min: f64, previous_max: f64, current: &QuantileSketch) -> f64 {
    let (Some(min), Some(max)) = (current.min(), current.max()) else {
        return 0.0;
    };
    // The exact extrema decide the common in-range case; the cdf only estimates the tails, and
    // on its own would count a current point mass at exactly previous_min as below it.
    let below = if min >= previous_min {
        0.0
    } else {
        current.cdf(previous_min).unwrap_or(0.0)
    };
    let above = if max <= previous_max {
        0.0
    } else {
        1.0 - current.cdf(previous_max).unwrap_or(1.0)
    };
    (below + above).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mix::SplitMix64;
    use statrs::distribution::{ContinuousCDF, Normal};

    fn normal_sketch(n: usize, shift: f64, seed: u64) -> QuantileSketch {
        let mut rng = SplitMix64::new(seed);
        let values: Vec<f64> = (0..n)
            .map(|_| {
                let u = 1.0 - rng.next_f64();
                let v = rng.next_f64();
                shift + (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect();
        let mut sketch = QuantileSketch::default();
        sketch.add_batch(&values);
        sketch
    }

    fn sketch_of(values: &[f64]) -> QuantileSketch {
        let mut sketch = QuantileSketch::default();
        sketch.add_batch(values);
        sketch
    }

    fn counts(items: &[(&str, u64)]) -> BTreeMap<String, u64> {
        items.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn identical_distributions_diverge_by_almost_nothing() {
        let (a, b) = (normal_sketch(50_000, 0.0, 1), normal_sketch(50_000, 0.0, 2));
        let js = jensen_shannon_numeric(&a, &b, 10).expect("both non-empty");
        assert!(js < 0.002, "js {js}");
        assert_eq!(jensen_shannon_numeric(&a, &a, 10), Ok(0.0));
    }

    #[test]
    fn disjoint_distributions_diverge_fully() {
        let low = sketch_of(&(0..1000).map(f64::from).collect::<Vec<_>>());
        let high = sketch_of(&(5000..6000).map(f64::from).collect::<Vec<_>>());
        for (a, b) in [(&low, &high), (&high, &low)] {
            let js = jensen_shannon_numeric(a, b, 10).expect("both non-empty");
            assert!((js - 1.0).abs() < 1e-12, "js {js}");
        }
    }

    #[test]
    fn a_known_shift_matches_the_binned_normals() {
        let bins = 10;
        let standard = Normal::new(0.0, 1.0).expect("valid normal");
        let shifted = Normal::new(0.5, 1.0).expect("valid normal");
        // The same binning done on the exact distributions: deciles of N(0,1), open ends.
        let edges: Vec<f64> = (1..bins)
            .map(|i| standard.inverse_cdf(i as f64 / bins as f64))
            .collect();
        let mass = |d: &Normal| -> Vec<f64> {
            let mut cdf = vec![0.0];
            cdf.extend(edges.iter().map(|&e| d.cdf(e)));
            cdf.push(1.0);
            cdf.windows(2).map(|w| w[1] - w[0]).collect()
        };
        let (p, q) = (mass(&standard), mass(&shifted));
        let expected: f64 = p
            .iter()
            .zip(&q)
            .map(|(&p, &q)| (plogp_over(p, (p + q) / 2.0) + plogp_over(q, (p + q) / 2.0)) / 2.0)
            .sum();
        let js = jensen_shannon_numeric(
            &normal_sketch(100_000, 0.0, 3),
            &normal_sketch(100_000, 0.5, 4),
            bins,
        )
        .expect("both non-empty");
        assert!(
            (js - expected).abs() < 0.004,
            "js {js}, expected {expected}"
        );
        assert!(expected > 0.04, "the shift must be visible: {expected}");
    }

    #[test]
    fn constant_columns_compare_by_their_value() {
        let ones = sketch_of(&[1.0; 100]);
        let twos = sketch_of(&[2.0; 100]);
        assert_eq!(jensen_shannon_numeric(&ones, &ones, 10), Ok(0.0));
        assert_eq!(jensen_shannon_numeric(&ones, &twos, 10), Ok(1.0));
    }

    #[test]
    fn empty_sketches_and_zero_bins_are_errors() {
        let empty = QuantileSketch::default();
        let full = sketch_of(&[1.0, 2.0]);
        assert_eq!(
            jensen_shannon_numeric(&empty, &full, 10),
            Err(DriftError::Empty("previous"))
        );
        assert_eq!(
            jensen_shannon_numeric(&full, &empty, 10),
            Err(DriftError::Empty("current"))
        );
        assert_eq!(
            jensen_shannon_numeric(&full, &full, 0),
            Err(DriftError::NoBins)
        );
    }

    #[test]
    fn l_infinity_names_the_category_that_moved_most() {
        let before = counts(&[("a", 50), ("b", 50)]);
        let after = counts(&[("a", 20), ("b", 60), ("c", 20)]);
        let (distance, key) = l_infinity(&before, &after);
        assert!((distance - 0.3).abs() < 1e-12);
        assert_eq!(key.as_deref(), Some("a"));
        assert_eq!(l_infinity(&before, &before), (0.0, None));
        let (distance, key) = l_infinity(&counts(&[("x", 1)]), &counts(&[("y", 1)]));
        assert_eq!((distance, key.as_deref()), (1.0, Some("x")));
    }

    #[test]
    fn new_category_share_counts_current_rows_in_unseen_keys() {
        let before = counts(&[("a", 5), ("b", 5)]);
        let after = counts(&[("a", 6), ("c", 3), ("d", 1)]);
        assert!((new_category_share(&before, &after) - 0.4).abs() < 1e-12);
        assert_eq!(new_category_share(&before, &before), 0.0);
        assert_eq!(new_category_share(&before, &BTreeMap::new()), 0.0);
    }

    #[test]
    fn out_of_range_share_counts_both_tails() {
        let current = sketch_of(&(0..1000).map(f64::from).collect::<Vec<_>>());
        assert_eq!(out_of_range_share(0.0, 999.0, &current), 0.0);
        assert_eq!(out_of_range_share(-5.0, 2000.0, &current), 0.0);
        let share = out_of_range_share(100.0, 799.5, &current);
        assert!((share - 0.3).abs() < 0.01, "share {share}");
        assert_eq!(out_of_range_share(2000.0, 3000.0, &current), 1.0);
        let constant = sketch_of(&[5.0; 10]);
        assert_eq!(out_of_range_share(5.0, 5.0, &constant), 0.0);
        assert_eq!(out_of_range_share(6.0, 7.0, &constant), 1.0);
        assert_eq!(
            out_of_range_share(0.0, 1.0, &QuantileSketch::default()),
            0.0
        );
    }
}
