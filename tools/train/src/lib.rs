//! train: train the run's model on libtorch; resumable, exactly. The binaries are thin: `train`
//! runs [`main`] with no faults; `train-with-faults` (the tests' build only) with the faults its
//! environment asks for.

mod launcher;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::exit::exit_from_thread;
use runfn_core::record::RecordInput;
use runfn_core::timings::Stopwatch;
use runfn_core::{Exit, InputError, Record};
use runfn_data::spec::parse_size;
use runfn_dist::group::GroupOptions;
use runfn_dist::{Backend, Launch, ProcessGroup, affinity};
use runfn_learn::config::TrainConfig;
use runfn_learn::device::{self, DeviceChoice, GpuMonitor};
use runfn_learn::inputs;
use runfn_learn::tch;
use runfn_learn::trainer::{self, Reporter, TrainJob, TrainReport};
use runfn_schema::record::{CkptInterval, TrainSection, TrainStopped};
use serde_json::{Map, Value, json};

const AFTER_HELP: &str = "\
Examples:
  shardify < validated.json | train > trained.json
  train --seed 8 --out runs/churn/train-seed8 < shards.json     # a noise-floor rerun
  train --device cuda --bf16 < shards.json                       # on a GPU (full libtorch install)
  train --nproc-per-node 4 < shards.json > trained.json         # 4 data-parallel ranks, this machine
  torchrun --no-python --nproc-per-node 4 train --record shards.json > trained.json

Reads the run record (manifest, manifest_hash and the `shards` section), fits the preprocessing
on the train split (numeric columns standardized, nulls as the mean plus a missing indicator for
each numeric column with nulls in train, string columns through a vocabulary with an unknown
bucket), trains an MLP with AdamW (warmup then cosine decay, gradient clipping), scores the
val split every eval_every steps, and checkpoints every ckpt_every steps and, when the record has a
`ckpt_interval` section, every ckpt_interval.interval_s seconds. Settings come from
manifest.config: hidden, dropout, lr, weight_decay, global_batch, max_steps, warmup_steps,
min_lr_ratio, grad_clip, eval_every, patience, ckpt_every, keep_checkpoints, keep_best, log_every, embedding_dim,
max_vocab, features {numeric, categorical}, stall_timeout_s, missing_indicators, alerts
{throughput_fraction, min_window_s, warmup_windows, loss_spike_sigmas, loss_window,
checkpoint_age_s, data_wait_fraction}.

