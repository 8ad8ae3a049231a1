//! shardify: write a snapshot's splits as large, deterministic, hashed Parquet shards.

mod parted;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::parts::{Part, PartArgs};
use runfn_core::record::RecordInput;
use runfn_core::{Exit, InputError, Record};
use runfn_data::rolling::{any_rolling, latest_time};
use runfn_data::shards::{ShardOptions, shardify, shardify_part};
use runfn_data::spec::{DataSpec, parse_size};
use runfn_data::split::Splits;
use runfn_data::unsplit::{Unsplit, max_unsplit_fraction};
use runfn_schema::record::{self as schema, ShardSplit, Shards};
use serde_json::Value;

const AFTER_HELP: &str = "\
Examples:
  mf-hash manifest.yaml | shardify --out runs/churn/shards > runs/churn/shards.json
  shardify --in lake/churn --split 'train=hash(customer_id) < 0.8' --split 'test=hash(customer_id) >= 0.8' \\
           --seed 7 --out shards/ < /dev/null
  shardify --in table.csv --split 'train=split == train' --split 'test=region in (north, \"south west\")' \\
           --seed 7 --out shards/ < /dev/null

Split rules: `col < 2026-08-01` (<=, >, >= too), a bare period of manifest.data.time (`2026-08`,
`2026-07..2026-08`), `hash(col) < 0.8`, or a column's own values: `col == v`, `col != v`,
`col in (a, b)` (strings bare or quoted, numbers, dates, true/false; a null matches none), or a
rolling window of manifest.data.time counted back from the snapshot's latest time: `last 1 month`,
`2 weeks before test`, `before val` (days, weeks, months, years). Windows move with the data, so
one manifest serves every night; the bounds they resolved to are in shards.splits_resolved, and a
window that selects no row is refused (exit 2).

Rows in no split are counted (shards.unsplit) and said on stderr, even with -q; above
manifest.data.max_unsplit_fraction of the rows read (default 0.01) the run fails (exit 1).

Reads the snapshot (CSV with a header, JSON Lines or Parquet; a file or a folder of them) at --in,
or at manifest.data.snapshot when that is a local path or a store URL (s3://bucket/prefix,
staged into the local cache), assigns each row to a split of
manifest.data.splits (a row in two splits is an error; rows in none are counted and left out),
shuffles each split by a permutation derived from the seed, and writes
OUT/<split>/part-NNNNN.parquet (zstd) and then OUT/index.json, atomically, with every shard's rows,
bytes and blake3, each split's rows digest (blake3 over its rows in shard order, whatever the
shard files), the schema, the seed and the source digest. Same input and seed: byte-identical
shards. Memory stays within --memory: the shuffle spills to temporary files under OUT.
OUT may be a store URL (s3://bucket/prefix): the shards are written to a local work folder, then
uploaded, the index last (an older index is removed first), so a reader sees a whole set or none.

Examples:
  shardify --out runs/churn/shards < leaks.json > shards.json
  AWS_PROFILE=ml shardify --out s3://ml-data/churn/shards < leaks.json > shards.json

In parts: --part K/N --parts DIR reads part K (0-based) of N of the snapshot's files (a contiguous
run balanced by bytes) into DIR/shardify.part-K-of-N.json and .slots/; --reduce R/M --parts DIR
--out OUT writes reducer R's run of the output shards from every part's slots; --parts DIR --out
OUT alone checks the reducers' shards and writes the index and the record (with no reducer's
partial in DIR it reduces by itself). Shards, index and record are one process's, byte for byte.
Every step takes the same flags; a missing part, other writing flags, a changed slot file,
reducers of parts run again since, or a snapshot that no longer hashes to its pin is refused
(exit 2). DIR and OUT are folders every machine sees (no store URL). docs/parts.md.
  shardify --part $SLURM_ARRAY_TASK_ID/8 --parts parts/ < leaks.json
  shardify --reduce $SLURM_ARRAY_TASK_ID/4 --parts parts/ --out shards/ < leaks.json
  shardify --parts parts/ --out shards/ < leaks.json > shards.json

