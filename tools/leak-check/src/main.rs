//! leak-check: find leakage across splits.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, Record};
use runfn_data::partitioned::Partitioned;
use runfn_data::spec::{DataSource, DataSpec};
use runfn_data::split::Splits;
use runfn_leaks::{LeakConfig, check};

const AFTER_HELP: &str = "\
Examples:
  mf-hash manifest.yaml | leak-check > runs/churn/leaks.json
  shardify --out runs/churn/shards < rec.json | leak-check       # reads the shards it made
  leak-check --in lake/churn --split 'train=signup_date < 2026-07-01' --split 'test=2026-08' \\
             --entity customer_id --time signup_date --label churned --text support_note < /dev/null

Checks (the columns come from manifest.data, or the flags):
  entity_overlap    the same entity in two splits
  time_order        with time splits, every train row before every val row, before test
  exact_duplicates  rows equal on all feature columns across splits (text normalized)
  near_duplicates   text columns (manifest.data.text): MinHash LSH, verified Jaccard >= 0.8
  future_features   manifest.data.as_of {feature: as_of_column}: feature time after the label time
                    (manifest.data.label_time, else manifest.data.time)
  label_proxy       one feature alone predicts the label on train (univariate AUC >= 0.99 or <= 0.01)
A check whose columns are not declared is reported as skipped.

Output: the input record plus
  \"leaks\": {\"passed\": bool, \"bad_values\": n,
            \"checks\": [{\"name\", \"passed\", \"count\", \"examples\": [...], \"note\"?}]}

Exit: 0 no leak, 1 a leak found (record still on stdout), 2 bad usage or input.";

/// Find leakage across splits.
#[derive(Debug, Parser)]
#[command(name = "leak-check", version, after_help = AFTER_HELP)]
struct Args {
    /// The snapshot (default: the record's shards, else manifest.data.snapshot).
    #[arg(long = "in", value_name = "PATH", conflicts_with = "shards")]
    input: Option<PathBuf>,
    /// A shard folder written by shardify (default: the record's shards.dir).
    #[arg(long, value_name = "DIR")]
    shards: Option<PathBuf>,
    /// A split as NAME=RULE, overriding manifest.data.splits (repeatable).
    #[arg(long = "split", value_name = "NAME=RULE")]
    splits: Vec<String>,
    /// Entity column (default: manifest.data.entity).
    #[arg(long, value_name = "COLUMN")]
    entity: Option<String>,
    /// Time column (default: manifest.data.time).
    #[arg(long, value_name = "COLUMN")]
    time: Option<String>,
    /// Label column (default: manifest.data.label).
    #[arg(long, value_name = "COLUMN")]
    label: Option<String>,
    /// Text column for near-duplicates (default: manifest.data.text; repeatable).
    #[arg(long = "text", value_name = "COLUMN")]
    text: Vec<String>,
    /// Jaccard similarity at which two texts count as near-duplicates.
    #[arg(long, value_name = "J", default_value_t = 0.8)]
    jaccard: f64,
    /// Schema file fixing column types (raw snapshots only).
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("leak-check");
    runfn_core::cli::main("leak-check", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    if !(0.0..=1.0).contains(&args.jaccard) || args.jaccard == 0.0 {
        return Err(runfn_core::InputError::field("--jaccard", "must be in (0, 1]").into());
    }
    let mut record = Record::read(args.record.as_deref(), RecordInput::Optional)?;
    record.refuse_failed_checks("leaks")?;
    let spec = DataSpec::from_record(&record)?;
    let rules = spec.splits_or(&args.splits).ok();
    let time = args.time.clone().or(spec.time.clone());
    let data = match spec.source(&record, args.input.as_deref(), args.shards.as_deref())? {
        DataSource::Shards(dir) => {
            tool.info(format!("reading shards in {}", dir.display()));
            Partitioned::from_shards(&dir)?
        }
        DataSource::Snapshot(input) => {
            let snapshot = spec.open_snapshot(&input, args.schema.as_deref())?;
            let rules = spec.splits_or(&args.splits)?;
            let splits = Splits::parse(&rules, time.as_deref(), |c| snapshot.column_type(c))?;
            tool.info(format!(
                "reading {} ({} files)",
                input.display(),
                snapshot.files.len()
            ));
            Partitioned::from_rules(snapshot, splits)
        }
    };
    let split_order = conventional_order(&data.split_names);
    let time_split = match (&rules, &time) {
        (Some(rules), Some(time)) => {
            Splits::parse(rules, Some(time), |c| data.snapshot.column_type(c))
                .is_ok_and(|s| s.is_time_split(time))
        }
        _ => false,
    };
    let config = LeakConfig {
        entity: args.entity.or(spec.entity),
        time,
        label: args.label.or(spec.label),
        label_time: spec.label_time,
        text: if args.text.is_empty() {
            spec.text
        } else {
            args.text
        },
        as_of: spec.as_of,
        train_split: split_order
            .iter()
            .find(|s| *s == "train")
            .cloned()
            .or_else(|| split_order.first().cloned())
            .unwrap_or_default(),
        split_order,
        time_split,
        near_duplicate_jaccard: args.jaccard,
        ..LeakConfig::default()
    };
    let report = check(&data, &config)?;
    for leak in report.checks.iter().filter(|c| !c.passed) {
        tool.info(format!("leak: {}: {} found", leak.name, leak.count));
    }
    if report.passed {
        tool.info("no leak found");
    }
    let passed = report.passed;
    record.set_section("leaks", serde_json::to_value(&report)?);
    tool.finish(record, Exit::from_passed(passed))
}

/// The order splits are meant to follow in time. Manifests are hashed with their keys sorted,
/// so the written order is gone; the conventional names say it (train, then validation, then
/// test), and other names follow in the order given.
fn conventional_order(names: &[String]) -> Vec<String> {
    const STAGES: [&[&str]; 3] = [
        &["train", "training"],
        &["val", "valid", "validation", "dev"],
        &["test", "holdout", "eval"],
    ];
    let stage = |name: &str| {
        STAGES
            .iter()
            .position(|names| names.contains(&name.to_ascii_lowercase().as_str()))
            .unwrap_or(STAGES.len())
    };
    let mut ordered = names.to_vec();
    ordered.sort_by_key(|name| stage(name));
    ordered
}

#[cfg(test)]
mod tests {
    #[test]
    fn splits_follow_the_conventional_order() {
        let names: Vec<String> = ["test", "train", "val"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(super::conventional_order(&names), ["train", "val", "test"]);
    }

    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
