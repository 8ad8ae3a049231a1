//! Scoring a split with a trained model, in order, without gradients.

use std::path::PathBuf;

use anyhow::{Result, bail};
use tch::{Device, Kind, Tensor};

use crate::features::{Preprocess, display_strings};
use crate::model::Mlp;
use crate::shard_reader::ShardReader;

#[derive(Debug, Default)]
pub struct Scored {
    pub scores: Vec<f64>,
    pub labels: Vec<bool>,
    /// Slice column → its value on each row, as text.
    pub slices: Vec<(String, Vec<String>)>,
    /// Categorical feature → rows whose value the model's vocabulary lacks.
    pub unseen: Vec<(String, u64)>,
}

/// Scores every row of `shards` (in index order) with `model` in evaluation mode.
pub fn score(
    model: &Mlp,
    preprocess: &Preprocess,
    shards: &[PathBuf],
    slice_columns: &[String],
    device: Device,
) -> Result<Scored> {
    let _guard = tch::no_grad_guard();
    let lookup = preprocess.lookup();
    let mut columns = preprocess.columns();
    columns.extend(slice_columns.iter().map(String::as_str));
    let mut out = Scored {
        slices: slice_columns
            .iter()
            .map(|c| (c.clone(), Vec::new()))
            .collect(),
        unseen: preprocess
            .categorical
            .iter()
            .map(|c| (c.name.clone(), 0))
            .collect(),
        ..Scored::default()
    };
    let (n_num, n_cat) = (
        preprocess.numeric_inputs() as i64,
        preprocess.categorical.len() as i64,
    );
    for path in shards {
        let mut reader = ShardReader::open(path, &columns)?;
        while let Some((batch, first_row)) = reader.next_batch()? {
            let block = preprocess.apply(&lookup, &batch, path, first_row)?;
            for (total, count) in out
                .unseen
                .iter_mut()
                .zip(preprocess.count_unseen(&lookup, &batch, path)?)
            {
                total.1 += count;
            }
            let rows = block.rows as i64;
            let numeric = if n_num == 0 {
                Tensor::zeros([rows, 0], (Kind::Float, Device::Cpu))
            } else {
                Tensor::from_slice(&block.numeric).reshape([rows, n_num])
            };
            let categorical = if n_cat == 0 {
                Tensor::zeros([rows, 0], (Kind::Int64, Device::Cpu))
            } else {
                Tensor::from_slice(&block.categorical).reshape([rows, n_cat])
            };
            let logits = model.forward(
                &numeric.to_device(device),
                &categorical.to_device(device),
                None,
            );
            let probs = logits
                .sigmoid()
                .to_kind(Kind::Double)
                .to_device(Device::Cpu);
            let probs: Vec<f64> = Vec::<f64>::try_from(&probs)?;
            if let Some(i) = probs.iter().position(|p| !p.is_finite()) {
                bail!(
                    "{}: row {}: the model's score is not finite (the weights hold NaN or infinity)",
                    path.display(),
                    first_row + i as u64
                );
            }
            out.scores.extend(probs);
            out.labels.extend(block.labels.iter().map(|&y| y == 1.0));
            for (name, values) in &mut out.slices {
                values.extend(display_strings(&batch, name, path)?);
            }
        }
    }
    Ok(out)
}
