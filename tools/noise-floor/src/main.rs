//! noise-floor: the spread of a metric over reruns of one manifest with different seeds.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_schema::record::{NoiseFloor, SliceSpread};
use runfn_stats::noise::{FloorMethod, spread};
use serde_json::{Map, Value};

const AFTER_HELP: &str = "\
Examples:
  cat runs/churn/eval-seed*.json | noise-floor --metric evaluate.overall.auc > runs/churn/noise.json
  noise-floor runs/a.jsonl runs/b.jsonl --metric evaluate.overall.logloss --method ci95
  noise-floor --values 0.861,0.863,0.862 < runs/churn/eval.json

Input: run records of reruns of one manifest (JSON Lines or concatenated objects, from the files
or stdin); all must share one manifest_hash. The output is the first record (or, with --values,
the record on stdin) plus the section below, with the timings of every record: the entries the
reruns share once, each rerun's own tagged with its \"seed\" (train.seed). When the metric path has the form
<section>.overall.<metric>, the same spread is computed per slice from <section>.slices.

Output section:
  \"noise_floor\": {\"metric\", \"n\", \"mean\", \"std\", \"min\", \"max\", \"range\", \"floor\", \"method\",
                  \"values\": [...],
                  \"slices\": {\"<column>\": {\"<value>\": {\"n\", \"mean\", \"std\", \"min\", \"max\", \"range\", \"floor\"}}}}
  floor: range = max - min (default); std = sample standard deviation; ci95 = half-width of the
  95% confidence interval of the mean (Student t, n - 1 degrees of freedom).

Exit: 0 done, 2 bad usage or input (fewer than 2 values, a record without the metric). n = 2 warns.";

