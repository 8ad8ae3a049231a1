//! Two per-row scores files paired without holding their rows, for a gate whose rows do not fit
//! in its memory and whose every gated metric is AUC: each file streamed once, a row group at a
//! time, into the external sorts of `spilled_delong` (all rows, and each slice column's values).
//! The tests are the ones the rows held in memory give, bit for bit.
//!
//! Pairing by position needs the same rows in the same order in both files, as two evaluations
//! of one split write them: each file's keys and labels, and each slice column's values, are
//! hashed in row order and the hashes compared. Rows in another order are refused (they pair by
//! key in memory); a key twice is found by an external sort of the keys' hashes.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use runfn_core::InputError;
use runfn_data::row_scores::RowScores;
use runfn_data::spill_sort::{Record, SpillSorter, u64_at};

use crate::paired::{GroupAuc, PairedScores, SliceValues, SpilledAuc};
use crate::pairing::{key_hash, key_text_at};
use crate::spilled_delong::SpilledGrouping;

/// A key's hash and its row: sorted, a repeated key's rows are side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct KeyRow {
    hash: u128,
    row: u64,
}

impl Record for KeyRow {
    const BYTES: usize = 24;
    fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.to_le_bytes());
        out.extend_from_slice(&self.row.to_le_bytes());
    }
    fn read_from(bytes: &[u8]) -> KeyRow {
        KeyRow {
            hash: u128::from_le_bytes(bytes[..16].try_into().expect("16 bytes")),
            row: u64_at(bytes, 16),
        }
    }
}

/// What one file's pass found.
struct Pass {
    key_column: Option<String>,
    rows_blake3: String,
    rows: u64,
    /// Keys and labels in row order.
    rows_hash: blake3::Hasher,
    /// Per slice column, its values in row order.
    slices: Vec<(String, blake3::Hasher)>,
}

