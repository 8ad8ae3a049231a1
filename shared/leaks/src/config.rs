//! What the leak checks are told about the data (from `manifest.data`).

use std::collections::BTreeMap;

use runfn_data::label::Positive;
use runfn_data::spec::DataSpec;
use runfn_manifest::leaks::LeakDecision;

#[derive(Debug, Clone, PartialEq)]
pub struct LeakConfig {
    pub entity: Option<String>,
    pub time: Option<String>,
    pub label: Option<String>,
    /// The label value that means positive; none: 0/1 or true/false.
    pub label_positive: Option<Positive>,
    /// When the label was determined; features stamped later leak. Defaults to `time`.
    pub label_time: Option<String>,
    pub text: Vec<String>,
    /// Feature → column holding the time the feature was computed.
    pub as_of: BTreeMap<String, String>,
    /// Split names in their intended time order (train, val, test).
    pub split_order: Vec<String>,
    /// Whether the splits are ranges of `time`, so that their order must hold in the data.
    pub time_split: bool,
    /// The split searched for single-feature label proxies.
    pub train_split: String,
    pub near_duplicate_jaccard: f64,
    /// A single feature with univariate AUC at least this (or at most 1 − this) is a suspected leak.
    pub proxy_auc: f64,
    pub examples: usize,
    /// Check name → tolerance or off (`manifest.leaks`); a check not named allows nothing.
    pub decisions: BTreeMap<String, LeakDecision>,
    /// Keep every twin pair (exact and near duplicates) in the report, not only the examples.
    pub collect_pairs: bool,
    /// The model's features when the manifest lists them (`config.features`): only these can
    /// have categories the model never learned.
    pub model_features: Option<Vec<String>>,
    /// Memory the checks may hold; what does not fit (texts, their band keys, candidate pairs)
    /// is spilled to `spill_dir`.
    pub memory_bytes: u64,
    /// Where to spill (default: the system's temporary folder, `TMPDIR`).
    pub spill_dir: Option<std::path::PathBuf>,
}

impl Default for LeakConfig {
    fn default() -> Self {
        LeakConfig {
            entity: None,
            time: None,
            label: None,
            label_positive: None,
            label_time: None,
            text: Vec::new(),
            as_of: BTreeMap::new(),
            split_order: Vec::new(),
            time_split: false,
            train_split: "train".into(),
            near_duplicate_jaccard: 0.8,
            proxy_auc: 0.99,
            examples: 5,
            decisions: BTreeMap::new(),
            collect_pairs: false,
            model_features: None,
            memory_bytes: 1 << 30,
            spill_dir: None,
        }
    }
}

impl LeakConfig {
    /// The checks as `manifest.data` declares them, over splits named `split_names`.
    pub fn from_spec(spec: &DataSpec, split_names: &[String]) -> LeakConfig {
        let split_order = conventional_order(split_names);
        LeakConfig {
            entity: spec.entity.clone(),
            time: spec.time.clone(),
            label: spec.label.clone(),
            label_positive: spec.label_positive.clone(),
            label_time: spec.label_time.clone(),
            text: spec.text.clone(),
            as_of: spec.as_of.clone(),
            train_split: split_order
                .iter()
                .find(|s| *s == "train")
                .cloned()
                .or_else(|| split_order.first().cloned())
                .unwrap_or_default(),
            split_order,
            ..LeakConfig::default()
        }
    }

    /// A folder of this run's own for what it spills, removed when dropped; what killed runs
    /// left there goes first.
    pub fn spill_root(&self) -> Result<runfn_data::spill_sort::SpillRoot, runfn_data::DataError> {
        let parent = self.spill_dir.clone().unwrap_or_else(std::env::temp_dir);
        runfn_data::spill_sort::SpillRoot::create(&parent, "leak-check").map_err(|source| {
            runfn_data::DataError::Io {
                path: parent,
                source,
            }
        })
    }

    pub fn decision(&self, check: &str) -> LeakDecision {
        self.decisions
            .get(check)
            .cloned()
            .unwrap_or_else(LeakDecision::strict)
    }

    pub fn label_time_column(&self) -> Option<&str> {
        self.label_time.as_deref().or(self.time.as_deref())
    }

    /// Columns that are not features: identity, time, label and the times features were taken.
    pub fn is_non_feature(&self, column: &str) -> bool {
        [&self.entity, &self.time, &self.label, &self.label_time]
            .iter()
            .any(|c| c.as_deref() == Some(column))
            || self.as_of.values().any(|c| c == column)
    }
}

/// The order splits are meant to follow in time. Manifests are hashed with their keys sorted,
/// so the written order is gone; the conventional names say it (train, then validation, then
/// test), and other names follow in the order given.
pub fn conventional_order(names: &[String]) -> Vec<String> {
    const STAGES: [&[&str]; 3] = [
        &["train", "training"],
        &["val", "valid", "validation", "dev"],
        &["test", "holdout", "eval"],
    ];
    let stage = |name: &str| {
        STAGES
            .iter()
            .position(|names| names.contains(&name.to_ascii_lowercase().as_str()))
            .unwrap_or(STAGES.len())
    };
    let mut ordered = names.to_vec();
    ordered.sort_by_key(|name| stage(name));
    ordered
}

#[cfg(test)]
mod tests {
    #[test]
    fn splits_follow_the_conventional_order() {
        let names: Vec<String> = ["test", "train", "val"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(super::conventional_order(&names), ["train", "val", "test"]);
    }
}
