//! shardify in parts: parts that each read some files into key-sorted runs, an array of
//! reducers that each write a contiguous run of the output shards, and a merge that writes the
//! index. The shards, the index and the record are byte for byte one process's.
//!
//! - A part (`--part K/N --parts DIR`) reads its files (a contiguous run of the snapshot's,
//!   balanced by bytes) and keys each row as one process does: from the seed and the row's place
//!   in the whole snapshot. It measures every file's rows, as one process does, so that it cuts
//!   the key space into the same buckets and samples the same rows. Each (split, bucket) slot's
//!   sorted runs go to `DIR/shardify.part-K-of-N.slots/slot-I.arrows`; then its partial: rows
//!   and blake3 per slot file, rows per split, bad values, its files' hashes and its sample of
//!   distinct values.
//! - A reducer (`--reduce R/M --parts DIR --out OUT`) takes a contiguous run of the output
//!   shards (the splits' shards one after another, balanced by rows). The slots' row counts
//!   place every bucket in its split's order, so a reducer reads only the buckets its shards
//!   cover, from every part, merges them by key and writes its shards under their final names.
//!   A shard's bytes depend on its own rows alone (see `SplitWriter::starting_at`).
//! - The merge (`--parts DIR --out OUT`) checks that the reducers wrote every shard of these
//!   parts, re-hashes the shards, computes each split's rows digest from them and writes the
//!   index last. With no reducer's partial in DIR it does the reduction itself first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use arrow::array::RecordBatch;
use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use rayon::prelude::*;
use runfn_core::parts::{Part, PartDone, PartHeader, assign, read_partials, relative_name};
use runfn_manifest::digest::{FileDigest, KnownHash, Listing};
use runfn_schema::record::ResolvedSplit;
use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::hashing_reader::ReadHash;
use crate::read::{BadValues, Snapshot};
use crate::shards::cardinality::DistinctSample;
use crate::shards::column_parallel::GroupSlots;
use crate::shards::file_read::{ReadPlan, ShardProgress};
use crate::shards::index::{INDEX_FORMAT, INDEX_NAME, ShardEntry, ShardIndex, Source, SplitEntry};
use crate::shards::keys::{keyed_schema, splitmix64};
use crate::shards::runs::{gather_in_order, key_order};
use crate::shards::shuffle::{
    Gathered, ShardOptions, Sizes, background_row_groups, chunk_bytes, piece_rows, read_files,
    remove_stale_shards, write_index,
};
use crate::shards::spill::{Slot, decode_runs};
use crate::shards::writer::{ShardWriterOptions, SplitWriter, remove_if_present, sync_dir};
use crate::split::Splits;
use crate::types::{Column, arrow_schema};

/// The parts' partials are `shardify.part-K-of-N.json`, the reducers'
/// `shardify-reduce.part-R-of-M.json`.
pub const PART_TOOL: &str = "shardify";
pub const REDUCE_TOOL: &str = "shardify-reduce";
const PART_FORMAT: &str = "shardify-part-v1";
const REDUCE_FORMAT: &str = "shardify-reduce-v1";

/// What every part must have been run with: the reducers and the merge refuse parts that differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartSettings {
    pub seed: u64,
    pub shard_rows: u64,
    pub row_group_rows: u64,
    pub zstd_level: i32,
    /// Buckets of the key space per split: from every file's measured rows and `--memory`.
    pub buckets: u64,
    pub columns: Vec<Column>,
    /// The splits, in manifest order: name, rule, and whether it is a rolling window.
    pub splits: Vec<SplitRule>,
    /// The rolling splits as resolved against the snapshot's newest time.
    pub resolved: Vec<(String, ResolvedSplit)>,
    /// How the index names the snapshot.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitRule {
    pub name: String,
    pub rule: String,
    pub window: bool,
}

/// A part's partial.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardPart {
    pub part: PartHeader,
    pub settings: PartSettings,
    /// Its files' hashes, as read (for the snapshot's digest).
    pub files: Vec<FileDigest>,
    /// Rows per split, the last in no split.
    pub counts: Vec<u64>,
    pub bad_values: BadValues,
    /// Rows spilled and their bytes in memory (the writers' row-group estimate).
    pub spilled_rows: u64,
    pub spilled_bytes: u64,
    pub sample: DistinctSample,
    /// Per slot (`split * buckets + bucket`): its rows and its file's blake3 (none: no rows).
    pub slots: Vec<SlotFile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotFile {
    pub rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

/// A reducer's partial: the shards it wrote, per split, in order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReducePartial {
    /// `listing` is the parts' run ([`Mapped::run`]); the units are the output shards.
    pub part: PartHeader,
    pub splits: BTreeMap<String, Vec<ShardEntry>>,
}

