//! Two per-row score files made into pairs: the same rows, the same labels, aligned by key.
//!
//! A comparison on other rows, or on rows whose labels differ, compares nothing, so every
//! mismatch is an input error naming the first row that differs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use runfn_core::InputError;
use runfn_data::row_scores::RowScores;

use crate::paired::{PairedScores, SliceValues};

/// One per-row scores file, held as the paired test needs it: each key as a 128-bit hash (its
/// text is read back from the file only to name a row in an error), each slice value as an
/// index into the column's few distinct values. About 33 bytes a row with two slice columns,
/// where the file's rows as text took ten times that.
#[derive(Debug, Clone, Default)]
pub struct ScoredRows {
    path: PathBuf,
    pub rows_blake3: String,
    pub key_column: Option<String>,
    keys: Vec<u128>,
    pub labels: Vec<bool>,
    pub scores: Vec<f64>,
    pub slices: Vec<(String, SliceValues)>,
}

/// Bytes a row takes while two files of `slices` slice columns are paired, the peak of a gate:
/// both files' keys, scores, labels and slice indices, and the sorted key index (32 bytes a
/// row where the files' rows are in another order, 16 where they are not). Measured: 617 MiB
/// for 6,422,934 rows of two slice columns, 96 bytes a row with the reader's buffers.
pub fn bytes_per_row(slices: usize) -> u64 {
    2 * (16 + 8 + 1 + 4 * slices as u64) + 32
}

/// Refuses to pair `rows` rows of `slices` slice columns within `memory` bytes when they do not
/// fit, before any is read: a clear refusal rather than the kernel's out-of-memory kill.
pub fn check_fits(rows: u64, slices: usize, memory: u64) -> Result<(), InputError> {
    let per_row = bytes_per_row(slices);
    let needed = rows.saturating_mul(per_row);
    if needed > memory {
        return Err(InputError::field(
            "--memory",
            format!(
                "the paired test holds both models' scores for every row: {rows} rows at {per_row} bytes need {needed} bytes, more than --memory {memory}; raise --memory"
            ),
        ));
    }
    Ok(())
}

/// The rows and slice columns of a per-row scores file, from its footer.
pub fn shape(path: &Path, origin: &str) -> Result<(u64, usize), InputError> {
    RowScores::shape(path)
        .map_err(|e| InputError::field(format!("{origin}.row_scores"), e.to_string()))
}

impl ScoredRows {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The key of row `row` as its text: read back from the file.
    fn key_text(&self, row: usize) -> String {
        key_text_at(&self.path, row)
    }
}

/// The key of row `row` of the per-row scores file at `path`, as its text (an error's name for
/// a row; the file is read up to it).
pub(crate) fn key_text_at(path: &Path, row: usize) -> String {
    let mut seen = 0usize;
    let mut found = None;
    let _ = RowScores::read_each(path, |chunk| {
        if found.is_none() && row < seen + chunk.len() {
            let at = row - seen;
            found = Some(match &chunk.keys {
                Some(keys) => keys[at].clone(),
                None => chunk.rows[at].to_string(),
            });
        }
        seen += chunk.len();
        if found.is_some() {
            return Err(runfn_data::DataError::Other("read no further".into()));
        }
        Ok(())
    });
    found.unwrap_or_else(|| format!("#{row}"))
}

/// The row at which `keys` first holds a key it held before, given `keys` sorted (none when
/// no key repeats: the common case costs the sort alone).
fn first_repeat(keys: &[u128], sorted: &[u128]) -> Option<usize> {
    let repeated: std::collections::HashSet<u128> = sorted
        .windows(2)
        .filter(|pair| pair[0] == pair[1])
        .map(|pair| pair[0])
        .collect();
    let mut seen = std::collections::HashSet::new();
    keys.iter()
        .position(|k| repeated.contains(k) && !seen.insert(*k))
}

pub(crate) fn key_hash(text: &str) -> u128 {
    let hash = blake3::hash(text.as_bytes());
    u128::from_le_bytes(hash.as_bytes()[..16].try_into().expect("16 bytes"))
}

