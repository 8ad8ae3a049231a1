//! The rows scored: the split, its columns, its keys, its digest, and the per-row scores file.

use anyhow::Context;
use runfn_core::InputError;
use runfn_data::row_scores::RowScores;
use runfn_data::shards::SplitEntry;
use runfn_learn::{inputs, score};

/// The split `name` of the shards, which must hold rows.
pub fn split_to_score<'a>(
    shards: &'a inputs::Shards,
    name: &str,
) -> Result<&'a SplitEntry, InputError> {
    let Some(split) = shards.index.splits.get(name) else {
        return Err(InputError::field(
            "--split",
            format!(
                "`{name}` is not a split of {} (splits: {})",
                shards.dir.display(),
                shards
                    .index
                    .splits
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    };
    if split.rows == 0 {
        return Err(InputError::field(
            "--split",
            format!("`{name}` has no rows"),
        ));
    }
    Ok(split)
}

/// Every slice column and the row key are columns of the shards.
pub fn check_columns(
    shards: &inputs::Shards,
    slices: &[String],
    row_key: Option<&str>,
    key_field: &str,
) -> Result<(), InputError> {
    let has = |column: &str| shards.index.columns.iter().any(|c| c.name == column);
    if let Some(column) = slices.iter().find(|c| !has(c)) {
        return Err(InputError::field(
            "manifest.eval.slices",
            format!("`{column}` is not a column of the shards"),
        ));
    }
    if let Some(column) = row_key.filter(|c| !has(c)) {
        return Err(InputError::field(
            key_field,
            format!("`{column}` is not a column of the shards"),
        ));
    }
    Ok(())
}

/// The row key's value on each scored row (taken out of the slices when it is not one), which
/// must be unique in the split.
pub fn take_keys(
    scored: &mut score::Scored,
    row_key: Option<&str>,
    slices: &[String],
    split: &str,
    key_field: &str,
) -> Result<Option<Vec<String>>, InputError> {
    let Some(column) = row_key else {
        return Ok(None);
    };
    let position = scored.slices.iter().position(|(c, _)| c == column);
    let is_slice = slices.iter().any(|s| s == column);
    let values = match position {
        Some(i) if !is_slice => scored.slices.remove(i).1,
        Some(i) => scored.slices[i].1.clone(),
        None => Vec::new(),
    };
    let mut seen = std::collections::HashSet::with_capacity(values.len());
    if let Some(duplicate) = values.iter().find(|v| !seen.insert(v.as_str())) {
        return Err(InputError::field(
            key_field,
            format!("`{column}` is not a key of `{split}`: the value {duplicate} appears twice"),
        ));
    }
    Ok(Some(values))
}

/// The rows digest recomputed from the rows scored, so a baseline scored elsewhere cannot claim
/// these rows; it must be the index's.
pub fn verify_rows_digest(
    shards: &inputs::Shards,
    name: &str,
    split: &SplitEntry,
    scored_rows: usize,
) -> Result<String, InputError> {
    let (rows_blake3, digested) =
        runfn_data::shards::split_rows_digest(&shards.dir, &shards.index, name)
            .map_err(|e| InputError::field("shards", e.to_string()))?;
    if digested != scored_rows as u64
        || split
            .rows_blake3
            .as_ref()
            .is_some_and(|d| *d != rows_blake3)
    {
        return Err(InputError::field(
            "shards",
            format!(
                "{}: the rows of `{name}` do not match the rows digest in index.json",
                shards.dir.display()
            ),
        ));
    }
    Ok(rows_blake3)
}

/// Writes the per-row scores (atomically; to a store through a local file) and returns their
/// blake3.
pub fn write_row_scores(scores: &RowScores, location: &str) -> anyhow::Result<String> {
    if !runfn_storage::is_remote(location) {
        return Ok(scores
            .write(std::path::Path::new(location))
            .map_err(|e| InputError::field("--row-scores", e.to_string()))?);
    }
    let local = runfn_storage::staged_path(location);
    if let Some(parent) = local.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let digest = scores
        .write(&local)
        .map_err(|e| InputError::field("--row-scores", e.to_string()))?;
    runfn_storage::Remote::parse(location)?.upload_file(&local)?;
    Ok(digest)
}
