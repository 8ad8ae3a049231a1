//! Rows of a later split whose category the earliest split never has: a renamed airport, a new
//! product line. A model scores such a row from its other features only, and the gate cannot
//! see it (the serving model never saw the category either, so both lose alike). Chance gives
//! some: categories keep arriving in a growing table. The earliest split says how many: cut in
//! [`BLOCKS`] runs in file order, the share of each run's rows whose category no run before it
//! has; a later split is one more run after all of them.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::path::Path;

use arrow::array::Array;
use runfn_data::partitioned::SplitBatch;
use runfn_data::values::text_array;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::keys::BLOCKS;

/// A later split with at most this share of its rows unseen is not tested: a category that
/// small moves no metric the gate could see, and a new one turns up on most nights.
pub const MIN_SHARE: f64 = 0.01;

/// Distinct values a column may have in train, or in the later splits, and still be tested:
/// past it the column is an identifier (every later row new by chance), not a category, and
/// counting its values would hold memory that grows with the rows.
pub const MAX_DISTINCT: usize = 1 << 17;

/// One categorical column of one file: the earliest split's values in file order (hashed, in a
/// temporary file: eight bytes a row on disk, none in memory), and the later splits' counts by
/// value.
#[derive(Debug, Default)]
pub struct FileCategories {
    /// The train values' hashes, in file order, one file's after another's.
    train: Vec<File>,
    writing: Option<BufWriter<File>>,
    train_rows: u64,
    later: HashMap<(u8, u64), u64>,
    names: HashMap<u64, String>,
    /// More than [`MAX_DISTINCT`] later values: not tested.
    identifier: bool,
}

/// A column as a part leaves it, but for its train hashes (in a file beside the partial).
#[derive(Debug, Serialize, Deserialize)]
pub struct CategoriesState {
    train_rows: u64,
    /// (split, value hash, rows).
    later: Vec<(u8, u64, u64)>,
    names: Vec<(u64, String)>,
    identifier: bool,
}

fn hash64(value: &str) -> u64 {
    crate::keys::hash128(value.as_bytes()) as u64
}

impl FileCategories {
    /// Adds a batch's values of `column`; train's hashes are spilled under `root`.
    pub fn add(
        &mut self,
        batch: &SplitBatch,
        column: usize,
        train: u8,
        root: &Path,
    ) -> io::Result<()> {
        let values = text_array(&batch.batch.columns()[column]);
        for row in 0..batch.batch.num_rows() {
            let (Some(split), true) = (batch.splits[row], values.is_valid(row)) else {
                continue;
            };
            let value = values.value(row);
            let hash = hash64(value);
            if split == train {
                let out = match &mut self.writing {
                    Some(out) => out,
                    None => self
                        .writing
                        .insert(BufWriter::new(tempfile::tempfile_in(root)?)),
                };
                out.write_all(&hash.to_le_bytes())?;
                self.train_rows += 1;
            } else if !self.identifier {
                *self.later.entry((split, hash)).or_default() += 1;
                self.names
                    .entry(hash)
                    .or_insert_with(|| value.chars().take(80).collect());
                self.check_size();
            }
        }
        Ok(())
    }

    fn check_size(&mut self) {
        if self.later.len() > MAX_DISTINCT {
            self.identifier = true;
            self.later = HashMap::new();
            self.names = HashMap::new();
        }
    }

    /// Ends the file's train values, so they can be read back.
    pub fn seal(&mut self) -> io::Result<()> {
        if let Some(out) = self.writing.take() {
            self.train
                .push(out.into_inner().map_err(|e| e.into_error())?);
        }
        Ok(())
    }

    /// Adds a later file's values.
    pub fn absorb(&mut self, mut file: FileCategories) -> io::Result<()> {
        self.seal()?;
        file.seal()?;
        self.train.append(&mut file.train);
        self.train_rows += file.train_rows;
        self.identifier |= file.identifier;
        if self.identifier {
            self.later = HashMap::new();
            self.names = HashMap::new();
            return Ok(());
        }
        for (key, n) in file.later {
            *self.later.entry(key).or_default() += n;
        }
        for (hash, name) in file.names {
            self.names.entry(hash).or_insert(name);
        }
        self.check_size();
        Ok(())
    }

