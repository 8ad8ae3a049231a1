//! predict: score a snapshot with a registered model or a model file. No label is needed; the
//! model's own preprocessing is applied; the scores come out in the snapshot's row order with
//! the rows' keys, so they join back to the rows they score.

mod output;
mod parted;
mod scoring;
mod serving;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_data::read::Snapshot;
use runfn_data::types::ColumnType;
use runfn_learn::device::DeviceChoice;
use runfn_learn::model_source::{ModelSource, registry_dir};
use runfn_schema::record::{Predict, ServingDrift, Unseen};
use serde_json::Value;

use crate::output::Predictions;
use crate::scoring::{Counts, Scoring};

const AFTER_HELP: &str = "\
Examples:
  predict --model churn@prod --in ./lake/churn-2026-12-07 --out scores.parquet < record.json
  predict --model churn@3 --in s3://lake/churn/2026-12-07 --out s3://scores/churn/2026-12-07.parquet --key customer_id
  predict --model runs/demo/train/model.safetensors --in new-rows.csv --out scores.parquet

Reads the snapshot (CSV, JSON Lines or Parquet; a file or a folder, local or in a store) a
batch at a time, applies the preprocessing stored in the model file (a category the model never
saw scores as unknown and is counted, not an error; a null numeric value is imputed as in
training) and writes one row per snapshot row, in the snapshot's order (its files by path, each
file's rows in order): `row` (the row's position, 0-based), the key columns (--key, else the
record's manifest.data.entity and data.time, else those the registered model was trained under,
when they are columns), `score` (the probability of
the positive label), `model` (NAME@VERSION, or the file's name) and `model_blake3`. The label, if
the snapshot has one, is not read. Memory stays flat whatever the snapshot's size: --memory
(default 64M, the model's weights aside) sizes the batches read and the row groups written, and
a budget too small for 256 rows at a time is exit 2.

Serving drift (a registered model): the rows scored are profiled and checked against the
training profile stored with the model, as ds-validate checks two snapshots. Where that profile
kept its windows (ds-validate with validate.window), each check is also judged against how far
the training snapshot's own windows stood from its whole (Holm at validate.alpha): a month like
the training months, the model's own test month among them, is no drift; one that differs as
none of them did is, naming its columns. The scores' drift from the test scores is then reported
but does not fail (fails_run: false): one month's scores are a reference no history calibrates.
predict.drift.calibration says which judgement applied (docs/drift.md).

In parts (a Slurm job array, a Kubernetes Indexed Job): --part K/N --parts DIR scores part K
(0-based) of N of the snapshot's files (each part a contiguous run balanced by bytes) into
DIR/predict.part-K-of-N.parquet and .json, printing {\"part\": {tool, part, partial, units, of}};
the same command with --parts DIR and no --part merges them into --out and the record one process
writes, byte for byte, serving drift included. A missing part, a changed part file, or parts of
other files, weights, keys or --memory are refused (exit 2). docs/parts.md.

Output: the input record (or a new one) plus
  {\"predict\": {\"passed\": true, \"model\", \"registered_as\" (NAME@VERSION or null), \"weights_blake3\",
   \"model_manifest_hash\", \"snapshot\", \"rows\", \"out\", \"out_blake3\", \"keys\": [column],
   \"unseen\": {\"<categorical feature>\": {\"rows\", \"fraction\"}},
   \"missing\": {\"<feature>\": {\"rows\", \"fraction\"}}}}

Exit: 0 scored (and, with a registered model's profile, no serving drift beyond its limits), 1
serving drift beyond its limits (the scores are still written and the record is on stdout, with
`predict.drift` naming the columns), 2 bad usage or input (an unknown model, a snapshot without a
feature column or with a feature of another type, true/false where the model learned numbers, NaN
or infinite feature values, an output that is a FIFO, socket or device, an output that cannot be
written).";

/// Score a snapshot with a registered model or a model file.
#[derive(Debug, Parser)]
#[command(name = "predict", version, after_help = AFTER_HELP)]
pub struct Args {
    /// The model: NAME@ALIAS or NAME@VERSION in the registry, or a model file or training folder.
    #[arg(long, value_name = "NAME@ALIAS|PATH")]
    model: PathBuf,
    /// The registry that resolves NAME@ALIAS (default: RUNFN_REGISTRY, else ./registry).
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
    /// The snapshot to score: a file or folder, or a store URL.
    #[arg(long = "in", value_name = "PATH|URL")]
    input: String,
    /// Where the scores go (Parquet), a path or store URL; written atomically (a part writes
    /// into --parts instead).
    #[arg(long, value_name = "FILE|URL", required_unless_present = "part")]
    out: Option<String>,
    /// A key column to carry beside each score (repeatable; default: the entity and time columns
    /// of the record's manifest, else of the registered model's).
    #[arg(long = "key", value_name = "COLUMN")]
    keys: Vec<String>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu", value_parser = DeviceChoice::parse)]
    device: DeviceChoice,
    /// Memory for the rows in flight, the model's weights aside: it sizes the batches read and
    /// the row groups written (at most 65,536 rows each).
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = runfn_data::spec::parse_size)]
    memory: u64,
    /// Threads for reading, scoring and profiling (at most 1024; default: one per core).
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    threads: Option<usize>,
    /// Read the record from FILE instead of stdin (a record is optional).
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    parts: runfn_core::parts::PartArgs,
    #[command(flatten)]
    common: CommonArgs,
}

pub fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("predict", runfn_version::long());
    runfn_core::cli::read_panics_with(runfn_learn::torch_failure::cause_of_message);
    runfn_core::cli::main("predict", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let mut record = Record::read(args.record.as_deref(), RecordInput::Optional)?;
    record.refuse_failed_checks("predict")?;
    if let Some(threads) = args.threads {
        runfn_learn::device::limit_threads(threads);
    }
    let registry = registry_dir(args.registry.as_deref());
    let source = ModelSource::named(&args.model, &registry)?;
    let training = serving::training(&registry, source.registered_as.as_deref())?;
    let device = args.device.open().map_err(anyhow::Error::msg)?;
    let loaded = source.load(false, device)?;
    let preprocess = &loaded.meta.preprocess;
    let root = match runfn_storage::is_remote(&args.input) {
        true => runfn_storage::stage_prefix(&args.input)?,
        false => PathBuf::from(&args.input),
    };
    // Categories are text whatever they look like (codes such as `3` stay categories).
    let types: BTreeMap<String, ColumnType> = preprocess
        .categorical
        .iter()
        .map(|c| (c.name.clone(), ColumnType::String))
        .collect();
    let snapshot =
        Snapshot::open_as(&root, &types).map_err(|e| InputError::field("--in", e.to_string()))?;
    let features: Vec<&str> = preprocess.columns().into_iter().skip(1).collect();
    if let Some(absent) = features.iter().find(|f| snapshot.column_type(f).is_none()) {
        return Err(InputError::field(
            "--in",
            format!(
                "{}: has no column `{absent}`, a feature of the model (its features: {})",
                args.input,
                features.join(", ")
            ),
        )
        .into());
    }
    let registered_data = match (&args.keys[..], record.get_path("manifest.data")) {
        ([], None) => serving::registered_data(&registry, source.registered_as.as_deref())?,
        _ => None,
    };
    let keys = key_columns(&args.keys, &record, registered_data.as_ref(), &snapshot)?;
    // Only the model's features and the keys are read: the other columns are stepped over,
    // neither built nor parsed (on the bench's rows a long text column is most of the bytes).
    let read: Vec<&str> = features
        .iter()
        .copied()
        .chain(keys.iter().map(String::as_str))
        .collect();
    let snapshot = snapshot.project(&read);
    let model_name = source.registered_as.clone().unwrap_or_else(|| {
        source.path.file_name().map_or_else(
            || source.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    });
    let batch_rows = batch_rows(args.memory, &snapshot)?;
    // A batch's large blocks (libtorch's activations, the text buffers) come from the heap and
    // are reused batch after batch instead of being mapped and zeroed by the kernel each time
    // (a fifth of the time at a 4 MiB threshold); up to half the budget of free memory is kept
    // for the next batch rather than given back and faulted in again.
    runfn_core::allocator::reuse_freed_blocks(
        64 << 20,
        ((args.memory / 2) as usize).clamp(1 << 20, 256 << 20),
    );
    let score_edges = training
        .as_ref()
        .ok()
        .and_then(|t| t.bins.as_ref())
        .map(|b| b.edges.clone());
    let scoring = Scoring {
        snapshot: &snapshot,
        preprocess,
        model: &loaded.model,
        device,
        features: &features,
        batch_rows,
        score_edges: score_edges.as_deref(),
    };
    let identifiers = keys.clone();
    let roles = runfn_profile::history::PieceRoles {
        label: None,
        positive: None,
        identifiers: &identifiers,
    };
    // --part K/N --parts DIR scores part K's files into DIR; --parts DIR alone merges them.
    if let (Some(part), Some(dir)) = (args.parts.part, &args.parts.parts) {
        let run = parted::PartRun {
            part,
            dir,
            keys: &keys,
            model: &model_name,
            model_blake3: &loaded.blake3,
            profile: training.is_ok().then_some(&roles),
        };
        return parted::run_part(tool, &scoring, &run);
    }
    let target = args.out.clone().ok_or_else(|| {
        InputError::field(
            "--out",
            "is needed: where the scores go (only a --part writes into --parts)",
        )
    })?;
    let mut out = Predictions::create(
        &target,
        &snapshot,
        &keys,
        &model_name,
        &loaded.blake3,
        batch_rows,
    )?;
    let (counts, served) = match &args.parts.parts {
        Some(dir) => {
            let run = parted::PartRun {
                part: runfn_core::parts::Part { index: 0, count: 1 },
                dir,
                keys: &keys,
                model: &model_name,
                model_blake3: &loaded.blake3,
                profile: training.is_ok().then_some(&roles),
            };
            parted::merge(tool, &scoring, &run, &mut out)?
        }
        None => {
            let files: Vec<usize> = (0..snapshot.files.len()).collect();
            (scoring.score_files(&files, &mut out, false)?, None)
        }
    };
    let Counts {
        unseen,
        missing,
        bins: served_bins,
    } = counts;
    let written = out.finish()?;
    let share = |rows: u64| Unseen {
        rows,
        fraction: if written.rows > 0 {
            rows as f64 / written.rows as f64
        } else {
            0.0
        },
    };
    let unseen: BTreeMap<String, Unseen> = preprocess
        .categorical
        .iter()
        .zip(&unseen)
        .map(|(c, &rows)| (c.name.clone(), share(rows)))
        .collect();
    let missing: BTreeMap<String, Unseen> = features
        .iter()
        .zip(&missing)
        .map(|(name, &rows)| (name.to_string(), share(rows)))
        .collect();
    tool.info(format!(
        "scored {} rows of {} with {model_name}; scores in {}",
        written.rows, args.input, target
    ));
    for (feature, share) in &unseen {
        if share.rows > 0 {
            tool.info(format!(
                "{:.1}% of the rows have `{feature}` values this model never saw (scored as unknown)",
                share.fraction * 100.0
            ));
        }
    }
    let features: Vec<String> = features.iter().map(|f| f.to_string()).collect();
    let (drift, no_drift) = match &training {
        Ok(training) => {
            let thresholds = serving::thresholds(&record, training)?;
            let served = match served {
                Some(merged) => merged,
                None => runfn_profile::profile_snapshot(&snapshot, None, None, &keys)
                    .map_err(|e| InputError::field("--in", e.to_string()))?,
            };
            let drift = serving::compare_served(
                training,
                &served,
                served_bins.as_deref(),
                &thresholds,
                &features,
                &keys,
            );
            say_drift(tool, &drift);
            (Some(drift), None)
        }
        Err(why) => {
            tool.info(format!("no drift checks: {why}"));
            (None, Some(why.clone()))
        }
    };
    let passed = drift.as_ref().is_none_or(|d| d.passed);
    record.set(&Predict {
        passed,
        model: source.path.display().to_string(),
        registered_as: source.registered_as.clone(),
        weights_blake3: loaded.blake3.clone(),
        model_manifest_hash: loaded.meta.manifest_hash.clone(),
        snapshot: args.input.clone(),
        rows: written.rows,
        out: target,
        out_blake3: written.blake3,
        keys,
        unseen,
        missing,
        drift,
        no_drift,
    })?;
    tool.finish_within(record, Exit::from_passed(passed), args.memory)
}

/// The most rows a batch may hold.
const MAX_BATCH_ROWS: u64 = 64 * 1024;
/// The fewest rows a batch may hold before a budget is too small to be worth reading in.
const MIN_BATCH_ROWS: u64 = 256;

/// Rows per batch within `memory`: a batch lives about four times over at once (the text read,
/// the typed columns, the model's inputs, the row group written), at the widest file's bytes
/// per row, in half the budget (the allocator's and the writer's own buffers take the rest).
fn batch_rows(memory: u64, snapshot: &Snapshot) -> anyhow::Result<usize> {
    let mut widest = 0;
    for file in 0..snapshot.files.len() {
        widest = widest.max(snapshot.memory_row_bytes(file)?);
    }
    let per_row = widest.max(64) * 4 + 64;
    let rows = (memory / 2 / per_row).min(MAX_BATCH_ROWS);
    if rows < MIN_BATCH_ROWS {
        return Err(InputError::field(
            "--memory",
            format!(
                "{memory} bytes is too little: a batch of {MIN_BATCH_ROWS} rows of about {widest} bytes each needs {}",
                2 * MIN_BATCH_ROWS * per_row
            ),
        )
        .into());
    }
    Ok(rows as usize)
}

/// Each drift beyond its limits on stderr, and the verdict.
fn say_drift(tool: &Tool, drift: &ServingDrift) {
    for check in drift.checks.iter().filter(|c| !c.passed && c.fails_run) {
        tool.notice(format!(
            "drift: `{}` {} is {} (limit {}, sampling noise {}) against {}'s training data",
            check.column.as_deref().unwrap_or_default(),
            check.name,
            check.value.map_or("?".into(), |v| format!("{v:.4}")),
            check.threshold.map_or("?".into(), |v| format!("{v:.4}")),
            check.noise.map_or("?".into(), |v| format!("{v:.4}")),
            drift.against
        ));
    }
    if let Some(score) = drift.score.as_ref().filter(|s| !s.passed) {
        let line = format!(
            "the scores' divergence from the test scores is {:.4} (limit {:.4}, sampling noise {:.4})",
            score.value, score.threshold, score.noise
        );
        if score.fails_run {
            tool.notice(format!("drift: {line}"));
        } else {
            tool.info(format!(
                "reported, not failed: {line}; the features are judged against the training windows, the scores only against the test month"
            ));
        }
    }
    if drift.passed {
        tool.info(format!(
            "no drift beyond the limits against {}'s training data and test scores",
            drift.against
        ));
    }
}

/// `--key`, else the manifest's entity and time columns the snapshot has; each must be a column.
/// The key columns carried beside each score: --key, else the entity and time columns of the
/// record's manifest, else of the manifest the registered model was trained under
/// (`registered`), where the snapshot has them.
fn key_columns(
    flags: &[String],
    record: &Record,
    registered: Option<&Value>,
    snapshot: &Snapshot,
) -> Result<Vec<String>, InputError> {
    if !flags.is_empty() {
        if let Some(absent) = flags.iter().find(|k| snapshot.column_type(k).is_none()) {
            return Err(InputError::field(
                "--key",
                format!("`{absent}` is not a column of the snapshot"),
            ));
        }
        return Ok(flags.to_vec());
    }
    let data = record.get_path("manifest.data").or(registered);
    Ok(["entity", "time"]
        .iter()
        .filter_map(|role| data.and_then(|d| d.get(role)).and_then(|v| v.as_str()))
        .filter(|column| snapshot.column_type(column).is_some())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
