//! evaluate: score a model on the frozen test split, overall and per slice.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use runfn_core::atomic::write_atomic;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_data::row_scores::RowScores;
use runfn_learn::device::DeviceChoice;
use runfn_learn::metrics::{self, Metrics};
use runfn_learn::{inputs, score, weights};
use runfn_manifest::eval_settings::EvalSettings;
use runfn_registry::{ModelRef, Registry};
use serde_json::{Map, Value, json};

const AFTER_HELP: &str = "\
Examples:
  train < shards.json | evaluate > evaluated.json
  evaluate --model churn@prod --as baseline < evaluated.json > compared.json
  evaluate --split val --bootstrap 1000 --predictions preds.csv < trained.json
  evaluate --checkpoint best < trained.json      # the weights of train.best (keep_best)

Loads the model file in this process (the weights carry their own preprocessing) and scores
every row of the split, in shard-index order. Metrics: auc (exact rank statistic, ties count
half; null with auc_note when the rows hold one class), logloss (probabilities clipped to
[1e-15, 1-1e-15]), brier, ece (10 equal-width bins), accuracy and positive_rate (score >= 0.5),
label_rate, mean_score, rows. The same per value of each column in manifest.eval.slices (or
--slice). --bootstrap N adds 95% percentile intervals (`ci95`) to the overall metrics.
--checkpoint best scores the checkpoint of the best val AUC that train kept with
manifest.config.keep_best (train.best.checkpoint): `model` is then that checkpoint's JSON and
`weights_blake3` the blake3 of its tensors file, checked before scoring.

