//! What the label-proxy check keeps of each candidate column: numbers counted by value while
//! there are few, else sorted on disk; categories as counts per category. Memory follows the
//! categories and the budget, not the rows.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use runfn_stats::auc::{AucError, auc_of_groups};

use runfn_data::sorted_runs::RunFile;
use runfn_data::spill_sort::{Record, SharedSorter, Sorted, u64_at};
use serde::{Deserialize, Serialize};

/// Category cardinality beyond which a target encoding would fit noise, not signal.
pub const MAX_PROXY_CATEGORIES: usize = 1000;

/// Distinct values a numeric column is counted by before its values go to the sorter.
const MAX_NUMERIC_GROUPS: usize = 1 << 16;

/// Values a file's reader gathers before taking the shared sorter's lock.
const LOCAL_VALUES: usize = 1 << 13;

/// A value (as a key that sorts as `f64::total_cmp` does) with its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Scored {
    key: u64,
    positives: u64,
    negatives: u64,
}

impl Scored {
    fn new(value: f64, positives: u64, negatives: u64) -> Scored {
        let bits = value.to_bits();
        let key = if bits >> 63 == 1 {
            !bits
        } else {
            bits | 1 << 63
        };
        Scored {
            key,
            positives,
            negatives,
        }
    }

    fn value(&self) -> f64 {
        let bits = if self.key >> 63 == 1 {
            self.key & !(1 << 63)
        } else {
            !self.key
        };
        f64::from_bits(bits)
    }
}

impl Record for Scored {
    const BYTES: usize = 24;

    fn write_to(&self, out: &mut Vec<u8>) {
        for field in [self.key, self.positives, self.negatives] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }

    fn read_from(bytes: &[u8]) -> Scored {
        Scored {
            key: u64_at(bytes, 0),
            positives: u64_at(bytes, 8),
            negatives: u64_at(bytes, 16),
        }
    }
}

/// Where one numeric column's values go once there are too many to count by value, shared by
/// the reading threads.
pub struct ProxySink {
    sorter: SharedSorter<Scored>,
    root: PathBuf,
}

