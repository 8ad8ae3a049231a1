//! Exact ROC AUC with ties: the Mann–Whitney U statistic over average ranks.
//!
//! Equivalently, the probability that a random positive scores above a random negative,
//! counting ties as one half. Computed in O(n log n) with integer counts, so the only rounding
//! is the final division.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AucError {
    #[error("{scores} scores but {labels} labels")]
    LengthMismatch { scores: usize, labels: usize },
    #[error("score {index} is NaN")]
    NanScore { index: usize },
    /// Not a failure of the data so much as an undefined metric: callers report null with
    /// this message as the reason.
    #[error(
        "AUC is undefined with {positives} positive and {negatives} negative labels: both classes are needed"
    )]
    OneClass { positives: usize, negatives: usize },
}

/// As many scores as labels, none of them NaN.
pub(crate) fn check_scores(scores: &[f64], labels: &[bool]) -> Result<(), AucError> {
    if scores.len() != labels.len() {
        return Err(AucError::LengthMismatch {
            scores: scores.len(),
            labels: labels.len(),
        });
    }
    match scores.iter().position(|s| s.is_nan()) {
        Some(index) => Err(AucError::NanScore { index }),
        None => Ok(()),
    }
}

/// ROC AUC of `scores` against `labels` (true = positive). ±∞ scores are fine; NaN is not.
pub fn auc(scores: &[f64], labels: &[bool]) -> Result<f64, AucError> {
    check_scores(scores, labels)?;
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives == 0 || negatives == 0 {
        return Err(AucError::OneClass {
            positives,
            negatives,
        });
    }

    let mut order: Vec<usize> = (0..scores.len()).collect();
    // total_cmp puts −0.0 just before +0.0; grouping below uses ==, so they still tie.
    order.sort_unstable_by(|&a, &b| scores[a].total_cmp(&scores[b]));

    // 2·U = Σ over tie groups of positives_in_group · (2·negatives_below + negatives_in_group):
    // each positive beats the negatives below its group and ties half of those inside it.
    let mut twice_u: u128 = 0;
    let mut negatives_below: u128 = 0;
    let mut start = 0;
    while start < order.len() {
        let score = scores[order[start]];
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| scores[i] == score)
                .count();
        let group_positives = order[start..end].iter().filter(|&&i| labels[i]).count() as u128;
        let group_negatives = (end - start) as u128 - group_positives;
        twice_u += group_positives * (2 * negatives_below + group_negatives);
        negatives_below += group_negatives;
        start = end;
    }
    Ok(twice_u as f64 / (2.0 * positives as f64 * negatives as f64))
}

/// ROC AUC of rows given as groups `(score, positives, negatives)`: every row of a group has
/// its score. The same integer sum as [`auc`] over the rows spelled out, so the same value,
/// in memory that follows the groups (a target-encoded category column: one group a category).
pub fn auc_of_groups(mut groups: Vec<(f64, u64, u64)>) -> Result<f64, AucError> {
    if let Some(index) = groups.iter().position(|g| g.0.is_nan()) {
        return Err(AucError::NanScore { index });
    }
    let positives: u64 = groups.iter().map(|g| g.1).sum();
    let negatives: u64 = groups.iter().map(|g| g.2).sum();
    if positives == 0 || negatives == 0 {
        return Err(AucError::OneClass {
            positives: positives as usize,
            negatives: negatives as usize,
        });
    }
    groups.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    let mut twice_u: u128 = 0;
    let mut negatives_below: u128 = 0;
    let mut start = 0;
    while start < groups.len() {
        let score = groups[start].0;
        let tied = groups[start..].iter().take_while(|g| g.0 == score);
        let (group_positives, group_negatives) = tied.clone().fold((0u128, 0u128), |(p, n), g| {
            (p + g.1 as u128, n + g.2 as u128)
        });
        twice_u += group_positives * (2 * negatives_below + group_negatives);
        negatives_below += group_negatives;
        start += tied.count();
    }
    Ok(twice_u as f64 / (2.0 * positives as f64 * negatives as f64))
}