fn slots_dir_name(part: Part) -> String {
    format!("{PART_TOOL}.part-{}-of-{}.slots", part.index, part.count)
}

/// Reads part `part`'s files of `snapshot` into slot files under `dir`, and writes its partial.
pub fn shardify_part(
    snapshot: &Snapshot,
    splits: &Splits,
    options: &ShardOptions,
    part: Part,
    dir: &Path,
    progress: ShardProgress,
) -> Result<PartDone, DataError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| DataError::Io { path, source }
    };
    let weights: Vec<u64> = snapshot.files.iter().map(|f| f.bytes).collect();
    let assignment = assign(&weights, part.count);
    let mine: Vec<usize> = (0..weights.len())
        .filter(|&i| assignment[i] == part.index)
        .collect();
    let sizes = Sizes::of(snapshot, options.memory_bytes)?;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    // An earlier run of this part: its partial goes first, so nothing pairs it with new slots;
    // and what a killed run of it left (a slots folder not yet renamed into place).
    remove_if_present(&part.path(dir, PART_TOOL))?;
    sweep_killed(dir, &format!(".{}.tmp", slots_dir_name(part)))?;
    let work = tempfile::Builder::new()
        .prefix(&format!(".{}.tmp", slots_dir_name(part)))
        .tempdir_in(dir)
        .map_err(io(dir))?;
    let keyed = keyed_schema(&snapshot.schema);
    let split_count = splits.splits.len();
    let slot_count = split_count * sizes.buckets as usize;
    let buffer_bytes = Slot::buffer_bytes(options.memory_bytes, slot_count);
    let slots: Vec<Mutex<Slot>> = (0..slot_count)
        .map(|i| Mutex::new(Slot::new(work.path().join(slot_name(i)), buffer_bytes)))
        .collect();
    let read_rows = std::sync::atomic::AtomicU64::new(0);
    let plan = ReadPlan {
        snapshot,
        splits,
        keyed_schema: &keyed,
        slots: &slots,
        buckets: sizes.buckets,
        seed_mix: splitmix64(options.seed),
        chunk_bytes: chunk_bytes(options.memory_bytes),
        estimated_rows: sizes.estimated_rows,
        read_rows: &read_rows,
        progress,
        started: std::sync::atomic::AtomicUsize::new(snapshot.files.len() - mine.len()),
    };
    let read_hashes: Vec<ReadHash> = snapshot.files.iter().map(|_| ReadHash::default()).collect();
    let reads = read_files(&plan, &mine, &sizes, options.memory_bytes, &read_hashes)?;
    let Gathered {
        bad_values,
        counts,
        spilled_rows,
        spilled_bytes,
        sample,
    } = Gathered::of(
        reads,
        sizes.estimated_rows,
        split_count,
        snapshot.columns.len(),
    );
    let files = mine
        .iter()
        .map(|&i| file_digest(snapshot, i, &read_hashes[i]))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sealed = Vec::with_capacity(slot_count);
    for slot in &slots {
        let mut slot = slot
            .lock()
            .map_err(|_| DataError::Other("a shuffle thread panicked".into()))?;
        let (rows, path) = slot.seal()?;
        sealed.push((rows, path.map(Path::to_path_buf)));
    }
    // Hashed as streams, a slot per core: no slot file is held or mapped whole.
    let slot_files = sealed
        .into_par_iter()
        .map(|(rows, path)| {
            let blake3 = match path {
                Some(path) => Some(hash_file(&path)?.0.to_hex().to_string()),
                None => None,
            };
            Ok(SlotFile { rows, blake3 })
        })
        .collect::<Result<Vec<_>, DataError>>()?;
    drop(slots);
    let slots_dir = dir.join(slots_dir_name(part));
    if slots_dir.exists() {
        std::fs::remove_dir_all(&slots_dir).map_err(io(&slots_dir))?;
    }
    let kept = work.keep();
    std::fs::rename(&kept, &slots_dir).map_err(io(&slots_dir))?;
    sync_dir(dir)?;
    let partial = ShardPart {
        part: PartHeader {
            format: PART_FORMAT.into(),
            part,
            listing: runfn_core::parts::fingerprint(
                snapshot
                    .files
                    .iter()
                    .map(|f| (relative_name(&snapshot.root, &f.path), f.bytes))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(|(name, bytes)| (name.as_str(), *bytes)),
            ),
            units: snapshot.files.len() as u64,
            done: mine.iter().map(|&i| i as u64).collect(),
        },
        settings: PartSettings {
            seed: options.seed,
            shard_rows: options.shard_rows as u64,
            row_group_rows: options.row_group_rows as u64,
            zstd_level: options.zstd_level,
            buckets: sizes.buckets,
            columns: snapshot.columns.clone(),
            splits: splits
                .splits
                .iter()
                .map(|s| SplitRule {
                    name: s.name.clone(),
                    rule: s.rule.clone(),
                    window: s.window.is_some(),
                })
                .collect(),
            resolved: splits.resolved(),
            source: options
                .source_name
                .clone()
                .unwrap_or_else(|| snapshot.root.display().to_string()),
        },
        files,
        counts,
        bad_values,
        spilled_rows,
        spilled_bytes,
        sample,
        slots: slot_files,
    };
    runfn_core::parts::write_partial(
        dir,
        PART_TOOL,
        part,
        &partial,
        (mine.len() as u64, snapshot.files.len() as u64),
    )
    .map_err(DataError::from)
}

