//! Training settings from `manifest.config`, with defaults, checked before anything runs.
//! An unknown key is an error (with the close name), so a typo never silently trains the default.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The most weights one layer may have (2^28: 1 GiB of f32, 4 GiB with gradients and AdamW's
/// moments).
pub const MAX_LAYER_WEIGHTS: i64 = 1 << 28;
/// The most rows one step may take.
pub const MAX_GLOBAL_BATCH: u64 = 1 << 24;

use crate::schedule::Schedule;
use crate::suggest;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Hidden layer widths; `[]` is logistic regression on the same features.
    pub hidden: Vec<i64>,
    pub dropout: f64,
    pub lr: f64,
    pub weight_decay: f64,
    pub global_batch: u64,
    pub max_steps: u64,
    pub warmup_steps: u64,
    pub min_lr_ratio: f64,
    /// Clip the global gradient norm to this (0: no clipping).
    pub grad_clip: f64,
    pub eval_every: u64,
    /// Early stopping: the run ends after this many val evaluations in a row without a higher
    /// val AUC than the best so far, and the weights written are the best evaluation's (0: off,
    /// the last step's weights). Without a val split the run trains all max_steps.
    pub patience: u64,
    pub ckpt_every: u64,
    pub keep_checkpoints: usize,
    /// Also keep the checkpoint with the highest val AUC, checkpointing every step whose val
    /// AUC beats the best so far. On whenever early stopping is, which writes that checkpoint's
    /// weights.
    pub keep_best: bool,
    pub log_every: u64,
    pub embedding_dim: i64,
    /// Categories kept per column (most frequent in train); the rest share the unknown bucket.
    pub max_vocab: usize,
    /// Explicit feature lists; by default every numeric and string column that is not the
    /// entity, a time, the label, free text or an as-of stamp.
    pub features: Option<FeatureLists>,
    /// Seconds without a finished step before the run is reported as stalled.
    pub stall_timeout_s: f64,
    /// A missing-indicator input for each numeric feature with nulls in train; off only to
    /// show what mean-filling alone hides.
    pub missing_indicators: bool,
    /// Limits of the live alerts, which warn and never stop the run.
    pub alerts: AlertConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureLists {
    #[serde(default)]
    pub numeric: Vec<String>,
    #[serde(default)]
    pub categorical: Vec<String>,
}

const KEYS: &[&str] = &[
    "model",
    "hidden",
    "dropout",
    "lr",
    "weight_decay",
    "global_batch",
    "max_steps",
    "warmup_steps",
    "min_lr_ratio",
    "grad_clip",
    "eval_every",
    "patience",
    "ckpt_every",
    "keep_checkpoints",
    "keep_best",
    "log_every",
    "embedding_dim",
    "max_vocab",
    "features",
    "stall_timeout_s",
    "missing_indicators",
    "alerts",
];

const ALERT_KEYS: &[&str] = &[
    "throughput_fraction",
    "min_window_s",
    "warmup_windows",
    "loss_spike_sigmas",
    "loss_window",
    "checkpoint_age_s",
    "data_wait_fraction",
];

/// `Err` with the known keys and the close one, when `key` is not among `known`.
fn check_key(prefix: &str, key: &str, known: &[&str]) -> Result<(), String> {
    if known.contains(&key) {
        return Ok(());
    }
    Err(format!(
        "{prefix}.{key}: unknown setting{}; known: {}",
        suggest::hint(key, known),
        known.join(", ")
    ))
}

/// `manifest.config.alerts`. A `None` limit turns that kind off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertConfig {
    /// Alert when a log window's samples/s falls below this fraction of the run's median.
    pub throughput_fraction: Option<f64>,
    /// Log windows shorter than this many seconds are pooled with the next ones until they
    /// cover it, and the pool is judged: a few milliseconds of steps say nothing about throughput.
    pub min_window_s: f64,
    /// Judged windows at the start of a process that neither count nor are checked (start-up,
    /// first decode); the throughput check also waits until this many windows have counted.
    pub warmup_windows: u64,
    /// Alert when a step's loss is more than this many deviations above the recent mean.
    pub loss_spike_sigmas: Option<f64>,
    /// Steps in the recent-loss window; the check starts once it is full.
    pub loss_window: u64,
    /// Alert when this many seconds passed since the last checkpoint (None: twice
    /// `ckpt_interval.interval_s` when the record has it, else off).
    pub checkpoint_age_s: Option<f64>,
    /// Alert when a log window spent more than this fraction of its time waiting for data.
    pub data_wait_fraction: Option<f64>,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            throughput_fraction: Some(0.5),
            min_window_s: 1.0,
            warmup_windows: 3,
            loss_spike_sigmas: Some(6.0),
            loss_window: 50,
            checkpoint_age_s: None,
            data_wait_fraction: Some(0.5),
        }
    }
}

