//! The splits a run trains and watches, and this rank's place in the job.

use anyhow::{Result, bail};

use super::job::TrainJob;
use crate::loader::ShardSet;

pub(crate) struct Splits {
    pub train: ShardSet,
    pub val: Option<ShardSet>,
    /// Early stopping watches the val AUC; with no val split there is nothing to watch.
    pub early: bool,
    pub rank: usize,
    pub world: usize,
    pub root: bool,
}

impl Splits {
    /// The train split (required) and val (optional); the global batch must split evenly over
    /// the ranks and fit in the train split.
    pub fn of(job: &TrainJob) -> Result<Splits> {
        let config = &job.config;
        let Some(train) = shard_set(job, "train") else {
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
        let val = shard_set(job, "val");
        let (rank, world) = job.group.as_ref().map_or((0, 1), |g| (g.rank, g.world));
        if !config.global_batch.is_multiple_of(world as u64) {
            bail!(
                "manifest.config.global_batch = {} does not split evenly over {world} ranks: the global batch \
                 is fixed and every rank takes an equal part of it; choose a multiple of {world}",
                config.global_batch
            );
        }
        if train.total_rows() < config.global_batch {
            bail!(
                "the train split has {} rows, fewer than one global batch ({}); lower manifest.config.global_batch",
                train.total_rows(),
                config.global_batch
            );
        }
        Ok(Splits {
            early: config.patience > 0 && val.is_some(),
            train,
            val,
            rank,
            world,
            root: rank == 0,
        })
    }
}

fn shard_set(job: &TrainJob, split: &str) -> Option<ShardSet> {
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