/// Removes the folders under `dir` whose names start with `prefix`: a killed part's.
fn sweep_killed(dir: &Path, prefix: &str) -> Result<(), DataError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DataError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            let path = entry.path();
            std::fs::remove_dir_all(&path).map_err(|source| DataError::Io { path, source })?;
        }
    }
    Ok(())
}

/// A digest's failure: an I/O error stays one, the rest (a FIFO in the snapshot) is its fault.
fn from_digest(error: runfn_manifest::digest::DigestError) -> DataError {
    match error {
        runfn_manifest::digest::DigestError::Io { path, source } => DataError::Io { path, source },
        other => DataError::Other(other.to_string()),
    }
}

fn slot_name(slot: usize) -> String {
    format!("slot-{slot}.arrows")
}

/// A file's digest from its read, or hashed now where the reader did not reach its end.
fn file_digest(snapshot: &Snapshot, file: usize, read: &ReadHash) -> Result<FileDigest, DataError> {
    let source = &snapshot.files[file];
    let (hash, bytes) = match read.get() {
        Some(&(hash, bytes)) => (hash, bytes),
        None => hash_file(&source.path)?,
    };
    Ok(FileDigest {
        path: relative_name(&snapshot.root, &source.path),
        bytes,
        blake3: hash.to_hex().to_string(),
    })
}

/// A file's blake3 and length, read as a stream.
fn hash_file(path: &Path) -> Result<KnownHash, DataError> {
    let io = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut hasher = blake3::Hasher::new();
    hasher
        .update_reader(std::fs::File::open(path).map_err(io)?)
        .map_err(io)?;
    Ok((hasher.finalize(), hasher.count()))
}

/// Every part's partial, checked against the others, and what they add up to.
#[derive(Debug)]
pub struct Mapped {
    pub dir: PathBuf,
    pub parts: Vec<ShardPart>,
    pub settings: PartSettings,
    /// blake3 over the partials' bytes in part order: a reducer's partial names the run it
    /// reduced, so the merge refuses reducers of parts rerun since.
    pub run: String,
    /// Rows per slot, over every part.
    pub slot_rows: Vec<u64>,
    /// Rows per split, the last in no split.
    pub counts: Vec<u64>,
}

