//! gate: candidate vs baseline, overall and per slice, within the noise floor.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_gate::policy::Source;
use runfn_gate::{
    Evaluation, Policy, Settings, TrainingNoise, add_stability, decide, decide_paired,
    gated_resolutions, pairing, stability_checks,
};
use runfn_manifest::eval_settings::{EvalSettings, Rule, Underpowered};
use runfn_schema::record::NoiseFloor;
use serde_json::Value;

const AFTER_HELP: &str = "\
Examples:
  gate < runs/churn/candidate.json > runs/churn/gate.json          # baseline under `baseline`
  gate --baseline runs/prod/eval.json < runs/churn/candidate.json
  gate --no-baseline < runs/churn/first.json                       # a first model
  gate --candidate eval.json --baseline prod.json --gate auc_min_delta=-0.002 --gate max_slice_drop=0.01 --slices region,tier

Gates (manifest.eval.gates, or --gate KEY=VALUE): <metric>_min_delta (candidate - baseline in the
metric's better direction must be at least VALUE; from the record's noise_floor, -floor, when not
given), <metric>_min and <metric>_max (absolute), max_slice_drop (no slice of manifest.eval.slices
may get worse by more), min_slice_rows (smaller slices are reported, not gated). Metrics: auc,
accuracy (higher is better), logloss, brier, ece (lower is better), positive_rate (bounds only).
Candidate and baseline must have scored the same rows: equal rows_blake3 (the digest evaluate
records), or, for an evaluation made before rows digests, the same number of rows.

Output: the input record plus
  \"gate\": {\"passed\": bool, \"no_baseline\": bool, \"gates_run\": [\"auc_min_delta\", ...],
           \"checks\": [{\"name\", \"metric\", \"slice\", \"baseline\", \"candidate\", \"delta\", \"limit\",
                       \"comparison\", \"passed\", \"note\"?}],
           \"reasons\": [\"slice tenure_bucket=<30d: auc went from 0.7900 to 0.7700 ...\"]}
  and, from a --baseline or --candidate file, its evaluate timings entries with \"for\": \"baseline\"
  or \"candidate\" (scoring it was this comparison's work; the rest of that run is not).

Exit: 0 passed, 1 blocked (record with reasons still on stdout), 2 bad usage or input.";

/// Candidate vs baseline, overall and per slice, within the noise floor.
#[derive(Debug, Parser)]
#[command(name = "gate", version, after_help = AFTER_HELP)]
struct Args {
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// The candidate's evaluation (a record with `evaluate`, or the evaluation itself); default:
    /// the record's `evaluate`.
    #[arg(long, value_name = "FILE")]
    candidate: Option<PathBuf>,
    /// The baseline's evaluation (a record with `evaluate`, or the evaluation itself); default:
    /// the record's `baseline`.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Allow a first model with no baseline (recorded in the output).
    #[arg(long)]
    no_baseline: bool,
    /// A gate, overriding the manifest's: KEY=VALUE, e.g. auc_min_delta=-0.002.
    #[arg(long = "gate", value_name = "KEY=VALUE")]
    gates: Vec<String>,
    /// Slice columns to gate, overriding manifest.eval.slices.
    #[arg(long, value_delimiter = ',')]
    slices: Option<Vec<String>>,
    /// The decision rule, overriding manifest.eval.rule.
    #[arg(long, value_enum)]
    rule: Option<RuleArg>,
    /// The confidence of the paired test, overriding manifest.eval.confidence (0.5 to 1).
    #[arg(long, value_parser = parse_confidence)]
    confidence: Option<f64>,
    /// Bootstrap resamples for the metrics other than AUC, overriding manifest.eval.resamples.
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(100..=100_000))]
    resamples: Option<usize>,
    /// Memory the paired test may hold (default: a quarter of the machine's). It holds both
    /// models' scores for every row, about 100 bytes a row; rows that do not fit are sorted on
    /// disk for AUC gates (the same figures), and refused (exit 2) for the others.
    #[arg(long, value_name = "SIZE", value_parser = runfn_data::spec::parse_size)]
    memory: Option<u64>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RuleArg {
    NoRegression,
    NonInferiority,
}

