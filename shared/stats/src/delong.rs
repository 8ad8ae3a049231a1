//! DeLong's variance of the difference between two correlated ROC AUCs, scored on the same rows.
//!
//! DeLong, DeLong & Clarke-Pearson (1988), computed with midranks as Sun & Xu (2014) do, so the
//! cost is three sorts: O(n log n). Each positive's and each negative's "placement" (its share of
//! the other class it beats, ties half) is found from its rank among all rows minus its rank
//! within its own class; the covariance of those placements across the two models gives the
//! variance of the difference.

use crate::auc::{AucError, check_scores};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedAuc {
    /// AUC of the first scores (the candidate).
    pub a: f64,
    /// AUC of the second scores (the baseline).
    pub b: f64,
    /// Variance of `a − b` over test sets drawn like this one.
    pub variance: f64,
    pub positives: usize,
    pub negatives: usize,
}

impl PairedAuc {
    pub fn delta(&self) -> f64 {
        self.a - self.b
    }
}

/// DeLong's estimate for `a` and `b` scored on the same rows against `labels`. Needs at least
/// two rows of each class (one gives no spread to estimate).
pub fn paired_auc(a: &[f64], b: &[f64], labels: &[bool]) -> Result<PairedAuc, AucError> {
    check_scores(a, labels)?;
    check_scores(b, labels)?;
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives < 2 || negatives < 2 {
        return Err(AucError::OneClass {
            positives,
            negatives,
        });
    }
    let (m, n) = (positives as f64, negatives as f64);
    let placements = |scores: &[f64]| {
        let pos: Vec<f64> = select(scores, labels, true);
        let neg: Vec<f64> = select(scores, labels, false);
        let all = midranks(scores);
        let (pos_ranks, neg_ranks) = (midranks(&pos), midranks(&neg));
        let all_pos = select(&all, labels, true);
        let all_neg = select(&all, labels, false);
        // A positive's placement: the share of negatives below it (ties half).
        let v10: Vec<f64> = all_pos
            .iter()
            .zip(&pos_ranks)
            .map(|(z, x)| (z - x) / n)
            .collect();
        // A negative's: the share of positives above it.
        let v01: Vec<f64> = all_neg
            .iter()
            .zip(&neg_ranks)
            .map(|(z, y)| 1.0 - (z - y) / m)
            .collect();
        (v10, v01)
    };
    let (a10, a01) = placements(a);
    let (b10, b01) = placements(b);
    let auc_a = mean(&a10);
    let auc_b = mean(&b10);
    // var(A − B) = var(A) + var(B) − 2 cov(A, B), each from the positives' and the negatives'
    // placements; the difference of placements carries all three terms at once.
    let d10: Vec<f64> = a10.iter().zip(&b10).map(|(x, y)| x - y).collect();
    let d01: Vec<f64> = a01.iter().zip(&b01).map(|(x, y)| x - y).collect();
    let variance = sample_variance(&d10) / m + sample_variance(&d01) / n;
    Ok(PairedAuc {
        a: auc_a,
        b: auc_b,
        variance: variance.max(0.0),
        positives,
        negatives,
    })
}

fn select(values: &[f64], labels: &[bool], class: bool) -> Vec<f64> {
    values
        .iter()
        .zip(labels)
        .filter(|(_, l)| **l == class)
        .map(|(v, _)| *v)
        .collect()
}

