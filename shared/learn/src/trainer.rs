//! The training loop: resume from the newest valid checkpoint, train to `max_steps` (or until
//! early stopping ends it) with the input pipeline running ahead, evaluate on val, checkpoint by
//! steps or seconds, and write the model file: the best val AUC's weights with early stopping,
//! else the last step's. Returns the report that becomes the record's `train` section.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use runfn_core::atomic::write_bytes_atomic;
use runfn_core::leftovers::Leftovers;
use runfn_data::shards::ShardIndex;
use runfn_dist::ProcessGroup;
use serde::Serialize;
use serde_json::{Value, json};
use tch::{Device, Kind, Reduction, Tensor};

use crate::adamw::AdamW;
use crate::alerts::{Alert, Detector, Notifier};
use crate::async_checkpoint;
use crate::checkpoint::{self, CheckpointState, OptimizerState, RankState, RngState, TensorsRef};
use crate::config::TrainConfig;
use crate::data_parallel::{self, GradientSync, Start};
use crate::early_stopping::{EarlyStoppingReport, ValWatch};
use crate::features::{self, Preprocess, Reserved};
use crate::loader::{Loader, LoaderOptions, ShardSet};
use crate::metrics::{self, Metrics};
use crate::model::{Architecture, Mlp};
use crate::score;
use crate::seeds;
pub use crate::watchdog::StallHandler;
use crate::watchdog::Watchdog;
use crate::weights::{self, ModelMeta};

#[derive(Debug)]
pub struct TrainJob {
    pub config: TrainConfig,
    pub manifest_hash: String,
    pub run_id: Option<String>,
    pub seed: u64,
    /// The local folder written (a work folder when the run's output is in a store).
    pub out: PathBuf,
    /// Where `out/checkpoints` is published as each checkpoint is written, and fetched from
    /// before a resume: the store copy of the run's output (`--out s3://…`).
    pub store: Option<runfn_storage::Remote>,
    pub shards_dir: PathBuf,
    pub index: ShardIndex,
    pub index_blake3: String,
    pub reserved: Reserved,
    pub device: Device,
    pub bf16: bool,
    pub fresh: bool,
    /// Also checkpoint when this many seconds passed since the last one (from `ckpt_interval`).
    pub ckpt_every_s: Option<f64>,
    /// Write checkpoints in the background from a copy in host memory (see
    /// [`crate::async_checkpoint`]); off, the loop waits for each whole save.
    pub ckpt_async: bool,
    pub loader_prefetch: usize,
    pub loader_lookahead: usize,
    pub loader_cache_bytes: usize,
    /// libtorch intra-op threads (None: the checkpoint's on resume, else libtorch's default).
    pub threads: Option<i32>,
    /// The process group when this is one rank of a data-parallel job.
    pub group: Option<ProcessGroup>,
    /// The cores this rank may use: the machine's, or its share when ranks share the machine.
    pub cores: usize,
    /// The CPUs this rank was pinned to, when it was.
    pub pinned_cpus: Option<Vec<usize>>,
    /// Gradient all-reduce bucket size.
    pub bucket_bytes: usize,
    /// Faults a test injects (none in a real run).
    pub faults: Faults,
}

/// The record's `train` section.
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    pub passed: bool,
    /// Stopped on request (SIGTERM) after checkpointing the step it was in; a rerun resumes.
    pub preempted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub weights: Option<String>,
    pub weights_blake3: Option<String>,
    pub steps: u64,
    pub steps_this_run: u64,
    pub seed: u64,
    pub device: String,
    pub threads: i32,
    pub wall_s: f64,
    pub samples_per_s: f64,
    pub data_wait_fraction: f64,
    pub step_time_s: f64,
    /// Mean seconds a checkpoint's save took, start to commit (in the background when async).
    pub ckpt_mean_s: Option<f64>,
    /// Whether checkpoints were written in the background.
    pub ckpt_async: bool,
    /// Mean seconds the loop was held up per checkpoint: the copy to host memory plus any wait
    /// for the previous write when async, the whole save when not.
    pub ckpt_blocking_s: Option<f64>,
    pub checkpoints_written: u64,
    pub resumed_from: Option<Value>,
    pub metrics: String,
    pub parameters: i64,
    pub features: Value,
    pub final_loss: Option<f64>,
    pub val: Option<Metrics>,
    /// With `keep_best` or early stopping: the kept checkpoint of the highest val AUC (null:
    /// both off, or no val AUC yet).
    pub best: Option<BestReport>,
    /// What early stopping did (null: `patience` 0).
    pub early_stopping: Option<EarlyStoppingReport>,
    pub shards_index_blake3: String,
    /// The data-parallel job, when there was one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedReport>,
    /// The live alerts this run raised (a resumed run lists its own; metrics.jsonl has all).
    pub alerts: Vec<Alert>,
}