/// ROC AUC of rows fed one at a time in ascending score order ([`f64::total_cmp`]): the same
/// integer sum as [`auc`], so the same value, in constant memory. The rows can come from a
/// sorter that spilled to disk, which is how a split of any size is scored within a budget.
#[derive(Debug, Clone, Default)]
pub struct SortedAuc {
    twice_u: u128,
    negatives_below: u128,
    /// The open tie group: its score and its positives and negatives.
    group: Option<(f64, u128, u128)>,
    positives: u64,
    negatives: u64,
    rows: usize,
    nan_at: Option<usize>,
}

impl SortedAuc {
    /// The next row, at or above every score fed before it.
    pub fn push(&mut self, score: f64, label: bool) {
        if score.is_nan() {
            self.nan_at.get_or_insert(self.rows);
        }
        self.rows += 1;
        if label {
            self.positives += 1;
        } else {
            self.negatives += 1;
        }
        match &mut self.group {
            // == so that −0.0 and +0.0, adjacent in total_cmp's order, tie as they do in `auc`.
            Some((at, p, n)) if *at == score => {
                *p += u128::from(label);
                *n += u128::from(!label);
            }
            _ => {
                self.close_group();
                self.group = Some((score, u128::from(label), u128::from(!label)));
            }
        }
    }

    fn close_group(&mut self) {
        if let Some((_, p, n)) = self.group.take() {
            self.twice_u += p * (2 * self.negatives_below + n);
            self.negatives_below += n;
        }
    }