Output: the input record plus
  \"shards\": {\"dir\", \"index_blake3\", \"splits\": {\"<split>\": {\"rows\", \"shards\", \"rows_blake3\", \"rows_format\"}},
             \"unassigned_rows\", \"bad_values\", \"seed\", \"passed\",
             \"unsplit\": {\"rows\", \"fraction\", \"max_fraction\"},
             \"splits_resolved\": {\"<rolling split>\": {\"rule\", \"resolved\", \"column\", \"after\", \"until\"}}}

Exit: 0 done, 1 more rows in no split than manifest.data.max_unsplit_fraction allows (the shards
are written and the record says how many), 2 bad usage or input (unreadable snapshot, unknown
split column, overlapping splits, a window that selects no row).";

/// Write a snapshot's splits as large, deterministic, hashed Parquet shards with an index.
#[derive(Debug, Parser)]
#[command(name = "shardify", version, after_help = AFTER_HELP)]
struct Args {
    /// The snapshot, a path or a store URL (default: manifest.data.snapshot).
    #[arg(long = "in", value_name = "PATH")]
    input: Option<PathBuf>,
    /// Output folder or store URL (default: runs/<run_id>/shards).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Shuffle seed (default: manifest.seed).
    #[arg(long)]
    seed: Option<u64>,
    /// A split as NAME=RULE, overriding manifest.data.splits (repeatable).
    #[arg(long = "split", value_name = "NAME=RULE")]
    splits: Vec<String>,
    /// The time column for bare periods such as `2026-08` (default: manifest.data.time).
    #[arg(long, value_name = "COLUMN")]
    time: Option<String>,
    /// A schema file fixing column types: {"columns": {"name": "int64|float64|bool|date|timestamp|string"}}.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    /// Memory the shuffle may use.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    memory: u64,
    /// Rows per shard.
    #[arg(long, value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    shard_rows: u64,
    /// Rows per Parquet row group.
    #[arg(long, value_name = "N", default_value_t = 250_000, value_parser = clap::value_parser!(u64).range(1..))]
    row_group_rows: u64,
    /// zstd level (1 fastest .. 22 smallest).
    #[arg(long, value_name = "LEVEL", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    zstd_level: i32,
    /// The share of rows that may fall in no split before the run fails (default:
    /// manifest.data.max_unsplit_fraction, else 0.01).
    #[arg(long, value_name = "SHARE", value_parser = parse_share)]
    max_unsplit_fraction: Option<f64>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    parts: PartArgs,
    /// Be reducer R of M (0-based): write R's run of the output shards from the partials in
    /// --parts into --out (the array between the parts and the merge).
    #[arg(long, value_name = "R/M", value_parser = Part::parse, requires = "parts", conflicts_with = "part")]
    reduce: Option<Part>,
    #[command(flatten)]
    common: CommonArgs,
}

