//! Two per-row scores files paired without holding their rows, for a gate whose rows do not fit
//! in its memory and whose every gated metric is AUC: the files streamed a row group at a time
//! into the external sorts of `spilled_delong` (all rows, and each slice column's values). The
//! tests are the ones the rows held in memory give, bit for bit.
//!
//! A first read hashes each file's keys, labels and shared slice values in row order. Where the
//! hashes agree (two evaluations of one split write the same rows in the same order), the rows
//! pair by position. Otherwise both files' keys are sorted on disk by their hash and joined,
//! and the baseline's scores sorted back into the candidate's row order. Either way a key twice,
//! a key on one side only, a label or a slice value that differs is refused, naming the row as
//! the pairing in memory names it (for slice values, a row where one differs).

use std::collections::HashMap;
use std::path::Path;

use runfn_core::InputError;
use runfn_data::row_scores::RowScores;
use runfn_data::spill_sort::{Record, SpillSorter, u64_at};

use crate::paired::{GroupAuc, PairedScores, SliceValues, SpilledAuc};
use crate::pairing::{key_hash, key_text_at};
use crate::spilled_delong::SpilledGrouping;

/// A candidate's row by its key's hash: its row, label and shared slice values' hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct CandidateKey {
    hash: u128,
    row: u64,
    label: bool,
    slices: u64,
}

impl Record for CandidateKey {
    const BYTES: usize = 33;
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.push(u8::from(self.label));
        out.extend_from_slice(&self.slices.to_le_bytes());
    }
    fn read_from(bytes: &[u8]) -> CandidateKey {
        CandidateKey {
            hash: u128::from_le_bytes(bytes[..16].try_into().expect("16 bytes")),
            row: u64_at(bytes, 16),
            label: bytes[24] == 1,
            slices: u64_at(bytes, 25),
        }
    }
}

/// A baseline's row by its key's hash, with its score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct BaselineKey {
    hash: u128,
    row: u64,
    score: u64,
    label: bool,
    slices: u64,
}

impl Record for BaselineKey {
    const BYTES: usize = 41;
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
        out.push(u8::from(self.label));
        out.extend_from_slice(&self.slices.to_le_bytes());
    }
    fn read_from(bytes: &[u8]) -> BaselineKey {
        BaselineKey {
            hash: u128::from_le_bytes(bytes[..16].try_into().expect("16 bytes")),
            row: u64_at(bytes, 16),
            score: u64_at(bytes, 24),
            label: bytes[32] == 1,
            slices: u64_at(bytes, 33),
        }
    }
}

/// The baseline's score of the candidate's row `row`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Aligned {
    row: u64,
    score: u64,
}

impl Record for Aligned {
    const BYTES: usize = 16;
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.row.to_le_bytes());
        out.extend_from_slice(&self.score.to_le_bytes());
    }
    fn read_from(bytes: &[u8]) -> Aligned {
        Aligned {
            row: u64_at(bytes, 0),
            score: u64_at(bytes, 8),
        }
    }
}

/// One row of a file as the passes see it.
struct Row<'a> {
    index: u64,
    key: &'a str,
    label: bool,
    score: f64,
    /// The values of the shared slice columns, in the candidate's column order.
    shared: Vec<&'a str>,
    /// Every slice column's value, in the file's column order.
    all: &'a [(String, Vec<String>)],
    at: usize,
}

/// A file's header and row count, from its first read.
struct Shape {
    key_column: Option<String>,
    rows_blake3: String,
    rows: u64,
    /// Keys, labels and shared slice values, in row order.
    sequence: blake3::Hash,
}