fn parse_confidence(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(c) if c > 0.5 && c < 1.0 => Ok(c),
        _ => Err(format!(
            "`{text}` is not a confidence between 0.5 and 1, e.g. 0.95"
        )),
    }
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("gate", runfn_version::long());
    runfn_core::cli::main("gate", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let input = if args.candidate.is_some() {
        RecordInput::Optional
    } else {
        RecordInput::Required
    };
    let mut record = Record::read(args.record.as_deref(), input)?;
    record.refuse_failed_checks("gate")?;
    runfn_manifest::verify_record(&record)?;
    let mut policy = policy(&record, &args)?;
    let settings = eval_settings(&record, &args)?;

    let candidate = match &args.candidate {
        Some(path) => {
            let (candidate, timings) = evaluation_file(path)?;
            carry_timings(&mut record, &timings, "candidate");
            candidate
        }
        None => match record.get("evaluate") {
            Some(value) => Evaluation::from_json(value, "evaluate")?,
            None => return Err(InputError::field(
                "evaluate",
                "is missing: the record has no candidate evaluation and --candidate is not given",
            )
            .into()),
        },
    };
    let baseline = match (&args.baseline, record.get("baseline")) {
        (Some(path), _) => {
            let (baseline, timings) = evaluation_file(path)?;
            carry_timings(&mut record, &timings, "baseline");
            Some(baseline)
        }
        (None, Some(value)) => Some(Evaluation::from_json(evaluation_in(value), "baseline")?),
        (None, None) => None,
    };
    if baseline.is_some() && args.no_baseline {
        tool.warn("--no-baseline given, but a baseline exists: gating against it");
    }

    outside_scores_unchanged(&record)?;
    let memory = args
        .memory
        .unwrap_or_else(runfn_core::environment::quarter_of_the_machine);
    let paired = match (&candidate.row_scores, baseline.as_ref()) {
        (Some(c), Some(b)) if b.row_scores.is_some() => {
            let b = b.row_scores.as_ref().expect("checked above");
            let (c_path, b_path) = (local(&c.path)?, local(&b.path)?);
            pairing::check_unchanged(&c_path, &c.blake3, "evaluate")?;
            pairing::check_unchanged(&b_path, &b.blake3, "baseline")?;
            let (c_shape, b_shape) = (
                pairing::shape(&c_path, "evaluate")?,
                pairing::shape(&b_path, "baseline")?,
            );
            let rows = c_shape.0.max(b_shape.0);
            match pairing::check_fits(rows, c_shape.1.max(b_shape.1), memory) {
                Ok(()) => {
                    let c_rows = pairing::read(&c_path, "evaluate")?;
                    let b_rows = pairing::read(&b_path, "baseline")?;
                    Some(pairing::pair(c_rows, b_rows)?)
                }
                // DeLong's test sorts the rows on disk: the same numbers in bounded memory.
                Err(_) if policy.rows_tested_by_auc_alone() => {
                    tool.info(format!(
                        "{rows} rows do not fit in --memory {memory}: the AUC tests sort them on disk"
                    ));
                    let spill =
                        runfn_data::spill_sort::SpillRoot::create(&std::env::temp_dir(), "gate")
                            .map_err(|source| InputError::Io {
                                path: std::env::temp_dir(),
                                source,
                            })?;
                    Some(runfn_gate::spilled_pairing::pair_spilled(
                        &c_path,
                        &b_path,
                        memory,
                        spill.path(),
                    )?)
                }
                Err(refused) => return Err(refused.into()),
            }
        }
        (c, Some(_)) => {
            tool.warn(format!(
                "the {} has no per-row scores (row_scores; evaluated before they were recorded): point estimates compared with fixed limits, not a paired test",
                if c.is_none() { "candidate" } else { "baseline" }
            ));
            None
        }
        _ => None,
    };
    let mut stability = None;
    let mut decision = match (&paired, &baseline) {
        (Some(scores), Some(baseline)) => {
            let candidate_noise = checked_noise(&record, "noise_floor")?;
            let serving_noise = match baseline_noise(&args)? {
                Some(noise) => Some(noise),
                None => registered_noise(&record)?,
            };
            // The drop test uses the rows' noise alone. A limit taken from a noise floor is the
            // serving model's normal seed-to-seed movement where the registry recorded it, so
            // the candidate's own spread never sets its own tolerance.
            if let Some(serving) = &serving_noise {
                for bound in &mut policy.min_delta {
                    if bound.source == Source::NoiseFloor {
                        bound.limit = -serving.floor.abs();
                    }
                }
            }
            stability = candidate_noise.clone().zip(serving_noise.clone());
            let noise: Vec<TrainingNoise> = [candidate_noise, serving_noise]
                .iter()
                .flatten()
                .map(training_noise)
                .collect();
            let seed = record
                .get_path("manifest.seed")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            decide_paired(
                &policy,
                &Settings {
                    eval: &settings,
                    seed,
                },
                &candidate,
                baseline,
                scores,
                &noise.iter().collect::<Vec<_>>(),
            )
        }
        _ => decide(&policy, &candidate, baseline.as_ref()),
    };
    if let Some((candidate_noise, serving_noise)) = stability {
        let metric = candidate_noise
            .metric
            .rsplit('.')
            .next()
            .unwrap_or_default();
        let gated = gated_resolutions(&decision, metric);
        let checks = stability_checks(&candidate_noise, &serving_noise, &gated, &settings);
        add_stability(&mut decision, checks);
    }
    if baseline.is_none() && !args.no_baseline {
        decision.passed = false;
        decision.reasons.push(
            "no baseline: the record has no `baseline` and --baseline is not given; pass --no-baseline for a first model"
                .into(),
        );
    }
    if decision.gates_run.is_empty() {
        tool.warn(
            "no gate ran: set manifest.eval.gates or --gate (e.g. auc_min_delta=-0.002); the candidate was not compared on any metric",
        );
    }
    for reason in &decision.reasons {
        tool.notice(format_args!("blocked: {reason}"));
    }
    if !decision.underpowered.is_empty() {
        tool.warn(format!(
            "underpowered (could not detect a drop of max_slice_drop; {}): {}",
            match settings.underpowered {
                Underpowered::Warn => "warned, not gated",
                Underpowered::Block => "blocking",
            },
            decision.underpowered.join(", ")
        ));
    }
    if !decision.undefined.is_empty() {
        tool.warn(format!(
            "undefined (one class only, nothing to compare): {}",
            decision.undefined.join(", ")
        ));
    }
    // Too small to tell, too large to stay unsaid: in the summary, not only in a list.
    for drop in &decision.underpowered_drops {
        tool.notice(format!(
            "warned: underpowered slice got worse beyond max_slice_drop: {drop}"
        ));
    }
    if !decision.unstable.is_empty() {
        tool.notice(format!(
            "unstable (the candidate's seeds spread beyond the serving model's): {}",
            decision.unstable.join(", ")
        ));
    }
    if decision.passed {
        let against = if decision.no_baseline {
            "no baseline (first model)"
        } else {
            "the baseline"
        };
        let caveat = match decision.underpowered_drops.len() {
            0 => String::new(),
            n => format!("; but {n} underpowered slice(s) got worse beyond max_slice_drop"),
        };
        tool.info(format!(
            "passed {} checks ({} gates) against {against}{caveat}",
            decision.checks.len(),
            decision.gates_run.len()
        ));
    }
    let passed = decision.passed;
    record.set(&decision.to_record())?;
    tool.finish_within(record, Exit::from_passed(passed), memory)
}

