//! gate: candidate vs baseline, overall and per slice, within the noise floor.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_gate::{Evaluation, Policy, decide};
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
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("gate");
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
    let policy = policy(&record, &args)?;

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

    let mut decision = decide(&policy, &candidate, baseline.as_ref());
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
        tool.info(format_args!("blocked: {reason}"));
    }
    if decision.passed {
        let against = if decision.no_baseline {
            "no baseline (first model)"
        } else {
            "the baseline"
        };
        tool.info(format!(
            "passed {} checks ({} gates) against {against}",
            decision.checks.len(),
            decision.gates_run.len()
        ));
    }
    let passed = decision.passed;
    record.set_section("gate", serde_json::to_value(&decision)?);
    tool.finish(record, Exit::from_passed(passed))
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
    if let (Some(metric), Some(floor)) = (
        record
            .get_path("noise_floor.metric")
            .and_then(Value::as_str),
        record.get_path("noise_floor.floor").and_then(Value::as_f64),
    ) {
        policy.apply_noise_floor(metric, floor);
    }
    Ok(policy)
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

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