/// Calls `each` with every row of the file at `path`, in order; `shared` names the slice
/// columns both files have, in the candidate's order.
fn each_row(
    path: &Path,
    origin: &str,
    shared: &[String],
    mut each: impl FnMut(&Row) -> std::io::Result<()>,
) -> Result<Shape, InputError> {
    let mut shape: Option<Shape> = None;
    let mut sequence = blake3::Hasher::new();
    let mut index = 0u64;
    RowScores::read_each(path, |chunk| {
        shape.get_or_insert_with(|| Shape {
            key_column: chunk.key_column.clone(),
            rows_blake3: chunk.rows_blake3.clone(),
            rows: 0,
            sequence: blake3::hash(b""),
        });
        let positions: Vec<usize> = shared
            .iter()
            .filter_map(|c| chunk.slices.iter().position(|(name, _)| name == c))
            .collect();
        let numbers: Vec<String>;
        let keys: &[String] = match &chunk.keys {
            Some(keys) => keys,
            None => {
                numbers = chunk.rows.iter().map(u64::to_string).collect();
                &numbers
            }
        };
        for (i, key) in keys.iter().enumerate() {
            let row = Row {
                index,
                key,
                label: chunk.labels[i],
                score: chunk.scores[i],
                shared: positions
                    .iter()
                    .map(|&p| chunk.slices[p].1[i].as_str())
                    .collect(),
                all: &chunk.slices,
                at: i,
            };
            update_text(&mut sequence, row.key);
            sequence.update(&[u8::from(row.label)]);
            for value in &row.shared {
                update_text(&mut sequence, value);
            }
            each(&row).map_err(|e| runfn_data::DataError::Other(e.to_string()))?;
            index += 1;
        }
        Ok(())
    })
    .map_err(|e| InputError::field(format!("{origin}.row_scores"), e.to_string()))?;
    let mut shape = shape
        .ok_or_else(|| InputError::field(format!("{origin}.row_scores"), "holds no row group"))?;
    shape.rows = index;
    shape.sequence = sequence.finalize();
    Ok(shape)
}

fn update_text(hasher: &mut blake3::Hasher, text: &str) {
    hasher.update(&(text.len() as u64).to_le_bytes());
    hasher.update(text.as_bytes());
}

fn slices_hash(values: &[&str]) -> u64 {
    let mut hasher = blake3::Hasher::new();
    for value in values {
        update_text(&mut hasher, value);
    }
    u64::from_le_bytes(
        hasher.finalize().as_bytes()[..8]
            .try_into()
            .expect("8 bytes"),
    )
}

/// The candidate's slice columns, numbered values and the groupings they feed.
struct Groups<'a> {
    columns: Vec<String>,
    ids: Vec<HashMap<String, u32>>,
    names: Vec<Vec<String>>,
    groupings: Vec<SpilledGrouping<'a>>,
}

impl Groups<'_> {
    /// Pushes `row` scored `score` by `model` into every grouping, each slice value numbered as
    /// the candidate's rows first meet it.
    fn push(&mut self, model: usize, row: &Row, score: f64) -> std::io::Result<()> {
        self.groupings[0].push(model, 0, row.index, score, row.label)?;
        for (at, column) in self.columns.iter().enumerate() {
            let Some((_, values)) = row.all.iter().find(|(c, _)| c == column) else {
                continue;
            };
            let value = &values[row.at];
            let id = match self.ids[at].get(value) {
                Some(&id) => id,
                None => {
                    let id = self.names[at].len() as u32;
                    self.names[at].push(value.clone());
                    self.ids[at].insert(value.clone(), id);
                    id
                }
            };
            self.groupings[at + 1].push(model, id, row.index, score, row.label)?;
        }
        Ok(())
    }
}

