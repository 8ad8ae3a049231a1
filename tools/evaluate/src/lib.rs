//! evaluate: score a model on the frozen test split, overall and per slice. The tool is this
//! library, so its steps are functions a reader (and a test) can take one at a time; `main.rs`
//! only calls [`main`].

mod external;
mod model;
mod part_rows;
mod parted;
mod rows;
mod tally;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_learn::device::DeviceChoice;
use runfn_learn::metrics::{self, Metrics};
use runfn_learn::{inputs, score};
use runfn_manifest::eval_settings::EvalSettings;
use runfn_schema::record::{
    Contamination, Evaluate, Leaks, Mistake, RowScoresRef, ScoresFile, Shards, Train, Unseen,
};
use serde_json::Value;

const AFTER_HELP: &str = "\
Examples:
  train < shards.json | evaluate > evaluated.json
  evaluate --model churn@prod --as baseline < evaluated.json > compared.json
  evaluate --split val --bootstrap 1000 --predictions preds.csv < trained.json
  evaluate --checkpoint best < trained.json      # the weights of train.best (keep_best)
  evaluate --scores gbdt-test.parquet < trained-elsewhere.json    # any program's model

--scores FILE judges a model runfn did not train by the scores its own program wrote: Parquet
(starting with PAR1) or CSV with a header, one row per row of the split, a key column (--key,
else manifest.eval.row_key, else manifest.data.entity) and `score`, the probability of the
positive label. The file must cover exactly the split's rows (a key of another row, a row left
out, a key twice, a NaN, infinite or out-of-[0, 1] score: exit 2 naming it); labels, slices and
the rows digest come from the shards, as for runfn's own model. For the candidate, the record's
`external_train` section (written by the team's training script: artifact, artifact_blake3,
framework, format, params) names the model: its blake3 is checked and becomes weights_blake3;
without it, or for a baseline, weights_blake3 is the scores file's. The section then adds
  \"scores\": {\"path\", \"blake3\", \"key\", \"rows\"}
which gate and register check again: a scores file changed after evaluation is refused.

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
   \"shards_index_blake3\", \"rows_blake3\" (digest of the rows scored, as shardify's), \"rows_format\", \"overall\": {metrics}, \"slices\": {\"<column>\": {\"<value>\": {metrics}}},
   \"row_scores\": {\"path\", \"blake3\", \"rows\", \"key\": \"row\" or manifest.eval.row_key},
   \"unseen\": {\"<categorical feature>\": {\"rows\", \"fraction\"}},
   \"mistakes\": [{\"row\", \"key\", \"label\", \"score\", \"values\": {\"<feature>\": text}}]}   (absent when none)
row_scores is a Parquet file (runfn-row-scores-v1) with a row per scored row in the rows-digest
order: row (its position), key (the manifest.eval.row_key column's value, when declared), label,
score, and slice:<column> for each slice column; gate pairs the candidate's and the baseline's.
unseen counts the rows whose category the model's vocabulary lacks (scored as unknown).
mistakes are the 10 most confident wrong predictions with each feature's value in the row.

When the record's leaks section counts exact or near twins across splits (a tolerance or `off`
let them through), the candidate's result adds
  \"contamination\": {\"twin_rows\", \"twins_in\": \"train\", \"overall_without_twins\": {metrics},
                    \"delta_auc\" (auc with the twin rows minus auc without them)}
the scored rows with a twin in train found again on the shards, so each is known exactly.

Memory: the rows stream past, a batch at a time, so evaluate holds a batch and what --memory SIZE
lets its sorters keep (default: a quarter of the machine's); the rows the AUCs, the score bins and
the row key check read in sorted order wait beyond it on disk under TMPDIR, removed at the end.
Every figure and file is the same at any budget. --bootstrap resamples every row in memory
(9 bytes a row, a copy per thread): a split too large for the budget is refused by name. The
timings entry says the budget (memory_budget_bytes) and the peak (max_rss_bytes).

In parts: --part K/N --parts DIR scores part K (0-based) of N of the split's shards (a contiguous
run balanced by bytes) into DIR/evaluate.part-K-of-N.rows and .json; the same command with
--parts DIR and no --part merges them into the section, row scores and --predictions one process
writes, byte for byte. A missing part, a changed rows file, or parts of other shards, weights,
slices or key are refused (exit 2); --scores takes no parts. docs/parts.md.

