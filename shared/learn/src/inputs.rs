//! What `train` and `evaluate` read from the run record: where the shards are and which
//! columns the data spec reserves (never features).

use std::path::PathBuf;

use runfn_core::{InputError, Record};
use runfn_data::shards::ShardIndex;
use runfn_data::spec::DataSpec;

use crate::features::Reserved;

#[derive(Debug)]
pub struct Shards {
    pub dir: PathBuf,
    pub index: ShardIndex,
    pub index_blake3: String,
    /// The record's shards section names this index (its blake3 matched): the index's rows
    /// digests are the ones shardify computed from these very shards (each re-hashed above).
    pub named_by_record: bool,
}

/// The shard folder from `flag` or the record's `shards.dir`; its index is loaded and every shard
/// re-hashed, so a missing, truncated or altered shard is refused before any work.
pub fn shards(record: &Record, flag: Option<PathBuf>) -> Result<Shards, InputError> {
    let shards = shards_unverified(record, flag)?;
    shards
        .index
        .verify(&shards.dir)
        .map_err(|e| InputError::field("shards", e.to_string()))?;
    Ok(shards)
}

/// [`shards`] with no shard re-hashed yet: for a part, which checks the shards it reads
/// ([`runfn_data::shards::verify_shards`]) and no others.
pub fn shards_unverified(record: &Record, flag: Option<PathBuf>) -> Result<Shards, InputError> {
    let section = record.section::<runfn_schema::record::Shards>()?;
    let dir = match (flag, &section) {
        (Some(dir), _) => dir,
        (None, Some(section)) => PathBuf::from(&section.dir),
        (None, None) => {
            return Err(InputError::field(
                "--shards",
                "is missing and the record has no shards section (run shardify first)",
            ));
        }
    };
    // A store URL: the set is staged into the local cache (shards, then the index).
    let dir = runfn_data::shards::local_shards(&dir)?;
    // The index's hash is checked against the record before any shard is opened: an index
    // that is not the one shardify wrote may name anything.
    let index_blake3 =
        ShardIndex::file_blake3(&dir).map_err(|e| InputError::field("shards", e.to_string()))?;
    if let Some(expected) = section.as_ref().map(|s| &s.index_blake3)
        && *expected != index_blake3
    {
        return Err(InputError::field(
            "shards.index_blake3",
            format!(
                "{}: index.json changed since shardify wrote this record (blake3 {index_blake3}, record says {expected})",
                dir.display()
            ),
        ));
    }
    let index =
        ShardIndex::load(&dir, false).map_err(|e| InputError::field("shards", e.to_string()))?;
    // Each split's rows digest in the record is the index's: the rows train reads are the
    // rows shardify wrote and every later stage names.
    if let Some(section) = &section {
        for (split, written) in &section.splits {
            let indexed = index
                .splits
                .get(split)
                .and_then(|s| s.rows_blake3.as_deref());
            if indexed != Some(written.rows_blake3.as_str()) {
                return Err(InputError::field(
                    format!("shards.splits.{split}.rows_blake3"),
                    format!(
                        "{}: the index's rows digest of `{split}` is {}, the record says {}",
                        dir.display(),
                        indexed.unwrap_or("missing"),
                        written.rows_blake3
                    ),
                ));
            }
        }
    }
    Ok(Shards {
        dir,
        index,
        index_blake3,
        named_by_record: section.is_some(),
    })
}

/// The label (required) and the columns that are never features by default: the entity, the
/// time columns, free text and as-of stamps.
pub fn reserved(record: &Record) -> Result<Reserved, InputError> {
    let spec = DataSpec::from_record(record)?;
    let label = spec.label.clone().ok_or_else(|| {
        InputError::field(
            "manifest.data.label",
            "is missing: training needs the label column",
        )
    })?;
    let mut others: Vec<String> = [&spec.entity, &spec.time, &spec.label_time]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    others.extend(spec.text.iter().cloned());
    others.extend(spec.as_of.values().cloned());
    Ok(Reserved {
        label,
        label_positive: spec.label_positive,
        others,
    })
}