/// The paired AUC tests of `candidate` and `baseline` (checked files) within about `memory`
/// bytes, spilling under `root`.
pub fn pair_spilled(
    candidate: &Path,
    baseline: &Path,
    memory: u64,
    root: &Path,
) -> Result<PairedScores, InputError> {
    let spill = |e: std::io::Error| InputError::Io {
        path: root.to_path_buf(),
        source: e,
    };
    let refuse = |message: String| InputError::field("row_scores", message);
    let columns = slice_columns(candidate, "evaluate")?;
    let theirs = slice_columns(baseline, "baseline")?;
    if let Some(column) = theirs.iter().find(|c| !columns.contains(c)) {
        return Err(refuse(format!(
            "the baseline's scores have slice column `{column}`, the candidate's do not: pairing them needs every row in memory, and they do not fit in --memory {memory}; raise --memory"
        )));
    }
    let shared: Vec<String> = columns
        .iter()
        .filter(|c| theirs.contains(c))
        .cloned()
        .collect();
    let c_shape = each_row(candidate, "evaluate", &shared, |_| Ok(()))?;
    let b_shape = each_row(baseline, "baseline", &shared, |_| Ok(()))?;
    if c_shape.key_column != b_shape.key_column {
        return Err(refuse(format!(
            "the candidate's rows are keyed by {} and the baseline's by {}",
            c_shape.key_column.as_deref().unwrap_or("position"),
            b_shape.key_column.as_deref().unwrap_or("position")
        )));
    }
    let (c_digest, b_digest) = (&c_shape.rows_blake3, &b_shape.rows_blake3);
    if !c_digest.is_empty() && !b_digest.is_empty() && c_digest != b_digest {
        let short = |d: &str| d.get(..12).unwrap_or(d).to_string();
        return Err(refuse(format!(
            "the candidate's scores are of the rows with rows_blake3 {} and the baseline's of {}: not the same test split",
            short(c_digest),
            short(b_digest)
        )));
    }
    let same_order = c_shape.rows == b_shape.rows && c_shape.sequence == b_shape.sequence;
    // Sorters alive at once: both models' of each grouping, and the keys' and scores'.
    let sorters = 2 * (1 + columns.len() as u64) + 3;
    let share = (memory / (4 * sorters)).max(1 << 16);
    let mut groups = Groups {
        ids: vec![HashMap::new(); columns.len()],
        names: vec![Vec::new(); columns.len()],
        groupings: (0..=columns.len())
            .map(|_| SpilledGrouping::new(root, 2 * share))
            .collect::<Result<_, _>>()
            .map_err(spill)?,
        columns,
    };
    let mut c_keys: SpillSorter<CandidateKey> = SpillSorter::new(root, share).map_err(spill)?;
    let mut b_keys: SpillSorter<BaselineKey> = SpillSorter::new(root, share).map_err(spill)?;
    // In the same order, the baseline's scores are already the candidate's rows'.
    let mut in_order: SpillSorter<Aligned> = SpillSorter::new(root, share).map_err(spill)?;
    each_row(candidate, "evaluate", &shared, |row| {
        groups.push(0, row, row.score)?;
        if !same_order {
            c_keys.push(CandidateKey {
                hash: key_hash(row.key),
                row: row.index,
                label: row.label,
                slices: slices_hash(&row.shared),
            })?;
        }
        Ok(())
    })?;
    each_row(baseline, "baseline", &shared, |row| {
        if same_order {
            in_order.push(Aligned {
                row: row.index,
                score: row.score.to_bits(),
            })?;
        }
        b_keys.push(BaselineKey {
            hash: key_hash(row.key),
            row: row.index,
            score: row.score.to_bits(),
            label: row.label,
            slices: slices_hash(&row.shared),
        })
    })?;
    let aligned = if same_order {
        // Only a key the baseline holds twice (and so the candidate too) is left to find.
        let mut previous: Option<u128> = None;
        let mut repeat: Option<u64> = None;
        for record in b_keys.sorted().map_err(spill)? {
            let record = record.map_err(spill)?;
            if previous == Some(record.hash) {
                repeat = Some(repeat.map_or(record.row, |r| r.min(record.row)));
            }
            previous = Some(record.hash);
        }
        if let Some(row) = repeat {
            return Err(refuse(format!(
                "the baseline's scores hold row {} twice",
                key_text_at(baseline, row as usize)
            )));
        }
        in_order
    } else {
        join(
            c_keys,
            b_keys,
            (candidate, c_shape.rows),
            (baseline, b_shape.rows),
            (&shared, root, share),
        )?
    };
    // The baseline's scores in the candidate's row order, beside the candidate's rows: each
    // row's groups are the candidate's.
    let mut aligned = aligned.sorted().map_err(spill)?;
    each_row(candidate, "evaluate", &shared, |row| {
        let next = aligned
            .next()
            .transpose()?
            .filter(|a| a.row == row.index)
            .ok_or_else(|| std::io::Error::other("the aligned scores lost a row"))?;
        groups.push(1, row, f64::from_bits(next.score))
    })?;
    tests(groups).map_err(spill)
}