Exit: 0 scored, 2 bad usage or input (missing model or shards, schema mismatch with the model's
preprocessing, NaN features or labels, an empty split).";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Checkpoint {
    /// The model file train wrote (train.weights): under early stopping, the best val AUC's.
    Final,
    /// The kept checkpoint of the best val AUC (train.best.checkpoint).
    Best,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Candidate,
    Baseline,
}

/// Score a model on the frozen test split: headline metrics, calibration, the same per slice.
#[derive(Debug, Parser)]
#[command(name = "evaluate", version, after_help = AFTER_HELP)]
pub struct Args {
    /// Model file, training folder, or a registered model as NAME@ALIAS or NAME@VERSION
    /// (default: the record's train.weights).
    #[arg(long, value_name = "PATH|NAME@ALIAS")]
    model: Option<PathBuf>,
    /// Scores an outside program wrote for the split's rows (Parquet or CSV: a key column and
    /// `score`, the probability of the positive label), judged in place of a model.
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    scores: Option<PathBuf>,
    /// The column joining --scores to the split's rows (default: manifest.eval.row_key, else
    /// manifest.data.entity).
    #[arg(long, value_name = "COLUMN", requires = "scores")]
    key: Option<String>,
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
    /// Memory the evaluation may hold beyond one batch (default: a quarter of the machine's):
    /// the rows the AUCs and the key check sort past it wait on disk under TMPDIR.
    #[arg(long, value_name = "SIZE", value_parser = runfn_data::spec::parse_size)]
    memory: Option<u64>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    parts: runfn_core::parts::PartArgs,
    #[command(flatten)]
    common: CommonArgs,
}

pub fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("evaluate", runfn_version::long());
    runfn_core::cli::read_panics_with(runfn_learn::torch_failure::cause_of_message);
    runfn_core::cli::main("evaluate", args.common.clone(), |tool| run(tool, args))
}

