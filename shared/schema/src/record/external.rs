use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `external_train`: a model trained outside runfn (a team's own scikit-learn, XGBoost or PyTorch
/// script), written by that script in place of `train`. The artifact is any file; its blake3 is
/// checked by `evaluate --scores` and again by `register`, which stores it content-addressed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalTrain {
    /// The trained model file, as the script wrote it (a path or store URL).
    pub artifact: String,
    /// blake3 of the artifact's bytes, 64 hex characters.
    pub artifact_blake3: String,
    /// What trained it, with its version: `scikit-learn 1.9.1`, `xgboost 3.0`.
    pub framework: String,
    /// The artifact's format: `pickle`, `onnx`, `xgboost-json`, `torchscript`, or another word.
    pub format: String,
    /// The trainer's hyperparameters, as the script names them.
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// The seed the script trained with, when it takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// `evaluate.scores`: the scores file an outside program wrote, which `evaluate --scores` read in
/// place of scoring a model itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoresFile {
    pub path: String,
    /// blake3 of the file as evaluate read it; gate and register refuse a file that changed.
    pub blake3: String,
    /// The column that keys its rows to the split's.
    pub key: String,
    pub rows: u64,
}
