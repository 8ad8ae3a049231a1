//! Rows of a later split whose category the earliest split never has: a renamed airport, a new
//! product line. A model scores such a row from its other features only, and the gate cannot
//! see it (the serving model never saw the category either, so both lose alike). Chance gives
//! some: categories keep arriving in a growing table. The earliest split says how many: cut in
//! [`BLOCKS`] runs in file order, the share of each run's rows whose category no run before it
//! has; a later split is one more run after all of them.

use std::collections::{HashMap, HashSet};

use arrow::array::Array;
use runfn_data::partitioned::SplitBatch;
use runfn_data::values::text_array;
use serde_json::json;

use crate::keys::BLOCKS;

/// A later split with at most this share of its rows unseen is not tested: a category that
/// small moves no metric the gate could see, and a new one turns up on most nights.
pub const MIN_SHARE: f64 = 0.01;

/// One categorical column of one file: the earliest split's values in file order (hashed), and
/// the later splits' counts by value.
#[derive(Debug, Default)]
pub struct FileCategories {
    train: Vec<u64>,
    later: HashMap<(u8, u64), u64>,
    names: HashMap<u64, String>,
}

fn hash64(value: &str) -> u64 {
    crate::keys::hash128(value.as_bytes()) as u64
}

impl FileCategories {
    pub fn add(&mut self, batch: &SplitBatch, column: usize, train: u8) {
        let values = text_array(&batch.batch.columns()[column]);
        for row in 0..batch.batch.num_rows() {
            let (Some(split), true) = (batch.splits[row], values.is_valid(row)) else {
                continue;
            };
            let value = values.value(row);
            let hash = hash64(value);
            if split == train {
                self.train.push(hash);
            } else {
                *self.later.entry((split, hash)).or_default() += 1;
                self.names
                    .entry(hash)
                    .or_insert_with(|| value.chars().take(80).collect());
            }
        }
    }

    /// Adds a later file's values.
    pub fn absorb(&mut self, file: FileCategories) {
        self.train.extend(file.train);
        for (key, n) in file.later {
            *self.later.entry(key).or_default() += n;
        }
        for (hash, name) in file.names {
            self.names.entry(hash).or_insert(name);
        }
    }
}

/// One later split of one column, judged against chance.
#[derive(Debug, Clone)]
pub struct Finding {
    pub column: String,
    pub split: u8,
    pub unseen: u64,
    pub rows: u64,
    /// The chance share of unseen rows, and how far it moves between runs of the earliest split
    /// beyond sampling (`None`: too few rows to say).
    pub chance: f64,
    pub movement: Option<crate::checks::Movement>,
    /// One-sided, before the correction over every column and split tested; 1 when the share
    /// is at most [`MIN_SHARE`].
    pub p: f64,
    /// The largest unseen values with their rows.
    pub values: Vec<(String, u64)>,
}

/// A later split's rows, those unseen in train, and the unseen values with their rows.
#[derive(Debug, Default)]
struct Tally {
    unseen: u64,
    rows: u64,
    values: Vec<(u64, u64)>,
}

/// Each later split of `column` against the earliest split's values.
pub fn judge(column: &str, merged: &FileCategories) -> Vec<Finding> {
    let seen: HashSet<u64> = merged.train.iter().copied().collect();
    let (chance, movement) = chance_of(&merged.train);
    let mut by_split: HashMap<u8, Tally> = HashMap::new();
    for (&(split, hash), &n) in &merged.later {
        let tally = by_split.entry(split).or_default();
        tally.rows += n;
        if !seen.contains(&hash) {
            tally.unseen += n;
            tally.values.push((hash, n));
        }
    }
    let mut findings: Vec<Finding> = by_split
        .into_iter()
        .map(
            |(
                split,
                Tally {
                    unseen,
                    rows,
                    mut values,
                },
            )| {
                values.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                let share = unseen as f64 / rows.max(1) as f64;
                let p = if share <= MIN_SHARE {
                    1.0
                } else {
                    let binomial =
                        runfn_stats::binomial::at_least(unseen, rows, chance.clamp(0.0, 1.0))
                            .unwrap_or(0.0);
                    binomial.max(crate::checks::overdispersed_p(
                        unseen, rows, chance, movement,
                    ))
                };
                Finding {
                    column: column.to_string(),
                    split,
                    unseen,
                    rows,
                    chance,
                    movement,
                    p,
                    values: values
                        .into_iter()
                        .take(3)
                        .map(|(hash, n)| (merged.names.get(&hash).cloned().unwrap_or_default(), n))
                        .collect(),
                }
            },
        )
        .collect();
    findings.sort_by_key(|f| f.split);
    findings
}

