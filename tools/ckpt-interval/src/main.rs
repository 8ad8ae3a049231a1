//! ckpt-interval: the optimal checkpoint interval (Young, Daly) from checkpoint cost and failure rate.

mod failures;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::{RecordInput, typed};
use runfn_core::{Exit, InputError, Record};
use runfn_schema::record::{CkptInputs, CkptInterval};
use runfn_stats::checkpoint::{self, Inputs, Method};
use serde::Deserialize;

const AFTER_HELP: &str = "\
Examples:
  ckpt-interval --cost 90 --mtbf 43200 --step-time 0.4
  ckpt-interval --cost 90 --node-mtbf 2592000 --nodes 64 --restart 300 --method young
  ckpt-interval --failures failures.txt < runs/churn/train.json   # cost and step time from `train`
  ckpt-interval --measured runs/churn/nights/2026-12-02T031700Z/train-seed7.json --mtbf 43200 \
                < runs/churn/shards.json   # before tonight's training: what last night measured

Without --cost or --step-time, the values come from the record's `train.ckpt_mean_s` and
`train.step_time_s`, else from the training record given with --measured (an earlier run of the
same job: the nightly loop plans tonight's checkpoints from last night's), so the plan is made
of measurements, not guesses; inputs.cost_source says which. Young: sqrt(2CM). Daly (2006): sqrt(2CM)[1 + sqrt(C/2M)/3 + (C/2M)/9] - C
for C < 2M, else M. With --blocking only the blocking part of an asynchronous checkpoint counts,
and the interval is never shorter than the full write. Without --blocking, a record whose train
wrote checkpoints in the background (train.ckpt_async) gives train.ckpt_blocking_s.

Output: the input record plus
  \"ckpt_interval\": {\"young_s\", \"daly_s\", \"interval_s\", \"interval_steps\" (null without a step
  time), \"overhead_fraction\", \"expected_loss_per_failure_s\", \"expected_waste_fraction\",
  \"method\": \"daly\"|\"young\", \"inputs\": {\"cost_s\", \"mtbf_s\", \"step_time_s\", \"restart_s\",
  \"blocking_s\", \"mtbf_source\", \"cost_source\"}}

Exit: 0 done, 2 bad usage or input (zero, negative, NaN or missing values).";

/// The optimal checkpoint interval (Young, Daly) from checkpoint cost and failure rate.
#[derive(Debug, Parser)]
#[command(name = "ckpt-interval", version, after_help = AFTER_HELP, allow_negative_numbers = true)]
struct Args {
    /// Seconds to write one checkpoint (default: the record's train.ckpt_mean_s).
    #[arg(long, value_name = "SECONDS")]
    cost: Option<f64>,
    /// Mean time between failures of the whole job, in seconds.
    #[arg(long, value_name = "SECONDS", group = "mtbf_source")]
    mtbf: Option<f64>,
    /// A file of failure times (RFC 3339 or Unix seconds, one per line); MTBF = span / gaps.
    #[arg(long, value_name = "FILE", group = "mtbf_source")]
    failures: Option<PathBuf>,
    /// Mean time between failures of one node, in seconds (with --nodes).
    #[arg(
        long,
        value_name = "SECONDS",
        group = "mtbf_source",
        requires = "nodes"
    )]
    node_mtbf: Option<f64>,
    /// Number of nodes; the job fails when any of them does.
    #[arg(long, value_name = "N", requires = "node_mtbf", value_parser = clap::value_parser!(u64).range(1..))]
    nodes: Option<u64>,
    /// Seconds per training step, to give the interval in steps (default: train.step_time_s).
    #[arg(long, value_name = "SECONDS")]
    step_time: Option<f64>,
    /// Seconds to restart after a failure.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    restart: f64,
    /// Seconds of the checkpoint that block training (asynchronous checkpoints; default: the
    /// record's train.ckpt_blocking_s when train.ckpt_async).
    #[arg(long, value_name = "SECONDS")]
    blocking: Option<f64>,
    /// Which optimum to use for interval_s.
    #[arg(long, value_enum, default_value_t = MethodArg::Daly)]
    method: MethodArg,
    /// A record of an earlier training of the same job (train's output): its measured
    /// checkpoint cost, blocking time and step time stand in for flags the run does not give.
    #[arg(long, value_name = "FILE")]
    measured: Option<PathBuf>,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MethodArg {
    Young,
    Daly,
}

