//! What the leak checks are told about the data (from `manifest.data`).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct LeakConfig {
    pub entity: Option<String>,
    pub time: Option<String>,
    pub label: Option<String>,
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
}

impl Default for LeakConfig {
    fn default() -> Self {
        LeakConfig {
            entity: None,
            time: None,
            label: None,
            label_time: None,
            text: Vec::new(),
            as_of: BTreeMap::new(),
            split_order: Vec::new(),
            time_split: false,
            train_split: "train".into(),
            near_duplicate_jaccard: 0.8,
            proxy_auc: 0.99,
            examples: 5,
        }
    }
}

impl LeakConfig {
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
