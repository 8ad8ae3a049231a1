//! Holm's step-down correction: p-values of a family of tests adjusted so that rejecting where
//! the adjusted value is below α keeps the chance of any false rejection in the family at most α,
//! whatever the tests' dependence.

/// The adjusted p-values, in the order given. NaN stays NaN and takes no part in the family.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p_values.len())
        .filter(|&i| !p_values[i].is_nan())
        .collect();
    order.sort_by(|&i, &j| p_values[i].total_cmp(&p_values[j]));
    let family = order.len();
    let mut adjusted = vec![f64::NAN; p_values.len()];
    let mut running = 0.0f64;
    for (step, &i) in order.iter().enumerate() {
        running = running.max(((family - step) as f64 * p_values[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook example: statsmodels' multipletests(method="holm") gives these.
    #[test]
    fn matches_the_step_down_definition() {
        let p = [0.01, 0.04, 0.03, 0.005];
        let adjusted = holm(&p);
        let expected = [0.03, 0.06, 0.06, 0.02];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{adjusted:?}");
        }
        // 0.8 first, times 2 (capped at 1); 0.9 then keeps the running maximum.
        assert_eq!(holm(&[0.9, 0.8]), [1.0, 1.0]);
        let with_nan = holm(&[f64::NAN, 0.2]);
        assert!(with_nan[0].is_nan());
        assert_eq!(with_nan[1], 0.2);
    }
}