impl ProxySink {
    pub fn new(root: &Path, budget: u64) -> io::Result<ProxySink> {
        Ok(ProxySink {
            sorter: SharedSorter::new(root, budget)?,
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every value handed over, sorted: what a part writes as its run.
    pub(crate) fn into_sorted(self) -> io::Result<Sorted<Scored>> {
        self.sorter.sorted()
    }

    /// Adds a part's run, merged with what is handed over here.
    pub fn add_run(&self, run: RunFile) -> io::Result<()> {
        self.sorter.add_run(run)
    }
}

/// A numeric column on the train split: (positives, negatives) per distinct value while there
/// are few (counts, ages, ratings), else every value with its label, sent to the column's
/// sorter. The AUC is the same either way, exactly (it counts pairs in integers).
/// A part keeps the groups (or that there were too many: its values are in its run).
#[derive(Debug, Serialize, Deserialize)]
pub struct NumericProxy {
    /// Value bits -> (positives, negatives); `None` once there were too many values.
    groups: Option<HashMap<u64, (u64, u64)>>,
    #[serde(skip)]
    local: Vec<Scored>,
}

impl Default for NumericProxy {
    fn default() -> Self {
        NumericProxy {
            groups: Some(HashMap::new()),
            local: Vec::new(),
        }
    }
}

impl NumericProxy {
    pub fn add(&mut self, value: f64, label: bool, sink: &ProxySink) -> io::Result<()> {
        let (positives, negatives) = if label { (1, 0) } else { (0, 1) };
        match &mut self.groups {
            Some(groups) => {
                let group = groups.entry(value.to_bits()).or_default();
                group.0 += positives;
                group.1 += negatives;
                if groups.len() > MAX_NUMERIC_GROUPS {
                    self.ungroup(sink)?;
                }
            }
            None => {
                self.local.push(Scored::new(value, positives, negatives));
                if self.local.len() >= LOCAL_VALUES {
                    self.hand_over(sink)?;
                }
            }
        }
        Ok(())
    }

    /// Sends the groups to the sorter; from now on every value goes there.
    fn ungroup(&mut self, sink: &ProxySink) -> io::Result<()> {
        if let Some(groups) = self.groups.take() {
            self.local.extend(
                groups
                    .into_iter()
                    .map(|(bits, (p, n))| Scored::new(f64::from_bits(bits), p, n)),
            );
        }
        self.hand_over(sink)
    }

    fn hand_over(&mut self, sink: &ProxySink) -> io::Result<()> {
        sink.sorter.hand_over(&mut self.local)
    }

    /// Sends what is gathered to the sink, before a part writes the sink's run.
    pub fn flush(&mut self, sink: &ProxySink) -> io::Result<()> {
        self.hand_over(sink)
    }

    /// Adds a later file's values.
    pub fn absorb(&mut self, mut other: NumericProxy, sink: &ProxySink) -> io::Result<()> {
        if let (Some(groups), Some(more)) = (&mut self.groups, &other.groups) {
            for (bits, (positives, negatives)) in more {
                let group = groups.entry(*bits).or_default();
                group.0 += positives;
                group.1 += negatives;
            }
            if groups.len() > MAX_NUMERIC_GROUPS {
                self.ungroup(sink)?;
            }
            return Ok(());
        }
        self.ungroup(sink)?;
        other.ungroup(sink)
    }

    /// (AUC of the value as a score, rows), every file absorbed.
    pub fn auc(mut self, sink: ProxySink) -> io::Result<(Result<f64, AucError>, usize)> {
        if let Some(groups) = &self.groups {
            let groups: Vec<(f64, u64, u64)> = groups
                .iter()
                .map(|(bits, &(positives, negatives))| {
                    (f64::from_bits(*bits), positives, negatives)
                })
                .collect();
            let rows = groups.iter().map(|g| g.1 + g.2).sum::<u64>() as usize;
            return Ok((auc_of_groups(groups), rows));
        }
        self.hand_over(&sink)?;
        let sorted = sink.sorter.sorted()?;
        // What `auc_of_groups` does, over the values as they come in order: ties (equal
        // values, -0 with +0) count half.
        let (mut twice_u, mut negatives_below) = (0u128, 0u128);
        let (mut positives, mut negatives) = (0u64, 0u64);
        let mut tie: Option<(f64, u128, u128)> = None;
        for scored in sorted {
            let scored = scored?;
            let value = scored.value();
            positives += scored.positives;
            negatives += scored.negatives;
            match &mut tie {
                Some((score, p, n)) if *score == value => {
                    *p += u128::from(scored.positives);
                    *n += u128::from(scored.negatives);
                }
                _ => {
                    if let Some((_, p, n)) = tie {
                        twice_u += p * (2 * negatives_below + n);
                        negatives_below += n;
                    }
                    tie = Some((
                        value,
                        u128::from(scored.positives),
                        u128::from(scored.negatives),
                    ));
                }
            }
        }
        if let Some((_, p, n)) = tie {
            twice_u += p * (2 * negatives_below + n);
        }
        let rows = (positives + negatives) as usize;
        if positives == 0 || negatives == 0 {
            return Ok((
                Err(AucError::OneClass {
                    positives: positives as usize,
                    negatives: negatives as usize,
                }),
                rows,
            ));
        }
        Ok((
            Ok(twice_u as f64 / (2.0 * positives as f64 * negatives as f64)),
            rows,
        ))
    }
}

/// A categorical column on the train split: (rows, positives) per category, until there are
/// too many categories for a target encoding to mean anything.
#[derive(Debug, Default, Serialize, Deserialize)]
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
    use runfn_stats::auc::auc;

    use super::*;

    /// A few values (counted by value) and many (sorted, held or spilled), and the files
    /// absorbed both ways: the AUC of every value one by one, exactly.
    #[test]
    fn numbers_counted_by_value_or_sorted_give_the_same_auc() {
        let rows = |distinct: u64| -> Vec<(f64, bool)> {
            (0..3 * distinct)
                .map(|i| ((i % distinct) as f64 - 0.5 * (i % 2) as f64, i % 3 == 0))
                .chain([(-0.0, true), (0.0, false), (-7.5, true)])
                .collect()
        };
        let root = tempfile::tempdir().unwrap();
        for (distinct, budget) in [
            (5, 1 << 20),
            (MAX_NUMERIC_GROUPS as u64 + 10, 1 << 30),
            (MAX_NUMERIC_GROUPS as u64 + 10, 1 << 12),
        ] {
            let rows = rows(distinct);
            let (scores, labels): (Vec<f64>, Vec<bool>) = rows.iter().copied().unzip();
            let expected = auc(&scores, &labels).unwrap();
            for split_at in [0, 7, rows.len() - 7] {
                let sink = ProxySink::new(root.path(), budget).unwrap();
                let (mut first, mut second) = (NumericProxy::default(), NumericProxy::default());
                for (i, &(value, label)) in rows.iter().enumerate() {
                    if i < split_at {
                        &mut first
                    } else {
                        &mut second
                    }
                    .add(value, label, &sink)
                    .unwrap();
                }
                first.absorb(second, &sink).unwrap();
                assert_eq!(first.groups.is_some(), distinct == 5);
                let (value, n) = first.auc(sink).unwrap();
                assert_eq!(
                    value.unwrap(),
                    expected,
                    "{distinct} values, budget {budget}"
                );
                assert_eq!(n, rows.len());
            }
        }
        let sink = ProxySink::new(root.path(), 1 << 12).unwrap();
        let mut one_class = NumericProxy::default();
        for i in 0..(MAX_NUMERIC_GROUPS as u64 + 10) {
            one_class.add(i as f64, true, &sink).unwrap();
        }
        assert!(matches!(
            one_class.auc(sink).unwrap().0,
            Err(AucError::OneClass { .. })
        ));
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
