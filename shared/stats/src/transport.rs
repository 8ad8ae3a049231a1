//! The Wasserstein-1 (earth mover's) distance between two samples of a numeric column, and what
//! sampling alone makes of it.
//!
//! W1 is the area between the two cumulative distributions, ∫|F(x) − G(x)| dx, in the column's
//! own units: moving a share s of the rows by d moves it by s·d, so it grows with both the size
//! of a shift and the share of rows it touches (a binned divergence does not: a shift inside one
//! bin is invisible to it, and one across an edge of a lumpy column jumps). Divided by the
//! reference's standard deviation it reads as "a fraction of the column's spread".

use crate::sketch::quantiles::QuantileSketch;

/// Probabilities at which two quantile sketches are compared.
const GRID: usize = 1000;

/// W1 between two quantile sketches: ∫₀¹ |Q₁(p) − Q₂(p)| dp at the grid's midpoints. `None`
/// when either is empty.
pub fn wasserstein_sketches(a: &QuantileSketch, b: &QuantileSketch) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for i in 0..GRID {
        let p = (i as f64 + 0.5) / GRID as f64;
        total += (a.quantile(p)? - b.quantile(p)?).abs();
    }
    Some(total / GRID as f64)
}

/// W1 between two samples given as exact (value, count) pairs, in any order: the sweep over the
/// sorted union of values of |F − G| times each gap. `None` when either side is empty.
pub fn wasserstein_counts(a: &[(f64, u64)], b: &[(f64, u64)]) -> Option<f64> {
    let (n, m) = (total(a), total(b));
    if n == 0 || m == 0 {
        return None;
    }
    let mut points: Vec<(f64, f64)> = a
        .iter()
        .map(|&(v, c)| (v, c as f64 / n as f64))
        .chain(b.iter().map(|&(v, c)| (v, -(c as f64) / m as f64)))
        .filter(|(v, _)| v.is_finite())
        .collect();
    points.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut area, mut difference) = (0.0, 0.0);
    for pair in points.windows(2) {
        difference += pair[0].1;
        area += difference.abs() * (pair[1].0 - pair[0].0);
    }
    Some(area)
}

fn total(counts: &[(f64, u64)]) -> u64 {
    counts.iter().map(|(_, c)| c).sum()
}

/// ∫ √(F(1 − F)) dx of a sketch's distribution (= ∫₀¹ √(p(1 − p)) dQ(p)): the scale of W1's
/// sampling noise. `None` when the sketch is empty.
pub fn spread_integral(sketch: &QuantileSketch) -> Option<f64> {
    let mut previous = sketch.quantile(0.0)?;
    let mut total = 0.0;
    for i in 1..=GRID {
        let p = i as f64 / GRID as f64;
        let q = sketch.quantile(p)?;
        let mid = p - 0.5 / GRID as f64;
        total += (mid * (1.0 - mid)).sqrt() * (q - previous).max(0.0);
        previous = q;
    }
    Some(total)
}

/// The W1 two samples of one distribution (`n` and `m` values; `spread` its ∫√(F(1−F))dx,
/// `sd` its standard deviation) exceed with probability at most `alpha`.
///
/// √(nm/(n+m))·W1 tends to ∫|B(F(x))|dx for a Brownian bridge B, whose mean is
/// √(2/π)·∫√(F(1−F))dx. The functional is 1-Lipschitz in B under the dual of g ↦ ∫g·B(F) with
/// |g| ≤ 1, whose largest variance (at g = 1, the bridge's covariances being non-negative) is
/// Var(X) = sd²; the Borell–TIS inequality then bounds its upper tail by exp(−t²/(2·sd²)). So
/// the allowance is (√(2/π)·spread + sd·√(2·ln(1/α)))·√(1/n + 1/m): conservative, whatever
/// the distribution's shape.
pub fn wasserstein_allowance(spread: f64, sd: f64, n: u64, m: u64, alpha: f64) -> f64 {
    if n == 0 || m == 0 {
        return f64::INFINITY;
    }
    let scale = (1.0 / n as f64 + 1.0 / m as f64).sqrt();
    let mean = (2.0 / std::f64::consts::PI).sqrt() * spread;
    let tail = sd * (2.0 * (1.0 / alpha.clamp(f64::MIN_POSITIVE, 1.0)).ln()).sqrt();
    (mean + tail) * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sketch(values: &[f64]) -> QuantileSketch {
        let mut sketch = QuantileSketch::new(200).unwrap();
        sketch.add_batch(values);
        sketch
    }

    #[test]
    fn a_shift_of_every_value_moves_w1_by_the_shift() {
        let a: Vec<f64> = (0..10_000).map(|i| (i % 997) as f64).collect();
        let b: Vec<f64> = a.iter().map(|v| v + 5.0).collect();
        let w = wasserstein_sketches(&sketch(&a), &sketch(&b)).unwrap();
        assert!((w - 5.0).abs() < 0.1, "{w}");
        let counts = |v: &[f64]| -> Vec<(f64, u64)> { v.iter().map(|&x| (x, 1)).collect() };
        let exact = wasserstein_counts(&counts(&a), &counts(&b)).unwrap();
        assert!((exact - 5.0).abs() < 1e-9, "{exact}");
    }

    /// A shift of a share s of the rows by d gives s·d: W1 grows with both.
    #[test]
    fn w1_is_monotone_in_the_share_and_the_size_of_a_shift() {
        let base: Vec<(f64, u64)> = (0..100).map(|i| (i as f64, 10)).collect();
        let shifted = |share: usize, by: f64| -> Vec<(f64, u64)> {
            base.iter()
                .enumerate()
                .map(|(i, &(v, c))| if i < share { (v + by, c) } else { (v, c) })
                .collect()
        };
        let mut last = 0.0;
        for share in [10, 20, 40, 80] {
            let w = wasserstein_counts(&base, &shifted(share, 0.5)).unwrap();
            assert!(w > last, "{share}: {w} after {last}");
            assert!((w - share as f64 / 100.0 * 0.5).abs() < 1e-9, "{w}");
            last = w;
        }
        let small = wasserstein_counts(&base, &shifted(20, 0.5)).unwrap();
        let large = wasserstein_counts(&base, &shifted(20, 0.9)).unwrap();
        assert!(large > small);
    }

    /// The allowance holds: two halves of one sample stay below it at α = 0.01 in nearly
    /// every split, and the mean noise sits well below the allowance.
    #[test]
    fn two_samples_of_one_distribution_stay_within_the_allowance() {
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut exceeded = 0;
        for _ in 0..200 {
            // Exponential: skewed, the shape a binned test handles worst.
            let a: Vec<(f64, u64)> = (0..1000).map(|_| (-(1.0 - next()).ln(), 1)).collect();
            let b: Vec<(f64, u64)> = (0..800).map(|_| (-(1.0 - next()).ln(), 1)).collect();
            let w = wasserstein_counts(&a, &b).unwrap();
            let values: Vec<f64> = a.iter().map(|x| x.0).collect();
            let spread = spread_integral(&sketch(&values)).unwrap();
            if w > wasserstein_allowance(spread, 1.0, 1000, 800, 0.01) {
                exceeded += 1;
            }
        }
        assert!(exceeded <= 2, "{exceeded} of 200 beyond the 1% allowance");
        assert_eq!(wasserstein_allowance(1.0, 1.0, 0, 5, 0.01), f64::INFINITY);
    }
}
