//! The rows scored: the split, its columns, its keys, its digest, and the per-row scores file.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::Context;
use runfn_core::InputError;
use runfn_core::atomic::AtomicFile;
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

/// The rows digest of the split and the rows it covers. Where the record names the index
/// (its blake3 checked) and every shard was re-hashed against it, the index's digest is the
/// one shardify computed from these very rows and is taken as it is; otherwise (a folder
/// named by --shards alone, or an index from before digests were kept) it is computed again
/// from the rows, so a baseline scored elsewhere cannot claim rows it did not score.
pub fn rows_digest(
    shards: &inputs::Shards,
    name: &str,
    split: &SplitEntry,
) -> Result<(String, u64), InputError> {
    if let (true, Some(digest)) = (shards.named_by_record, &split.rows_blake3) {
        return Ok((digest.clone(), split.rows));
    }
    let (rows_blake3, digested) =
        runfn_data::shards::split_rows_digest(&shards.dir, &shards.index, name)
            .map_err(|e| InputError::field("shards", e.to_string()))?;
    if split
        .rows_blake3
        .as_ref()
        .is_some_and(|d| *d != rows_blake3)
    {
        return Err(rows_do_not_match(shards, name));
    }
    Ok((rows_blake3, digested))
}

/// The rows scored are the rows digested.
pub fn check_rows_scored(
    shards: &inputs::Shards,
    name: &str,
    digested: u64,
    scored: u64,
) -> Result<(), InputError> {
    if digested != scored {
        return Err(rows_do_not_match(shards, name));
    }
    Ok(())
}

fn rows_do_not_match(shards: &inputs::Shards, name: &str) -> InputError {
    InputError::field(
        "shards",
        format!(
            "{}: the rows of `{name}` do not match the rows digest in index.json",
            shards.dir.display()
        ),
    )
}

/// The bootstrap resamples the rows, so it holds every row's score and label, and a copy of
/// them for each thread drawing resamples: that must fit in the budget.
pub fn check_bootstrap_fits(rows: u64, memory: u64) -> Result<(), InputError> {
    const ROW_BYTES: u64 = 9;
    let copies = 1 + rayon::current_num_threads() as u64;
    let needed = rows * ROW_BYTES * copies;
    if needed > memory {
        return Err(InputError::field(
            "--bootstrap",
            format!(
                "resamples every row in memory: {rows} rows at {ROW_BYTES} bytes, {copies} copies (one per thread and the rows themselves), need {needed} bytes, more than --memory {memory}; raise --memory or leave out --bootstrap"
            ),
        ));
    }
    Ok(())
}

/// Refuses a row key that is not a key of the split: the first row whose key an earlier row
/// has, its text read back from the shards (`repeats` are pairs of rows whose keys hash alike,
/// earliest repeat first).
pub fn refuse_repeated_keys(
    shards: &[std::path::PathBuf],
    column: &str,
    repeats: &[(u64, u64)],
    split: &str,
    key_field: &str,
) -> anyhow::Result<()> {
    if repeats.is_empty() {
        return Ok(());
    }
    let wanted = repeats.iter().flat_map(|&(a, b)| [a, b]).collect();
    let texts = score::values_of_rows(shards, &[column], &wanted)?;
    let text = |row: u64| {
        texts
            .get(&row)
            .and_then(|v| v.first())
            .map(|(_, t)| t.clone())
    };
    for &(first, again) in repeats {
        if let Some(value) = text(again).filter(|t| Some(t) == text(first).as_ref()) {
            return Err(InputError::field(
                key_field,
                format!("`{column}` is not a key of `{split}`: the value {value} appears twice"),
            )
            .into());
        }
    }
    Ok(())
}

/// The row scores file as it is written: a temp file beside its path (the staged copy's, for
/// a store URL), hashed as the bytes go out, that appears whole on [`RowScoresFile::commit`].
pub struct RowScoresFile {
    location: String,
    file: AtomicFile,
}

/// Writes through to `inner`, hashing what it writes.
pub struct Hashing<W: Write> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl RowScoresFile {
    pub fn create(location: &str) -> anyhow::Result<RowScoresFile> {
        let local = if runfn_storage::is_remote(location) {
            let local = runfn_storage::staged_path(location);
            if let Some(parent) = local.parent() {
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            local
        } else {
            std::path::PathBuf::from(location)
        };
        let file = AtomicFile::create(&local)
            .map_err(|e| InputError::field("--row-scores", e.to_string()))?;
        Ok(RowScoresFile {
            location: location.to_string(),
            file,
        })
    }

    /// A writer of the file's bytes.
    pub fn writer(&mut self) -> anyhow::Result<Hashing<BufWriter<File>>> {
        let file = self
            .file
            .file_mut()
            .try_clone()
            .context("writing the row scores")?;
        Ok(Hashing {
            inner: BufWriter::new(file),
            hasher: blake3::Hasher::new(),
        })
    }

    /// Puts the file in place (and in the store, for a URL); returns its blake3.
    pub fn commit(self, mut written: Hashing<BufWriter<File>>) -> anyhow::Result<String> {
        written.flush().context("writing the row scores")?;
        let digest = written.hasher.finalize().to_hex().to_string();
        drop(written);
        self.file.commit()?;
        if runfn_storage::is_remote(&self.location) {
            runfn_storage::Remote::parse(&self.location)?
                .upload_file(&runfn_storage::staged_path(&self.location))?;
        }
        Ok(digest)
    }
}
