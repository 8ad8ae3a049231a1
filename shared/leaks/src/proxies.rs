//! What the label-proxy check keeps of each candidate column: numbers as they are, categories
//! as counts per category, so memory follows the categories, not the rows.

use std::collections::HashMap;

use runfn_stats::auc::{AucError, auc, auc_of_groups};

/// Category cardinality beyond which a target encoding would fit noise, not signal.
pub const MAX_PROXY_CATEGORIES: usize = 1000;

/// A numeric column's values on the train split, beside their labels.
#[derive(Debug, Default)]
pub struct NumericProxy {
    values: Vec<f64>,
    labels: Vec<bool>,
}

impl NumericProxy {
    pub fn add(&mut self, value: f64, label: bool) {
        self.values.push(value);
        self.labels.push(label);
    }

    pub fn absorb(&mut self, other: NumericProxy) {
        self.values.extend(other.values);
        self.labels.extend(other.labels);
    }

    /// (AUC of the value as a score, rows).
    pub fn auc(&self) -> (Result<f64, AucError>, usize) {
        (auc(&self.values, &self.labels), self.values.len())
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