impl Role {
    /// The record's key the result goes under.
    fn section(self) -> &'static str {
        match self {
            Role::Candidate => "evaluate",
            Role::Baseline => "baseline",
        }
    }
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let section = args.role.section();
    let mut record = Record::read(args.record.as_deref(), RecordInput::Required)?;
    record.refuse_failed_checks(section)?;
    runfn_manifest::verify_record(&record)?;
    let train = record.section::<Train>()?;
    let slices = if args.slices.is_empty() {
        slice_columns(&record)?
    } else {
        args.slices.clone()
    };
    let spec = runfn_data::spec::DataSpec::from_record(&record)?;
    let declared_key = row_key(&record)?;
    // Outside scores are joined to the rows by a key, which then keys the per-row scores too.
    let row_key = match &args.scores {
        Some(_) => Some(external::key_column(
            args.key.as_deref(),
            declared_key.as_deref(),
            &spec,
        )?),
        None => declared_key.clone(),
    };
    // The model is named before any data is read: a record without one fails on that first.
    let model = match &args.scores {
        Some(_) => None,
        None => Some(model::resolve(&args, train.as_ref())?),
    };
    // A part re-hashes the shards it scores (below), not every shard of the index.
    let shards = match args.parts.part {
        Some(_) => inputs::shards_unverified(&record, args.shards.clone())?,
        None => inputs::shards(&record, args.shards.clone())?,
    };
    let split = rows::split_to_score(&shards, &args.split)?;
    // Where the key was named, for errors about it.
    let key_field = match (&args.scores, &args.key, &declared_key) {
        (Some(_), Some(_), _) => "--key",
        (_, _, Some(_)) => "manifest.eval.row_key",
        (Some(_), None, None) => "manifest.data.entity",
        (None, _, None) => "manifest.eval.row_key",
    };
    rows::check_columns(&shards, &slices, row_key.as_deref(), key_field)?;
    // The key column is read like a slice column and taken out again below.
    let mut read_columns = slices.clone();
    if let Some(column) = row_key.as_ref().filter(|c| !slices.contains(c)) {
        read_columns.push(column.clone());
    }
    let paths: Vec<PathBuf> = split
        .shards
        .iter()
        .map(|s| shards.dir.join(&s.path))
        .collect();
    let memory = args
        .memory
        .unwrap_or_else(runfn_core::environment::quarter_of_the_machine);
    if args.scores.is_some() && args.parts.parts.is_some() {
        return Err(InputError::field(
            "--parts",
            "spreads the scoring of a model over parts; --scores needs none (its scores are read whole)",
        )
        .into());
    }
    let scorer = match &args.scores {
        Some(_) => None,
        None => {
            let model = model.expect("resolved above without --scores");
            let device = args.device.open().map_err(anyhow::Error::msg)?;
            let loaded = model.load(args.checkpoint == Checkpoint::Best, device)?;
            tool.info(format!(
                "scoring {} rows of `{}` with {}",
                split.rows,
                args.split,
                model.path.display()
            ));
            // Labels are data: a candidate and a baseline are both scored against the labels
            // today's manifest reads, whatever value each model was trained to call positive.
            let mut preprocess = loaded.meta.preprocess.clone();
            if spec.label.is_some() {
                preprocess.label_positive = spec.label_positive.clone();
            }
            Some((model, Box::new(loaded), preprocess, device))
        }
    };
    let part_run = scorer.as_ref().map(|(_, loaded, _, _)| parted::PartRun {
        part: args
            .parts
            .part
            .unwrap_or(runfn_core::parts::Part { index: 0, count: 1 }),
        dir: args
            .parts
            .parts
            .as_deref()
            .unwrap_or(std::path::Path::new(".")),
        shards_dir: &shards.dir,
        split_name: &args.split,
        split,
        weights_blake3: &loaded.blake3,
        columns: &read_columns,
    });
    if let (Some(_), Some(run), Some((_, loaded, preprocess, device))) =
        (args.parts.part, &part_run, &scorer)
    {
        return parted::run_part(tool, run, |mine, each| {
            let mine: Vec<PathBuf> = mine.iter().map(|&i| paths[i].clone()).collect();
            score::score_each(
                &loaded.model,
                preprocess,
                &mine,
                &read_columns,
                *device,
                each,
            )
        });
    }
    let merging = match (&args.parts.parts, &part_run) {
        (Some(dir), Some(run)) => Some((dir.clone(), parted::read_parts(dir, run)?)),
        _ => None,
    };
    // The rows digest comes from the shards before any row is scored: it names the default row
    // scores file, which is written while the rows stream past, and goes in that file's footer.
    let (rows_blake3, digested_rows) = rows::rows_digest(&shards, &args.split, split)?;
    if args.bootstrap > 0 {
        rows::check_bootstrap_fits(split.rows, memory)?;
    }
    let twins = match section {
        "evaluate" if names_twins(&record)? => Some(twin_mask(&record, &shards, &args.split)?),
        _ => None,
    };
    if let Some(mask) = &twins {
        anyhow::ensure!(
            mask.len() as u64 == digested_rows,
            "{} twin flags for {digested_rows} rows of `{}`",
            mask.len(),
            args.split
        );
    }
    // An outside file's scores are read (and joined to the rows) before anything is written.
    let outside = match &args.scores {
        Some(file) => {
            let key = row_key.as_deref().expect("--scores has a key");
            let (scored, read) =
                external::score(&record, file, key, &paths, &read_columns, &args.split)?;
            tool.info(format!(
                "judging {} scores of `{}` from {} (keyed by {key})",
                scored.scores.len(),
                args.split,
                file.display()
            ));
            let scorer = external::scorer(&record, read, args.role == Role::Candidate)?;
            Some((scored, scorer))
        }
        None => None,
    };
    let weights_blake3 = match (&scorer, &outside) {
        (Some((_, loaded, _, _)), _) => loaded.blake3.clone(),
        (_, Some((_, outside))) => outside.weights_blake3.clone(),
        _ => unreachable!("a model or an outside file scores the rows"),
    };
    let row_scores_at = match &args.row_scores {
        Some(location) => location.clone(),
        None => default_row_scores(
            train.as_ref(),
            &record,
            section,
            &args.split,
            &weights_blake3,
            &rows_blake3,
        )?,
    };
    // The per-row file is keyed as every evaluation of this manifest keys it (its row_key, else
    // the position), whatever key joined an outside file's scores, so gate pairs any two.
    let file_key = if row_key == declared_key {
        row_key.clone()
    } else {
        None
    };
    let spill = runfn_data::spill_sort::SpillRoot::create(&std::env::temp_dir(), "evaluate")
        .context("making a folder under TMPDIR for what evaluate sorts")?;
    let plan = tally::Plan {
        columns: read_columns.clone(),
        slices: slices.clone(),
        key: row_key.as_ref().map(|column| tally::KeyColumn {
            at: read_columns
                .iter()
                .position(|c| c == column)
                .expect("the key column is read"),
            in_file: file_key.is_some(),
        }),
        twins,
        keep_rows: args.bootstrap > 0,
        memory,
        spill: spill.path(),
    };
    let mut row_scores_file = rows::RowScoresFile::create(&row_scores_at)?;
    let row_scores_writer = runfn_data::row_scores::RowScoresWriter::new(
        row_scores_file.writer()?,
        &args.split,
        file_key.as_deref(),
        slices.clone(),
    )?;
    let mut predictions_file = match &args.predictions {
        Some(path) => Some(runfn_core::atomic::AtomicFile::create(path)?),
        None => None,
    };
    let predictions_writer = match &mut predictions_file {
        Some(file) => Some(
            file.file_mut()
                .try_clone()
                .context("writing --predictions")?,
        ),
        None => None,
    };
    let mut tally = tally::Tally::new(plan, row_scores_writer, predictions_writer)?;
    let (scorer, unseen_rows) = match (scorer, outside) {
        (Some((model, loaded, preprocess, device)), _) => {
            let unseen = match &merging {
                Some((dir, parts)) => {
                    parted::stream_parts(dir, parts, &mut |batch| tally.push(batch))?
                }
                None => score::score_each(
                    &loaded.model,
                    &preprocess,
                    &paths,
                    &read_columns,
                    device,
                    |batch| tally.push(batch),
                )?,
            };
            let scorer = Scorer::Own {
                model,
                loaded,
                preprocess,
            };
            (scorer, unseen)
        }
        (None, Some((scored, outside))) => {
            tally.push(&scored)?;
            (Scorer::Outside(outside), scored.unseen)
        }
        (None, None) => unreachable!("a model or an outside file scores the rows"),
    };
    let (tallied, written) = tally.finish(&rows_blake3)?;
    if let Some(column) = &row_key {
        rows::refuse_repeated_keys(
            &paths,
            column,
            &tallied.repeated_keys,
            &args.split,
            key_field,
        )?;
    }
    rows::check_rows_scored(&shards, &args.split, digested_rows, tallied.rows)?;
    let row_scores = RowScoresRef {
        blake3: row_scores_file.commit(written)?,
        path: row_scores_at,
        rows: tallied.rows,
        key: file_key.as_deref().unwrap_or("row").to_string(),
    };
    if let Some(file) = predictions_file {
        file.commit()?;
    }
    let feature_columns = scorer.feature_columns(&shards, spec.label.as_deref());
    let mistakes = mistakes(&tallied.mistakes, &feature_columns, &paths)?;
    let unseen = unseen_shares(tool, &unseen_rows, tallied.rows);
    let mut overall = tallied.overall;
    if args.bootstrap > 0 {
        let seed = record
            .get_path("manifest.seed")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        overall.ci95 = Some(metrics::bootstrap(
            &tallied.kept.0,
            &tallied.kept.1,
            args.bootstrap,
            seed,
        ));
    }
    let contamination = match section {
        "evaluate" if names_twins(&record)? => Some(contamination(
            &record,
            &shards,
            tallied.twin_rows,
            tallied.without_twins,
            overall.auc,
        )?),
        _ => None,
    };
    let by_slice = tallied.slices;
    tool.info(format!(
        "{}: auc {}, logloss {:.4}, ece {:.4} on {} rows",
        match args.role {
            Role::Candidate => "candidate",
            Role::Baseline => "baseline",
        },
        overall.auc.map_or("null".into(), |a| format!("{a:.4}")),
        overall.logloss,
        overall.ece,
        overall.rows
    ));
    if let Some(found) = &contamination {
        tool.info(format!(
            "contamination: {} test rows have a twin in train; auc without them {}",
            found.twin_rows,
            found
                .overall_without_twins
                .as_ref()
                .and_then(|m| m.auc)
                .map_or("null".into(), |a| a.to_string())
        ));
    }
    let identity = scorer.identity();
    let noise_floor = match (args.role, &identity.registered_as) {
        (Role::Baseline, Some(registered_as)) => {
            model::registered_noise_floor(&args, registered_as)?
        }
        _ => None,
    };
    record.set_as(
        section,
        &Evaluate {
            passed: true,
            model: identity.model,
            registered_as: identity.registered_as,
            weights_blake3: identity.weights_blake3,
            model_manifest_hash: identity.model_manifest_hash,
            split: args.split.clone(),
            shards_index_blake3: shards.index_blake3.clone(),
            rows_blake3,
            rows_format: split.rows_format.clone(),
            overall,
            slices: by_slice,
            row_scores,
            unseen,
            contamination,
            mistakes,
            scores: identity.scores,
            score_bins: Some(tallied.score_bins),
            noise_floor,
        },
    )?;
    match args.role {
        Role::Candidate => tool.finish_within(record, Exit::Passed, memory),
        Role::Baseline => tool.finish_for_within(record, Exit::Passed, "baseline", memory),
    }
}

