//! The loop itself: one struct holding what a run carries from step to step, and a method for
//! each thing a step does (train on a batch, score val, decide early stopping, checkpoint, write
//! the metrics line and alerts), so each is read, and changed, on its own.

use crate::torch_failure::torch;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tch::{Device, Kind, Reduction, Tensor};

use super::job::{
    BestReport, DistributedReport, Reporter, ResumedFrom, StallHandler, TrainFeatures, TrainJob,
    TrainReport,
};
use super::metrics_file::open_metrics;
use super::resume::{Resumed, watch_of};
use super::splits::Splits;
use super::window::{Closed, Window};
use crate::adamw::AdamW;
use crate::alerts::{Alert, Detector, Notifier};
use crate::async_checkpoint;
use crate::checkpoint::{self, CheckpointState, OptimizerState, RankState, RngState, TensorsRef};
use crate::data_parallel::{self, GradientSync};
use crate::early_stopping::{EarlyStoppingReport, ValWatch};
use crate::features::Preprocess;
use crate::loader::{Batch, Loader, LoaderOptions, ShardSet};
use crate::metrics::{self, Metrics};
use crate::model::{Architecture, Mlp};
use crate::schedule::Schedule;
use crate::score;
use crate::seeds;
use crate::shard_pieces;
use crate::watchdog::Watchdog;
use crate::weights::{self, ModelMeta};

/// Whether the loop goes on after a step.
enum Flow {
    Continue,
    /// A failed check (non-finite loss, a lost peer, a stall) or a stop request ended it; the
    /// reason is in `failure` or `stopped_by`.
    Stop,
}

/// What a trained step hands on to the rest of the step.
struct Trained {
    batch_epoch: u64,
    batch_position: u64,
    loss: f64,
    lr: f64,
    grad_norm: f64,
    /// Rank 0's clock asked for a checkpoint (agreed by every rank).
    by_time: bool,
    /// A stop request (SIGTERM), agreed by every rank.
    stop: Option<i32>,
    waited: Duration,
    computed: Duration,
    reduced: Duration,
    /// Seconds the update waited for a background checkpoint's copy of the state.
    copy_wait: Option<f64>,
}

pub(crate) struct TrainingLoop<'a> {
    job: &'a TrainJob,
    reporter: &'a dyn Reporter,
    splits: Splits,
    val: Option<ShardSet>,
    preprocess: Preprocess,
    threads: i32,
    model: Mlp,
    optimizer: AdamW,
    sync: Option<GradientSync>,
    schedule: Schedule,
    /// Taken when the loop ends: the input pipeline's threads stop before the weights are written.
    loader: Option<Loader>,
    writer: async_checkpoint::Writer,
    /// Taken when the loop ends, so a slow end (the weights' write) is not flagged as a stall.
    watchdog: Option<Watchdog>,
    detector: Option<Detector>,
    /// Taken when the loop ends, to wait a moment for the alert commands still running.
    notifier: Option<Notifier>,
    metrics_path: PathBuf,
    metrics_file: Option<File>,
    ckpt_dir: PathBuf,
    ckpt_store: Option<runfn_storage::Remote>,
    // Where the run is.
    step: u64,
    start_step: u64,
    epoch: u64,
    position: u64,
    samples: u64,
    watch: ValWatch,
    stopped_early: bool,
    resumed_from: Option<ResumedFrom>,
    // What it measured.
    loop_start: Instant,
    wait_total: Duration,
    compute_total: Duration,
    window: Window,
    ckpt_times: Vec<f64>,
    ckpt_blocked: Vec<f64>,
    last_ckpt: Instant,
    last_loss: Option<f64>,
    last_val: Option<Metrics>,
    alerts: Vec<Alert>,
    // How it ended, when it ended early.
    failure: Option<String>,
    stopped_by: Option<String>,
}

