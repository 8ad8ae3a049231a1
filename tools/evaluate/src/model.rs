//! The model to score: `--model` (a file, or NAME@ALIAS in the registry), else the record's own
//! training (`train.best.checkpoint` with `--checkpoint best`, else `train.weights`).

use runfn_core::InputError;
use runfn_learn::model_source::{ModelSource, registry_dir};
use runfn_schema::record::Train;

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