Early stopping is on by default (patience 10, eval_every 50): the run ends after `patience` val
evaluations in a row without a val AUC above the best so far, and model.safetensors holds the
weights of the best evaluation (its checkpoint is kept: train.best), so `evaluate` scores the best
model. train.early_stopping says where it stopped and which step's weights were written. With no
val split there is nothing to watch: every step up to max_steps is trained, the last step's
weights are written, and a warning and early_stopping.note say so. patience: 0 turns it off (the
last step's weights; keep_best: true still keeps the best checkpoint for `evaluate --checkpoint
best`). Resumed after a kill, the run stops at the same step with the same weights.

Live alerts (throughput_drop, loss_spike, checkpoint_age, input_bound) never stop the run: each
is a metrics.jsonl line, a `train: alert:` line on stderr (not with -q), an entry in train.alerts
and, with RUNFN_LIVE_ALERT_CMD set, a background `sh -c` of it with the alert's JSON on stdin.

Killed at any point, `train` run again with the same record resumes from the newest valid
checkpoint in OUT/checkpoints and ends with the same weights, bit for bit, on the same machine.
A checkpoint of another manifest or seed is refused (exit 2) unless --fresh. With
keep_best (on with early stopping), a step whose val AUC beats the best so far is checkpointed
too, and that checkpoint is kept beside the newest keep_checkpoints (train.best; `evaluate
--checkpoint best`).
A checkpoint is copied to host memory and written by a background thread while training goes
on (one write at a time; every exit waits for it); --sync-checkpoints makes the loop wait for
each whole save instead. The files are the same either way.

Data-parallel: a rank reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
MASTER_PORT (set by torchrun, Slurm wrappers, Kubernetes operators or --nproc-per-node) and joins
a c10d process group: Gloo on the CPU, NCCL on CUDA (--dist-backend overrides). The global batch is
split evenly over the ranks, rank 0 sends its initial (or resumed) parameters to all, and the
gradients are averaged by all-reduce over a flat buffer in --bucket-mb buckets, so N ranks train
the model one process would, to float rounding. Rank 0 alone reads and writes OUT and prints the
record. A rank that dies or hangs ends the others within --dist-timeout (exit 1); run the job
again to resume from the last checkpoint. Resuming with another world size works, with a warning.

Files under OUT: model.safetensors (weights with their preprocessing and lineage),
metrics.jsonl (step, loss, lr, grad_norm, step_time_s, data_wait_fraction, samples_per_s,
ckpt_blocking_s, ckpt_s with --sync-checkpoints, val), checkpoints/step-N.{safetensors,json}.

Output: the input record plus
  \"train\": {\"passed\", \"preempted\", \"reason\" (on failure or preemption), \"weights\", \"weights_blake3\", \"steps\",
            \"steps_this_run\", \"seed\", \"device\", \"threads\", \"wall_s\", \"samples_per_s\",
            \"data_wait_fraction\", \"step_time_s\", \"ckpt_mean_s\", \"ckpt_async\",
            \"ckpt_blocking_s\", \"checkpoints_written\",
            \"resumed_from\" ({checkpoint, step, load_s} or null), \"metrics\", \"parameters\", \"features\", \"final_loss\", \"val\" (the last evaluation's),
            \"best\" ({step, val_auc, checkpoint} with keep_best or early stopping, else null),
            \"early_stopping\" ({patience, stopped_at_step (null: ran to max_steps), best_step,
            best_val_auc, evaluations_since_best, weights_step, note (why the last step's weights:
            no val split or no val AUC)} or null: patience 0),
            \"shards_index_blake3\", \"distributed\" (with ranks: {world_size, backend, buckets,
            bucket_bytes, allreduce_s_per_step, allreduce_fraction, cpus}),
            \"alerts\" ([{kind, step, value, threshold, message}])}

Exit: 0 trained, 1 the loss or gradient became non-finite, the run stalled or a peer rank was
lost (no weights written),
2 bad usage or input (missing shards, schema mismatch, NaN feature or label, unwritable folder,
a checkpoint of another manifest, a limit exceeded: --threads, layer widths, global batch),
3 preempted: SIGTERM or SIGINT arrived, the step in progress was finished and checkpointed
(every rank on the same step), the record has train.preempted = true; run the same command again
to resume from that step. Repeated signals are ignored; SIGKILL remains the hard stop.";

/// Train the run's MLP on libtorch from Parquet shards, with checkpoints that resume exactly.
#[derive(Debug, Parser)]
#[command(name = "train", version, after_help = AFTER_HELP)]
struct Args {
    /// Output folder, or a store URL such as s3://bucket/prefix: the run then works in a cache
    /// folder, publishes each checkpoint as it is written, resumes from the store's newest one,
    /// and publishes the weights and metrics at the end (default: runs/<run_id>/train-seed<seed>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed for initialisation, data order and dropout (default: manifest.seed).
    #[arg(long)]
    seed: Option<u64>,
    /// The shard folder (default: the record's shards.dir).
    #[arg(long, value_name = "DIR")]
    shards: Option<PathBuf>,
    /// cpu, cuda or cuda:N. CUDA needs the full libtorch install. In a distributed job plain
    /// `cuda` means cuda:LOCAL_RANK.
    #[arg(long, default_value = "cpu", value_parser = DeviceArg::parse)]
    device: DeviceArg,
    /// Matrix products in bf16 on CUDA (weights, optimizer and loss stay fp32).
    #[arg(long)]
    bf16: bool,
    /// Discard existing checkpoints in OUT and start from step 0.
    #[arg(long)]
    fresh: bool,
    /// Wait for each checkpoint's whole save instead of writing it in the background.
    #[arg(long)]
    sync_checkpoints: bool,
    /// libtorch intra-op threads (default: the checkpoint's when resuming, else one per core
    /// but one, which is left to the input pipeline).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=1024))]
    threads: Option<i32>,
    /// Batches the input pipeline prepares ahead.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    prefetch: u32,
    /// Keep the decoded train split in memory when it fits in SIZE (0: decode every epoch).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    cache: u64,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Start N ranks of this job on this machine, as torchrun would: each gets RANK, WORLD_SIZE,
    /// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Signals are forwarded to them,
    /// and when one fails the others are stopped.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    nproc_per_node: Option<u32>,
    /// Rendezvous port for --nproc-per-node, where this process hosts the ranks' store (default:
    /// MASTER_PORT, else a free port the system picks).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    master_port: Option<u16>,
    /// Collective backend of a distributed job: auto (NCCL on CUDA, Gloo on the CPU), gloo or nccl.
    #[arg(long, value_name = "BACKEND", default_value = "auto", value_parser = ["auto", "gloo", "nccl"])]
    dist_backend: String,
    /// Seconds a rank waits for its peers, at the rendezvous and in every collective, before it
    /// fails: a rank that died or hung ends the job within this time.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, value_parser = timeout_seconds)]
    dist_timeout: f64,
    /// How ranks on one machine share its CPUs: split (each pinned to an equal share of the CPUs
    /// this process may use) or none (the scheduler decides). Two jobs on one machine should each
    /// get their own CPUs through taskset or the batch system, or use none.
    #[arg(long, value_name = "MODE", default_value = "split", value_parser = ["split", "none"])]
    cpu_affinity: String,
    /// Gradient all-reduce bucket size in MiB: one collective per bucket of the flat gradient.
    #[arg(long, value_name = "MIB", default_value_t = 25.0, value_parser = positive_seconds)]
    bucket_mb: f64,
    #[command(flatten)]
    common: CommonArgs,
}

/// The tool, with the faults a test injects (none in `train`).
pub fn main(faults: trainer::Faults) -> ExitCode {
    let args: Args = runfn_core::cli::parse_args("train", runfn_version::long());
    if let Some(nproc) = args.nproc_per_node {
        let launched = launcher::run(
            nproc,
            args.master_port,
            Duration::from_secs_f64(args.dist_timeout),
            args.record.as_deref(),
            args.common.quiet,
        );
        return launched.unwrap_or_else(|err| {
            let (line, exit) = runfn_core::cli::error_line(&err);
            eprintln!("train: {line}");
            exit.into()
        });
    }
    runfn_core::cli::read_panics_with(runfn_learn::torch_failure::cause_of_message);
    runfn_core::cli::main("train", args.common.clone(), |tool| run(tool, args, faults))
}

/// `--device` as given: plain `cuda` in a distributed job means the rank's own GPU.
#[derive(Debug, Clone)]
struct DeviceArg {
    choice: DeviceChoice,
    indexed: bool,
}

impl DeviceArg {
    fn parse(text: &str) -> Result<DeviceArg, String> {
        Ok(DeviceArg {
            choice: DeviceChoice::parse(text)?,
            indexed: text.contains(':'),
        })
    }

    fn for_rank(&self, launch: Option<&Launch>) -> DeviceChoice {
        match (self.choice, launch) {
            (DeviceChoice::Cuda(_), Some(l)) if !self.indexed => DeviceChoice::Cuda(l.local_rank),
            (choice, _) => choice,
        }
    }
}

/// A wait of at most a day: longer ones are typing mistakes, and `1e300` seconds cannot be a
/// duration at all.
fn timeout_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 86_400.0 => Ok(x),
        _ => Err(format!(
            "`{text}`: expected seconds above 0, at most 86400 (a day)"
        )),
    }
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{text}`: expected a number above 0")),
    }
}

