//! The noise floor: how much a metric moves between reruns that differ only in their seed.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FloorMethod {
    /// max − min over the reruns.
    #[default]
    Range,
    /// The sample standard deviation (n − 1).
    Std,
    /// Half-width of the 95% confidence interval of the mean, Student t with n − 1 degrees.
    Ci95,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub range: f64,
    pub floor: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpreadError {
    #[error("needs at least 2 values to measure a spread, got {0}")]
    TooFew(usize),
    #[error("value {index} is {value}, not a finite number")]
    NotFinite { index: usize, value: f64 },
    #[error("the values run from {min} to {max}: their mean or spread overflows a float")]
    Overflow { min: f64, max: f64 },
}

pub fn spread(values: &[f64], method: FloorMethod) -> Result<Spread, SpreadError> {
    if let Some((index, value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(SpreadError::NotFinite {
            index,
            value: *value,
        });
    }
    let n = values.len();
    if n < 2 {
        return Err(SpreadError::TooFew(n));
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let std = variance.sqrt();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let floor = match method {
        FloorMethod::Range => max - min,
        FloorMethod::Std => std,
        FloorMethod::Ci95 => t_975(n - 1) * std / (n as f64).sqrt(),
    };
    // 1e308 and -1e308 are finite, their difference is not: a floor of `null` (JSON has no
    // infinity) with exit 0 would let every gate through.
    if ![mean, std, max - min, floor].iter().all(|v| v.is_finite()) {
        return Err(SpreadError::Overflow { min, max });
    }
    Ok(Spread {
        n,
        mean,
        std,
        min,
        max,
        range: max - min,
        floor,
    })
}

/// The 97.5% quantile of Student's t with `degrees` degrees of freedom.
fn t_975(degrees: usize) -> f64 {
    StudentsT::new(0.0, 1.0, degrees as f64)
        .map(|t| t.inverse_cdf(0.975))
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_spread_that_overflows_is_an_error_not_a_null_floor() {
        let err = spread(&[1e308, -1e308], FloorMethod::Range).unwrap_err();
        assert_eq!(
            err,
            SpreadError::Overflow {
                min: -1e308,
                max: 1e308
            }
        );
        assert!(spread(&[1e150, -1e150], FloorMethod::Std).is_ok());
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn three_reruns_give_a_floor_of_two_thousandths() {
        let s = spread(&[0.861, 0.863, 0.862], FloorMethod::Range).unwrap();
        assert!((s.floor - 0.002).abs() < 1e-12, "{}", s.floor);
        assert!((s.mean - 0.862).abs() < 1e-12);
        assert!((s.std - 0.001).abs() < 1e-12);
        assert_eq!((s.n, s.min, s.max), (3, 0.861, 0.863));
    }

    #[test]
    fn std_and_ci95() {
        let values = [0.861, 0.863, 0.862];
        assert!((spread(&values, FloorMethod::Std).unwrap().floor - 0.001).abs() < 1e-12);
        // t(0.975, 2) = 4.302653; half-width = 4.302653 · 0.001 / sqrt(3).
        let ci = spread(&values, FloorMethod::Ci95).unwrap().floor;
        assert!((ci - 4.302653 * 0.001 / 3f64.sqrt()).abs() < 1e-8, "{ci}");
    }

    #[test]
    fn too_few_or_non_finite_values_are_errors() {
        assert_eq!(
            spread(&[0.8], FloorMethod::Range),
            Err(SpreadError::TooFew(1))
        );
        assert!(matches!(
            spread(&[0.8, f64::NAN], FloorMethod::Range),
            Err(SpreadError::NotFinite { index: 1, .. })
        ));
    }

    proptest! {
        #[test]
        fn floor_is_shift_invariant_and_bounded(values in prop::collection::vec(-1e3f64..1e3, 2..20), shift in -1e3f64..1e3) {
            let a = spread(&values, FloorMethod::Range).unwrap();
            let shifted: Vec<f64> = values.iter().map(|v| v + shift).collect();
            let b = spread(&shifted, FloorMethod::Range).unwrap();
            prop_assert!((a.floor - b.floor).abs() < 1e-9);
            prop_assert!(a.std <= a.range + 1e-12);
            prop_assert!(a.min <= a.mean + 1e-9 && a.mean <= a.max + 1e-9);
        }
    }
}
