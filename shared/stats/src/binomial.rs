//! The upper tail of the binomial distribution: how likely `k` or more successes are in `n`
//! independent trials of chance `p`. leak-check asks it of twins: how likely this many rows of a
//! later split would have a twin by chance alone.

use statrs::distribution::{Binomial, DiscreteCDF};

/// P(X ≥ k) for X ~ Binomial(n, p). `k = 0` is certain; `p = 0` makes any `k > 0` impossible and
/// `p = 1` any `k ≤ n` certain. `None` when `p` is not a probability.
pub fn at_least(k: u64, n: u64, p: f64) -> Option<f64> {
    if !(0.0..=1.0).contains(&p) {
        return None;
    }
    if k == 0 {
        return Some(1.0);
    }
    if k > n {
        return Some(0.0);
    }
    let binomial = Binomial::new(p, n).ok()?;
    // P(X >= k) = 1 - P(X <= k - 1), from the survival function to keep small tails exact.
    Some(binomial.sf(k - 1).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_match_hand_counts() {
        // Two fair coins: P(at least one head) = 3/4, P(both) = 1/4.
        assert!((at_least(1, 2, 0.5).unwrap() - 0.75).abs() < 1e-12);
        assert!((at_least(2, 2, 0.5).unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(at_least(0, 10, 0.3), Some(1.0));
        assert_eq!(at_least(1, 10, 0.0), Some(0.0));
        assert_eq!(at_least(3, 2, 0.5), Some(0.0));
        assert_eq!(at_least(1, 10, 1.5), None);
        // Far in the tail: 60 of 1000 at 2% is about 1e-13, small but not zero.
        let tail = at_least(60, 1000, 0.02).unwrap();
        assert!(tail > 0.0 && tail < 1e-9, "{tail}");
    }
}
