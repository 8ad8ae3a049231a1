//! A training run's curves, read back from the `metrics.jsonl` that `train` writes: one line per
//! log window (`step`, `loss`, `samples_per_s`, ...), a `val` object on the lines where the
//! validation split was scored, `ckpt_blocking_s` (and with blocking saves `ckpt_s`) where a
//! checkpoint was taken, and `alert` lines.

use std::path::{Path, PathBuf};

use runfn_core::InputError;
use serde_json::Value;

/// One log window of the training loop.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPoint {
    pub step: u64,
    /// None where the loss was not finite (train writes it as null, and stops there).
    pub loss: Option<f64>,
    pub lr: Option<f64>,
    pub samples_per_s: Option<f64>,
    pub data_wait_fraction: Option<f64>,
    pub step_time_s: Option<f64>,
    /// Seconds of training (the sum of the windows' step times) since the last checkpoint, at
    /// the end of this window: the "time since the last good checkpoint" a dashboard shows.
    pub since_checkpoint_s: f64,
}

/// A scoring of the validation split.
#[derive(Debug, Clone, PartialEq)]
pub struct ValPoint {
    pub step: u64,
    pub auc: Option<f64>,
    pub logloss: Option<f64>,
}

/// The curves of one training run (one seed).
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// How plots and TensorBoard name the run: `seed 7`, or the file when there is no seed.
    pub label: String,
    pub seed: Option<u64>,
    pub metrics: PathBuf,
    pub steps: Vec<StepPoint>,
    pub val: Vec<ValPoint>,
    /// The `alert` objects, each with the step it was raised at.
    pub alerts: Vec<Value>,
    /// Steps where a checkpoint was taken, with the seconds it cost there: the write of a
    /// blocking save, the loop's hold (copy and wait) of a background one.
    pub checkpoints: Vec<(u64, f64)>,
}

impl Curve {
    /// Reads `metrics`. A line that is not a JSON object, or a step line without a numeric
    /// `step` and a `loss`, is an input error naming the file and line: a truncated last line (a
    /// run killed mid-write) is the one exception, skipped, since the loop may have died there.
    pub fn read(metrics: &Path, seed: Option<u64>) -> Result<Curve, InputError> {
        let text = std::fs::read_to_string(metrics).map_err(|source| InputError::Io {
            path: metrics.to_path_buf(),
            source,
        })?;
        let mut curve = Curve {
            label: seed.map_or_else(|| metrics.display().to_string(), |s| format!("seed {s}")),
            seed,
            metrics: metrics.to_path_buf(),
            steps: Vec::new(),
            val: Vec::new(),
            alerts: Vec::new(),
            checkpoints: Vec::new(),
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut since_checkpoint_s = 0.0;
        for (index, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let last_unterminated = index + 1 == lines.len() && !text.ends_with('\n');
            let at = || format!("{}: line {}", metrics.display(), index + 1);
            let value: Value = match serde_json::from_str(line) {
                Ok(value) => value,
                Err(_) if last_unterminated => break,
                Err(err) => return Err(InputError::field(at(), format!("not valid JSON: {err}"))),
            };
            let Value::Object(fields) = &value else {
                return Err(InputError::field(at(), "must be a JSON object"));
            };
            if let Some(alert) = fields.get("alert") {
                let mut alert = alert.clone();
                if let (Value::Object(a), Some(step)) = (&mut alert, fields.get("step")) {
                    a.entry("step").or_insert(step.clone());
                }
                curve.alerts.push(alert);
                continue;
            }
            let step = fields.get("step").and_then(Value::as_u64);
            let loss = fields.get("loss").and_then(Value::as_f64);
            let number = |key: &str| fields.get(key).and_then(Value::as_f64);
            let ckpt_s = number("ckpt_s").or_else(|| number("ckpt_blocking_s"));
            // A checkpoint taken between logged steps (the save of a preempted run, on SIGTERM)
            // has a line of its own with no loss: a checkpoint, not a point of the curve.
            if let (Some(step), None, Some(ckpt_s)) = (step, fields.get("loss"), ckpt_s) {
                since_checkpoint_s = 0.0;
                curve.checkpoints.push((step, ckpt_s));
                continue;
            }
            let (Some(step), true) = (
                step,
                loss.is_some() || fields.get("loss") == Some(&Value::Null),
            ) else {
                return Err(InputError::field(
                    at(),
                    "a step line needs a non-negative integer `step` and a `loss` (a number, or null where it was not finite)",
                ));
            };
            since_checkpoint_s += number("step_time_s").unwrap_or(0.0) * window_steps(&curve, step);
            // A blocking save's line has its write time (`ckpt_s`); a background one's only the
            // time the loop was held (`ckpt_blocking_s`), the write finishing later.
            if let Some(ckpt_s) = ckpt_s {
                curve.checkpoints.push((step, ckpt_s));
                since_checkpoint_s = 0.0;
            }
            curve.steps.push(StepPoint {
                step,
                loss,
                lr: number("lr"),
                samples_per_s: number("samples_per_s"),
                data_wait_fraction: number("data_wait_fraction"),
                step_time_s: number("step_time_s"),
                since_checkpoint_s,
            });
            if let Some(val) = fields.get("val").and_then(Value::as_object) {
                curve.val.push(ValPoint {
                    step,
                    auc: val.get("auc").and_then(Value::as_f64),
                    logloss: val.get("logloss").and_then(Value::as_f64),
                });
            }
        }
        Ok(curve)
    }
}

/// Steps in the window that ends at `step` (`step_time_s` is a mean over the window).
fn window_steps(curve: &Curve, step: u64) -> f64 {
    let previous = curve.steps.last().map_or(0, |p| p.step);
    step.saturating_sub(previous).max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve_of(text: &str) -> Result<Curve, InputError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        std::fs::write(&path, text).unwrap();
        Curve::read(&path, Some(7))
    }

