//! A training job and what it returns: resume from the newest valid checkpoint, train to
//! `max_steps` (or until early stopping ends it) with the input pipeline running ahead, evaluate
//! on val, checkpoint by steps or seconds, and write the model file: the best val AUC's weights
//! with early stopping, else the last step's. The report becomes the record's `train` section.
//! The parts are in [`crate::training`].

use anyhow::Result;
use runfn_core::leftovers::Leftovers;

pub use crate::training::job::{
    BestReport, DistributedReport, Faults, Reporter, ResumedFrom, StallHandler, TrainFeatures,
    TrainJob, TrainReport, default_threads,
};

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
    let result = crate::training::train_job(job, reporter, on_stall);
    if result.is_err() {
        leftovers.remove_empty();
    }
    result
}
