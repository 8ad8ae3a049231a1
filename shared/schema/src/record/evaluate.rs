use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Metrics of scores against labels: the test split's, a slice's, or the val split's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalMetrics {
    /// Null when the rows hold one class only; `auc_note` then says why.
    pub auc: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auc_note: Option<String>,
    pub logloss: f64,
    pub brier: f64,
    pub ece: f64,
    pub accuracy: f64,
    /// Share of rows scored at or above 0.5.
    pub positive_rate: f64,
    /// Share of rows whose label is 1.
    pub label_rate: f64,
    pub mean_score: f64,
    pub rows: u64,
    /// Metric → 95% bootstrap interval, with `--bootstrap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<BTreeMap<String, [f64; 2]>>,
}

/// `evaluate` (and `baseline`): a model scored on the frozen test split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evaluate {
    pub passed: bool,
    /// The baseline's spread over seeds, from the record the registry stored for it (baseline
    /// role, for a registered model whose night measured one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<super::NoiseFloor>,
    pub model: String,
    /// `NAME@ALIAS` or `NAME@VERSION` when the model came from the registry.
    pub registered_as: Option<String>,
    pub weights_blake3: String,
    pub model_manifest_hash: String,
    pub split: String,
    pub shards_index_blake3: String,
    /// Digest of the rows scored, in `rows_format` (the shard index's).
    pub rows_blake3: String,
    /// `runfn-rows-v2`; absent in records written before formats were recorded: `runfn-rows-v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_format: Option<String>,
    pub overall: EvalMetrics,
    /// Slice column → value → metrics.
    pub slices: BTreeMap<String, BTreeMap<String, EvalMetrics>>,
    pub row_scores: RowScoresRef,
    /// Feature → the scored rows whose category the model never saw.
    pub unseen: BTreeMap<String, Unseen>,
    /// When `leaks` counts twins of training rows among the scored ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contamination: Option<Contamination>,
    /// The most confident wrong predictions (at most 10), with what the model saw; absent when
    /// there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mistakes: Vec<Mistake>,
    /// With `--scores`: the outside program's scores file, read in place of a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<super::ScoresFile>,
    /// How the split's scores spread: `predict` compares the scores of rows it serves with
    /// these (absent in records from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_bins: Option<ScoreBins>,
}

/// A histogram of scores over the deciles of the scores it was first made from: bin 0 holds
/// the scores at or below `edges[0]`, bin i those in (`edges[i-1]`, `edges[i]`], the last those
/// above the last edge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreBins {
    pub edges: Vec<f64>,
    /// One more count than edges.
    pub counts: Vec<u64>,
}

impl ScoreBins {
    /// Deciles of `scores` as edges, and their counts.
    pub fn of(scores: &[f64]) -> ScoreBins {
        let mut sorted: Vec<f64> = scores.iter().copied().filter(|s| s.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let mut edges: Vec<f64> = if sorted.is_empty() {
            Vec::new()
        } else {
            (0..=10)
                .map(|i| sorted[i * (sorted.len() - 1) / 10])
                .collect()
        };
        edges.dedup();
        let counts = ScoreBins::count(&edges, &sorted);
        ScoreBins { edges, counts }
    }

    /// The counts of `scores` in the bins `edges` make.
    pub fn count(edges: &[f64], scores: &[f64]) -> Vec<u64> {
        let mut counts = vec![0u64; edges.len() + 1];
        for score in scores {
            counts[edges.partition_point(|edge| edge < score)] += 1;
        }
        counts
    }
}

/// A wrong prediction the model was sure of: a positive scored near 0, a negative near 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mistake {
    /// The row's position in the scored split (as in the row scores file).
    pub row: u64,
    /// Its `manifest.eval.row_key` value, when the manifest declares one.
    pub key: Option<String>,
    pub label: bool,
    pub score: f64,
    /// Each feature's value in the row, as text (`null` for null).
    pub values: BTreeMap<String, String>,
}

/// The per-row scores file (`runfn-row-scores-v1`), which the paired gate reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RowScoresRef {
    pub path: String,
    pub blake3: String,
    pub rows: u64,
    /// The column that keys the rows.
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unseen {
    pub rows: u64,
    pub fraction: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Contamination {
    pub twin_rows: u64,
    pub twins_in: String,
    pub overall_without_twins: Option<EvalMetrics>,
    pub delta_auc: Option<f64>,
}

/// `predict`: a snapshot scored with a model, and what the rows looked like to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Predict {
    pub passed: bool,
    /// The model file scored with.
    pub model: String,
    /// `NAME@VERSION` when the registry resolved it.
    pub registered_as: Option<String>,
    pub weights_blake3: String,
    pub model_manifest_hash: String,
    /// The snapshot scored, as named.
    pub snapshot: String,
    pub rows: u64,
    /// The predictions file (`runfn-predictions-v1` Parquet).
    pub out: String,
    pub out_blake3: String,
    /// The key columns carried beside each score.
    pub keys: Vec<String>,
    /// Categorical feature → the rows whose value the model never saw (scored as unknown).
    pub unseen: BTreeMap<String, Unseen>,
    /// Feature → the rows where it is null (imputed as in training).
    pub missing: BTreeMap<String, Unseen>,
    /// The rows served against the model's training data and its test scores; absent when the
    /// model came from a file, or its entry has no profile (`no_drift` says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<ServingDrift>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_drift: Option<String>,
}

/// What serves compared with what the model learned from: each feature's drift from the
/// training profile stored with the model (the checks of ds-validate, thresholds from the
/// manifest's `validate`), and the scores' drift from the test split's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServingDrift {
    pub passed: bool,
    /// The registered model whose training profile and test scores were compared.
    pub against: String,
    /// Drift checks on the model's features only (null rate, range, distribution, categories).
    pub checks: Vec<super::ValidateCheck>,
    /// Absent when the model's evaluation kept no score bins.
    pub score: Option<ScoreDrift>,
    /// How the feature checks were judged: against the training snapshot's own windows (how far
    /// each stood from the whole), or, without them, against sampling noise and the thresholds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<String>,
}

/// The scores served against the test split's, binned at the test scores' deciles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScoreDrift {
    /// Jensen–Shannon divergence (bits).
    pub value: f64,
    pub threshold: f64,
    /// What sampling alone could make it at these sizes (alpha of `validate`).
    pub noise: f64,
    pub passed: bool,
    /// Whether a failure fails the run. False where the training period's windows judge the
    /// features: the test scores are one month's, a reference no history calibrates, so a move
    /// away from them is reported, not decisive.
    #[serde(default = "fails_run_default")]
    pub fails_run: bool,
    pub test: ScoreBins,
    /// The served scores' counts in the test bins.
    pub served: Vec<u64>,
}

fn fails_run_default() -> bool {
    true
}
