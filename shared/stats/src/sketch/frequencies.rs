//! Counts of string categories, exact up to a cap on distinct keys, mergeable.
//!
//! Once the cap is reached, new keys go to `other` and `truncated` is set; keys already
//! present keep counting exactly. After truncation the kept keys are the first ones seen
//! (per file) and, after a merge, the most frequent ones, so `top(k)` is then approximate:
//! a key first seen after the cap filled can be frequent and still sit in `other`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const DEFAULT_CAP: usize = 10_000;

/// BTreeMap so the stored JSON lists keys in one order everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Stored")]
pub struct Frequencies {
    cap: usize,
    counts: BTreeMap<String, u64>,
    other: u64,
    truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{distinct} distinct keys stored, above the cap of {cap}")]
pub struct OverCap {
    pub distinct: usize,
    pub cap: usize,
}

impl Default for Frequencies {
    fn default() -> Self {
        Self::new(DEFAULT_CAP)
    }
}

impl Frequencies {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            counts: BTreeMap::new(),
            other: 0,
            truncated: false,
        }
    }

    pub fn add(&mut self, key: &str) {
        self.add_n(key, 1);
    }

    pub fn add_n(&mut self, key: &str, n: u64) {
        if let Some(count) = self.counts.get_mut(key) {
            *count += n;
        } else if self.counts.len() < self.cap {
            self.counts.insert(key.to_owned(), n);
        } else {
            self.other += n;
            self.truncated = true;
        }
    }

    /// Sums counts key by key, then keeps the `cap` most frequent keys (ties: smaller key
    /// first) and folds the rest into `other`. The smaller cap of the two wins, so the result
    /// does not depend on which side is merged into which.
    pub fn merge(&mut self, other: &Frequencies) {
        for (key, n) in &other.counts {
            *self.counts.entry(key.clone()).or_insert(0) += n;
        }
        self.other += other.other;
        self.truncated |= other.truncated;
        self.cap = self.cap.min(other.cap);
        self.apply_cap();
    }

    fn apply_cap(&mut self) {
        if self.counts.len() <= self.cap {
            return;
        }
        let mut dropped: Vec<(String, u64)> =
            std::mem::take(&mut self.counts).into_iter().collect();
        dropped.sort_by(|(ka, a), (kb, b)| b.cmp(a).then_with(|| ka.cmp(kb)));
        let kept = dropped.drain(..self.cap);
        self.counts = kept.collect();
        self.other += dropped.iter().map(|(_, n)| n).sum::<u64>();
        self.truncated = true;
    }

    /// The k most frequent keys, by count descending then key ascending. `other` is not a key.
    pub fn top(&self, k: usize) -> Vec<(String, u64)> {
        let mut all: Vec<(&String, u64)> = self.counts.iter().map(|(key, n)| (key, *n)).collect();
        all.sort_by(|(ka, a), (kb, b)| b.cmp(a).then_with(|| ka.cmp(kb)));
        all.into_iter()
            .take(k)
            .map(|(key, n)| (key.clone(), n))
            .collect()
    }

    /// Every value added, `other` included.
    pub fn total(&self) -> u64 {
        self.counts.values().sum::<u64>() + self.other
    }

    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.counts
    }

    pub fn other(&self) -> u64 {
        self.other
    }

    pub fn truncated(&self) -> bool {
        self.truncated
    }

    pub fn cap(&self) -> usize {
        self.cap
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    cap: usize,
    counts: BTreeMap<String, u64>,
    other: u64,
    truncated: bool,
}

impl TryFrom<Stored> for Frequencies {
    type Error = OverCap;