impl Mapped {
    /// The partials in `dir`, refused by name where one is missing, doubled, of another format
    /// or listing, run with other settings, or not covering the files exactly once in order.
    pub fn read(dir: &Path) -> Result<Mapped, DataError> {
        let texts: Mutex<Vec<String>> = Mutex::new(Vec::new());
        let parts = read_partials(
            dir,
            PART_TOOL,
            |text, origin| {
                let partial: ShardPart = serde_json::from_str(text).map_err(|e| {
                    runfn_core::InputError::field(origin, format!("is not a shardify partial: {e}"))
                })?;
                if let Ok(mut texts) = texts.lock() {
                    texts.push(text.to_string());
                }
                Ok(partial)
            },
            |p: &ShardPart| &p.part,
        )
        .map_err(DataError::from)?;
        let bad = |part: &ShardPart, why: String| {
            DataError::file(part.part.part.path(dir, PART_TOOL), why)
        };
        let first = &parts[0];
        let mut next_unit = 0u64;
        for part in &parts {
            if part.part.format != PART_FORMAT {
                return Err(bad(
                    part,
                    format!("format `{}`, expected `{PART_FORMAT}`", part.part.format),
                ));
            }
            if part.part.listing != first.part.listing || part.part.units != first.part.units {
                return Err(bad(
                    part,
                    format!(
                        "cut another listing of the snapshot than part {}: it changed between the parts",
                        first.part.part
                    ),
                ));
            }
            if let Some(field) = differing(&part.settings, &first.settings) {
                return Err(bad(
                    part,
                    format!(
                        "was run with another {field} than part {}: every part needs the same flags and manifest",
                        first.part.part
                    ),
                ));
            }
            for &unit in &part.part.done {
                if unit != next_unit {
                    return Err(bad(
                        part,
                        format!(
                            "read file {unit} where file {next_unit} was due: the parts do not cover the snapshot in order"
                        ),
                    ));
                }
                next_unit += 1;
            }
            let splits = part.settings.splits.len();
            if part.slots.len() != splits * part.settings.buckets as usize
                || part.counts.len() != splits + 1
            {
                return Err(bad(part, "holds slots or counts of another shape".into()));
            }
        }
        if next_unit != first.part.units {
            return Err(DataError::file(
                dir,
                format!(
                    "the parts read {next_unit} of the snapshot's {} files",
                    first.part.units
                ),
            ));
        }
        let settings = first.settings.clone();
        let mut slot_rows = vec![0u64; first.slots.len()];
        let mut counts = vec![0u64; first.counts.len()];
        for part in &parts {
            for (total, slot) in slot_rows.iter_mut().zip(&part.slots) {
                *total += slot.rows;
            }
            for (total, count) in counts.iter_mut().zip(&part.counts) {
                *total += count;
            }
        }
        let buckets = settings.buckets as usize;
        for (split, rule) in settings.splits.iter().enumerate() {
            let in_slots: u64 = slot_rows[split * buckets..(split + 1) * buckets]
                .iter()
                .sum();
            if in_slots != counts[split] {
                return Err(DataError::file(
                    dir,
                    format!(
                        "split `{}`: the parts' slots hold {in_slots} rows, their counts {}",
                        rule.name, counts[split]
                    ),
                ));
            }
        }
        let mut run = blake3::Hasher::new();
        run.update(b"shardify-parts-run-v1\n");
        for text in texts.lock().map(|t| t.clone()).unwrap_or_default() {
            run.update(&(text.len() as u64).to_le_bytes());
            run.update(text.as_bytes());
        }
        Ok(Mapped {
            dir: dir.to_path_buf(),
            parts,
            settings,
            run: format!("blake3:{}", run.finalize().to_hex()),
            slot_rows,
            counts,
        })
    }

    /// A rolling window that selected no row: refused, as one process refuses it, before any
    /// shard of an earlier run is touched.
    pub fn empty_window(&self) -> Option<String> {
        let (_, split) = self
            .settings
            .splits
            .iter()
            .enumerate()
            .find(|(i, split)| split.window && self.counts[*i] == 0)?;
        let bounds = self
            .settings
            .resolved
            .iter()
            .find(|(name, _)| *name == split.name)
            .map_or(String::new(), |(_, r)| format!(" ({})", r.resolved));
        Some(format!(
            "manifest.data.splits.{}: `{}` selects no rows{bounds}",
            split.name, split.rule
        ))
    }

    /// Every output shard, in order: the splits' shards one after another.
    fn shards(&self) -> Vec<PlannedShard> {
        let shard_rows = self.settings.shard_rows;
        let mut planned = Vec::new();
        for (split, rows) in self.counts[..self.settings.splits.len()].iter().enumerate() {
            for number in 0..rows.div_ceil(shard_rows) {
                let first = number * shard_rows;
                planned.push(PlannedShard {
                    split,
                    number: number as usize,
                    first,
                    rows: shard_rows.min(rows - first),
                });
            }
        }
        planned
    }

    fn bad_values(&self) -> BadValues {
        let mut bad = BadValues::default();
        for part in &self.parts {
            bad.merge(&part.bad_values);
        }
        bad
    }
}