/// Rank 0 talks as `train`; the other ranks only warn, naming themselves.
struct ToolReporter<'a> {
    tool: &'a Tool,
    rank: usize,
}

impl Reporter for ToolReporter<'_> {
    fn info(&self, message: String) {
        if self.rank == 0 {
            self.tool.info(message);
        }
    }
    fn warn(&self, message: String) {
        match self.rank {
            0 => self.tool.warn(message),
            rank => self.tool.warn(format!("rank {rank}: {message}")),
        }
    }
}

/// Joins the job's process group when the environment names one (torchrun, Slurm, Kubernetes
/// or --nproc-per-node).
fn join_group(
    launch: Option<&Launch>,
    backend: &str,
    timeout_s: f64,
    device: tch::Device,
) -> anyhow::Result<Option<ProcessGroup>> {
    let Some(launch) = launch else {
        return Ok(None);
    };
    let backend = match backend {
        "auto" => Backend::for_device(device),
        other => Backend::parse(other).map_err(anyhow::Error::msg)?,
    };
    let options = GroupOptions {
        backend,
        timeout: Duration::from_secs_f64(timeout_s),
        gloo_ifname: std::env::var("GLOO_SOCKET_IFNAME")
            .ok()
            .filter(|s| !s.is_empty()),
        gloo_threads: 1,
        device: match backend {
            Backend::Nccl => device,
            Backend::Gloo => tch::Device::Cpu,
        },
    };
    Ok(Some(ProcessGroup::connect(launch, &options)?))
}