    #[test]
    fn reads_steps_val_checkpoints_and_alerts() {
        let curve = curve_of(concat!(
            "{\"step\":10,\"loss\":0.6,\"step_time_s\":0.5,\"samples_per_s\":100.0}\n",
            "{\"step\":20,\"loss\":0.5,\"step_time_s\":0.5,\"val\":{\"auc\":0.8,\"logloss\":0.4},\"ckpt_s\":0.1}\n",
            "{\"step\":20,\"alert\":{\"kind\":\"loss_spike\",\"value\":3.0}}\n",
            "{\"step\":30,\"loss\":0.4,\"step_time_s\":0.25}\n",
            "{\"step\":40,\"loss\":0.3,\"step_time_s\":0.25,\"ckpt_blocking_s\":0.002}\n",
        ))
        .unwrap();
        assert_eq!(curve.label, "seed 7");
        assert_eq!(curve.steps.len(), 4);
        assert_eq!(
            curve.val,
            [ValPoint {
                step: 20,
                auc: Some(0.8),
                logloss: Some(0.4)
            }]
        );
        assert_eq!(
            curve.checkpoints,
            [(20, 0.1), (40, 0.002)],
            "blocking and background saves"
        );
        assert_eq!(curve.alerts[0]["step"], 20);
        // 10 steps of 0.5 s before the checkpoint, then 10 of 0.25 s after it.
        assert_eq!(curve.steps[0].since_checkpoint_s, 5.0);
        assert_eq!(curve.steps[1].since_checkpoint_s, 0.0);
        assert_eq!(curve.steps[2].since_checkpoint_s, 2.5);
        assert_eq!(curve.steps[3].since_checkpoint_s, 0.0);
    }

    #[test]
    fn a_truncated_last_line_is_skipped_and_a_bad_middle_line_is_named() {
        let curve = curve_of("{\"step\":10,\"loss\":0.6}\n{\"step\":20,\"lo").unwrap();
        assert_eq!(curve.steps.len(), 1);
        let err = curve_of("{\"step\":10,\"loss\":0.6}\nnot json\n{\"step\":20,\"loss\":0.5}\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("metrics.jsonl: line 2: not valid JSON"),
            "{err}"
        );
        let err = curve_of("{\"step\":\"ten\",\"loss\":0.6}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1: a step line needs"), "{err}");
    }
}