fn policy(record: &Record, args: &Args) -> Result<Policy, InputError> {
    let mut policy = match record.get_path("manifest.eval.gates") {
        Some(Value::Object(gates)) => Policy::from_gates(gates, "manifest.eval.gates")?,
        Some(other) => {
            return Err(InputError::field(
                "manifest.eval.gates",
                format!(
                    "must be an object, found {}",
                    runfn_core::error::json_type_name(other)
                ),
            ));
        }
        None => Policy::default(),
    };
    for gate in &args.gates {
        let (key, value) = gate
            .split_once('=')
            .ok_or_else(|| InputError::field("--gate", format!("`{gate}` is not KEY=VALUE")))?;
        let number: Value = serde_json::from_str(value.trim()).map_err(|_| {
            InputError::field("--gate", format!("`{gate}`: `{value}` is not a number"))
        })?;
        policy.set(key.trim(), &number, &format!("--gate {key}"))?;
    }
    policy.slice_columns = match (&args.slices, record.get_path("manifest.eval.slices")) {
        (Some(columns), _) => Some(columns.clone()),
        (None, Some(Value::Array(columns))) => Some(
            columns
                .iter()
                .filter_map(|c| c.as_str().map(String::from))
                .collect(),
        ),
        _ => None,
    };
    if let Some(noise) = checked_noise(record, "noise_floor")? {
        policy.apply_noise_floor(&noise.metric, noise.floor);
    }
    Ok(policy)
}

/// manifest.eval's rule settings, with the flags' overrides.
fn eval_settings(record: &Record, args: &Args) -> Result<EvalSettings, InputError> {
    let mut settings = match record.get_path("manifest.eval") {
        Some(Value::Object(eval)) => EvalSettings::parse(eval).map_err(|problems| {
            let first = &problems[0];
            InputError::field(format!("manifest.{}", first.field), first.message.clone())
        })?,
        _ => EvalSettings::default(),
    };
    if let Some(rule) = args.rule {
        settings.rule = match rule {
            RuleArg::NoRegression => Rule::NoRegression,
            RuleArg::NonInferiority => Rule::NonInferiority,
        };
    }
    if let Some(confidence) = args.confidence {
        settings.confidence = confidence;
    }
    if let Some(resamples) = args.resamples {
        settings.resamples = resamples;
    }
    Ok(settings)
}

