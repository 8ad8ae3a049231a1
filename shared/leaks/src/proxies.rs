//! What the label-proxy check keeps of each candidate column: numbers as they are, categories
//! as counts per category, so memory follows the categories, not the rows.

use std::collections::HashMap;

use runfn_stats::auc::{AucError, auc, auc_of_groups};

/// Category cardinality beyond which a target encoding would fit noise, not signal.
pub const MAX_PROXY_CATEGORIES: usize = 1000;

/// Distinct values a numeric column is counted by before its values are kept one by one.
const MAX_NUMERIC_GROUPS: usize = 1 << 16;

/// A numeric column on the train split: (positives, negatives) per distinct value while there
/// are few (counts, ages, ratings: memory that follows the values, not the rows), else every
/// value beside its label. The AUC is the same either way.
#[derive(Debug)]
pub struct NumericProxy {
    /// Value bits -> (positives, negatives); `None` once there were too many values.
    groups: Option<HashMap<u64, (u64, u64)>>,
    values: Vec<f64>,
    labels: Vec<bool>,
}

impl Default for NumericProxy {
    fn default() -> Self {
        NumericProxy {
            groups: Some(HashMap::new()),
            values: Vec::new(),
            labels: Vec::new(),
        }
    }
}

impl NumericProxy {
    pub fn add(&mut self, value: f64, label: bool) {
        match &mut self.groups {
            Some(groups) => {
                let group = groups.entry(value.to_bits()).or_default();
                if label {
                    group.0 += 1;
                } else {
                    group.1 += 1;
                }
                if groups.len() > MAX_NUMERIC_GROUPS {
                    self.ungroup();
                }
            }
            None => {
                self.values.push(value);
                self.labels.push(label);
            }
        }
    }

    /// Spells the groups out as values, one per row.
    fn ungroup(&mut self) {
        for (bits, (positives, negatives)) in self.groups.take().unwrap_or_default() {
            let value = f64::from_bits(bits);
            for (label, n) in [(true, positives), (false, negatives)] {
                self.values.extend(std::iter::repeat_n(value, n as usize));
                self.labels.extend(std::iter::repeat_n(label, n as usize));
            }
        }
    }

    pub fn absorb(&mut self, mut other: NumericProxy) {
        if let (Some(groups), Some(more)) = (&mut self.groups, &other.groups) {
            for (bits, (positives, negatives)) in more {
                let group = groups.entry(*bits).or_default();
                group.0 += positives;
                group.1 += negatives;
            }
            if groups.len() > MAX_NUMERIC_GROUPS {
                self.ungroup();
            }
            return;
        }
        self.ungroup();
        other.ungroup();
        self.values.extend(other.values);
        self.labels.extend(other.labels);
    }

    /// (AUC of the value as a score, rows).
    pub fn auc(&self) -> (Result<f64, AucError>, usize) {
        match &self.groups {
            Some(groups) => {
                let groups: Vec<(f64, u64, u64)> = groups
                    .iter()
                    .map(|(bits, &(positives, negatives))| {
                        (f64::from_bits(*bits), positives, negatives)
                    })
                    .collect();
                let rows = groups.iter().map(|g| g.1 + g.2).sum::<u64>() as usize;
                (auc_of_groups(groups), rows)
            }
            None => (auc(&self.values, &self.labels), self.values.len()),
        }
    }
}

/// A categorical column on the train split: (rows, positives) per category, until there are
/// too many categories for a target encoding to mean anything.
#[derive(Debug, Default)]
pub struct CategoryProxy {
    counts: HashMap<Box<str>, (u64, u64)>,
    too_many: bool,
}

impl CategoryProxy {
    pub fn add(&mut self, category: &str, label: bool) {
        if self.too_many {
            return;
        }
        match self.counts.get_mut(category) {
            Some(count) => {
                count.0 += 1;
                count.1 += label as u64;
            }
            None => {
                self.counts.insert(category.into(), (1, label as u64));
                self.check_size();
            }
        }
    }

