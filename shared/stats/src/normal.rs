//! The standard normal distribution's CDF and quantile, for z-tests and power.

use statrs::distribution::{ContinuousCDF, Normal};

fn standard() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal is valid")
}

/// P(Z <= z).
pub fn cdf(z: f64) -> f64 {
    standard().cdf(z)
}

/// The z with P(Z <= z) = p, for p in (0, 1).
pub fn quantile(p: f64) -> f64 {
    standard().inverse_cdf(p)
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_values() {
        assert!((super::quantile(0.95) - 1.6448536269514722).abs() < 1e-9);
        assert!((super::quantile(0.8) - 0.8416212335729143).abs() < 1e-9);
        assert!((super::cdf(-1.959963984540054) - 0.025).abs() < 1e-9);
    }
}
