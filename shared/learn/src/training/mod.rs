//! Training one job, in parts: the splits and this rank's place ([`splits`]), where the run
//! starts ([`resume`]), and the loop ([`training_loop`]) with its log window and metrics file.

pub mod job;
mod metrics_file;
mod resume;
mod splits;
mod training_loop;
mod window;

use std::time::{Duration, Instant};

use anyhow::Result;

use job::{Reporter, StallHandler, TrainJob, TrainReport};

/// Resume (or start), train to the end, and write the model (`crate::trainer::train` runs this).
pub(crate) fn train_job(
    job: &TrainJob,
    reporter: &dyn Reporter,
    on_stall: StallHandler,
) -> Result<TrainReport> {
    let started = Instant::now();
    let splits = splits::Splits::of(job)?;
    let resumed = resume::resume(job, &splits, reporter)?;
    let mut run = training_loop::TrainingLoop::start(job, reporter, splits, resumed, on_stall)?;
    run.run()?;
    run.finish(started)
}

/// A loop stuck for good, as in a read or a collective that never returns (a test's fault).
fn hang_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
