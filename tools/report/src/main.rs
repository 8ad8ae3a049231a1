//! report: run records read back into the workflow map, predicted vs measured, a page to look at.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::{Exit, InputError, Record};
use runfn_report::Report;
use runfn_report::predictions::Limits;
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Examples:
  report runs/demo --html runs/demo/report.html > runs/demo/report.json
  report runs/nightly-* --tensorboard runs/tb        # five reruns: the p25/p75 spread of each stage
  cat runs/demo/register.json | report --fail-on-flag  # exit 1 when a prediction is off by > 20%

Input: run records (JSON Lines or concatenated objects) from the files or stdin; a folder gives
the records (*.json with a `timings` list) in it, or else in each of its subfolders, in name
order, skipping any with a failed check (a failed stage's record) with a warning, and any that
already holds a report (an earlier report's output). Given as a file
or on stdin, a record with a failed check is refused, as by every tool. Each record's timings
entries count once however many records repeat them (a stage's record holds the earlier stages'
entries); a record's train.metrics file is read back for the curves.

The map: per stage (tool; an evaluation of a baseline apart), the runs counted, wall and CPU
seconds as p25/median/p75 (numpy's linear percentiles) and total, peak memory, share of all the
wall time mapped, and cost (manifest.cost); the bottleneck is the largest share.
Predicted vs measured: ckpt-interval's checkpoint cost, blocking time, overhead, step time and
interval against what train measured; train's data wait against the input-bound limit; and, over
3 or more runs, each stage's latest wall time against its earlier median. A gap over --max-gap
(or a limit exceeded) is flagged.

The page (--html): self-contained (inline CSS and SVG, no network): loss, validation AUC,
throughput, data wait and checkpoint age over steps per seed; the slices of the candidate vs the
baseline with the noise floor's band; drift per column against its threshold; the map, the pairs,
the alerts, the gate's checks and the machines. TensorBoard (--tensorboard DIR): one folder per
seed with an event file of train/* and val/* scalars.

Output: the record that went furthest (most timings entries; the last of equals) plus
  \"report\": {\"records\", \"runs\",
             \"stages\": [{\"stage\", \"runs\", \"wall_s\": {\"p25\", \"median\", \"p75\", \"total\"},
                         \"cpu_s\": {...}, \"max_rss_bytes\", \"share\", \"cost\"}],
             \"bottleneck\": {\"stage\", \"share\"}, \"total_wall_s\", \"cost\": {\"total\", \"per_run\", \"currency\"},
             \"predictions\": [{\"name\", \"kind\": \"prediction\"|\"limit\"|\"history\", \"of\", \"predicted\",
                              \"measured\", \"unit\", \"gap\", \"flagged\", \"source\"}],
             \"flagged\": [\"checkpoint_write_s (seed 7): predicted 90 s, measured 0.002 s (-100%)\"],
             \"curves\": [{\"label\", \"seed\", \"metrics\", \"steps\", \"points\", \"val_points\", \"checkpoints\", \"alerts\"}],
             \"html\": PATH|null, \"plots\": [\"loss\", ...], \"tensorboard\": [PATH, ...]|null}

Exit: 0 done (flags are listed, not failures), 1 a pair was flagged with --fail-on-flag (record
still on stdout), 2 bad usage or input (nothing on stdout, no file written).";

/// Run records read back: the workflow map, predicted vs measured, an HTML page, TensorBoard.
#[derive(Debug, Parser)]
#[command(name = "report", version, after_help = AFTER_HELP)]
struct Args {
    /// Files of run records, or folders of them (default: stdin).
    inputs: Vec<PathBuf>,
    /// Write the self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write TensorBoard event files of the curves under DIR (one folder per seed).
    #[arg(long, value_name = "DIR")]
    tensorboard: Option<PathBuf>,
    /// Flag a prediction whose measured value differs from it by more than this fraction.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.2,
        allow_negative_numbers = true
    )]
    max_gap: f64,
    /// Flag a training run that waited for data more than this share of its step time.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.05,
        allow_negative_numbers = true
    )]
    input_bound: f64,
    /// Exit 1 when any pair is flagged.
    #[arg(long)]
    fail_on_flag: bool,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("report");
    runfn_core::cli::main("report", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    for (flag, value) in [
        ("--max-gap", args.max_gap),
        ("--input-bound", args.input_bound),
    ] {
        if !(value.is_finite() && value >= 0.0) {
            return Err(
                InputError::field(flag, format!("must be a fraction >= 0, got {value}")).into(),
            );
        }
    }
    let records = read_records(tool, &args.inputs)?;
    if records.is_empty() {
        return Err(InputError::field("input", "no run records to report on").into());
    }
    let limits = Limits {
        max_gap: args.max_gap,
        input_bound: args.input_bound,
    };
    let report = Report::build(&records, limits)?;
    let mut section = report.section();
    let (page, plots) = runfn_report::html::page(&report);
    if let Some(path) = &args.html {
        runfn_core::atomic::write_bytes_atomic(path, page.as_bytes())?;
        tool.info(format!("wrote {} ({} plots)", path.display(), plots.len()));
    }
    section["html"] = json!(args.html);
    section["plots"] = json!(plots);
    section["tensorboard"] = match &args.tensorboard {
        Some(dir) => {
            let start = first_start(&report.latest);
            let files = runfn_report::tensorboard::write(dir, &report.curves, start)?;
            tool.info(format!(
                "wrote {} TensorBoard event files under {}",
                files.len(),
                dir.display()
            ));
            json!(files)
        }
        None => Value::Null,
    };
    summarize(tool, &report);
    let flagged = report.predictions.iter().any(|p| p.flagged);
    let mut record = Record::from_value(report.latest.clone(), "report")?;
    record.set_section("report", section);
    let exit = if flagged && args.fail_on_flag {
        Exit::CheckFailed
    } else {
        Exit::Passed
    };
    tool.finish(record, exit)
}

/// The records of every input, in order; folders as the help says.
fn read_records(tool: &Tool, inputs: &[PathBuf]) -> Result<Vec<Value>, InputError> {
    let strict = |records: Vec<Record>| -> Result<Vec<Value>, InputError> {
        records
            .into_iter()
            .map(|r| r.refuse_failed_checks("report").map(|()| r.into_value()))
            .collect()
    };
    if inputs.is_empty() {
        return strict(Record::read_stream(&[])?);
    }
    let mut records = Vec::new();
    for input in inputs {
        if input.is_dir() {
            records.extend(folder_records(tool, input)?);
        } else {
            records.extend(strict(Record::read_stream(std::slice::from_ref(input))?)?);
        }
    }
    Ok(records)
}

fn folder_records(tool: &Tool, dir: &Path) -> Result<Vec<Value>, InputError> {
    let mut own = record_files(dir)?;
    if own.is_empty() {
        for sub in sorted_entries(dir)?.into_iter().filter(|p| p.is_dir()) {
            own.extend(record_files(&sub)?);
        }
    }
    let mut records = Vec::new();
    for path in own {
        for record in Record::read_stream(std::slice::from_ref(&path))? {
            // An earlier report's output repeats the run it read; counted again, it would be
            // "the record that went furthest" and stand in for today's run.
            if record.get("report").is_some() {
                continue;
            }
            match record.refuse_failed_checks("report") {
                Ok(()) => records.push(record.into_value()),
                Err(err) => tool.warn(format!("{}: skipped: {err}", path.display())),
            }
        }
    }
    Ok(records)
}

/// The `*.json` files of `dir` that hold a run record (an object with a `timings` list).
fn record_files(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for path in sorted_entries(dir)? {
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            let text = std::fs::read_to_string(&path).map_err(|source| InputError::Io {
                path: path.clone(),
                source,
            })?;
            let holds_record = serde_json::from_str::<Value>(&text)
                .ok()
                .is_some_and(|v| v.get("timings").is_some_and(Value::is_array));
            if holds_record {
                files.push(path);
            }
        }
    }
    Ok(files)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let io = |source| InputError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    paths.sort();
    Ok(paths)
}

/// The unix time the record's first stage started (TensorBoard's wall clock starts there).
fn first_start(record: &Value) -> f64 {
    record["timings"][0]["started_at"]
        .as_str()
        .and_then(|s| humantime::parse_rfc3339(s).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

fn summarize(tool: &Tool, report: &Report) {
    if let Some(b) = &report.map.bottleneck {
        tool.info(format!(
            "{} records, {} runs, {:.1} s mapped; bottleneck: {} ({:.0}%)",
            report.records,
            report.runs,
            report.map.total_wall_s,
            b.stage,
            b.share * 100.0
        ));
    }
    for pair in report.predictions.iter().filter(|p| p.flagged) {
        tool.warn(format!("off: {}", pair.describe()));
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