/// The record's `train.best`.
#[derive(Debug, Clone, Serialize)]
pub struct BestReport {
    pub step: u64,
    pub val_auc: f64,
    /// The checkpoint's JSON, which `evaluate --checkpoint best` scores.
    pub checkpoint: String,
}

/// The record's `train.distributed`.
#[derive(Debug, Clone, Serialize)]
pub struct DistributedReport {
    pub world_size: usize,
    pub backend: String,
    pub buckets: usize,
    pub bucket_bytes: usize,
    /// Mean seconds per step in the gradient all-reduce (rank 0's view).
    pub allreduce_s_per_step: f64,
    /// The share of step time spent in it.
    pub allreduce_fraction: f64,
    /// The CPUs rank 0 was pinned to (null: not pinned).
    pub cpus: Option<Vec<usize>>,
}

/// How the loop talks to the tool: messages and warnings for stderr.
pub trait Reporter {
    fn info(&self, message: String);
    fn warn(&self, message: String);
    /// A live alert: `train: alert: ...`, silenced by `-q` like every human message (the
    /// metrics line, the record and the alert command still carry it).
    fn alert(&self, message: String) {
        self.info(format!("alert: {message}"));
    }
}

fn split_shards(job: &TrainJob, split: &str) -> Option<ShardSet> {
    let entry = job.index.splits.get(split)?;
    Some(ShardSet {
        paths: entry
            .shards
            .iter()
            .map(|s| job.shards_dir.join(&s.path))
            .collect(),
        rows: entry.shards.iter().map(|s| s.rows).collect(),
    })
}

/// Runs the job. `Ok(report)` with `passed: false` is a failed check (non-finite loss, a stall,
/// a lost peer) or a preemption; `Err` is bad input, and then the folders and empty files this
/// run created are removed again.
pub fn train(
    job: &TrainJob,
    reporter: &dyn Reporter,
    on_stall: StallHandler,
) -> Result<TrainReport> {
    let ckpt_dir = job.out.join("checkpoints");
    let metrics_path = job.out.join("metrics.jsonl");
    let leftovers = Leftovers::note([job.out.as_path(), &ckpt_dir, &metrics_path]);
    let result = train_job(job, reporter, on_stall);
    if result.is_err() {
        leftovers.remove_empty();
    }
    result
}

