//! `--part K/N --parts DIR` scores part K's files of the snapshot into DIR (its predictions,
//! a row group per batch, and, for a registered model, its files' piece profiles for the
//! serving drift); `--parts DIR` alone is the merge: it writes the parts' rows, batch by batch
//! in part order, through the writer one process writes through, sums the counts and merges the
//! piece profiles in file order, so the predictions file and the record are one process's, byte
//! for byte.
//!
//! The units are the snapshot's files (in its order: by path), weighed by bytes; each part
//! takes a contiguous run of them ([`runfn_core::parts::assign`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow::array::AsArray;
use arrow::datatypes::Float64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use runfn_core::cli::Tool;
use runfn_core::parts::{
    Part, PartHeader, assign, check_coverage, check_part_file, fingerprint, read_partials,
    write_partial,
};
use runfn_core::side_file::short_digest;
use runfn_core::{Exit, InputError};
use runfn_profile::Profile;
use runfn_profile::history::{PieceProfile, PieceRoles};
use serde::{Deserialize, Serialize};

use crate::output::Predictions;
use crate::scoring::{Counts, Scoring};

const TOOL: &str = "predict";
const FORMAT: &str = "predict-part-v1";

/// What a part leaves for the merge, beside its predictions file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredictPart {
    pub part: PartHeader,
    /// The weights that scored: every part and the merge must agree.
    pub model_blake3: String,
    pub keys: Vec<String>,
    /// Rows per batch: each batch is a row group of the part's file.
    pub batch_rows: usize,
    pub rows: u64,
    /// The part's predictions, beside this partial, and their blake3.
    pub scores_file: String,
    pub scores_file_blake3: String,
    pub counts: Counts,
    /// The piece profiles of the part's files, for the serving drift (a registered model's).
    pub pieces: Option<Vec<PieceProfile>>,
}

/// What a part (or the merge) knows of the run.
pub struct PartRun<'a> {
    pub part: Part,
    pub dir: &'a Path,
    pub keys: &'a [String],
    pub model: &'a str,
    pub model_blake3: &'a str,
    /// The roles to profile the served rows with, where there is a training profile to compare.
    pub profile: Option<&'a PieceRoles<'a>>,
}

/// The snapshot's files as units: each named by its path under the root, weighed by bytes.
fn units(scoring: &Scoring) -> Vec<(String, u64)> {
    let snapshot = scoring.snapshot;
    snapshot
        .files
        .iter()
        .map(|f| {
            let name = runfn_profile::parts::relative_name(&snapshot.root, &f.path);
            (name, f.bytes)
        })
        .collect()
}

fn listing(units: &[(String, u64)]) -> String {
    fingerprint(units.iter().map(|(name, bytes)| (name.as_str(), *bytes)))
}

fn assignment(units: &[(String, u64)], count: u32) -> Vec<u32> {
    let weights: Vec<u64> = units.iter().map(|(_, bytes)| *bytes).collect();
    assign(&weights, count)
}

/// Scores this part's files into DIR and writes the partial; prints where it went.
pub fn run_part(tool: &Tool, scoring: &Scoring, run: &PartRun) -> anyhow::Result<Exit> {
    let units = units(scoring);
    let mine: Vec<usize> = assignment(&units, run.part.count)
        .into_iter()
        .enumerate()
        .filter(|(_, owner)| *owner == run.part.index)
        .map(|(file, _)| file)
        .collect();
    let scores_file = format!(
        "{TOOL}.part-{}-of-{}.parquet",
        run.part.index, run.part.count
    );
    let local: PathBuf = run.dir.join(&scores_file);
    let mut out = Predictions::create(
        &local.display().to_string(),
        scoring.snapshot,
        run.keys,
        run.model,
        run.model_blake3,
        scoring.batch_rows,
    )?;
    let counts = scoring.score_files(&mine, &mut out, true)?;
    let written = out.finish()?;
    let pieces = match run.profile {
        Some(roles) => Some(
            runfn_profile::parts::profile_files(scoring.snapshot, roles, &mine)
                .map_err(|e| InputError::field("--in", e.to_string()))?,
        ),
        None => None,
    };
    let partial = PredictPart {
        part: PartHeader {
            format: FORMAT.into(),
            part: run.part,
            listing: listing(&units),
            units: units.len() as u64,
            done: mine.iter().map(|&f| f as u64).collect(),
        },
        model_blake3: run.model_blake3.to_string(),
        keys: run.keys.to_vec(),
        batch_rows: scoring.batch_rows,
        rows: written.rows,
        scores_file,
        scores_file_blake3: written.blake3,
        counts,
        pieces,
    };
    let done = write_partial(
        run.dir,
        TOOL,
        run.part,
        &partial,
        (mine.len() as u64, units.len() as u64),
    )?;
    tool.info(format!(
        "part {}: scored {} rows from {} of {} files into {}",
        run.part,
        written.rows,
        mine.len(),
        units.len(),
        done.partial
    ));
    runfn_core::cli::write_stdout(done.line().as_bytes())?;
    Ok(Exit::Passed)
}