fn update_text(hasher: &mut blake3::Hasher, text: &str) {
    hasher.update(&(text.len() as u64).to_le_bytes());
    hasher.update(text.as_bytes());
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
    let columns = slice_columns(candidate)?;
    // Sorters alive at once: both models' of each grouping, and the keys'.
    let sorters = 2 * (1 + columns.len() as u64) + 1;
    let share = (memory / (4 * sorters)).max(1 << 16);
    let mut groupings: Vec<SpilledGrouping> = (0..=columns.len())
        .map(|_| SpilledGrouping::new(root, 2 * share))
        .collect::<Result<_, _>>()
        .map_err(spill)?;
    let mut keys: SpillSorter<KeyRow> = SpillSorter::new(root, share).map_err(spill)?;
    // Each slice column's values, numbered as the candidate's rows first meet them.
    let mut ids: Vec<HashMap<String, u32>> = vec![HashMap::new(); columns.len()];
    let mut names: Vec<Vec<String>> = vec![Vec::new(); columns.len()];
    let mut unknown = None;
    let mut passes = Vec::with_capacity(2);
    for (model, (path, origin)) in [(candidate, "evaluate"), (baseline, "baseline")]
        .into_iter()
        .enumerate()
    {
        let mut pass: Option<Pass> = None;
        let io = |e: std::io::Error| runfn_data::DataError::Other(e.to_string());
        RowScores::read_each(path, |chunk| {
            let pass = pass.get_or_insert_with(|| Pass {
                key_column: chunk.key_column.clone(),
                rows_blake3: chunk.rows_blake3.clone(),
                rows: 0,
                rows_hash: blake3::Hasher::new(),
                slices: chunk
                    .slices
                    .iter()
                    .map(|(c, _)| (c.clone(), blake3::Hasher::new()))
                    .collect(),
            });
            for i in 0..chunk.len() {
                let row = pass.rows;
                let key = match &chunk.keys {
                    Some(keys) => keys[i].clone(),
                    None => chunk.rows[i].to_string(),
                };
                update_text(&mut pass.rows_hash, &key);
                let label = chunk.labels[i];
                pass.rows_hash.update(&[u8::from(label)]);
                if model == 1 {
                    keys.push(KeyRow {
                        hash: key_hash(&key),
                        row,
                    })
                    .map_err(io)?;
                }
                let score = chunk.scores[i];
                groupings[0].push(model, 0, row, score, label).map_err(io)?;
                for ((column, values), (_, hasher)) in chunk.slices.iter().zip(&mut pass.slices) {
                    update_text(hasher, &values[i]);
                    let Some(at) = columns.iter().position(|c| c == column) else {
                        continue;
                    };
                    let id = match ids[at].get(&values[i]) {
                        Some(&id) => id,
                        None if model == 0 => {
                            let id = names[at].len() as u32;
                            names[at].push(values[i].clone());
                            ids[at].insert(values[i].clone(), id);
                            id
                        }
                        None => {
                            unknown.get_or_insert((column.clone(), values[i].clone()));
                            continue;
                        }
                    };
                    groupings[at + 1]
                        .push(model, id, row, score, label)
                        .map_err(io)?;
                }
                pass.rows += 1;
            }
            Ok(())
        })
        .map_err(|e| InputError::field(format!("{origin}.row_scores"), e.to_string()))?;
        passes.push(pass.ok_or_else(|| {
            InputError::field(format!("{origin}.row_scores"), "holds no row group")
        })?);
    }
    let refuse = |message: String| InputError::field("row_scores", message);
    let (c, b) = (&passes[0], &passes[1]);
    if c.key_column != b.key_column {
        return Err(refuse(format!(
            "the candidate's rows are keyed by {} and the baseline's by {}",
            c.key_column.as_deref().unwrap_or("position"),
            b.key_column.as_deref().unwrap_or("position")
        )));
    }
    if !c.rows_blake3.is_empty() && !b.rows_blake3.is_empty() && c.rows_blake3 != b.rows_blake3 {
        let short = |d: &str| d.get(..12).unwrap_or(d).to_string();
        return Err(refuse(format!(
            "the candidate's scores are of the rows with rows_blake3 {} and the baseline's of {}: not the same test split",
            short(&c.rows_blake3),
            short(&b.rows_blake3)
        )));
    }
    let sorted = keys.sorted().map_err(spill)?;
    let mut previous: Option<KeyRow> = None;
    let mut first_repeat: Option<u64> = None;
    for record in sorted {
        let record = record.map_err(spill)?;
        if previous.is_some_and(|p| p.hash == record.hash) {
            first_repeat = Some(first_repeat.map_or(record.row, |r| r.min(record.row)));
        }
        previous = Some(record);
    }
    if let Some(row) = first_repeat {
        return Err(refuse(format!(
            "the baseline's scores hold row {} twice",
            key_text_at(baseline, row as usize)
        )));
    }
    let too_big = |what: &str| {
        refuse(format!(
            "{what}: pairing them needs every row in memory, and they do not fit in --memory {memory}; raise --memory"
        ))
    };
    if c.rows != b.rows || c.rows_hash.finalize() != b.rows_hash.finalize() {
        return Err(too_big(&format!(
            "the candidate's scores ({} rows) and the baseline's ({} rows) do not hold the same rows in the same order with the same labels",
            c.rows, b.rows
        )));
    }
    for (column, hasher) in &b.slices {
        match c.slices.iter().find(|(c, _)| c == column) {
            Some((_, mine)) if mine.finalize() == hasher.finalize() => {}
            Some(_) => {
                return Err(refuse(format!(
                    "slice column `{column}` holds other values in the candidate's scores than in the baseline's"
                )));
            }
            None => {
                return Err(too_big(&format!(
                    "the baseline's scores have slice column `{column}`, the candidate's do not"
                )));
            }
        }
    }
    if let Some((column, value)) = unknown {
        return Err(refuse(format!(
            "slice column `{column}`: `{value}` is in the baseline's scores, not the candidate's"
        )));
    }
    let mut tests = groupings.into_iter().map(|g| g.finish());
    let overall = tests
        .next()
        .expect("the overall grouping")
        .map_err(spill)?
        .pop()
        .map(|(positives, negatives, test)| GroupAuc {
            rows: positives + negatives,
            positives,
            test,
        })
        .unwrap_or_default();
    let mut slices = Vec::with_capacity(columns.len());
    for ((column, names), groups) in columns.iter().zip(&names).zip(tests) {
        let groups = groups.map_err(spill)?;
        let by_value: BTreeMap<String, GroupAuc> = names
            .iter()
            .cloned()
            .zip(groups)
            .map(|(name, (positives, negatives, test))| {
                (
                    name,
                    GroupAuc {
                        rows: positives + negatives,
                        positives,
                        test,
                    },
                )
            })
            .collect();
        slices.push((column.clone(), by_value.into_iter().collect()));
    }
    Ok(PairedScores {
        slices: columns
            .iter()
            .zip(names)
            .map(|(c, names)| {
                (
                    c.clone(),
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

/// The candidate's slice columns, from its first row group (the read stops there).
fn slice_columns(path: &Path) -> Result<Vec<String>, InputError> {
    let mut columns = None;
    let read = RowScores::read_each(path, |chunk| {
        columns = Some(chunk.slices.iter().map(|(c, _)| c.clone()).collect());
        Err(runfn_data::DataError::Other("read no further".into()))
    });
    match (columns, read) {
        (Some(columns), _) => Ok(columns),
        (None, Err(e)) => Err(InputError::field("evaluate.row_scores", e.to_string())),
        (None, Ok(())) => Err(InputError::field(
            "evaluate.row_scores",
            "holds no row group",
        )),
    }
}
