//! Counts of string categories, exact up to a cap on distinct keys, mergeable.
//!
//! A column with more distinct values than the cap (ids, free text, timestamps as text) gives
//! up: its counts are dropped, `truncated` is set and `other` keeps the number of values, so the
//! distinct count is left to HyperLogLog. Exact-or-nothing makes the result independent of how
//! the data was cut: a part over the cap means the whole is over it, and parts under it sum
//! exactly. (Keeping the first keys seen, as an earlier version did, made the kept keys depend on
//! the file order and cost a map lookup per value of every id for a top list nobody reads.)

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
        if self.truncated {
            self.other += n;
        } else if let Some(count) = self.counts.get_mut(key) {
            *count += n;
        } else if self.counts.len() < self.cap {
            self.counts.insert(key.to_owned(), n);
        } else {
            self.give_up();
            self.other += n;
        }
    }

    /// Counts `n` values without looking at them; only for a sketch that has given up, whose
    /// caller can then skip reading the values.
    pub fn add_uncounted(&mut self, n: u64) {
        // Once per batch, not per value: checked in every build.
        assert!(self.truncated, "only a sketch that gave up skips values");
        self.other += n;
    }

    /// Sums counts key by key; over the cap (the smaller of the two, so the result does not
    /// depend on which side is merged into which), or with either side given up, gives up.
    pub fn merge(&mut self, other: &Frequencies) {
        self.cap = self.cap.min(other.cap);
        if other.truncated {
            self.give_up();
        }
        if self.truncated {
            self.other += other.total();
            return;
        }
        for (key, n) in &other.counts {
            *self.counts.entry(key.clone()).or_insert(0) += n;
        }
        self.other += other.other;
        if self.counts.len() > self.cap {
            self.give_up();
        }
    }

    /// Drops the counts for good; for a caller that saw more than `cap` distinct keys in one
    /// go, which proves the whole column is over the cap.
    pub fn give_up(&mut self) {
        self.other = self.total();
        self.counts.clear();
        self.truncated = true;
    }

    /// The k most frequent keys, by count descending then key ascending; none once given up.
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
        let mut frequencies = Self {
            cap: stored.cap,
            counts: stored.counts,
            other: stored.other,
            truncated: false,
        };
        // A profile written before sketches gave up kept some keys past the cap; read it as
        // one that gave up, so merging it gives what merging a new one would.
        if stored.truncated {
            frequencies.give_up();
        }
        Ok(frequencies)
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
    fn past_the_cap_it_gives_up_and_only_counts_values() {
        let f = of(2, &["a", "b", "a", "c", "a", "d"]);
        assert!(f.truncated());
        assert!(f.counts().is_empty() && f.top(10).is_empty());
        assert_eq!((f.other(), f.total()), (6, 6));
        let mut at_cap = of(2, &["a", "b", "a", "b"]);
        assert!(!at_cap.truncated(), "the cap itself is still exact");
        at_cap.add_n("a", 3);
        assert_eq!(at_cap.top(10), pairs(&[("a", 5), ("b", 2)]));
    }

    #[test]
    fn ties_sort_by_key() {
        let f = of(10, &["z", "m", "a", "m", "z"]);
        assert_eq!(f.top(3), pairs(&[("m", 2), ("z", 2), ("a", 1)]));
    }

    #[test]
    fn merge_sums_and_gives_up_over_the_cap() {
        let mut left = of(3, &["a", "a", "b"]);
        left.merge(&of(3, &["b", "c", "c"]));
        assert_eq!(left.top(10), pairs(&[("a", 2), ("b", 2), ("c", 2)]));
        assert!(!left.truncated());
        left.merge(&of(3, &["d"]));
        assert!(left.truncated() && left.counts().is_empty());
        assert_eq!(left.total(), 7);
    }

    #[test]
    fn a_side_that_gave_up_makes_the_merge_give_up_either_way() {
        let (small, gave_up) = (of(10, &["a", "b"]), of(2, &["x", "y", "z"]));
        let mut ab = small.clone();
        ab.merge(&gave_up);
        let mut ba = gave_up.clone();
        ba.merge(&small);
        assert_eq!(ab, ba);
        assert!(ab.truncated());
        assert_eq!((ab.cap(), ab.total()), (2, 5));
    }

    #[test]
    fn json_is_deterministic_and_round_trips() {
        let f = of(2, &["b", "a", "b"]);
        let json = serde_json::to_string(&f).expect("serializes");
        assert_eq!(
            json,
            r#"{"cap":2,"counts":{"a":1,"b":2},"other":0,"truncated":false}"#
        );
        let back: Frequencies = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, f);
        let gave_up = of(2, &["b", "a", "c"]);
        assert_eq!(
            serde_json::to_string(&gave_up).expect("serializes"),
            r#"{"cap":2,"counts":{},"other":3,"truncated":true}"#
        );
        let over = r#"{"cap":1,"counts":{"a":1,"b":1},"other":0,"truncated":false}"#;
        let err = serde_json::from_str::<Frequencies>(over).expect_err("over cap");
        assert!(err.to_string().contains("2 distinct keys"), "{err}");
    }

    /// Profiles written before sketches gave up kept the first keys past the cap.
    #[test]
    fn an_old_truncated_sketch_reads_as_one_that_gave_up() {
        let old = r#"{"cap":2,"counts":{"a":4,"b":1},"other":3,"truncated":true}"#;
        let f: Frequencies = serde_json::from_str(old).expect("deserializes");
        assert_eq!(f, of(2, &["a", "a", "a", "a", "b", "c", "d", "e"]));
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

        /// However the values are cut into parts, the merged parts equal one pass.
        #[test]
        fn merged_parts_equal_one_pass(
            keys in proptest::collection::vec(0u8..30, 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..5),
            cap in 1usize..35,
        ) {
            let build = |keys: &[u8]| {
                let mut f = Frequencies::new(cap);
                for key in keys {
                    f.add(&key.to_string());
                }
                f
            };
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(keys.len())).collect();
            cuts.sort_unstable();
            cuts.push(keys.len());
            let mut merged = Frequencies::new(cap);
            let mut start = 0;
            for end in cuts {
                merged.merge(&build(&keys[start..end]));
                start = end;
            }
            prop_assert_eq!(merged, build(&keys));
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