fn run(tool: &Tool, args: Args, faults: trainer::Faults) -> anyhow::Result<Exit> {
    // From here on SIGTERM and SIGINT are requests: finish the step, checkpoint it, exit 3.
    runfn_core::stop::install();
    // Before anything starts a thread: threads inherit the CPUs of the thread that starts them.
    let launch = Launch::from_env().map_err(|m| InputError::field("launch environment", m))?;
    let local_world = launch.as_ref().map_or(1, |l| l.local_world);
    let pinned = match &launch {
        Some(l) if l.local_world > 1 && args.cpu_affinity == "split" => {
            affinity::pin_to_share(l.local_rank, l.local_world)?
        }
        _ => None,
    };
    let cores = match &pinned {
        Some(cpus) => cpus.len(),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()) / local_world,
    };
    let record = Record::read(args.record.as_deref(), RecordInput::Required)?;
    record.refuse_failed_checks("train")?;
    runfn_manifest::verify_record(&record)?;
    let config = TrainConfig::from_json(record.get_path("manifest.config"))
        // The message names its field already (`manifest.config.max_step: ...`).
        .map_err(|m| match m.split_once(": ") {
            Some((field, message)) => InputError::field(field, message),
            None => InputError::field("manifest.config", m),
        })?;
    let manifest_hash = record
        .get("manifest_hash")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            InputError::field(
                "manifest_hash",
                "is missing: train reads a record from mf-hash (through the data stages)",
            )
        })?
        .to_string();
    let seed = record.seed(args.seed)?;
    let run_id = record
        .get_path("manifest.run_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    let out = match (args.out, &run_id) {
        (Some(out), _) => out,
        (None, Some(run_id)) => PathBuf::from("runs")
            .join(run_id)
            .join(format!("train-seed{seed}")),
        (None, None) => {
            return Err(InputError::field(
                "--out",
                "is missing and the record has no manifest.run_id",
            )
            .into());
        }
    };
    // A store URL: the run works in a local work folder; checkpoints are published as they are
    // written and fetched before a resume, the weights and metrics are published at the end.
    let store = match out.to_str().filter(|t| runfn_storage::is_remote(t)) {
        Some(url) => Some(runfn_storage::Remote::parse(url)?),
        None => None,
    };
    let local_out = store
        .as_ref()
        .map_or_else(|| out.clone(), |s| runfn_storage::work_dir(&s.url()));
    let shards = inputs::shards(&record, args.shards)?;
    let reserved = inputs::reserved(&record)?;
    let rank = launch.as_ref().map_or(0, |l| l.rank);
    let device_choice = args.device.for_rank(launch.as_ref());
    if args.bf16 && device_choice == DeviceChoice::Cpu {
        return Err(InputError::field("--bf16", "applies to --device cuda only").into());
    }
    let device = device_choice.open().map_err(anyhow::Error::msg)?;
    let ckpt_every_s = record
        .section::<CkptInterval>()?
        .map(|plan| plan.interval_s)
        .filter(|s| *s > 0.0);
    let job = TrainJob {
        config,
        manifest_hash,
        run_id,
        seed,
        out: local_out.clone(),
        store: store.clone(),
        shards_dir: shards.dir,
        index: shards.index,
        index_blake3: shards.index_blake3,
        reserved,
        device,
        bf16: args.bf16,
        fresh: args.fresh,
        ckpt_every_s,
        ckpt_async: !args.sync_checkpoints,
        loader_prefetch: args.prefetch as usize,
        loader_lookahead: 2,
        loader_cache_bytes: args.cache as usize,
        threads: args.threads,
        group: join_group(
            launch.as_ref(),
            &args.dist_backend,
            args.dist_timeout,
            device,
        )?,
        cores: cores.max(1),
        pinned_cpus: pinned,
        bucket_bytes: (args.bucket_mb * 1024.0 * 1024.0) as usize,
        faults,
    };
    let reporter = ToolReporter { tool, rank };
    reporter.info(format!(
        "training {} steps of global batch {} on {device_choice}{} -> {}",
        job.config.max_steps,
        job.config.global_batch,
        job.group.as_ref().map_or(String::new(), |g| format!(
            " x {} ranks ({})",
            g.world, g.backend
        )),
        out.display()
    ));
    let mut environment = Map::new();
    environment.insert("cores_used".into(), json!(job.cores));
    environment.insert("pinned_cpus".into(), json!(job.pinned_cpus));
    environment.insert("libtorch".into(), json!(device::libtorch_version()));
    environment.insert("device".into(), json!(device_choice.to_string()));
    // Every rank holds one GPU for the whole job, and rank 0's record is the job's.
    let gpus = match device_choice {
        DeviceChoice::Cpu => 0,
        DeviceChoice::Cuda(_) => job.group.as_ref().map_or(1, |g| g.world),
    };
    environment.insert("gpus".into(), json!(gpus));
    let on_stall = stall_handler(&record, args.common.pretty, rank, environment.clone());
    let gpu_monitor = GpuMonitor::start(device_choice);
    let report = trainer::train(&job, &reporter, on_stall);
    if let Some(gpu) = gpu_monitor.and_then(GpuMonitor::finish) {
        environment.insert("gpu".into(), serde_json::to_value(gpu)?);
    }
    let report = report?;
    environment.insert("threads".into(), json!(report.threads));
    let exit = if report.preempted {
        Exit::Preempted
    } else {
        Exit::from_passed(report.passed)
    };
    if rank != 0 {
        // Rank 0 writes the record; another rank's stdout would corrupt the stream.
        if let Some(reason) = &report.reason {
            reporter.warn(reason.clone());
        }
        return Ok(exit);
    }
    match &report.reason {
        Some(reason) => tool.warn(reason),
        None => tool.info(format!(
            "done: {} steps, {:.0} samples/s, data wait {:.1}%, weights {}",
            report.steps,
            report.samples_per_s,
            100.0 * report.data_wait_fraction,
            report.weights.as_deref().unwrap_or("-")
        )),
    }
    let mut section = report;
    if let Some(store) = &store {
        publish_outputs(tool, &local_out, store)?;
        name_in_store(&mut section, &local_out, &store.url());
    }
    let mut record = record;
    record.set(&section)?;
    tool.finish_with(record, exit, environment)
}

