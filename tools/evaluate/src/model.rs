//! The model to score: `--model` (a file, or NAME@ALIAS in the registry), else the record's own
//! training (`train.best.checkpoint` with `--checkpoint best`, else `train.weights`).

use runfn_core::InputError;
use runfn_learn::model_source::{ModelSource, registry_dir};
use runfn_registry::{ModelRef, Registry};
use runfn_schema::record::{NoiseFloor, Train};

use crate::{Args, Checkpoint};

pub fn resolve(args: &Args, train: Option<&Train>) -> anyhow::Result<ModelSource> {
    if let Some(model) = &args.model {
        return ModelSource::named(model, &registry_dir(args.registry.as_deref()));
    }
    if args.checkpoint == Checkpoint::Best {
        let Some(best) = train.and_then(|t| t.best.as_ref()) else {
            return Err(InputError::field(
                "--checkpoint",
                "best needs train.best, which this record does not have: train with \
                 manifest.config.keep_best: true",
            )
            .into());
        };
        return ModelSource::checkpoint(&best.checkpoint);
    }
    let Some((path, blake3)) = train.and_then(|t| t.weights.as_ref().zip(Some(&t.weights_blake3)))
    else {
        return Err(InputError::field(
            "--model",
            "is missing and the record has no train.weights (run train first, or name a model file or NAME@ALIAS)",
        )
        .into());
    };
    Ok(ModelSource {
        path: runfn_storage::local_path(path)?,
        registered_as: None,
        expected_blake3: blake3.clone(),
    })
}

/// The spread over seeds that the registry stored for a registered model (`registered_as`): the
/// `noise_floor` of the record it was registered from, when that night measured one. The gate
/// compares the candidate's own spread with it, and takes its floor as the serving model's normal
/// seed-to-seed movement.
pub fn registered_noise_floor(
    args: &Args,
    registered_as: &str,
) -> anyhow::Result<Option<NoiseFloor>> {
    let registry = Registry::open_read_only(&registry_dir(args.registry.as_deref()))?;
    let entry = registry.resolve(&ModelRef::parse(registered_as)?)?;
    let bytes = registry.blobs.read(&entry.lineage.blobs.record)?;
    let record: serde_json::Value = serde_json::from_slice(&bytes)?;
    Ok(match record.get("noise_floor") {
        Some(section) => Some(serde_json::from_value(section.clone()).map_err(|e| {
            InputError::field(
                format!("{registered_as}'s registered record: noise_floor"),
                e.to_string(),
            )
        })?),
        None => None,
    })
}
