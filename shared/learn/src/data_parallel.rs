//! What the training loop does differently with more than one rank: rank 0 decides the start
//! (fresh or from its checkpoint) and sends it, with the parameters and optimizer moments, to
//! every rank; each step averages the gradient over the ranks in buckets, with the loss and the
//! checkpoint-by-time decision riding along so that every rank takes the same branch.

use std::time::Duration;

use anyhow::{Context, Result};
use runfn_dist::ProcessGroup;
use runfn_dist::buckets::Buckets;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::adamw::AdamW;
use crate::checkpoint::RankState;
use crate::features::Preprocess;
use crate::model::Mlp;

/// Where a run starts: decided by rank 0, the same on every rank.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    pub preprocess: Preprocess,
    pub step: u64,
    pub epoch: u64,
    pub position: u64,
    pub samples: u64,
    pub optimizer_step: u64,
    pub threads: i32,
    /// The checkpoint resumed from is the one where early stopping ended the run: no steps left.
    pub stopped: bool,
}

/// Rank 0's `start` on every rank (others pass None).
pub fn share_start(group: &ProcessGroup, start: Option<Start>) -> Result<Start> {
    let bytes = match &start {
        Some(s) => serde_json::to_vec(s)?,
        None => Vec::new(),
    };
    let received = group.broadcast_bytes(&bytes)?;
    match start {
        Some(s) => Ok(s),
        None => serde_json::from_slice(&received).context("the start state sent by rank 0"),
    }
}

/// Rank 0's parameters and AdamW moments on every rank.
pub fn share_parameters(group: &ProcessGroup, model: &Mlp, optimizer: &AdamW) -> Result<()> {
    for tensor in [&model.flat, &optimizer.m, &optimizer.v] {
        let on_group = tensor.to_device(group.device());
        group.broadcast(&on_group, 0)?;
        if on_group.device() != tensor.device() {
            let _guard = tch::no_grad_guard();
            let mut target = tensor.shallow_clone();
            target.copy_(&on_group);
        }
    }
    Ok(())
}

/// Rank 0's `flag` on every rank: a decision only rank 0 can make (it alone scores val).
pub fn share_flag(group: &ProcessGroup, flag: bool) -> Result<bool> {
    let on_group = Tensor::from_slice(&[u8::from(flag)]).to_device(group.device());
    group.broadcast(&on_group, 0)?;
    Ok(on_group.to_device(tch::Device::Cpu).int64_value(&[0]) == 1)
}

/// Every rank's state at a checkpoint, in rank order.
pub fn gather_ranks(group: &ProcessGroup, mine: &RankState) -> Result<Vec<RankState>> {
    let values = [
        mine.rank as i64,
        mine.epoch as i64,
        mine.position as i64,
        mine.rows[0] as i64,
        mine.rows[1] as i64,
    ];
    let gathered = group.allgather(&Tensor::from_slice(&values).to_device(group.device()))?;
    gathered
        .iter()
        .map(|t| {
            let v: Vec<i64> = Vec::try_from(&t.to_device(tch::Device::Cpu))?;
            Ok(RankState {
                rank: v[0] as usize,
                epoch: v[1] as u64,
                position: v[2] as u64,
                rows: [v[3] as u64, v[4] as u64],
            })
        })
        .collect()
}

/// The gradient all-reduce of every step, and the time it took.
#[derive(Debug)]
pub struct GradientSync {
    buckets: Buckets,
    pub bucket_bytes: usize,
    pub time: Duration,
}

/// What every rank learns from one step's collectives.
#[derive(Debug, Clone, Copy)]
pub struct Synced {
    /// The mean of the ranks' losses, which is the loss of the global batch.
    pub loss: f64,
    /// Some rank (rank 0, the only one that looks at the clock) wants a checkpoint now.
    pub checkpoint_now: bool,
    /// Some rank was asked to stop (SIGTERM): every rank checkpoints this step and stops.
    pub stop_now: bool,
}

impl GradientSync {
    /// For a flat gradient of `numel` f32 values (three more ride along: the loss and two flags).
    pub fn new(numel: i64, bucket_bytes: usize) -> GradientSync {
        GradientSync {
            buckets: Buckets::new(numel + 3, 4, bucket_bytes),
            bucket_bytes,
            time: Duration::ZERO,
        }
    }

    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Averages `grad` in place over the ranks and shares the loss and the checkpoint wish. They
    /// travel at the end of the gradient buffer, so a small model costs one collective a step.
    pub fn step(
        &mut self,
        group: &ProcessGroup,
        grad: &mut Tensor,
        loss: f64,
        checkpoint_now: bool,
        stop_now: bool,
    ) -> Result<Synced> {
        let numel = grad.numel() as i64;
        let flag = |b: bool| f32::from(u8::from(b));
        let side = Tensor::from_slice(&[loss as f32, flag(checkpoint_now), flag(stop_now)])
            .to_device(grad.device());
        let mut buffer = Tensor::cat(&[&*grad, &side], 0).to_device(group.device());
        self.time += self.buckets.average(group, &mut buffer)?;
        let _guard = tch::no_grad_guard();
        grad.copy_(&buffer.narrow(0, 0, numel));
        let side = buffer.narrow(0, numel, 3).to_device(tch::Device::Cpu);
        Ok(Synced {
            loss: side.double_value(&[0]),
            checkpoint_now: side.double_value(&[1]) > 0.0,
            stop_now: side.double_value(&[2]) > 0.0,
        })
    }
}
