//! How far two samples of one distribution land apart by chance alone: the allowance a drift
//! check adds to its practical threshold, so that a small table does not fail on noise and a
//! large one still fails on a small real shift.
//!
//! Each function returns the value its distance exceeds with probability at most `alpha` when
//! the previous (n values) and the current (m values) sample come from one distribution. A
//! caller testing many columns divides its false-alarm rate among them (Bonferroni). Sizes of
//! zero leave nothing to compare: the allowance is then the distance's largest value, 1.

use statrs::distribution::{ChiSquared, ContinuousCDF};

use crate::normal;

/// The Jensen–Shannon divergence (bits) between two samples binned into `bins` bins.
///
/// For small differences JS (in nats) is Σ (p−q)²/(8·(p+q)/2), and the two-sample chi-square
/// statistic is n·m/(n+m)·Σ (p−q)²/pooled, so 8·ln 2·n·m/(n+m)·JS is chi-square with bins − 1
/// degrees of freedom. The bins are the previous deciles, so each expects a tenth of the rows
/// and the approximation holds from a few dozen rows on.
pub fn divergence_allowance(bins: usize, n: u64, m: u64, alpha: f64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    if bins < 2 {
        return 0.0;
    }
    let critical = ChiSquared::new((bins - 1) as f64)
        .map(|chi| chi.inverse_cdf(1.0 - alpha))
        .unwrap_or(f64::INFINITY);
    (critical / (8.0 * std::f64::consts::LN_2 * effective(n, m))).min(1.0)
}

/// The difference of one share between two samples (`pooled`: the share in both together):
/// a two-proportion z-test, two-sided or (for a rise) one-sided.
pub fn share_allowance(pooled: f64, n: u64, m: u64, alpha: f64, two_sided: bool) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let z = normal::quantile(1.0 - if two_sided { alpha / 2.0 } else { alpha });
    let pooled = pooled.clamp(0.0, 1.0);
    (z * (pooled * (1.0 - pooled) / effective(n, m)).sqrt()).min(1.0)
}

/// The total variation distance between two samples (n and m rows) of one category
/// distribution with shares `shares`.
///
/// Its mean is at most ½·Σ√(pᵢ(1 − pᵢ))·√(1/n + 1/m) (each share's difference has that
/// standard deviation, and E|X| ≤ √E[X²]); moving one row changes it by at most 1/n (or 1/m),
/// so McDiarmid's inequality bounds its excess over the mean by √(ln(1/α)/2·(1/n + 1/m)).
pub fn total_variation_allowance(shares: &[f64], n: u64, m: u64, alpha: f64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let scale = (1.0 / n as f64 + 1.0 / m as f64).sqrt();
    let mean: f64 = shares
        .iter()
        .map(|p| (p.clamp(0.0, 1.0) * (1.0 - p.clamp(0.0, 1.0))).sqrt())
        .sum::<f64>()
        / 2.0;
    let tail = ((1.0 / alpha.clamp(f64::MIN_POSITIVE, 1.0)).ln() / 2.0).sqrt();
    ((mean + tail) * scale).min(1.0)
}

/// The share of the current sample outside the previous sample's [min, max].
///
/// The mass outside the range of n draws from a continuous distribution is Beta(2, n − 1)
/// whatever the distribution (the two outer of n + 1 exchangeable spacings): its upper
/// alpha/2 quantile u solves (1 − u)^(n−1)·(1 + (n − 1)·u) = alpha/2. The current share then
/// scatters binomially around that mass, allowed for with the other alpha/2. Ties only make
/// values outside the range rarer, so discrete columns get a safe allowance.
pub fn out_of_range_allowance(n: u64, m: u64, alpha: f64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let b = (n - 1) as f64;
    let survival = |u: f64| (b * (-u).ln_1p()).exp() * (1.0 + b * u);
    let (mut low, mut high) = (0.0f64, 1.0f64);
    if n > 1 {
        // The survival falls from 1 at u = 0 to 0 at u = 1; 60 halvings reach f64 precision.
        for _ in 0..60 {
            let mid = (low + high) / 2.0;
            if survival(mid) > alpha / 2.0 {
                low = mid;
            } else {
                high = mid;
            }
        }
    }
    let mass = high;
    let z = normal::quantile(1.0 - alpha / 2.0);
    (mass + z * (mass * (1.0 - mass) / m as f64).sqrt()).min(1.0)
}