/// Writes every part's rows into `out` in part order and returns the summed counts and, where
/// the parts profiled their files, the served rows' profile.
pub fn merge(
    tool: &Tool,
    scoring: &Scoring,
    run: &PartRun,
    out: &mut Predictions,
) -> anyhow::Result<(Counts, Option<Profile>)> {
    let parts = read_parts(scoring, run)?;
    let mut counts = scoring.empty_counts();
    let mut pieces: Vec<PieceProfile> = Vec::new();
    for part in &parts {
        let path = run.dir.join(&part.scores_file);
        check_part_file(&path, part.part.part, &part.scores_file_blake3)?;
        let rows = push_rows_of(&path, out)?;
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
        counts.add(&part.counts);
        pieces.extend(part.pieces.iter().flatten().cloned());
    }
    let served = match run.profile {
        Some(roles) => Some(
            runfn_profile::parts::merge_file_profiles(scoring.snapshot, roles, pieces)
                .map_err(|e| InputError::field("--in", e.to_string()))?,
        ),
        None => None,
    };
    tool.info(format!(
        "merged {} parts from {}",
        parts.len(),
        run.dir.display()
    ));
    Ok((counts, served))
}

/// The parts in the folder, checked against this run: the same files, weights, keys and batch
/// size, each file scored once by the part it belongs to, profiled where a profile is needed.
fn read_parts(scoring: &Scoring, run: &PartRun) -> Result<Vec<PredictPart>, InputError> {
    let parts = read_partials(
        run.dir,
        TOOL,
        |text, origin| {
            serde_json::from_str::<PredictPart>(text)
                .map_err(|e| InputError::field(origin, format!("not a {TOOL} partial: {e}")))
        },
        |p: &PredictPart| &p.part,
    )?;
    let refuse = |message: String| InputError::field(run.dir.display().to_string(), message);
    let units = units(scoring);
    let first = &parts[0];
    first.part.check(
        run.dir,
        FORMAT,
        &listing(&units),
        "other files than the snapshot's",
    )?;
    for part in &parts {
        let at = part.part.part;
        if part.model_blake3 != run.model_blake3 {
            return Err(refuse(format!(
                "part {at} was scored by weights {}, not by this model's {}",
                short_digest(&part.model_blake3),
                short_digest(run.model_blake3)
            )));
        }
        if part.keys != run.keys || part.batch_rows != scoring.batch_rows {
            return Err(refuse(format!(
                "part {at} carries the keys {:?} in batches of {} rows, the merge {:?} in batches of {} (other --key or --memory)",
                part.keys, part.batch_rows, run.keys, scoring.batch_rows
            )));
        }
        if run.profile.is_some() && part.pieces.is_none() {
            return Err(refuse(format!(
                "part {at} kept no profile of its rows, which the serving drift needs"
            )));
        }
    }
    let headers: Vec<&PartHeader> = parts.iter().map(|p| &p.part).collect();
    check_coverage(&headers, &assignment(&units, first.part.part.count)).map_err(refuse)?;
    Ok(parts)
}

/// Pushes a part's predictions into `out` a row group (one of the part's batches) at a time,
/// as the part pushed them; returns the rows.
fn push_rows_of(path: &Path, out: &mut Predictions) -> anyhow::Result<u64> {
    let open = || {
        std::fs::File::open(path)
            .with_context(|| path.display().to_string())
            .and_then(|file| {
                ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
                    InputError::field(path.display().to_string(), e.to_string()).into()
                })
            })
    };
    let groups = open()?.metadata().num_row_groups();
    let mut rows = 0u64;
    for group in 0..groups {
        let builder = open()?;
        let group_rows = builder.metadata().row_group(group).num_rows().max(0) as usize;
        let reader = builder
            .with_row_groups(vec![group])
            .with_batch_size(group_rows.max(1))
            .build()?;
        for batch in reader {
            let batch =
                batch.map_err(|e| InputError::field(path.display().to_string(), e.to_string()))?;
            let scores = batch
                .column_by_name("score")
                .and_then(|c| c.as_primitive_opt::<Float64Type>())
                .ok_or_else(|| {
                    InputError::field(path.display().to_string(), "has no Float64 column `score`")
                })?;
            out.push(&batch, scores.values())?;
            rows += batch.num_rows() as u64;
        }
    }
    Ok(rows)
}