    pub fn absorb(&mut self, other: CategoryProxy) {
        self.too_many |= other.too_many;
        if self.too_many {
            self.counts = HashMap::new();
            return;
        }
        for (category, (rows, positives)) in other.counts {
            let count = self.counts.entry(category).or_default();
            count.0 += rows;
            count.1 += positives;
        }
        self.check_size();
    }

    fn check_size(&mut self) {
        if self.counts.len() > MAX_PROXY_CATEGORIES {
            self.too_many = true;
            self.counts = HashMap::new();
        }
    }

    /// AUC of each row's category replaced by its label rate (the target encoding), and the
    /// rows; `None` for high-cardinality columns such as ids.
    pub fn auc(&self) -> Option<(Result<f64, AucError>, usize)> {
        if self.too_many {
            return None;
        }
        let groups: Vec<(f64, u64, u64)> = self
            .counts
            .values()
            .map(|&(rows, positives)| (positives as f64 / rows as f64, positives, rows - positives))
            .collect();
        let rows = self.counts.values().map(|(rows, _)| rows).sum::<u64>() as usize;
        Some((auc_of_groups(groups), rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_counted_by_value_or_kept_one_by_one_give_the_same_auc() {
        // A few values (grouped), many (kept one by one), and the two absorbed both ways.
        let rows = |distinct: u64| -> Vec<(f64, bool)> {
            (0..3 * distinct)
                .map(|i| ((i % distinct) as f64 - 0.5 * (i % 2) as f64, i % 3 == 0))
                .chain([(-0.0, true), (0.0, false)])
                .collect()
        };
        for distinct in [5, MAX_NUMERIC_GROUPS as u64 + 10] {
            let rows = rows(distinct);
            let (scores, labels): (Vec<f64>, Vec<bool>) = rows.iter().copied().unzip();
            let expected = auc(&scores, &labels).unwrap();
            let mut whole = NumericProxy::default();
            let (mut first, mut second) = (NumericProxy::default(), NumericProxy::default());
            for (i, &(value, label)) in rows.iter().enumerate() {
                whole.add(value, label);
                if i < 7 { &mut first } else { &mut second }.add(value, label);
            }
            assert_eq!(whole.groups.is_some(), distinct == 5);
            let mut reversed = NumericProxy::default();
            for &(value, label) in &rows[7..] {
                reversed.add(value, label);
            }
            let mut head = NumericProxy::default();
            for &(value, label) in &rows[..7] {
                head.add(value, label);
            }
            reversed.absorb(head);
            first.absorb(second);
            for proxy in [whole, first, reversed] {
                let (value, n) = proxy.auc();
                assert_eq!(value.unwrap(), expected);
                assert_eq!(n, rows.len());
            }
        }
    }

    #[test]
    fn categories_are_scored_by_their_label_rate_unless_there_are_too_many() {
        let rows = [
            ("a", true),
            ("a", false),
            ("b", true),
            ("a", true),
            ("c", false),
        ];
        let mut whole = CategoryProxy::default();
        let (mut first, mut second) = (CategoryProxy::default(), CategoryProxy::default());
        for (i, (category, label)) in rows.iter().enumerate() {
            whole.add(category, *label);
            if i < 2 { &mut first } else { &mut second }.add(category, *label);
        }
        first.absorb(second);
        // The same rows encoded one by one: a -> 2/3, b -> 1, c -> 0.
        let scores = [2.0 / 3.0, 2.0 / 3.0, 1.0, 2.0 / 3.0, 0.0];
        let labels: Vec<bool> = rows.iter().map(|(_, l)| *l).collect();
        let expected = auc(&scores, &labels).unwrap();
        for proxy in [whole, first] {
            let (value, n) = proxy.auc().unwrap();
            assert_eq!(value.unwrap(), expected);
            assert_eq!(n, 5);
        }

        let mut ids = CategoryProxy::default();
        for i in 0..MAX_PROXY_CATEGORIES {
            ids.add(&format!("id{i}"), i % 2 == 0);
        }
        assert!(ids.auc().is_some());
        let mut one_more = CategoryProxy::default();
        one_more.add("another", true);
        ids.absorb(one_more);
        assert!(ids.auc().is_none());
    }
}