/// The share of current rows in categories the previous sample never showed, from the
/// previous sample's categories seen once (`singletons`) and twice (`doubletons`).
///
/// Good–Turing: the mass of the categories a sample of n missed is about singletons/n, with a
/// variance of about (singletons + 2·doubletons)/n² (Esty's estimate); the current share
/// scatters around that mass binomially. The one added to each count keeps a small sample
/// that happened to show no singleton from claiming that nothing is left to find.
pub fn unseen_allowance(singletons: u64, doubletons: u64, n: u64, m: u64, alpha: f64) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    let n_f = n as f64;
    let missing = singletons as f64 / n_f;
    let estimate_variance = (singletons + 2 * doubletons + 1) as f64 / (n_f * n_f);
    let sample_variance = (singletons + 1) as f64 / n_f / m as f64;
    let z = normal::quantile(1.0 - alpha);
    (missing + z * (estimate_variance + sample_variance).sqrt()).min(1.0)
}

/// n·m/(n + m): the size of one sample that is as noisy as the difference of the two.
fn effective(n: u64, m: u64) -> f64 {
    let (n, m) = (n as f64, m as f64);
    n * m / (n + m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::jensen_shannon_counts;
    use crate::mix::SplitMix64;

    /// Draws n values from `shares` (weights of the values 0, 1, 2, …) as exact counts.
    fn draw(rng: &mut SplitMix64, shares: &[f64], n: u64) -> Vec<(f64, u64)> {
        let total: f64 = shares.iter().sum();
        let mut counts = vec![0u64; shares.len()];
        for _ in 0..n {
            let mut u = rng.next_f64() * total;
            let mut i = 0;
            while i + 1 < shares.len() && u >= shares[i] {
                u -= shares[i];
                i += 1;
            }
            counts[i] += 1;
        }
        counts
            .into_iter()
            .enumerate()
            .map(|(v, c)| (v as f64, c))
            .collect()
    }

    /// scipy.stats.chi2.ppf(0.999, 9) = 27.877; the allowance is it over 8·ln2·n_eff.
    #[test]
    fn the_divergence_allowance_is_the_chi_square_quantile() {
        let got = divergence_allowance(10, 500, 500, 0.001);
        let expected = 27.877_164_871_256_568 / (8.0 * std::f64::consts::LN_2 * 250.0);
        assert!((got - expected).abs() < 1e-6, "{got} vs {expected}");
        assert_eq!(divergence_allowance(1, 500, 500, 0.001), 0.0);
        assert_eq!(divergence_allowance(10, 0, 500, 0.001), 1.0);
        assert!(divergence_allowance(10, 5_000_000, 5_000_000, 0.001) < 1e-4);
    }

    /// Two samples of one distribution exceed the allowance about alpha of the time, small
    /// samples included: the chi-square approximation of the binned divergence holds.
    #[test]
    fn the_divergence_allowance_is_exceeded_at_about_its_rate() {
        let shares = [3.0, 9.0, 14.0, 20.0, 16.0, 12.0, 10.0, 8.0, 5.0, 3.0];
        let mut rng = SplitMix64::new(11);
        for (n, m) in [(60, 60), (200, 500), (2_000, 2_000)] {
            let trials = 2_000;
            let mut over = 0;
            for _ in 0..trials {
                let (a, b) = (draw(&mut rng, &shares, n), draw(&mut rng, &shares, m));
                let binned = jensen_shannon_counts(&a, &b, 10).unwrap();
                if binned.divergence > divergence_allowance(binned.bins, n, m, 0.05) {
                    over += 1;
                }
            }
            let rate = f64::from(over) / f64::from(trials);
            assert!((0.02..0.08).contains(&rate), "n {n}, m {m}: {rate}");
        }
    }

    /// The share allowance against a simulated difference of two binomial shares.
    #[test]
    fn the_share_allowance_is_exceeded_at_about_its_rate() {
        let mut rng = SplitMix64::new(12);
        let (p, n, m) = (0.2, 400u64, 900u64);
        let trials = 4_000;
        let mut over = (0, 0);
        for _ in 0..trials {
            let a = (0..n).filter(|_| rng.next_f64() < p).count() as f64;
            let b = (0..m).filter(|_| rng.next_f64() < p).count() as f64;
            let pooled = (a + b) / (n + m) as f64;
            let difference = b / m as f64 - a / n as f64;
            if difference.abs() > share_allowance(pooled, n, m, 0.05, true) {
                over.0 += 1;
            }
            if difference > share_allowance(pooled, n, m, 0.05, false) {
                over.1 += 1;
            }
        }
        for count in [over.0, over.1] {
            let rate = f64::from(count) / f64::from(trials);
            assert!((0.03..0.07).contains(&rate), "{rate}");
        }
    }

    /// Out of range: the allowance holds by simulation at small n, and shrinks with n.
    #[test]
    fn the_out_of_range_allowance_is_exceeded_at_most_at_its_rate() {
        let mut rng = SplitMix64::new(13);
        let (n, m) = (50u64, 200u64);
        let allowance = out_of_range_allowance(n, m, 0.05);
        let trials = 4_000;
        let mut over = 0;
        for _ in 0..trials {
            let before: Vec<f64> = (0..n).map(|_| rng.next_f64()).collect();
            let (low, high) = before
                .iter()
                .fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(*v), h.max(*v)));
            let outside = (0..m)
                .map(|_| rng.next_f64())
                .filter(|v| *v < low || *v > high)
                .count();
            if outside as f64 / m as f64 > allowance {
                over += 1;
            }
        }
        let rate = f64::from(over) / f64::from(trials);
        assert!(rate <= 0.05, "{rate}");
        assert!(rate > 0.005, "not needlessly loose: {rate}");
        assert!(out_of_range_allowance(100_000, 100_000, 0.001) < 0.001);
        assert_eq!(out_of_range_allowance(0, 10, 0.01), 1.0);
        // One previous value: every current value may lie outside it.
        assert_eq!(out_of_range_allowance(1, 1_000_000, 0.01), 1.0);
    }

    /// Unseen categories: a long tail of rare categories, two samples of it.
    #[test]
    fn the_unseen_allowance_is_exceeded_at_most_at_its_rate() {
        let shares: Vec<f64> = (1..=300).map(|k| 1.0 / f64::from(k)).collect();
        let mut rng = SplitMix64::new(14);
        let (n, m) = (300u64, 300u64);
        let trials = 1_000;
        let mut over = 0;
        for _ in 0..trials {
            let (a, b) = (draw(&mut rng, &shares, n), draw(&mut rng, &shares, m));
            let count = |c: u64| a.iter().filter(|x| x.1 == c).count() as u64;
            let new: u64 = a
                .iter()
                .zip(&b)
                .filter(|(x, _)| x.1 == 0)
                .map(|(_, y)| y.1)
                .sum();
            let allowance = unseen_allowance(count(1), count(2), n, m, 0.05);
            if new as f64 / m as f64 > allowance {
                over += 1;
            }
        }
        let rate = f64::from(over) / f64::from(trials);
        assert!(rate <= 0.06, "{rate}");
        assert!(unseen_allowance(0, 0, 1_000_000, 1_000_000, 0.001) < 0.001);
    }

    /// Two samples of one category distribution stay within the total variation allowance at
    /// α = 0.01 in nearly every draw, and a real move of a tenth of the rows is beyond it.
    #[test]
    fn total_variation_of_one_distribution_stays_within_its_allowance() {
        let shares = [0.5, 0.3, 0.15, 0.05];
        let mut state = 99u64;
        let mut draw = |n: usize| -> Vec<f64> {
            let mut counts = [0.0; 4];
            for _ in 0..n {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                let mut cumulative = 0.0;
                let k = shares
                    .iter()
                    .position(|s| {
                        cumulative += s;
                        u < cumulative
                    })
                    .unwrap_or(3);
                counts[k] += 1.0 / n as f64;
            }
            counts.to_vec()
        };
        let allowance = total_variation_allowance(&shares, 2000, 1500, 0.01);
        let mut beyond = 0;
        for _ in 0..200 {
            let (a, b) = (draw(2000), draw(1500));
            let tv: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).sum::<f64>() / 2.0;
            beyond += (tv > allowance) as usize;
        }
        assert!(beyond <= 2, "{beyond} of 200 beyond {allowance}");
        assert!(allowance < 0.1, "{allowance}");
        assert_eq!(total_variation_allowance(&shares, 0, 10, 0.01), 1.0);
    }
}