fn parse_share(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| format!("`{text}` is not a share between 0 and 1"))
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("shardify", runfn_version::long());
    runfn_core::cli::main("shardify", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let record = Record::read(args.record.as_deref(), RecordInput::Optional)?;
    record.refuse_failed_checks("shards")?;
    runfn_manifest::verify_record(&record)?;
    let spec = DataSpec::from_record(&record)?;
    let out = match (args.parts.part, out_dir(args.out.as_deref(), &record)) {
        // A part writes into --parts alone.
        (Some(_), Err(_)) => PathBuf::new(),
        (_, out) => out?,
    };
    if args.parts.parts.is_some() {
        parted::refuse_store_urls(args.input.as_deref(), spec.snapshot.as_deref(), &out)?;
    }
    if let (Some(reducer), Some(dir)) = (args.reduce, &args.parts.parts) {
        return parted::run_reducer(tool, &args.writing(), dir, &out, reducer);
    }
    let input = spec.snapshot_path(args.input.as_deref())?;
    let max_unsplit = match args.max_unsplit_fraction {
        Some(share) => share,
        None => max_unsplit_fraction(&record)?,
    };
    if let (None, Some(dir)) = (args.parts.part, &args.parts.parts) {
        let seed = record.seed(args.seed)?;
        let rules = spec.splits_or(&args.splits)?;
        let merge = parted::MergeRun {
            dir,
            out: &out,
            input: &input,
            spec: &spec,
            seed,
            rules,
        };
        let (index, index_blake3, resolved) = parted::run_merge(tool, &args.writing(), &merge)?;
        let written = Written {
            out: &out,
            index: &index,
            index_blake3,
            seed,
            resolved,
            max_unsplit,
        };
        return write_record(tool, record, written, args.memory);
    }
    // A part's files are hashed as it reads them; the merge checks what they add up to.
    let snapshot = match args.parts.part {
        Some(_) => spec.open_snapshot_unverified(&input, args.schema.as_deref())?,
        None => spec.open_snapshot(&input, args.schema.as_deref())?,
    };
    let rules = spec.splits_or(&args.splits)?;
    let time = args.time.as_deref().or(spec.time.as_deref());
    // Rolling windows count back from the latest time in the snapshot: one more read of it.
    let anchor = match time {
        Some(time)
            if any_rolling(&rules)
                && snapshot.column_type(time).is_some_and(|t| t.is_temporal()) =>
        {
            latest_time(&snapshot, time)?
        }
        _ => None,
    };
    let splits = Splits::parse_at(&rules, time, |c| snapshot.column_type(c), anchor)?;
    let resolved = splits.resolved();
    for (name, window) in &resolved {
        tool.info(format!("{name}: `{}` is {}", window.rule, window.resolved));
    }
    let seed = record.seed(args.seed)?;
    // A store URL: the shards are written to a local work folder, then published there.
    let remote = out
        .to_str()
        .filter(|t| runfn_storage::is_remote(t))
        .map(String::from);
    let local_out = remote
        .as_deref()
        .map_or_else(|| out.clone(), runfn_storage::work_dir);
    let snapshot_name = args
        .input
        .as_deref()
        .and_then(|p| p.to_str())
        .filter(|t| runfn_storage::is_remote(t))
        .map(String::from)
        .or_else(|| {
            spec.snapshot
                .clone()
                .filter(|s| runfn_storage::is_remote(s))
        });
    // Freed chunks and pages kept for reuse rather than unmapped and faulted in again. Each
    // thread's heap may keep that much free, so both stay a sixteenth of the budget (at
    // `--memory 128M` a quarter, kept by several heaps, took the run over its budget).
    let share = (args.memory / 16) as usize;
    runfn_core::allocator::reuse_freed_blocks(
        share.clamp(4 << 20, 32 << 20),
        share.clamp(4 << 20, 64 << 20),
    );
    let options = ShardOptions {
        out: local_out.clone(),
        source_name: snapshot_name,
        seed,
        memory_bytes: args.memory,
        shard_rows: args.shard_rows as usize,
        row_group_rows: args.row_group_rows as usize,
        zstd_level: args.zstd_level,
    };
    tool.info(format!(
        "{}: {} files, {} bytes -> {}",
        input.display(),
        snapshot.files.len(),
        snapshot.bytes(),
        out.display()
    ));
    let bar = tool.progress_bar(0, "{pos} rows");
    if let (Some(part), Some(dir)) = (args.parts.part, &args.parts.parts) {
        let done = shardify_part(&snapshot, &splits, &options, part, dir, &|rows| {
            bar.set_position(rows)
        })?;
        bar.finish_and_clear();
        return parted::print_done(tool, &done);
    }
    let (index, index_blake3) =
        shardify(&snapshot, &splits, &options, &|rows| bar.set_position(rows))?;
    bar.finish_and_clear();
    if let Some(url) = &remote {
        let sent = runfn_data::shards::publish(&local_out, url)?;
        tool.info(format!(
            "published to {url}: {} files, {} bytes uploaded, {} removed",
            sent.files, sent.bytes, sent.removed
        ));
    }
    let written = Written {
        out: &out,
        index: &index,
        index_blake3,
        seed,
        resolved: resolved.into_iter().collect(),
        max_unsplit,
    };
    write_record(tool, record, written, args.memory)
}

