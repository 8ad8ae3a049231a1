//! Two per-row score files made into pairs: the same rows, the same labels, aligned by key.
//!
//! A comparison on other rows, or on rows whose labels differ, compares nothing, so every
//! mismatch is an input error naming the first row that differs.

use std::collections::HashMap;
use std::path::Path;

use runfn_core::InputError;
use runfn_data::row_scores::RowScores;

use crate::paired::PairedScores;

/// Reads a per-row scores file and checks it is the one the evaluation recorded.
pub fn load(path: &Path, expected_blake3: &str, origin: &str) -> Result<RowScores, InputError> {
    let bytes = runfn_core::side_file::read_bounded(path, runfn_core::side_file::MODEL_LIMIT)?;
    let digest = blake3::hash(&bytes).to_hex().to_string();
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
    RowScores::read(path)
        .map_err(|e| InputError::field(format!("{origin}.row_scores"), e.to_string()))
}

/// Aligns the baseline's rows to the candidate's. Both must hold exactly the same keys, each once,
/// with the same label.
pub fn pair(candidate: &RowScores, baseline: &RowScores) -> Result<PairedScores, InputError> {
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
    let keys = |scores: &RowScores| -> Vec<String> {
        match &scores.keys {
            Some(keys) => keys.clone(),
            None => scores.rows.iter().map(u64::to_string).collect(),
        }
    };
    let (c_keys, b_keys) = (keys(candidate), keys(baseline));
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(b_keys.len());
    for (i, key) in b_keys.iter().enumerate() {
        if index.insert(key.as_str(), i).is_some() {
            return Err(refuse(format!(
                "the baseline's scores hold row {key} twice"
            )));
        }
    }
    let mut order = Vec::with_capacity(c_keys.len());
    let mut seen = std::collections::HashSet::with_capacity(c_keys.len());
    for (i, key) in c_keys.iter().enumerate() {
        if !seen.insert(key.as_str()) {
            return Err(refuse(format!(
                "the candidate's scores hold row {key} twice"
            )));
        }
        let Some(&j) = index.get(key.as_str()) else {
            return Err(refuse(format!(
                "the candidate's scores ({} rows) and the baseline's ({} rows) do not cover the same rows: row {key} is the candidate's only",
                c_keys.len(),
                b_keys.len()
            )));
        };
        if candidate.labels[i] != baseline.labels[j] {
            return Err(refuse(format!(
                "row {key} is labelled {} in the candidate's scores and {} in the baseline's",
                candidate.labels[i], baseline.labels[j]
            )));
        }
        order.push(j);
    }
    if b_keys.len() != c_keys.len() {
        let extra = b_keys
            .iter()
            .find(|k| !seen.contains(k.as_str()))
            .cloned()
            .unwrap_or_default();
        return Err(refuse(format!(
            "the candidate's scores ({} rows) and the baseline's ({} rows) do not cover the same rows: row {extra} is the baseline's only",
            c_keys.len(),
            b_keys.len()
        )));
    }
    // Slices come from the candidate's file; the baseline's, when it has the column, must agree.
    let mut slices = candidate.slices.clone();
    for (column, values) in &baseline.slices {
        if let Some((_, mine)) = slices.iter().find(|(c, _)| c == column) {
            if let Some(i) = (0..mine.len()).find(|&i| mine[i] != values[order[i]]) {
                return Err(refuse(format!(
                    "row {}: slice column `{column}` is `{}` in the candidate's scores and `{}` in the baseline's",
                    c_keys[i], mine[i], values[order[i]]
                )));
            }
        } else {
            slices.push((
                column.clone(),
                order.iter().map(|&j| values[j].clone()).collect(),
            ));
        }
    }
    Ok(PairedScores {
        candidate: candidate.scores.clone(),
        baseline: order.iter().map(|&j| baseline.scores[j]).collect(),
        labels: candidate.labels.clone(),
        slices,
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

    #[test]
    fn aligns_by_key_and_refuses_other_rows() {
        let c = scores(&[0, 1, 2], &[true, false, true], &[0.9, 0.1, 0.8]);
        let b = scores(&[2, 0, 1], &[true, true, false], &[0.7, 0.6, 0.2]);
        let paired = pair(&c, &b).unwrap();
        assert_eq!(paired.baseline, [0.6, 0.2, 0.7]);
        assert_eq!(paired.labels, [true, false, true]);

        let other = scores(&[0, 1, 3], &[true, false, true], &[0.6, 0.2, 0.7]);
        let err = pair(&c, &other).unwrap_err().to_string();
        assert_eq!(
            err,
            "row_scores: the candidate's scores (3 rows) and the baseline's (3 rows) do not cover the same rows: row 2 is the candidate's only"
        );
        let fewer = scores(&[0, 1], &[true, false], &[0.6, 0.2]);
        assert!(
            pair(&c, &fewer)
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
            pair(&c, &more)
                .unwrap_err()
                .to_string()
                .ends_with("row 3 is the baseline's only")
        );
        let mut elsewhere = scores(&[0, 1, 2], &[true, false, true], &[0.6, 0.2, 0.7]);
        elsewhere.rows_blake3 = "b".repeat(64);
        let mut here = c.clone();
        here.rows_blake3 = "a".repeat(64);
        assert!(pair(&here, &elsewhere).unwrap_err().to_string().ends_with(
            "rows_blake3 aaaaaaaaaaaa and the baseline's of bbbbbbbbbbbb: not the same test split"
        ));
        let relabelled = scores(&[0, 1, 2], &[true, true, true], &[0.6, 0.2, 0.7]);
        assert_eq!(
            pair(&c, &relabelled).unwrap_err().to_string(),
            "row_scores: row 1 is labelled false in the candidate's scores and true in the baseline's"
        );
    }
}