impl<'a> TrainingLoop<'a> {
    /// The model (drawn fresh on rank 0, or loaded from the checkpoint, then shared), the
    /// optimizer, the input pipeline, the checkpoint writer and the stall watchdog.
    pub fn start(
        job: &'a TrainJob,
        reporter: &'a dyn Reporter,
        splits: Splits,
        resumed: Resumed,
        on_stall: StallHandler,
    ) -> Result<TrainingLoop<'a>> {
        let config = &job.config;
        let Resumed {
            start,
            loaded,
            load_started,
        } = resumed;
        // Floating-point sums are split across threads, so every rank uses rank 0's choice.
        tch::set_num_threads(start.threads);
        let preprocess = start.preprocess;
        let arch = Architecture {
            numeric: preprocess.numeric_inputs() as i64,
            cardinalities: preprocess.cardinalities(),
            embedding_dim: config.embedding_dim,
            hidden: config.hidden.clone(),
            dropout: config.dropout,
        };
        // Only a fresh rank 0 draws initial weights; the others receive them.
        let mut model = if splits.root && loaded.is_none() {
            Mlp::new(arch, job.seed, job.device)
        } else {
            Mlp::zeroed(arch, job.device)
        };
        if job.bf16 {
            model.compute = Kind::BFloat16;
        }
        let mut optimizer = AdamW::new(&model, config.weight_decay);
        optimizer.step = start.optimizer_step;
        let watch = watch_of(config, loaded.as_ref().map(|l| &l.state));
        let mut resumed_from = None;
        if let Some(l) = &loaded {
            let origin = l.path.display().to_string();
            model.load(&l.tensors, "model.", &origin)?;
            optimizer.load(&model, &l.tensors, l.state.optimizer.step, &origin)?;
            // Reading, verifying and decoding the checkpoint, and copying it into the model and
            // optimizer: what a restart pays before its first step.
            resumed_from = Some(ResumedFrom {
                checkpoint: origin.clone(),
                step: start.step,
                load_s: load_started.elapsed().as_secs_f64(),
            });
            reporter.info(format!("resuming from {origin} at step {}", start.step));
        }
        drop(loaded);
        if let Some(g) = job.group.as_ref() {
            data_parallel::share_parameters(g, &model, &optimizer)?;
        }
        if start.step > config.max_steps {
            anyhow::bail!(
                "the checkpoint is at step {}, beyond manifest.config.max_steps = {}; rerun with --fresh",
                start.step,
                config.max_steps
            );
        }
        let sync = job
            .group
            .as_ref()
            .map(|_| GradientSync::new(model.flat.numel() as i64, job.bucket_bytes));
        let metrics_path = job.out.join("metrics.jsonl");
        let metrics_file = match splits.root {
            true => Some(open_metrics(&metrics_path, start.step)?),
            false => None,
        };
        let loader = Loader::start(
            splits.train.clone(),
            Arc::new(preprocess.clone()),
            LoaderOptions {
                batch: config.global_batch as usize,
                piece_rows: job
                    .faults
                    .piece_rows
                    .unwrap_or_else(|| shard_pieces::piece_rows(config.global_batch as usize)),
                seed: job.seed,
                start_epoch: start.epoch,
                start_position: start.position,
                rank: splits.rank,
                world: splits.world,
                prefetch: job.loader_prefetch,
                lookahead: job.loader_lookahead,
                pin_for: matches!(job.device, Device::Cuda(_)).then_some(job.device),
                cache_bytes: job.loader_cache_bytes,
                dropout: config.dropout,
                dropout_widths: config.hidden.clone(),
            },
        )?;
        let ckpt_dir = job.out.join("checkpoints");
        let ckpt_store = job.store.as_ref().map(|s| s.join("checkpoints"));
        let writer = async_checkpoint::Writer::new(&ckpt_dir, config.keep_checkpoints)
            .with_delay(job.faults.slow_ckpt_write)
            .with_store(ckpt_store.clone());
        // A loop stuck for good is ended from the watchdog's thread: a checkpoint being written
        // then is finished first (a write stuck on a dead disk gets a minute), so it is whole.
        let idle = writer.idle();
        let on_stall: StallHandler = Box::new(move |reason| {
            idle.wait(Duration::from_secs(60));
            on_stall(reason)
        });
        let watchdog = Watchdog::start(Duration::from_secs_f64(config.stall_timeout_s), on_stall);
        let detector = splits.root.then(|| {
            let age = config
                .alerts
                .checkpoint_age_s
                .or(job.ckpt_every_s.map(|s| 2.0 * s));
            Detector::new(config.alerts.clone(), age)
        });
        let val = splits.val.clone();
        Ok(TrainingLoop {
            job,
            reporter,
            splits,
            val,
            preprocess,
            threads: start.threads,
            model,
            optimizer,
            sync,
            schedule: config.schedule(),
            loader: Some(loader),
            writer,
            watchdog: Some(watchdog),
            detector,
            notifier: Some(Notifier::from_env()),
            metrics_path,
            metrics_file,
            ckpt_dir,
            ckpt_store,
            step: start.step,
            start_step: start.step,
            epoch: start.epoch,
            position: start.position,
            samples: start.samples,
            watch,
            stopped_early: start.stopped,
            resumed_from,
            loop_start: Instant::now(),
            wait_total: Duration::ZERO,
            compute_total: Duration::ZERO,
            window: Window::default(),
            ckpt_times: Vec::new(),
            ckpt_blocked: Vec::new(),
            last_ckpt: Instant::now(),
            last_loss: None,
            last_val: None,
            alerts: Vec::new(),
            failure: None,
            stopped_by: None,
        })
    }

    /// Steps until max_steps, early stopping, a failed check or a stop request; then lets the
    /// last checkpoint finish: a preempted step's checkpoint is on disk before exit 3.
    pub fn run(&mut self) -> Result<()> {
        self.loop_start = Instant::now();
        while self.step < self.job.config.max_steps && !self.stopped_early {
            if let Flow::Stop = self.step_once()? {
                break;
            }
        }
        if let Some(written) = self.writer.wait()? {
            self.ckpt_times.push(written.seconds);
        }
        if let Some(watchdog) = self.watchdog.take() {
            watchdog.finish();
        }
        self.loader = None;
        // A short alert command finishes before the record goes out; a slow one runs on alone.
        if let Some(notifier) = self.notifier.take() {
            for failure in notifier.finish(Duration::from_secs(5)) {
                self.reporter.warn(failure);
            }
        }
        Ok(())
    }

    /// One step: train on a batch, then the bookkeeping, val, early stopping, the checkpoint,
    /// the metrics line and alerts, and a stop request.
    fn step_once(&mut self) -> Result<Flow> {
        let job = self.job;
        // A failed background write ends the run at the next step rather than the next checkpoint.
        if let Some(written) = self.writer.poll()? {
            self.ckpt_times.push(written.seconds);
        }
        if let Some(reason) = self.watchdog.as_ref().and_then(Watchdog::poll) {
            return Ok(self.fail(reason));
        }
        let trained = match self.train_batch()? {
            Ok(trained) => trained,
            Err(reason) => return Ok(self.fail(reason)),
        };
        let config = &job.config;
        self.step += 1;
        self.samples += config.global_batch;
        self.epoch = trained.batch_epoch;
        self.position = trained.batch_position + 1;
        if self.position == self.loader()?.batches_per_epoch {
            self.epoch += 1;
            self.position = 0;
        }
        let step = self.step;
        if let Some(watchdog) = &self.watchdog {
            watchdog.stepped(step);
        }
        // Stopping at the last step changes nothing: the run is complete.
        let stop = trained.stop.filter(|_| step < config.max_steps);
        self.wait_total += trained.waited;
        self.compute_total += trained.computed;
        self.window.add(
            trained.loss,
            trained.waited,
            trained.computed,
            trained.reduced,
            config.global_batch,
        );
        self.last_loss = Some(trained.loss);

        let (mut line, mut closed) = (None, None);
        if step.is_multiple_of(config.log_every) || step == config.max_steps {
            let (text, window) = self
                .window
                .close(step, self.epoch, trained.lr, trained.grad_norm);
            (line, closed) = (Some(text), Some(window));
        }
        // On the step's line when it has one (every line is a logged step, with its loss).
        if let (Some(wait), Some(line)) = (trained.copy_wait, line.as_mut()) {
            line["ckpt_copy_wait_s"] = json!(wait);
        }
        let eval_now = self.val.is_some()
            && (step.is_multiple_of(config.eval_every) || step == config.max_steps);
        // Only rank 0 scores val, so only it checkpoints a new best between scheduled steps.
        let improved = match self.splits.root && eval_now {
            true => self.score_val(&mut line, trained.loss)?,
            false => false,
        };
        if self.splits.early
            && eval_now
            && step < config.max_steps
            && let Flow::Stop = self.early_stopping_verdict()?
        {
            return Ok(Flow::Stop);
        }
        // A stop request at the step where early stopping ends the run changes nothing.
        let stop = stop.filter(|_| !self.stopped_early);
        let scheduled = step.is_multiple_of(config.ckpt_every)
            || trained.by_time
            || stop.is_some()
            || self.stopped_early
            || step == config.max_steps;
        if (scheduled || improved)
            && let Flow::Stop = self.checkpoint(scheduled, &mut line)?
        {
            return Ok(Flow::Stop);
        }
        self.log(line, closed)?;
        if let Some(signal) = stop {
            self.stopped_by = Some(format!(
                "stopped by {} after step {step} of {}, with a checkpoint of that step in {}: rerun the same \
                 command to resume there",
                runfn_core::stop::name(signal),
                config.max_steps,
                self.ckpt_dir.display()
            ));
            return Ok(Flow::Stop);
        }
        Ok(Flow::Continue)
    }

    fn loader(&mut self) -> Result<&mut Loader> {
        self.loader
            .as_mut()
            .context("the input pipeline was stopped before the loop ended")
    }

    fn fail(&mut self, reason: String) -> Flow {
        self.failure = Some(reason);
        Flow::Stop
    }

    /// Forward, backward, the gradient all-reduce with the checkpoint and stop wishes, the
    /// finite-loss and finite-gradient checks, and the optimizer step. `Ok(Err(reason))` is a
    /// failed check; `Err` an error of libtorch or the input.
    fn train_batch(&mut self) -> Result<std::result::Result<Trained, String>> {
        let job = self.job;
        let (hooks, step) = (&job.faults, self.step);
        if hooks.hang_at == Some(step) {
            super::hang_forever();
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
        let batch = self.loader()?.next_batch()?;
        let waited = t_wait.elapsed();
        let t_compute = Instant::now();
        let (mut loss, lr, mut grad) = self.forward_backward(&batch)?;
        // Only rank 0 looks at the clock; the wish travels with the gradients so that every
        // rank checkpoints (and gathers its state) at the same step.
        let mut by_time = self.splits.root
            && job
                .ckpt_every_s
                .is_some_and(|s| self.last_ckpt.elapsed().as_secs_f64() >= s);
        // A stop request (SIGTERM) also travels with the gradients: whichever rank got it, every
        // rank finishes this step, checkpoints it and stops, so they agree on the step.
        let mut stop = runfn_core::stop::requested();
        let mut reduced = Duration::ZERO;
        if let (Some(g), Some(sync)) = (job.group.as_ref(), self.sync.as_mut()) {
            let before = sync.time;
            let synced = sync.step(g, &mut grad, loss, by_time, stop.is_some());
            reduced = sync.time - before;
            match synced {
                Ok(synced) => {
                    loss = synced.loss;
                    by_time = synced.checkpoint_now;
                    if synced.stop_now {
                        stop = stop.or(Some(libc::SIGTERM));
                    }
                }
                Err(e) => return Ok(Err(format!("{e:#} (at step {})", step + 1))),
            }
        }
        // After the all-reduce every rank sees the same loss and gradient, so all stop together.
        if !loss.is_finite() {
            return Ok(Err(format!(
                "the loss became {loss} at step {} (lr {lr:.3e}); stopped without writing weights. \
                 Lower manifest.config.lr or check the features for extreme values",
                step + 1
            )));
        }
        let grad_norm = self
            .optimizer
            .clip_grad_norm(&mut grad, job.config.grad_clip);
        if !grad_norm.is_finite() {
            return Ok(Err(format!(
                "the gradient norm became {grad_norm} at step {} (lr {lr:.3e}); stopped without writing weights",
                step + 1
            )));
        }
        // A background checkpoint may still be copying the weights and moments the update
        // changes; what this waits is part of what that checkpoint held the loop up.
        let held = Instant::now();
        let copy_wait = self
            .writer
            .wait_copied()
            .then(|| held.elapsed().as_secs_f64());
        if let (Some(wait), Some(blocked)) = (copy_wait, self.ckpt_blocked.last_mut()) {
            *blocked += wait;
        }
        self.optimizer.step(&mut self.model, &grad, lr);
        Ok(Ok(Trained {
            batch_epoch: batch.epoch,
            batch_position: batch.position,
            loss,
            lr,
            grad_norm,
            by_time,
            stop,
            waited,
            computed: t_compute.elapsed(),
            reduced,
            copy_wait,
        }))
    }

    /// The batch's loss and this rank's flat gradient, through libtorch's fallible calls: an
    /// error there (a device out of memory, a shape the model does not take) is an error with
    /// libtorch's message, not an abort.
    fn forward_backward(&mut self, batch: &Batch) -> Result<(f64, f64, Tensor)> {
        let device = self.job.device;
        let numeric = to_device(&batch.numeric, device)?;
        let categorical = to_device(&batch.categorical, device)?;
        let mut labels = to_device(&batch.labels, device)?;
        if self.job.faults.flip_labels_at == Some(self.step + 1) {
            labels = labels
                .f_ones_like()
                .map_err(torch)?
                .f_sub(&labels)
                .map_err(torch)?;
        }
        let masks = batch
            .dropout
            .iter()
            .map(|m| to_device(m, device))
            .collect::<Result<Vec<Tensor>>>()?;
        let logits = self.model.forward(&numeric, &categorical, Some(&masks));
        let loss = logits
            .f_binary_cross_entropy_with_logits::<Tensor>(&labels, None, None, Reduction::Mean)
            .map_err(torch)?;
        self.model.zero_grad();
        loss.f_backward().map_err(torch)?;
        let loss_value = loss.f_double_value(&[]).map_err(torch)?;
        let lr = self.schedule.lr_at(self.step);
        Ok((loss_value, lr, self.model.flat_grad()))
    }

    /// Scores val (rank 0), adds it to the step's line and tracks the best AUC; whether it is a
    /// new best that keep_best checkpoints.
    fn score_val(&mut self, line: &mut Option<Value>, loss: f64) -> Result<bool> {
        let Some(val) = &self.val else {
            return Ok(false);
        };
        let job = self.job;
        let (step, config) = (self.step, &job.config);
        let scored = score::score(
            &self.model,
            &self.preprocess,
            &val.paths,
            &[],
            self.job.device,
        )?;
        let m = metrics::compute(&scored.scores, &scored.labels);
        let entry = line.get_or_insert_with(|| json!({"step": step}));
        entry["val"] = json!({"auc": m.auc, "logloss": m.logloss, "rows": m.rows});
        self.reporter.info(format!(
            "step {step}/{}: loss {loss:.4}, val auc {}, val logloss {:.4}",
            config.max_steps,
            m.auc.map_or("null".into(), |a| format!("{a:.4}")),
            m.logloss
        ));
        let improved = config.keep_best && self.watch.observe(step, m.auc);
        self.last_val = Some(m);
        Ok(improved)
    }

    /// Rank 0 alone scores val, so every rank learns its verdict at the same step.
    fn early_stopping_verdict(&mut self) -> Result<Flow> {
        let job = self.job;
        let verdict = self.splits.root && self.watch.exhausted();
        self.stopped_early = match job.group.as_ref() {
            Some(g) => match data_parallel::share_flag(g, verdict) {
                Ok(verdict) => verdict,
                Err(e) => {
                    let step = self.step;
                    return Ok(self.fail(format!("{e:#} (early-stopping verdict at step {step})")));
                }
            },
            None => verdict,
        };
        if self.stopped_early
            && let Some(b) = self.watch.best
        {
            self.reporter.info(format!(
                "early stopping at step {}: {} val evaluations without an AUC above {:.4} (step {})",
                self.step, self.watch.since_best, b.val_auc, b.step
            ));
        }
        Ok(Flow::Continue)
    }

    /// Every rank's place (gathered when `scheduled`; a best between scheduled steps is rank
    /// 0's alone, the others' places follow from the step), and rank 0 writes the checkpoint.
    fn checkpoint(&mut self, scheduled: bool, line: &mut Option<Value>) -> Result<Flow> {
        let job = self.job;
        let (step, epoch, position) = (self.step, self.epoch, self.position);
        let (world, global_batch) = (self.splits.world, job.config.global_batch);
        let rows = |rank: usize| {
            let local = global_batch / world as u64;
            [rank as u64 * local, (rank as u64 + 1) * local]
        };
        let place = |rank: usize| RankState {
            rank,
            epoch,
            position,
            rows: rows(rank),
        };
        let ranks = match job.group.as_ref() {
            Some(_) if !scheduled => (0..world).map(place).collect(),
            Some(g) => match data_parallel::gather_ranks(g, &place(self.splits.rank)) {
                Ok(ranks) => ranks,
                Err(e) => return Ok(self.fail(format!("{e:#} (checkpoint at step {step})"))),
            },
            None => vec![place(0)],
        };
        if !self.splits.root {
            return Ok(Flow::Continue);
        }
        let state = self.checkpoint_state(ranks);
        let moments = self.optimizer.named(&self.model);
        let mut named: Vec<(String, &Tensor)> = self
            .model
            .named()
            .into_iter()
            .map(|(n, t)| (format!("model.{n}"), t))
            .collect();
        named.extend(moments.iter().map(|(n, t)| (n.clone(), t)));
        let entry = line.get_or_insert_with(|| json!({"step": step}));
        let blocked = Instant::now();
        if self.job.ckpt_async {
            if let Some(written) = self.writer.checkpoint(state, &named)? {
                self.ckpt_times.push(written.seconds);
            }
        } else {
            let (_, seconds) = checkpoint::save_and_publish(
                &self.ckpt_dir,
                self.ckpt_store.as_ref(),
                state,
                checkpoint::Tensors::Live(&named, checkpoint::Hashing::Beside),
                self.job.config.keep_checkpoints,
            )?;
            self.ckpt_times.push(seconds);
            entry["ckpt_s"] = json!(seconds);
        }
        let blocked = blocked.elapsed().as_secs_f64();
        self.ckpt_blocked.push(blocked);
        entry["ckpt_blocking_s"] = json!(blocked);
        self.last_ckpt = Instant::now();
        if let Some(d) = self.detector.as_mut() {
            d.checkpointed();
        }
        Ok(Flow::Continue)
    }

    /// What a checkpoint of this step records besides its tensors.
    fn checkpoint_state(&self, ranks: Vec<RankState>) -> CheckpointState {
        let job = self.job;
        CheckpointState {
            format: checkpoint::FORMAT.into(),
            manifest_hash: job.manifest_hash.clone(),
            seed: job.seed,
            step: self.step,
            epoch: self.epoch,
            position: self.position,
            world_size: self.splits.world as u64,
            threads: self.threads,
            optimizer: OptimizerState {
                kind: "adamw".into(),
                step: self.optimizer.step,
                beta1: self.optimizer.beta1,
                beta2: self.optimizer.beta2,
                eps: self.optimizer.eps,
                weight_decay: self.optimizer.weight_decay,
            },
            schedule: self.schedule,
            rng: RngState {
                seed: job.seed,
                streams: seeds::STREAMS.iter().map(|s| s.to_string()).collect(),
            },
            samples: self.samples,
            preprocess: self.preprocess.clone(),
            tensors: TensorsRef {
                file: String::new(),
                bytes: 0,
                blake3: String::new(),
            },
            ranks,
            architecture: Some(self.model.arch.clone()),
            best: self.watch.best,
            evaluations_since_best: self.watch.since_best,
        }
    }

    /// The step's metrics line and the alerts it raised, to metrics.jsonl (rank 0), stderr and
    /// the alert command.
    fn log(&mut self, line: Option<Value>, closed: Option<Closed>) -> Result<()> {
        let step = self.step;
        let mut raised = Vec::new();
        if let Some(d) = self.detector.as_mut() {
            let since_checkpoint = self.last_ckpt.elapsed().as_secs_f64();
            raised = d.step(step, self.last_loss.unwrap_or(f64::NAN), since_checkpoint);
            if let Some((samples, seconds, wait_s)) = closed {
                raised.extend(d.window(step, samples, seconds, wait_s));
            }
        }
        if let Some(file) = self.metrics_file.as_mut() {
            let at = || self.metrics_path.display().to_string();
            let lines = line
                .into_iter()
                .chain(raised.iter().map(|a| json!({"step": step, "alert": a})));
            for line in lines {
                writeln!(file, "{line}").with_context(at)?;
            }
            file.flush().with_context(at)?;
        }
        for alert in raised {
            self.reporter.alert(alert.message.clone());
            if let Some(notifier) = self.notifier.as_mut() {
                notifier.notify(
                    &alert,
                    &format!("train {}: {}", self.job.out.display(), alert.message),
                );
            }
            self.alerts.push(alert);
        }
        Ok(())
    }

    /// The `train` section, and on rank 0 of a run that passed the model file: the best val
    /// AUC's weights under early stopping (from its kept checkpoint), else the last step's.
    pub fn finish(mut self, started: Instant) -> Result<TrainReport> {
        let early = self.splits.early;
        let weights_from = self.watch.best.filter(|b| early && b.step != self.step);
        let weights_step = weights_from.map_or(self.step, |b| b.step);
        let mut report = self.report(started, weights_step);
        // Rank 0 writes the model; the others only trained.
        if !report.passed || !self.splits.root {
            return Ok(report);
        }
        if let Some(b) = weights_from {
            let path = checkpoint::json_path(&self.ckpt_dir, b.step);
            let kept = checkpoint::load_file(&path).with_context(|| {
                format!(
                    "reading the best checkpoint (step {}), whose weights early stopping writes",
                    b.step
                )
            })?;
            self.model
                .load(&kept.tensors, "model.", &path.display().to_string())?;
            self.reporter.info(format!(
                "writing the weights of step {}, the best val AUC ({:.4})",
                b.step, b.val_auc
            ));
        }
        let job = self.job;
        let weights_path = job.out.join(weights::FILE_NAME);
        let meta = ModelMeta {
            format: weights::FORMAT.into(),
            architecture: self.model.arch.clone(),
            preprocess: self.preprocess.clone(),
            manifest_hash: job.manifest_hash.clone(),
            run_id: job.run_id.clone(),
            seed: job.seed,
            steps: weights_step,
            shards_index_blake3: Some(job.index_blake3.clone()),
        };
        report.weights_blake3 = Some(weights::save(&weights_path, &self.model, &meta)?);
        report.weights = Some(weights_path.display().to_string());
        report.wall_s = started.elapsed().as_secs_f64();
        Ok(report)
    }

    fn report(&mut self, started: Instant, weights_step: u64) -> TrainReport {
        let job = self.job;
        let config = &job.config;
        let loop_s = self.loop_start.elapsed().as_secs_f64();
        let steps_this_run = self.step - self.start_step;
        let share = |x: f64| if loop_s > 0.0 { x / loop_s } else { 0.0 };
        let preempted = self.failure.is_none() && self.stopped_by.is_some();
        let preprocess = &self.preprocess;
        TrainReport {
            passed: self.failure.is_none() && !preempted,
            preempted,
            reason: self.failure.clone().or(self.stopped_by.clone()),
            weights: None,
            weights_blake3: None,
            steps: self.step,
            steps_this_run,
            seed: job.seed,
            device: format!("{:?}", job.device).to_lowercase(),
            threads: self.threads,
            wall_s: started.elapsed().as_secs_f64(),
            samples_per_s: share((steps_this_run * config.global_batch) as f64),
            data_wait_fraction: share(self.wait_total.as_secs_f64()),
            step_time_s: if steps_this_run > 0 {
                self.compute_total.as_secs_f64() / steps_this_run as f64
            } else {
                0.0
            },
            ckpt_mean_s: mean(&self.ckpt_times),
            ckpt_async: job.ckpt_async,
            ckpt_blocking_s: mean(&self.ckpt_blocked),
            checkpoints_written: self.ckpt_times.len() as u64,
            resumed_from: self.resumed_from.take(),
            metrics: self.metrics_path.display().to_string(),
            parameters: self.model.parameter_count(),
            features: TrainFeatures {
                numeric: preprocess.numeric.iter().map(|f| f.name.clone()).collect(),
                categorical: preprocess
                    .categorical
                    .iter()
                    .map(|f| f.name.clone())
                    .collect(),
                missing_indicators: preprocess
                    .indicator_names()
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
            },
            final_loss: self.last_loss,
            val: self.last_val.take(),
            best: self.watch.best.map(|b| BestReport {
                step: b.step,
                val_auc: b.val_auc,
                checkpoint: checkpoint::json_path(&self.ckpt_dir, b.step)
                    .display()
                    .to_string(),
            }),
            early_stopping: (config.patience > 0).then(|| self.early_stopping(weights_step)),
            shards_index_blake3: job.index_blake3.clone(),
            distributed: job.group.as_ref().zip(self.sync.as_ref()).map(|(g, sync)| {
                let reduce_s = sync.time.as_secs_f64();
                DistributedReport {
                    world_size: g.world,
                    backend: g.backend.to_string(),
                    buckets: sync.buckets(),
                    bucket_bytes: sync.bucket_bytes,
                    allreduce_s_per_step: reduce_s / steps_this_run.max(1) as f64,
                    allreduce_fraction: share(reduce_s),
                    cpus: job.pinned_cpus.clone(),
                }
            }),
            alerts: std::mem::take(&mut self.alerts),
        }
    }

    fn early_stopping(&self, weights_step: u64) -> EarlyStoppingReport {
        EarlyStoppingReport {
            patience: self.job.config.patience,
            stopped_at_step: self.stopped_early.then_some(self.step),
            best_step: self.watch.best.map(|b| b.step),
            best_val_auc: self.watch.best.map(|b| b.val_auc),
            evaluations_since_best: self.watch.since_best,
            weights_step,
            note: if self.val.is_none() {
                Some(
                    "no val split: nothing to stop on, so every step up to max_steps was trained \
                     and the last step's weights written"
                        .into(),
                )
            } else if self.watch.best.is_none() {
                Some(
                    "no val AUC (val holds one class, or no evaluation yet): the last step's \
                     weights were written"
                        .into(),
                )
            } else {
                None
            },
        }
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Non-blocking copy to the device (from pinned memory on CUDA); a no-op on CPU.
fn to_device(t: &Tensor, device: Device) -> Result<Tensor> {
    Ok(if device == Device::Cpu {
        t.shallow_clone()
    } else {
        t.f_to_device_(device, t.kind(), true, false)
            .map_err(torch)?
    })
}