/// Reads a per-row scores file the evaluation recorded as `expected_blake3`: checked, then
/// read a row group at a time.
pub fn load(path: &Path, expected_blake3: &str, origin: &str) -> Result<ScoredRows, InputError> {
    check_unchanged(path, expected_blake3, origin)?;
    read(path, origin)
}

/// Refuses a per-row scores file that is not the one the evaluation recorded (hashed as a
/// stream: the file is never held whole).
pub fn check_unchanged(path: &Path, expected_blake3: &str, origin: &str) -> Result<(), InputError> {
    let digest = runfn_core::side_file::blake3_bounded(path, runfn_core::side_file::MODEL_LIMIT)?;
    if digest != expected_blake3 {
        return Err(InputError::field(
            format!("{origin}.row_scores.blake3"),
            format!(
                "{} has blake3 {}, but the evaluation recorded {}: the file changed after it was scored",
                path.display(),
                &digest[..12],
                expected_blake3.get(..12).unwrap_or(expected_blake3)
            ),
        ));
    }
    Ok(())
}

/// Reads a per-row scores file a row group at a time into what the paired test holds.
pub fn read(path: &Path, origin: &str) -> Result<ScoredRows, InputError> {
    let mut out = ScoredRows {
        path: path.to_path_buf(),
        ..ScoredRows::default()
    };
    let mut ids: Vec<HashMap<String, u32>> = Vec::new();
    let mut first = true;
    RowScores::read_each(path, |chunk| {
        if first {
            first = false;
            out.rows_blake3 = chunk.rows_blake3.clone();
            out.key_column = chunk.key_column.clone();
            out.slices = chunk
                .slices
                .iter()
                .map(|(column, _)| (column.clone(), SliceValues::default()))
                .collect();
            ids = vec![HashMap::new(); out.slices.len()];
        }
        match &chunk.keys {
            Some(keys) => out.keys.extend(keys.iter().map(|k| key_hash(k))),
            None => out
                .keys
                .extend(chunk.rows.iter().map(|r| key_hash(&r.to_string()))),
        }
        out.labels.extend(&chunk.labels);
        out.scores.extend(&chunk.scores);
        for (((_, target), (_, values)), index) in
            out.slices.iter_mut().zip(&chunk.slices).zip(&mut ids)
        {
            for value in values {
                let id = match index.get(value) {
                    Some(&id) => id,
                    None => {
                        let id = target.names.len() as u32;
                        target.names.push(value.clone());
                        index.insert(value.clone(), id);
                        id
                    }
                };
                target.ids.push(id);
            }
        }
        Ok(())
    })
    .map_err(|e| InputError::field(format!("{origin}.row_scores"), e.to_string()))?;
    Ok(out)
}