fn train_job(
    job: &TrainJob,
    reporter: &dyn Reporter,
    on_stall: StallHandler,
) -> Result<TrainReport> {
    let started = Instant::now();
    let config = &job.config;
    let Some(train_set) = split_shards(job, "train") else {
        bail!(
            "{}: has no `train` split (splits: {})",
            job.shards_dir.join("index.json").display(),
            job.index
                .splits
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let val_set = split_shards(job, "val");
    // Early stopping watches the val AUC; with no val split there is nothing to watch.
    let early = config.patience > 0 && val_set.is_some();
    let group = job.group.as_ref();
    let (rank, world) = group.map_or((0, 1), |g| (g.rank, g.world));
    let root = rank == 0;
    if config.global_batch % world as u64 != 0 {
        bail!(
            "manifest.config.global_batch = {} does not split evenly over {world} ranks: the global batch \
             is fixed and every rank takes an equal part of it; choose a multiple of {world}",
            config.global_batch
        );
    }
    if train_set.total_rows() < config.global_batch {
        bail!(
            "the train split has {} rows, fewer than one global batch ({}); lower manifest.config.global_batch",
            train_set.total_rows(),
            config.global_batch
        );
    }
    let ckpt_dir = job.out.join("checkpoints");

    // Only rank 0 reads and writes OUT; the other ranks receive the start, the parameters and
    // the optimizer moments from it, so OUT need not be on a shared file system.
    let load_started = Instant::now();
    let mut loaded = None;
    let mut start = None;
    let ckpt_store = job.store.as_ref().map(|s| s.join("checkpoints"));
    if root {
        checkpoint::ensure_writable(&ckpt_dir)?;
        let mut warnings = Vec::new();
        if let Some(store) = &ckpt_store
            && !job.fresh
        {
            checkpoint::fetch(store, &ckpt_dir)
                .with_context(|| format!("fetching the checkpoints in {}", store.url()))?;
        }
        loaded = if job.fresh {
            checkpoint::clear(&ckpt_dir)?;
            if let Some(store) = &ckpt_store {
                checkpoint::publish(&ckpt_dir, store)
                    .with_context(|| format!("removing the checkpoints in {}", store.url()))?;
            }
            None
        } else {
            checkpoint::load_latest(&ckpt_dir, &job.manifest_hash, job.seed, &mut warnings)?
        };
        for w in warnings {
            reporter.warn(w);
        }
        if config.patience > 0 && val_set.is_none() {
            reporter.warn(format!(
                "no val split: early stopping (patience {}) has nothing to watch, so all max_steps = {} \
                 steps are trained and the last step's weights written",
                config.patience, config.max_steps
            ));
        }
        if let Some(l) = &loaded
            && l.state.world_size != world as u64
        {
            reporter.warn(format!(
                "checkpoint {} was written by {} rank(s) and this run has {world}: resuming with another \
                 world size is allowed, but the gradient sums run in another order, so the result will \
                 not be bit-identical to an uninterrupted run",
                l.path.display(),
                l.state.world_size
            ));
        }
        let threads = choose_threads(loaded.as_ref(), job.threads, job.cores, reporter);
        let preprocess = match &loaded {
            Some(l) => l.state.preprocess.clone(),
            None => {
                let lists =
                    features::choose(&job.index.columns, &job.reserved, config.features.as_ref())?;
                Preprocess::fit(
                    &train_set.paths,
                    &lists,
                    &job.reserved.label,
                    job.reserved.label_positive.as_ref(),
                    config.max_vocab,
                    config.missing_indicators,
                )?
            }
        };
        start = Some(match &loaded {
            Some(l) => Start {
                preprocess,
                step: l.state.step,
                epoch: l.state.epoch,
                position: l.state.position,
                samples: l.state.samples,
                optimizer_step: l.state.optimizer.step,
                threads,
                stopped: early && watch_of(config, Some(&l.state)).exhausted(),
            },
            None => Start {
                preprocess,
                step: 0,
                epoch: 0,
                position: 0,
                samples: 0,
                optimizer_step: 0,
                threads,
                stopped: false,
            },
        });
    }
    let start = match group {
        Some(g) => data_parallel::share_start(g, start)?,
        None => start.expect("rank 0 decides the start"),
    };
    // Floating-point sums are split across threads, so every rank uses rank 0's choice.
    tch::set_num_threads(start.threads);
    let threads = start.threads;
    let preprocess = start.preprocess;

    let arch = Architecture {
        numeric: preprocess.numeric_inputs() as i64,
        cardinalities: preprocess.cardinalities(),
        embedding_dim: config.embedding_dim,
        hidden: config.hidden.clone(),
        dropout: config.dropout,
    };
    // Only a fresh rank 0 draws initial weights; the others receive them.
    let mut model = if root && loaded.is_none() {
        Mlp::new(arch, job.seed, job.device)
    } else {
        Mlp::zeroed(arch, job.device)
    };
    if job.bf16 {
        model.compute = Kind::BFloat16;
    }
    let mut optimizer = AdamW::new(&model, config.weight_decay);
    let schedule = config.schedule();
    let (mut step, mut epoch, mut position, mut samples) =
        (start.step, start.epoch, start.position, start.samples);
    optimizer.step = start.optimizer_step;
    let mut resumed_from = None;
    let mut watch = watch_of(config, loaded.as_ref().map(|l| &l.state));
    let mut stopped_early = start.stopped;
    if let Some(l) = &loaded {
        let origin = l.path.display().to_string();
        model.load(&l.tensors, "model.", &origin)?;
        optimizer.load(&model, &l.tensors, l.state.optimizer.step, &origin)?;
        // Reading, verifying and decoding the checkpoint, and copying it into the model and
        // optimizer: what a restart pays before its first step.
        let load_s = load_started.elapsed().as_secs_f64();
        resumed_from = Some(json!({"checkpoint": origin, "step": step, "load_s": load_s}));
        reporter.info(format!("resuming from {origin} at step {step}"));
    }
    drop(loaded);
    if let Some(g) = group {
        data_parallel::share_parameters(g, &model, &optimizer)?;
    }
    if step > config.max_steps {
        bail!(
            "the checkpoint is at step {step}, beyond manifest.config.max_steps = {}; rerun with --fresh",
            config.max_steps
        );
    }
    let mut sync = group.map(|_| GradientSync::new(model.flat.numel() as i64, job.bucket_bytes));
    let local_batch = config.global_batch / world as u64;
    let rows = [rank as u64 * local_batch, (rank as u64 + 1) * local_batch];

    let metrics_path = job.out.join("metrics.jsonl");
    let mut metrics_file = if root {
        Some(open_metrics(&metrics_path, step)?)
    } else {
        None
    };
    let mut loader = Loader::start(
        train_set,
        Arc::new(preprocess.clone()),
        LoaderOptions {
            batch: config.global_batch as usize,
            seed: job.seed,
            start_epoch: epoch,
            start_position: position,
            rank,
            world,
            prefetch: job.loader_prefetch,
            lookahead: job.loader_lookahead,
            pin_for: matches!(job.device, Device::Cuda(_)).then_some(job.device),
            cache_bytes: job.loader_cache_bytes,
            dropout: config.dropout,
            dropout_widths: config.hidden.clone(),
        },
    )?;
    let hooks = &job.faults;
    let mut writer = async_checkpoint::Writer::new(&ckpt_dir, config.keep_checkpoints)
        .with_delay(hooks.slow_ckpt_write)
        .with_store(ckpt_store.clone());
    // A loop stuck for good is ended from the watchdog's thread: a checkpoint being written then
    // is finished first (a write stuck on a dead disk gets a minute), so it is whole on disk.
    let idle = writer.idle();
    let on_stall: StallHandler = Box::new(move |reason| {
        idle.wait(Duration::from_secs(60));
        on_stall(reason)
    });
    let watchdog = Watchdog::start(Duration::from_secs_f64(config.stall_timeout_s), on_stall);

    let start_step = step;
    let loop_start = Instant::now();
    let (mut wait_total, mut compute_total) = (Duration::ZERO, Duration::ZERO);
    let mut window = Window::default();
    let mut ckpt_times = Vec::new();
    let mut ckpt_blocked = Vec::new();
    let mut last_ckpt = Instant::now();
    let mut last_loss = None;
    let mut last_val = None;
    let mut failure = None;
    let mut stopped_by = None;
    let mut detector = root.then(|| {
        let age = config
            .alerts
            .checkpoint_age_s
            .or(job.ckpt_every_s.map(|s| 2.0 * s));
        Detector::new(config.alerts.clone(), age)
    });
    let mut notifier = Notifier::from_env();
    let mut alerts = Vec::new();

    while step < config.max_steps && !stopped_early {
        // A failed background write ends the run at the next step rather than the next checkpoint.
        if let Some(written) = writer.poll()? {
            ckpt_times.push(written.seconds);
        }
        if let Some(reason) = watchdog.poll() {
            failure = Some(reason);
            break;
        }
        if hooks.hang_at == Some(step) {
            hang_forever();
        }
        if hooks.panic_at == Some(step) {
            panic!("injected fault: a panic at step {step}");
        }
        let t_wait = Instant::now();
        if let Some((from, delay)) = hooks.slow_input
            && step >= from
        {
            std::thread::sleep(delay);
        }
        let batch = loader.next_batch()?;
        let waited = t_wait.elapsed();
        let t_compute = Instant::now();
        let numeric = to_device(&batch.numeric, job.device);
        let categorical = to_device(&batch.categorical, job.device);
        let mut labels = to_device(&batch.labels, job.device);
        if hooks.flip_labels_at == Some(step + 1) {
            labels = labels.ones_like() - &labels;
        }
        let masks: Vec<Tensor> = batch
            .dropout
            .iter()
            .map(|m| to_device(m, job.device))
            .collect();
        let logits = model.forward(&numeric, &categorical, Some(&masks));
        let loss =
            logits.binary_cross_entropy_with_logits::<Tensor>(&labels, None, None, Reduction::Mean);
        model.zero_grad();
        loss.backward();
        let mut loss_value = loss.double_value(&[]);
        let lr = schedule.lr_at(step);
        let mut grad = model.flat_grad();
        // Only rank 0 looks at the clock; the wish travels with the gradients so that every
        // rank checkpoints (and gathers its state) at the same step.
        let mut by_time = root
            && job
                .ckpt_every_s
                .is_some_and(|s| last_ckpt.elapsed().as_secs_f64() >= s);
        // A stop request (SIGTERM) also travels with the gradients: whichever rank got it, every
        // rank finishes this step, checkpoints it and stops, so they agree on the step.
        let mut stop = runfn_core::stop::requested();
        let mut reduced = Duration::ZERO;
        if let (Some(g), Some(sync)) = (group, sync.as_mut()) {
            let before = sync.time;
            let synced = sync.step(g, &mut grad, loss_value, by_time, stop.is_some());
            reduced = sync.time - before;
            match synced {
                Ok(synced) => {
                    loss_value = synced.loss;
                    by_time = synced.checkpoint_now;
                    if synced.stop_now {
                        stop = stop.or(Some(libc::SIGTERM));
                    }
                }
                Err(e) => {
                    failure = Some(format!("{e:#} (at step {})", step + 1));
                    break;
                }
            }
        }
        // After the all-reduce every rank sees the same loss and gradient, so all stop together.
        if !loss_value.is_finite() {
            failure = Some(format!(
                "the loss became {loss_value} at step {} (lr {lr:.3e}); stopped without writing weights. \
                 Lower manifest.config.lr or check the features for extreme values",
                step + 1
            ));
            break;
        }
        let grad_norm = AdamW::clip_grad_norm(&mut grad, config.grad_clip);
        if !grad_norm.is_finite() {
            failure = Some(format!(
                "the gradient norm became {grad_norm} at step {} (lr {lr:.3e}); stopped without writing weights",
                step + 1
            ));
            break;
        }
        optimizer.step(&mut model, &grad, lr);
        let computed = t_compute.elapsed();

        step += 1;
        samples += config.global_batch;
        epoch = batch.epoch;
        position = batch.position + 1;
        if position == loader.batches_per_epoch {
            epoch += 1;
            position = 0;
        }
        watchdog.stepped(step);
        // Stopping at the last step changes nothing: the run is complete.
        let stop = stop.filter(|_| step < config.max_steps);
        wait_total += waited;
        compute_total += computed;
        window.add(loss_value, waited, computed, reduced, config.global_batch);
        last_loss = Some(loss_value);

        let mut line = None;
        let mut closed_window = None;
        // Only rank 0 scores val, so only it checkpoints a new best between scheduled steps.
        let mut improved = false;
        if step % config.log_every == 0 || step == config.max_steps {
            line = Some(window.line(step, epoch, lr, grad_norm));
            closed_window = Some((
                window.samples,
                (window.wait + window.compute).as_secs_f64(),
                window.wait.as_secs_f64(),
            ));
            window = Window::default();
        }
        let eval_now =
            val_set.is_some() && (step % config.eval_every == 0 || step == config.max_steps);
        if root
            && eval_now
            && let Some(val) = &val_set
        {
            let scored = score::score(&model, &preprocess, &val.paths, &[], job.device)?;
            let m = metrics::compute(&scored.scores, &scored.labels);
            let entry = line.get_or_insert_with(|| json!({"step": step}));
            entry["val"] = json!({"auc": m.auc, "logloss": m.logloss, "rows": m.rows});
            reporter.info(format!(
                "step {step}/{}: loss {loss_value:.4}, val auc {}, val logloss {:.4}",
                config.max_steps,
                m.auc.map_or("null".into(), |a| format!("{a:.4}")),
                m.logloss
            ));
            if config.keep_best {
                improved = watch.observe(step, m.auc);
            }
            last_val = Some(m);
        }
        // Rank 0 alone scores val, so every rank learns its verdict at the same step.
        if early && eval_now && step < config.max_steps {
            let verdict = root && watch.exhausted();
            stopped_early = match group {
                Some(g) => match data_parallel::share_flag(g, verdict) {
                    Ok(verdict) => verdict,
                    Err(e) => {
                        failure = Some(format!("{e:#} (early-stopping verdict at step {step})"));
                        break;
                    }
                },
                None => verdict,
            };
            if stopped_early && let Some(b) = watch.best {
                reporter.info(format!(
                    "early stopping at step {step}: {} val evaluations without an AUC above {:.4} (step {})",
                    watch.since_best, b.val_auc, b.step
                ));
            }
        }
        // A stop request at the step where early stopping ends the run changes nothing.
        let stop = stop.filter(|_| !stopped_early);
        let scheduled = step % config.ckpt_every == 0
            || by_time
            || stop.is_some()
            || stopped_early
            || step == config.max_steps;
        if scheduled || improved {
            let mine = RankState {
                rank,
                epoch,
                position,
                rows,
            };
            let ranks = match group {
                // The other ranks are not in this checkpoint's round, but their places follow
                // from the step: the same epoch and position, their slice of the batch.
                Some(_) if !scheduled => (0..world as u64)
                    .map(|r| RankState {
                        rank: r as usize,
                        epoch,
                        position,
                        rows: [r * local_batch, (r + 1) * local_batch],
                    })
                    .collect(),
                Some(g) => match data_parallel::gather_ranks(g, &mine) {
                    Ok(ranks) => ranks,
                    Err(e) => {
                        failure = Some(format!("{e:#} (checkpoint at step {step})"));
                        break;
                    }
                },
                None => vec![mine],
            };
            if root {
                let state = CheckpointState {
                    format: checkpoint::FORMAT.into(),
                    manifest_hash: job.manifest_hash.clone(),
                    seed: job.seed,
                    step,
                    epoch,
                    position,
                    world_size: world as u64,
                    threads,
                    optimizer: OptimizerState {
                        kind: "adamw".into(),
                        step: optimizer.step,
                        beta1: optimizer.beta1,
                        beta2: optimizer.beta2,
                        eps: optimizer.eps,
                        weight_decay: optimizer.weight_decay,
                    },
                    schedule,
                    rng: RngState {
                        seed: job.seed,
                        streams: seeds::STREAMS.iter().map(|s| s.to_string()).collect(),
                    },
                    samples,
                    preprocess: preprocess.clone(),
                    tensors: TensorsRef {
                        file: String::new(),
                        bytes: 0,
                        blake3: String::new(),
                    },
                    ranks,
                    architecture: Some(model.arch.clone()),
                    best: watch.best,
                    evaluations_since_best: watch.since_best,
                };
                let moments = optimizer.named(&model);
                let mut named: Vec<(String, &Tensor)> = model
                    .named()
                    .into_iter()
                    .map(|(n, t)| (format!("model.{n}"), t))
                    .collect();
                named.extend(moments.iter().map(|(n, t)| (n.clone(), t)));
                let entry = line.get_or_insert_with(|| json!({"step": step}));
                let blocked = Instant::now();
                if job.ckpt_async {
                    if let Some(written) = writer.checkpoint(state, &named)? {
                        ckpt_times.push(written.seconds);
                    }
                } else {
                    let (_, seconds) = checkpoint::save_and_publish(
                        &ckpt_dir,
                        ckpt_store.as_ref(),
                        state,
                        &named,
                        config.keep_checkpoints,
                        checkpoint::Hashing::Beside,
                    )?;
                    ckpt_times.push(seconds);
                    entry["ckpt_s"] = json!(seconds);
                }
                let blocked = blocked.elapsed().as_secs_f64();
                ckpt_blocked.push(blocked);
                entry["ckpt_blocking_s"] = json!(blocked);
                last_ckpt = Instant::now();
                if let Some(d) = detector.as_mut() {
                    d.checkpointed();
                }
            }
        }
        let mut raised = Vec::new();
        if let Some(d) = detector.as_mut() {
            raised = d.step(step, loss_value, last_ckpt.elapsed().as_secs_f64());
            if let Some((samples, seconds, wait_s)) = closed_window {
                raised.extend(d.window(step, samples, seconds, wait_s));
            }
        }
        if let Some(file) = metrics_file.as_mut() {
            let lines = line
                .into_iter()
                .chain(raised.iter().map(|a| json!({"step": step, "alert": a})));
            for line in lines {
                writeln!(file, "{line}").with_context(|| metrics_path.display().to_string())?;
            }
            file.flush()
                .with_context(|| metrics_path.display().to_string())?;
        }
        for alert in raised {
            reporter.alert(alert.message.clone());
            notifier.notify(
                &alert,
                &format!("train {}: {}", job.out.display(), alert.message),
            );
            alerts.push(alert);
        }
        if let Some(signal) = stop {
            stopped_by = Some(format!(
                "stopped by {} after step {step} of {}, with a checkpoint of that step in {}: rerun the same \
                 command to resume there",
                runfn_core::stop::name(signal),
                config.max_steps,
                ckpt_dir.display()
            ));
            break;
        }
    }
    // Every way out of the loop (the end, a failed check, a stop request, a flagged stall) lets
    // the last checkpoint finish first: a preempted step's checkpoint is on disk before exit 3.
    if let Some(written) = writer.wait()? {
        ckpt_times.push(written.seconds);
    }
    watchdog.finish();
    drop(watchdog);
    drop(loader);
    // A short alert command finishes before the record goes out; a slow one runs on alone.
    for failure in notifier.finish(Duration::from_secs(5)) {
        reporter.warn(failure);
    }

    let loop_s = loop_start.elapsed().as_secs_f64();
    let steps_this_run = step - start_step;
    // Early stopping writes the best evaluation's weights, from its kept checkpoint.
    let weights_from = watch.best.filter(|b| early && b.step != step);
    let weights_step = weights_from.map_or(step, |b| b.step);
    let rate = |x: f64| if loop_s > 0.0 { x / loop_s } else { 0.0 };
    let preempted = failure.is_none() && stopped_by.is_some();
    let mut report = TrainReport {
        passed: failure.is_none() && !preempted,
        preempted,
        reason: failure.clone().or(stopped_by),
        weights: None,
        weights_blake3: None,
        steps: step,
        steps_this_run,
        seed: job.seed,
        device: format!("{:?}", job.device).to_lowercase(),
        threads,
        wall_s: started.elapsed().as_secs_f64(),
        samples_per_s: rate((steps_this_run * config.global_batch) as f64),
        data_wait_fraction: if loop_s > 0.0 {
            wait_total.as_secs_f64() / loop_s
        } else {
            0.0
        },
        step_time_s: if steps_this_run > 0 {
            compute_total.as_secs_f64() / steps_this_run as f64
        } else {
            0.0
        },
        ckpt_mean_s: mean(&ckpt_times),
        ckpt_async: job.ckpt_async,
        ckpt_blocking_s: mean(&ckpt_blocked),
        checkpoints_written: ckpt_times.len() as u64,
        resumed_from,
        metrics: metrics_path.display().to_string(),
        parameters: model.parameter_count(),
        features: json!({
            "numeric": preprocess.numeric.iter().map(|f| &f.name).collect::<Vec<_>>(),
            "categorical": preprocess.categorical.iter().map(|f| &f.name).collect::<Vec<_>>(),
            "missing_indicators": preprocess.indicator_names(),
        }),
        final_loss: last_loss,
        val: last_val,
        best: watch.best.map(|b| BestReport {
            step: b.step,
            val_auc: b.val_auc,
            checkpoint: checkpoint::json_path(&ckpt_dir, b.step)
                .display()
                .to_string(),
        }),
        early_stopping: (config.patience > 0).then(|| EarlyStoppingReport {
            patience: config.patience,
            stopped_at_step: stopped_early.then_some(step),
            best_step: watch.best.map(|b| b.step),
            best_val_auc: watch.best.map(|b| b.val_auc),
            evaluations_since_best: watch.since_best,
            weights_step,
            note: if val_set.is_none() {
                Some(
                    "no val split: nothing to stop on, so every step up to max_steps was trained \
                     and the last step's weights written"
                        .into(),
                )
            } else if watch.best.is_none() {
                Some(
                    "no val AUC (val holds one class, or no evaluation yet): the last step's \
                     weights were written"
                        .into(),
                )
            } else {
                None
            },
        }),
        shards_index_blake3: job.index_blake3.clone(),
        distributed: group.zip(sync.as_ref()).map(|(g, sync)| {
            let reduce_s = sync.time.as_secs_f64();
            DistributedReport {
                world_size: g.world,
                backend: g.backend.to_string(),
                buckets: sync.buckets(),
                bucket_bytes: sync.bucket_bytes,
                allreduce_s_per_step: reduce_s / steps_this_run.max(1) as f64,
                allreduce_fraction: if loop_s > 0.0 { reduce_s / loop_s } else { 0.0 },
                cpus: job.pinned_cpus.clone(),
            }
        }),
        alerts,
    };
    // Rank 0 writes the model; the others only trained.
    if !report.passed || !root {
        return Ok(report);
    }
    if let Some(b) = weights_from {
        let path = checkpoint::json_path(&ckpt_dir, b.step);
        let kept = checkpoint::load_file(&path).with_context(|| {
            format!(
                "reading the best checkpoint (step {}), whose weights early stopping writes",
                b.step
            )
        })?;
        model.load(&kept.tensors, "model.", &path.display().to_string())?;
        reporter.info(format!(
            "writing the weights of step {}, the best val AUC ({:.4})",
            b.step, b.val_auc
        ));
    }
    let weights_path = job.out.join(weights::FILE_NAME);
    let meta = ModelMeta {
        format: weights::FORMAT.into(),
        architecture: model.arch.clone(),
        preprocess,
        manifest_hash: job.manifest_hash.clone(),
        run_id: job.run_id.clone(),
        seed: job.seed,
        steps: weights_step,
        shards_index_blake3: Some(job.index_blake3.clone()),
    };
    report.weights_blake3 = Some(weights::save(&weights_path, &model, &meta)?);
    report.weights = Some(weights_path.display().to_string());
    report.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// The best val AUC (tracked with keep_best, which early stopping implies) and the evaluations
/// since it, as the checkpoint resumed from left them; none on a fresh run.
fn watch_of(config: &TrainConfig, state: Option<&CheckpointState>) -> ValWatch {
    ValWatch {
        best: state.and_then(|s| s.best).filter(|_| config.keep_best),
        since_best: state.map_or(0, |s| s.evaluations_since_best),
        patience: config.patience,
    }
}

/// Faults a test injects into the loop. A real run has none: only the `train-with-faults`
/// binary, built with the `fault-injection` feature that only the tests enable, fills them in
/// (from `RUNFN_TEST_*` variables); `train` never reads those variables.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The loop stops making progress for good at this step (the stall watchdog's tests).
    pub hang_at: Option<u64>,
    /// From this step on, every batch arrives this late, as from a throttled input (the
    /// throughput and input-bound alerts).
    pub slow_input: Option<(u64, Duration)>,
    /// This step trains on its batch's labels flipped (the loss-spike alert).
    pub flip_labels_at: Option<u64>,
    /// Every background checkpoint write starts this late, as on a slow disk (exits that must
    /// wait for it).
    pub slow_ckpt_write: Duration,
    /// The loop panics at this step (a crash must end in one line and exit 4).
    pub panic_at: Option<u64>,
}

/// A loop stuck for good, as in a read or a collective that never returns.
fn hang_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Of the `cores` a rank has, one is left to its input pipeline (decoding, batching, dropout
/// masks): on a small machine an intra-op thread competing with it costs more than it gains, and
/// libgomp's spinning workers make that contention worse.
pub fn default_threads(cores: usize) -> i32 {
    cores.saturating_sub(1).max(1) as i32
}

/// Floating-point sums are split across threads, so the thread count is part of what makes a
/// resumed run bit-identical: a resume uses the checkpoint's unless told otherwise.
fn choose_threads(
    loaded: Option<&checkpoint::Loaded>,
    asked: Option<i32>,
    cores: usize,
    reporter: &dyn Reporter,
) -> i32 {
    match (loaded, asked) {
        (Some(l), Some(n)) if n != l.state.threads => {
            reporter.warn(format!(
                "--threads {n} differs from the checkpoint's {}: the result will not be bit-identical to an uninterrupted run",
                l.state.threads
            ));
            n
        }
        (_, Some(n)) => n,
        (Some(l), None) => l.state.threads,
        (None, None) => default_threads(cores),
    }
}

/// Non-blocking copy to the device (from pinned memory on CUDA); a no-op on CPU.
fn to_device(t: &Tensor, device: Device) -> Tensor {
    if device == Device::Cpu {
        t.shallow_clone()
    } else {
        t.to_device_(device, t.kind(), true, false)
    }
}

/// Opens the metrics stream for appending. On resume the lines after the checkpoint's step are
/// dropped first (they were written by the run that was interrupted and will be written again),
/// atomically; a fresh run starts an empty stream.
fn open_metrics(path: &Path, resumed_step: u64) -> Result<File> {
    let mut kept = String::new();
    if resumed_step > 0
        && let Ok(file) = File::open(path)
    {
        for line in BufReader::new(file).lines() {
            let line = line.with_context(|| path.display().to_string())?;
            let step = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v.get("step").and_then(Value::as_u64));
            match step {
                Some(s) if s <= resumed_step => {
                    kept.push_str(&line);
                    kept.push('\n');
                }
                _ => break,
            }
        }
    }
    write_bytes_atomic(path, kept.as_bytes())?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| path.display().to_string())
}

/// Averages over the steps since the last metrics line.
#[derive(Default)]
struct Window {
    steps: u64,
    loss: f64,
    wait: Duration,
    compute: Duration,
    allreduce: Duration,
    samples: u64,
}

impl Window {
    fn add(
        &mut self,
        loss: f64,
        wait: Duration,
        compute: Duration,
        allreduce: Duration,
        samples: u64,
    ) {
        self.steps += 1;
        self.loss += loss;
        self.wait += wait;
        self.compute += compute;
        self.allreduce += allreduce;
        self.samples += samples;
    }

    fn line(&self, step: u64, epoch: u64, lr: f64, grad_norm: f64) -> Value {
        let total = (self.wait + self.compute).as_secs_f64();
        let n = self.steps.max(1) as f64;
        let mut line = json!({
            "step": step,
            "epoch": epoch,
            "loss": self.loss / n,
            "lr": lr,
            "grad_norm": grad_norm,
            "step_time_s": total / n,
            "data_wait_fraction": if total > 0.0 { self.wait.as_secs_f64() / total } else { 0.0 },
            "samples_per_s": if total > 0.0 { self.samples as f64 / total } else { 0.0 },
        });
        if !self.allreduce.is_zero() && total > 0.0 {
            line["allreduce_fraction"] = json!(self.allreduce.as_secs_f64() / total);
        }
        line
    }
}