/// The name of the first field of `PartSettings` in which `a` and `b` differ.
fn differing(a: &PartSettings, b: &PartSettings) -> Option<&'static str> {
    [
        (a.seed != b.seed, "seed"),
        (a.shard_rows != b.shard_rows, "--shard-rows"),
        (a.row_group_rows != b.row_group_rows, "--row-group-rows"),
        (a.zstd_level != b.zstd_level, "--zstd-level"),
        (a.buckets != b.buckets, "--memory (it cuts the key space)"),
        (a.columns != b.columns, "schema"),
        (a.splits != b.splits, "set of splits"),
        (a.resolved != b.resolved, "resolution of the rolling splits"),
        (a.source != b.source, "snapshot"),
    ]
    .into_iter()
    .find(|(differs, _)| *differs)
    .map(|(_, field)| field)
}

#[derive(Debug, Clone, Copy)]
struct PlannedShard {
    split: usize,
    number: usize,
    /// Its first row's place in the split's order.
    first: u64,
    rows: u64,
}

/// Reducer `reducer`: writes its run of the output shards into `out` and its partial into the
/// parts' folder.
pub fn reduce(
    mapped: &Mapped,
    out: &Path,
    reducer: Part,
    memory_bytes: u64,
) -> Result<PartDone, DataError> {
    let path = reducer.path(&mapped.dir, REDUCE_TOOL);
    remove_if_present(&path)?;
    let partial = reduce_shards(mapped, out, reducer, memory_bytes)?;
    let of = partial.part.units;
    let done = partial.part.done.len() as u64;
    runfn_core::parts::write_partial(&mapped.dir, REDUCE_TOOL, reducer, &partial, (done, of))
        .map_err(DataError::from)
}

fn reduce_shards(
    mapped: &Mapped,
    out: &Path,
    reducer: Part,
    memory_bytes: u64,
) -> Result<ReducePartial, DataError> {
    if let Some(why) = mapped.empty_window() {
        return Err(DataError::Other(why));
    }
    let planned = mapped.shards();
    let weights: Vec<u64> = planned.iter().map(|s| s.rows).collect();
    let assignment = assign(&weights, reducer.count);
    let mine: Vec<usize> = (0..planned.len())
        .filter(|&i| assignment[i] == reducer.index)
        .collect();
    runfn_core::paths::create_dir_all(out).map_err(DataError::from)?;
    // As one process does once every row is placed: an earlier run's index goes before any
    // shard is replaced, so no reader pairs it with new shards.
    remove_if_present(&out.join(INDEX_NAME))?;
    sync_dir(out)?;
    let settings = &mapped.settings;
    let options = ShardOptions {
        out: out.to_path_buf(),
        seed: settings.seed,
        memory_bytes,
        shard_rows: settings.shard_rows as usize,
        row_group_rows: settings.row_group_rows as usize,
        zstd_level: settings.zstd_level,
        source_name: None,
    };
    let (rows, bytes) = mapped.parts.iter().fold((0u64, 0u64), |(r, b), p| {
        (r + p.spilled_rows, b + p.spilled_bytes)
    });
    let writer_options = ShardWriterOptions {
        shard_rows: options.shard_rows,
        row_group_rows: options.row_group_rows,
        zstd_level: options.zstd_level,
        background: GroupSlots::new(background_row_groups(
            bytes / rows.max(1),
            settings.columns.len(),
            &options,
        )),
    };
    let mut sample = mapped.parts[0].sample.clone();
    for part in &mapped.parts[1..] {
        sample.merge(part.sample.clone());
    }
    let schema = arrow_schema(&settings.columns);
    let keyed = keyed_schema(&schema);
    let group_rows = settings.row_group_rows.min(settings.shard_rows);
    let mut written = BTreeMap::new();
    for (split, rule) in settings.splits.iter().enumerate() {
        let shards: Vec<&PlannedShard> = mine
            .iter()
            .map(|&i| &planned[i])
            .filter(|s| s.split == split)
            .collect();
        let (Some(first), Some(last)) = (shards.first(), shards.last()) else {
            continue;
        };
        let mut writer = SplitWriter::new(
            out,
            &rule.name,
            schema.clone(),
            &writer_options,
            sample.plain_columns(split, group_rows),
        )?
        .starting_at(first.number);
        let rows = first.first..last.first + last.rows;
        let buckets = settings.buckets as usize;
        let mut start = 0u64;
        for bucket in 0..buckets {
            let slot = split * buckets + bucket;
            let bucket_rows = start..start + mapped.slot_rows[slot];
            start = bucket_rows.end;
            if bucket_rows.is_empty()
                || bucket_rows.end <= rows.start
                || bucket_rows.start >= rows.end
            {
                continue;
            }
            let runs = slot_runs(mapped, slot, &keyed)?;
            let order = key_order(&keyed, &runs)?;
            let from = rows.start.saturating_sub(bucket_rows.start) as usize;
            let to = (rows.end.min(bucket_rows.end) - bucket_rows.start) as usize;
            let wanted = &order[from..to];
            let lengths = writer.piece_lengths(wanted.len(), piece_rows(&runs));
            for piece in gather_in_order(&keyed, runs, wanted, &lengths)? {
                writer.write(&piece)?;
            }
        }
        written.insert(rule.name.clone(), writer.finish()?);
    }
    Ok(ReducePartial {
        part: PartHeader {
            format: REDUCE_FORMAT.into(),
            part: reducer,
            listing: mapped.run.clone(),
            units: planned.len() as u64,
            done: mine.iter().map(|&i| i as u64).collect(),
        },
        splits: written,
    })
}