/// The baseline's own spread over seeds: the `noise_floor` of the `--baseline` record, when it
/// has one.
fn baseline_noise(args: &Args) -> Result<Option<NoiseFloor>, InputError> {
    match &args.baseline {
        Some(path) => checked_noise(
            &Record::read(Some(path), RecordInput::Required)?,
            "--baseline's noise_floor",
        ),
        None => Ok(None),
    }
}

/// The serving model's spread over seeds, as evaluate --as baseline took it from the registry
/// (`baseline.noise_floor`).
fn registered_noise(record: &Record) -> Result<Option<NoiseFloor>, InputError> {
    let Some(section) = record.get_path("baseline.noise_floor") else {
        return Ok(None);
    };
    let noise: NoiseFloor = serde_json::from_value(section.clone())
        .map_err(|e| InputError::field("baseline.noise_floor", e.to_string()))?;
    runfn_gate::check_noise_floor(&noise, "baseline.noise_floor")?;
    Ok(Some(noise))
}

/// The record's `noise_floor`, refused (naming `field`) when its spreads are not numbers a
/// spread can be.
fn checked_noise(record: &Record, field: &str) -> Result<Option<NoiseFloor>, InputError> {
    let section = record.section::<NoiseFloor>()?;
    if let Some(section) = &section {
        runfn_gate::check_noise_floor(section, field)?;
    }
    Ok(section)
}

/// A `noise_floor` section as the standard deviations the paired test adds.
fn training_noise(section: &NoiseFloor) -> TrainingNoise {
    let metric = section
        .metric
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_string();
    let slices = section
        .slices
        .iter()
        .flatten()
        .map(|(column, values)| {
            let stds = values.iter().map(|(v, s)| (v.clone(), s.std)).collect();
            (column.clone(), stds)
        })
        .collect();
    TrainingNoise {
        metric,
        overall: Some(section.std),
        slices,
    }
}

/// A row-scores path as a local file (a store URL is staged).
fn local(path: &str) -> Result<PathBuf, InputError> {
    runfn_storage::local_path(path).map_err(|e| InputError::field("row_scores.path", e.to_string()))
}

/// A record's `evaluate` section, or the value itself when it already is an evaluation.
fn evaluation_in(value: &Value) -> &Value {
    match value.get("evaluate") {
        Some(evaluate) if value.get("overall").is_none() => evaluate,
        _ => value,
    }
}

/// The evaluation in a file and its record's `evaluate` timings entries.
fn evaluation_file(path: &Path) -> Result<(Evaluation, Vec<Value>), InputError> {
    let record = Record::read(Some(path), RecordInput::Required)?;
    record.refuse_failed_checks("gate")?;
    let value = record.into_value();
    let timings = value["timings"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|entry| entry["tool"] == "evaluate")
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let evaluation = Evaluation::from_json(evaluation_in(&value), &path.display().to_string())?;
    Ok((evaluation, timings))
}

/// Scoring an evaluation read from a file (`role`: baseline or candidate) is part of this
/// comparison's work, so its time (and cost) joins the record's, tagged `"for": role`; the
/// rest of that file's run is another run's.
fn carry_timings(record: &mut Record, evaluations: &[Value], role: &str) {
    let own: Vec<Value> = record
        .get("timings")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut tag = serde_json::Map::new();
    tag.insert("for".into(), Value::from(role));
    let merged = runfn_core::timings::merge(&[(&own, serde_json::Map::new()), (evaluations, tag)]);
    record.set_section("timings", Value::Array(merged));
}

/// An outside program's scores file (`evaluate --scores`) is what evaluation read: a file changed
/// since then would have the gate pass on scores nobody judged.
fn outside_scores_unchanged(record: &Record) -> anyhow::Result<()> {
    for key in ["evaluate", "baseline"] {
        let Some(scores) = record
            .get(key)
            .map(evaluation_in)
            .and_then(|section| section.get("scores"))
        else {
            continue;
        };
        let scores: runfn_schema::record::ScoresFile =
            runfn_core::record::typed(scores, &format!("{key}.scores"))?;
        {
            runfn_core::side_file::check_unchanged(
                &format!("{key}.scores"),
                &scores.path,
                &scores.blake3,
                runfn_core::side_file::SCORES_LIMIT,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
