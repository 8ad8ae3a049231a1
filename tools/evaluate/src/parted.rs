//! `--part K/N --parts DIR` scores part K's shards of the split (the model's forward passes,
//! the work worth spreading) and writes its rows, each with its score, label and columns, into
//! DIR. `--parts DIR` alone is the merge: it streams the parts' rows, in part order, through
//! the same tally one process uses, so its record and files are the ones one process writes,
//! byte for byte.
//!
//! The units are the split's shards in index order, weighted by bytes; each part takes a
//! contiguous run of them ([`runfn_core::parts::assign`]).

use std::path::{Path, PathBuf};

use runfn_core::parts::{
    Part, PartHeader, assign, check_coverage, check_part_file, fingerprint, read_partials,
    write_partial,
};
use runfn_core::side_file::short_digest;
use runfn_core::{Exit, InputError};
use runfn_data::shards::SplitEntry;
use runfn_learn::score::Scored;
use serde::{Deserialize, Serialize};

use crate::part_rows::{self, PartRowsWriter};
use crate::rows::RowScoresFile;

const TOOL: &str = "evaluate";
// v2: the rows file is a part_rows stream, no longer Parquet.
const FORMAT: &str = "evaluate-part-v2";

/// What a part leaves for the merge, beside its rows file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvaluatePart {
    pub part: PartHeader,
    pub split: String,
    /// The weights (or scores file) that scored the rows: every part and the merge must agree.
    pub weights_blake3: String,
    /// The columns each row carries beside its score and label (the slices, then the key).
    pub columns: Vec<String>,
    pub rows: u64,
    /// The rows file's name, beside this partial, and its blake3.
    pub rows_file: String,
    pub rows_file_blake3: String,
    /// Rows of each categorical feature whose value the model's vocabulary lacks.
    pub unseen: Vec<(String, u64)>,
}

/// The split's shards as units of work: each named by its path and content, weighed by bytes.
fn units(split: &SplitEntry) -> Vec<(String, u64)> {
    split
        .shards
        .iter()
        .map(|s| (format!("{}@{}", s.path, s.blake3), s.bytes))
        .collect()
}

fn listing(split: &SplitEntry) -> String {
    fingerprint(
        units(split)
            .iter()
            .map(|(name, bytes)| (name.as_str(), *bytes)),
    )
}

/// The shards (their positions in the split's list) that `part` scores.
pub fn shards_of(split: &SplitEntry, part: Part) -> Vec<usize> {
    let weights: Vec<u64> = units(split).iter().map(|(_, bytes)| *bytes).collect();
    assign(&weights, part.count)
        .into_iter()
        .enumerate()
        .filter(|(_, owner)| *owner == part.index)
        .map(|(unit, _)| unit)
        .collect()
}

/// What a part knows of the run it belongs to.
pub struct PartRun<'a> {
    pub part: Part,
    pub dir: &'a Path,
    /// The shard folder: a part re-hashes its own shards before it scores them.
    pub shards_dir: &'a Path,
    pub split_name: &'a str,
    pub split: &'a SplitEntry,
    pub weights_blake3: &'a str,
    pub columns: &'a [String],
}