/// A slot's runs from every part, each part's file checked against its partial first (the
/// runs are decoded without validation: the bytes must be the ones the part wrote).
fn slot_runs(
    mapped: &Mapped,
    slot: usize,
    keyed: &SchemaRef,
) -> Result<Vec<RecordBatch>, DataError> {
    let mut runs = Vec::new();
    for part in &mapped.parts {
        let file = &part.slots[slot];
        let Some(recorded) = &file.blake3 else {
            continue;
        };
        let path = mapped
            .dir
            .join(slots_dir_name(part.part.part))
            .join(slot_name(slot));
        let bytes = std::fs::read(&path).map_err(|source| DataError::Io {
            path: path.clone(),
            source,
        })?;
        let found = blake3::hash(&bytes).to_hex().to_string();
        if found != *recorded {
            return Err(DataError::file(
                &path,
                format!(
                    "has blake3 {}, but part {} recorded {}: the file changed after the part wrote it",
                    runfn_core::side_file::short_digest(&found),
                    part.part.part,
                    runfn_core::side_file::short_digest(recorded)
                ),
            ));
        }
        let decoded = decode_runs(&Buffer::from_vec(bytes), keyed)
            .map_err(|e| DataError::library(&path, &e))?;
        let rows: u64 = decoded.iter().map(|r| r.num_rows() as u64).sum();
        if rows != file.rows {
            return Err(DataError::file(
                &path,
                format!(
                    "holds {rows} rows, but part {} recorded {}",
                    part.part.part, file.rows
                ),
            ));
        }
        runs.extend(decoded);
    }
    Ok(runs)
}