/// `manifest.config.alerts`: each limit a number, or null to turn that alert off
/// (`checkpoint_age_s` null: twice `ckpt_interval.interval_s` when the record has it, else off).
fn alert_config(value: Option<&Value>) -> Result<AlertConfig, String> {
    let prefix = "manifest.config.alerts";
    let defaults = AlertConfig::default();
    let map = match value {
        None | Some(Value::Null) => return Ok(defaults),
        Some(Value::Object(map)) => map,
        Some(v) => return Err(format!("{prefix}: must be an object, found {v}")),
    };
    for key in map.keys() {
        check_key(prefix, key, ALERT_KEYS)?;
    }
    let limit =
        |key: &str, default: Option<f64>, ok: fn(f64) -> bool, rule: &str| match map.get(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && ok(x) => Ok(Some(x)),
                _ => Err(format!(
                    "{prefix}.{key}: must be a number {rule} or null (off), found {v}"
                )),
            },
        };
    let count = |key: &str, default: u64, min: u64| match map.get(key) {
        None => Ok(default),
        Some(v) => match v.as_u64() {
            Some(x) if x >= min => Ok(x),
            _ => Err(format!(
                "{prefix}.{key}: must be an integer >= {min}, found {v}"
            )),
        },
    };
    let fraction = |x: f64| x > 0.0 && x < 1.0;
    Ok(AlertConfig {
        throughput_fraction: limit(
            "throughput_fraction",
            defaults.throughput_fraction,
            fraction,
            "in (0, 1)",
        )?,
        min_window_s: match map.get("min_window_s") {
            None => defaults.min_window_s,
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => x,
                _ => {
                    return Err(format!(
                        "{prefix}.min_window_s: must be a number >= 0, found {v}"
                    ));
                }
            },
        },
        warmup_windows: count("warmup_windows", defaults.warmup_windows, 0)?,
        loss_spike_sigmas: limit(
            "loss_spike_sigmas",
            defaults.loss_spike_sigmas,
            |x| x > 0.0,
            "> 0",
        )?,
        loss_window: count("loss_window", defaults.loss_window, 2)?,
        checkpoint_age_s: limit(
            "checkpoint_age_s",
            defaults.checkpoint_age_s,
            |x| x > 0.0,
            "> 0",
        )?,
        data_wait_fraction: limit(
            "data_wait_fraction",
            defaults.data_wait_fraction,
            fraction,
            "in (0, 1)",
        )?,
    })
}

