//! The model a tool scores with: a model file (or a training folder), or a registered
//! `NAME@ALIAS` / `NAME@VERSION` resolved in the registry, checked against the blake3 the
//! registry or the record gives before a single row is scored.

use std::path::{Path, PathBuf};

use anyhow::Result;
use runfn_core::InputError;
use runfn_registry::{ModelRef, Registry};
use tch::Device;

use crate::weights::{self, LoadedModel};

/// The model file, how it was named, and the blake3 the registry or the record says it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSource {
    pub path: PathBuf,
    /// `NAME@VERSION` when the registry resolved it.
    pub registered_as: Option<String>,
    pub expected_blake3: Option<String>,
}

impl ModelSource {
    /// `model` as a user names it: a path that exists (or a store URL), else `NAME@ALIAS` or
    /// `NAME@VERSION` in `registry`.
    pub fn named(model: &Path, registry: &Path) -> Result<ModelSource> {
        let text = model.to_string_lossy();
        if !model.exists() && ModelRef::looks_like(&text) {
            let registry = Registry::open_read_only(registry)?;
            let entry = registry.resolve(&ModelRef::parse(&text)?)?;
            if let Some(format) = &entry.lineage.blobs.weights_format {
                return Err(InputError::field(
                    text.to_string(),
                    format!(
                        "{}@{} is an outside model ({format}, trained with {}): runfn does not run it; score the rows with its own framework and give the file to evaluate --scores",
                        entry.lineage.name,
                        entry.version,
                        entry.lineage.blobs.framework.as_deref().unwrap_or("an unnamed framework")
                    ),
                )
                .into());
            }
            return Ok(ModelSource {
                path: registry.blobs.fetch(&entry.lineage.weights_blake3)?,
                registered_as: Some(format!("{}@{}", entry.lineage.name, entry.version)),
                expected_blake3: Some(entry.lineage.weights_blake3.clone()),
            });
        }
        Ok(ModelSource {
            path: runfn_storage::local_path(&text)?,
            registered_as: None,
            expected_blake3: None,
        })
    }

    /// A checkpoint's JSON (`train.best.checkpoint`), as a local path: a store URL's checkpoint
    /// folder is staged (tensors first, JSONs last) and the same JSON in it named.
    pub fn checkpoint(path: &str) -> Result<ModelSource> {
        let local = if runfn_storage::is_remote(path) {
            let (folder, name) = path
                .rsplit_once('/')
                .ok_or_else(|| InputError::field("train.best.checkpoint", "names no file"))?;
            runfn_storage::stage_set(folder, &|relative: &str| relative.ends_with(".json"))?
                .join(name)
        } else {
            PathBuf::from(path)
        };
        Ok(ModelSource {
            path: local,
            registered_as: None,
            expected_blake3: None,
        })
    }

    /// Loads the weights, checking the blake3 the registry or the record gave.
    pub fn load(&self, from_checkpoint: bool, device: Device) -> Result<LoadedModel> {
        Ok(match &self.expected_blake3 {
            _ if from_checkpoint => weights::load_checkpoint(&self.path, device)?,
            Some(blake3) => weights::load_expecting(&self.path, blake3, device)?,
            None => weights::load(&self.path, device)?,
        })
    }
}

/// The registry folder: `flag`, else `RUNFN_REGISTRY`, else `./registry`.
pub fn registry_dir(flag: Option<&Path>) -> PathBuf {
    flag.map(Path::to_path_buf)
        .or_else(|| std::env::var_os("RUNFN_REGISTRY").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("registry"))
}
