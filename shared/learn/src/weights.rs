//! The model file `train` writes and `evaluate` reads: the weights as safetensors, with the
//! architecture, the fitted preprocessing and the lineage in its metadata, so one file is
//! everything needed to score new rows the same way.

use std::path::Path;

use anyhow::{Context, Result, bail};
use runfn_core::atomic::write_bytes_atomic;
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::features::Preprocess;
use crate::model::{Architecture, Mlp};
use crate::tensor_file;

pub const FORMAT: &str = "runfn-model-v1";
pub const FILE_NAME: &str = "model.safetensors";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelMeta {
    pub format: String,
    pub architecture: Architecture,
    pub preprocess: Preprocess,
    pub manifest_hash: String,
    pub run_id: Option<String>,
    pub seed: u64,
    pub steps: u64,
    /// blake3 of the shard index the model was trained on.
    pub shards_index_blake3: Option<String>,
}

/// Writes the model atomically; returns the file's blake3.
pub fn save(path: &Path, model: &Mlp, meta: &ModelMeta) -> Result<String> {
    let bytes = tensor_file::encode(&model.named(), &serde_json::to_value(meta)?)?;
    write_bytes_atomic(path, &bytes)?;
    Ok(blake3::hash(&bytes).to_hex().to_string())
}

#[derive(Debug)]
pub struct LoadedModel {
    pub model: Mlp,
    pub meta: ModelMeta,
    pub blake3: String,
}

/// Reads a model file (or `DIR/model.safetensors` when `path` is a folder).
pub fn load(path: &Path, device: Device) -> Result<LoadedModel> {
    let path = if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    };
    let origin = path.display().to_string();
    let bytes = std::fs::read(&path).with_context(|| origin.clone())?;
    let (tensors, meta) = tensor_file::decode(&bytes, &origin)?;
    let meta: ModelMeta = serde_json::from_value(meta)
        .with_context(|| format!("{origin}: not a runfn model file"))?;
    if meta.format != FORMAT {
        bail!("{origin}: format `{}`, expected `{FORMAT}`", meta.format);
    }
    let mut model = Mlp::zeroed(meta.architecture.clone(), device);
    model.load(&tensors, "", &origin)?;
    Ok(LoadedModel {
        model,
        meta,
        blake3: blake3::hash(&bytes).to_hex().to_string(),
    })
}