/// The first row (in the candidate's order) where the pairing fails, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    /// The candidate's key is not the baseline's.
    Missing,
    /// The candidate holds the key again.
    Twice,
    /// The labels differ: the candidate's, the baseline's.
    Labelled(bool, bool),
}

/// Joins the keys sorted by hash: the baseline's score of each candidate row, or the first
/// failure as the pairing in memory names it.
fn join(
    c_keys: SpillSorter<CandidateKey>,
    b_keys: SpillSorter<BaselineKey>,
    (candidate, c_rows): (&Path, u64),
    (baseline, b_rows): (&Path, u64),
    (shared, root, share): (&[String], &Path, u64),
) -> Result<SpillSorter<Aligned>, InputError> {
    let spill = |e: std::io::Error| InputError::Io {
        path: root.to_path_buf(),
        source: e,
    };
    let refuse = |message: String| InputError::field("row_scores", message);
    let mut out: SpillSorter<Aligned> = SpillSorter::new(root, share).map_err(spill)?;
    let mut c_sorted = c_keys.sorted().map_err(spill)?.peekable();
    let mut b_sorted = b_keys.sorted().map_err(spill)?.peekable();
    let mut b_repeat: Option<u64> = None;
    let mut b_only: Option<u64> = None;
    let mut first: Option<(u64, Problem)> = None;
    let mut slice_differs: Option<(u64, u64)> = None;
    let mut note = |row: u64, problem: Problem| {
        if first.is_none_or(|(r, _)| row < r) {
            first = Some((row, problem));
        }
    };
    loop {
        let c_hash = match c_sorted.peek() {
            Some(Ok(c)) => Some(c.hash),
            Some(Err(_)) => return Err(spill(c_sorted.next().expect("peeked").unwrap_err())),
            None => None,
        };
        let b_hash = match b_sorted.peek() {
            Some(Ok(b)) => Some(b.hash),
            Some(Err(_)) => return Err(spill(b_sorted.next().expect("peeked").unwrap_err())),
            None => None,
        };
        let Some(hash) = [c_hash, b_hash].into_iter().flatten().min() else {
            break;
        };
        // Every row of this key on each side (a key repeats only in bad input; the first two
        // of each side are what the checks read).
        let mut cs: Vec<CandidateKey> = Vec::new();
        while c_sorted
            .peek()
            .is_some_and(|c| c.as_ref().is_ok_and(|c| c.hash == hash))
        {
            let c = c_sorted.next().expect("peeked").map_err(spill)?;
            if cs.len() < 2 {
                cs.push(c);
            }
        }
        let mut bs: Vec<BaselineKey> = Vec::new();
        while b_sorted
            .peek()
            .is_some_and(|b| b.as_ref().is_ok_and(|b| b.hash == hash))
        {
            let b = b_sorted.next().expect("peeked").map_err(spill)?;
            if bs.len() < 2 {
                bs.push(b);
            }
        }
        if let Some(second) = bs.get(1) {
            b_repeat = Some(b_repeat.map_or(second.row, |r| r.min(second.row)));
        }
        match (cs.first(), bs.first()) {
            (Some(c), None) => note(c.row, Problem::Missing),
            (None, Some(b)) => b_only = Some(b_only.map_or(b.row, |r| r.min(b.row))),
            (Some(c), Some(b)) => {
                if c.label != b.label {
                    note(c.row, Problem::Labelled(c.label, b.label));
                } else {
                    out.push(Aligned {
                        row: c.row,
                        score: b.score,
                    })
                    .map_err(spill)?;
                    if c.slices != b.slices && slice_differs.is_none_or(|(r, _)| c.row < r) {
                        slice_differs = Some((c.row, b.row));
                    }
                }
                if let Some(again) = cs.get(1) {
                    note(again.row, Problem::Twice);
                }
            }
            (None, None) => {}
        }
    }
    if let Some(row) = b_repeat {
        return Err(refuse(format!(
            "the baseline's scores hold row {} twice",
            key_text_at(baseline, row as usize)
        )));
    }
    if let Some((row, problem)) = first {
        let key = key_text_at(candidate, row as usize);
        return Err(refuse(match problem {
            Problem::Missing => format!(
                "the candidate's scores ({c_rows} rows) and the baseline's ({b_rows} rows) do not cover the same rows: row {key} is the candidate's only"
            ),
            Problem::Twice => format!("the candidate's scores hold row {key} twice"),
            Problem::Labelled(mine, theirs) => format!(
                "row {key} is labelled {mine} in the candidate's scores and {theirs} in the baseline's"
            ),
        }));
    }
    if let Some(row) = b_only.filter(|_| b_rows != c_rows) {
        return Err(refuse(format!(
            "the candidate's scores ({c_rows} rows) and the baseline's ({b_rows} rows) do not cover the same rows: row {} is the baseline's only",
            key_text_at(baseline, row as usize)
        )));
    }
    if let Some((c_row, b_row)) = slice_differs {
        let (mine, theirs) = (
            slices_at(candidate, c_row, shared),
            slices_at(baseline, b_row, shared),
        );
        let (column, a, b) = shared
            .iter()
            .zip(mine.iter().zip(&theirs))
            .find(|(_, (a, b))| a != b)
            .map(|(c, (a, b))| (c.clone(), a.clone(), b.clone()))
            .unwrap_or_default();
        return Err(refuse(format!(
            "row {}: slice column `{column}` is `{a}` in the candidate's scores and `{b}` in the baseline's",
            key_text_at(candidate, c_row as usize)
        )));
    }
    Ok(out)
}