/// The chance share of a later run's rows with a category no earlier run has: the mean over the
/// earliest split's later half of runs (each with at least half the split before it, as a later
/// split has all of it), and how far the runs' shares move.
fn chance_of(train: &[u64]) -> (f64, Option<crate::checks::Movement>) {
    let n = train.len();
    if n < 2 * BLOCKS {
        return (0.0, None);
    }
    let mut seen: HashSet<u64> = HashSet::new();
    let mut rates: Vec<(f64, u64)> = Vec::with_capacity(BLOCKS - 1);
    for block in 0..BLOCKS {
        let (start, end) = (block * n / BLOCKS, (block + 1) * n / BLOCKS);
        let run = &train[start..end];
        if block > 0 {
            let unseen = run.iter().filter(|h| !seen.contains(h)).count();
            rates.push((unseen as f64 / run.len().max(1) as f64, run.len() as u64));
        }
        seen.extend(run.iter().copied());
    }
    let later = &rates[rates.len() / 2..];
    let chance = later.iter().map(|r| r.0).sum::<f64>() / later.len() as f64;
    (chance, crate::checks::movement_of(&rates, chance))
}

/// A finding as one of the check's examples.
pub fn example(finding: &Finding, split: &str, p_adjusted: f64) -> serde_json::Value {
    json!({
        "column": finding.column,
        "split": split,
        "rows": finding.unseen,
        "of": finding.rows,
        "share": finding.unseen as f64 / finding.rows.max(1) as f64,
        "chance": finding.chance,
        "p_value": p_adjusted,
        "values": finding.values.iter().map(|(v, n)| json!({"value": v, "rows": n})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(train: &[&str], later: &[(&str, u64)]) -> FileCategories {
        let mut c = FileCategories {
            train: train.iter().map(|v| hash64(v)).collect(),
            ..FileCategories::default()
        };
        for (v, n) in later {
            c.later.insert((1, hash64(v)), *n);
            c.names.insert(hash64(v), v.to_string());
        }
        c
    }

    /// Three carriers all year; the test split has the same three, one renamed.
    #[test]
    fn a_renamed_category_is_unseen_beyond_chance_and_a_coarse_table_is_not() {
        let train: Vec<&str> = (0..3000).map(|i| ["AA", "UA", "DL"][i % 3]).collect();
        let honest = judge(
            "carrier",
            &column(&train, &[("AA", 300), ("UA", 300), ("DL", 300)]),
        );
        assert_eq!(honest[0].unseen, 0);
        assert_eq!(honest[0].p, 1.0);
        let renamed = judge(
            "carrier",
            &column(&train, &[("AA", 300), ("UA-renamed", 300), ("DL", 300)]),
        );
        assert_eq!(renamed[0].unseen, 300);
        assert!(renamed[0].p < 1e-9, "{:?}", renamed[0]);
        assert_eq!(renamed[0].values, [("UA-renamed".to_string(), 300)]);
    }

    /// An identifier-like column: every row a new value, in train as in test. Chance says so.
    #[test]
    fn a_column_whose_values_are_always_new_is_new_by_chance() {
        let names: Vec<String> = (0..3000).map(|i| format!("id{i}")).collect();
        let train: Vec<&str> = names.iter().map(String::as_str).collect();
        let later: Vec<(String, u64)> = (0..300).map(|i| (format!("new{i}"), 1)).collect();
        let later: Vec<(&str, u64)> = later.iter().map(|(v, n)| (v.as_str(), *n)).collect();
        let found = judge("id", &column(&train, &later));
        assert_eq!(found[0].unseen, 300);
        assert!((found[0].chance - 1.0).abs() < 1e-12);
        assert!(found[0].p > 0.5, "{:?}", found[0]);
    }

    /// A new category on under 1% of the rows is not tested.
    #[test]
    fn a_sliver_of_new_rows_is_below_the_floor() {
        let train: Vec<&str> = (0..3000).map(|i| ["AA", "UA"][i % 2]).collect();
        let found = judge("carrier", &column(&train, &[("AA", 995), ("NEW", 5)]));
        assert_eq!(found[0].unseen, 5);
        assert_eq!(found[0].p, 1.0);
    }
}