/// The merge: the reducers' shards (or, with no reducer's partial in the parts' folder, this
/// process's own reduction) checked and indexed, the index written last. `snapshot_root` is
/// listed (not read) for the snapshot's digest. Returns the index and its blake3.
pub fn merge(
    mapped: &Mapped,
    out: &Path,
    snapshot_root: &Path,
    memory_bytes: u64,
    check_digest: &dyn Fn(Digested) -> Result<(), DataError>,
) -> Result<(ShardIndex, String), DataError> {
    // The snapshot the parts read, as their hashes add up: checked (against a pin, say) before
    // anything is written.
    let digested = snapshot_digest(mapped, snapshot_root)?;
    let digest = digested.0.clone();
    check_digest(digested)?;
    runfn_core::paths::create_dir_all(out).map_err(DataError::from)?;
    // The reducers are done by now: what a killed one left (a shard not renamed into place)
    // goes, and no second merge or one-process run writes here meanwhile.
    let (_lock, _swept) = super::out_lock::lock_and_sweep(out)?;
    let reduced = if any_reducer(&mapped.dir)? {
        read_reducers(mapped)?
    } else {
        vec![reduce_shards(
            mapped,
            out,
            Part { index: 0, count: 1 },
            memory_bytes,
        )?]
    };
    let settings = &mapped.settings;
    let mut splits = BTreeMap::new();
    for (split, rule) in settings.splits.iter().enumerate() {
        let shards: Vec<ShardEntry> = reduced
            .iter()
            .flat_map(|r| r.splits.get(&rule.name).cloned().unwrap_or_default())
            .collect();
        let rows: u64 = shards.iter().map(|s| s.rows).sum();
        if rows != mapped.counts[split] {
            return Err(DataError::file(
                &mapped.dir,
                format!(
                    "split `{}`: the reducers wrote {rows} rows of its {}",
                    rule.name, mapped.counts[split]
                ),
            ));
        }
        let split_dir = out.join(&rule.name);
        runfn_core::paths::create_dir_all(&split_dir).map_err(DataError::from)?;
        super::index::verify_shards(out, shards.iter())?;
        remove_stale_shards(
            &split_dir,
            &shards.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
            out,
        )?;
        sync_dir(&split_dir)?;
        splits.insert(
            rule.name.clone(),
            SplitEntry {
                rule: rule.rule.clone(),
                rows,
                shards,
                rows_blake3: None,
                rows_format: Some(super::rows::ROWS_FORMAT.to_string()),
            },
        );
    }
    let mut index = ShardIndex {
        format: INDEX_FORMAT.to_string(),
        seed: settings.seed,
        source: Source {
            path: settings.source.clone(),
            files: digest.files,
            bytes: digest.bytes,
            digest: digest.digest,
        },
        columns: settings.columns.clone(),
        splits,
        unassigned_rows: mapped.counts[settings.splits.len()],
        bad_values: mapped.bad_values(),
    };
    let names: Vec<String> = index.splits.keys().cloned().collect();
    for name in names {
        let (digest, _) = super::rows::split_rows_digest(out, &index, &name)?;
        if let Some(entry) = index.splits.get_mut(&name) {
            entry.rows_blake3 = Some(digest);
        }
    }
    let blake3 = write_index(out, &index)?;
    Ok((index, blake3))
}

/// Whether any reducer's partial is in `dir`.
fn any_reducer(dir: &Path) -> Result<bool, DataError> {
    runfn_core::parts::any_partial(dir, REDUCE_TOOL).map_err(DataError::from)
}

/// The reducers' partials: of these parts, covering every shard once, in order.
fn read_reducers(mapped: &Mapped) -> Result<Vec<ReducePartial>, DataError> {
    let dir = &mapped.dir;
    let reduced = runfn_core::parts::read_json_partials(
        dir,
        REDUCE_TOOL,
        "a shardify reducer",
        |r: &ReducePartial| &r.part,
    )
    .map_err(DataError::from)?;
    let planned = mapped.shards().len() as u64;
    let mut next = 0u64;
    for reducer in &reduced {
        let path = reducer.part.part.path(dir, REDUCE_TOOL);
        if reducer.part.format != REDUCE_FORMAT {
            return Err(DataError::file(
                &path,
                format!(
                    "format `{}`, expected `{REDUCE_FORMAT}`",
                    reducer.part.format
                ),
            ));
        }
        if reducer.part.listing != mapped.run || reducer.part.units != planned {
            return Err(DataError::file(
                &path,
                "reduced other parts than those in the folder (a part ran again since): run the reducers again",
            ));
        }
        for &shard in &reducer.part.done {
            if shard != next {
                return Err(DataError::file(
                    &path,
                    format!("wrote shard {shard} where shard {next} was due"),
                ));
            }
            next += 1;
        }
    }
    if next != planned {
        return Err(DataError::file(
            dir,
            format!("the reducers wrote {next} of {planned} shards"),
        ));
    }
    Ok(reduced)
}

/// The snapshot's digest from the parts' hashes of its files: the listing is taken now (a
/// file that is not the parts' own, or whose size moved, is hashed here).
fn snapshot_digest(mapped: &Mapped, root: &Path) -> Result<Digested, DataError> {
    let mut known: BTreeMap<&str, KnownHash> = BTreeMap::new();
    for file in mapped.parts.iter().flat_map(|p| &p.files) {
        let hash = blake3::Hash::from_hex(&file.blake3)
            .map_err(|_| DataError::Other(format!("`{}`: not a blake3 hash", file.path)))?;
        known.insert(file.path.as_str(), (hash, file.bytes));
    }
    let listing = Listing::of(root).map_err(from_digest)?;
    listing
        .digest(
            &|path| known.get(relative_name(root, path).as_str()).copied(),
            &|_| {},
        )
        .map_err(from_digest)
}

/// A snapshot's digest and its files'.
pub type Digested = (runfn_manifest::digest::DataDigest, Vec<FileDigest>);