    /// The AUC of every row fed.
    pub fn finish(mut self) -> Result<f64, AucError> {
        if let Some(index) = self.nan_at {
            return Err(AucError::NanScore { index });
        }
        self.close_group();
        if self.positives == 0 || self.negatives == 0 {
            return Err(AucError::OneClass {
                positives: self.positives as usize,
                negatives: self.negatives as usize,
            });
        }
        Ok(self.twice_u as f64 / (2.0 * self.positives as f64 * self.negatives as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labels(bits: &[u8]) -> Vec<bool> {
        bits.iter().map(|&b| b == 1).collect()
    }

    /// The definition, pair by pair.
    fn brute_force(scores: &[f64], labels: &[bool]) -> f64 {
        let mut wins = 0.0;
        let mut pairs = 0.0;
        for (s_pos, _) in scores.iter().zip(labels).filter(|(_, l)| **l) {
            for (s_neg, _) in scores.iter().zip(labels).filter(|(_, l)| !**l) {
                pairs += 1.0;
                wins += if s_pos > s_neg {
                    1.0
                } else if s_pos == s_neg {
                    0.5
                } else {
                    0.0
                };
            }
        }
        wins / pairs
    }

    #[test]
    fn hand_computed_values() {
        assert_eq!(
            auc(&[0.1, 0.4, 0.35, 0.8], &labels(&[0, 0, 1, 1])),
            Ok(0.75)
        );
        assert_eq!(auc(&[0.5; 4], &labels(&[0, 1, 0, 1])), Ok(0.5));
        assert_eq!(auc(&[1.0, 2.0, 3.0], &labels(&[0, 0, 1])), Ok(1.0));
        assert_eq!(auc(&[1.0, 2.0, 3.0], &labels(&[1, 0, 0])), Ok(0.0));
        // Positives 0.3, 0.5; negatives 0.3, 0.1: 0.5 + 1 + 1 + 1 wins over 4 pairs.
        assert_eq!(
            auc(&[0.3, 0.5, 0.3, 0.1], &labels(&[1, 1, 0, 0])),
            Ok(0.875)
        );
    }

    #[test]
    fn signed_zeros_tie() {
        assert_eq!(auc(&[-0.0, 0.0], &labels(&[1, 0])), Ok(0.5));
        assert_eq!(auc(&[0.0, -0.0], &labels(&[1, 0])), Ok(0.5));
    }

    #[test]
    fn infinities_rank_at_the_ends() {
        let scores = [f64::NEG_INFINITY, 0.0, f64::INFINITY];
        assert_eq!(auc(&scores, &labels(&[0, 1, 1])), Ok(1.0));
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(
            auc(&[0.1, 0.2], &[true]),
            Err(AucError::LengthMismatch {
                scores: 2,
                labels: 1
            })
        );
        assert_eq!(
            auc(&[0.1, f64::NAN], &[true, false]),
            Err(AucError::NanScore { index: 1 })
        );
        assert_eq!(
            auc(&[0.1, 0.2], &[true, true]),
            Err(AucError::OneClass {
                positives: 2,
                negatives: 0
            })
        );
        assert_eq!(
            auc(&[], &[]),
            Err(AucError::OneClass {
                positives: 0,
                negatives: 0
            })
        );
    }

    /// Small integer scores, so ties are common.
    fn scored() -> impl Strategy<Value = (Vec<f64>, Vec<bool>)> {
        proptest::collection::vec((-20i32..20, any::<bool>()), 2..200)
            .prop_map(|rows| rows.into_iter().map(|(s, l)| (f64::from(s), l)).unzip())
            .prop_filter("both classes", |(_, l): &(Vec<f64>, Vec<bool>)| {
                l.iter().any(|&x| x) && l.iter().any(|&x| !x)
            })
    }

    /// `SortedAuc` over the rows sorted by score (either label first among ties).
    fn sorted_auc(scores: &[f64], labels: &[bool], positives_first: bool) -> Result<f64, AucError> {
        let mut rows: Vec<(f64, bool)> =
            scores.iter().copied().zip(labels.iter().copied()).collect();
        rows.sort_by(|a, b| {
            a.0.total_cmp(&b.0).then(
                (a.1 == positives_first)
                    .cmp(&(b.1 == positives_first))
                    .reverse(),
            )
        });
        let mut tally = SortedAuc::default();
        for (score, label) in rows {
            tally.push(score, label);
        }
        tally.finish()
    }

    #[test]
    fn sorted_rows_give_the_hand_computed_values_and_errors() {
        assert_eq!(
            sorted_auc(&[0.3, 0.5, 0.3, 0.1], &labels(&[1, 1, 0, 0]), true),
            Ok(0.875)
        );
        assert_eq!(sorted_auc(&[-0.0, 0.0], &labels(&[1, 0]), false), Ok(0.5));
        assert_eq!(
            sorted_auc(&[0.1, 0.2], &[true, true], true),
            Err(AucError::OneClass {
                positives: 2,
                negatives: 0
            })
        );
        assert_eq!(
            SortedAuc::default().finish(),
            Err(AucError::OneClass {
                positives: 0,
                negatives: 0
            })
        );
    }

    proptest! {
        #[test]
        fn sorted_rows_give_the_same_value_as_auc_bit_for_bit((scores, labels) in scored(), first in any::<bool>()) {
            let scores: Vec<f64> = scores.iter().map(|s| s / 7.0).collect();
            prop_assert_eq!(sorted_auc(&scores, &labels, first), auc(&scores, &labels));
        }

        #[test]
        fn matches_the_pairwise_definition((scores, labels) in scored()) {
            let exact = auc(&scores, &labels).expect("both classes");
            prop_assert!((exact - brute_force(&scores, &labels)).abs() < 1e-12);
        }

        #[test]
        fn groups_give_the_value_of_their_rows_spelled_out((scores, labels) in scored()) {
            // One group per (score, row parity), so equal scores also sit in separate groups.
            let mut groups: std::collections::BTreeMap<(i64, usize), (u64, u64)> = Default::default();
            for (i, (score, label)) in scores.iter().zip(&labels).enumerate() {
                let group = groups.entry((*score as i64, i % 2)).or_default();
                if *label { group.0 += 1 } else { group.1 += 1 }
            }
            let groups = groups.into_iter().map(|((s, _), (p, n))| (s as f64, p, n)).collect();
            prop_assert_eq!(auc_of_groups(groups), auc(&scores, &labels));
        }

        #[test]
        fn negated_scores_give_the_complement((scores, labels) in scored()) {
            let negated: Vec<f64> = scores.iter().map(|s| -s).collect();
            let sum = auc(&scores, &labels).expect("both classes")
                + auc(&negated, &labels).expect("both classes");
            prop_assert!((sum - 1.0).abs() < 1e-12);
        }

        #[test]
        fn strictly_increasing_transforms_change_nothing((scores, labels) in scored()) {
            let base = auc(&scores, &labels).expect("both classes");
            // Each is strictly increasing and keeps distinct small integers distinct in f64.
            let transforms: [fn(f64) -> f64; 3] =
                [|s| s.powi(3) + s, |s| (s / 4.0).exp(), |s| 1e6 * s - 7.0];
            for transform in transforms {
                let moved: Vec<f64> = scores.iter().map(|&s| transform(s)).collect();
                prop_assert_eq!(auc(&moved, &labels).expect("both classes"), base);
            }
        }
    }
}
