//! Where a run starts: the newest valid checkpoint of this manifest and seed (rank 0 reads it and
//! the others receive its start), or step 0 with a preprocessing fitted on the train split.

use std::time::Instant;

use super::job::{Reporter, TrainJob, default_threads};
use super::splits::Splits;
use crate::checkpoint::{self, CheckpointState, Loaded};
use crate::config::TrainConfig;
use crate::data_parallel::{self, Start};
use crate::early_stopping::ValWatch;
use crate::features::{self, Preprocess};
use anyhow::{Context, Result};

/// The start every rank agrees on, and on rank 0 the checkpoint it came from.
pub(crate) struct Resumed {
    pub start: Start,
    pub loaded: Option<Loaded>,
    /// When reading the checkpoint began: a restart's cost runs until the model holds it.
    pub load_started: Instant,
}

/// Rank 0 fetches, clears (`--fresh`) or loads the checkpoints and decides the start; every
/// other rank receives it.
pub(crate) fn resume(job: &TrainJob, splits: &Splits, reporter: &dyn Reporter) -> Result<Resumed> {
    let load_started = Instant::now();
    let (loaded, start) = if splits.root {
        let loaded = load_or_clear(job, reporter)?;
        warn_about(job, splits, loaded.as_ref(), reporter);
        let start = start_of(job, splits, loaded.as_ref(), reporter)?;
        (loaded, Some(start))
    } else {
        (None, None)
    };
    let start = match job.group.as_ref() {
        Some(g) => data_parallel::share_start(g, start)?,
        None => start.expect("rank 0 decides the start"),
    };
    Ok(Resumed {
        start,
        loaded,
        load_started,
    })
}

/// The newest valid checkpoint (fetched from the store first), or none: `--fresh` clears them.
fn load_or_clear(job: &TrainJob, reporter: &dyn Reporter) -> Result<Option<Loaded>> {
    let ckpt_dir = job.out.join("checkpoints");
    let ckpt_store = job.store.as_ref().map(|s| s.join("checkpoints"));
    checkpoint::ensure_writable(&ckpt_dir)?;
    if let Some(store) = &ckpt_store
        && !job.fresh
    {
        checkpoint::fetch(store, &ckpt_dir)
            .with_context(|| format!("fetching the checkpoints in {}", store.url()))?;
    }
    if job.fresh {
        checkpoint::clear(&ckpt_dir)?;
        if let Some(store) = &ckpt_store {
            checkpoint::publish(&ckpt_dir, store)
                .with_context(|| format!("removing the checkpoints in {}", store.url()))?;
        }
        return Ok(None);
    }
    let mut warnings = Vec::new();
    let loaded = checkpoint::load_latest(&ckpt_dir, &job.manifest_hash, job.seed, &mut warnings)?;
    for w in warnings {
        reporter.warn(w);
    }
    Ok(loaded)
}

/// What the user should know before the run starts: nothing to stop on, another world size.
fn warn_about(job: &TrainJob, splits: &Splits, loaded: Option<&Loaded>, reporter: &dyn Reporter) {
    let config = &job.config;
    if config.patience > 0 && splits.val.is_none() {
        reporter.warn(format!(
            "no val split: early stopping (patience {}) has nothing to watch, so all max_steps = {} \
             steps are trained and the last step's weights written",
            config.patience, config.max_steps
        ));
    }
    if let Some(l) = loaded
        && l.state.world_size != splits.world as u64
    {
        reporter.warn(format!(
            "checkpoint {} was written by {} rank(s) and this run has {}: resuming with another \
             world size is allowed, but the gradient sums run in another order, so the result will \
             not be bit-identical to an uninterrupted run",
            l.path.display(),
            l.state.world_size,
            splits.world
        ));
    }
}

/// The checkpoint's place and preprocessing, or step 0 with a preprocessing fitted on train.
fn start_of(
    job: &TrainJob,
    splits: &Splits,
    loaded: Option<&Loaded>,
    reporter: &dyn Reporter,
) -> Result<Start> {
    let config = &job.config;
    let threads = choose_threads(loaded, job.threads, job.cores, reporter);
    Ok(match loaded {
        Some(l) => Start {
            preprocess: l.state.preprocess.clone(),
            step: l.state.step,
            epoch: l.state.epoch,
            position: l.state.position,
            samples: l.state.samples,
            optimizer_step: l.state.optimizer.step,
            threads,
            stopped: splits.early && watch_of(config, Some(&l.state)).exhausted(),
        },
        None => {
            let lists =
                features::choose(&job.index.columns, &job.reserved, config.features.as_ref())?;
            let preprocess = Preprocess::fit(
                &splits.train.paths,
                &lists,
                &job.reserved.label,
                job.reserved.label_positive.as_ref(),
                config.max_vocab,
                config.missing_indicators,
            )?;
            Start {
                preprocess,
                step: 0,
                epoch: 0,
                position: 0,
                samples: 0,
                optimizer_step: 0,
                threads,
                stopped: false,
            }
        }
    })
}

/// The best val AUC (tracked with keep_best, which early stopping implies) and the evaluations
/// since it, as the checkpoint resumed from left them; none on a fresh run.
pub(crate) fn watch_of(config: &TrainConfig, state: Option<&CheckpointState>) -> ValWatch {
    ValWatch {
        best: state.and_then(|s| s.best).filter(|_| config.keep_best),
        since_best: state.map_or(0, |s| s.evaluations_since_best),
        patience: config.patience,
    }
}

/// Floating-point sums are split across threads, so the thread count is part of what makes a
/// resumed run bit-identical: a resume uses the checkpoint's unless told otherwise.
fn choose_threads(
    loaded: Option<&Loaded>,
    asked: Option<i32>,
    cores: usize,
    reporter: &dyn Reporter,
) -> i32 {
    choose_threads_of(
        loaded.map(|l| l.state.threads),
        asked,
        cores,
        |checkpoint, n| {
            reporter.warn(format!(
            "--threads {n} differs from the checkpoint's {checkpoint}: the result will not be bit-identical to an uninterrupted run"
        ))
        },
    )
}

fn choose_threads_of(
    checkpoint: Option<i32>,
    asked: Option<i32>,
    cores: usize,
    warn: impl FnOnce(i32, i32),
) -> i32 {
    match (checkpoint, asked) {
        (Some(c), Some(n)) if n != c => {
            warn(c, n);
            n
        }
        (_, Some(n)) => n,
        (Some(c), None) => c,
        (None, None) => default_threads(cores),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_keeps_the_checkpoints_threads_unless_told_and_then_warns() {
        let mut warned = None;
        assert_eq!(choose_threads_of(Some(3), None, 8, |_, _| panic!()), 3);
        assert_eq!(choose_threads_of(None, None, 8, |_, _| panic!()), 7);
        assert_eq!(choose_threads_of(None, None, 1, |_, _| panic!()), 1);
        assert_eq!(choose_threads_of(None, Some(2), 8, |_, _| panic!()), 2);
        assert_eq!(
            choose_threads_of(Some(3), Some(2), 8, |c, n| warned = Some((c, n))),
            2
        );
        assert_eq!(warned, Some((3, 2)));
    }
}