/// The shared slice values of row `row` of the file at `path` (read back for an error).
fn slices_at(path: &Path, row: u64, shared: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let _ = each_row(path, "row_scores", shared, |r| {
        if r.index == row {
            found = r.shared.iter().map(|v| v.to_string()).collect();
        }
        Ok(())
    });
    found
}

/// Every grouping's tests, as the gate's table.
fn tests(groups: Groups) -> std::io::Result<PairedScores> {
    let Groups {
        columns,
        names,
        groupings,
        ..
    } = groups;
    let mut results = groupings.into_iter().map(SpilledGrouping::finish);
    let group = |(positives, negatives, test)| GroupAuc {
        rows: positives + negatives,
        positives,
        test,
    };
    let overall = results
        .next()
        .expect("the overall grouping")?
        .pop()
        .map(group)
        .unwrap_or_default();
    let mut slices = Vec::with_capacity(columns.len());
    for ((column, names), tests) in columns.iter().zip(&names).zip(results) {
        let mut by_value: Vec<(String, GroupAuc)> = names
            .iter()
            .cloned()
            .zip(tests?.into_iter().map(group))
            .collect();
        by_value.sort_by(|a, b| a.0.cmp(&b.0));
        slices.push((column.clone(), by_value));
    }
    Ok(PairedScores {
        slices: columns
            .into_iter()
            .zip(names)
            .map(|(c, names)| {
                (
                    c,
                    SliceValues {
                        names,
                        ids: Vec::new(),
                    },
                )
            })
            .collect(),
        spilled: Some(SpilledAuc { overall, slices }),
        ..PairedScores::default()
    })
}

/// A file's slice columns, from its first row group (the read stops there).
fn slice_columns(path: &Path, origin: &str) -> Result<Vec<String>, InputError> {
    let mut columns = None;
    let read = RowScores::read_each(path, |chunk| {
        columns = Some(chunk.slices.iter().map(|(c, _)| c.clone()).collect());
        Err(runfn_data::DataError::Other("read no further".into()))
    });
    match (columns, read) {
        (Some(columns), _) => Ok(columns),
        (None, Err(e)) => Err(InputError::field(
            format!("{origin}.row_scores"),
            e.to_string(),
        )),
        (None, Ok(())) => Err(InputError::field(
            format!("{origin}.row_scores"),
            "holds no row group",
        )),
    }
}