    fn try_from(stored: Stored) -> Result<Self, OverCap> {
        if stored.counts.len() > stored.cap {
            return Err(OverCap {
                distinct: stored.counts.len(),
                cap: stored.cap,
            });
        }
        Ok(Self {
            cap: stored.cap,
            counts: stored.counts,
            other: stored.other,
            truncated: stored.truncated,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn of(cap: usize, keys: &[&str]) -> Frequencies {
        let mut frequencies = Frequencies::new(cap);
        for key in keys {
            frequencies.add(key);
        }
        frequencies
    }

    fn pairs(items: &[(&str, u64)]) -> Vec<(String, u64)> {
        items.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn counts_exactly_below_the_cap() {
        let f = of(10, &["b", "a", "b", "c", "b", "a"]);
        assert_eq!(f.top(10), pairs(&[("b", 3), ("a", 2), ("c", 1)]));
        assert_eq!(f.top(1), pairs(&[("b", 3)]));
        assert_eq!((f.total(), f.other(), f.truncated()), (6, 0, false));
    }

    #[test]
    fn past_the_cap_only_known_keys_keep_counting() {
        let f = of(2, &["a", "b", "c", "a", "d", "c"]);
        assert_eq!(f.top(10), pairs(&[("a", 2), ("b", 1)]));
        assert_eq!((f.other(), f.total(), f.truncated()), (3, 6, true));
    }

    #[test]
    fn ties_sort_by_key() {
        let f = of(10, &["z", "m", "a", "m", "z"]);
        assert_eq!(f.top(3), pairs(&[("m", 2), ("z", 2), ("a", 1)]));
    }

    #[test]
    fn merge_sums_and_recaps_by_count_then_key() {
        let mut left = of(3, &["a", "a", "b", "c"]);
        let right = of(3, &["d", "d", "d", "b", "c"]);
        left.merge(&right);
        assert_eq!(left.top(10), pairs(&[("d", 3), ("a", 2), ("b", 2)]));
        assert_eq!((left.other(), left.total(), left.truncated()), (2, 9, true));
    }

    #[test]
    fn merge_takes_the_smaller_cap() {
        let mut wide = of(10, &["a", "b", "c"]);
        wide.merge(&of(2, &["a"]));
        assert_eq!(wide.cap(), 2);
        assert_eq!(wide.top(10), pairs(&[("a", 2), ("b", 1)]));
        assert_eq!(wide.other(), 1);
    }

    #[test]
    fn json_is_deterministic_and_round_trips() {
        let f = of(2, &["b", "a", "c"]);
        let json = serde_json::to_string(&f).expect("serializes");
        assert_eq!(
            json,
            r#"{"cap":2,"counts":{"a":1,"b":1},"other":1,"truncated":true}"#
        );
        let back: Frequencies = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, f);
        let over = r#"{"cap":1,"counts":{"a":1,"b":1},"other":0,"truncated":false}"#;
        let err = serde_json::from_str::<Frequencies>(over).expect_err("over cap");
        assert!(err.to_string().contains("2 distinct keys"), "{err}");
    }

    proptest! {
        #[test]
        fn merge_is_commutative_and_keeps_the_total(
            a in proptest::collection::vec(0u8..20, 0..100),
            b in proptest::collection::vec(0u8..20, 0..100),
            cap in 1usize..25,
        ) {
            let build = |keys: &[u8]| {
                let mut f = Frequencies::new(cap);
                for key in keys {
                    f.add(&key.to_string());
                }
                f
            };
            let (fa, fb) = (build(&a), build(&b));
            let mut ab = fa.clone();
            ab.merge(&fb);
            let mut ba = fb.clone();
            ba.merge(&fa);
            prop_assert_eq!(&ab, &ba);
            prop_assert_eq!(ab.total(), (a.len() + b.len()) as u64);
            prop_assert!(ab.counts().len() <= cap);
        }

        #[test]
        fn without_truncation_counts_are_exact(keys in proptest::collection::vec(0u8..20, 0..200)) {
            let mut f = Frequencies::new(20);
            for key in &keys {
                f.add(&key.to_string());
            }
            prop_assert!(!f.truncated());
            for (key, n) in f.counts() {
                let expected = keys.iter().filter(|k| k.to_string() == *key).count() as u64;
                prop_assert_eq!(*n, expected);
            }
        }
    }
}