/// Publishes the run's metrics, then its weights (what the record points to), to the store.
/// The checkpoints are already there.
fn publish_outputs(tool: &Tool, local: &Path, store: &runfn_storage::Remote) -> anyhow::Result<()> {
    for name in ["metrics.jsonl", runfn_learn::weights::FILE_NAME] {
        let path = local.join(name);
        if path.exists() {
            store
                .join(name)
                .upload_file(&path)
                .with_context(|| format!("publishing {name}"))?;
        }
    }
    tool.info(format!(
        "published the weights and metrics to {}",
        store.url()
    ));
    Ok(())
}

/// Every path in the section that lies in the local work folder, renamed to its store URL.
fn name_in_store(section: &mut TrainReport, local: &Path, url: &str) {
    let prefix = local.display().to_string();
    let rename = |text: &mut String| {
        if let Some(rest) = text.strip_prefix(&prefix) {
            *text = format!("{url}{rest}");
        }
    };
    section.weights.iter_mut().for_each(rename);
    rename(&mut section.metrics);
    section
        .best
        .iter_mut()
        .for_each(|best| rename(&mut best.checkpoint));
    section
        .resumed_from
        .iter_mut()
        .for_each(|from| rename(&mut from.checkpoint));
}

/// A loop stuck for good (it did not stop by itself when the stall was flagged) cannot return,
/// so the watchdog finishes the process: the record with the failed `train` section on stdout,
/// the reason on stderr, exit 1, through `_exit` (see `exit_from_thread`).
fn stall_handler(
    record: &Record,
    pretty: bool,
    rank: usize,
    environment: Map<String, Value>,
) -> trainer::StallHandler {
    let mut record = record.clone();
    let stopwatch = Stopwatch::start();
    Box::new(move |reason: String| {
        if rank != 0 {
            eprintln!("train: rank {rank}: {reason}");
            exit_from_thread(Exit::CheckFailed);
        }
        eprintln!("train: {reason}");
        let _ = record.set(&TrainSection::Stopped(TrainStopped {
            passed: false,
            preempted: false,
            reason,
        }));
        let _ = record.push_timing(stopwatch.entry_with("train", environment.clone()));
        let _ = record.write_to(&mut std::io::stdout().lock(), pretty);
        exit_from_thread(Exit::CheckFailed);
    })
}
