//! The model file `train` writes and `evaluate` reads: the weights as safetensors, with the
//! architecture, the fitted preprocessing and the lineage in its metadata, so one file is
//! everything needed to score new rows the same way.

use std::path::Path;

use anyhow::{Context, Result, bail};
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

/// The metadata entry holding the file's [`tensor_file::content_blake3`]: the weights and every
/// other metadata field, so a flipped byte anywhere that matters is caught on load.
const CHECKSUM_KEY: &str = "content_blake3";

/// Writes the model atomically; returns the file's blake3.
pub fn save(path: &Path, model: &Mlp, meta: &ModelMeta) -> Result<String> {
    let named = model.named();
    let mut value = serde_json::to_value(meta)?;
    let checksum = tensor_file::content_blake3(&named, &value)?;
    value[CHECKSUM_KEY] = checksum.into();
    let (_, blake3) = tensor_file::write(path, &named, &value, tensor_file::Hashing::Beside)?;
    Ok(blake3.to_hex().to_string())
}

#[derive(Debug)]
pub struct LoadedModel {
    pub model: Mlp,
    pub meta: ModelMeta,
    pub blake3: String,
}

/// Reads a model file (or `DIR/model.safetensors` when `path` is a folder) and checks it against
/// the checksum it carries: a modified or corrupt model is never scored.
pub fn load(path: &Path, device: Device) -> Result<LoadedModel> {
    let path = if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    };
    let origin = path.display().to_string();
    let bytes = runfn_core::side_file::read_bounded(&path, runfn_core::side_file::MODEL_LIMIT)?;
    let (tensors, mut meta) = tensor_file::decode(&bytes, &origin)?;
    let carried = meta
        .as_object_mut()
        .and_then(|m| m.remove(CHECKSUM_KEY))
        .ok_or_else(|| anyhow::anyhow!("{origin}: carries no {CHECKSUM_KEY}, so it cannot be verified (not a runfn model file, or written before models carried one: retrain it)"))?;
    let named: Vec<(String, &tch::Tensor)> = tensors.iter().map(|(n, t)| (n.clone(), t)).collect();
    let actual = tensor_file::content_blake3(&named, &meta)?;
    if carried.as_str() != Some(actual.as_str()) {
        bail!(
            "{origin}: the model was modified or is corrupt: its content hashes to {actual}, but the file \
             says {carried}"
        );
    }
    let meta: ModelMeta = serde_json::from_value(meta)
        .with_context(|| format!("{origin}: not a runfn model file"))?;
    if meta.format != FORMAT {
        bail!("{origin}: format `{}`, expected `{FORMAT}`", meta.format);
    }
    // The inputs the preprocessing makes must be the ones the weights take, or scoring would fail
    // inside libtorch instead of here with the file's name.
    let inputs = meta.preprocess.numeric_inputs() as i64;
    if meta.architecture.numeric != inputs {
        bail!(
            "{origin}: the model takes {} numeric inputs, but its preprocessing makes {inputs} \
             (values and missing indicators): not a consistent runfn model file",
            meta.architecture.numeric
        );
    }
    let mut model = Mlp::zeroed(meta.architecture.clone(), device);
    model.load(&tensors, "", &origin)?;
    Ok(LoadedModel {
        model,
        meta,
        blake3: blake3::hash(&bytes).to_hex().to_string(),
    })
}

/// The model of one checkpoint (its JSON's path), as if it were a model file: the tensors are
/// checked against the blake3 the JSON names, which becomes `blake3`.
pub fn load_checkpoint(json_path: &Path, device: Device) -> Result<LoadedModel> {
    let loaded = crate::checkpoint::load_file(json_path)?;
    let origin = json_path.display().to_string();
    let state = loaded.state;
    let Some(architecture) = state.architecture else {
        bail!(
            "{origin}: names no architecture (written before checkpoints carried one), so it cannot be scored alone"
        );
    };
    let mut model = Mlp::zeroed(architecture.clone(), device);
    model.load(&loaded.tensors, "model.", &origin)?;
    Ok(LoadedModel {
        model,
        meta: ModelMeta {
            format: FORMAT.into(),
            architecture,
            preprocess: state.preprocess,
            manifest_hash: state.manifest_hash,
            run_id: None,
            seed: state.seed,
            steps: state.step,
            shards_index_blake3: None,
        },
        blake3: state.tensors.blake3,
    })
}

/// [`load`], then the file's blake3 must be `expected` (what the record or the registry says
/// the model is).
pub fn load_expecting(path: &Path, expected: &str, device: Device) -> Result<LoadedModel> {
    let loaded = load(path, device)?;
    if loaded.blake3 != expected {
        bail!(
            "{}: is not the model named: its blake3 is {}, expected {expected}",
            path.display(),
            loaded.blake3
        );
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::NumericFeature;

    /// A device given as the model is refused by name, never read (`/dev/zero` grew evaluate
    /// without end).
    #[test]
    fn a_device_as_the_model_is_refused_without_reading_it() {
        let err = load(Path::new("/dev/zero"), Device::Cpu).err().unwrap();
        assert_eq!(
            err.to_string(),
            "/dev/zero: is a character device, not a regular file"
        );
    }

    fn meta(indicator: bool, numeric_inputs: i64) -> ModelMeta {
        ModelMeta {
            format: FORMAT.into(),
            architecture: Architecture {
                numeric: numeric_inputs,
                cardinalities: vec![],
                embedding_dim: 8,
                hidden: vec![4],
                dropout: 0.0,
            },
            preprocess: Preprocess {
                label: "y".into(),
                label_positive: None,
                numeric: vec![NumericFeature {
                    name: "x".into(),
                    mean: 0.0,
                    std: 1.0,
                    nulls: 3,
                    indicator,
                    boolean: false,
                }],
                categorical: vec![],
                train_rows: 10,
            },
            manifest_hash: "0".repeat(64),
            run_id: None,
            seed: 1,
            steps: 1,
            shards_index_blake3: None,
        }
    }

    #[test]
    fn a_model_keeps_its_indicators_and_must_take_the_inputs_they_make() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let good = meta(true, 2);
        save(
            &path,
            &Mlp::new(good.architecture.clone(), 1, Device::Cpu),
            &good,
        )
        .unwrap();
        assert_eq!(load(&path, Device::Cpu).unwrap().meta, good);
        let bad = meta(false, 2);
        save(
            &path,
            &Mlp::new(bad.architecture.clone(), 1, Device::Cpu),
            &bad,
        )
        .unwrap();
        let err = load(&path, Device::Cpu).unwrap_err().to_string();
        assert!(
            err.ends_with(
                "the model takes 2 numeric inputs, but its preprocessing makes 1 (values and \
                 missing indicators): not a consistent runfn model file"
            ),
            "{err}"
        );
    }
}