/// What scored the rows: runfn's own model, or an outside program's scores file.
enum Scorer {
    Own {
        model: runfn_learn::model_source::ModelSource,
        loaded: Box<runfn_learn::weights::LoadedModel>,
        preprocess: runfn_learn::features::Preprocess,
    },
    Outside(external::Scorer),
}

/// The section's fields that name what scored the rows.
struct Identity {
    model: String,
    registered_as: Option<String>,
    weights_blake3: String,
    model_manifest_hash: String,
    scores: Option<ScoresFile>,
}

impl Scorer {
    /// The columns the model read: its preprocessing's features, or (an outside model's, which
    /// runfn cannot know) every column of the shards but the label.
    fn feature_columns(&self, shards: &inputs::Shards, label: Option<&str>) -> Vec<String> {
        match self {
            Scorer::Own { preprocess, .. } => preprocess
                .columns()
                .into_iter()
                .skip(1)
                .map(str::to_string)
                .collect(),
            Scorer::Outside(_) => shards
                .index
                .columns
                .iter()
                .map(|c| c.name.clone())
                .filter(|name| Some(name.as_str()) != label)
                .collect(),
        }
    }

    fn identity(self) -> Identity {
        match self {
            Scorer::Own { model, loaded, .. } => Identity {
                model: model.path.display().to_string(),
                registered_as: model.registered_as,
                weights_blake3: loaded.blake3,
                model_manifest_hash: loaded.meta.manifest_hash,
                scores: None,
            },
            Scorer::Outside(outside) => Identity {
                model: outside.model,
                registered_as: None,
                weights_blake3: outside.weights_blake3,
                model_manifest_hash: outside.model_manifest_hash,
                scores: Some(ScoresFile {
                    path: outside.scores.path.display().to_string(),
                    blake3: outside.scores.blake3.clone(),
                    key: outside.scores.key.clone(),
                    rows: outside.scores.rows(),
                }),
            },
        }
    }
}

