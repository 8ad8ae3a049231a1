//! train: train the run's model on libtorch; resumable, exactly.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use runfn_core::cli::{CommonArgs, Tool};
use runfn_core::record::RecordInput;
use runfn_core::timings::Stopwatch;
use runfn_core::{Exit, InputError, Record};
use runfn_data::spec::parse_size;
use runfn_learn::config::TrainConfig;
use runfn_learn::device::DeviceChoice;
use runfn_learn::inputs;
use runfn_learn::trainer::{self, Reporter, TrainJob};
use serde_json::{Value, json};

const AFTER_HELP: &str = "\
Examples:
  shardify < validated.json | train > trained.json
  train --seed 8 --out runs/churn/train-seed8 < shards.json     # a noise-floor rerun
  train --device cuda --bf16 < shards.json                       # on a GPU (full libtorch install)

Reads the run record (manifest, manifest_hash and the `shards` section), fits the preprocessing
on the train split (numeric columns standardized, string columns through a vocabulary with an
unknown bucket), trains an MLP with AdamW (warmup then cosine decay, gradient clipping), scores the
val split every eval_every steps, and checkpoints every ckpt_every steps and, when the record has a
`ckpt_interval` section, every ckpt_interval.interval_s seconds. Settings come from
manifest.config: hidden, dropout, lr, weight_decay, global_batch, max_steps, warmup_steps,
min_lr_ratio, grad_clip, eval_every, ckpt_every, keep_checkpoints, log_every, embedding_dim,
max_vocab, features {numeric, categorical}, stall_timeout_s.

Killed at any point, `train` run again with the same record resumes from the newest valid
checkpoint in OUT/checkpoints and ends with the same weights, bit for bit, on the same machine.
A checkpoint of another manifest or seed is refused (exit 2) unless --fresh.

Files under OUT: model.safetensors (weights with their preprocessing and lineage),
metrics.jsonl (step, loss, lr, grad_norm, step_time_s, data_wait_fraction, samples_per_s,
ckpt_s, val), checkpoints/step-N.{safetensors,json}.

Output: the input record plus
  \"train\": {\"passed\", \"reason\" (on failure), \"weights\", \"weights_blake3\", \"steps\",
            \"steps_this_run\", \"seed\", \"device\", \"threads\", \"wall_s\", \"samples_per_s\",
            \"data_wait_fraction\", \"step_time_s\", \"ckpt_mean_s\", \"checkpoints_written\",
            \"resumed_from\" ({checkpoint, step, load_s} or null), \"metrics\", \"parameters\", \"features\", \"final_loss\", \"val\",
            \"shards_index_blake3\"}

Exit: 0 trained, 1 the loss or gradient became non-finite or the run stalled (no weights written),
2 bad usage or input (missing shards, schema mismatch, NaN feature or label, unwritable folder,
a checkpoint of another manifest).";

/// Train the run's MLP on libtorch from Parquet shards, with checkpoints that resume exactly.
#[derive(Debug, Parser)]
#[command(name = "train", version, after_help = AFTER_HELP)]
struct Args {
    /// Output folder (default: runs/<run_id>/train-seed<seed>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed for initialisation, data order and dropout (default: manifest.seed).
    #[arg(long)]
    seed: Option<u64>,
    /// The shard folder (default: the record's shards.dir).
    #[arg(long, value_name = "DIR")]
    shards: Option<PathBuf>,
    /// cpu, cuda or cuda:N. CUDA needs the full libtorch install.
    #[arg(long, default_value = "cpu", value_parser = DeviceChoice::parse)]
    device: DeviceChoice,
    /// Matrix products in bf16 on CUDA (weights, optimizer and loss stay fp32).
    #[arg(long)]
    bf16: bool,
    /// Discard existing checkpoints in OUT and start from step 0.
    #[arg(long)]
    fresh: bool,
    /// libtorch intra-op threads (default: the checkpoint's when resuming, else one per core
    /// but one, which is left to the input pipeline).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    threads: Option<i32>,
    /// Batches the input pipeline prepares ahead.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    prefetch: u32,
    /// Keep the decoded train split in memory when it fits in SIZE (0: decode every epoch).
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    cache: u64,
    /// Read the record from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    runfn_core::cli::main("train", args.common.clone(), |tool| run(tool, args))
}

struct ToolReporter<'a>(&'a Tool);

impl Reporter for ToolReporter<'_> {
    fn info(&self, message: String) {
        self.0.info(message);
    }
    fn warn(&self, message: String) {
        self.0.warn(message);
    }
}

fn run(tool: &Tool, args: Args) -> anyhow::Result<Exit> {
    let record = Record::read(args.record.as_deref(), RecordInput::Required)?;
    record.refuse_failed_checks("train")?;
    let config = TrainConfig::from_json(record.get_path("manifest.config"))
        .map_err(|m| InputError::field("manifest.config", m))?;
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
    let seed = match args.seed {
        Some(seed) => seed,
        None => record
            .get_path("manifest.seed")
            .and_then(Value::as_u64)
            .ok_or_else(|| {
                InputError::field("--seed", "is missing and the record has no manifest.seed")
            })?,
    };
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
    let shards = inputs::shards(&record, args.shards)?;
    let reserved = inputs::reserved(&record)?;
    if args.bf16 && args.device == DeviceChoice::Cpu {
        return Err(InputError::field("--bf16", "applies to --device cuda only").into());
    }
    let device = args.device.open().map_err(anyhow::Error::msg)?;
    let ckpt_every_s = record
        .get_path("ckpt_interval.interval_s")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0);
    let job = TrainJob {
        config,
        manifest_hash,
        run_id,
        seed,
        out: out.clone(),
        shards_dir: shards.dir,
        index: shards.index,
        index_blake3: shards.index_blake3,
        reserved,
        device,
        bf16: args.bf16,
        fresh: args.fresh,
        ckpt_every_s,
        loader_prefetch: args.prefetch as usize,
        loader_lookahead: 2,
        loader_cache_bytes: args.cache as usize,
        threads: args.threads,
    };
    tool.info(format!(
        "training {} steps of global batch {} on {} -> {}",
        job.config.max_steps,
        job.config.global_batch,
        args.device,
        out.display()
    ));
    let on_stall = stall_handler(&record, args.common.pretty);
    let report = trainer::train(&job, &ToolReporter(tool), on_stall)?;
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
    let exit = Exit::from_passed(report.passed);
    let mut record = record;
    record.set_section("train", serde_json::to_value(&report)?);
    tool.finish(record, exit)
}

/// A stalled run cannot return from the loop, so the watchdog finishes the process itself:
/// the record with the failed `train` section on stdout, the reason on stderr, exit 1.
fn stall_handler(record: &Record, pretty: bool) -> trainer::StallHandler {
    let mut record = record.clone();
    let stopwatch = Stopwatch::start();
    Box::new(move |reason: String| {
        eprintln!("train: {reason}");
        record.set_section("train", json!({"passed": false, "reason": reason}));
        let _ = record.push_timing(stopwatch.entry("train"));
        let _ = record.write_to(&mut std::io::stdout().lock(), pretty);
        std::process::exit(Exit::CheckFailed.code().into());
    })
}
