//! leak-check: find leakage across splits.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::parts::PartArgs;
use runfn_core::record::RecordInput;
use runfn_core::{Exit, Record};
use runfn_data::partitioned::Partitioned;
use runfn_data::rolling::{any_rolling, latest_time};
use runfn_data::spec::{DataSource, DataSpec};
use runfn_data::split::Splits;
use runfn_leaks::{LeakConfig, check, check_part, merge_parts, pair_json, reduce_parts};

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
  unseen_categories rows of a later split whose category (a text feature's value; the model's
                    config.features when listed) train never has, beyond chance, on > 1% of rows
  future_features   manifest.data.as_of {feature: as_of_column}: feature time after the label time
                    (manifest.data.label_time, else manifest.data.time)
  label_proxy       one feature alone predicts the label on train (univariate AUC >= 0.99 or <= 0.01)
A check whose columns are not declared is reported as skipped.
Memory: --memory SIZE bounds what the checks hold whatever the rows (default: a quarter of the
machine's); the rest is sorted on disk under TMPDIR, removed at the end, and the findings are the
same at any budget. Its timings entry says the budget (memory_budget_bytes) and the peak
(max_rss_bytes).

In parts (a Slurm job array, a Kubernetes Indexed Job): --part K/N --parts DIR reads part K of
N (a contiguous run of the snapshot's files, balanced by bytes) and writes its sorted runs and
DIR/leak-check.part-K-of-N.json, printing {\"part\": {tool, part, partial, units, of}}; the same
command with --parts DIR and no --part merges them and writes what one process writes, to the
byte (--pairs-out goes to the merge). Between them, an array of reducers may run: --reduce R/M
--parts DIR groups the keys (entity ids, row hashes) whose hashes fall in range R of M, reading
only that range of every part's runs, and writes DIR/leak-check-reduce.part-R-of-M.json; the
merge then adds their counts up (give reducers and merge the same --pairs-out). A missing or
doubled part or reducer, parts of another snapshot, columns or splits, reducers of parts run
again since, or a run changed since its part wrote it is refused (exit 2). docs/parts.md.
  leak-check --part $SLURM_ARRAY_TASK_ID/8 --parts parts/ < record.json
  leak-check --reduce $SLURM_ARRAY_TASK_ID/4 --parts parts/ < record.json
  leak-check --parts parts/ < record.json > leaks.json

Tolerances (manifest.leaks; default: any leak fails): per check {max_count: N} (count at most N),
{max_fraction: F} (count / of at most F, of = rows of the later splits for the twin checks), both,
or {off: \"reason\"} (still run and reported, never failing); an optional reason with a
tolerance. Each check records the setting applied and the reason. The twin checks count the rows
of a later split (val, test) with a twin in an earlier one.
Twins by chance: coarse rows (a scheduled event on another day) have twins by chance. By default
exact_duplicates fails only when a later split has more twins than chance gives: the earliest
split's own rate (its rows with a twin among its other rows), brought to the later split's size,
tested one-sided at alpha 0.001 (binomial, Bonferroni over the later splits); where that rate
moves between ten runs of the earliest split's rows (in file order) by more than sampling, the
excess is also judged against that movement (Student-t), the larger p-value deciding. The check's
chance: {reference, rate, expected, observed, p_value, alpha, movement} says so.
  leaks: {exact_duplicates: {max_fraction: 0.02, reason: \"twin listings are distinct sales\"},
          near_duplicates: {off: \"listings repeat their boilerplate by design\"}}
--pairs-out FILE writes every exact and near twin pair as JSON Lines, atomically:
  {\"check\", \"column\"?, \"jaccard\"?, \"earlier\": {\"split\", \"file\", \"row\"}, \"later\": {...}}

Output: the input record plus
  \"leaks\": {\"passed\": bool, \"bad_values\": n,
            \"checks\": [{\"name\", \"passed\", \"count\", \"of\"?, \"fraction\"?, \"setting\", \"reason\"?,
                        \"examples\": [...], \"note\"?, \"chance\"?}]}

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
    /// Write every exact and near twin pair found to FILE (JSON Lines).
    #[arg(long, value_name = "FILE")]
    pairs_out: Option<PathBuf>,
    /// Schema file fixing column types (raw snapshots only).
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Memory the checks may hold (default: a quarter of the machine's); key occurrences,
    /// texts, band keys, candidate pairs and numbers beyond it are spilled to TMPDIR.
    #[arg(long, value_name = "SIZE", value_parser = runfn_data::spec::parse_size)]
    memory: Option<u64>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    parts: PartArgs,
    /// Group the keys (entity ids, row hashes) in range R of M of their hashes over the parts'
    /// runs in --parts, and write that reducer's partial there: the merge then adds the
    /// reducers' counts up instead of grouping every key itself.
    #[arg(long, value_name = "R/M", value_parser = runfn_core::parts::Part::parse,
          requires = "parts", conflicts_with = "part")]
    reduce: Option<runfn_core::parts::Part>,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("leak-check", runfn_version::long());
    runfn_core::cli::main("leak-check", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    if !(0.0..=1.0).contains(&args.jaccard) || args.jaccard == 0.0 {
        return Err(runfn_core::InputError::field("--jaccard", "must be in (0, 1]").into());
    }
    let mut record = Record::read(args.record.as_deref(), RecordInput::Optional)?;
    record.refuse_failed_checks("leaks")?;
    runfn_manifest::verify_record(&record)?;
    let spec = DataSpec::from_record(&record)?;
    let decisions = runfn_manifest::leaks::parse_leaks(record.get_path("manifest.leaks"))
        .map_err(|e| runfn_core::InputError::field(e.field, e.message))?;
    let rules = spec.splits_or(&args.splits).ok();
    let time = args.time.clone().or(spec.time.clone());
    let data = match spec.source(&record, args.input.as_deref(), args.shards.as_deref())? {
        DataSource::Shards(dir) => {
            tool.info(format!("reading shards in {}", dir.display()));
            Partitioned::from_shards(&dir)?
        }
        DataSource::Snapshot(input) => {
            // In parts, a pinned snapshot's files are checked against the pin's listing by path
            // and size here, and each part hashes only the files it reads (below): the snapshot
            // is hashed once over all the parts, and not by the merge, which reads no row.
            let in_parts = args.parts.parts.is_some();
            let snapshot =
                spec.open_snapshot_hashing(&input, args.schema.as_deref(), &|_| !in_parts)?;
            if let Some(part) = args.parts.part {
                let mine = runfn_leaks::part_files(&snapshot, part);
                spec.verify_snapshot(&input, &|relative| mine.iter().any(|m| m == relative))?;
            }
            let rules = spec.splits_or(&args.splits)?;
            // Rolling windows count back from the snapshot's latest time, as shardify's do.
            let anchor = match time.as_deref() {
                Some(time)
                    if any_rolling(&rules)
                        && snapshot.column_type(time).is_some_and(|t| t.is_temporal()) =>
                {
                    latest_time(&snapshot, time)?
                }
                _ => None,
            };
            let splits =
                Splits::parse_at(&rules, time.as_deref(), |c| snapshot.column_type(c), anchor)?;
            tool.info(format!(
                "reading {} ({} files)",
                input.display(),
                snapshot.files.len()
            ));
            Partitioned::from_rules(snapshot, splits)
        }
    };
    let time_split = match (&rules, &time) {
        (Some(rules), Some(time)) => {
            Splits::ordered_in_time(rules, time, |c| data.snapshot.column_type(c))
        }
        _ => false,
    };
    let defaults = LeakConfig::from_spec(&spec, &data.split_names);
    let config = LeakConfig {
        entity: args.entity.or(defaults.entity.clone()),
        time,
        label: args.label.or(defaults.label.clone()),
        text: if args.text.is_empty() {
            defaults.text.clone()
        } else {
            args.text
        },
        time_split,
        near_duplicate_jaccard: args.jaccard,
        decisions,
        collect_pairs: args.pairs_out.is_some(),
        model_features: runfn_profile::Roles::features_from_manifest(record.get("manifest"))
            .map_err(|e| runfn_core::InputError::field(e.field, e.message))?,
        memory_bytes: args
            .memory
            .unwrap_or_else(runfn_core::environment::quarter_of_the_machine),
        ..defaults
    };
    let report = match (args.parts.part, &args.parts.parts) {
        (Some(part), Some(dir)) => {
            if args.pairs_out.is_some() {
                return Err(runfn_core::InputError::field(
                    "--pairs-out",
                    "is written by the merge (--parts DIR without --part), not by a part",
                )
                .into());
            }
            let done = check_part(&data, &config, part, dir)?;
            tool.info(format!(
                "part {part}: {} of {} files read, partial in {}",
                done.units, done.of, done.partial
            ));
            runfn_core::cli::write_stdout(done.line().as_bytes())?;
            return Ok(Exit::Passed);
        }
        (None, Some(dir)) if args.reduce.is_some() => {
            let reducer = args.reduce.expect("matched above");
            let done = reduce_parts(&data, &config, reducer, dir)?;
            tool.info(format!(
                "reducer {reducer}: the keys of range {reducer} grouped, partial in {}",
                done.partial
            ));
            runfn_core::cli::write_stdout(done.line().as_bytes())?;
            return Ok(Exit::Passed);
        }
        (None, Some(dir)) => {
            tool.info(format!("merging the parts in {}", dir.display()));
            merge_parts(&data, &config, dir)?
        }
        _ => check(&data, &config)?,
    };
    for leak in report.checks.iter().filter(|c| !c.passed) {
        tool.notice(failure_line(leak, &config));
    }
    if report.passed {
        tool.info("no leak found");
    }
    for tolerated in report.checks.iter().filter(|c| c.passed && c.count > 0) {
        tool.info(format!(
            "tolerated: {}: {} found, within {}",
            tolerated.name,
            tolerated.count,
            serde_json::to_string(&tolerated.setting)?
        ));
    }
    if let Some(path) = &args.pairs_out {
        runfn_core::atomic::write_atomic(path, |out| {
            for pair in &report.pairs {
                writeln!(out, "{}", pair_json(&data, pair))?;
            }
            Ok(())
        })?;
        tool.info(format!(
            "{} twin pairs written to {}",
            report.pairs.len(),
            path.display()
        ));
    }
    let passed = report.passed;
    record.set(&report.to_record())?;
    tool.finish_within(record, Exit::from_passed(passed), config.memory_bytes)
}

/// A failed check in one line, for the log and the alert: the check, the columns it read, how
/// many of how many, and the tolerance it broke (`failed: entity_overlap job_ad_id: 954 of 963
/// ...`).
fn failure_line(leak: &runfn_leaks::LeakCheck, config: &LeakConfig) -> String {
    let columns: Vec<String> = match leak.name {
        "entity_overlap" => config.entity.iter().cloned().collect(),
        "time_order" => config.time.iter().cloned().collect(),
        "near_duplicates" => config.text.clone(),
        _ => {
            let mut named: Vec<String> = leak
                .examples
                .iter()
                .filter_map(|e| e.get("column")?.as_str().map(String::from))
                .collect();
            named.dedup();
            named
        }
    };
    let columns = if columns.is_empty() {
        String::new()
    } else {
        format!(" {}", columns.join(", "))
    };
    let count = match leak.of {
        Some(of) => format!("{} of {of}", leak.count),
        None => leak.count.to_string(),
    };
    let setting = serde_json::to_string(&leak.setting).unwrap_or_default();
    format!(
        "failed: {}{columns}: {count} (allowed {setting})",
        leak.name
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