/// The most confident wrong predictions, with each feature's value in the row: the mistakes
/// people look at first (the rows are read again from the shards, only those).
fn mistakes(
    found: &[tally::Mistaken],
    columns: &[String],
    shards: &[PathBuf],
) -> anyhow::Result<Vec<Mistake>> {
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let wanted = found.iter().map(|m| m.row).collect();
    let mut values = score::values_of_rows(shards, &columns, &wanted)?;
    Ok(found
        .iter()
        .map(|m| Mistake {
            row: m.row,
            key: m.key.clone(),
            label: m.label,
            score: m.score,
            values: values
                .remove(&m.row)
                .unwrap_or_default()
                .into_iter()
                .collect(),
        })
        .collect())
}

/// `manifest.eval.row_key`, when the manifest declares one.
fn row_key(record: &Record) -> Result<Option<String>, InputError> {
    match record.get_path("manifest.eval") {
        Some(Value::Object(eval)) => Ok(EvalSettings::parse(eval)
            .map_err(|problems| {
                InputError::field(
                    format!("manifest.{}", problems[0].field),
                    problems[0].message.clone(),
                )
            })?
            .row_key),
        _ => Ok(None),
    }
}

/// The share of the scored rows whose category each feature's vocabulary lacks, said on stderr
/// when there are any.
fn unseen_shares(tool: &Tool, unseen: &[(String, u64)], rows: u64) -> BTreeMap<String, Unseen> {
    let rows_scored = rows as f64;
    let unseen: BTreeMap<String, Unseen> = unseen
        .iter()
        .map(|(column, rows)| {
            let share = Unseen {
                rows: *rows,
                fraction: *rows as f64 / rows_scored,
            };
            (column.clone(), share)
        })
        .collect();
    for (column, share) in &unseen {
        if share.fraction > 0.0 {
            tool.info(format!(
                "{:.1}% of the rows have `{column}` values this model never saw (scored as unknown)",
                share.fraction * 100.0
            ));
        }
    }
    unseen
}

