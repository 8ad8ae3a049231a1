//! The one percentile of the tools: linear interpolation between the closest ranks (numpy's
//! default), so a report's quartiles, a bootstrap interval and a median agree with numpy.

/// The `q` quantile (0 to 1) of `sorted` (ascending); 0 for no values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
            sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
        }
    }
}

/// The median of `values` (any order).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    percentile(&sorted, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_numpy() {
        // numpy.percentile([1, 2, 3, 4, 10], [25, 50, 75]) == [2, 3, 4]
        let a = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(
            [0.25, 0.5, 0.75].map(|q| percentile(&a, q)),
            [2.0, 3.0, 4.0]
        );
        // numpy.percentile([1, 2], [25, 50, 75]) == [1.25, 1.5, 1.75]
        assert_eq!(
            [0.25, 0.5, 0.75].map(|q| percentile(&[1.0, 2.0], q)),
            [1.25, 1.5, 1.75]
        );
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }
}
