//! Whether one sample's variance is larger than another's beyond what their sizes allow: the
//! one-sided F-test on the ratio of two sample variances (normal samples), as used to tell a
//! candidate whose training seeds spread far more than the serving model's.

use statrs::distribution::{ContinuousCDF, FisherSnedecor};

/// The ratio `F = var_a / var_b` and the one-sided p-value of a ratio this large or larger when
/// the two variances are equal, with `n_a - 1` and `n_b - 1` degrees of freedom. `None` when a
/// sample has fewer than two values or a variance is not a finite non-negative number. A zero
/// `var_b` against a positive `var_a` is an infinite ratio, p 0; two zeros are no evidence, p 1.
pub fn larger_variance(var_a: f64, n_a: usize, var_b: f64, n_b: usize) -> Option<(f64, f64)> {
    if n_a < 2 || n_b < 2 || !(var_a.is_finite() && var_b.is_finite()) || var_a < 0.0 || var_b < 0.0
    {
        return None;
    }
    if var_b == 0.0 {
        return Some(if var_a == 0.0 {
            (1.0, 1.0)
        } else {
            (f64::INFINITY, 0.0)
        });
    }
    let ratio = var_a / var_b;
    let f = FisherSnedecor::new((n_a - 1) as f64, (n_b - 1) as f64).ok()?;
    Some((ratio, f.sf(ratio)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_f_distributions_tail() {
        // F(2, 2): P(F > x) = 1 / (1 + x).
        let (ratio, p) = larger_variance(0.073f64.powi(2), 3, 0.01f64.powi(2), 3).unwrap();
        assert!((ratio - 53.29).abs() < 1e-9);
        assert!((p - 1.0 / (1.0 + ratio)).abs() < 1e-9, "{p}");
        // Equal spreads are no evidence either way.
        let (_, p) = larger_variance(0.01, 5, 0.01, 5).unwrap();
        assert!((p - 0.5).abs() < 1e-9);
        assert_eq!(larger_variance(0.01, 1, 0.01, 5), None);
        assert_eq!(larger_variance(0.01, 3, 0.0, 3), Some((f64::INFINITY, 0.0)));
        assert_eq!(larger_variance(0.0, 3, 0.0, 3), Some((1.0, 1.0)));
        assert_eq!(larger_variance(f64::NAN, 3, 0.1, 3), None);
    }
}