/// Beside the scored model's training (train.weights' folder), else beside the shards, named by
/// the model and the rows scored, so scoring other rows or another model never overwrites a file
/// an earlier record names.
fn default_row_scores(
    train: Option<&Train>,
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
    let shards_dir = record.section::<Shards>()?.map(|s| s.dir);
    let folder = train
        .and_then(|t| t.weights.as_deref())
        .and_then(|w| w.rsplit_once('/').map(|(folder, _)| folder.to_string()))
        .or_else(|| {
            shards_dir
                .as_deref()
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

/// Whether leak-check found exact or near twins across splits (tolerated, or its check off).
fn names_twins(record: &Record) -> Result<bool, InputError> {
    let leaks = record.section::<Leaks>()?;
    Ok(leaks.iter().flat_map(|l| &l.checks).any(|check| {
        matches!(check.name.as_str(), "exact_duplicates" | "near_duplicates") && check.count > 0
    }))
}

/// Each row of `split`: whether it has an exact or near twin in train, found again on the
/// shards themselves so each scored row is known exactly.
fn twin_mask(record: &Record, shards: &inputs::Shards, split: &str) -> anyhow::Result<Vec<bool>> {
    let names: Vec<String> = shards.index.splits.keys().cloned().collect();
    let spec = runfn_data::spec::DataSpec::from_record(record)?;
    let config = runfn_leaks::LeakConfig::from_spec(&spec, &names);
    Ok(
        runfn_leaks::twin_mask(&shards.dir, &config, split, &config.train_split)
            .map_err(|e| InputError::field("shards", e.to_string()))?,
    )
}

/// The scored split with and without its rows that have a twin in train.
fn contamination(
    record: &Record,
    shards: &inputs::Shards,
    twin_rows: u64,
    without: Option<Metrics>,
    auc: Option<f64>,
) -> anyhow::Result<Contamination> {
    let names: Vec<String> = shards.index.splits.keys().cloned().collect();
    let spec = runfn_data::spec::DataSpec::from_record(record)?;
    let config = runfn_leaks::LeakConfig::from_spec(&spec, &names);
    let delta_auc = auc.zip(without.as_ref().and_then(|w| w.auc));
    Ok(Contamination {
        twin_rows,
        twins_in: config.train_split.clone(),
        overall_without_twins: without,
        delta_auc: delta_auc.map(|(with, without)| with - without),
    })
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