/// Aligns the baseline's rows to the candidate's. Both must hold exactly the same keys, each once,
/// with the same label; every refusal names the first row (in the files' order) that differs.
pub fn pair(candidate: ScoredRows, baseline: ScoredRows) -> Result<PairedScores, InputError> {
    let refuse = |message: String| InputError::field("row_scores", message);
    if candidate.key_column != baseline.key_column {
        return Err(refuse(format!(
            "the candidate's rows are keyed by {} and the baseline's by {}",
            candidate.key_column.as_deref().unwrap_or("position"),
            baseline.key_column.as_deref().unwrap_or("position")
        )));
    }
    if !candidate.rows_blake3.is_empty()
        && !baseline.rows_blake3.is_empty()
        && candidate.rows_blake3 != baseline.rows_blake3
    {
        let short = |d: &str| d.get(..12).unwrap_or(d).to_string();
        return Err(refuse(format!(
            "the candidate's scores are of the rows with rows_blake3 {} and the baseline's of {}: not the same test split",
            short(&candidate.rows_blake3),
            short(&baseline.rows_blake3)
        )));
    }
    // Rows in the same order in both files (the same split scored the same way) need no
    // lookup, only a check that no key repeats. Otherwise the baseline's keys are sorted with
    // their rows: a key's rows in row order, so the first repeat in the baseline's order is
    // the group's second row.
    let same_order = candidate.keys == baseline.keys;
    let index: Vec<(u128, u32)> = if same_order {
        let mut sorted = baseline.keys.clone();
        sorted.sort_unstable();
        if let Some(first) = first_repeat(&baseline.keys, &sorted) {
            return Err(refuse(format!(
                "the baseline's scores hold row {} twice",
                baseline.key_text(first)
            )));
        }
        Vec::new()
    } else {
        let mut index: Vec<(u128, u32)> = baseline
            .keys
            .iter()
            .enumerate()
            .map(|(j, &k)| (k, j as u32))
            .collect();
        index.sort_unstable();
        if let Some(j) = index
            .windows(2)
            .filter(|pair| pair[0].0 == pair[1].0)
            .map(|pair| pair[1].1)
            .min()
        {
            return Err(refuse(format!(
                "the baseline's scores hold row {} twice",
                baseline.key_text(j as usize)
            )));
        }
        index
    };
    let mut used = vec![false; baseline.len()];
    let mut order: Vec<u32> = Vec::with_capacity(candidate.len());
    for (i, key) in candidate.keys.iter().enumerate() {
        let found = if same_order {
            Some(i)
        } else {
            index
                .binary_search_by(|(k, _)| k.cmp(key))
                .ok()
                .map(|at| index[at].1 as usize)
        };
        let Some(j) = found else {
            return Err(refuse(format!(
                "the candidate's scores ({} rows) and the baseline's ({} rows) do not cover the same rows: row {} is the candidate's only",
                candidate.len(),
                baseline.len(),
                candidate.key_text(i)
            )));
        };
        if used[j] {
            return Err(refuse(format!(
                "the candidate's scores hold row {} twice",
                candidate.key_text(i)
            )));
        }
        used[j] = true;
        if candidate.labels[i] != baseline.labels[j] {
            return Err(refuse(format!(
                "row {} is labelled {} in the candidate's scores and {} in the baseline's",
                candidate.key_text(i),
                candidate.labels[i],
                baseline.labels[j]
            )));
        }
        order.push(j as u32);
    }
    drop(index);
    if baseline.len() != candidate.len() {
        let extra = used
            .iter()
            .position(|u| !u)
            .map(|j| baseline.key_text(j))
            .unwrap_or_default();
        return Err(refuse(format!(
            "the candidate's scores ({} rows) and the baseline's ({} rows) do not cover the same rows: row {extra} is the baseline's only",
            candidate.len(),
            baseline.len()
        )));
    }
    // Slices come from the candidate's file; the baseline's, when it has the column, must agree.
    let mut slices = candidate.slices.clone();
    for (column, values) in &baseline.slices {
        if let Some((_, mine)) = slices.iter().find(|(c, _)| c == column) {
            if let Some(i) =
                (0..mine.ids.len()).find(|&i| mine.name(i) != values.name(order[i] as usize))
            {
                return Err(refuse(format!(
                    "row {}: slice column `{column}` is `{}` in the candidate's scores and `{}` in the baseline's",
                    candidate.key_text(i),
                    mine.name(i),
                    values.name(order[i] as usize)
                )));
            }
        } else {
            slices.push((
                column.clone(),
                SliceValues {
                    names: values.names.clone(),
                    ids: order.iter().map(|&j| values.ids[j as usize]).collect(),
                },
            ));
        }
    }
    let baseline_scores = order.iter().map(|&j| baseline.scores[j as usize]).collect();
    Ok(PairedScores {
        candidate: candidate.scores,
        baseline: baseline_scores,
        labels: candidate.labels,
        slices,
        spilled: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(rows: &[u64], labels: &[bool], scores: &[f64]) -> RowScores {
        RowScores {
            split: "test".into(),
            rows: rows.to_vec(),
            labels: labels.to_vec(),
            scores: scores.to_vec(),
            slices: vec![(
                "tier".into(),
                rows.iter().map(|r| format!("t{}", r % 2)).collect(),
            )],
            ..RowScores::default()
        }
    }

    /// The scores written as evaluate writes them, and loaded as the gate loads them.
    struct Files {
        dir: tempfile::TempDir,
        next: std::cell::Cell<usize>,
    }

    impl Files {
        fn new() -> Files {
            Files {
                dir: tempfile::tempdir().unwrap(),
                next: std::cell::Cell::new(0),
            }
        }

        fn held(&self, scores: &RowScores) -> ScoredRows {
            let path = self.dir.path().join(format!("{}.parquet", self.next.get()));
            self.next.set(self.next.get() + 1);
            let blake3 = scores.write(&path).unwrap();
            load(&path, &blake3, "evaluate").unwrap()
        }

        fn pair(&self, c: &RowScores, b: &RowScores) -> Result<PairedScores, InputError> {
            pair(self.held(c), self.held(b))
        }
    }

    #[test]
    fn aligns_by_key_and_refuses_other_rows() {
        let files = Files::new();
        let c = scores(&[0, 1, 2], &[true, false, true], &[0.9, 0.1, 0.8]);
        let b = scores(&[2, 0, 1], &[true, true, false], &[0.7, 0.6, 0.2]);
        let paired = files.pair(&c, &b).unwrap();
        assert_eq!(paired.baseline, [0.6, 0.2, 0.7]);
        assert_eq!(paired.labels, [true, false, true]);

        let other = scores(&[0, 1, 3], &[true, false, true], &[0.6, 0.2, 0.7]);
        let err = files.pair(&c, &other).unwrap_err().to_string();
        assert_eq!(
            err,
            "row_scores: the candidate's scores (3 rows) and the baseline's (3 rows) do not cover the same rows: row 2 is the candidate's only"
        );
        let fewer = scores(&[0, 1], &[true, false], &[0.6, 0.2]);
        assert!(
            files
                .pair(&c, &fewer)
                .unwrap_err()
                .to_string()
                .contains("(2 rows)")
        );
        let more = scores(
            &[0, 1, 2, 3],
            &[true, false, true, true],
            &[0.6, 0.2, 0.7, 0.1],
        );
        assert!(
            files
                .pair(&c, &more)
                .unwrap_err()
                .to_string()
                .ends_with("row 3 is the baseline's only")
        );
        let mut elsewhere = scores(&[0, 1, 2], &[true, false, true], &[0.6, 0.2, 0.7]);
        elsewhere.rows_blake3 = "b".repeat(64);
        let mut here = c.clone();
        here.rows_blake3 = "a".repeat(64);
        assert!(files.pair(&here, &elsewhere).unwrap_err().to_string().ends_with(
            "rows_blake3 aaaaaaaaaaaa and the baseline's of bbbbbbbbbbbb: not the same test split"
        ));
        let relabelled = scores(&[0, 1, 2], &[true, true, true], &[0.6, 0.2, 0.7]);
        assert_eq!(
            files.pair(&c, &relabelled).unwrap_err().to_string(),
            "row_scores: row 1 is labelled false in the candidate's scores and true in the baseline's"
        );
    }

    #[test]
    fn rows_in_the_same_order_pair_without_a_lookup_and_repeats_are_refused() {
        let files = Files::new();
        let c = scores(
            &[0, 1, 2, 3],
            &[true, false, true, false],
            &[0.9, 0.1, 0.8, 0.3],
        );
        let b = scores(
            &[0, 1, 2, 3],
            &[true, false, true, false],
            &[0.7, 0.6, 0.2, 0.4],
        );
        let paired = files.pair(&c, &b).unwrap();
        assert_eq!(paired.baseline, [0.7, 0.6, 0.2, 0.4]);
        assert_eq!(paired.slices[0].1.names, ["t0", "t1"]);
        assert_eq!(paired.slices[0].1.ids, [0, 1, 0, 1]);

        let twice = scores(
            &[0, 1, 1, 3],
            &[true, false, false, false],
            &[0.7, 0.6, 0.2, 0.4],
        );
        assert_eq!(
            files.pair(&c, &twice).unwrap_err().to_string(),
            "row_scores: the baseline's scores hold row 1 twice"
        );
        let repeated = scores(
            &[0, 3, 0, 1],
            &[true, false, true, false],
            &[0.7, 0.6, 0.2, 0.4],
        );
        assert_eq!(
            files.pair(&repeated, &c).unwrap_err().to_string(),
            "row_scores: the candidate's scores hold row 0 twice"
        );
        let mut moved = b.clone();
        moved.slices[0].1[2] = "t9".into();
        assert_eq!(
            files.pair(&c, &moved).unwrap_err().to_string(),
            "row_scores: row 2: slice column `tier` is `t0` in the candidate's scores and `t9` in the baseline's"
        );
    }
}