fn main() -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("ckpt-interval", runfn_version::long());
    runfn_core::cli::main("ckpt-interval", args.common.clone(), |tool| run(tool, args))
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let record = Record::read(args.record.as_deref(), RecordInput::Optional)?;
    record.refuse_failed_checks("ckpt_interval")?;
    let own = TrainTimes::of(&record, "record")?;
    let measured = match &args.measured {
        Some(path) => {
            let earlier = Record::read(Some(path), RecordInput::Required)?;
            let origin = format!("--measured {}", path.display());
            let Some(times) = TrainTimes::of(&earlier, &origin)? else {
                return Err(InputError::field(
                    origin,
                    "has no `train` section: give a record that train wrote",
                )
                .into());
            };
            Some((times, format!("measured: {}", path.display())))
        }
        None => None,
    };
    let mine = own.clone().unwrap_or_default();
    // The flag, else this record's own training, else the earlier one's.
    let (cost_s, cost_source) = match (args.cost, mine.ckpt_mean_s) {
        (Some(cost), _) => (cost, "--cost".to_string()),
        (None, Some(cost)) => (cost, "record: train.ckpt_mean_s".to_string()),
        (None, None) => match &measured {
            Some((earlier, source)) => (
                earlier.ckpt_mean_s.ok_or_else(|| missing("--measured"))?,
                source.clone(),
            ),
            None => return Err(missing("--cost").into()),
        },
    };
    let step_time_s = args
        .step_time
        .or(mine.step_time_s)
        .or_else(|| measured.as_ref().and_then(|(m, _)| m.step_time_s));
    let blocking_times = match (&own, &measured) {
        (None, Some((earlier, _))) => earlier.clone(),
        _ => mine,
    };
    let (mtbf_s, mtbf_source) = mtbf(&args)?;
    // Named by where the MTBF came from, before `plan` checks it again as plain `--mtbf`.
    let mtbf_flag = mtbf_source.split(" (").next().unwrap_or("--mtbf");
    checkpoint::check_positive(mtbf_flag, mtbf_s)?;
    let inputs = Inputs {
        cost_s,
        mtbf_s,
        step_time_s,
        restart_s: args.restart,
        blocking_s: match args.blocking {
            Some(blocking) => Some(blocking),
            None => blocking_times.recorded_blocking(cost_s),
        },
    };
    let method = match args.method {
        MethodArg::Young => Method::Young,
        MethodArg::Daly => Method::Daly,
    };
    let plan = checkpoint::plan(&inputs, method)?;
    tool.info(format!(
        "checkpoint every {:.0} s ({:.1} min), {:.1}% overhead, {:.1}% expected waste",
        plan.interval_s,
        plan.interval_s / 60.0,
        plan.overhead_fraction * 100.0,
        plan.expected_waste_fraction * 100.0
    ));
    let section = CkptInterval {
        young_s: plan.young_s,
        daly_s: plan.daly_s,
        interval_s: plan.interval_s,
        interval_steps: plan.interval_steps,
        overhead_fraction: plan.overhead_fraction,
        expected_loss_per_failure_s: plan.expected_loss_per_failure_s,
        expected_waste_fraction: plan.expected_waste_fraction,
        method: method.name().to_string(),
        inputs: CkptInputs {
            cost_s: inputs.cost_s,
            mtbf_s: inputs.mtbf_s,
            step_time_s: inputs.step_time_s,
            restart_s: inputs.restart_s,
            blocking_s: inputs.blocking_s,
            mtbf_source,
            cost_source,
        },
    };
    let mut record = record;
    record.set(&section)?;
    tool.finish(record, Exit::Passed)
}

fn mtbf(args: &Args) -> Result<(f64, String), InputError> {
    if let Some(mtbf) = args.mtbf {
        return Ok((mtbf, "--mtbf".into()));
    }
    if let (Some(node_mtbf), Some(nodes)) = (args.node_mtbf, args.nodes) {
        return Ok((
            checkpoint::job_mtbf(node_mtbf, nodes),
            format!("--node-mtbf / {nodes} nodes"),
        ));
    }
    if let Some(path) = &args.failures {
        let times = failures::read_failure_times(path)?;
        let mtbf = checkpoint::mtbf_from_failures(&times).ok_or_else(|| {
            InputError::field(
                format!("--failures {}", path.display()),
                format!(
                    "needs at least 2 distinct failure times, found {}",
                    times.len()
                ),
            )
        })?;
        return Ok((
            mtbf,
            format!("--failures {} ({} failures)", path.display(), times.len()),
        ));
    }
    Err(InputError::field(
        "--mtbf",
        "is missing: give --mtbf, --failures or --node-mtbf with --nodes",
    ))
}

fn missing(flag: &str) -> InputError {
    InputError::field(flag, "is missing and the record has no `train.ckpt_mean_s`")
}

/// What ckpt-interval reads of a `train` section: its checkpoint and step timings. Any trainer's
/// section that holds them will do, so the rest of `train` is not required here.
#[derive(Debug, Clone, Default, Deserialize)]
struct TrainTimes {
    ckpt_mean_s: Option<f64>,
    step_time_s: Option<f64>,
    #[serde(default)]
    ckpt_async: Option<bool>,
    ckpt_blocking_s: Option<f64>,
}

impl TrainTimes {
    /// The `train` section of `record` (None without one); errors name `origin: train.FIELD`.
    fn of(record: &Record, origin: &str) -> Result<Option<TrainTimes>, InputError> {
        match record.get("train") {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(train) => typed(train, &format!("{origin}: train")).map(Some),
        }
    }

    /// The blocking part train measured, when its checkpoints were written in the background.
    /// Back to back checkpoints can wait for a whole previous write plus the copy; no more than
    /// a blocking save is charged.
    fn recorded_blocking(&self, cost_s: f64) -> Option<f64> {
        match self.ckpt_async {
            Some(true) => self.ckpt_blocking_s.map(|b| b.min(cost_s)),
            _ => None,
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