/// Scores this part's shards with `score` (which hands each batch to the writer it is given)
/// and writes the rows file and the partial; prints where they went.
pub fn run_part(
    tool: &runfn_core::cli::Tool,
    run: &PartRun,
    score: impl FnOnce(
        &[usize],
        &mut dyn FnMut(&Scored) -> anyhow::Result<()>,
    ) -> anyhow::Result<Vec<(String, u64)>>,
) -> anyhow::Result<Exit> {
    std::fs::create_dir_all(run.dir).map_err(|source| InputError::Io {
        path: run.dir.to_path_buf(),
        source,
    })?;
    let mine = shards_of(run.split, run.part);
    runfn_data::shards::verify_shards(run.shards_dir, mine.iter().map(|&i| &run.split.shards[i]))
        .map_err(|e| InputError::field("shards", e.to_string()))?;
    let rows_file = format!("{TOOL}.part-{}-of-{}.rows", run.part.index, run.part.count);
    let location = run.dir.join(&rows_file).display().to_string();
    let mut file = RowScoresFile::create(&location)?;
    let mut writer = PartRowsWriter::new(file.writer()?, run.columns.len())?;
    let mut rows = 0u64;
    let unseen = score(&mine, &mut |batch: &Scored| {
        writer.push(batch)?;
        rows += batch.scores.len() as u64;
        Ok(())
    })?;
    let rows_file_blake3 = file.commit(writer.finish()?)?;
    let partial = EvaluatePart {
        part: PartHeader {
            format: FORMAT.into(),
            part: run.part,
            listing: listing(run.split),
            units: run.split.shards.len() as u64,
            done: mine.iter().map(|&u| u as u64).collect(),
        },
        split: run.split_name.to_string(),
        weights_blake3: run.weights_blake3.to_string(),
        columns: run.columns.to_vec(),
        rows,
        rows_file,
        rows_file_blake3,
        unseen,
    };
    let done = write_partial(
        run.dir,
        TOOL,
        run.part,
        &partial,
        (mine.len() as u64, run.split.shards.len() as u64),
    )?;
    tool.info(format!(
        "part {}: scored {rows} rows of `{}` from {} of {} shards into {}",
        run.part,
        run.split_name,
        mine.len(),
        run.split.shards.len(),
        done.partial
    ));
    runfn_core::cli::write_stdout(done.line().as_bytes())?;
    Ok(Exit::Passed)
}

/// The parts in `dir`, checked against this run: the same split, listing, weights and
/// columns, every shard scored once by the part it belongs to.
pub fn read_parts(dir: &Path, run: &PartRun) -> Result<Vec<EvaluatePart>, InputError> {
    let parts = read_partials(
        dir,
        TOOL,
        |text, origin| {
            serde_json::from_str::<EvaluatePart>(text)
                .map_err(|e| InputError::field(origin, format!("not an {TOOL} partial: {e}")))
        },
        |p: &EvaluatePart| &p.part,
    )?;
    let refuse = |message: String| InputError::field(dir.display().to_string(), message);
    let first = &parts[0];
    let other = format!("other shards of `{}` than these", run.split_name);
    first.part.check(dir, FORMAT, &listing(run.split), &other)?;
    for part in &parts {
        if part.split != run.split_name {
            return Err(refuse(format!(
                "part {} scored `{}`, not `{}`",
                part.part.part, part.split, run.split_name
            )));
        }
        if part.weights_blake3 != run.weights_blake3 {
            return Err(refuse(format!(
                "part {} was scored by weights {}, not by this model's {}",
                part.part.part,
                short_digest(&part.weights_blake3),
                short_digest(run.weights_blake3)
            )));
        }
        if part.columns != run.columns {
            return Err(refuse(format!(
                "part {} carries the columns {:?}, not {:?} (other slices or row key)",
                part.part.part, part.columns, run.columns
            )));
        }
    }
    let weights: Vec<u64> = units(run.split).iter().map(|(_, bytes)| *bytes).collect();
    let headers: Vec<&PartHeader> = parts.iter().map(|p| &p.part).collect();
    check_coverage(&headers, &assign(&weights, first.part.part.count)).map_err(refuse)?;
    Ok(parts)
}

/// Streams every part's rows, in part order, to `each` as scored batches (the slices: the
/// parts' columns); returns the unseen counts summed.
pub fn stream_parts(
    dir: &Path,
    parts: &[EvaluatePart],
    each: &mut dyn FnMut(&Scored) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<(String, u64)>> {
    let mut unseen: Vec<(String, u64)> = Vec::new();
    for part in parts {
        let path: PathBuf = dir.join(&part.rows_file);
        check_part_file(&path, part.part.part, &part.rows_file_blake3)?;
        let rows = part_rows::read_each(&path, &part.columns, each)?;
        if rows != part.rows {
            return Err(InputError::field(
                path.display().to_string(),
                format!(
                    "holds {rows} rows, but part {} recorded {}",
                    part.part.part, part.rows
                ),
            )
            .into());
        }
        for (column, count) in &part.unseen {
            match unseen.iter_mut().find(|(c, _)| c == column) {
                Some(total) => total.1 += count,
                None => unseen.push((column.clone(), *count)),
            }
        }
    }
    Ok(unseen)
}