/// 1-based ranks, tied values sharing the mean of their ranks.
fn midranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<u32> = (0..values.len() as u32).collect();
    order.sort_unstable_by(|&i, &j| values[i as usize].total_cmp(&values[j as usize]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let value = values[order[start] as usize];
        let mut end = start + 1;
        while end < order.len() && values[order[end] as usize] == value {
            end += 1;
        }
        // Ranks start..end (0-based) → mean 1-based rank.
        let rank = (start + end + 1) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i as usize] = rank;
        }
        start = end;
    }
    ranks
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn sample_variance(values: &[f64]) -> f64 {
    let mu = mean(values);
    values.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / (values.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// DeLong's variance from its definition: the pairwise kernel, O(m·n).
    fn brute_force(a: &[f64], b: &[f64], labels: &[bool]) -> (f64, f64, f64) {
        let psi = |x: f64, y: f64| {
            if x > y {
                1.0
            } else if x == y {
                0.5
            } else {
                0.0
            }
        };
        let pos: Vec<usize> = (0..labels.len()).filter(|&i| labels[i]).collect();
        let neg: Vec<usize> = (0..labels.len()).filter(|&i| !labels[i]).collect();
        let (m, n) = (pos.len() as f64, neg.len() as f64);
        let comps = |s: &[f64]| {
            let v10: Vec<f64> = pos
                .iter()
                .map(|&i| neg.iter().map(|&j| psi(s[i], s[j])).sum::<f64>() / n)
                .collect();
            let v01: Vec<f64> = neg
                .iter()
                .map(|&j| pos.iter().map(|&i| psi(s[i], s[j])).sum::<f64>() / m)
                .collect();
            (v10, v01)
        };
        let ((a10, a01), (b10, b01)) = (comps(a), comps(b));
        let cov = |x: &[f64], y: &[f64]| {
            let (mx, my) = (mean(x), mean(y));
            x.iter()
                .zip(y)
                .map(|(p, q)| (p - mx) * (q - my))
                .sum::<f64>()
                / (x.len() - 1) as f64
        };
        let var_a = cov(&a10, &a10) / m + cov(&a01, &a01) / n;
        let var_b = cov(&b10, &b10) / m + cov(&b01, &b01) / n;
        let cov_ab = cov(&a10, &b10) / m + cov(&a01, &b01) / n;
        (mean(&a10), mean(&b10), var_a + var_b - 2.0 * cov_ab)
    }

    #[test]
    fn a_worked_case() {
        let labels = [true, true, true, false, false, false, false];
        let a = [0.9, 0.8, 0.3, 0.4, 0.2, 0.1, 0.3];
        let b = [0.7, 0.6, 0.5, 0.5, 0.6, 0.2, 0.1];
        let paired = paired_auc(&a, &b, &labels).unwrap();
        let (auc_a, auc_b, var) = brute_force(&a, &b, &labels);
        assert!((paired.a - auc_a).abs() < 1e-12);
        assert!((paired.b - auc_b).abs() < 1e-12);
        assert!((paired.variance - var).abs() < 1e-12, "{paired:?} vs {var}");
        assert_eq!(paired.a, crate::auc::auc(&a, &labels).unwrap());
    }

    #[test]
    fn the_same_scores_have_no_variance_and_one_class_is_undefined() {
        let labels = [true, false, true, false];
        let s = [0.1, 0.2, 0.7, 0.3];
        assert_eq!(paired_auc(&s, &s, &labels).unwrap().variance, 0.0);
        assert!(matches!(
            paired_auc(&s, &s, &[true, false, false, false]),
            Err(AucError::OneClass { positives: 1, .. })
        ));
        assert!(matches!(
            paired_auc(&[0.1, f64::NAN], &[0.1, 0.2], &[true, false]),
            Err(AucError::NanScore { index: 1 })
        ));
    }

    proptest! {
        #[test]
        fn matches_the_pairwise_definition(
            rows in proptest::collection::vec((0u8..6, 0u8..6, any::<bool>()), 4..60)
        ) {
            // Few distinct scores, so ties are common.
            let a: Vec<f64> = rows.iter().map(|r| r.0 as f64 / 5.0).collect();
            let b: Vec<f64> = rows.iter().map(|r| r.1 as f64 / 5.0).collect();
            let labels: Vec<bool> = rows.iter().map(|r| r.2).collect();
            let positives = labels.iter().filter(|&&l| l).count();
            prop_assume!(positives >= 2 && labels.len() - positives >= 2);
            let paired = paired_auc(&a, &b, &labels).unwrap();
            let (auc_a, auc_b, var) = brute_force(&a, &b, &labels);
            prop_assert!((paired.a - auc_a).abs() < 1e-12);
            prop_assert!((paired.b - auc_b).abs() < 1e-12);
            prop_assert!((paired.variance - var.max(0.0)).abs() < 1e-12);
        }
    }
}