Output: the input record plus, under `evaluate` (or `baseline` with --as baseline),
  {\"passed\": true, \"model\", \"registered_as\" (NAME@VERSION or null), \"weights_blake3\", \"model_manifest_hash\", \"split\",
   \"shards_index_blake3\", \"rows_blake3\" (digest of the rows scored, as shardify's), \"overall\": {metrics}, \"slices\": {\"<column>\": {\"<value>\": {metrics}}},
   \"row_scores\": {\"path\", \"blake3\", \"rows\", \"key\": \"row\" or manifest.eval.row_key},
   \"unseen\": {\"<categorical feature>\": {\"rows\", \"fraction\"}}}
row_scores is a Parquet file (runfn-row-scores-v1) with a row per scored row in the rows-digest
order: row (its position), key (the manifest.eval.row_key column's value, when declared), label,
score, and slice:<column> for each slice column; gate pairs the candidate's and the baseline's.
unseen counts the rows whose category the model's vocabulary lacks (scored as unknown).

When the record's leaks section counts exact or near twins across splits (a tolerance or `off`
let them through), the candidate's result adds
  \"contamination\": {\"twin_rows\", \"twins_in\": \"train\", \"overall_without_twins\": {metrics},
                    \"delta_auc\" (auc with the twin rows minus auc without them)}
the scored rows with a twin in train found again on the shards, so each is known exactly.

Exit: 0 scored, 2 bad usage or input (missing model or shards, schema mismatch with the model's
preprocessing, NaN features or labels, an empty split).
4 the environment failed (a store unreachable or timing out, a full disk, out of memory, a crash): the
same command may pass when retried.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Checkpoint {
    /// The model file train wrote (train.weights): under early stopping, the best val AUC's.
    Final,
    /// The kept checkpoint of the best val AUC (train.best.checkpoint).
    Best,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Role {
    Candidate,
    Baseline,
}

/// Score a model on the frozen test split: headline metrics, calibration, the same per slice.
#[derive(Debug, Parser)]
#[command(name = "evaluate", version, after_help = AFTER_HELP)]
struct Args {
    /// Model file, training folder, or a registered model as NAME@ALIAS or NAME@VERSION
    /// (default: the record's train.weights).
    #[arg(long, value_name = "PATH|NAME@ALIAS")]
    model: Option<PathBuf>,
    /// The registry that resolves NAME@ALIAS (default: RUNFN_REGISTRY, else ./registry).
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
    /// Which of the record's weights to score: the final model or the best checkpoint.
    #[arg(long, value_enum, default_value_t = Checkpoint::Final, conflicts_with = "model")]
    checkpoint: Checkpoint,
    /// The split to score.
    #[arg(long, default_value = "test")]
    split: String,
    /// Whose result this is: the candidate's goes under `evaluate`, the baseline's under `baseline`.
    #[arg(long = "as", value_enum, default_value_t = Role::Candidate)]
    role: Role,
    /// Slice columns, overriding manifest.eval.slices (repeatable).
    #[arg(long = "slice", value_name = "COLUMN")]
    slices: Vec<String>,
    /// Bootstrap resamples for 95% intervals on the overall metrics (at most 100000).
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=100_000))]
    bootstrap: usize,
    /// Also write every row's label and score as CSV (row,label,score) to FILE.
    #[arg(long, value_name = "FILE")]
    predictions: Option<PathBuf>,
    /// Where the per-row scores go (Parquet, for gate's paired test); a path or store URL.
    /// Default: beside the scored model's training,
    /// row-scores-<evaluate|baseline>-<split>-<weights blake3>-<rows blake3>.parquet (12 hex each).
    #[arg(long, value_name = "FILE|URL")]
    row_scores: Option<String>,
    /// The shard folder (default: the record's shards.dir).
    #[arg(long, value_name = "DIR")]
    shards: Option<PathBuf>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu", value_parser = DeviceChoice::parse)]
    device: DeviceChoice,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("evaluate", runfn_version::long());
    runfn_core::cli::main("evaluate", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let section = match args.role {
        Role::Candidate => "evaluate",
        Role::Baseline => "baseline",
    };
    let mut record = Record::read(args.record.as_deref(), RecordInput::Required)?;
    record.refuse_failed_checks(section)?;
    runfn_manifest::verify_record(&record)?;
    let registry_dir = args
        .registry
        .clone()
        .or_else(|| std::env::var_os("RUNFN_REGISTRY").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("registry"));
    // The model file, how it was named, and the blake3 the record or the registry says it has.
    let from_checkpoint = args.checkpoint == Checkpoint::Best;
    let (model_path, model_ref, expected) = match args.model {
        // A registered model: NAME@ALIAS or NAME@VERSION, resolved in the registry.
        Some(path) if !path.exists() && ModelRef::looks_like(&path.to_string_lossy()) => {
            let text = path.to_string_lossy().into_owned();
            let registry = Registry::open_existing(&registry_dir)?;
            let entry = registry.resolve(&ModelRef::parse(&text)?)?;
            let blob = registry.blobs.fetch(&entry.lineage.weights_blake3)?;
            (
                blob,
                Some(format!("{}@{}", entry.lineage.name, entry.version)),
                Some(entry.lineage.weights_blake3.clone()),
            )
        }
        Some(path) => (
            runfn_storage::local_path(&path.to_string_lossy())?,
            None,
            None,
        ),
        None if from_checkpoint => match record.get_path("train.best.checkpoint") {
            Some(Value::String(path)) => (staged_checkpoint(path)?, None, None),
            _ => {
                return Err(InputError::field(
                    "--checkpoint",
                    "best needs train.best, which this record does not have: train with \
                     manifest.config.keep_best: true",
                )
                .into());
            }
        },
        None => match record.get_path("train.weights") {
            Some(Value::String(path)) => (
                runfn_storage::local_path(path)?,
                None,
                record
                    .get_path("train.weights_blake3")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            ),
            _ => {
                return Err(InputError::field(
                    "--model",
                    "is missing and the record has no train.weights (run train first, or name a model file or NAME@ALIAS)",
                )
                .into());
            }
        },
    };
    let slices = if args.slices.is_empty() {
        slice_columns(&record)?
    } else {
        args.slices.clone()
    };
    let row_key = match record.get_path("manifest.eval") {
        Some(Value::Object(eval)) => {
            EvalSettings::parse(eval)
                .map_err(|problems| {
                    InputError::field(
                        format!("manifest.{}", problems[0].field),
                        problems[0].message.clone(),
                    )
                })?
                .row_key
        }
        _ => None,
    };

    let shards = inputs::shards(&record, args.shards)?;
    let Some(split) = shards.index.splits.get(&args.split) else {
        return Err(InputError::field(
            "--split",
            format!(
                "`{}` is not a split of {} (splits: {})",
                args.split,
                shards.dir.display(),
                shards
                    .index
                    .splits
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .into());
    };
    if split.rows == 0 {
        return Err(InputError::field("--split", format!("`{}` has no rows", args.split)).into());
    }
    for column in &slices {
        if !shards.index.columns.iter().any(|c| &c.name == column) {
            return Err(InputError::field(
                "manifest.eval.slices",
                format!("`{column}` is not a column of the shards"),
            )
            .into());
        }
    }
    if let Some(column) = &row_key
        && !shards.index.columns.iter().any(|c| &c.name == column)
    {
        return Err(InputError::field(
            "manifest.eval.row_key",
            format!("`{column}` is not a column of the shards"),
        )
        .into());
    }
    // The key column is read like a slice column and taken out again below.
    let mut read_columns = slices.clone();
    if let Some(column) = row_key.as_ref().filter(|c| !slices.contains(c)) {
        read_columns.push(column.clone());
    }
    let device = args.device.open().map_err(anyhow::Error::msg)?;
    let loaded = match &expected {
        _ if from_checkpoint => weights::load_checkpoint(&model_path, device)?,
        Some(blake3) => weights::load_expecting(&model_path, blake3, device)?,
        None => weights::load(&model_path, device)?,
    };
    let paths: Vec<PathBuf> = split
        .shards
        .iter()
        .map(|s| shards.dir.join(&s.path))
        .collect();
    tool.info(format!(
        "scoring {} rows of `{}` with {}",
        split.rows,
        args.split,
        model_path.display()
    ));
    // Labels are data: a candidate and a baseline are both scored against the labels today's
    // manifest reads, whatever value each model was trained to call positive.
    let mut preprocess = loaded.meta.preprocess.clone();
    let spec = runfn_data::spec::DataSpec::from_record(&record)?;
    if spec.label.is_some() {
        preprocess.label_positive = spec.label_positive;
    }
    let mut scored = score::score(&loaded.model, &preprocess, &paths, &read_columns, device)?;
    let keys = match &row_key {
        Some(column) => {
            let position = scored.slices.iter().position(|(c, _)| c == column);
            let values = match position {
                Some(i) if !slices.contains(column) => scored.slices.remove(i).1,
                Some(i) => scored.slices[i].1.clone(),
                None => Vec::new(),
            };
            let mut seen = std::collections::HashSet::with_capacity(values.len());
            if let Some(duplicate) = values.iter().find(|v| !seen.insert(v.as_str())) {
                return Err(InputError::field(
                    "manifest.eval.row_key",
                    format!(
                        "`{column}` is not a key of `{}`: the value {duplicate} appears twice",
                        args.split
                    ),
                )
                .into());
            }
            Some(values)
        }
        None => None,
    };

    // Recomputed from the rows scored, so a baseline scored elsewhere cannot claim these rows.
    let (rows_blake3, digested) =
        runfn_data::shards::split_rows_digest(&shards.dir, &shards.index, &args.split)
            .map_err(|e| InputError::field("shards", e.to_string()))?;
    if digested != scored.scores.len() as u64
        || split
            .rows_blake3
            .as_ref()
            .is_some_and(|d| *d != rows_blake3)
    {
        return Err(InputError::field(
            "shards",
            format!(
                "{}: the rows of `{}` do not match the rows digest in index.json",
                shards.dir.display(),
                args.split
            ),
        )
        .into());
    }
    let row_scores_at = match &args.row_scores {
        Some(location) => location.clone(),
        None => default_row_scores(&record, section, &args.split, &loaded.blake3, &rows_blake3)?,
    };
    let per_row = RowScores {
        split: args.split.clone(),
        rows_blake3: rows_blake3.clone(),
        key_column: row_key.clone(),
        rows: (0..scored.scores.len() as u64).collect(),
        keys,
        labels: scored.labels.clone(),
        scores: scored.scores.clone(),
        slices: scored.slices.clone(),
    };
    let row_scores_blake3 = write_row_scores(&per_row, &row_scores_at)?;
    let rows_scored = scored.scores.len() as f64;
    let unseen: Map<String, Value> = scored
        .unseen
        .iter()
        .map(|(column, rows)| {
            (
                column.clone(),
                json!({"rows": rows, "fraction": *rows as f64 / rows_scored}),
            )
        })
        .collect();
    for (column, share) in &unseen {
        let fraction = share["fraction"].as_f64().unwrap_or(0.0);
        if fraction > 0.0 {
            tool.info(format!(
                "{:.1}% of the rows have `{column}` values this model never saw (scored as unknown)",
                fraction * 100.0
            ));
        }
    }
    let mut overall = metrics::compute(&scored.scores, &scored.labels);
    if args.bootstrap > 0 {
        let seed = record
            .get_path("manifest.seed")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        overall.ci95 = Some(metrics::bootstrap(
            &scored.scores,
            &scored.labels,
            args.bootstrap,
            seed,
        ));
    }
    let contamination = match section {
        "evaluate" if names_twins(&record) => Some(contamination(
            &record,
            &shards,
            &args.split,
            &scored,
            overall.auc,
        )?),
        _ => None,
    };
    let mut by_slice = Map::new();
    for (column, values) in &scored.slices {
        by_slice.insert(
            column.clone(),
            slice_metrics(values, &scored.scores, &scored.labels),
        );
    }
    if let Some(path) = &args.predictions {
        write_atomic(path, |out| {
            writeln!(out, "row,label,score")?;
            for (i, (s, l)) in scored.scores.iter().zip(&scored.labels).enumerate() {
                writeln!(
                    out,
                    "{i},{},{}",
                    u8::from(*l),
                    ryu_js::Buffer::new().format(*s)
                )?;
            }
            Ok(())
        })
        .context("writing --predictions")?;
    }
    tool.info(format!(
        "{}: auc {}, logloss {:.4}, ece {:.4} on {} rows",
        if section == "evaluate" {
            "candidate"
        } else {
            "baseline"
        },
        overall.auc.map_or("null".into(), |a| format!("{a:.4}")),
        overall.logloss,
        overall.ece,
        overall.rows
    ));
    let mut result = json!({
            "passed": true,
            "model": model_path.display().to_string(),
            "registered_as": model_ref,
            "weights_blake3": loaded.blake3,
            "model_manifest_hash": loaded.meta.manifest_hash,
            "split": args.split,
            "shards_index_blake3": shards.index_blake3,
            "rows_blake3": rows_blake3,
            "overall": overall,
            "slices": by_slice,
            "row_scores": {
                "path": row_scores_at,
                "blake3": row_scores_blake3,
                "rows": per_row.len(),
                "key": row_key.as_deref().unwrap_or("row"),
            },
            "unseen": unseen,
    });
    if let Some(contamination) = contamination {
        tool.info(format!(
            "contamination: {} test rows have a twin in train; auc without them {}",
            contamination["twin_rows"], contamination["overall_without_twins"]["auc"]
        ));
        result["contamination"] = contamination;
    }
    record.set_section(section, result);
    match args.role {
        Role::Candidate => tool.finish(record, Exit::Passed),
        Role::Baseline => tool.finish_for(record, Exit::Passed, "baseline"),
    }
}

/// Beside the scored model's training (train.weights' folder), else beside the shards, named by
/// the model and the rows scored, so scoring other rows or another model never overwrites a file
/// an earlier record names.
fn default_row_scores(
    record: &Record,
    section: &str,
    split: &str,
    weights_blake3: &str,
    rows_blake3: &str,
) -> anyhow::Result<String> {
    let short = |d: &str| d.get(..12).unwrap_or(d).to_string();
    let name = format!(
        "row-scores-{section}-{split}-{}-{}.parquet",
        short(weights_blake3),
        short(rows_blake3)
    );
    let folder = record
        .get_path("train.weights")
        .and_then(Value::as_str)
        .and_then(|w| w.rsplit_once('/').map(|(folder, _)| folder.to_string()))
        .or_else(|| {
            record
                .get_path("shards.dir")
                .and_then(Value::as_str)
                .and_then(|d| d.trim_end_matches('/').rsplit_once('/'))
                .map(|(parent, _)| parent.to_string())
        });
    match folder {
        Some(folder) => Ok(format!("{folder}/{name}")),
        None => Err(InputError::field(
            "--row-scores",
            "is needed: the record has neither train.weights nor shards.dir to put the per-row scores beside",
        )
        .into()),
    }
}

/// Writes the per-row scores (atomically; to a store through a local file) and returns their
/// blake3.
fn write_row_scores(scores: &RowScores, location: &str) -> anyhow::Result<String> {
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

/// Whether leak-check found exact or near twins across splits (tolerated, or its check off).
/// A checkpoint's JSON, as a local path: a store URL's checkpoint folder is staged (tensors
/// first, JSONs last) and the same JSON in it returned.
fn staged_checkpoint(path: &str) -> anyhow::Result<PathBuf> {
    if !runfn_storage::is_remote(path) {
        return Ok(PathBuf::from(path));
    }
    let (folder, name) = path
        .rsplit_once('/')
        .ok_or_else(|| InputError::field("train.best.checkpoint", "names no file"))?;
    let local = runfn_storage::stage_set(folder, &|relative: &str| relative.ends_with(".json"))?;
    Ok(local.join(name))
}

fn names_twins(record: &Record) -> bool {
    let checks = record.get_path("leaks.checks").and_then(Value::as_array);
    checks.into_iter().flatten().any(|check| {
        matches!(
            check.get("name").and_then(Value::as_str),
            Some("exact_duplicates" | "near_duplicates")
        ) && check.get("count").and_then(Value::as_u64).unwrap_or(0) > 0
    })
}

/// The scored split with and without its rows that have an exact or near twin in train, the
/// twins found again on the shards themselves so each scored row is known exactly.
fn contamination(
    record: &Record,
    shards: &inputs::Shards,
    split: &str,
    scored: &score::Scored,
    auc: Option<f64>,
) -> anyhow::Result<Value> {
    let names: Vec<String> = shards.index.splits.keys().cloned().collect();
    let spec = runfn_data::spec::DataSpec::from_record(record)?;
    let config = runfn_leaks::LeakConfig::from_spec(&spec, &names);
    let mask = runfn_leaks::twin_mask(&shards.dir, &config, split, &config.train_split)
        .map_err(|e| InputError::field("shards", e.to_string()))?;
    anyhow::ensure!(
        mask.len() == scored.scores.len(),
        "{} twin flags for {} scored rows",
        mask.len(),
        scored.scores.len()
    );
    let (scores, labels): (Vec<f64>, Vec<bool>) = scored
        .scores
        .iter()
        .zip(&scored.labels)
        .zip(&mask)
        .filter(|(_, twin)| !**twin)
        .map(|((s, l), _)| (*s, *l))
        .unzip();
    let without = (!scores.is_empty()).then(|| metrics::compute(&scores, &labels));
    let delta_auc = auc.zip(without.as_ref().and_then(|w| w.auc));
    Ok(json!({
        "twin_rows": mask.iter().filter(|t| **t).count(),
        "twins_in": config.train_split,
        "overall_without_twins": without,
        "delta_auc": delta_auc.map(|(with, without)| with - without),
    }))
}

/// `manifest.eval.slices` (absent: none).
fn slice_columns(record: &Record) -> Result<Vec<String>, InputError> {
    match record.get_path("manifest.eval.slices") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    InputError::field("manifest.eval.slices", "must be a list of column names")
                })
            })
            .collect(),
        Some(_) => Err(InputError::field(
            "manifest.eval.slices",
            "must be a list of column names",
        )),
    }
}

/// Metrics for each value of one slice column, values in sorted order.
fn slice_metrics(values: &[String], scores: &[f64], labels: &[bool]) -> Value {
    let mut groups: BTreeMap<&str, (Vec<f64>, Vec<bool>)> = BTreeMap::new();
    for ((v, s), l) in values.iter().zip(scores).zip(labels) {
        let group = groups.entry(v.as_str()).or_default();
        group.0.push(*s);
        group.1.push(*l);
    }
    let mut out = Map::new();
    for (value, (s, l)) in groups {
        let m: Metrics = metrics::compute(&s, &l);
        out.insert(value.to_string(), json!(m));
    }
    Value::Object(out)
}