/// The spread of a metric over reruns of one manifest with different seeds.
#[derive(Debug, Parser)]
#[command(name = "noise-floor", version, after_help = AFTER_HELP)]
struct Args {
    /// Files of run records (default: stdin).
    records: Vec<PathBuf>,
    /// Dotted path of the metric in each record, e.g. evaluate.overall.auc.
    #[arg(long, value_name = "PATH", required_unless_present = "values")]
    metric: Option<String>,
    /// The metric's values, comma-separated, instead of records.
    #[arg(
        long,
        value_delimiter = ',',
        allow_negative_numbers = true,
        conflicts_with = "records"
    )]
    values: Option<Vec<f64>>,
    /// How the floor is taken from the spread.
    #[arg(long, value_enum, default_value_t = MethodArg::Range)]
    method: MethodArg,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MethodArg {
    Range,
    Std,
    Ci95,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("noise-floor", runfn_version::long());
    runfn_core::cli::main("noise-floor", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let method = match args.method {
        MethodArg::Range => FloorMethod::Range,
        MethodArg::Std => FloorMethod::Std,
        MethodArg::Ci95 => FloorMethod::Ci95,
    };
    let (mut record, metric, values, slices) = match args.values {
        Some(values) => {
            let record = Record::read(None, RecordInput::Optional)?;
            (
                record,
                args.metric.unwrap_or_else(|| "values".into()),
                values,
                None,
            )
        }
        None => {
            let metric = args.metric.unwrap_or_default();
            let records = Record::read_stream(&args.records)?;
            check_reruns(&records)?;
            let values = metric_values(&records, &metric)?;
            let slices = slice_spreads(tool, &records, &metric, method)?;
            let timings = every_timing(&records);
            let mut first = records.into_iter().next().unwrap_or_default();
            first.set_section("timings", Value::Array(timings));
            (first, metric, values, slices)
        }
    };
    let spread =
        spread(&values, method).map_err(|err| InputError::field(&metric, err.to_string()))?;
    if spread.n == 2 {
        tool.warn("only 2 reruns: the floor is a rough guess; 3 or more give a steadier one");
    }
    tool.info(format!(
        "{metric}: floor {:.6} ({:?}) over {} reruns, mean {:.6}",
        spread.floor, method, spread.n, spread.mean
    ));
    let method_name = match serde_json::to_value(method)? {
        Value::String(name) => name,
        other => other.to_string(),
    };
    let section = NoiseFloor {
        metric,
        n: spread.n,
        mean: spread.mean,
        std: spread.std,
        min: spread.min,
        max: spread.max,
        range: spread.range,
        floor: spread.floor,
        method: method_name,
        values,
        slices,
    };
    record.set(&section)?;
    tool.finish(record, Exit::Passed)
}

/// Every rerun's `timings`, so the record accounts for all the seeds' work: the stages they
/// share once, each seed's own entries tagged with its `train.seed`.
fn every_timing(records: &[Record]) -> Vec<Value> {
    let lists: Vec<(&[Value], Map<String, Value>)> = records
        .iter()
        .map(|record| {
            let entries = record
                .get("timings")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let mut tag = Map::new();
            if let Some(seed) = record.get_path("train.seed") {
                tag.insert("seed".into(), seed.clone());
            }
            (entries, tag)
        })
        .collect();
    runfn_core::timings::merge(&lists)
}

/// Reruns must each have passed their checks and come from one manifest.
fn check_reruns(records: &[Record]) -> Result<(), InputError> {
    for record in records {
        record.refuse_failed_checks("noise_floor")?;
    }
    // Without a manifest_hash nothing shows the reruns come from one manifest, and a spread over
    // different manifests is not a noise floor.
    let hashes = records
        .iter()
        .enumerate()
        .map(|(i, r)| match r.get("manifest_hash") {
            Some(hash @ Value::String(_)) => Ok((i + 1, hash)),
            Some(other) => Err(InputError::field(
                format!("record {}: manifest_hash", i + 1),
                format!(
                    "must be a string, found {}",
                    runfn_core::error::json_type_name(other)
                ),
            )),
            None => Err(InputError::field(
                format!("record {}: manifest_hash", i + 1),
                "is missing: noise-floor needs records made from a manifest by mf-hash, to know they are reruns of one",
            )),
        })
        .collect::<Result<Vec<_>, InputError>>()?;
    let mut hashes = hashes.into_iter();
    if let Some((_, first)) = hashes.next()
        && let Some((index, other)) = hashes.find(|(_, hash)| hash != &first)
    {
        return Err(InputError::field(
            format!("record {index}: manifest_hash"),
            format!(
                "is {other}, but record 1 has {first}: reruns must share one manifest (only the seed may differ)"
            ),
        ));
    }
    Ok(())
}

fn metric_values(records: &[Record], metric: &str) -> Result<Vec<f64>, InputError> {
    records
        .iter()
        .enumerate()
        .map(|(i, record)| {
            record
                .get_path(metric)
                .and_then(Value::as_f64)
                .ok_or_else(|| {
                    InputError::field(
                        format!("record {}: {metric}", i + 1),
                        "is missing or not a number",
                    )
                })
        })
        .collect()
}

/// For `<section>.overall.<leaf>`, the spread of `<section>.slices.<column>.<value>.<leaf>` per slice.
fn slice_spreads(
    tool: &Tool,
    records: &[Record],
    metric: &str,
    method: FloorMethod,
) -> Result<Option<SliceSpreads>, InputError> {
    let Some((section, leaf)) = metric.split_once(".overall.") else {
        return Ok(None);
    };
    let mut values: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for record in records {
        let Some(Value::Object(columns)) = record.get_path(&format!("{section}.slices")) else {
            continue;
        };
        for (column, slices) in columns {
            for (value, metrics) in slices.as_object().into_iter().flatten() {
                if let Some(v) = metrics.get(leaf).and_then(Value::as_f64) {
                    values
                        .entry((column.clone(), value.clone()))
                        .or_default()
                        .push(v);
                }
            }
        }
    }
    if values.is_empty() {
        return Ok(None);
    }
    let mut out = SliceSpreads::new();
    for ((column, value), slice_values) in values {
        if slice_values.len() < 2 {
            tool.warn(format!(
                "slice {column}={value}: only {} value, no spread",
                slice_values.len()
            ));
            continue;
        }
        let spread = spread(&slice_values, method).map_err(|err| {
            InputError::field(
                format!("{section}.slices.{column}.{value}.{leaf}"),
                err.to_string(),
            )
        })?;
        out.entry(column).or_default().insert(
            value,
            SliceSpread {
                n: spread.n,
                mean: spread.mean,
                std: spread.std,
                min: spread.min,
                max: spread.max,
                range: spread.range,
                floor: spread.floor,
                values: slice_values,
            },
        );
    }
    Ok(Some(out))
}

/// Slice column → value → the metric's spread there.
type SliceSpreads = BTreeMap<String, BTreeMap<String, SliceSpread>>;

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