    /// Writes the train values' hashes to `path`, for a part's partial; the rest is returned.
    pub fn persist(&mut self, path: &Path) -> io::Result<CategoriesState> {
        self.seal()?;
        let mut out = BufWriter::new(File::create(path)?);
        for file in &self.train {
            let mut file = file.try_clone()?;
            file.rewind()?;
            io::copy(&mut file, &mut out)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        let mut later: Vec<(u8, u64, u64)> = self
            .later
            .iter()
            .map(|(&(split, hash), &n)| (split, hash, n))
            .collect();
        later.sort_unstable();
        let mut names: Vec<(u64, String)> =
            self.names.iter().map(|(&h, n)| (h, n.clone())).collect();
        names.sort_unstable();
        Ok(CategoriesState {
            train_rows: self.train_rows,
            later,
            names,
            identifier: self.identifier,
        })
    }

    /// A part's column back, its train hashes in `train` (what [`FileCategories::persist`]
    /// wrote).
    pub fn restored(state: CategoriesState, train: File) -> FileCategories {
        FileCategories {
            train: vec![train],
            writing: None,
            train_rows: state.train_rows,
            later: state
                .later
                .into_iter()
                .map(|(split, hash, n)| ((split, hash), n))
                .collect(),
            names: state.names.into_iter().collect(),
            identifier: state.identifier,
        }
    }

    /// The train values' hashes in file order (once sealed).
    fn train_hashes(&self) -> io::Result<impl Iterator<Item = io::Result<u64>> + use<>> {
        let mut readers = Vec::with_capacity(self.train.len());
        for file in &self.train {
            let mut file = file.try_clone()?;
            file.rewind()?;
            readers.push(BufReader::new(file));
        }
        Ok(readers.into_iter().flat_map(|mut reader| {
            std::iter::from_fn(move || {
                let mut bytes = [0u8; 8];
                match reader.read_exact(&mut bytes) {
                    Ok(()) => Some(Ok(u64::from_le_bytes(bytes))),
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => None,
                    Err(e) => Some(Err(e)),
                }
            })
        }))
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
    pub movement: Option<crate::movement::Movement>,
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

/// Each later split of `column` against the earliest split's values; none for an identifier.
pub fn judge(column: &str, merged: &FileCategories) -> io::Result<Vec<Finding>> {
    if merged.identifier {
        return Ok(Vec::new());
    }
    let Some((seen, chance, movement)) = chance_of(merged.train_hashes()?, merged.train_rows)?
    else {
        return Ok(Vec::new());
    };
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
                    binomial.max(crate::movement::overdispersed_p(
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
    Ok(findings)
}

/// The train values, and the chance share of a later run's rows with a category no earlier run
/// has: the mean over the earliest split's later half of runs (each with at least half the
/// split before it, as a later split has all of it), and how far the runs' shares move. Read in
/// one pass over the `n` hashes in file order; `None` past [`MAX_DISTINCT`] values.
#[allow(clippy::type_complexity)]
fn chance_of(
    train: impl Iterator<Item = io::Result<u64>>,
    n: u64,
) -> io::Result<Option<(HashSet<u64>, f64, Option<crate::movement::Movement>)>> {
    let n = n as usize;
    let mut seen: HashSet<u64> = HashSet::new();
    let mut run: HashSet<u64> = HashSet::new();
    let mut rates: Vec<(f64, u64)> = Vec::with_capacity(BLOCKS - 1);
    let (mut block, mut unseen, mut in_run) = (0, 0u64, 0u64);
    let end_of = |block: usize| (block + 1) * n / BLOCKS;
    for (at, hash) in train.enumerate() {
        let hash = hash?;
        while at >= end_of(block) && block + 1 < BLOCKS {
            if block > 0 {
                rates.push((unseen as f64 / in_run.max(1) as f64, in_run));
            }
            seen.extend(run.drain());
            (block, unseen, in_run) = (block + 1, 0, 0);
        }
        in_run += 1;
        if !seen.contains(&hash) {
            unseen += 1;
            run.insert(hash);
            if seen.len() + run.len() > MAX_DISTINCT {
                return Ok(None);
            }
        }
    }
    seen.extend(run.drain());
    if n < 2 * BLOCKS {
        return Ok(Some((seen, 0.0, None)));
    }
    rates.push((unseen as f64 / in_run.max(1) as f64, in_run));
    let later = &rates[rates.len() / 2..];
    let chance = later.iter().map(|r| r.0).sum::<f64>() / later.len() as f64;
    Ok(Some((
        seen,
        chance,
        crate::movement::movement_of(&rates, chance),
    )))
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
        let mut file = tempfile::tempfile().unwrap();
        for value in train {
            file.write_all(&hash64(value).to_le_bytes()).unwrap();
        }
        let mut c = FileCategories {
            train: vec![file],
            train_rows: train.len() as u64,
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
        )
        .unwrap();
        assert_eq!(honest[0].unseen, 0);
        assert_eq!(honest[0].p, 1.0);
        let renamed = judge(
            "carrier",
            &column(&train, &[("AA", 300), ("UA-renamed", 300), ("DL", 300)]),
        )
        .unwrap();
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
        let found = judge("id", &column(&train, &later)).unwrap();
        assert_eq!(found[0].unseen, 300);
        assert!((found[0].chance - 1.0).abs() < 1e-12);
        assert!(found[0].p > 0.5, "{:?}", found[0]);
    }

    /// A new category on under 1% of the rows is not tested.
    #[test]
    fn a_sliver_of_new_rows_is_below_the_floor() {
        let train: Vec<&str> = (0..3000).map(|i| ["AA", "UA"][i % 2]).collect();
        let found = judge("carrier", &column(&train, &[("AA", 995), ("NEW", 5)])).unwrap();
        assert_eq!(found[0].unseen, 5);
        assert_eq!(found[0].p, 1.0);
    }

    /// Past `MAX_DISTINCT` values a column is an identifier and is not tested, whatever it
    /// holds, so its counts never grow with the rows.
    #[test]
    fn a_column_with_more_values_than_a_category_has_is_not_tested() {
        let names: Vec<String> = (0..=MAX_DISTINCT).map(|i| format!("id{i}")).collect();
        let train: Vec<&str> = names.iter().map(String::as_str).collect();
        let found = judge("id", &column(&train, &[("new", 900)])).unwrap();
        assert!(found.is_empty(), "{found:?}");
        let mut later = column(&["a"; 40], &[]);
        for name in &names {
            later.later.insert((1, hash64(name)), 1);
        }
        later.check_size();
        assert!(later.identifier && later.later.is_empty());
        assert!(judge("id", &later).unwrap().is_empty());
    }
}
