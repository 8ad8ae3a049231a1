//! Scoring a split with a trained model, in order, without gradients.

use crate::torch_failure::torch;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use tch::{Device, Kind, Tensor};

use crate::features::{FeatureBlock, Preprocess, display_strings};
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
    let mut out = Scored {
        slices: slice_columns
            .iter()
            .map(|c| (c.clone(), Vec::new()))
            .collect(),
        ..Scored::default()
    };
    out.unseen = score_each(model, preprocess, shards, slice_columns, device, |batch| {
        out.scores.extend(&batch.scores);
        out.labels.extend(&batch.labels);
        for ((_, values), (_, batch_values)) in out.slices.iter_mut().zip(&batch.slices) {
            values.extend(batch_values.iter().cloned());
        }
        Ok(())
    })?;
    Ok(out)
}

/// [`score`] a batch at a time: `each` gets every batch's rows as they are scored, in index
/// order, so a split of any size is scored in the memory of one batch. Returns the rows of
/// each categorical feature whose value the model's vocabulary lacks.
pub fn score_each(
    model: &Mlp,
    preprocess: &Preprocess,
    shards: &[PathBuf],
    slice_columns: &[String],
    device: Device,
    mut each: impl FnMut(&Scored) -> Result<()>,
) -> Result<Vec<(String, u64)>> {
    let _guard = tch::no_grad_guard();
    let lookup = preprocess.lookup();
    let mut columns = preprocess.columns();
    columns.extend(slice_columns.iter().map(String::as_str));
    let mut unseen: Vec<(String, u64)> = preprocess
        .categorical
        .iter()
        .map(|c| (c.name.clone(), 0))
        .collect();
    for path in shards {
        let mut reader = ShardReader::open(path, &columns)?;
        while let Some((batch, first_row)) = reader.next_batch()? {
            let block = preprocess.apply(&lookup, &batch, path, first_row)?;
            for (total, count) in unseen
                .iter_mut()
                .zip(preprocess.count_unseen(&lookup, &batch, path)?)
            {
                total.1 += count;
            }
            let scored = Scored {
                scores: probabilities(model, &block, device, path, first_row)?,
                labels: block.labels.iter().map(|&y| y == 1.0).collect(),
                slices: slice_columns
                    .iter()
                    .map(|name| Ok((name.clone(), display_strings(&batch, name, path)?)))
                    .collect::<Result<_>>()?,
                unseen: Vec::new(),
            };
            each(&scored)?;
        }
    }
    Ok(unseen)
}

/// The model's probabilities for the rows of `block`, in order (no gradients are kept).
pub fn probabilities(
    model: &Mlp,
    block: &FeatureBlock,
    device: Device,
    origin: &Path,
    first_row: u64,
) -> Result<Vec<f64>> {
    let _guard = tch::no_grad_guard();
    let rows = block.rows as i64;
    let (n_num, n_cat) = (model.arch.numeric, model.arch.cardinalities.len() as i64);
    let numeric = if n_num == 0 {
        Tensor::zeros([rows, 0], (Kind::Float, Device::Cpu))
    } else {
        Tensor::f_from_slice(&block.numeric)
            .map_err(torch)?
            .f_reshape([rows, n_num])
            .map_err(torch)?
    };
    let categorical = if n_cat == 0 {
        Tensor::zeros([rows, 0], (Kind::Int64, Device::Cpu))
    } else {
        Tensor::f_from_slice(&block.categorical)
            .map_err(torch)?
            .f_reshape([rows, n_cat])
            .map_err(torch)?
    };
    let logits = model.forward(
        &numeric.f_to_device(device).map_err(torch)?,
        &categorical.f_to_device(device).map_err(torch)?,
        None,
    );
    let probs = logits
        .f_sigmoid()
        .map_err(torch)?
        .f_to_kind(Kind::Double)
        .map_err(torch)?
        .f_to_device(Device::Cpu)
        .map_err(torch)?;
    let probs: Vec<f64> = Vec::<f64>::try_from(&probs)?;
    if let Some(i) = probs.iter().position(|p| !p.is_finite()) {
        bail!(
            "{}: row {}: the model's score is not finite (the weights hold NaN or infinity)",
            origin.display(),
            first_row + i as u64
        );
    }
    Ok(probs)
}

/// The rows of `shards` (in index order) whose positions are in `rows`: each one's value of
/// every column in `columns`, as text (`null` for null).
pub fn values_of_rows(
    shards: &[PathBuf],
    columns: &[&str],
    rows: &std::collections::BTreeSet<u64>,
) -> Result<std::collections::BTreeMap<u64, Vec<(String, String)>>> {
    let mut found = std::collections::BTreeMap::new();
    let mut position = 0u64;
    for path in shards {
        if found.len() == rows.len() {
            break;
        }
        let mut reader = ShardReader::open(path, columns)?;
        while let Some((batch, _)) = reader.next_batch()? {
            let n = batch.num_rows() as u64;
            let wanted: Vec<u64> = rows.range(position..position + n).copied().collect();
            if !wanted.is_empty() {
                let texts = columns
                    .iter()
                    .map(|c| display_strings(&batch, c, path))
                    .collect::<Result<Vec<_>>>()?;
                for row in wanted {
                    let i = (row - position) as usize;
                    let values = columns
                        .iter()
                        .zip(&texts)
                        .map(|(c, t)| (c.to_string(), t[i].clone()))
                        .collect();
                    found.insert(row, values);
                }
            }
            position += n;
        }
    }
    Ok(found)
}