impl TrainConfig {
    /// Reads `manifest.config` (absent: all defaults). Errors name the field.
    pub fn from_json(config: Option<&Value>) -> Result<TrainConfig, String> {
        let empty = Map::new();
        let map = match config {
            None | Some(Value::Null) => &empty,
            Some(Value::Object(map)) => map,
            Some(_) => return Err("manifest.config: must be an object".into()),
        };
        for key in map.keys() {
            check_key("manifest.config", key, KEYS)?;
        }
        let field = |key: &str| format!("manifest.config.{key}");
        if let Some(model) = map.get("model")
            && model.as_str() != Some("mlp")
        {
            return Err(format!("{}: only \"mlp\" is supported", field("model")));
        }
        let float = |key: &str, default: f64, ok: fn(f64) -> bool, rule: &str| match map.get(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && ok(x) => Ok(x),
                _ => Err(format!(
                    "{}: must be a number {rule}, found {v}",
                    field(key)
                )),
            },
        };
        let int = |key: &str, default: u64, min: u64| match map.get(key) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(x) if x >= min => Ok(x),
                _ => Err(format!(
                    "{}: must be an integer >= {min}, found {v}",
                    field(key)
                )),
            },
        };
        let boolean = |key: &str, default: bool| match map.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(format!("{}: must be true or false, found {v}", field(key))),
        };
        let hidden = match map.get("hidden") {
            None => vec![64, 32],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v.as_u64() {
                    Some(w) if (1..=65536).contains(&w) => Ok(w as i64),
                    _ => Err(format!(
                        "{}: layer widths must be integers 1..65536, found {v}",
                        field("hidden")
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(v) => {
                return Err(format!(
                    "{}: must be a list of layer widths, found {v}",
                    field("hidden")
                ));
            }
        };
        // Two consecutive layers of 65,536 would ask for 4.3 billion weights (17 GB, three times
        // that with the optimizer's state): refused by name before any memory is asked for.
        if let Some(widest) = hidden.windows(2).map(|w| w[0] * w[1]).max()
            && widest > MAX_LAYER_WEIGHTS
        {
            return Err(format!(
                "{}: two consecutive layers of {:?} need {widest} weights, above the limit of \
                 {MAX_LAYER_WEIGHTS} per layer",
                field("hidden"),
                hidden
            ));
        }
        let features = match map.get("features") {
            None => None,
            Some(v) => Some(
                serde_json::from_value::<FeatureLists>(v.clone())
                    .map_err(|e| format!("{}: {e}", field("features")))?,
            ),
        };
        let max_steps = int("max_steps", 2000, 1)?;
        let patience = int("patience", 10, 0)?;
        let keep_best = boolean("keep_best", patience > 0)?;
        if patience > 0 && !keep_best {
            return Err(format!(
                "{}: early stopping (patience {patience}) writes the weights of the best val AUC, so it \
                 keeps that checkpoint; set patience: 0 to turn early stopping off as well",
                field("keep_best")
            ));
        }
        let config = TrainConfig {
            hidden,
            dropout: float("dropout", 0.1, |x| (0.0..1.0).contains(&x), "in [0, 1)")?,
            lr: float("lr", 1e-3, |x| x > 0.0, "> 0")?,
            weight_decay: float("weight_decay", 0.01, |x| x >= 0.0, ">= 0")?,
            global_batch: match int("global_batch", 512, 1)? {
                rows if rows > MAX_GLOBAL_BATCH => {
                    return Err(format!(
                        "{}: {rows} rows per step is above the limit of {MAX_GLOBAL_BATCH}",
                        field("global_batch")
                    ));
                }
                rows => rows,
            },
            max_steps,
            warmup_steps: int("warmup_steps", (max_steps / 20).min(200), 0)?,
            min_lr_ratio: float(
                "min_lr_ratio",
                0.05,
                |x| (0.0..=1.0).contains(&x),
                "in [0, 1]",
            )?,
            grad_clip: float("grad_clip", 1.0, |x| x >= 0.0, ">= 0")?,
            eval_every: int("eval_every", 50, 1)?,
            patience,
            ckpt_every: int("ckpt_every", 500, 1)?,
            keep_checkpoints: int("keep_checkpoints", 2, 1)? as usize,
            keep_best,
            log_every: int("log_every", 10, 1)?,
            embedding_dim: int("embedding_dim", 8, 1)? as i64,
            max_vocab: int("max_vocab", 1000, 1)? as usize,
            features,
            stall_timeout_s: float("stall_timeout_s", 600.0, |x| x > 0.0, "> 0")?,
            missing_indicators: boolean("missing_indicators", true)?,
            alerts: alert_config(map.get("alerts"))?,
        };
        Ok(config)
    }

    pub fn schedule(&self) -> Schedule {
        Schedule {
            lr: self.lr,
            warmup_steps: self.warmup_steps,
            total_steps: self.max_steps,
            min_lr_ratio: self.min_lr_ratio,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_overrides() {
        let c = TrainConfig::from_json(None).unwrap();
        assert_eq!(c.hidden, vec![64, 32]);
        let c = TrainConfig::from_json(Some(
            &json!({"model": "mlp", "hidden": [], "lr": 0.01, "max_steps": 100}),
        ))
        .unwrap();
        assert!(c.hidden.is_empty());
        assert_eq!(c.warmup_steps, 5);
        assert!(TrainConfig::from_json(None).unwrap().missing_indicators);
        let c = TrainConfig::from_json(Some(&json!({"missing_indicators": false}))).unwrap();
        assert!(!c.missing_indicators);
        assert!(c.patience > 0, "early stopping is on by default");
        assert!(c.keep_best, "early stopping keeps the best checkpoint");
        let off = TrainConfig::from_json(Some(&json!({"patience": 0}))).unwrap();
        assert!(!off.keep_best, "off, it keeps no best unless asked");
        assert!(
            TrainConfig::from_json(Some(&json!({"patience": 0, "keep_best": true})))
                .unwrap()
                .keep_best
        );
        assert_eq!(
            TrainConfig::from_json(Some(&json!({"patience": 3})))
                .unwrap()
                .patience,
            3
        );
        assert_eq!(c.alerts, AlertConfig::default());
        let c = TrainConfig::from_json(Some(&json!({"alerts": {
            "throughput_fraction": null, "loss_spike_sigmas": 6, "loss_window": 20,
            "checkpoint_age_s": 30, "data_wait_fraction": 0.8, "warmup_windows": 0}})))
        .unwrap();
        assert_eq!(
            c.alerts,
            AlertConfig {
                throughput_fraction: None,
                min_window_s: 1.0,
                warmup_windows: 0,
                loss_spike_sigmas: Some(6.0),
                loss_window: 20,
                checkpoint_age_s: Some(30.0),
                data_wait_fraction: Some(0.8),
            }
        );
    }

    #[test]
    fn mistakes_name_the_field() {
        let err = TrainConfig::from_json(Some(&json!({"learning_rate": 0.1}))).unwrap_err();
        assert!(
            err.starts_with("manifest.config.learning_rate: unknown setting"),
            "{err}"
        );
        let err = TrainConfig::from_json(Some(&json!({"max_step": 10}))).unwrap_err();
        assert!(err.contains("did you mean `max_steps`"), "{err}");
        let err = TrainConfig::from_json(Some(&json!({"lr": -1}))).unwrap_err();
        assert_eq!(err, "manifest.config.lr: must be a number > 0, found -1");
        let err = TrainConfig::from_json(Some(&json!({"hidden": [65536, 65536]}))).unwrap_err();
        assert!(
            err.starts_with("manifest.config.hidden") && err.contains("268435456"),
            "{err}"
        );
        TrainConfig::from_json(Some(&json!({"hidden": [16384, 16384]}))).unwrap();
        let err = TrainConfig::from_json(Some(&json!({"global_batch": 100_000_000}))).unwrap_err();
        assert!(err.contains("limit of 16777216"), "{err}");
        let err = TrainConfig::from_json(Some(&json!({"hidden": [0]}))).unwrap_err();
        assert!(err.starts_with("manifest.config.hidden"), "{err}");
        let err = TrainConfig::from_json(Some(&json!({"missing_indicator": false}))).unwrap_err();
        assert!(err.contains("did you mean `missing_indicators`"), "{err}");
        let err = TrainConfig::from_json(Some(&json!({"missing_indicators": "no"}))).unwrap_err();
        assert_eq!(
            err,
            "manifest.config.missing_indicators: must be true or false, found \"no\""
        );
        let err =
            TrainConfig::from_json(Some(&json!({"alerts": {"loss_spike_sigma": 3}}))).unwrap_err();
        assert!(
            err.starts_with("manifest.config.alerts.loss_spike_sigma: unknown setting")
                && err.contains("did you mean `loss_spike_sigmas`"),
            "{err}"
        );
        let err = TrainConfig::from_json(Some(&json!({"alerts": {"throughput_fraction": 1.5}})))
            .unwrap_err();
        assert_eq!(
            err,
            "manifest.config.alerts.throughput_fraction: must be a number in (0, 1) or null (off), found 1.5"
        );
        let err = TrainConfig::from_json(Some(&json!({"alerts": {"loss_window": 1}}))).unwrap_err();
        assert!(
            err.starts_with("manifest.config.alerts.loss_window"),
            "{err}"
        );
        let err = TrainConfig::from_json(Some(&json!({"alerts": [1]}))).unwrap_err();
        assert!(
            err.starts_with("manifest.config.alerts: must be an object"),
            "{err}"
        );
        let err = TrainConfig::from_json(Some(&json!({"patient": 5}))).unwrap_err();
        assert!(err.contains("did you mean `patience`"), "{err}");
        let err = TrainConfig::from_json(Some(&json!({"patience": -1}))).unwrap_err();
        assert_eq!(
            err,
            "manifest.config.patience: must be an integer >= 0, found -1"
        );
        let err = TrainConfig::from_json(Some(&json!({"keep_best": false}))).unwrap_err();
        assert!(
            err.starts_with("manifest.config.keep_best: early stopping")
                && err.contains("patience: 0"),
            "{err}"
        );
        let err = TrainConfig::from_json(Some(&json!({"keep_best": 1}))).unwrap_err();
        assert_eq!(
            err,
            "manifest.config.keep_best: must be true or false, found 1"
        );
        let err = TrainConfig::from_json(Some(&json!({"model": "gbdt"}))).unwrap_err();
        assert_eq!(err, "manifest.config.model: only \"mlp\" is supported");
    }
}
