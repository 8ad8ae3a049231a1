//! report: run records read back into the workflow map, predicted vs measured, a page to look at.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::{Exit, InputError, Record};
use runfn_report::Report;
use runfn_report::alias::AliasLog;
use runfn_report::history::History;
use runfn_report::night::{self, Night};
use runfn_report::outcome::{self, Outcome};
use runfn_report::predictions::Limits;
use runfn_schema::record::Report as ReportSection;
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Examples:
  report runs/demo --html runs/demo/report.html > runs/demo/report.json
  report runs/demo --html runs/demo/report.html --registry registry --model churn  # after a failed stage too
  report runs/nightly-* --tensorboard runs/tb        # five reruns: the p25/p75 spread of each stage
  cat runs/demo/register.json | report --fail-on-flag  # exit 1 when a prediction is off by > 20%
  report history runs/demo/nights/* --registry registry --model churn --html history.html

Input: run records (JSON Lines or concatenated objects) from the files or stdin; a folder is one
night (its *.json records with a `timings` list and make's failed.stage, failed.json and
failed.err), or, when it holds none, each of its subfolders is one (a folder named `history`
is given as ./history: the word alone is the subcommand). Given as a file or on stdin,
a record with a failed check is refused, as by every tool. Each record's timings entries count
once however many records repeat them (a stage's record holds the earlier stages' entries); a
record's train.metrics file is read back for the curves.

A night: the records that descend from the folder's newest manifest record (manifest.json: one
mf-hash timings entry), each through records still in the folder (every earlier timings entry of
a record must be the last entry of another of the night's records, or of failed.json), with the
manifest's manifest_hash and mf_hash.data_digest. A record an earlier night left (a failed stage
removes only its own record, so the later stages' older records stay), a record with a failed
check other than failed.json, an earlier report's output and a set-up record without a
manifest_hash are left out, each named on stderr with why. Without a manifest record in the
folder, the records sharing the newest first timings entry are the night. failed.stage
(`<stage> <exit code>`), failed.json (the stage's record; empty after exit 2) and failed.err (its
stderr) make the night FAILED, or BLOCKED when the gate failed; they are an earlier run's, and
ignored with a warning, when failed.json descends from an older manifest or <stage>.json is the
night's. A night is PASSED only when it registered its model, else INCOMPLETE.

Each night's verdict heads the page: the stage, its exit code and meaning, the failing checks
(section, check, column or slice, value, threshold, detail), what the tool said (failed.err), what
the gate compared (Δ AUC with its interval, against which baseline version), and whether
<model>@<alias> moved: read from the registry (--registry, else RUNFN_REGISTRY, else ./registry;
never created) for --model (else the name the records use). A night's failure is shown, not
raised: the page is drawn and report exits 0.

The map: per stage (tool; an evaluation of a baseline apart), the runs counted, wall and CPU
seconds as p25/median/p75 (numpy's linear percentiles) and total, peak memory, share of all the
wall time mapped, and cost (manifest.cost); the bottleneck is the largest share.
Predicted vs measured: ckpt-interval's checkpoint cost, blocking time, overhead, step time and
interval against what train measured; train's data wait against the input-bound limit; and, over
3 or more runs, each stage's latest wall time against its earlier median. A gap over --max-gap
(or a limit exceeded) is flagged.

The page (--html): self-contained (inline CSS and SVG, no network): the nights' verdicts; loss,
validation AUC, throughput, data wait and checkpoint age over steps per seed; the gate's Δ per
slice, or the slices vs the baseline with the noise floor's band; drift per column against its
threshold; the map, the pairs, the alerts, the gate's checks and the machines. TensorBoard
(--tensorboard DIR): one folder per seed with an event file of train/* and val/* scalars.

Output: the record that went furthest (most timings entries; the last of equals; a failed stage's
record included) plus
  \"report\": {\"records\", \"runs\",
             \"stages\": [{\"stage\", \"runs\", \"wall_s\": {\"p25\", \"median\", \"p75\", \"total\"},
                         \"cpu_s\": {...}, \"max_rss_bytes\", \"share\", \"cost\"}],
             \"bottleneck\": {\"stage\", \"share\"}, \"total_wall_s\", \"cost\": {\"total\", \"per_run\", \"currency\"},
             \"predictions\": [{\"name\", \"kind\": \"prediction\"|\"limit\"|\"history\", \"of\", \"predicted\",
                              \"measured\", \"unit\", \"gap\", \"flagged\", \"source\"}],
             \"flagged\": [\"checkpoint_write_s (seed 7): predicted 90 s, measured 0.002 s (-100%)\"],
             \"curves\": [{\"label\", \"seed\", \"metrics\", \"steps\", \"points\", \"val_points\", \"checkpoints\", \"alerts\"}],
             \"nights\": [{\"dir\", \"status\": \"passed\"|\"blocked\"|\"failed\"|\"incomplete\",
                         \"decision\": \"promoted\"|\"first_model\"|\"registered\"|\"blocked\"|\"failed\"|\"incomplete\",
                         \"summary\", \"started_at\", \"manifest_hash\", \"data_digest\", \"root\", \"records\": [FILE],
                         \"stale\": [{\"file\", \"why\"}], \"stale_failure\",
                         \"failed\": {\"stage\", \"exit_code\", \"meaning\", \"checks\": [{\"section\", \"name\", \"place\",
                                    \"value\", \"threshold\", \"comparison\", \"detail\"}], \"reasons\", \"message\"}|null,
                         \"gate\": {\"passed\", \"no_baseline\", \"method\", \"confidence\", \"baseline\", \"baseline_version\",
                                  \"metric\", \"candidate\", \"baseline_value\", \"delta\", \"interval\", \"limit\",
                                  \"comparison\", \"reasons\", \"slices\": [{\"place\", \"rows\", \"positives\", \"status\",
                                  \"delta\", \"interval\"}]}|null,
                         \"registered\": {\"name\", \"version\", \"promoted\"}|null,
                         \"prod\": {\"alias\", \"registry\", \"found\", \"error\", \"version\", \"before\", \"moved\",
                                  \"move\", \"moved_since\", \"summary\"}}],
             \"html\": PATH|null, \"plots\": [\"loss\", ...], \"tensorboard\": [PATH, ...]|null}

Exit: 0 done (flags are listed, not failures; a failed night is shown, not raised), 1 a pair was
flagged with --fail-on-flag (record still on stdout), 2 bad usage or input (nothing on stdout, no
file written).";

const HISTORY_HELP: &str = "\
Examples:
  report history runs/demo/nights/* --registry registry --model churn --html runs/demo/history.html
  report history runs/demo/nights/2026-12-0* -q | jq '.history.nights[] | [.night, .decision, .alias.words]'

Each NIGHT_DIR is one night's copy of the run folder (its stage records and failed.* files, e.g.
RUN_DIR/nights/2026-12-03T031700Z/), read as `report NIGHT_DIR` reads a night: earlier nights'
records in it are left out. Nights are shown in the order of their folder names (UTC stamps sort
by time). Per night: its date (the folder's stamp), the snapshot's digest, files and rows, the
rows per split (shardify), drift (ds-validate checks that failed, or were explained, with the
reason), leaks found (let through or failed), the gate's decision with Δ AUC, its interval and the
baseline version compared, rows and positives per slice, the alias move (a → b, or unchanged,
and any move made by hand in between) and, for a night that stopped, the stage and its failing
checks. The registry (--registry, else RUNFN_REGISTRY, else ./registry; a missing --registry is
exit 2, a missing default is a warning) gives the versions, their lineage and the alias history.

The page (--html): a plot of Δ AUC per night with its interval, colored by decision (legend under
the chart), the nights' table, the versions and the alias moves; self-contained.

Output (stdout, JSON):
  {\"history\": {\"alias\", \"registry\", \"registry_found\", \"registry_error\", \"version\" (when drawn),
    \"drawn_at\",
    \"nights\": [{\"night\", \"dir\", \"date\", \"started_at\", \"status\", \"decision\", \"summary\",
                \"manifest_hash\", \"snapshot\": {\"name\" (as pinned), \"path\", \"digest\", \"files\", \"bytes\", \"rows\"},
                \"splits\": [{\"split\", \"rows\", \"after\", \"until\"}], \"drift\": [{\"check\", \"column\", \"value\", \"threshold\", \"explained\"}],
                \"leaks\": [{\"check\", \"count\", \"of\", \"passed\", \"reason\"}], \"gate\": {...as report's}|null,
                \"registered\": {\"name\", \"version\", \"promoted\"}|null,
                \"alias\": {\"moved\", \"from\", \"to\", \"stayed\", \"by_hand\": [MOVE], \"words\"},
                \"failed\": {...as report's}|null, \"stale\": N}],
    \"versions\": [{\"version\", \"created_at\", \"manifest_hash\", \"snapshot\", \"code_commit\", \"gate_passed\",
                  \"no_baseline\", \"auc\", \"ungated_reason\", \"aliases\", \"night\"}],
    \"moves\": [{\"name\", \"alias\", \"from_version\", \"to_version\", \"at\", \"reason\", \"night\"}],
    \"html\": PATH|null, \"plots\": [\"nights\"]}}

Exit: 0 done (failed nights are shown, not raised), 2 bad usage or input (a folder that holds no
night, an unreadable record, a missing --registry).";

/// Run records read back: the workflow map, predicted vs measured, an HTML page, TensorBoard.
#[derive(Debug, Parser)]
#[command(
    name = "report",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
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
    alias: AliasArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// Where the alias a night may move is looked up.
#[derive(Debug, Clone, clap::Args)]
struct AliasArgs {
    /// The registry (default: RUNFN_REGISTRY, else ./registry).
    #[arg(long, value_name = "DIR")]
    registry: Option<PathBuf>,
    /// The model's name in the registry (default: from the records: what the night
    /// registered, the baseline it compared, the model drift was measured against).
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// The alias the pipeline promotes to.
    #[arg(long, value_name = "ALIAS", default_value = "prod")]
    alias: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The nights together: a table and a plot over night folders, with the registry's
    /// versions and alias moves.
    #[command(after_help = HISTORY_HELP)]
    History {
        /// Night folders (each one night's records and failed.* files), in name order.
        #[arg(required = true, value_name = "NIGHT_DIR")]
        nights: Vec<PathBuf>,
        /// Write the self-contained HTML page to FILE.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        #[command(flatten)]
        alias: AliasArgs,
    },
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("report", runfn_version::long());
    runfn_core::cli::main("report", args.common.clone(), |tool| match args.command {
        Some(Command::History {
            nights,
            html,
            alias,
        }) => history(tool, &nights, html.as_deref(), &alias, args.common.pretty),
        None => run(tool, args),
    })
}

fn registry_dir(args: &AliasArgs) -> PathBuf {
    args.registry
        .clone()
        .or_else(|| std::env::var_os("RUNFN_REGISTRY").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("registry"))
}

/// Each night with what it came to; the alias is read from the registry when a model name is
/// known (`--model`, else the night's records).
fn outcomes(tool: &Tool, nights: Vec<Night>, args: &AliasArgs) -> Vec<(Night, Outcome)> {
    let registry = registry_dir(args);
    nights
        .into_iter()
        .map(|night| {
            let model = args.model.clone().or_else(|| outcome::model_name(&night));
            let log = model.map(|m| AliasLog::read(&registry, &m, &args.alias));
            if let Some(err) = log.as_ref().and_then(|l| l.error.as_ref()) {
                tool.warn(format!("{}: {err}", registry.display()));
            }
            let outcome = Outcome::of(&night, log.as_ref(), None);
            (night, outcome)
        })
        .collect()
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
    let (records, nights) = read_records(tool, &args.inputs)?;
    if records.is_empty() && !nights.iter().any(|n| n.failure.is_some()) {
        return Err(InputError::field("input", "no run records to report on").into());
    }
    let nights = outcomes(tool, nights, &args.alias);
    let limits = Limits {
        max_gap: args.max_gap,
        input_bound: args.input_bound,
    };
    let report = Report::build(&records, limits)?;
    let mut section = report.section();
    section["nights"] = nights
        .iter()
        .map(|(n, o)| runfn_report::verdict::night_json(n, o))
        .collect();
    let (page, plots) = runfn_report::html::page(&report, &nights);
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
    summarize(tool, &report, &nights);
    let flagged = report.predictions.iter().any(|p| p.flagged);
    let mut record = Record::from_value(report.latest.clone(), "report")?;
    // Built from the report's parts, written through its type: a shape the schema does not
    // hold is this tool's bug, caught by the tests' schema checks, never a record out of shape.
    let section: ReportSection =
        serde_json::from_value(section).context("the report section against its schema")?;
    record.set(&section)?;
    // A night's failure is shown, not raised again: the stage that failed already said so.
    let exit = if flagged && args.fail_on_flag {
        Exit::CheckFailed
    } else {
        Exit::Passed
    };
    tool.finish(record, exit)
}

/// The records of every input, in order, and the night of each folder; folders as the help says.
fn read_records(tool: &Tool, inputs: &[PathBuf]) -> Result<(Vec<Value>, Vec<Night>), InputError> {
    let strict = |records: Vec<Record>| -> Result<Vec<Value>, InputError> {
        records
            .into_iter()
            .map(|r| r.refuse_failed_checks("report").map(|()| r.into_value()))
            .collect()
    };
    if inputs.is_empty() {
        return Ok((strict(Record::read_stream(&[])?)?, Vec::new()));
    }
    let (mut records, mut nights) = (Vec::new(), Vec::new());
    for input in inputs {
        if !input.is_dir() {
            records.extend(strict(Record::read_stream(std::slice::from_ref(input))?)?);
            continue;
        }
        for dir in night::night_dirs(input)? {
            let night = read_night(tool, &dir, false)?;
            records.extend(night.all_records());
            nights.push(night);
        }
    }
    Ok((records, nights))
}

/// The night of `dir`, saying on stderr what was left out of it (each record, or with `brief`
/// how many).
fn read_night(tool: &Tool, dir: &Path, brief: bool) -> Result<Night, InputError> {
    let night = night::read(dir)?;
    if brief && !night.skipped.is_empty() {
        tool.warn(format!(
            "{}: {} record(s) left out, not this night's (`report {}` names them)",
            dir.display(),
            night.skipped.len(),
            dir.display()
        ));
    } else {
        for skipped in &night.skipped {
            tool.warn(format!(
                "{}: left out, not this night's: {}",
                dir.join(&skipped.file).display(),
                skipped.why
            ));
        }
    }
    if let Some(why) = &night.stale_failure {
        tool.warn(format!("{}: {why}", dir.display()));
    }
    Ok(night)
}

fn history(
    tool: &Tool,
    dirs: &[PathBuf],
    html: Option<&Path>,
    args: &AliasArgs,
    pretty: bool,
) -> anyhow::Result<Exit> {
    let mut dirs = dirs.to_vec();
    dirs.sort_by(|a, b| a.file_name().cmp(&b.file_name()).then_with(|| a.cmp(b)));
    for dir in &dirs {
        if !dir.is_dir() || !night::holds_night(dir)? {
            return Err(InputError::field(
                dir.display().to_string(),
                "is not a night folder (no run record and no failed.stage or failed.json in it)",
            )
            .into());
        }
    }
    let registry = registry_dir(args);
    if args.registry.is_some() && !registry.join("index.sqlite").is_file() {
        return Err(InputError::field(
            "--registry",
            format!(
                "no registry at {} (no index.sqlite there)",
                registry.display()
            ),
        )
        .into());
    }
    // Nights are read one at a time and kept as their rows: a history of thousands of nights
    // holds one night's records at a time, not all of them.
    let model = match args.model.clone() {
        Some(model) => Some(model),
        None => {
            let mut named = None;
            for dir in dirs.iter().rev() {
                named = runfn_report::history::model_of(&read_night(tool, dir, true)?);
                if named.is_some() {
                    break;
                }
            }
            named
        }
    };
    let log = model.map(|m| AliasLog::read(&registry, &m, &args.alias));
    match &log {
        None => tool
            .warn("no model name in the nights' records (pass --model): the registry is not read"),
        Some(l) if !l.found => tool.warn(format!(
            "no registry at {}: alias moves are from the nights' records only",
            registry.display()
        )),
        Some(l) => {
            if let Some(err) = &l.error {
                tool.warn(format!("{}: {err}", registry.display()));
            }
        }
    }
    let mut summaries = runfn_report::history::Summaries::new(log.as_ref());
    for dir in &dirs {
        summaries.push(read_night(tool, dir, true)?);
    }
    let history = History::build(summaries.finish(), log.as_ref());
    let nights = &history.nights;
    let (page, plots) = runfn_report::history_page::page(&history);
    if let Some(path) = html {
        runfn_core::atomic::write_bytes_atomic(path, page.as_bytes())?;
        tool.info(format!(
            "wrote {} ({} nights)",
            path.display(),
            nights.len()
        ));
    }
    for row in &history.nights {
        tool.info(format!(
            "{}: {} ({})",
            row.night,
            row.decision.word(),
            row.alias.words
        ));
    }
    let mut section = serde_json::to_value(&history)?;
    section["html"] = json!(html);
    section["plots"] = json!(plots);
    let out = json!({ "history": section });
    let text = if pretty {
        serde_json::to_string_pretty(&out)?
    } else {
        out.to_string()
    };
    runfn_core::cli::write_stdout(format!("{text}\n").as_bytes())?;
    Ok(Exit::Passed)
}

/// The unix time the record's first stage started (TensorBoard's wall clock starts there).
fn first_start(record: &Value) -> f64 {
    record["timings"][0]["started_at"]
        .as_str()
        .and_then(|s| humantime::parse_rfc3339(s).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0.0, |d| d.as_secs_f64())
}

fn summarize(tool: &Tool, report: &Report, nights: &[(Night, Outcome)]) {
    for (night, outcome) in nights {
        tool.info(format!("{}: {}", night.dir.display(), outcome.summary));
    }
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