/// Where the shards go: --out, else runs/<run_id>/shards.
fn out_dir(flag: Option<&std::path::Path>, record: &Record) -> anyhow::Result<PathBuf> {
    match flag {
        Some(out) => Ok(out.to_path_buf()),
        None => match record.get_path("manifest.run_id").and_then(Value::as_str) {
            Some(run_id) => Ok(PathBuf::from("runs").join(run_id).join("shards")),
            None => Err(InputError::field(
                "--out",
                "is missing and the record has no manifest.run_id",
            )
            .into()),
        },
    }
}

/// What a run (one process, or the merge of parts) wrote, for the record.
struct Written<'a> {
    out: &'a std::path::Path,
    index: &'a runfn_data::shards::ShardIndex,
    index_blake3: String,
    seed: u64,
    resolved: BTreeMap<String, schema::ResolvedSplit>,
    max_unsplit: f64,
}

/// Says what was written and adds the shards section.
fn write_record(
    tool: &Tool,
    mut record: Record,
    written: Written,
    memory: u64,
) -> anyhow::Result<Exit> {
    let Written {
        out,
        index,
        index_blake3,
        seed,
        resolved,
        max_unsplit,
    } = written;
    let bad = index.bad_values.total();
    if bad > 0 {
        for (column, values) in &index.bad_values.columns {
            let first = &values.examples[0];
            tool.warn(format!("column `{column}`: {} values did not parse (first: {:?} at {} row {}); stored as null", values.count, first.value, first.file, first.row));
        }
    }
    let assigned: u64 = index.splits.values().map(|s| s.rows).sum();
    let unsplit = Unsplit {
        rows: index.unassigned_rows,
        total: assigned + index.unassigned_rows,
        limit: max_unsplit,
    };
    if !unsplit.passed() {
        tool.notice(format!(
            "failed: unsplit_rows: {} of {} rows ({:.2}%) fall in no split, above manifest.data.max_unsplit_fraction {}; the splits no longer cover the data (rolling windows such as `last 1 month` move with it)",
            unsplit.rows,
            unsplit.total,
            100.0 * unsplit.fraction(),
            unsplit.limit
        ));
    } else if unsplit.rows > 0 {
        tool.notice(format!(
            "warning: {} of {} rows ({:.2}%) fall in no split and were left out",
            unsplit.rows,
            unsplit.total,
            100.0 * unsplit.fraction()
        ));
    }
    let mut splits_written = BTreeMap::new();
    for (name, split) in &index.splits {
        tool.info(format!(
            "{name}: {} rows in {} shards",
            split.rows,
            split.shards.len()
        ));
        splits_written.insert(
            name.clone(),
            ShardSplit {
                rows: split.rows,
                shards: split.shards.len() as u64,
                rows_blake3: split.rows_blake3.clone().ok_or_else(|| {
                    anyhow::anyhow!("split `{name}` was written without its rows digest")
                })?,
                rows_format: split.rows_format.clone(),
            },
        );
    }
    record.set(&Shards {
        dir: out.display().to_string(),
        index_blake3,
        splits: splits_written,
        unassigned_rows: index.unassigned_rows,
        bad_values: bad,
        seed,
        passed: unsplit.passed(),
        unsplit: schema::Unsplit {
            rows: unsplit.rows,
            fraction: unsplit.fraction(),
            max_fraction: unsplit.limit,
        },
        splits_resolved: resolved,
    })?;
    let exit = if unsplit.passed() {
        Exit::Passed
    } else {
        Exit::CheckFailed
    };
    tool.finish_within(record, exit, memory)
}

impl Args {
    /// The flags that decide the shards' bytes, which every part, reducer and merge must share.
    fn writing(&self) -> parted::Writing {
        parted::Writing {
            shard_rows: self.shard_rows,
            row_group_rows: self.row_group_rows,
            zstd_level: self.zstd_level,
            memory: self.memory,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn flags_are_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
